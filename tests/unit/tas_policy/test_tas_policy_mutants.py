# ruff: noqa: E501 - exact, long messages
"""_tas_policy: several policies per run (policy_objects, validate_policies, policy_node_labels), called
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
