"""TASPolicy validation (plugins/module_utils/_tas_policy.py, filter tas_policy_errors).

The validator is checked against hand-written good and bad policies and, property-based, against
the CRD's own openAPI schema (roles/tas/files/taspolicy-crd.yml): whatever the validator accepts the
API server's schema accepts too, so "validated before apply" is never weaker than the server.
"""

import copy
import pathlib

import jsonschema
import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors import FilterModule
from ansible_collections.poweraware.k8s.plugins.filter.tas_policy_normalized import FilterModule as NormalizeModule
from ansible_collections.poweraware.k8s.plugins.module_utils._tas_policy import (
    INT64_MAX,
    LOGICAL_OPERATORS,
    OPERATORS,
    STRATEGIES,
    adapter_metric_name,
    normalize_policy,
    validate_policy,
    validate_spec,
)
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = pathlib.Path(__file__).resolve().parents[3]
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
        ((*DONT_RULE, "operator"), "GreaterThen", "operator 'GreaterThen' is not one of Equals|LessThan|GreaterThan"),
        ((*DONT_RULE, "operator"), "greaterthan", "is not one of"),
        ((*DONT_RULE, "operator"), DELETE, "dontschedule.rules[0].operator is required"),
        ((*DONT_RULE, "metricname"), DELETE, "dontschedule.rules[0].metricname is required"),
        ((*DONT_RULE, "metricname"), "", "metricname must be a non-empty string"),
        ((*DONT_RULE, "metricname"), "package/power", "is not a valid metric name"),
        ((*DONT_RULE, "metricname"), "package power", "is not a valid metric name"),
        ((*DONT_RULE, "metricname"), 42, "metricname must be a non-empty string, got integer"),
        ((*DONT_RULE, "metricname"), "node_package_power_avg", "serves it as 'package_power_avg'"),
        ((*DONT_RULE, "target"), "60", "target must be an integer (the CRD declares int64), got string '60'"),
        ((*DONT_RULE, "target"), 60.5, "got number 60.5"),
        ((*DONT_RULE, "target"), True, "got boolean"),
        ((*DONT_RULE, "target"), INT64_MAX + 1, "outside the int64 range"),
        ((*DONT_RULE, "target"), DELETE, "dontschedule.rules[0].target is required"),
        ((*DONT_RULE, "labels"), "a=b", "labels must be a list of strings"),
        ((*DONT_RULE, "labels"), ["ok", 3], "labels[1] must be a string"),
        ((*DONT_RULE, "Operator"), "LessThan", "unknown field 'Operator'"),
        ((*DONT, "logicalOperator"), "oneOf", "logicalOperator 'oneOf' is not one of allOf|anyOf"),
        ((*DONT, "policyName"), 7, "policyName must be a string"),
        ((*DONT, "rules"), [], "rules is empty"),
        ((*DONT, "rules"), DELETE, "rules is required"),
        ((*DONT, "rules"), {"metricname": "x"}, "rules must be a list, got mapping"),
        ((*DONT, "rule"), [], "unknown field 'rule'"),
        (DONT, "GreaterThan", "must be a mapping with rules"),
        (("spec", "strategies", "dont-schedule"), {"rules": []}, "unknown strategy 'dont-schedule'"),
        (("spec", "strategies"), {}, "spec.strategies is empty"),
        (("spec", "strategies"), [], "spec.strategies must be a mapping"),
        (("spec", "strategies"), DELETE, "spec.strategies is required"),
        (("spec",), DELETE, "spec is required"),
        (("spec",), "x", "spec must be a mapping"),
        (("spec", "strategy"), {}, "spec has unknown field 'strategy'"),
        ((*SOM_RULE, "operator"), "Equals", "cannot rank nodes"),
        (
            ("spec", "strategies", "scheduleonmetric", "rules", 1),
            {"metricname": "a", "operator": "LessThan"},
            "exactly one rule",
        ),
        (("apiVersion",), "telemetry.intel.com/v1", "apiVersion must be"),
        (("kind",), "TasPolicy", "kind must be 'TASPolicy'"),
        (("metadata", "name"), "Power_Policy", "not a valid Kubernetes object name"),
        (("metadata", "name"), "p" * 64, "longer than 63 characters"),
        (("metadata", "namespace"), "Default", "not a valid namespace name"),
        (("metadata",), DELETE, "metadata must be a mapping"),
    ],
)
def test_bad_policy_is_reported_with_the_field(path, value, message):
    if path[-1] == 1 and path[-2] == "rules":  # append a second rule
        policy = copy.deepcopy(POWER_POLICY)
        policy["spec"]["strategies"]["scheduleonmetric"]["rules"].append(value)
    else:
        policy = policy_with(path, value)
    errors = validate_policy(policy)
    assert errors, f"{path}={value!r} was accepted"
    assert any(message in e for e in errors), errors


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
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
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
_spec = st.fixed_dictionaries(
    {"strategies": st.dictionaries(st.one_of(st.sampled_from(STRATEGIES), st.text(max_size=6)), _strategy, max_size=3)}
)


@settings(max_examples=400, deadline=None)
@given(spec=_spec)
def test_accepted_specs_pass_the_crd_schema(crd_schema, spec):
    policy = {
        "apiVersion": "telemetry.intel.com/v1alpha1",
        "kind": "TASPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec,
    }
    if validate_policy(policy):
        return
    jsonschema.validate(policy, crd_schema, format_checker=None)
    for strategy in spec["strategies"].values():
        for rule in strategy["rules"]:
            assert "target" not in rule or -(2**63) <= rule["target"] < 2**63


@settings(max_examples=200, deadline=None)
@given(spec=_spec)
def test_schema_rejections_are_validator_rejections(crd_schema, spec):
    """The converse for what the schema can express: a schema failure is always a validator failure."""
    policy = {
        "apiVersion": "telemetry.intel.com/v1alpha1",
        "kind": "TASPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    try:
        jsonschema.validate(policy, crd_schema)
    except jsonschema.ValidationError:
        assert validate_policy(policy)
