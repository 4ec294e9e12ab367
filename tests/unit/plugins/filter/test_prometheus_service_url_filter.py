"""Where the power_models play reads the cluster stack's Prometheus: its Service by ClusterIP (the
prometheus_service_url filter over _prometheus.service_url), and the play's fallbacks are the
prometheus role's own defaults.

The prometheus_service_url filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import pathlib

import ansible_collections.poweraware.k8s.plugins.filter.prometheus_service_url as f_prom
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.prometheus_service_url import prometheus_service_url
from poweraware_testing import raises

ROOT = pathlib.Path(__file__).resolve().parents[4]


def service(ip="10.96.12.34", ports=({"name": "http", "port": 9090},)):
    return {"kind": "Service", "metadata": {"name": "prometheus"}, "spec": {"clusterIP": ip, "ports": list(ports)}}


@pytest.mark.parametrize(
    ("services", "url"),
    [
        ([service()], "http://10.96.12.34:9090"),
        ([service(ports=({"name": "web", "port": 80}, {"name": "http", "port": 9091}))], "http://10.96.12.34:9091"),
        ([service(ports=({"name": "web", "port": 8080},))], "http://10.96.12.34:8080"),  # its only port
        ([service(ip="fd00:10:96::a")], "http://[fd00:10:96::a]:9090"),
        ([service(ip="None")], ""),  # headless: no address a node reaches
        ([service(ports=())], ""),
        ([service(ports=({"name": "a", "port": 1}, {"name": "b", "port": 2}))], ""),  # which one? none
        ([], ""),
        ([service(ip="None"), service(ip="10.96.0.9")], "http://10.96.0.9:9090"),
    ],
)
def test_the_url_is_the_cluster_ip_at_the_http_port(services, url):
    assert prometheus_service_url(services) == url


@pytest.mark.parametrize("bad", ["http://x", {"spec": {}}, [1]])
def test_input_that_is_not_services_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match="list of Service objects"):
        prometheus_service_url(bad)


def test_the_plays_fallbacks_are_the_prometheus_roles_defaults():
    defaults = yaml.safe_load((ROOT / "roles/prometheus/defaults/main.yml").read_text())
    play = yaml.safe_load((ROOT / "playbooks/power_models.yml").read_text())[0]
    found = play["vars"]["_power_models_stack_service"]
    assert found == {
        "namespace": f"{{{{ prometheus_namespace | default('{defaults['prometheus_namespace']}') }}}}",
        "name": f"{{{{ prometheus_name | default('{defaults['prometheus_name']}') }}}}",
    }
    service_template = (ROOT / "roles/prometheus/templates/service.yml.j2").read_text()
    assert "- name: http\n" in service_template  # the port name the play asks for


def test_the_default_utilisation_query_reads_what_collectd_exports():
    """The power_models default reads the cpu plugin's series with the scrape job's node label, and
    the collectd role loads that plugin by default."""
    query = yaml.safe_load((ROOT / "roles/power_models/defaults/main.yml").read_text())["power_models_util_query"]
    assert 'collectd_cpu_percent{cpu="idle", node!=""}' in query and "by (node)" in query
    assert yaml.safe_load((ROOT / "roles/collectd/defaults/main.yml").read_text())["collectd_cpu_utilisation"] is True
    conf = (ROOT / "roles/collectd/templates/collectd.conf.j2").read_text()
    assert "LoadPlugin cpu" in conf and "ReportByCpu false" in conf and "ValuesPercentage true" in conf


def test_service_url_picks_the_http_port_by_default_and_skips_services_it_cannot_call():
    from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import prometheus as prom

    two_ports = service(ports=({"name": "web", "port": 80}, {"name": "http", "port": 9091}))
    assert prom.service_url([two_ports]) == "http://10.96.12.34:9091"
    no_cluster_ip = {"spec": {"type": "ExternalName", "ports": [{"name": "http", "port": 9090}]}}
    ambiguous = service(ip="10.96.0.8", ports=({"name": "a", "port": 1}, {"name": "b", "port": 2}))
    assert prom.service_url([no_cluster_ip, None, ambiguous, service(ip="10.96.0.9")]) == "http://10.96.0.9:9090"
    assert prom.service_url([no_cluster_ip]) == ""
    assert prom.service_url(None) == ""


SVC = {"kind": "Service", "metadata": {"name": "prometheus"}}


@pytest.mark.parametrize("bad", ["svc", b"svc", SVC, [SVC, 1], [None]])
def test_prometheus_service_url_wants_a_list_of_services(bad):
    raises(
        lambda: f_prom.prometheus_service_url(bad),
        "prometheus_service_url: the input must be a list of Service objects",
    )


@pytest.mark.parametrize("bad", ["", None, 9090])
def test_prometheus_service_url_wants_a_port_name(bad):
    raises(
        lambda: f_prom.prometheus_service_url([SVC], bad),
        f"prometheus_service_url: port_name must be a port name, got {bad!r}",
    )


def test_prometheus_service_url_passes_its_arguments_on(stub):
    url = stub(f_prom, "service_url")
    assert f_prom.prometheus_service_url((SVC,)) == "result"
    assert f_prom.prometheus_service_url(None, "web") == "result"
    assert url.calls == [(([SVC], "http"), {}), (([], "web"), {})]
