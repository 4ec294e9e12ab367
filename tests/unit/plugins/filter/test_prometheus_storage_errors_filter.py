"""The managed Prometheus' storage: the checks before anything is applied (every problem at once,
-e strings read as YAML values), and what the Deployment and the claim are given."""

from __future__ import annotations

import json
import pathlib

import jinja2
import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.filter.prometheus_storage_errors import prometheus_storage_errors
from poweraware_testing import role_defaults

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "prometheus"


@pytest.mark.parametrize(
    ("size", "retention", "retention_size"),
    [("4Gi", "24h", ""), (4294967296, "15d", "3GB"), ("500M", "1w2d", "1.5GiB"), ("10Gi", "90m", "0")],
)
def test_settings_prometheus_and_kubernetes_accept_pass(size, retention, retention_size):
    assert prometheus_storage_errors("persistentVolumeClaim", size, retention, retention_size) == []


def test_every_problem_is_named_at_once_with_its_fix():
    errors = prometheus_storage_errors("hostpath", "4 GB", "1h24d", "3G")
    assert len(errors) == 4, errors
    assert errors[0].startswith("prometheus_storage='hostpath' is not a storage kind: use emptyDir or")
    assert errors[1].startswith("prometheus_storage_size_limit='4 GB' is not a volume size (")
    assert "such as '4Gi'" in errors[1]
    assert errors[2].startswith("prometheus_retention='1h24d' is not a Prometheus duration: write units in the order")
    assert errors[3].startswith("prometheus_retention_size='3G' is not a Prometheus size")
    assert prometheus_storage_errors("emptyDir", "0", "0", "")[0].startswith("prometheus_storage_size_limit='0'")
    assert len(prometheus_storage_errors("emptyDir", True, "", None)) == 2  # a boolean is no size, "" no duration


def render(**overrides):
    defaults = role_defaults(ROLE / "defaults" / "main.yml")
    values = {
        **defaults,
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        "_prometheus_image_reference": "quay.io/prometheus/prometheus:v3.16.0",
        "_prometheus_reloader_image_reference": "quay.io/prometheus-operator/prometheus-config-reloader:v0.92.0",
        "_prometheus_image_pull_secrets": [],
        **overrides,
    }
    loader = jinja2.FileSystemLoader(ROLE / "templates")
    env = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701 - YAML
    env.filters["to_json"] = json.dumps
    return {
        name: list(yaml.safe_load_all(env.get_template(name).render(values)))
        for name in ("deployment.yml.j2", "storage.yml.j2")
    }


def test_the_default_keeps_an_empty_dir_and_a_claim_replaces_it_by_name():
    default = render()["deployment.yml.j2"][0]["spec"]["template"]["spec"]
    data = {v["name"]: v for v in default["volumes"]}["data"]
    assert data == {"name": "data", "emptyDir": {"sizeLimit": "4Gi"}}
    assert not any(a.startswith("--storage.tsdb.retention.size") for a in default["containers"][0]["args"])
    rendered = render(
        prometheus_storage="persistentVolumeClaim",
        prometheus_storage_class="local-storage",
        prometheus_storage_size_limit="8Gi",
        prometheus_retention_size="6GB",
    )
    spec = rendered["deployment.yml.j2"][0]["spec"]
    assert spec["strategy"] == {"type": "Recreate"}  # a ReadWriteOnce claim moves from the old pod to the new
    data = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}["data"]
    assert data == {"name": "data", "persistentVolumeClaim": {"claimName": "prometheus-data"}}
    assert "--storage.tsdb.retention.size=6GB" in spec["template"]["spec"]["containers"][0]["args"]
    [claim] = rendered["storage.yml.j2"]
    assert claim["metadata"]["name"] == "prometheus-data" and claim["metadata"]["namespace"] == "monitoring"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local-storage",
        "resources": {"requests": {"storage": "8Gi"}},
    }
    # no class named: the field stays unset, so the cluster's default class is chosen at creation
    [claim] = render(prometheus_storage="persistentVolumeClaim")["storage.yml.j2"]
    assert "storageClassName" not in claim["spec"]
