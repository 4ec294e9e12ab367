# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dry run's plan: which objects a check-mode run predicts instead of dry-running (pure).

A server-side dry run creates nothing, so an object in a namespace the run would create, or of a
kind whose CustomResourceDefinition the run would install, is refused with NotFound. Such an
object is what the real run would create: it is reported as a predicted creation, with the object
as its diff. Every other refusal stays an error, now saying what the run lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The host fact that carries the plan from task to task (and play to play) within one run.
FACT = "_poweraware_dry_run_creates"


def kind_key(api_version: str, kind: str) -> str:
    """`Kind.group` as a CRD names it (`TASPolicy.telemetry.intel.com`); core kinds have no group."""
    group = api_version.rpartition("/")[0] if "/" in (api_version or "") else ""
    return f"{kind}.{group}" if group else kind


def planned_in(fact, run: str) -> dict[str, list[str]]:
    """The plan recorded earlier in this run (a fact from another run, say a fact cache, is ignored)."""
    if not isinstance(fact, dict) or fact.get("run") != run:
        return {"namespaces": [], "kinds": []}
    return {"namespaces": list(fact.get("namespaces", [])), "kinds": list(fact.get("kinds", []))}


def plan_from(definitions: list[dict], default_namespace, known: dict[str, list[str]]) -> dict[str, list[str]]:
    """`known` plus the namespaces and CRD kinds these definitions apply."""
    namespaces = set(known.get("namespaces", []))
    kinds = set(known.get("kinds", []))
    for d in definitions:
        if not isinstance(d, dict):
            continue
        meta = d.get("metadata") or {}
        if d.get("kind") == "Namespace" and meta.get("name"):
            namespaces.add(meta["name"])
        elif d.get("kind") == "CustomResourceDefinition":
            spec = d.get("spec") or {}
            names = spec.get("names") or {}
            if names.get("kind") and spec.get("group"):
                kinds.add(f"{names['kind']}.{spec['group']}")
    return {"namespaces": sorted(namespaces), "kinds": sorted(kinds)}


@dataclass
class Outcome:
    results: list[dict] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _label(d: dict, namespace) -> str:
    name = (d.get("metadata") or {}).get("name", "?")
    return f"{d.get('kind', '?')} {namespace}/{name}" if namespace else f"{d.get('kind', '?')} {name}"


def classify(definitions: list[dict], results: list[dict], default_namespace, plan: dict[str, list[str]]) -> Outcome:
    """Each definition's dry-run result, or its predicted creation, or its error (with the fix)."""
    out = Outcome()
    for d, r in zip(definitions, results):
        error = r.get("error") if isinstance(r, dict) else None
        if not error:
            out.results.append(r)
            continue
        msg = str(error.get("msg", error))
        # kubernetes.core quotes the API's Status as JSON inside its message.
        text = msg.replace('\\"', '"')
        meta = d.get("metadata") or {}
        namespace = meta.get("namespace") or default_namespace
        key = kind_key(d.get("apiVersion", ""), d.get("kind", ""))
        label = _label(d, namespace)
        # Unknown to discovery, or known only to a stale discovery cache (the CRD was just deleted):
        # the API server then answers a bare 404 for the kind's path.
        kind_missing = "Failed to find exact match" in text or "404 page not found" in text
        namespace_missing = bool(namespace) and f'namespaces "{namespace}" not found' in text
        reason = None
        if kind_missing and key in plan["kinds"]:
            reason = f"kind {key} is served only once this run applies its CustomResourceDefinition"
        elif namespace_missing and namespace in plan["namespaces"]:
            reason = f"namespace {namespace} is created by this run"
        if reason is None:
            fix = ""
            if kind_missing:
                fix = f" (no task of this run installs the CustomResourceDefinition of {key}: install it first)"
            elif namespace_missing:
                fix = f" (no task of this run creates namespace {namespace}: create it, or choose one that exists)"
            out.errors.append(f"{label}: {msg}{fix}")
            out.results.append(r)
            continue
        line = f"{label}: would create (predicted, not dry-run: {reason})"
        out.predicted.append(line)
        out.results.append(
            {
                "changed": True,
                "method": "create",
                "predicted": True,
                "msg": line,
                "result": d,
                "diff": {
                    "before": {},
                    "after": d,
                    "before_header": f"{label} (absent)",
                    "after_header": line,
                },
            }
        )
    return out
