"""Several TAS policies per run (tas_policy_policies) and the power policy's first-class parameters.

A policy copied from TAS's README names its metric ``node_metric``; with the collection's adapter
naming (``node_`` stripped) that metric is served as ``metric``, so the README policy is refused
with that exact renaming, and the renamed policy is accepted as written otherwise.
"""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors import tas_policy_errors
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_moved import tas_policy_moved
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_permissions import tas_policy_node_permissions
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_objects import tas_policy_objects
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import (
    MANAGED_LABELS,
    node_labeling_strategies,
)
from poweraware_testing import TAS_README_POLICY as README_POLICY

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "tas_policy"

POWER = {
    "apiVersion": "telemetry.intel.com/v1alpha1",
    "kind": "TASPolicy",
    "metadata": {"name": "power-sensitive-scheduling-policy", "namespace": "default"},
    "spec": {
        "strategies": {"scheduleonmetric": {"rules": [{"metricname": "package_power_avg", "operator": "LessThan"}]}}
    },
}


def renamed(policy: dict, old: str, new: str) -> dict:
    out = copy.deepcopy(policy)
    for strategy in out["spec"]["strategies"].values():
        for rule in strategy["rules"]:
            rule["metricname"] = rule["metricname"].replace(old, new)
    return out


def test_a_readme_policy_is_refused_with_the_exact_renaming():
    objects = tas_policy_objects(POWER, [README_POLICY], "default")
    errors = tas_policy_errors(objects)
    assert len(errors) == 4, errors  # one per rule, all at once, each naming its policy
    for strategy in ("deschedule", "dontschedule", "scheduleonmetric", "labeling"):
        assert (
            f"TASPolicy health-metric-demo/scheduling-policy: spec.strategies.{strategy}.rules[0].metricname "
            "'node_metric' is a Prometheus series name: the Prometheus Adapter strips 'node_', so "
            "custom.metrics.k8s.io serves it as 'metric'; use that name"
        ) in errors
    # applied with the renaming the message gives, the README policy is otherwise taken as written
    fixed = tas_policy_objects(POWER, [renamed(README_POLICY, "node_metric", "metric")], "default")
    assert tas_policy_errors(fixed) == []
    assert fixed[1]["spec"] == renamed(README_POLICY, "node_metric", "metric")["spec"]
    assert fixed[1]["metadata"]["namespace"] == "health-metric-demo"
    assert node_labeling_strategies(fixed[1]) == ["deschedule", "labeling"]


def test_short_form_default_namespace_labels_and_targets_from_extra_vars():
    short = {"name": "gpu-policy", "strategies": {"dontschedule": {"logicalOperator": "allOf", "rules": [
        {"metricname": "gpu_temp", "operator": "GreaterThan", "target": "90"},
        {"metricname": "package_power_avg", "operator": "GreaterThan", "target": 70},
    ]}}}  # fmt: skip
    power, policy = tas_policy_objects(POWER, [short], "power-demo")
    assert power["metadata"]["name"] == "power-sensitive-scheduling-policy"
    assert policy["metadata"] == {"name": "gpu-policy", "namespace": "power-demo", "labels": MANAGED_LABELS}
    assert policy["spec"]["strategies"]["dontschedule"]["rules"][0]["target"] == 90  # "90" from -e
    assert tas_policy_errors([power, policy]) == []
    assert short["strategies"]["dontschedule"]["rules"][0]["target"] == "90", "the input was modified"


def test_shape_problems_are_refused_all_at_once():
    dup = {"name": "power-sensitive-scheduling-policy", "namespace": "default", "strategies": {}}
    bad = [
        "scheduling-policy",
        {"name": "x", "strategies": {}, "rules": []},
        dup,
    ]
    with pytest.raises(AnsibleFilterError) as raised:
        tas_policy_objects(POWER, bad, "default")
    message = str(raised.value)
    assert message.startswith("Nothing was changed: ")
    assert (
        "tas_policy_policies[0] must be a TASPolicy (apiVersion, kind, metadata, spec) or "
        "{name, namespace, strategies}, got str" in message
    )
    assert "tas_policy_policies[1] has unknown keys 'rules'" in message
    assert (
        "TASPolicy default/power-sensitive-scheduling-policy is given twice (the role's own policy (tas_policy_name) "
        "and tas_policy_policies[2])"
    ) in message
    with pytest.raises(AnsibleFilterError, match="tas_policy_policies must be a list of TASPolicies, got mapping"):
        tas_policy_objects(POWER, {"name": "x"}, "default")


def test_content_problems_name_their_policy():
    wrong = {"name": "other", "strategies": {"dontschedule": {"logicalOperator": "oneOf", "rules": []}}}
    errors = tas_policy_errors(tas_policy_objects(POWER, [wrong], "default"))
    assert errors and all(e.startswith("TASPolicy default/other: ") for e in errors), errors
    assert any("logicalOperator" in e and "'oneOf'" in e for e in errors), errors


def render_power_policy(**overrides) -> dict:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # role defaults are templates to Ansible (tas_policy_namespace's follows the power demo)
    variables = {key: trust_as_template(v) if isinstance(v, str) else v for key, v in defaults.items()}
    variables.update({"tas_namespace": "telemetry-aware-scheduling"}, **overrides)
    template = (ROLE / "templates" / "taspolicy.yml.j2").read_text()
    return yaml.safe_load(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template)))


def test_first_class_parameters_for_all_four_strategies():
    temp = {"metricname": "cpu_temp", "operator": "GreaterThan", "target": 95}
    label = {"metricname": "package_power_avg", "operator": "GreaterThan", "target": 50, "labels": ["power=high"]}
    policy = render_power_policy(
        tas_policy_dontschedule_extra_rules=[temp],
        tas_policy_dontschedule_logical_operator="anyOf",
        tas_policy_deschedule_enabled="true",
        tas_policy_deschedule_extra_rules=[temp],
        tas_policy_deschedule_logical_operator="allOf",
        tas_policy_labeling_rules=[label],
        tas_policy_labeling_logical_operator="anyOf",
    )
    strategies = policy["spec"]["strategies"]
    assert set(strategies) == {"dontschedule", "scheduleonmetric", "deschedule", "labeling"}
    power_rule = {"metricname": "package_power_avg", "operator": "GreaterThan", "target": 60}
    assert strategies["dontschedule"] == {"logicalOperator": "anyOf", "rules": [power_rule, temp]}
    assert strategies["deschedule"] == {"logicalOperator": "allOf", "rules": [dict(power_rule, target=80), temp]}
    assert strategies["labeling"] == {"logicalOperator": "anyOf", "rules": [label]}
    assert tas_policy_errors(tas_policy_objects(policy, [], "default")) == []
    # the defaults: no logicalOperator (TAS's own default), no labeling
    default = render_power_policy()["spec"]["strategies"]
    assert set(default) == {"dontschedule", "scheduleonmetric"} and "logicalOperator" not in default["dontschedule"]


def node(name: str, **labels) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def test_the_labels_tas_holds_for_removed_policies():
    """What the role waits for TAS to remove (its Cleanup) before withdrawing the node permission."""
    from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labels import tas_policy_node_labels

    readme = tas_policy_objects(None, [renamed(README_POLICY, "node_metric", "metric")], "default")
    power = tas_policy_objects(POWER, [], "default")  # scheduleonmetric only now
    nodes = [
        node("a", **{"scheduling-policy": "violating", "telemetry.aware.scheduling.scheduling-policy/label1": "foo"}),
        node("b", **{"scheduling-policy": "ok", "telemetry.aware.scheduling.other-policy/label1": "foo"}),
        node("c", **{"power-sensitive-scheduling-policy": "violating"}),
    ]
    assert tas_policy_node_labels(nodes, readme) == [
        {"node": "a", "label": "scheduling-policy=violating"},
        {"node": "a", "label": "telemetry.aware.scheduling.scheduling-policy/label1=foo"},
    ]
    # a removed policy is looked for under both forms, whatever its strategies are now
    assert tas_policy_node_labels(nodes, power) == [
        {"node": "c", "label": "power-sensitive-scheduling-policy=violating"}
    ]
    assert tas_policy_node_labels([], readme) == []
    with pytest.raises(AnsibleFilterError, match="must be a list of Nodes"):
        tas_policy_node_labels({"items": nodes}, readme)


# --- a policy whose namespace changed (tas_policy_moved) ----------------------------------------------
def _found(namespace: str, name: str = "power-sensitive-scheduling-policy", labels=None) -> dict:
    return {
        "apiVersion": "telemetry.intel.com/v1alpha1",
        "kind": "TASPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_LABELS) if labels is None else labels,
            "resourceVersion": "42",
        },
        "spec": {
            "strategies": {"deschedule": {"rules": [{"metricname": "m", "operator": "GreaterThan", "target": 1}]}}
        },
    }


def test_a_policy_of_ours_left_in_its_old_namespace_is_found_and_nothing_else():
    power = copy.deepcopy(POWER)
    power["metadata"]["namespace"] = "power-demo"
    (desired,) = tas_policy_objects(power, [], "power-demo")
    found = [
        _found("default"),  # ours, moved to power-demo: found
        _found("power-demo"),  # ours where it belongs
        _found("team-a", labels={"app.kubernetes.io/name": "telemetry-aware-scheduling"}),  # not managed by us
        _found("team-b", labels={}),  # a user's of the same name
        _found("default", name="another-policy"),  # ours, of a name this run does not give: absent's to remove
    ]
    moved = tas_policy_moved(found, [desired])
    assert moved == [
        {
            "apiVersion": "telemetry.intel.com/v1alpha1",
            "kind": "TASPolicy",
            "metadata": {"name": "power-sensitive-scheduling-policy", "namespace": "default"},
            "spec": found[0]["spec"],
        }
    ]
    # its node-labelling permission goes with it (the RBAC name carries the old namespace)
    withdraw = tas_policy_node_permissions(moved, "absent")["withdraw"]
    assert [w["metadata"]["name"] for w in withdraw] == [
        "poweraware:tas-policy:default:power-sensitive-scheduling-policy"
    ] * 2
    # a policy of that name kept in both namespaces by this run (tas_policy_policies) is not moved
    both = tas_policy_objects(copy.deepcopy(power), [copy.deepcopy(POWER)], "power-demo")
    assert tas_policy_moved(found, both) == []
    assert tas_policy_moved([], [desired]) == []


@pytest.mark.parametrize(
    ("found", "desired", "message"),
    [
        ("not a list", [], "the input must be the TASPolicy objects read from the cluster"),
        ([{"metadata": {"name": "x"}}], [], "the input must be the TASPolicy objects read from the cluster"),
        ([], [{"spec": {}}], "desired must be the list of TASPolicy objects"),
    ],
)
def test_tas_policy_moved_refuses_what_is_not_its_input(found, desired, message):
    with pytest.raises(AnsibleFilterError, match=message):
        tas_policy_moved(found, desired)


def test_the_power_policy_follows_the_power_demo_into_its_namespace():
    """tas_policy_namespace's default: default, or the TAS power demo's power-demo while the demo is on
    (a string from -e as well); a namespace given wins."""
    assert render_power_policy()["metadata"]["namespace"] == "default"
    assert render_power_policy(poweraware_enable_power_demo="false")["metadata"]["namespace"] == "default"
    for on in (True, "true", "yes"):
        assert render_power_policy(poweraware_enable_power_demo=on)["metadata"]["namespace"] == "power-demo"
    given = render_power_policy(poweraware_enable_power_demo=True, tas_policy_namespace="team-a")
    assert given["metadata"]["namespace"] == "team-a"
