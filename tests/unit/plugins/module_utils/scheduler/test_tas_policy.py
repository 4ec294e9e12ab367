# ruff: noqa: E501 - exact, long messages
"""tas_policy: bounds (int64, name and label lengths) and the exact message of each rule.

Oracles: the int64 range; Kubernetes names (DNS-1123 subdomain up to 253 characters, label values up
to 63, namespaces DNS-1123 labels) and label syntax (name and value up to 63 alphanumerics with
``-_.`` inside, value possibly empty).

tas_policy: several policies per run (policy_objects, validate_policies, policy_node_labels), called
directly rather than through the filters, with the exact messages.

Oracles: a ``tas_policy_policies`` entry is either a whole TASPolicy (it has ``spec`` or ``metadata``,
as TAS's README and ``kubectl apply -f`` files write it) or the short form ``{name, namespace,
strategies}``; both come out as a TASPolicy with apiVersion, kind, a namespace (the default when
unset or empty) and the role's labels on top of the user's; the input is never modified.
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
def test_messages_name_the_type_given_in_yamls_words(value, name):
    if isinstance(value, dict):  # a mapping where a list belongs
        assert tp.validate_spec({"strategies": {"dontschedule": {"rules": value}}}) == [
            f"spec.strategies.dontschedule.rules must be a list, got {name}"
        ]
    else:
        assert tp.validate_policy(value) == [f"a TASPolicy must be a mapping, got {name}"]


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


LABELS = {"app.kubernetes.io/name": "telemetry-aware-scheduling", "app.kubernetes.io/managed-by": "poweraware.k8s"}
STRATEGIES = {"dontschedule": {"rules": [{"metricname": "m", "operator": "GreaterThan", "target": 1}]}}


def short(name, **fields):
    return dict({"name": name, "strategies": copy.deepcopy(STRATEGIES)}, **fields)


def full(name, **metadata):
    return {"metadata": dict({"name": name}, **metadata), "spec": {"strategies": copy.deepcopy(STRATEGIES)}}


def test_managed_labels():
    assert tp.MANAGED_LABELS == LABELS


@pytest.mark.parametrize("namespace", [None, ""])
def test_short_form_without_a_namespace_takes_the_default(namespace):
    entry = short("a", namespace=namespace)
    assert tp.policy_objects(None, [entry], "dflt") == (
        [
            {
                "apiVersion": "telemetry.intel.com/v1alpha1",
                "kind": "TASPolicy",
                "metadata": {"name": "a", "namespace": "dflt", "labels": LABELS},
                "spec": {"strategies": STRATEGIES},
            }
        ],
        [],
    )


def test_short_form_keeps_its_namespace():
    objects, problems = tp.policy_objects(None, [short("a", namespace="mine")], "dflt")
    assert (objects[0]["metadata"]["namespace"], problems) == ("mine", [])


@pytest.mark.parametrize("namespace", [None, ""])
def test_whole_policy_without_a_namespace_gets_the_default_and_the_role_labels(namespace):
    entry = full("a", namespace=namespace, labels={"team": "x", "app.kubernetes.io/name": "other"})
    before = copy.deepcopy(entry)
    objects, problems = tp.policy_objects(None, [entry], "dflt")
    assert problems == []
    assert objects == [
        {
            "apiVersion": "telemetry.intel.com/v1alpha1",
            "kind": "TASPolicy",
            # the user's labels are kept, the role's own win
            "metadata": {"name": "a", "namespace": "dflt", "labels": {"team": "x", **LABELS}},
            "spec": {"strategies": STRATEGIES},
        }
    ]
    assert entry == before, "the input was modified"


def test_whole_policy_keeps_its_identity_namespace_and_takes_labels_of_a_mapping_only():
    entry = dict(full("a", namespace="mine", labels=["not", "a", "mapping"]), apiVersion="v9", kind="Other")
    objects, problems = tp.policy_objects(None, [entry], "dflt")
    assert problems == []
    assert (objects[0]["apiVersion"], objects[0]["kind"]) == ("v9", "Other")  # for validate_policy to refuse
    assert objects[0]["metadata"] == {"name": "a", "namespace": "mine", "labels": LABELS}


def test_spec_alone_or_metadata_alone_is_a_whole_policy():
    spec_only = {"spec": {"strategies": STRATEGIES}}
    metadata_only = {"metadata": {"name": "b"}}
    objects, problems = tp.policy_objects(None, [spec_only, metadata_only], "dflt")
    assert problems == []
    assert objects == [
        {"apiVersion": tp.API_VERSION, "kind": tp.KIND, "spec": {"strategies": STRATEGIES}},
        {
            "apiVersion": tp.API_VERSION,
            "kind": tp.KIND,
            "metadata": {"name": "b", "namespace": "dflt", "labels": LABELS},
        },
    ]


def test_unknown_keys_of_the_short_form_are_listed_sorted_whatever_their_type():
    assert tp.policy_objects(None, [dict(short("a"), zz=1, **{"1": 2}), {**short("b"), 7: "x"}], "d")[1] == [
        "tas_policy_policies[0] has unknown keys '1', 'zz': give a whole TASPolicy (apiVersion, kind, metadata, spec), "
        "or the short form with name, namespace, strategies only",
        "tas_policy_policies[1] has unknown keys 7: give a whole TASPolicy (apiVersion, kind, metadata, spec), "
        "or the short form with name, namespace, strategies only",
    ]
    mixed = {**short("c"), 3: "x", "b": "y"}
    assert tp.policy_objects(None, [mixed], "d")[1] == [
        "tas_policy_policies[0] has unknown keys 3, 'b': give a whole TASPolicy (apiVersion, kind, metadata, spec), "
        "or the short form with name, namespace, strategies only"
    ]


def test_the_variable_named_in_problems_defaults_to_tas_policy_policies():
    assert tp.policy_objects(None, {"name": "x"}, "d") == (
        [],
        ["tas_policy_policies must be a list of TASPolicies, got mapping"],
    )
    assert tp.policy_objects(None, [5], "d", variable="extra")[1] == [
        "extra[0] must be a TASPolicy (apiVersion, kind, metadata, spec) or {name, namespace, strategies}, got integer"
    ]


def test_no_power_policy_and_no_entries_is_no_policy():
    assert tp.policy_objects(None, None, "d") == ([], [])
    assert tp.policy_objects(None, [], "d") == ([], [])


def test_a_power_policy_that_is_not_a_mapping_is_left_for_the_validation():
    assert tp.policy_objects("odd", [short("a")], "d") == (
        ["odd", tp.policy_objects(None, [short("a")], "d")[0][0]],
        [],
    )


def test_duplicates_name_both_entries_without_a_power_policy():
    assert tp.policy_objects(None, [short("a"), short("b"), short("a", namespace="d")], "d")[1] == [
        "TASPolicy d/a is given twice (tas_policy_policies[0] and tas_policy_policies[2]): give each policy a name of its own"
    ]


def test_duplicates_after_a_policy_without_metadata_are_found():
    extra = [{"spec": {"strategies": STRATEGIES}}, short("a"), short("a")]
    assert tp.policy_objects(None, extra, "d")[1] == [
        "TASPolicy d/a is given twice (tas_policy_policies[1] and tas_policy_policies[2]): give each policy a name of its own"
    ]


def test_validate_policies_prefixes_each_problem_with_its_policy():
    named = tp.policy_objects(None, [short("a")], "d")[0][0]
    nameless = {"apiVersion": tp.API_VERSION, "kind": tp.KIND, "metadata": {"namespace": "d"}, "spec": named["spec"]}
    no_metadata = {"apiVersion": tp.API_VERSION, "kind": tp.KIND, "spec": named["spec"]}
    assert tp.validate_policies([named, "x", nameless, no_metadata]) == [
        "policy 2 of the run: a TASPolicy must be a mapping, got string",
        "policy 3 of the run: metadata.name None is not a valid Kubernetes object name (DNS-1123 subdomain)",
        "policy 4 of the run: metadata must be a mapping with name and namespace",
    ]


def test_validate_policies_passes_known_metrics_and_the_stripped_prefix_on():
    policy = tp.policy_objects(None, [short("a")], "d")[0][0]
    assert tp.validate_policies([policy], known_metrics=["n"]) == [
        "TASPolicy d/a: spec.strategies.dontschedule.rules[0].metricname 'm' is not served by the metrics adapter (known metrics: n)"
    ]
    series = copy.deepcopy(policy)
    series["spec"]["strategies"]["dontschedule"]["rules"][0]["metricname"] = "node_m"
    assert tp.validate_policies([series]) == [
        "TASPolicy d/a: spec.strategies.dontschedule.rules[0].metricname 'node_m' is a Prometheus series name: the "
        "Prometheus Adapter strips 'node_', so custom.metrics.k8s.io serves it as 'm'; use that name"
    ]
    assert tp.validate_policies([series], stripped_prefix="") == []


def node(name, **labels):
    return {"metadata": {"name": name, "labels": labels}}


def test_policy_node_labels_skips_what_is_not_a_policy_or_a_node():
    policies = [None, "x", {"metadata": None}, {"metadata": {"namespace": "d"}}, {"metadata": {"name": "p"}}]
    nodes = [None, "x", {"metadata": None}, {}, node("n", p="violating", q="violating")]
    assert tp.policy_node_labels(nodes, policies) == [{"node": "n", "label": "p=violating"}]


def test_policy_node_labels_are_sorted_by_node_then_label():
    nodes = [
        node("b", **{"p": "violating", "telemetry.aware.scheduling.p/k": "v"}),
        node("a", **{"telemetry.aware.scheduling.p/z": "v"}),
    ]
    assert tp.policy_node_labels(nodes, [{"metadata": {"name": "p"}}]) == [
        {"node": "a", "label": "telemetry.aware.scheduling.p/z=v"},
        {"node": "b", "label": "p=violating"},
        {"node": "b", "label": "telemetry.aware.scheduling.p/k=v"},
    ]
