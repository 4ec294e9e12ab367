# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits that say what they wait for (pure): the steps of a long kubernetes.core wait.

kubernetes.core.k8s waits silently: a rollout that never ends shows nothing for its whole
wait_timeout (five minutes for some roles), then one line. poweraware.k8s.k8s_apply waits in steps
of REPORT_EVERY seconds instead; after each step that ended without the object being ready it
prints what it waits for, what the object's status says now and how long it has waited
(docs/site.md, "Waits"). A step re-applies the objects it waits for, which changes nothing (the
same server-side apply), so the module's own wait, predicates and conditions stay unchanged.
"""

from __future__ import annotations

# Seconds between two progress lines. A step costs one more module run (under a second), so a wait
# that ends within the first step costs nothing extra.
REPORT_EVERY = 20

# kubernetes.core's ResourceTimeout message (module_utils/k8s/runner.py, perform_action).
_TIMEOUT_MARK = "Timed out waiting on resource"


def step_length(remaining: float) -> int:
    """The next step's wait_timeout: REPORT_EVERY, or all that is left when a step would leave a
    stub of under half a step (one more module run for a line that says nothing new)."""
    # whole seconds: the first step of a 30 s wait starts a few microseconds after its clock did
    seconds = max(1, int(round(remaining)))
    return seconds if seconds < REPORT_EVERY * 1.5 else REPORT_EVERY


def is_timeout(result: dict) -> bool:
    """Whether a definition's result is kubernetes.core's wait timeout (not another error)."""
    error = result.get("error") if isinstance(result, dict) else None
    return isinstance(error, dict) and _TIMEOUT_MARK in str(error.get("msg", ""))


def _num(value) -> int:
    return value if isinstance(value, int) else 0


def rollout_pending(instance) -> str | None:
    """What a Deployment's rollout still waits for, by `kubectl rollout status`'s rule; None when done.

    kubernetes.core's Deployment predicate (waiter.deployment_ready) checks the observed generation
    and that every replica is available, not that they are the new template's: right after a
    template change the controller has observed the new generation while the old pod still counts
    as available (strategy Recreate: it is being deleted and the new one does not exist yet), so the
    module's wait ends before the rollout starts. kubectl's DeploymentStatusViewer
    (k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go) also asks for every replica updated,
    no old replica left and every updated one available; its words are kept.
    """
    if not isinstance(instance, dict) or instance.get("kind") != "Deployment":
        return None
    spec = instance.get("spec") or {}
    status = instance.get("status") or {}
    if spec.get("paused"):
        return None  # a paused rollout does not progress: kubernetes.core's answer stands
    generation = (instance.get("metadata") or {}).get("generation")
    if isinstance(generation, int) and _num(status.get("observedGeneration")) < generation:
        return "the deployment spec update to be observed"
    wanted = spec.get("replicas", 1)
    updated, total = _num(status.get("updatedReplicas")), _num(status.get("replicas"))
    if isinstance(wanted, int) and updated < wanted:
        return f"{updated} out of {wanted} new replicas have been updated"
    if total > updated:
        return f"{total - updated} old replicas are pending termination"
    available = _num(status.get("availableReplicas"))
    if available < updated:
        return f"{available} of {updated} updated replicas are available"
    return None


def describe_status(instance, state: str = "present") -> str:
    """What the object's status says now, in words (`0 of 1 replicas available, 1 updated`)."""
    if state == "absent":
        return "still there" if instance else "gone"
    if not isinstance(instance, dict) or not instance:
        return "not found yet"
    kind = instance.get("kind", "")
    spec = instance.get("spec") or {}
    status = instance.get("status") or {}
    parts = []
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        wanted = spec.get("replicas", 1)
        ready_key = "availableReplicas" if kind == "Deployment" else "readyReplicas"
        ready_word = "available" if kind == "Deployment" else "ready"
        parts.append(
            f"{_num(status.get(ready_key))} of {wanted} replicas {ready_word}, "
            f"{_num(status.get('updatedReplicas'))} updated"
        )
    elif kind == "DaemonSet":
        parts.append(
            f"{_num(status.get('numberReady'))} of {_num(status.get('desiredNumberScheduled'))} pods ready, "
            f"{_num(status.get('updatedNumberScheduled'))} updated"
        )
    generation = (instance.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        parts.append(f"the controller has not seen generation {generation} yet")
    for condition in status.get("conditions") or []:
        if not isinstance(condition, dict):
            continue
        text = f"{condition.get('type')}={condition.get('status')}"
        if condition.get("status") != "True" and (condition.get("reason") or condition.get("message")):
            why = condition.get("reason") or ""
            if condition.get("message"):
                why = f"{why}: {condition['message']}" if why else condition["message"]
            text += f" ({why})"
        parts.append(text)
    return "; ".join(parts) if parts else "no status yet"


def label(definition: dict, default_namespace=None) -> str:
    """`Deployment monitoring/prometheus` (cluster-scoped objects without a namespace)."""
    meta = definition.get("metadata") or {}
    namespace = meta.get("namespace") or default_namespace
    name = meta.get("name", "?")
    return f"{definition.get('kind', '?')} {namespace}/{name}" if namespace else f"{definition.get('kind', '?')} {name}"


def goal(condition, state: str = "present") -> str:
    """What the wait ends on, as the task asked for it."""
    if state == "absent":
        return "to be deleted"
    if isinstance(condition, dict) and condition.get("type"):
        text = f"until {condition['type']}={condition.get('status', 'True')}"
        return f"{text} ({condition['reason']})" if condition.get("reason") else text
    return "to be ready"


def _instance(result) -> dict:
    return (result.get("error") or {}).get("result") if isinstance(result, dict) else None


def progress_line(what: str, wanted: str, result: dict, elapsed: float, total: int, state: str = "present") -> str:
    """One report: what is waited for, for how long, and what its status says now."""
    return (
        f"waiting for {what} {wanted} ({int(elapsed)} s of {int(total)} s): {describe_status(_instance(result), state)}"
    )


def timeout_message(what: str, wanted: str, result: dict, total: int, state: str = "present") -> str:
    """The failure of a wait that ran out: what, how long, the last status, and kubernetes.core's words."""
    own = (result.get("error") or {}).get("msg", "") if isinstance(result, dict) else ""
    return (
        f"{what} was not {'deleted' if state == 'absent' else 'ready'} after {int(total)} s (waited {wanted}); "
        f"its status: {describe_status(_instance(result), state)}. Look at its events "
        f"(kubectl describe) and its pods' logs, or raise the role's wait timeout. ({own})"
    )


class Steps:
    """The definitions' results over the steps of one wait.

    Every step applies `pending` (indices into the task's definitions) with continue_on_error, so
    each definition answers on its own. A definition whose wait timed out, and every one after it
    (it may need the first: a custom resource after its CRD), is applied again in the next step;
    the others are final. A definition changed when any step changed it; its diff is the one of the
    step that changed it.
    """

    def __init__(self, count: int, rollout: bool = False):
        self.results: list = [None] * count
        self.pending: list[int] = list(range(count))
        # whether a Deployment the module calls ready also waits for its rollout (rollout_pending):
        # a wait "to be ready", not one on a condition the task named
        self.rollout = rollout

    def record(self, results: list[dict]) -> list[int]:
        """Take one step's results (in `pending` order); return the indices still waiting."""
        waiting = []
        for index, result in zip(self.pending, results):
            earlier = self.results[index]
            merged = dict(result)
            pending = self.rollout and not merged.get("error") and rollout_pending(merged.get("result"))
            if pending:
                # waited for like a wait that ran out: applied again, reported, and named if the time ends
                merged["error"] = {"msg": f"{_TIMEOUT_MARK} (the rollout: {pending})", "result": merged["result"]}
            if earlier is not None:
                merged["changed"] = bool(earlier.get("changed")) or bool(result.get("changed"))
                if earlier.get("changed") and "diff" in earlier:
                    merged["diff"] = earlier["diff"]
            self.results[index] = merged
            if is_timeout(merged):
                waiting.append(index)
        if waiting:
            self.pending = [i for i in self.pending if i >= waiting[0]]
        else:
            self.pending = []
        return waiting

    @property
    def changed(self) -> bool:
        return any(bool(r and r.get("changed")) for r in self.results)

    def final(self, labels: list[str], wanted: str, total: int, state: str, keep_going: bool) -> dict:
        """The task's result in the module's shape: flat for one definition, `result.results` for several.

        As the module does: without continue_on_error the first error fails the task (a wait that
        ran out says what it waited for and the object's last status); with it, each definition
        keeps its error.
        """
        results = [dict(r or {}) for r in self.results]
        failed_at = next((i for i, r in enumerate(results) if isinstance(r.get("error"), dict)), None)
        if not keep_going:
            for r in results:
                r.pop("error", None)
        merged = dict(results[0]) if len(results) == 1 else {"result": {"results": results}}
        merged["changed"] = self.changed
        if failed_at is not None and not keep_going:
            error = self.results[failed_at]["error"]
            if len(results) == 1:
                merged.update({k: v for k, v in error.items() if k != "msg"})
                merged["changed"] = self.changed
            merged["failed"] = True
            merged["msg"] = (
                timeout_message(labels[failed_at], wanted, self.results[failed_at], total, state)
                if is_timeout(self.results[failed_at])
                else error.get("msg", "")
            )
        return merged
