"""The pod_power_objects, pod_power_removal, pod_power_tokens and pod_power_agent_config filter plugins checked
directly, without Ansible subprocesses: input checks, arguments passed on to the library (a recorder stands in
for it), errors turned into AnsibleFilterError; then the filters end to end on the role's own defaults, as the
role calls them.
"""

from __future__ import annotations

import base64
import pathlib

import ansible_collections.poweraware.k8s.plugins.filter.pod_power_objects as f_pod
import pytest
from poweraware_testing import raises, role_defaults

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "pod_power"
DEFAULTS = role_defaults(ROLE / "defaults" / "main.yml")
HOST = {"host": "w3", "node": "w3", "labels": {}, "cpu_power_pools": [], "cpu_power_shared_profile": None}
KUBELET = {
    "path": "/var/lib/kubelet/config.yaml",
    "exists": True,
    "content": "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n",
}
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster: {server: "https://10.0.0.10:6443", certificate-authority-data: Q0E=}
contexts:
- name: system:node:w3@kubernetes
  context: {cluster: kubernetes, user: "system:node:w3"}
current-context: system:node:w3@kubernetes
"""


def test_pod_power_objects_passes_everything_on(stub):
    plan = stub(f_pod, "plan")
    assert f_pod.pod_power_objects([HOST]) == "result"
    assert f_pod.pod_power_objects((HOST,), {"nodes": None}, {"p": {}}, [{"name": "t"}], "ns") == "result"
    assert plan.calls == [
        (([HOST], {}, {}, [], "poweraware-pod-power"), {}),
        (([HOST], {"nodes": []}, {"p": {}}, [{"name": "t"}], "ns"), {}),
    ]


def test_pod_power_removal_passes_everything_on(stub):
    removal = stub(f_pod, "removal")
    assert f_pod.pod_power_removal([HOST], {"power_nodes": [{"metadata": {"name": "w1"}}]}, "ns") == "result"
    assert removal.calls == [(([HOST], {"power_nodes": [{"metadata": {"name": "w1"}}]}, "ns"), {})]


@pytest.mark.parametrize("name", ["pod_power_objects", "pod_power_removal"])
@pytest.mark.parametrize(("hosts", "kind"), [("w3", "str"), ({"host": "w3"}, "dict"), (["w3"], "list")])
def test_hosts_must_be_a_list_of_mappings(name, hosts, kind):
    raises(
        lambda: getattr(f_pod, name)(hosts),
        f"{name}: the input must be the list of pod power hosts, each {{host, node, labels, cpu_power_pools, "
        f"cpu_power_shared_profile}}, not {kind}",
    )


@pytest.mark.parametrize("name", ["pod_power_objects", "pod_power_removal"])
def test_found_and_namespace_are_checked(name):
    raises(
        lambda: getattr(f_pod, name)([HOST], ["nodes"]),
        f"{name}: found must be the resources of a k8s_info_many result, not list",
    )
    raises(lambda: getattr(f_pod, name)([HOST], None, namespace=""), f"{name}: namespace must be a non-empty string")


def test_pod_power_tokens_passes_lists_on_and_checks_its_input(stub):
    tokens = stub(f_pod, "tokens")
    assert f_pod.pod_power_tokens({"w3": ({"data": {}},)}) == "result"
    assert tokens.calls == [(({"w3": [{"data": {}}]},), {})]
    message = (
        "pod_power_tokens: the input must be the resources of the k8s_info_many run of the token_queries "
        "pod_power_objects returns ({node: [Secret]})"
    )
    raises(lambda: f_pod.pod_power_tokens([]), message)
    raises(lambda: f_pod.pod_power_tokens({"w3": {"data": {}}}), message)


def test_pod_power_agent_config_parses_the_documents_and_passes_the_rest_on(stub):
    agent_config = stub(f_pod, "agent_config")
    assert f_pod.pod_power_agent_config(KUBELET, "w3", kubeconfig=KUBECONFIG, interval_s="2", resync_s=30) == "result"
    ((args, kwargs),) = agent_config.calls
    assert args == ("w3", {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}, "/var/lib/kubelet/config.yaml")
    assert kwargs["kubeconfig"]["clusters"][0]["cluster"]["server"] == "https://10.0.0.10:6443"
    assert (kwargs["interval_s"], kwargs["resync_s"]) == (2, 30)  # "2" from -e is 2
    # what is not given keeps agent_config's own default (not a second copy of it here)
    assert kwargs["api_server"] == "" and "config_dir" not in kwargs and "tolerance_mhz" not in kwargs
    # a given API server: the kubeconfig is not read; a missing kubelet configuration is None
    f_pod.pod_power_agent_config(
        {"exists": False, "content": None}, "w3", kubeconfig="{not yaml", api_server="https://a"
    )
    (args, kwargs) = agent_config.calls[1]
    assert args[1] is None and kwargs["kubeconfig"] is None and kwargs["api_server"] == "https://a"


def test_pod_power_agent_config_refuses_what_is_not_its_input():
    raises(
        lambda: f_pod.pod_power_agent_config("text", "w3"),
        "pod_power_agent_config: expected the kubelet_config result of cpu_power_info, got str",
    )
    raises(lambda: f_pod.pod_power_agent_config(KUBELET, ""), "pod_power_agent_config: node must be the node's name")
    with pytest.raises(Exception, match="the kubelet's kubeconfig /etc/kubernetes/kubelet.conf is not YAML"):
        f_pod.pod_power_agent_config(KUBELET, "w3", kubeconfig="a: [b")
    raises(
        lambda: f_pod.pod_power_agent_config(KUBELET, "w3", kubeconfig=["x"]),
        "pod_power_agent_config: the kubelet's kubeconfig /etc/kubernetes/kubelet.conf must be the file's text, "
        "not list",
    )


def test_the_role_defaults_build_the_objects_and_the_agent_configuration():
    """End to end, as the role calls the filters: its default profiles, one node, no earlier objects."""
    plan = f_pod.pod_power_objects(
        [HOST],
        found={"nodes": [{"metadata": {"name": "w3", "labels": {}}}]},
        profiles=DEFAULTS["pod_power_profiles"],
        time_of_day=DEFAULTS["pod_power_time_of_day"],
        namespace=DEFAULTS["pod_power_namespace"],
    )
    assert plan["errors"] == [] and plan["selected"] == {"w3": "w3"}
    profiles = {o["metadata"]["name"]: o["spec"] for o in plan["objects"] if o["kind"] == "PowerProfile"}
    assert profiles == DEFAULTS["pod_power_profiles"]
    assert not any(spec.get("shared") for spec in profiles.values()), "safe by default: no shared profile"
    config = f_pod.pod_power_agent_config(KUBELET, "w3", kubeconfig=KUBECONFIG)
    assert config["errors"] == []
    assert config["config"] == {
        "node": "w3",
        "api_server": "https://10.0.0.10:6443",
        "ca_file": "/etc/poweraware/pod-power/ca.crt",
        "token_file": "/etc/poweraware/pod-power/token",
        "sysfs_root": "/sys",
        "state_file": DEFAULTS["pod_power_state_file"],
        "kubelet_state": DEFAULTS["pod_power_kubelet_state"],
        "reserved_cpus": [0, 1],
        "tolerance_mhz": 100,
        "interval_s": 1,
        "resync_s": 60,
    }
    secret = {"data": {"token": base64.b64encode(b"jwt").decode(), "ca.crt": base64.b64encode(b"PEM").decode()}}
    assert f_pod.pod_power_tokens({"w3": [secret]}) == {"tokens": {"w3": {"token": "jwt", "ca": "PEM"}}, "waiting": []}
    assert plan["token_queries"] == {
        "w3": {"api_version": "v1", "kind": "Secret", "namespace": "poweraware-pod-power", "name": "pod-power-w3-token"}
    }
