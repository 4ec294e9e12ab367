"""Waits that report (plugins/module_utils/cluster/wait_progress.py and poweraware.k8s.k8s_apply's steps).

The action is driven with kubernetes.core's module answers as runner.run_module gives them with
continue_on_error (one definition: the result flat; several: result.results; a wait that ran out:
the definition's `error` with kubernetes.core's ResourceTimeout message and the object).
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.action import k8s_apply
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.wait_progress import (
    Steps,
    describe_status,
    goal,
    is_timeout,
    label,
    progress_line,
    rollout_pending,
    step_length,
)

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "prometheus", "namespace": "monitoring"}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prometheus-config", "namespace": "monitoring"}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "taspolicies.telemetry.intel.com"},
}


def rolling(available=0, updated=1, generation=2, observed=2):
    return {
        "kind": "Deployment",
        "metadata": {"name": "prometheus", "namespace": "monitoring", "generation": generation},
        "spec": {"replicas": 1},
        "status": {
            "availableReplicas": available,
            "updatedReplicas": updated,
            "observedGeneration": observed,
            "conditions": [
                {
                    "type": "Available",
                    "status": "False",
                    "reason": "MinimumReplicasUnavailable",
                    "message": "Deployment does not have minimum availability.",
                },
                {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
            ],
        },
    }


def timeout(instance, name="prometheus", kind="Deployment"):
    return {
        "changed": False,
        "result": {},
        "error": {
            "msg": f'"{kind}" "{name}": Timed out waiting on resource',
            "result": instance,
            "changed": False,
            "duration": 20,
        },
    }


def test_a_deployments_status_in_words_names_replicas_generation_and_the_false_conditions():
    text = describe_status(rolling(observed=1))
    assert text.startswith("0 of 1 replicas available, 1 updated")
    assert "the controller has not seen generation 2 yet" in text
    assert "Available=False (MinimumReplicasUnavailable: Deployment does not have minimum availability.)" in text
    # a condition that holds is named without its reason
    assert "Progressing=True;" not in text and text.endswith("Progressing=True")


def test_daemonsets_crds_missing_objects_and_deletions_are_described():
    ds = {"kind": "DaemonSet", "status": {"numberReady": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3}}
    assert describe_status(ds) == "2 of 3 pods ready, 3 updated"
    crd = {
        "kind": "CustomResourceDefinition",
        "status": {"conditions": [{"type": "Established", "status": "False", "reason": "Installing"}]},
    }
    assert describe_status(crd) == "Established=False (Installing)"
    assert describe_status(None) == "not found yet"
    assert describe_status({"kind": "Secret"}) == "no status yet"
    assert describe_status({"kind": "Pod"}, "absent") == "still there"


def test_only_kubernetes_cores_wait_timeout_is_a_timeout():
    assert is_timeout(timeout(rolling()))
    assert not is_timeout({"error": {"msg": "Failed to patch object: forbidden"}})
    assert not is_timeout({"changed": True})


def test_the_goal_and_the_label_say_what_is_waited_for():
    assert goal({"type": "Available", "status": "True"}) == "until Available=True"
    assert goal(None) == "to be ready"
    assert goal(None, "absent") == "to be deleted"
    assert label(DEPLOY) == "Deployment monitoring/prometheus"
    assert label(CRD) == "CustomResourceDefinition taspolicies.telemetry.intel.com"
    line = progress_line(label(DEPLOY), goal({"type": "Available", "status": "True"}), timeout(rolling()), 20.4, 300)
    assert line.startswith(
        "waiting for Deployment monitoring/prometheus until Available=True (20 s of 300 s): 0 of 1 replicas available"
    )


def test_steps_retry_from_the_first_timeout_and_keep_what_changed_earlier():
    steps = Steps(3)
    first = [{"changed": True, "diff": {"before": 1}}, timeout(rolling()), {"changed": True}]
    assert steps.record(first) == [1]
    assert steps.pending == [1, 2]  # the one after it may need it: applied again too
    assert steps.record([{"changed": False, "result": {}}, {"changed": False}]) == []
    assert steps.pending == []
    assert steps.changed
    final = steps.final(["cm", "deploy", "svc"], "to be ready", 300, "present", keep_going=False)
    assert not final.get("failed")
    assert [r["changed"] for r in final["result"]["results"]] == [True, False, True]
    assert final["result"]["results"][0]["diff"] == {"before": 1}


def test_a_wait_that_runs_out_fails_with_what_it_waited_for_and_the_last_status():
    steps = Steps(1)
    steps.record([timeout(rolling())])
    final = steps.final(["Deployment monitoring/prometheus"], "until Available=True", 300, "present", keep_going=False)
    assert final["failed"]
    assert final["msg"].startswith(
        "Deployment monitoring/prometheus was not ready after 300 s (waited until Available=True); "
        "its status: 0 of 1 replicas available"
    )
    assert "Timed out waiting on resource" in final["msg"]
    assert "error" not in final


def test_other_errors_keep_the_modules_message_and_continue_on_error_keeps_each_error():
    steps = Steps(2)
    steps.record([{"changed": False, "error": {"msg": "Failed to apply object: forbidden"}}, {"changed": True}])
    assert (
        steps.final(["a", "b"], "to be ready", 60, "present", keep_going=False)["msg"]
        == "Failed to apply object: forbidden"
    )
    kept = steps.final(["a", "b"], "to be ready", 60, "present", keep_going=True)
    assert not kept.get("failed")
    assert kept["result"]["results"][0]["error"]["msg"].startswith("Failed to apply")


def deployment(generation=3, observed=3, replicas=1, updated=1, total=1, available=1, paused=False):
    """A Deployment as the module returns it at the end of its wait (status counts as the controller sets them)."""
    return {
        "kind": "Deployment",
        "metadata": {"name": "peaks", "namespace": "kube-system", "generation": generation},
        "spec": {"replicas": replicas, "paused": paused, "strategy": {"type": "Recreate"}},
        "status": {
            "observedGeneration": observed,
            "replicas": total,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "readyReplicas": available,
        },
    }


@pytest.mark.parametrize(
    "instance, pending",
    [
        # Recreate, right after a template change: the new generation observed, the old pod still
        # available and counted, no new one yet; kubernetes.core's predicate calls this ready
        (deployment(updated=0), "0 out of 1 new replicas have been updated"),
        (deployment(observed=2), "the deployment spec update to be observed"),
        # RollingUpdate's surge: the new pod is there, the old one not gone yet
        (deployment(total=2, available=2), "1 old replicas are pending termination"),
        (deployment(available=0), "0 of 1 updated replicas are available"),
        (deployment(replicas=3, updated=3, total=3, available=2), "2 of 3 updated replicas are available"),
        (deployment(), None),
        (deployment(replicas=0, updated=0, total=0, available=0), None),
        (deployment(updated=0, paused=True), None),  # kubernetes.core's answer stands
        ({"kind": "StatefulSet", "status": {}}, None),  # kubernetes.core's predicates check updated ones
        ({"kind": "ConfigMap"}, None),
        (None, None),
    ],
)
def test_a_deployments_rollout_is_over_by_kubectls_rule(instance, pending):
    assert rollout_pending(instance) == pending


def test_a_deployment_ready_by_kubernetes_cores_check_waits_for_its_rollout_when_no_condition_was_named():
    early = {"changed": True, "result": deployment(updated=0)}
    steps = Steps(2, rollout=True)
    assert steps.record([{"changed": False, "result": {"kind": "ConfigMap"}}, early]) == [1]
    assert steps.pending == [1]
    assert steps.record([{"changed": False, "result": deployment()}]) == []
    final = steps.final(["cm", "Deployment kube-system/peaks"], "to be ready", 60, "present", keep_going=False)
    assert not final.get("failed") and final["changed"]
    # a wait on a condition the task named is the task's: the module's answer stands
    assert Steps(1).record([early]) == []


def test_a_rollout_that_does_not_end_fails_naming_what_it_still_waits_for():
    steps = Steps(1, rollout=True)
    steps.record([{"changed": False, "result": deployment(total=2, available=2)}])
    final = steps.final(["Deployment kube-system/peaks"], "to be ready", 60, "present", keep_going=False)
    assert final["failed"]
    assert final["msg"].startswith("Deployment kube-system/peaks was not ready after 60 s (waited to be ready)")
    assert "the rollout: 1 old replicas are pending termination" in final["msg"]


class FakeModule:
    """kubernetes.core.k8s as the action sees it: answers in run_module's shapes, on a fake clock."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []
        self.sleeps = []
        self.now = 1000.0
        self.instant = False  # a module that answers at once (its wait was satisfied)

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self, _action, module_name=None, module_args=None, task_vars=None, **_kwargs):
        self.calls.append(module_args)
        self.now += 0.5 if self.instant else module_args["wait_timeout"]
        answer = self.answers.pop(0)
        if len(module_args["definition"]) == 1 and isinstance(answer, list):
            return answer[0]
        return (
            {"changed": any(a.get("changed") for a in answer), "result": {"results": answer}}
            if isinstance(answer, list)
            else answer
        )


@pytest.fixture
def action(monkeypatch):
    shown = []
    monkeypatch.setattr(k8s_apply.display, "display", lambda msg, *a, **k: shown.append(msg))
    instance = object.__new__(k8s_apply.ActionModule)

    def run(answers):
        fake = FakeModule(answers)

        def execute(self, **kwargs):
            return fake(self, **kwargs)

        monkeypatch.setattr(k8s_apply.ActionModule, "_execute_module", execute)
        monkeypatch.setattr(k8s_apply.time, "monotonic", fake.monotonic)
        monkeypatch.setattr(k8s_apply.time, "sleep", fake.sleep)
        return fake

    return instance, run, shown


ARGS = {
    "definition": [CM, DEPLOY],
    "wait": True,
    "wait_timeout": 60,
    "wait_condition": {"type": "Available", "status": "True"},
    "apply": True,
}


def test_a_slow_rollout_is_reported_every_step_and_its_changes_are_kept(action):
    instance, run, shown = action
    fake = run(
        [
            [{"changed": True}, timeout(rolling())],
            [timeout(rolling(available=0))],
            [{"changed": False, "result": {"kind": "Deployment"}}],
        ]
    )
    result = instance._wait_in_steps("kubernetes.core.k8s", dict(ARGS), {"inventory_hostname": "cp-1"})
    assert not result.get("failed")
    assert result["changed"]  # the ConfigMap changed in the first step
    assert [len(c["definition"]) for c in fake.calls] == [2, 1, 1]
    assert all(c["continue_on_error"] for c in fake.calls)
    assert [c["wait_timeout"] for c in fake.calls] == [20, 20, 20]
    assert shown == [
        "cp-1: waiting for Deployment monitoring/prometheus until Available=True (20 s of 60 s): "
        + describe_status(rolling()),
        "cp-1: waiting for Deployment monitoring/prometheus until Available=True (40 s of 60 s): "
        + describe_status(rolling()),
    ]


def test_a_ready_object_costs_one_run_and_says_nothing(action):
    instance, run, shown = action
    fake = run([[{"changed": False}, {"changed": False}]])
    result = instance._wait_in_steps("kubernetes.core.k8s", dict(ARGS), {})
    assert result["changed"] is False and len(fake.calls) == 1 and shown == []


def test_the_last_step_is_cut_to_the_timeout_and_then_the_task_fails(action):
    instance, run, shown = action
    fake = run([[{"changed": False}, timeout(rolling())]] + [[timeout(rolling())]] * 3)
    result = instance._wait_in_steps("kubernetes.core.k8s", dict(ARGS, wait_timeout=50), {})
    assert [c["wait_timeout"] for c in fake.calls] == [20, 20, 10]
    assert result["failed"] and "was not ready after 50 s" in result["msg"]
    assert len(shown) == 2


def test_no_step_leaves_a_stub_of_under_half_a_step(action):
    instance, run, shown = action
    fake = run([[{"changed": False}, timeout(rolling())]] + [[timeout(rolling())]] * 3)
    instance._wait_in_steps("kubernetes.core.k8s", dict(ARGS, wait_timeout=45), {})
    assert [c["wait_timeout"] for c in fake.calls] == [20, 25]
    assert len(shown) == 1
    assert [step_length(r) for r in (0.2, 5, 29.4, 29.6, 30, 300)] == [1, 5, 29, 20, 20, 20]


def test_a_module_that_cannot_start_fails_with_its_own_message(action):
    instance, run, _shown = action
    run([{"failed": True, "msg": "Could not create API client: kubeconfig not found"}])
    result = instance._wait_in_steps("kubernetes.core.k8s", dict(ARGS), {})
    assert result == {"failed": True, "msg": "Could not create API client: kubeconfig not found"}


@pytest.mark.parametrize(
    "value, expected", [(True, True), ("True", True), ("false", False), (False, False), (None, False), ("yes", True)]
)
def test_a_templated_wait_is_read_as_yaml_would(value, expected):
    assert k8s_apply.truthy(value) is expected


def test_a_rollout_is_asked_about_again_after_the_modules_poll_interval_and_reported_every_step(action):
    instance, run, shown = action
    early = {"changed": False, "result": deployment(updated=0)}
    fake = run([[{"changed": True}, early]] + [[early]] * 40 + [[{"changed": False, "result": deployment()}]])
    fake.instant = True
    args = {"definition": [CM, DEPLOY], "wait": True, "wait_timeout": 120, "wait_sleep": 2, "apply": True}
    result = instance._wait_in_steps("kubernetes.core.k8s", args, {})
    assert not result.get("failed") and result["changed"]
    assert len(fake.calls) == 42 and set(fake.sleeps) == {2}  # the module's wait_sleep between two runs
    # one line per REPORT_EVERY seconds (runs end 2.5 s apart, the last waiting one at 100.5 s), not one per run
    assert [line.split("(")[1].split(" s of")[0] for line in shown] == ["20", "40", "60", "80", "100"]
    assert shown[0].endswith("to be ready (20 s of 120 s): 1 of 1 replicas available, 0 updated")
