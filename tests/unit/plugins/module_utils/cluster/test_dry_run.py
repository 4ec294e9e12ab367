# ruff: noqa: E501 - exact API messages
"""The dry run's plan (plugins/module_utils/cluster/dry_run.py): which objects are predicted, which stay errors."""

from __future__ import annotations

import json

from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.dry_run import (
    classify,
    kind_key,
    plan_from,
    planned_in,
)

NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tas"}}
SA = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tas", "namespace": "tas"}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "taspolicies.telemetry.intel.com"},
    "spec": {"group": "telemetry.intel.com", "names": {"kind": "TASPolicy", "plural": "taspolicies"}},
}
POLICY = {
    "apiVersion": "telemetry.intel.com/v1alpha1",
    "kind": "TASPolicy",
    "metadata": {"name": "p", "namespace": "tas"},
}


def not_found(namespace):
    # kubernetes.core quotes the API's Status as JSON in its message, as the lab's API server returns it.
    status = {"kind": "Status", "status": "Failure", "message": f'namespaces "{namespace}" not found', "code": 404}
    return {
        "changed": False,
        "error": {"msg": f"Failed to apply object: {json.dumps(status)}\n", "reason": "Not Found"},
    }


NO_KIND = {
    "changed": False,
    "error": {
        "msg": "Failed to find exact match for telemetry.intel.com/v1alpha1.TASPolicy by [kind, name, singularName, shortNames]"
    },
}
OK = {"changed": True, "method": "apply", "result": {}}


def test_kind_key():
    assert kind_key("telemetry.intel.com/v1alpha1", "TASPolicy") == "TASPolicy.telemetry.intel.com"
    assert kind_key("v1", "Secret") == "Secret"


def test_plan_collects_namespaces_and_crd_kinds_of_this_task_and_earlier_ones():
    plan = plan_from([NS, CRD, SA], None, {"namespaces": ["monitoring"], "kinds": []})
    assert plan == {"namespaces": ["monitoring", "tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}


def test_a_plan_from_another_run_is_ignored():
    fact = {"run": "111", "namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}
    assert planned_in(fact, "111")["namespaces"] == ["tas"]
    assert planned_in(fact, "222") == {"namespaces": [], "kinds": []}
    assert planned_in(None, "222") == {"namespaces": [], "kinds": []}


def test_object_in_a_planned_namespace_is_predicted_with_its_whole_diff():
    plan = plan_from([NS, SA], None, {"namespaces": [], "kinds": []})
    out = classify([NS, SA], [OK, not_found("tas")], None, plan)
    assert out.errors == []
    assert out.results[0] is OK
    predicted = out.results[1]
    assert predicted["changed"] and predicted["predicted"] and predicted["result"] == SA
    assert predicted["diff"]["before"] == {} and predicted["diff"]["after"] == SA
    assert out.predicted == [
        "ServiceAccount tas/tas: would create (predicted, not dry-run: namespace tas is created by this run)"
    ]


def test_custom_resource_of_a_planned_crd_is_predicted():
    plan = {"namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}
    out = classify([POLICY], [NO_KIND], None, plan)
    assert out.errors == []
    assert out.predicted == [
        "TASPolicy tas/p: would create (predicted, not dry-run: kind TASPolicy.telemetry.intel.com is served "
        "only once this run applies its CustomResourceDefinition)"
    ]


def test_a_kind_known_only_to_a_stale_discovery_cache_is_predicted_too():
    stale = {"changed": False, "error": {"msg": "Failed to apply object: 404 page not found\n"}}
    out = classify([POLICY], [stale], None, {"namespaces": [], "kinds": ["TASPolicy.telemetry.intel.com"]})
    assert out.errors == [] and len(out.predicted) == 1


def test_what_the_run_does_not_create_stays_an_error_with_the_fix():
    empty = {"namespaces": [], "kinds": []}
    out = classify([SA, POLICY], [not_found("tas"), NO_KIND], None, empty)
    assert out.predicted == []
    assert len(out.errors) == 2
    assert "no task of this run creates namespace tas: create it, or choose one that exists" in out.errors[0]
    assert "no task of this run installs the CustomResourceDefinition of TASPolicy.telemetry.intel.com" in out.errors[1]


def test_other_errors_are_never_predicted():
    invalid = {"changed": False, "error": {"msg": 'Deployment.apps "x" is invalid: spec.replicas: Invalid value: -1'}}
    plan = {"namespaces": ["tas"], "kinds": []}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "tas"}}
    out = classify([dep], [invalid], None, plan)
    assert out.predicted == [] and "is invalid" in out.errors[0]


def test_the_task_namespace_applies_to_definitions_without_one():
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}}
    out = classify([sa], [not_found("tas")], "tas", {"namespaces": ["tas"], "kinds": []})
    assert out.predicted and out.errors == []


def test_kind_key_takes_the_group_before_the_last_slash_and_no_group_from_nothing():
    assert kind_key("apps/v1", "Deployment") == "Deployment.apps"
    assert kind_key("x.example.com/sub/v1", "Thing") == "Thing.x.example.com/sub"
    assert kind_key("", "Secret") == "Secret"
    assert kind_key(None, "Secret") == "Secret"


def test_a_plan_of_this_run_is_taken_whole_and_missing_lists_are_empty():
    fact = {"run": "111", "namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}
    assert planned_in(fact, "111") == {"namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}
    assert planned_in({"run": "111"}, "111") == {"namespaces": [], "kinds": []}


def test_a_plan_skips_what_is_no_object_and_incomplete_custom_resource_definitions():
    unnamed_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}
    no_group = {"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {"names": {"kind": "X"}}}
    no_kind = {"kind": "CustomResourceDefinition", "metadata": {"name": "y"}, "spec": {"group": "y.io"}}
    bare = {"kind": "CustomResourceDefinition", "metadata": {"name": "z"}}
    plan = plan_from(["text", None, NS, unnamed_ns, no_group, no_kind, bare, CRD], None, {})
    assert plan == {"namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}


def test_the_predicted_result_is_a_creation_with_headers_naming_the_object():
    plan = {"namespaces": ["tas"], "kinds": []}
    (predicted,) = classify([SA], [not_found("tas")], None, plan).results
    line = "ServiceAccount tas/tas: would create (predicted, not dry-run: namespace tas is created by this run)"
    assert predicted == {
        "changed": True,
        "method": "create",
        "predicted": True,
        "msg": line,
        "result": SA,
        "diff": {"before": {}, "after": SA, "before_header": "ServiceAccount tas/tas (absent)", "after_header": line},
    }


def test_errors_are_the_whole_message_with_the_fix_and_keep_their_result():
    empty = {"namespaces": [], "kinds": []}
    invalid = {"changed": False, "error": {"msg": 'Deployment.apps "x" is invalid: spec.replicas: Invalid value: -1'}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "tas"}}
    out = classify([SA, POLICY, dep], [not_found("tas"), NO_KIND, invalid], None, empty)
    assert out.errors == [
        f"ServiceAccount tas/tas: {not_found('tas')['error']['msg']} (no task of this run creates namespace tas: "
        "create it, or choose one that exists)",
        f"TASPolicy tas/p: {NO_KIND['error']['msg']} (no task of this run installs the CustomResourceDefinition of "
        "TASPolicy.telemetry.intel.com: install it first)",
        'Deployment tas/x: Deployment.apps "x" is invalid: spec.replicas: Invalid value: -1',
    ]
    assert out.results == [not_found("tas"), NO_KIND, invalid]
    assert out.predicted == []


def test_an_error_without_a_message_and_an_object_without_kind_or_name_are_still_named():
    forbidden = {"changed": False, "error": {"reason": "Forbidden"}}
    out = classify([{"metadata": {}}], [forbidden], None, {"namespaces": [], "kinds": []})
    assert out.errors == ["? ?: {'reason': 'Forbidden'}"]


def test_a_cluster_scoped_object_is_named_without_a_namespace():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "c"}}
    refused = {"changed": False, "error": {"msg": "forbidden"}}
    out = classify([crd], [refused], None, {"namespaces": [], "kinds": []})
    assert out.errors == ["CustomResourceDefinition c: forbidden"]


def test_a_result_that_is_no_mapping_passes_through():
    out = classify([SA, NS], ["skipped", OK], None, {"namespaces": [], "kinds": []})
    assert out.results == ["skipped", OK] and out.errors == [] and out.predicted == []


def test_a_planned_kind_or_namespace_does_not_excuse_other_errors():
    plan = {"namespaces": ["tas"], "kinds": ["TASPolicy.telemetry.intel.com"]}
    invalid = {"changed": False, "error": {"msg": 'TASPolicy.telemetry.intel.com "p" is invalid'}}
    out = classify([POLICY], [invalid], None, plan)
    assert out.predicted == [] and out.errors == ['TASPolicy tas/p: TASPolicy.telemetry.intel.com "p" is invalid']


def test_a_missing_namespace_is_only_a_namespace_error_for_a_namespaced_object():
    # no namespace (cluster-scoped, an empty task default): a namespace in the message is not this object's
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "c"}}
    out = classify([crd], [not_found("")], "", {"namespaces": [], "kinds": []})
    assert out.predicted == []
    assert out.errors == [f"CustomResourceDefinition c: {not_found('')['error']['msg']}"]


def test_an_object_without_kind_is_named_and_its_kind_key_is_the_group_alone():
    kindless = {"apiVersion": "telemetry.intel.com/v1alpha1", "metadata": {"name": "p", "namespace": "tas"}}
    out = classify([kindless], [NO_KIND], None, {"namespaces": [], "kinds": []})
    assert out.errors == [
        f"? tas/p: {NO_KIND['error']['msg']} (no task of this run installs the CustomResourceDefinition of "
        ".telemetry.intel.com: install it first)"
    ]


def test_a_plan_keeps_the_kinds_planned_by_earlier_tasks():
    known = {"namespaces": [], "kinds": ["Other.example.com"]}
    assert plan_from([CRD], None, known) == {
        "namespaces": [],
        "kinds": ["Other.example.com", "TASPolicy.telemetry.intel.com"],
    }
