# ruff: noqa: E501 - exact, long messages
"""_tas_policy: bounds (int64, name and label lengths) and the exact message of each rule.

Oracles: the int64 range; Kubernetes names (DNS-1123 subdomain up to 253 characters, label values up
to 63, namespaces DNS-1123 labels) and label syntax (name and value up to 63 alphanumerics with
``-_.`` inside, value possibly empty).
"""

from __future__ import annotations

import copy

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import tas_policy as tp

POLICY = {
    "apiVersion": "telemetry.intel.com/v1alpha1",
    "kind": "TASPolicy",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {
        "strategies": {
            "dontschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": 60}]}
        }
    },
}
RULE = "spec.strategies.dontschedule.rules[0]"


def with_rule(**fields):
    policy = copy.deepcopy(POLICY)
    policy["spec"]["strategies"]["dontschedule"]["rules"][0].update(fields)
    return policy


def with_metadata(**metadata):
    return dict(POLICY, metadata=metadata)


def labeling_policy(labels):
    """A policy whose one strategy is labeling, with one rule carrying ``labels``."""
    rule = {"metricname": "m", "operator": "Equals", "target": 1, "labels": labels}
    return {
        "apiVersion": tp.API_VERSION,
        "kind": tp.KIND,
        "metadata": {"name": "p"},
        "spec": {"strategies": {"labeling": {"rules": [rule]}}},
    }


def test_constants():
    assert (tp.API_VERSION, tp.KIND) == ("telemetry.intel.com/v1alpha1", "TASPolicy")
    assert tp.STRATEGIES == ("scheduleonmetric", "dontschedule", "deschedule", "labeling")
    assert tp.OPERATORS == ("Equals", "LessThan", "GreaterThan")
    assert tp.LOGICAL_OPERATORS == ("allOf", "anyOf")
    assert (tp.INT64_MIN, tp.INT64_MAX) == (-(2**63), 2**63 - 1)


@pytest.mark.parametrize("target", [-(2**63), 2**63 - 1, 0, -1])
def test_int64_bounds_are_accepted(target):
    assert tp.validate_policy(with_rule(target=target)) == []


@pytest.mark.parametrize("target", [-(2**63) - 1, 2**63])
def test_beyond_int64_is_refused(target):
    assert tp.validate_policy(with_rule(target=target)) == [f"{RULE}.target {target} is outside the int64 range"]


def test_known_metrics_message_lists_them_sorted():
    assert tp.validate_policy(with_rule(metricname="x"), known_metrics=["b", "a"]) == [
        f"{RULE}.metricname 'x' is not served by the metrics adapter (known metrics: a, b)"
    ]


def test_stripped_prefix_is_the_one_given():
    assert tp.validate_policy(POLICY, stripped_prefix="package_") == [
        (
            f"{RULE}.metricname 'package_power_avg' is a Prometheus series name: the Prometheus Adapter "
            "strips 'package_', so custom.metrics.k8s.io serves it as 'power_avg'; use that name"
        )
    ]
    assert tp.validate_policy(with_rule(metricname="node_")) == []  # the bare prefix is not a series name


def test_labeling_labels():
    labels = [
        "k=v",
        "k=",
        "a" * 63 + "=b",
        "a.b-c_d=E.f-1",
        "=v",
        "a" * 64 + "=b",
        "k=" + "v" * 64,
        "k=-v",
        "k",
        "-k=v",
        5,
    ]
    policy = labeling_policy(labels)
    where = "spec.strategies.labeling.rules[0].labels"
    bad = "must be key=value with a valid Kubernetes label name and value"
    assert tp.validate_policy(policy) == [
        f"{where}[4] '=v' {bad}",
        f"{where}[5] '{'a' * 64}=b' {bad}",
        f"{where}[6] 'k={'v' * 64}' {bad}",
        f"{where}[7] 'k=-v' {bad}",
        f"{where}[8] 'k' {bad}",
        f"{where}[9] '-k=v' {bad}",
        f"{where}[10] must be a string, got integer",
    ]
    # other strategies only need strings
    assert tp.validate_policy(with_rule(labels=["not a label", ""])) == []
    del policy["spec"]["strategies"]["labeling"]["rules"][0]["labels"]
    assert tp.validate_policy(policy) == [
        "spec.strategies.labeling.rules[0].labels is required for the labeling strategy (a list of key=value strings)"
    ]


@pytest.mark.parametrize(
    ("metadata", "errors"),
    [
        ({"name": "a" * 63}, []),
        ({"name": "a.b-c"}, []),
        ({"name": "p", "namespace": None}, []),
        ({"name": "p", "namespace": "a" * 63}, []),
        (
            {"name": "p", "namespace": "a" * 64},
            [f"metadata.namespace '{'a' * 64}' is not a valid namespace name (DNS-1123 label)"],
        ),
        (
            {"name": "p", "namespace": "a.b"},
            ["metadata.namespace 'a.b' is not a valid namespace name (DNS-1123 label)"],
        ),
        ({"name": "p", "namespace": 5}, ["metadata.namespace 5 is not a valid namespace name (DNS-1123 label)"]),
        ({"name": 5}, ["metadata.name 5 is not a valid Kubernetes object name (DNS-1123 subdomain)"]),
        (
            {"name": "a" * 64},
            [
                (
                    f"metadata.name '{'a' * 64}' is longer than 63 characters: pods opt in with the label telemetry-policy=<name>, "
                    "and label values are at most 63 characters"
                )
            ],
        ),
        (
            {"name": "a" * 253},
            [
                (
                    f"metadata.name '{'a' * 253}' is longer than 63 characters: pods opt in with the label telemetry-policy=<name>, "
                    "and label values are at most 63 characters"
                )
            ],
        ),
        (
            {"name": "a" * 254},
            [f"metadata.name '{'a' * 254}' is not a valid Kubernetes object name (DNS-1123 subdomain)"],
        ),
        ({}, ["metadata.name None is not a valid Kubernetes object name (DNS-1123 subdomain)"]),
    ],
)
def test_metadata(metadata, errors):
    assert tp.validate_policy(with_metadata(**metadata)) == errors


def test_nulls_are_absent_values():
    spec = {
        "strategies": {
            "scheduleonmetric": {"rules": [{"metricname": "m", "operator": "LessThan", "target": None, "labels": None}]}
        }
    }
    assert tp.validate_spec(spec) == []


def test_structure_messages():
    assert tp.validate_spec({"strategies": {"dontschedule": {"rules": [5]}}}) == [
        "spec.strategies.dontschedule.rules[0] must be a mapping, got integer"
    ]
    assert tp.validate_spec({"strategies": {"dontschedule": {"rules": None}}}) == [
        "spec.strategies.dontschedule.rules is required (a non-empty list)"
    ]
    assert tp.validate_spec({"strategies": None}) == ["spec.strategies is required"]
    # every strategy is checked, in name order (numbers too)
    assert tp.validate_spec({"strategies": {"b": {}, 5: {"rules": []}}}) == [
        "spec.strategies.5: unknown strategy 5 (TAS implements scheduleonmetric, dontschedule, deschedule, labeling)",
        "spec.strategies.b: unknown strategy 'b' (TAS implements scheduleonmetric, dontschedule, deschedule, labeling)",
    ]
    assert (
        tp.validate_spec(
            {"strategies": {"dontschedule": {"rules": ({"metricname": "m", "operator": "Equals", "target": 1},)}}}
        )
        == []
    )
    assert tp.validate_policy("x") == ["a TASPolicy must be a mapping, got string"]
    assert tp.validate_policy({"apiVersion": tp.API_VERSION, "kind": tp.KIND, "metadata": {"name": "p"}}) == [
        "spec is required"
    ]


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),
        (1, "integer"),
        (1.5, "number"),
        ("s", "string"),
        ([], "list"),
        ((), "list"),
        ({}, "mapping"),
        (object(), "object"),
    ],
)
def test_type_names(value, name):
    assert tp._type_name(value) == name


def test_adapter_metric_name_prefixes():
    assert tp.adapter_metric_name("node_x", prefix="") == "node_x"
    assert tp.adapter_metric_name("px", prefix="p") == "x"
    assert tp.adapter_metric_name("p", prefix="p") == "p"
    for bad in (None, "", 5):
        with pytest.raises(ValueError) as exc:
            tp.adapter_metric_name(bad)
        assert str(exc.value) == f"series must be a non-empty string, got {bad!r}"


def test_normalize_policy_touches_only_whole_number_string_targets_in_rule_lists():
    policy = {
        "spec": {
            "strategies": {
                "a": {"rules": [{"target": " +7 "}, "x", {"target": 5}, {"target": "7.0"}, {"other": "1"}]},
                "b": 5,
                "c": {"rules": {"target": "1"}},
            }
        }
    }
    normalized = tp.normalize_policy(policy)
    assert normalized["spec"]["strategies"]["a"]["rules"] == [
        {"target": 7},
        "x",
        {"target": 5},
        {"target": "7.0"},
        {"other": "1"},
    ]
    assert normalized["spec"]["strategies"]["b"] == 5
    assert normalized["spec"]["strategies"]["c"] == {"rules": {"target": "1"}}
    assert policy["spec"]["strategies"]["a"]["rules"][0] == {"target": " +7 "}  # a copy
    assert tp.normalize_policy({"spec": None}) == {"spec": None}
    assert tp.normalize_policy({"spec": {"strategies": None}}) == {"spec": {"strategies": None}}


def test_every_label_is_checked_after_a_non_string_one():
    policy = labeling_policy([5, "k", "k=" + "v" * 63])
    assert tp.validate_policy(policy) == [
        "spec.strategies.labeling.rules[0].labels[0] must be a string, got integer",
        "spec.strategies.labeling.rules[0].labels[1] 'k' must be key=value with a valid Kubernetes label name and value",
    ]  # and a 63-character value is fine


def test_unknown_fields_of_any_type_are_reported_in_a_stable_order():
    assert tp.validate_policy(with_rule(zz=1)) == [
        f"{RULE} has unknown field 'zz' (allowed: metricname, operator, target, labels)"
    ]
    policy = with_rule()
    policy["spec"]["strategies"]["dontschedule"]["rules"][0].update({1: "x", "b": "y"})
    policy["spec"]["strategies"]["dontschedule"].update({2: "x", "a": "y"})
    assert tp.validate_policy(policy) == [
        "spec.strategies.dontschedule has unknown field 2 (allowed: policyName, logicalOperator, rules)",
        "spec.strategies.dontschedule has unknown field 'a' (allowed: policyName, logicalOperator, rules)",
        f"{RULE} has unknown field 1 (allowed: metricname, operator, target, labels)",
        f"{RULE} has unknown field 'b' (allowed: metricname, operator, target, labels)",
    ]


def test_normalize_goes_on_after_a_strategy_without_a_rule_list():
    policy = {"spec": {"strategies": {"x": {"rules": None}, "y": "odd", "z": {"rules": [{"target": "3"}]}}}}
    assert tp.normalize_policy(policy)["spec"]["strategies"]["z"]["rules"] == [{"target": 3}]


def test_validate_spec_defaults_to_the_node_prefix_and_sorts_unknown_keys_of_any_type():
    spec = {"strategies": {"dontschedule": {"rules": [{"metricname": "node_x", "operator": "Equals", "target": 1}]}}}
    assert tp.validate_spec(spec) == [
        "spec.strategies.dontschedule.rules[0].metricname 'node_x' is a Prometheus series name: the Prometheus Adapter strips 'node_', "
        "so custom.metrics.k8s.io serves it as 'x'; use that name"
    ]
    assert tp.validate_spec({"strategies": {"labeling": {}}, 3: 1, "b": 2})[:2] == [
        "spec has unknown field 3 (allowed: strategies)",
        "spec has unknown field 'b' (allowed: strategies)",
    ]
