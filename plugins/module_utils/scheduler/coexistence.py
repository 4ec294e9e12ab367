# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Coexistence with an installation the collection did not make (for example one BMRA set up).

Pure decisions, no Ansible: the roles read what exists (``kubernetes.core.k8s_info`` for API
objects, ``slurp`` for kube-scheduler's manifest and configuration) and pass it here through the
``poweraware.k8s.coexistence`` and ``poweraware.k8s.scheduler_extender_coexistence`` filters.

For each component the user chooses with one role variable (``<role>_existing``) what happens when
something that is not ours is already there:

- ``fail`` (default): stop before the role changes anything, naming every object found, who
  manages it and the variable that chooses;
- ``adopt``: use what exists; the role does not deploy its own and says so in one line.

"Ours" is what the collection's templates label ``app.kubernetes.io/managed-by: poweraware.k8s``.

Removal (``<role>_state: absent``) goes by the same idea of ours, widened to what the collection's
field managers (``poweraware``, ``poweraware-...``) wrote: ``removal`` keeps anything else that
carries one of a role's names (``removal_plan`` filter).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.common.yaml import HAS_YAML, yaml_load
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as sm

CHOICES = ("fail", "adopt")
OUR_MANAGER_LABEL = "app.kubernetes.io/managed-by"
OUR_MANAGER = "poweraware.k8s"
# The field managers of the collection's server-side applies: poweraware, poweraware-power-models
OUR_FIELD_MANAGER = "poweraware"
SCHEDULER_VARIABLE = "scheduler_extender_existing"

# component -> (variable that chooses, what it is, what "adopt" leaves out)
COMPONENTS = {
    "collectd": (
        "collectd_existing",
        "collectd",
        "our collectd DaemonSet, ConfigMap, ServiceAccount and Service are not applied and its wait is skipped",
    ),
    "prometheus_adapter": (
        "prometheus_adapter_existing",
        "the custom metrics API (custom.metrics.k8s.io)",
        "our Prometheus Adapter, its certificates and its APIService are not applied and its waits are skipped",
    ),
    "nfd": (
        "nfd_existing",
        "Node Feature Discovery",
        "our NFD CRDs, nfd-master, nfd-worker and power NodeFeatureRule are not applied and its waits are skipped",
    ),
    "tas": (
        "tas_existing",
        "Telemetry Aware Scheduling",
        "our TAS certificates, TASPolicy CRD, Deployment and Service are not applied and its wait is skipped",
    ),
}

# Why an object that is not ours is in the way, by kind.
_WHY = {
    "DaemonSet": "a DaemonSet's selector cannot be changed, so ours cannot be applied over it",
    "APIService": "there is one APIService per API group version, so applying ours would take it over "
    "(server-side apply conflict)",
    "CustomResourceDefinition": "applying ours would replace its schema under the installation that uses it",
    "Deployment": "two installations would act on the same objects",
    "Service": "applying ours would take it over",
}


class CoexistenceError(ValueError):
    """Arguments the decision cannot use (a programming or configuration error, not a conflict)."""


def _meta(obj):
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def object_name(obj):
    """``Kind namespace/name`` (namespaced) or ``Kind name`` (cluster-scoped)."""
    meta = _meta(obj)
    kind = obj.get("kind") or "object"
    name = meta.get("name") or "?"
    if meta.get("namespace"):
        return f"{kind} {meta['namespace']}/{name}"
    return f"{kind} {name}"


def is_ours(obj):
    labels = _meta(obj).get("labels") or {}
    return labels.get(OUR_MANAGER_LABEL) == OUR_MANAGER


def applied_by_us(obj):
    """Labelled ours, or written by one of the collection's field managers (server-side apply)."""
    if is_ours(obj):
        return True
    entries = _meta(obj).get("managedFields") or []
    return any(
        isinstance(entry, dict) and str(entry.get("manager") or "").startswith(OUR_FIELD_MANAGER) for entry in entries
    )


# The kinds whose objects own pods through ownerReferences ((API group, kind)): their deletion is
# propagated in the foreground, so that their pods are gone before they are and a waited removal
# ends with nothing of the component running. Every other object is deleted in the background,
# which removes it at once: a foreground deletion adds the garbage collector's finalizer to any
# object, dependents or not, and the wait then polls again a second later for each of them.
POD_OWNERS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "DaemonSet"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("batch", "Job"),
        ("batch", "CronJob"),
    }
)


def propagation(obj):
    """``Foreground`` for an object that owns pods (POD_OWNERS), ``Background`` for any other."""
    group = obj["apiVersion"].rpartition("/")[0]
    return "Foreground" if (group, obj["kind"]) in POD_OWNERS else "Background"


def _steps(definitions):
    """The definitions in their order, cut where the propagation changes: one delete per step."""
    steps = []
    for definition in definitions:
        policy = propagation(definition)
        if steps and steps[-1]["propagation"] == policy:
            steps[-1]["objects"].append(definition)
        else:
            steps.append({"propagation": policy, "objects": [definition]})
    return steps


def _removal_key(index):
    return f"object_{index}"


def removal(objects, found=None):
    """A role's removal: ``objects`` are its objects in removal order, each ``{apiVersion, kind,
    metadata: {name, namespace}}`` (namespace for namespaced kinds). Returns ``queries`` for
    ``k8s_info_many`` (one per object) and, once ``found`` (that module's ``resources``) is given,
    ``remove`` (the objects that exist and are ours, in order, as definitions to delete), ``steps``
    (``remove`` cut into consecutive deletes, each ``{propagation, objects}``: see POD_OWNERS) and
    ``kept`` (one line per object of that name that is not ours, which stays)."""
    if not isinstance(objects, list):
        raise CoexistenceError(f"removal: expected a list of objects, not {type(objects).__name__}")
    problems, queries = [], {}
    for index, obj in enumerate(objects):
        meta = _meta(obj)
        missing = [
            field
            for field, value in (
                ("apiVersion", obj.get("apiVersion") if isinstance(obj, dict) else None),
                ("kind", obj.get("kind") if isinstance(obj, dict) else None),
                ("metadata.name", meta.get("name")),
            )
            if not isinstance(value, str) or not value
        ]
        if missing:
            problems.append(f"object {index + 1} ({obj!r}) has no {', '.join(missing)}")
            continue
        query = {"api_version": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"]}
        if meta.get("namespace"):
            query["namespace"] = meta["namespace"]
        queries[_removal_key(index)] = query
    if problems:
        raise CoexistenceError("removal: " + "; ".join(problems))
    plan = {"queries": queries, "remove": [], "steps": [], "kept": []}
    if found is None:
        return plan
    if not isinstance(found, dict):
        raise CoexistenceError(f"removal: expected the resources k8s_info_many returned, not {type(found).__name__}")
    seen = []
    for index, obj in enumerate(objects):
        if obj in seen:  # listed twice (two of a role's names that are the same): removed once
            continue
        seen.append(obj)
        for existing in found.get(_removal_key(index)) or []:
            if applied_by_us(existing):
                meta = _meta(obj)
                definition = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {"name": meta["name"]}}
                if meta.get("namespace"):
                    definition["metadata"]["namespace"] = meta["namespace"]
                plan["remove"].append(definition)
            else:
                plan["kept"].append(f"{object_name(existing)}: not ours ({managed_by(existing)}), left in place")
    plan["steps"] = _steps(plan["remove"])
    return plan


# What Kubernetes puts in every namespace (kube-controller-manager's root CA publisher and service
# account controller): a namespace holding only these holds nothing of anyone's.
NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}
# The kinds a namespace is looked into before it is deleted with everything in it
NAMESPACE_CONTENTS = (
    ("v1", "Pod"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)


def namespace_queries(namespace):
    """``k8s_info_many`` queries for a namespace and what it holds (``namespace_removal`` reads them)."""
    queries = {"namespace": {"api_version": "v1", "kind": "Namespace", "name": namespace}}
    for api_version, kind in NAMESPACE_CONTENTS:
        queries[kind] = {"api_version": api_version, "kind": kind, "namespace": namespace}
    return queries


def namespace_removal(namespace, found):
    """Whether a role's namespace goes once the role's objects are gone: ``{remove, reason}``. It goes
    when the collection applied it (labelled ``app.kubernetes.io/part-of: poweraware``) and holds
    nothing but what Kubernetes puts in every namespace; otherwise it stays, and ``reason`` says why
    (nothing when what is left is another component of the collection, whose removal takes it)."""
    if not isinstance(found, dict):
        raise CoexistenceError(f"namespace_removal: expected the resources k8s_info_many returned, not {found!r}")
    existing = found.get("namespace") or []
    if not existing:
        return {"remove": False, "reason": ""}
    labels = _meta(existing[0]).get("labels") or {}
    if labels.get("app.kubernetes.io/part-of") != "poweraware":
        return {"remove": False, "reason": f"namespace {namespace} stays: the collection did not apply it"}
    held, ours = [], []
    for _api_version, kind in NAMESPACE_CONTENTS:
        for obj in found.get(kind) or []:
            if (obj.get("kind") or kind, _meta(obj).get("name")) in NAMESPACE_DEFAULTS:
                continue
            # a pod carries its template's app.kubernetes.io/part-of=poweraware, not the managed-by label
            labels = _meta(obj).get("labels") or {}
            mine = applied_by_us(obj) or labels.get("app.kubernetes.io/part-of") == "poweraware"
            (ours if mine else held).append(f"{obj.get('kind') or kind} {_meta(obj).get('name')}")
    held.sort()
    if not held and ours:  # another component of the collection is still there: it removes the namespace
        return {"remove": False, "reason": ""}
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        return {
            "remove": False,
            "reason": f"namespace {namespace} stays: it holds what is not the collection's ({shown}); "
            f"delete it yourself once those are gone or moved (kubectl delete namespace {namespace})",
        }
    return {"remove": True, "reason": ""}


def managed_by(obj):
    """Who manages the object, as far as its metadata tells."""
    meta = _meta(obj)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    parts = []
    label = labels.get(OUR_MANAGER_LABEL)
    if label:
        release = annotations.get("meta.helm.sh/release-name") or labels.get("app.kubernetes.io/instance")
        parts.append(f"{OUR_MANAGER_LABEL}={label}{f' (release {release})' if release else ''}")
    managers = []
    for entry in meta.get("managedFields") or []:
        manager = entry.get("manager") if isinstance(entry, dict) else None
        if manager and manager not in managers:
            managers.append(manager)
    if managers:
        parts.append(f"field managers {', '.join(managers)}")
    return "; ".join(parts) if parts else "unknown manager"


def _labels_text(mapping):
    if not mapping:
        return "{}"
    return ", ".join(f"{k}={mapping[k]}" for k in sorted(mapping))


def _mismatch(obj, expected):
    """Why an object (ours or not) differs from what the role would apply, or ''."""
    expected = expected or {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if "selector" in expected:
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if selector != expected["selector"]:
            return f"its selector {_labels_text(selector)} is not ours ({_labels_text(expected['selector'])})"
    if "service" in expected:
        service = spec.get("service") or {}
        have = f"{service.get('namespace') or '?'}/{service.get('name') or '?'}" if service else "none (local)"
        want = f"{expected['service'].get('namespace')}/{expected['service'].get('name')}"
        if have != want:
            return f"it points at Service {have}, not ours ({want})"
    return ""


def conflicts(objects, expected=None):
    """``[(object, reason)]`` for every object in the way of the role."""
    found = []
    for obj in objects or []:
        if not isinstance(obj, dict):
            raise CoexistenceError(f"objects must be Kubernetes objects (dicts), got {obj!r}")
        mismatch = _mismatch(obj, expected)
        if is_ours(obj) and not mismatch:
            continue
        reasons = []
        if not is_ours(obj):
            reasons.append(f"not managed by {OUR_MANAGER} ({managed_by(obj)})")
        if mismatch:
            reasons.append(mismatch)
        why = _WHY.get(obj.get("kind"))
        if why:
            reasons.append(why)
        found.append((obj, "; ".join(reasons)))
    return found


def _check_choice(choice, variable):
    if choice not in CHOICES:
        raise CoexistenceError(f"{variable} must be one of {'|'.join(CHOICES)}, got {choice!r}")


def decide(component, choice, objects, expected=None):
    """Decide what a role does about what already exists.

    Returns ``{"action": "deploy"|"adopt"|"fail", "message": str, "objects": [names]}``; ``message``
    is empty for ``deploy`` (nothing in the way, or only our own objects).
    """
    if component not in COMPONENTS:
        raise CoexistenceError(f"unknown component {component!r}; known: {', '.join(sorted(COMPONENTS))}")
    variable, what, left_out = COMPONENTS[component]
    _check_choice(choice, variable)
    found = conflicts(objects, expected)
    names = [object_name(obj) for obj, _reason in found]
    if not found:
        return {"action": "deploy", "message": "", "objects": []}
    if choice == "fail":
        details = "; ".join(f"{object_name(obj)}: {reason}" for obj, reason in found)
        message = (
            f"{component}: {what} is already installed by someone else: {details}. Nothing was changed. Set "
            f"{variable}=adopt to use the existing installation instead of deploying ours, or remove it first "
            f"({variable}=fail, the default, stops here)."
        )
        return {"action": "fail", "message": message, "objects": names}
    managers = sorted({managed_by(obj) for obj, _reason in found})
    message = f"{component}: using the existing {', '.join(names)} ({variable}=adopt): {left_out}"
    message += f" (managed by: {' | '.join(managers)})."
    return {"action": "adopt", "message": message, "objects": names}


# --- kube-scheduler extenders ------------------------------------------------------------------


def _load(text):
    if not text or not isinstance(text, str):
        return None
    if not HAS_YAML:  # the filters run on the controller, which always has PyYAML
        return None
    # Any parse error means "not a configuration we can read". Ansible hands filters a str subclass
    # (data tagging), which libyaml's CSafeLoader does not take for text: give it an exact str.
    try:
        return yaml_load(text.encode("utf-8").decode("utf-8"))
    except Exception:  # pylint: disable=broad-except
        return None


def _scheduler_container(doc):
    spec = doc.get("spec") if isinstance(doc, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return None
    named = [c for c in containers if isinstance(c, dict) and c.get("name") == "kube-scheduler"]
    if len(named) == 1:
        return named[0]
    if len(containers) == 1 and isinstance(containers[0], dict):
        return containers[0]
    return None


def scheduler_config_path(manifest_text):
    """The file kube-scheduler's manifest loads: ``{"path": ..., "flag": "--config"|...}``.

    Empty path when the manifest cannot be read or loads no file (the module reports unreadable
    manifests itself, with its own messages).
    """
    doc = _load(manifest_text)
    container = _scheduler_container(doc) if isinstance(doc, dict) else None
    if container is None:
        return {"path": "", "flag": ""}
    # The extender module's own reading (kubelet's one argv: a flag ending ``command`` takes its
    # value from ``args``), so coexistence never sees another file than the module would edit. A
    # command line the module refuses (items not strings, a shell, a flag without its value) loads no
    # file here either: the module names the problem when it runs.
    try:
        if sm.argv_problems(container):
            return {"path": "", "flag": ""}
        for flag in ("--config", "--policy-config-file"):
            found = sm.find_flag(container, flag)
            if found and found[0]:
                return {"path": found[0], "flag": flag}
    except sm.ManifestError:
        pass
    return {"path": "", "flag": ""}


def _our_urls(manifest_text):
    doc = _load(manifest_text)
    annotations = (_meta(doc).get("annotations") or {}) if isinstance(doc, dict) else {}
    raw = annotations.get("poweraware.k8s/scheduler-extender")
    try:
        record = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        record = {}
    urls = record.get("extenders") if isinstance(record, dict) else None
    if not isinstance(urls, list):  # a damaged record names none of ours (a string is not read letter by letter)
        return set()
    return {_norm_url(u) for u in urls if isinstance(u, str)}


def _norm_url(url):
    return str(url).rstrip("/")


def _existing_extenders(config_text):
    doc = _load(config_text)
    entries = doc.get("extenders") if isinstance(doc, dict) else None
    return [(i, e) for i, e in enumerate(entries or []) if isinstance(e, dict)]


def _resources(entry, key, name_key="name"):
    out = []
    for item in entry.get(key) or []:
        if isinstance(item, dict) and isinstance(item.get(name_key), str):
            out.append(item[name_key])
    return out


def extender_coexistence(choice, manifest_text, config_text, config_path, extenders, manifest_path=""):
    """Decide about our extenders against those kube-scheduler already loads.

    ``extenders`` are the module's (``url_prefix``, ``managed_resources[].name``); the existing ones
    come from the configuration (or legacy Policy) the manifest loads. An existing entry that this
    collection did not add (its ``urlPrefix`` is not in the manifest's record) is in the way of ours
    when it has the same ``urlPrefix`` or manages one of the same resources: kube-scheduler refuses a
    resource managed by two extenders.

    Returns ``{"action": "register"|"adopt"|"fail", "extenders": [ours to register], "message": str,
    "kept": [descriptions of the existing entries kept]}``.
    """
    _check_choice(choice, SCHEDULER_VARIABLE)
    if not isinstance(extenders, list):
        raise CoexistenceError("extenders must be a list of the module's extender definitions")
    ours = _our_urls(manifest_text)
    existing = [(i, e) for i, e in _existing_extenders(config_text) if _norm_url(e.get("urlPrefix") or "") not in ours]
    where = config_path or "the scheduler configuration"
    keep, clashes = [], []
    for ext in extenders:
        if not isinstance(ext, dict):
            keep.append(ext)
            continue
        url = _norm_url(ext.get("url_prefix") or "")
        names = set(_resources(ext, "managed_resources"))
        hits = []
        for index, entry in existing:
            same_url = bool(url) and _norm_url(entry.get("urlPrefix") or "") == url
            shared = sorted(names & set(_resources(entry, "managedResources")))
            if same_url or shared:
                what = f"manages {', '.join(shared)}" if shared else "has the same urlPrefix"
                hits.append(f"extenders[{index}] (urlPrefix {entry.get('urlPrefix') or '(none)'}) in {where} {what}")
        if hits:
            clashes.append((ext.get("url_prefix"), hits))
        else:
            keep.append(ext)
    if not clashes:
        return {"action": "register", "extenders": keep, "message": "", "kept": []}
    kept = [hit for _url, hits in clashes for hit in hits]
    if choice == "fail":
        details = "; ".join(
            f"our extender {url}: the existing {' and '.join(hits)}, not added by {OUR_MANAGER}"
            for url, hits in clashes
        )
        where = f" ({manifest_path})" if manifest_path else ""
        message = (
            f"scheduler_extender: kube-scheduler{where} already loads an extender that is not ours: {details}; "
            "kube-scheduler refuses a resource managed by two extenders. Nothing was changed. Set "
            f"{SCHEDULER_VARIABLE}=adopt to keep the existing extender and not add ours, or remove it first "
            f"({SCHEDULER_VARIABLE}=fail, the default, stops here)."
        )
        return {"action": "fail", "extenders": keep, "message": message, "kept": kept}
    urls = ", ".join(str(url) for url, _hits in clashes)
    message = (
        f"scheduler_extender: keeping the existing {'; '.join(kept)} ({SCHEDULER_VARIABLE}=adopt): our extender "
        f"{urls} is not added"
    )
    message += "; nothing else to register, kube-scheduler is left as it is." if not keep else "."
    return {"action": "adopt", "extenders": keep, "message": message, "kept": kept}
