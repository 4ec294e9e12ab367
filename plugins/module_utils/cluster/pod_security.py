# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod Security Admission labels for the namespaces the collection writes into (pure).

Kubernetes' PodSecurity admission (GA in 1.25) enforces one of three levels per namespace, read
from ``pod-security.kubernetes.io/<mode>`` labels. The rules here:

- A namespace the collection creates gets ``enforce`` at the level its pods need, and ``audit`` and
  ``warn`` at ``restricted``, so anything looser than restricted shows up in the audit log and as a
  warning to whoever applies it. Versions are ``latest``: the levels' meaning follows the cluster.
- A namespace that already exists without an ``enforce`` label is someone else's: its Pod Security
  labels are left alone (adding ``enforce`` would reject the next pod of a workload we know nothing
  of) and the caller reports the level it would have set.
- A namespace that already enforces a level keeps it when our pods fit (a namespace shared by two
  components keeps the looser level the first one set; we never tighten under someone's pods), and
  is refused, before anything is applied, when it is stricter than our pods need.
"""

from __future__ import annotations

from collections.abc import Mapping

# Most permissive first: the index orders the levels.
LEVELS = ("privileged", "baseline", "restricted")
PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")


def pod_security_labels(namespace, existing, level, component, reason, variable):
    """The Pod Security labels our apply of ``namespace`` declares, and what is wrong.

    ``existing`` is the Namespace object as read (``None`` when absent); ``level`` the least the
    component's pods need and ``reason`` why, for messages; ``variable`` the role variable naming
    the namespace (the fix names it). Returns ``{"labels", "note", "errors"}``: the labels to put
    in the applied object (existing Pod Security labels are repeated, so a server-side apply keeps
    them), a note when the namespace is left without a level, and every problem found.
    """
    errors = []
    if level not in LEVELS:
        errors.append(f"{component}: pod security level {level!r} is not one of {', '.join(LEVELS)}")
        return {"labels": {}, "note": "", "errors": errors}
    if existing is None:
        return {"labels": _labels(level), "note": "", "errors": errors}
    labels = (existing.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping):
        labels = {}
    kept = {k: v for k, v in labels.items() if k.startswith(PREFIX)}
    enforced = kept.get(PREFIX + "enforce")
    if enforced is None:
        note = (
            f"namespace {namespace} was there before us and enforces no Pod Security level; its labels "
            f"are left as they are ({component} runs at {level!r}: label it {PREFIX}enforce={level} "
            f"if everything in it may)"
        )
        return {"labels": kept, "note": note, "errors": errors}
    if enforced not in LEVELS:
        errors.append(
            f"namespace {namespace}: label {PREFIX}enforce={enforced!r} is not a Pod Security level "
            f"({', '.join(LEVELS)}); the API server rejects every pod there. Fix the label, or set "
            f"{variable} to another namespace."
        )
    elif LEVELS.index(enforced) > LEVELS.index(level):
        errors.append(
            f"namespace {namespace} enforces Pod Security level {enforced!r}, but {component} needs "
            f"{level!r}: {reason}. Its pods would be rejected. Set {variable} to a namespace of its "
            f"own (the role creates it at {level!r}), or label {namespace} "
            f"{PREFIX}enforce={level} yourself if everything in it may run at that level."
        )
    return {"labels": kept, "note": "", "errors": errors}


def _labels(level):
    labels = {PREFIX + "enforce": level, PREFIX + "enforce-version": "latest"}
    for mode in MODES[1:]:
        labels[PREFIX + mode] = "restricted"
        labels[PREFIX + mode + "-version"] = "latest"
    return labels
