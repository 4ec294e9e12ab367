# ruff: noqa: E501 - the catalogue holds exact, long messages
"""TASPolicy validation (plugins/module_utils/scheduler/tas_policy.py, filter tas_policy_errors).

The validator is checked against hand-written good and bad policies and, property-based, against
the CRD's own openAPI schema (roles/tas/files/taspolicy-crd.yml): whatever the validator accepts the
API server's schema accepts too, so "validated before apply" is never weaker than the server.

The tas_policy_* filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import copy
import pathlib
import re

import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors as f_tas_errors
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labeling as f_tas_labeling
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labels as f_tas_labels
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_normalized as f_tas_norm
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_objects as f_tas_objects
import jsonschema
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors import FilterModule
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labeling import FilterModule as LabelingModule
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_permissions import tas_policy_node_permissions
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_normalized import FilterModule as NormalizeModule
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import (
    INT64_MAX,
    INT64_MIN,
    LOGICAL_OPERATORS,
    OPERATORS,
    STRATEGIES,
    adapter_metric_name,
    node_labeling_strategies,
    normalize_policy,
    validate_policy,
    validate_spec,
)
from hypothesis import find, given, settings
from hypothesis import strategies as st
from poweraware_testing import raises

REPO = pathlib.Path(__file__).resolve().parents[4]
CRD_FILE = REPO / "roles" / "tas" / "files" / "taspolicy-crd.yml"

POWER_POLICY = {
    "apiVersion": "telemetry.intel.com/v1alpha1",
    "kind": "TASPolicy",
    "metadata": {"name": "power-sensitive-scheduling-policy", "namespace": "default"},
    "spec": {
        "strategies": {
            "dontschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": 60}]},
            "scheduleonmetric": {"rules": [{"metricname": "package_power_avg", "operator": "LessThan"}]},
        }
    },
}


def policy_with(path, value):
    """POWER_POLICY with the field at ``path`` (a tuple of keys/indexes) replaced (or deleted: value=DELETE)."""
    policy = copy.deepcopy(POWER_POLICY)
    node = policy
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return policy


DELETE = object()
DONT = ("spec", "strategies", "dontschedule")
DONT_RULE = (*DONT, "rules", 0)
SOM_RULE = ("spec", "strategies", "scheduleonmetric", "rules", 0)


@pytest.fixture(scope="module")
def crd_schema():
    crd = yaml.safe_load(CRD_FILE.read_text())
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_upstream_power_policy_is_valid():
    assert validate_policy(POWER_POLICY) == []


def test_upstream_power_policy_passes_the_crd_schema(crd_schema):
    jsonschema.validate(POWER_POLICY, crd_schema)


def test_crd_matches_upstream_identity():
    crd = yaml.safe_load(CRD_FILE.read_text())
    assert crd["metadata"]["name"] == "taspolicies.telemetry.intel.com"
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    rule = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["strategies"][
        "additionalProperties"
    ]["properties"]["rules"]["items"]
    assert rule["properties"]["operator"]["enum"] == list(OPERATORS)
    assert rule["properties"]["target"] == {"type": "integer", "format": "int64"}
    assert sorted(rule["required"]) == ["metricname", "operator"]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            (*DONT_RULE, "operator"),
            "GreaterThen",
            "spec.strategies.dontschedule.rules[0].operator 'GreaterThen' is not one of Equals|LessThan|GreaterThan",
        ),
        (
            (*DONT_RULE, "operator"),
            "greaterthan",
            "spec.strategies.dontschedule.rules[0].operator 'greaterthan' is not one of Equals|LessThan|GreaterThan",
        ),
        (
            (*DONT_RULE, "operator"),
            DELETE,
            "spec.strategies.dontschedule.rules[0].operator is required (one of Equals|LessThan|GreaterThan)",
        ),
        ((*DONT_RULE, "metricname"), DELETE, "spec.strategies.dontschedule.rules[0].metricname is required"),
        (
            (*DONT_RULE, "metricname"),
            "",
            "spec.strategies.dontschedule.rules[0].metricname must be a non-empty string, got string",
        ),
        (
            (*DONT_RULE, "metricname"),
            "package/power",
            (
                "spec.strategies.dontschedule.rules[0].metricname 'package/power' is not a valid metric name: "
                "the CRD allows only letters, digits, '_' and '-' (pattern ^[a-zA-Z0-9_-]+$)"
            ),
        ),
        (
            (*DONT_RULE, "metricname"),
            "package power",
            (
                "spec.strategies.dontschedule.rules[0].metricname 'package power' is not a valid metric name: "
                "the CRD allows only letters, digits, '_' and '-' (pattern ^[a-zA-Z0-9_-]+$)"
            ),
        ),
        (
            (*DONT_RULE, "metricname"),
            42,
            "spec.strategies.dontschedule.rules[0].metricname must be a non-empty string, got integer",
        ),
        (
            (*DONT_RULE, "metricname"),
            "node_package_power_avg",
            (
                "spec.strategies.dontschedule.rules[0].metricname 'node_package_power_avg' is a Prometheus "
                "series name: the Prometheus Adapter strips 'node_', so custom.metrics.k8s.io serves it as "
                "'package_power_avg'; use that name"
            ),
        ),
        (
            (*DONT_RULE, "target"),
            "60",
            (
                "spec.strategies.dontschedule.rules[0].target must be an integer (the CRD declares int64), "
                "got string '60', write it as a number, or pass the policy through normalize_policy (filter "
                "tas_policy_normalized)"
            ),
        ),
        (
            (*DONT_RULE, "target"),
            60.5,
            "spec.strategies.dontschedule.rules[0].target must be an integer (the CRD declares int64), got number 60.5",
        ),
        (
            (*DONT_RULE, "target"),
            True,
            "spec.strategies.dontschedule.rules[0].target must be an integer (the CRD declares int64), got boolean True",
        ),
        (
            (*DONT_RULE, "target"),
            INT64_MAX + 1,
            "spec.strategies.dontschedule.rules[0].target 9223372036854775808 is outside the int64 range",
        ),
        (
            (*DONT_RULE, "target"),
            DELETE,
            "spec.strategies.dontschedule.rules[0].target is required for this strategy (an integer to compare the metric with)",
        ),
        (
            (*DONT_RULE, "labels"),
            "a=b",
            "spec.strategies.dontschedule.rules[0].labels must be a list of strings, got string",
        ),
        (
            (*DONT_RULE, "labels"),
            ["ok", 3],
            "spec.strategies.dontschedule.rules[0].labels[1] must be a string, got integer",
        ),
        (
            (*DONT_RULE, "Operator"),
            "LessThan",
            "spec.strategies.dontschedule.rules[0] has unknown field 'Operator' (allowed: metricname, operator, target, labels)",
        ),
        (
            (*DONT, "logicalOperator"),
            "oneOf",
            "spec.strategies.dontschedule.logicalOperator 'oneOf' is not one of allOf|anyOf",
        ),
        ((*DONT, "policyName"), 7, "spec.strategies.dontschedule.policyName must be a string, got integer"),
        ((*DONT, "rules"), [], "spec.strategies.dontschedule.rules is empty: a strategy without rules does nothing"),
        ((*DONT, "rules"), DELETE, "spec.strategies.dontschedule.rules is required (a non-empty list)"),
        ((*DONT, "rules"), {"metricname": "x"}, "spec.strategies.dontschedule.rules must be a list, got mapping"),
        (
            (*DONT, "rule"),
            [],
            "spec.strategies.dontschedule has unknown field 'rule' (allowed: policyName, logicalOperator, rules)",
        ),
        (DONT, "GreaterThan", "spec.strategies.dontschedule must be a mapping with rules, got string"),
        (
            ("spec", "strategies", "dont-schedule"),
            {"rules": []},
            "spec.strategies.dont-schedule: unknown strategy 'dont-schedule' (TAS implements scheduleonmetric, dontschedule, deschedule, labeling)",
        ),
        (
            ("spec", "strategies"),
            {},
            "spec.strategies is empty: give at least one of scheduleonmetric, dontschedule, deschedule, labeling",
        ),
        (("spec", "strategies"), [], "spec.strategies must be a mapping of strategy name to strategy, got list"),
        (("spec", "strategies"), DELETE, "spec.strategies is required"),
        (("spec",), DELETE, "spec is required"),
        (("spec",), "x", "spec must be a mapping, got string"),
        (("spec", "strategy"), {}, "spec has unknown field 'strategy' (allowed: strategies)"),
        (
            (*SOM_RULE, "operator"),
            "Equals",
            (
                "spec.strategies.scheduleonmetric.rules[0].operator 'Equals' cannot rank nodes: scheduleonmetric "
                "takes LessThan (lowest first) or GreaterThan (highest first)"
            ),
        ),
        (
            ("spec", "strategies", "scheduleonmetric", "rules", 1),
            {"metricname": "a", "operator": "LessThan"},
            "spec.strategies.scheduleonmetric.rules has 2 rules: scheduleonmetric ranks nodes by exactly one rule",
        ),
        (
            ("apiVersion",),
            "telemetry.intel.com/v1",
            "apiVersion must be 'telemetry.intel.com/v1alpha1', got 'telemetry.intel.com/v1'",
        ),
        (("kind",), "TasPolicy", "kind must be 'TASPolicy', got 'TasPolicy'"),
        (
            ("metadata", "name"),
            "Power_Policy",
            "metadata.name 'Power_Policy' is not a valid Kubernetes object name (DNS-1123 subdomain)",
        ),
        (
            ("metadata", "name"),
            "p" * 64,
            (
                "metadata.name 'pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp' is longer "
                "than 63 characters: pods opt in with the label telemetry-policy=<name>, and label values are "
                "at most 63 characters"
            ),
        ),
        (
            ("metadata", "namespace"),
            "Default",
            "metadata.namespace 'Default' is not a valid namespace name (DNS-1123 label)",
        ),
        (("metadata",), DELETE, "metadata must be a mapping with name and namespace"),
    ],
)
def test_bad_policy_is_reported_with_the_field(path, value, message):
    if path[-1] == 1 and path[-2] == "rules":  # append a second rule
        policy = copy.deepcopy(POWER_POLICY)
        policy["spec"]["strategies"]["scheduleonmetric"]["rules"].append(value)
    else:
        policy = policy_with(path, value)
    # the whole message, and only it: a message that merely contains the expected words (or a second,
    # spurious error) is a different behaviour
    assert validate_policy(policy) == [message]


def test_every_problem_is_reported_at_once():
    policy = policy_with((*DONT_RULE, "operator"), "Above")
    policy["spec"]["strategies"]["scheduleonmetric"]["rules"][0]["metricname"] = "node_package_power_avg"
    errors = validate_policy(policy)
    assert len(errors) == 2
    assert errors[0].startswith("spec.strategies.dontschedule.rules[0].operator")
    assert errors[1].startswith("spec.strategies.scheduleonmetric.rules[0].metricname")


def test_known_metrics_restrict_names():
    assert validate_policy(POWER_POLICY, known_metrics=["package_power_avg"]) == []
    errors = validate_policy(POWER_POLICY, known_metrics=["package_power_per_pod"])
    assert len(errors) == 2 and "not served by the metrics adapter" in errors[0]


def test_stripped_prefix_check_can_be_turned_off():
    policy = policy_with((*DONT_RULE, "metricname"), "node_package_power_avg")
    assert validate_policy(policy, stripped_prefix="") == []
    assert validate_policy(policy, stripped_prefix="node_")


def test_labeling_strategy_needs_key_value_labels():
    spec = {
        "strategies": {
            "labeling": {
                "rules": [
                    {
                        "metricname": "package_power_avg",
                        "operator": "GreaterThan",
                        "target": 80,
                        "labels": ["power=high"],
                    }
                ]
            }
        }
    }
    assert validate_spec(spec) == []
    spec["strategies"]["labeling"]["rules"][0]["labels"] = ["power high"]
    assert any("must be key=value" in e for e in validate_spec(spec))
    del spec["strategies"]["labeling"]["rules"][0]["labels"]
    assert any("labels is required for the labeling strategy" in e for e in validate_spec(spec))


def test_not_a_mapping():
    assert validate_policy(None) == ["a TASPolicy must be a mapping, got null"]
    assert validate_policy([POWER_POLICY])[0].startswith("a TASPolicy must be a mapping")


@pytest.mark.parametrize(
    ("series", "served"),
    [
        ("node_package_power_avg", "package_power_avg"),
        ("node_package_power_per_pod", "package_power_per_pod"),
        ("package_power_avg", "package_power_avg"),
        ("node_", "node_"),
    ],
)
def test_adapter_metric_name(series, served):
    assert adapter_metric_name(series) == served


def test_adapter_metric_name_rejects_empty():
    with pytest.raises(ValueError, match="non-empty"):
        adapter_metric_name("")


def test_filter_plugin_entry_point():
    tas_policy_errors = FilterModule().filters()["tas_policy_errors"]
    assert tas_policy_errors(POWER_POLICY) == []
    assert tas_policy_errors(POWER_POLICY, known_metrics=["x"])
    assert tas_policy_errors(policy_with((*DONT_RULE, "metricname"), "node_x"), stripped_prefix="") == []


def test_filter_plugin_rejects_a_string_as_known_metrics():
    from ansible.errors import AnsibleFilterError

    tas_policy_errors = FilterModule().filters()["tas_policy_errors"]
    with pytest.raises(AnsibleFilterError, match="known_metrics must be a list"):
        tas_policy_errors(POWER_POLICY, known_metrics="package_power_avg")


# --- numeric strings (what -e name=value gives) ------------------------------------------------------
@pytest.mark.parametrize(("given", "expected"), [("70", 70), (" 70 ", 70), ("+70", 70), ("-5", -5), ("0", 0)])
def test_normalize_turns_whole_number_strings_into_integers(given, expected):
    policy = policy_with((*DONT_RULE, "target"), given)
    normalized = normalize_policy(policy)
    assert normalized["spec"]["strategies"]["dontschedule"]["rules"][0]["target"] == expected
    assert policy["spec"]["strategies"]["dontschedule"]["rules"][0]["target"] == given, "input modified"
    assert validate_policy(normalized) == []


@pytest.mark.parametrize("given", ["70%", "70.5", "seventy", "", "0x46", "7 0", True, 60.5, None])
def test_normalize_leaves_everything_else_for_the_validator(given):
    policy = policy_with((*DONT_RULE, "target"), given)
    assert normalize_policy(policy) == policy


@pytest.mark.parametrize("odd", [None, "x", [], {"spec": "x"}, {"spec": {"strategies": []}}, POWER_POLICY])
def test_normalize_accepts_any_structure(odd):
    assert normalize_policy(odd) == odd


def test_filters_accept_numeric_strings_and_refuse_other_strings():
    tas_policy_errors = FilterModule().filters()["tas_policy_errors"]
    tas_policy_normalized = NormalizeModule().filters()["tas_policy_normalized"]
    from_extra_vars = policy_with((*DONT_RULE, "target"), "70")
    assert tas_policy_errors(from_extra_vars) == []
    assert tas_policy_normalized(from_extra_vars) == policy_with((*DONT_RULE, "target"), 70)
    assert tas_policy_errors(policy_with((*DONT_RULE, "target"), "70%")) == [
        "spec.strategies.dontschedule.rules[0].target must be an integer (the CRD declares int64),"
        " got string '70%', which is not a whole number"
    ]
    assert any("got number 60.5" in e for e in tas_policy_errors(policy_with((*DONT_RULE, "target"), 60.5)))


# --- property: accepted by the validator => accepted by the CRD schema ----------------------------
# Purely random specs are all rejected by the validator (one bad field is enough), so a property that
# only holds "if the validator accepts" would never reach its assertion. Specs are therefore drawn
# valid by construction and then, most of the time, spoiled in exactly one field; the tests below
# the properties check that the generator reaches both outcomes.
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_junk = st.one_of(_json_scalars, st.lists(st.integers(), max_size=2), st.just({}))
_valid_metric = st.sampled_from(["package_power_avg", "cpu_util", "x-y_1", "node_"])
_valid_target = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
_label = st.sampled_from(["a=b", "k=v", "power.class=low-1"])


@st.composite
def _valid_rule(draw, strategy):
    operators = ("LessThan", "GreaterThan") if strategy == "scheduleonmetric" else OPERATORS
    rule = {"metricname": draw(_valid_metric), "operator": draw(st.sampled_from(operators))}
    if strategy != "scheduleonmetric" or draw(st.booleans()):
        rule["target"] = draw(_valid_target)
    if strategy == "labeling" or draw(st.booleans()):
        rule["labels"] = draw(st.lists(_label, min_size=1 if strategy == "labeling" else 0, max_size=2))
    return rule


@st.composite
def _valid_spec(draw):
    names = draw(st.lists(st.sampled_from(STRATEGIES), min_size=1, max_size=3, unique=True))
    strategies = {}
    for name in names:
        count = 1 if name == "scheduleonmetric" else draw(st.integers(min_value=1, max_value=3))
        strategy = {"rules": [draw(_valid_rule(name)) for _rule in range(count)]}
        if draw(st.booleans()):
            strategy["logicalOperator"] = draw(st.sampled_from(LOGICAL_OPERATORS))
        if draw(st.booleans()):
            strategy["policyName"] = draw(st.text(max_size=5))
        strategies[name] = strategy
    return {"strategies": strategies}


@st.composite
def _spoiled_spec(draw):
    """A valid spec with one field replaced (or added) by something of another type or value."""
    spec = draw(_valid_spec())
    name = draw(st.sampled_from(sorted(spec["strategies"])))
    strategy = spec["strategies"][name]
    rule = draw(st.sampled_from(strategy["rules"]))
    where = draw(
        st.sampled_from(
            [
                "target",
                "metricname",
                "operator",
                "labels",
                "label",
                "logicalOperator",
                "policyName",
                "rules",
                "strategy",
            ]
        )
    )
    if where == "target":
        rule["target"] = draw(st.one_of(_junk, st.sampled_from(["70", "-5", 60.5, True, 2**63, -(2**63) - 1])))
    elif where == "metricname":
        rule["metricname"] = draw(st.one_of(_junk, st.sampled_from(["", "a b", "a.b", "power/avg"])))
    elif where == "operator":
        rule["operator"] = draw(st.one_of(_junk, st.sampled_from(["equals", "Between", "LessThan "])))
    elif where == "labels":
        rule["labels"] = draw(st.one_of(_json_scalars, st.lists(_json_scalars, min_size=1, max_size=2)))
    elif where == "label":
        rule["labels"] = [*rule.get("labels", []), draw(st.sampled_from(["bad label", "k", "=v", "-k=v"]))]
    elif where == "logicalOperator":
        strategy["logicalOperator"] = draw(st.one_of(_junk, st.sampled_from(["oneOf", "AllOf"])))
    elif where == "policyName":
        strategy["policyName"] = draw(
            st.one_of(st.integers(), st.booleans(), st.lists(st.text(max_size=2), max_size=1))
        )
    elif where == "rules":
        strategy["rules"] = draw(st.one_of(_json_scalars, st.just([])))
    else:
        spec["strategies"][draw(st.text(max_size=6).filter(lambda n: n not in STRATEGIES))] = strategy
    return spec


_metric = st.one_of(st.sampled_from(["package_power_avg", "node_package_power_avg", "x-y_1"]), st.text(max_size=8))
_rule = st.fixed_dictionaries(
    {"metricname": _metric, "operator": st.one_of(st.sampled_from(OPERATORS), st.text(max_size=8))},
    optional={
        "target": _json_scalars,
        "labels": st.one_of(st.lists(st.sampled_from(["a=b", "bad label", "k=v"]), max_size=2), _json_scalars),
    },
)
_strategy = st.fixed_dictionaries(
    {"rules": st.one_of(st.lists(_rule, max_size=3), _json_scalars)},
    optional={
        "logicalOperator": st.one_of(st.sampled_from(LOGICAL_OPERATORS), st.text(max_size=5)),
        "policyName": st.one_of(st.text(max_size=5), st.integers()),
    },
)
_random_spec = st.fixed_dictionaries(
    {"strategies": st.dictionaries(st.one_of(st.sampled_from(STRATEGIES), st.text(max_size=6)), _strategy, max_size=3)}
)
_spec = st.one_of(_valid_spec(), _spoiled_spec(), _random_spec)


def _policy(spec, namespace="default"):
    metadata = {"name": "p", "namespace": namespace} if namespace else {"name": "p"}
    return {"apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy", "metadata": metadata, "spec": spec}


def _as_served(policy):
    """``policy`` as the API server validates it: it prunes ``null`` from fields that are not ``nullable``
    (apiextensions structural defaulting) before the schema check, which plain jsonschema does not do.
    The validator, too, reads ``target: null`` and ``labels: null`` as absent."""
    policy = copy.deepcopy(policy)
    strategies = policy["spec"].get("strategies") if isinstance(policy["spec"], dict) else None
    for strategy in strategies.values() if isinstance(strategies, dict) else ():
        rules = strategy.get("rules") if isinstance(strategy, dict) else None
        for rule in rules if isinstance(rules, list) else ():
            if isinstance(rule, dict):
                for key in [k for k, v in rule.items() if v is None]:
                    del rule[key]
    return policy


@settings(max_examples=400, deadline=None)
@given(spec=_spec)
def test_accepted_specs_pass_the_crd_schema(crd_schema, spec):
    policy = _policy(spec)
    if validate_policy(policy):
        return
    jsonschema.validate(_as_served(policy), crd_schema, format_checker=None)
    for strategy in spec["strategies"].values():
        for rule in strategy["rules"]:
            assert rule.get("target") is None or -(2**63) <= rule["target"] < 2**63


@settings(max_examples=400, deadline=None)
@given(spec=_spec)
def test_schema_rejections_are_validator_rejections(crd_schema, spec):
    """The converse for what the schema can express: a schema failure is always a validator failure."""
    policy = _policy(spec, namespace=None)
    try:
        jsonschema.validate(_as_served(policy), crd_schema)
    except jsonschema.ValidationError:
        assert validate_policy(policy)


@settings(max_examples=100, deadline=None)
@given(spec=_valid_spec())
def test_valid_by_construction_specs_are_accepted(spec):
    assert validate_policy(_policy(spec)) == []


def test_the_generator_reaches_both_sides_of_each_property(crd_schema):
    """Both properties are vacuous unless the generator yields specs on each side of their condition."""
    find(_spec, lambda spec: validate_policy(_policy(spec)) == [], settings=settings(database=None))
    find(_spoiled_spec(), lambda spec: bool(validate_policy(_policy(spec))), settings=settings(database=None))

    def schema_rejects(spec):
        try:
            jsonschema.validate(_as_served(_policy(spec, namespace=None)), crd_schema)
        except jsonschema.ValidationError:
            return True
        return False

    find(_spoiled_spec(), schema_rejects, settings=settings(database=None))


# --- which strategies make TAS patch nodes (the tas_policy role grants it only for these) ----------
@pytest.mark.parametrize(
    ("strategies", "expected"),
    [
        ({}, []),
        ({"dontschedule": {}, "scheduleonmetric": {}}, []),
        ({"deschedule": {}, "dontschedule": {}}, ["deschedule"]),
        ({"labeling": {}}, ["labeling"]),
        ({"labeling": {}, "scheduleonmetric": {}, "deschedule": {}}, ["deschedule", "labeling"]),
    ],
)
def test_node_labeling_strategies(strategies, expected):
    policy = copy.deepcopy(POWER_POLICY)
    policy["spec"]["strategies"] = strategies
    assert node_labeling_strategies(policy) == expected
    assert LabelingModule().filters()["tas_policy_node_labeling"](policy) == expected


@pytest.mark.parametrize("policy", [None, "x", {}, {"spec": None}, {"spec": {"strategies": ["deschedule"]}}])
def test_node_labeling_strategies_of_a_malformed_policy_is_empty(policy):
    assert node_labeling_strategies(policy) == []


def test_the_power_policy_labels_no_nodes():
    assert node_labeling_strategies(POWER_POLICY) == []


def _named_policy(name, namespace, strategies):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"strategies": strategies}}


def _withdrawn(name):
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}}
        for kind in ("ClusterRoleBinding", "ClusterRole")
    ]


def test_node_permissions_grant_to_labelling_policies_and_withdraw_from_the_others():
    policies = [
        _named_policy("power", "default", {"scheduleonmetric": {}}),
        _named_policy("hot", "power-demo", {"labeling": {}, "deschedule": {}}),
        _named_policy("cold", "default", {"dontschedule": {}}),
    ]
    assert tas_policy_node_permissions(policies) == {
        "grant": [{"name": "poweraware:tas-policy:power-demo:hot", "strategies": ["deschedule", "labeling"]}],
        "withdraw": _withdrawn("poweraware:tas-policy:default:power")
        + _withdrawn("poweraware:tas-policy:default:cold"),
    }
    # absent: every policy's permission goes, the binding before the role it binds
    assert tas_policy_node_permissions(policies, "absent") == {
        "grant": [],
        "withdraw": [
            item
            for p in ("default:power", "power-demo:hot", "default:cold")
            for item in _withdrawn(f"poweraware:tas-policy:{p}")
        ],
    }


@pytest.mark.parametrize(
    ("policies", "state", "message"),
    [
        ({"metadata": {}}, "present", "the input must be the list of TASPolicy objects"),
        ([{"metadata": {"name": "x"}}], "present", "the input must be the list of TASPolicy objects"),
        ([], "gone", "state='gone': must be present or absent"),
    ],
)
def test_node_permissions_refuses_what_is_not_its_input(policies, state, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        tas_policy_node_permissions(policies, state)


@pytest.mark.parametrize("bad", ["node_power", b"x", [1], ["a", None]])
def test_tas_policy_errors_wants_metric_names(bad):
    raises(
        lambda: f_tas_errors.tas_policy_errors({}, bad),
        "tas_policy_errors: known_metrics must be a list of metric names",
    )


@pytest.mark.parametrize("bad", [5, ["node_"]])
def test_tas_policy_errors_wants_a_text_prefix(bad):
    raises(lambda: f_tas_errors.tas_policy_errors({}, None, bad), "tas_policy_errors: stripped_prefix must be a string")


def test_tas_policy_errors_passes_normalized_policies_on(stub):
    normalize = stub(f_tas_errors, "normalize_policy", result="normalized")
    one = stub(f_tas_errors, "validate_policy", result=["one"])
    many = stub(f_tas_errors, "validate_policies", result=["many"])
    assert f_tas_errors.tas_policy_errors({"p": 1}) == ["one"]
    assert f_tas_errors.tas_policy_errors({"p": 2}, ["node_power"], None) == ["one"]
    assert f_tas_errors.tas_policy_errors([{"p": 3}, {"p": 4}], [], "x_") == ["many"]
    assert normalize.calls == [(({"p": n},), {}) for n in (1, 2, 3, 4)]
    assert one.calls == [
        (("normalized",), {"known_metrics": None, "stripped_prefix": "node_"}),
        (("normalized",), {"known_metrics": ["node_power"], "stripped_prefix": ""}),
    ]
    assert many.calls == [((["normalized", "normalized"],), {"known_metrics": [], "stripped_prefix": "x_"})]
    assert f_tas_errors.tas_policy_errors([{"p": 5}], None, None) == ["many"]
    assert many.calls[-1] == ((["normalized"],), {"known_metrics": None, "stripped_prefix": ""})


def test_tas_policy_node_labeling_and_normalized_pass_the_policy_on(stub):
    labeling = stub(f_tas_labeling, "node_labeling_strategies", result=["labeling"])
    normalize = stub(f_tas_norm, "normalize_policy", result={"n": 1})
    assert f_tas_labeling.tas_policy_node_labeling({"p": 1}) == ["labeling"]
    assert f_tas_norm.tas_policy_normalized({"p": 2}) == {"n": 1}
    assert labeling.calls == [(({"p": 1},), {})]
    assert normalize.calls == [(({"p": 2},), {})]


@pytest.mark.parametrize(("nodes", "policies"), [({}, []), ([], {}), (None, None)])
def test_tas_policy_node_labels_wants_lists(nodes, policies):
    raises(
        lambda: f_tas_labels.tas_policy_node_labels(nodes, policies),
        "tas_policy_node_labels: the input must be a list of Nodes and policies a list",
    )


def test_tas_policy_node_labels_passes_its_arguments_on(stub):
    labels = stub(f_tas_labels, "policy_node_labels")
    assert f_tas_labels.tas_policy_node_labels(["node"], ["policy"]) == "result"
    assert labels.calls == [((["node"], ["policy"]), {})]


@pytest.mark.parametrize("bad", ["", None, 5])
def test_tas_policy_objects_wants_a_namespace(bad):
    raises(
        lambda: f_tas_objects.tas_policy_objects({}, [], bad),
        "tas_policy_objects: default_namespace must be a non-empty string",
    )


def test_tas_policy_objects_passes_its_arguments_on(stub):
    objects = stub(f_tas_objects, "policy_objects", result=(["object"], []))
    assert f_tas_objects.tas_policy_objects({}, ["p"], "tas") == ["object"]
    assert f_tas_objects.tas_policy_objects({"power": 1}, [], "ns", "my_policies") == ["object"]
    assert objects.calls == [
        ((None, ["p"], "tas", "tas_policy_policies"), {}),
        (({"power": 1}, [], "ns", "my_policies"), {}),
    ]


def test_tas_policy_objects_problems_say_nothing_changed(stub):
    stub(f_tas_objects, "policy_objects", result=([], ["policy a: no name", "policy b: no rules"]))
    raises(
        lambda: f_tas_objects.tas_policy_objects(None, [], "tas"),
        "Nothing was changed: policy a: no name; policy b: no rules",
    )
