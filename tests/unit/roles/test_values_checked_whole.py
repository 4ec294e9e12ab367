"""Names and quantities checked by a pattern are checked whole: a trailing newline is refused.

Python's ``$`` matches before a final newline: ``re.match(r"^[a-z.]+$", "poweraware.io\\n")``
accepts the value, and so does Ansible's ``is match('^...$')`` test. The newline then reaches an
annotation key, a rule name, an image reference or the API server, which refuses it after the run
has changed other things. A YAML block scalar (``prefix: |``) gives exactly such a value. The
validators use ``fullmatch`` (Python) and ``is regex(..., match_type='fullmatch')`` (role
assertions); each case here differs from a valid value by the newline only, and goes through the
public function (or the role's own assertion) that the collection calls.
"""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.filter.power_models_errors import power_models_errors
from ansible_collections.poweraware.k8s.plugins.module_utils import k8s_names, quantity
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import image
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import peaks, sched_config, tas_policy, yaml_edit

REPO = pathlib.Path(__file__).resolve().parents[3]


def _policy(name="power", namespace="default", metric="power", labels=("power=high",)):
    return {
        "apiVersion": "telemetry.intel.com/v1alpha1",
        "kind": "TASPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "strategies": {
                "labeling": {
                    "rules": [{"metricname": metric, "operator": "GreaterThan", "target": 70, "labels": list(labels)}]
                }
            }
        },
    }


@pytest.mark.parametrize(
    ("field", "policy"),
    [
        ("metadata.name", _policy(name="power\n")),
        ("metadata.namespace", _policy(namespace="default\n")),
        ("metricname", _policy(metric="power\n")),
        ("labels[0]", _policy(labels=("power=high\n",))),
        ("labels[0]", _policy(labels=("power\n=high",))),
    ],
)
def test_tas_policy_names_are_checked_whole(field, policy):
    assert tas_policy.validate_policy(_policy()) == []
    errors = tas_policy.validate_policy(policy)
    assert len(errors) == 1 and field in errors[0], errors


def test_scheduler_extender_verbs_and_resource_prefixes_are_checked_whole():
    good = [
        {
            "url_prefix": "https://tas.kube-system.svc:9001",
            "filter_verb": "scheduler/filter",
            "tls": {"ca_file": "/etc/kubernetes/pki/tas/ca.crt", "server_name": "tas.kube-system.svc"},
        }
    ]
    assert sched_config.normalize_extenders(copy.deepcopy(good))[1] == []
    bad = [{**good[0], "filter_verb": "scheduler/filter\n"}]
    assert sched_config.normalize_extenders(bad)[1] == [
        "extenders[0].filter_verb must be a URL path such as 'scheduler/filter', got 'scheduler/filter\\n'"
    ]
    bad_name = [{**good[0], "tls": {**good[0]["tls"], "server_name": "tas.kube-system.svc\n"}}]
    errors = sched_config.normalize_extenders(bad_name)[1]
    assert len(errors) == 1 and errors[0].startswith("extenders[0].tls.server_name 'tas.kube-system.svc\\n' is not")
    assert k8s_names.extended_resource_name_problems("poweraware.io/power") == []
    assert k8s_names.extended_resource_name_problems("poweraware.io\n/power") == [
        "its prefix part 'poweraware.io\\n' is not a lower-case DNS subdomain of at most 253 characters"
    ]
    assert k8s_names.extended_resource_name_problems("poweraware.io/power\n") != []
    assert sched_config.is_cluster_dns_name("tas.kube-system.svc")
    assert not sched_config.is_cluster_dns_name("tas.kube-system.svc\n")


def test_image_tags_digests_and_quantities_are_checked_whole():
    assert image.reference_errors("registry.k8s.io/kube-state-metrics", "v2.13.0", "", "ksm") == []
    assert len(image.reference_errors("registry.k8s.io/kube-state-metrics", "v2.13.0\n", "", "ksm")) == 1
    digest = "sha256:" + "0" * 64
    assert image.reference_errors("registry.k8s.io/kube-state-metrics", "v2.13.0", digest, "ksm") == []
    assert len(image.reference_errors("registry.k8s.io/kube-state-metrics", "v2.13.0", digest + "\n", "ksm")) == 1
    assert quantity.parse_cpu_quantity("500m") == 500
    with pytest.raises(quantity.QuantityError, match="is not a Kubernetes CPU quantity"):
        quantity.parse_cpu_quantity("500m\n")


def test_peaks_load_watcher_address_is_checked_whole():
    def address_errors(address):
        return [e for e in peaks.plan({"data": {}}, "k", "peaks", address)["errors"] if "load-watcher" in e]

    assert address_errors("http://load-watcher.kube-system.svc:2020") == []
    assert len(address_errors("http://load-watcher.kube-system.svc:2020\n")) == 1


def test_yaml_edit_quotes_a_value_with_a_trailing_newline():
    # Written plain, "v1.36.3\n" would read back as "v1.36.3": the scalar must keep its newline.
    text = yaml_edit.scalar("v1.36.3\n")
    assert yaml.safe_load(f"key: {text}\n")["key"] == "v1.36.3\n"
    assert yaml_edit.scalar("v1.36.3") == "v1.36.3"
    for value in ("it's\n", "tab\there", "bell\a", "caf\u00e9\n"):
        assert yaml.safe_load(f"key: {yaml_edit.scalar(value)}\n")["key"] == value, value
    assert yaml_edit.scalar("it's") == "'it''s'"  # printable: single quotes, as before


# The roles' own assertions, rendered by Ansible's Templar as a run would.
def _tasks(tasks: list[dict]) -> list[dict]:
    """Every task, those inside blocks too (a role's deploy tasks sit in a block beside its removal)."""
    found = []
    for task in tasks:
        found.append(task)
        found += _tasks(task.get("block") or [])
    return found


def _assertion(role: str, task_name: str) -> list[str]:
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "main.yml").read_text("utf-8"))
    (task,) = [t for t in _tasks(tasks) if t.get("name") == task_name]
    return task["ansible.builtin.assert"]["that"]


def _holds(conditions: list[str], variables: dict) -> bool:
    templar = Templar(loader=DataLoader(), variables=variables)
    return all(templar.evaluate_conditional(trust_as_template(c)) for c in conditions)


POWER_MODELS = {
    "power_models_source": "file",
    "power_models_prometheus_url": "",
    "power_models_samples_file": "/srv/samples.json",
    "power_models_min_samples": 3,
    "power_models_min_util_span": 20,
    "power_models_max_rmse_percent": 10,
    "power_models_reference_pod_cpu": "500m",
    "power_models_annotation_prefix": "poweraware.io",
    "power_models_rule_metric": "node:power_model:watts",
    "power_models_rule_util_metric": "instance:node_cpu:ratio",
}


def test_power_models_settings_accept_valid_values():
    that = _assertion("power_models", "Check the settings")
    assert _holds(that, POWER_MODELS)
    assert power_models_errors(POWER_MODELS) == []
    for prefix in ("power-aware.example.com", "a" * 253):  # a DNS subdomain may be 253 characters long
        assert power_models_errors({**POWER_MODELS, "power_models_annotation_prefix": prefix}) == []


# The annotation prefix is checked in Python, by the filter the role's own task calls.
def test_the_role_checks_its_annotation_prefix_with_the_filter():
    tasks = yaml.safe_load((REPO / "roles" / "power_models" / "tasks" / "main.yml").read_text("utf-8"))
    (task,) = [t for t in _tasks(tasks) if t.get("name") == "Check the annotation prefix"]
    call = "{'power_models_annotation_prefix': power_models_annotation_prefix} | poweraware.k8s.power_models_errors"
    assert call in task["vars"]["_power_models_problems"]
    assert task["ansible.builtin.assert"]["that"] == "_power_models_problems | length == 0"


@pytest.mark.parametrize(
    "value",
    [
        "poweraware.io\n",
        "poweraware..io",  # an empty label: not a DNS subdomain
        "power-.io",  # a label may not end with '-'
        "a" * 254,  # longer than a DNS subdomain may be
    ],
)
def test_power_models_annotation_prefix_refuses_a_value_that_only_starts_right(value):
    problems = power_models_errors({**POWER_MODELS, "power_models_annotation_prefix": value})
    assert len(problems) == 1 and problems[0].startswith(f"power_models_annotation_prefix={value!r}: "), problems


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("power_models_reference_pod_cpu", "500m\n"),
        ("power_models_rule_metric", "node:power_model:watts\n"),
        ("power_models_rule_util_metric", "instance:node_cpu:ratio\n"),
    ],
)
def test_power_models_settings_refuse_a_value_that_only_starts_right(name, value):
    assert not _holds(_assertion("power_models", "Check the settings"), {**POWER_MODELS, name: value})


def test_power_demo_stress_timeout_is_checked_whole():
    tasks = yaml.safe_load((REPO / "roles" / "power_demo" / "tasks" / "main.yml").read_text("utf-8"))
    text = next(str(v) for t in tasks for v in t.values() if "power_demo_stress_timeout | string is regex(" in str(v))
    start = text.index("power_demo_stress_timeout | string is regex(")
    condition = text[start : text.index(")", text.index("match_type", start)) + 1]
    for value, ok in (("300s", True), ("0", True), ("300s\n", False), ("5 m", False)):
        assert _holds([condition], {"power_demo_stress_timeout": value}) is ok, repr(value)
