"""What an uninstall deletes: a role's objects that are the collection's, in the role's order, and its
namespace only when nothing of anyone else is left there (filters removal_plan and
namespace_removal_plan over module_utils/scheduler/coexistence.py).

The coexistence, scheduler_config_path, scheduler_extender_coexistence filter plugin(s) checked directly,
without Ansible subprocesses: input checks, arguments passed on to the library (a recorder stands in for it),
errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.coexistence as f_coex
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.coexistence import namespace_removal_plan, removal_plan
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import coexistence
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.coexistence import CoexistenceError
from poweraware_testing import raises

DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "collectd", "namespace": "monitoring"}}
ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "poweraware:ksm"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls", "namespace": "monitoring"}}


def found(obj, labels=None, managers=()):
    meta = dict(obj["metadata"], labels=labels or {}, uid="u-" + obj["metadata"]["name"])
    meta["managedFields"] = [{"manager": m, "operation": "Apply"} for m in managers]
    return {**obj, "metadata": meta}


def test_one_query_per_object_by_name_namespaced_or_not():
    assert removal_plan([DAEMONSET, ROLE]) == {
        "queries": {
            "object_0": {"api_version": "apps/v1", "kind": "DaemonSet", "name": "collectd", "namespace": "monitoring"},
            "object_1": {
                "api_version": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "name": "poweraware:ksm",
            },
        },
        "remove": [],
        "steps": [],
        "kept": [],
    }


def test_ours_by_label_or_by_field_manager_go_in_the_given_order_and_the_rest_stay_named():
    plan = removal_plan(
        [DAEMONSET, ROLE, SECRET],
        {
            "object_0": [found(DAEMONSET, labels={"app.kubernetes.io/managed-by": "poweraware.k8s"})],
            # no label (an object a template left unlabelled), but written by our server-side apply
            "object_1": [found(ROLE, managers=["kube-controller-manager", "poweraware-power-models"])],
            # another installer's object of the name the role uses
            "object_2": [found(SECRET, labels={"app.kubernetes.io/managed-by": "Helm"}, managers=["helm"])],
        },
    )
    assert plan["remove"] == [DAEMONSET, ROLE]  # bare definitions, in order
    assert plan["kept"] == [
        "Secret monitoring/tls: not ours (app.kubernetes.io/managed-by=Helm; field managers helm), left in place"
    ]


def test_objects_that_own_pods_go_in_the_foreground_and_the_rest_at_once_in_order():
    """Kubernetes' garbage collector: a foreground deletion keeps the object (finalizer
    foregroundDeletion) until its dependents are gone, which is what makes a workload's pods go
    first; for an object without dependents it only delays its end, so those go in the background."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "monitoring"}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "prune", "namespace": "monitoring"}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "namespace": "monitoring"}}
    # a kind of the same name in another group owns no pods
    other = {"apiVersion": "example.com/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "monitoring"}}
    objects = [SECRET, deployment, DAEMONSET, service, ROLE, job, other]
    plan = removal_plan(objects, {f"object_{i}": [found(o, managers=["poweraware"])] for i, o in enumerate(objects)})
    assert plan["steps"] == [
        {"propagation": "Background", "objects": [SECRET]},
        {"propagation": "Foreground", "objects": [deployment, DAEMONSET]},
        {"propagation": "Background", "objects": [service, ROLE]},
        {"propagation": "Foreground", "objects": [job]},
        {"propagation": "Background", "objects": [other]},
    ]
    assert [o for step in plan["steps"] for o in step["objects"]] == plan["remove"] == objects
    assert removal_plan([SECRET], {})["steps"] == []  # nothing there: no delete at all


def test_what_is_not_there_or_listed_twice_is_removed_once_or_not_at_all():
    plan = removal_plan([DAEMONSET, ROLE, DAEMONSET], {"object_0": [found(DAEMONSET, managers=["poweraware"])]})
    assert plan["remove"] == [DAEMONSET] and plan["kept"] == []
    # a manager that merely starts like ours is not ours
    other = removal_plan([ROLE], {"object_0": [found(ROLE, managers=["powerawarectl"])]})
    assert other["remove"] == [ROLE]  # the prefix is the rule: every manager of ours starts with poweraware
    assert coexistence.applied_by_us(found(ROLE, managers=["kubectl"])) is False


def test_every_malformed_object_is_named_at_once():
    with pytest.raises(AnsibleFilterError) as err:
        removal_plan([{"kind": "Service", "metadata": {"name": "a"}}, {"apiVersion": "v1", "metadata": {}}])
    assert str(err.value) == (
        "removal: object 1 ({'kind': 'Service', 'metadata': {'name': 'a'}}) has no apiVersion; "
        "object 2 ({'apiVersion': 'v1', 'metadata': {}}) has no kind, metadata.name"
    )
    with pytest.raises(AnsibleFilterError, match="expected a list of objects, not dict"):
        removal_plan({})
    with pytest.raises(AnsibleFilterError, match="expected the resources k8s_info_many returned, not list"):
        removal_plan([ROLE], [])


NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}


def contents(**kinds):
    return {
        kind: [{"kind": kind, "metadata": {"name": n, "namespace": "monitoring"}} for n in names]
        for kind, names in kinds.items()
    }


def test_a_namespace_we_applied_with_only_what_kubernetes_puts_everywhere_goes():
    ours = found(NS, labels={"app.kubernetes.io/part-of": "poweraware"})
    plan = namespace_removal_plan(
        "monitoring", {"namespace": [ours], **contents(ConfigMap=["kube-root-ca.crt"], ServiceAccount=["default"])}
    )
    assert plan["remove"] is True and plan["reason"] == ""
    assert set(plan["queries"]) == {"namespace", *(kind for _v, kind in coexistence.NAMESPACE_CONTENTS)}
    assert plan["queries"]["Pod"] == {"api_version": "v1", "kind": "Pod", "namespace": "monitoring"}


def test_a_namespace_that_holds_anything_else_stays_and_says_what():
    ours = found(NS, labels={"app.kubernetes.io/part-of": "poweraware"})
    held = contents(
        PersistentVolumeClaim=["prometheus-data"], Secret=["a", "b", "c", "d", "e"], ConfigMap=["kube-root-ca.crt"]
    )
    plan = namespace_removal_plan("monitoring", {"namespace": [ours], **held})
    assert plan["remove"] is False
    assert plan["reason"] == (
        "namespace monitoring stays: it holds what is not the collection's (PersistentVolumeClaim prometheus-data, "
        "Secret a, Secret b, Secret c, Secret d and 1 more); delete it yourself once those are gone or moved "
        "(kubectl delete namespace monitoring)"
    )


def test_a_namespace_the_collection_did_not_apply_or_that_is_gone_stays_as_it_is():
    theirs = namespace_removal_plan("monitoring", {"namespace": [found(NS)]})
    assert theirs["remove"] is False and "the collection did not apply it" in theirs["reason"]
    assert namespace_removal_plan("monitoring", {"namespace": []})["remove"] is False
    assert namespace_removal_plan("monitoring") == {"queries": coexistence.namespace_queries("monitoring")}
    with pytest.raises(AnsibleFilterError, match="expected the resources k8s_info_many returned"):
        namespace_removal_plan("monitoring", [])


def test_a_namespace_another_component_of_ours_still_uses_stays_without_a_word():
    ours = found(NS, labels={"app.kubernetes.io/part-of": "poweraware"})
    still = {
        "namespace": [ours],
        "DaemonSet": [found({"kind": "DaemonSet", "metadata": {"name": "collectd"}}, managers=["poweraware"])],
        "Pod": [
            found(
                {"kind": "Pod", "metadata": {"name": "collectd-x1"}}, labels={"app.kubernetes.io/part-of": "poweraware"}
            )
        ],
    }
    assert namespace_removal_plan("monitoring", still) | {"queries": None} == {
        "queries": None,
        "remove": False,
        "reason": "",
    }
    mixed = dict(still, Secret=[found({"kind": "Secret", "metadata": {"name": "site-mirror"}})])
    assert "(Secret site-mirror)" in namespace_removal_plan("monitoring", mixed)["reason"]


def test_coexistence_passes_its_arguments_on(stub):
    decide = stub(f_coex, "decide")
    assert f_coex.coexistence(None, "collectd") == "result"
    assert f_coex.coexistence(({"kind": "DaemonSet"},), "tas", "adopt", {"selector": {"a": "b"}}) == "result"
    assert decide.calls == [
        (("collectd", "fail", []), {"expected": {}}),
        (("tas", "adopt", [{"kind": "DaemonSet"}]), {"expected": {"selector": {"a": "b"}}}),
    ]


def test_coexistence_errors_name_the_filter(stub):
    stub(f_coex, "decide", error=CoexistenceError("collectd_existing must be one of fail|adopt, got 'x'"))
    raises(
        lambda: f_coex.coexistence([], "collectd", "x"),
        "coexistence: collectd_existing must be one of fail|adopt, got 'x'",
    )


def test_scheduler_config_path_passes_text_on(stub):
    path = stub(f_coex, "scheduler_config_path")
    assert f_coex.scheduler_config_path_filter("kind: Pod") == "result"
    assert f_coex.scheduler_config_path_filter(None) == "result"
    assert path.calls == [(("kind: Pod",), {}), (("",), {})]


def test_scheduler_extender_coexistence_passes_its_arguments_on(stub):
    decide = stub(f_coex, "extender_coexistence")
    extenders = [{"url_prefix": "https://x"}]
    assert f_coex.scheduler_extender_coexistence(extenders) == "result"
    assert f_coex.scheduler_extender_coexistence(extenders, "adopt", "m", "c", "/etc/c.yaml", "/etc/m.yaml") == "result"
    assert f_coex.scheduler_extender_coexistence(extenders, "fail", None, None, None, None) == "result"
    assert decide.calls == [
        (("fail", "", "", "", extenders), {"manifest_path": ""}),
        (("adopt", "m", "c", "/etc/c.yaml", extenders), {"manifest_path": "/etc/m.yaml"}),
        (("fail", "", "", "", extenders), {"manifest_path": ""}),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"manifest_text": 1}, "scheduler_extender_coexistence: manifest_text must be text"),
        ({"config_text": b"x"}, "scheduler_extender_coexistence: config_text must be text"),
        ({"config_path": ["/etc/c.yaml"]}, "scheduler_extender_coexistence: config_path must be text"),
        ({"manifest_path": 5}, "scheduler_extender_coexistence: manifest_path must be text"),
    ],
)
def test_scheduler_extender_coexistence_wants_text(kwargs, message):
    raises(lambda: f_coex.scheduler_extender_coexistence([], "fail", **kwargs), message)


def test_scheduler_extender_coexistence_errors_name_the_filter(stub):
    stub(f_coex, "extender_coexistence", error=CoexistenceError("extenders must be a list"))
    raises(
        lambda: f_coex.scheduler_extender_coexistence("x"),
        "scheduler_extender_coexistence: extenders must be a list",
    )
