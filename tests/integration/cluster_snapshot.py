"""What a playbook run may change, captured so that "changed nothing" is judged by the cluster and
the nodes, not by Ansible's recap (issue 17, item 3).

* ``node_files``: every node's disk and writable CPU sysfs attributes (mode, owner, content).
* ``api_objects``: every object of every listable API resource, by identity and resourceVersion
  (a cluster nobody runs anything on: the fresh dry run).
* ``our_fields``: on a running stack components update their own objects (status, NFD's features,
  heartbeats), so a converged cluster is judged by what the collection wrote: every object's
  managedFields entries of the collection's field managers (``poweraware*``), whose time and fields
  move only when an apply of ours changed the object, and the identity of every object (nothing
  deleted or re-created) except those that come and go by themselves.
* ``static_pods``: what the control-plane kubelet runs (manifest hash, pids).

``snapshot`` takes the three a converged cluster is compared by; ``differences`` names what moved.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import stat

# Written by processes of their own while the tests run (logs, kubelet's pod state), or by Ansible
# itself to reach the node (its remote temporary files): not what a playbook run manages.
# The lab kubelet's status file carries a timestamp and readiness: compared by what it runs instead.
KUBELET_STATUS = "var/lib/kubelet/lab-static-pods.json"
# The lab kubelet's static pod runner keeps its run state (each pod's resolv.conf) beside the status file.
VOLATILE = ("var/log", "var/lib/kubelet/pods", "var/lib/kubelet/lab-static-pods", ".ansible", KUBELET_STATUS)
# Objects whose status or heartbeats move by themselves: compared by identity, not by version.
MOVING_KINDS = {"Event", "Lease", "Node", "Pod", "Endpoints", "EndpointSlice"}
# Objects that come and go by themselves on a running stack (a controller's pods, their events,
# leader-election leases): not compared by identity either.
TRANSIENT_KINDS = {"Event", "Lease", "Pod", "Endpoints", "EndpointSlice", "ReplicaSet", "ControllerRevision", "Job"}
OUR_MANAGERS = "poweraware"  # the field managers' prefix (poweraware, poweraware-power-models)


def our_marks(meta) -> tuple[bool, list[str]]:
    """(whether the object is labelled as the collection's, the collection's field managers that
    wrote fields of it): an object with either is ours."""
    labels = meta.labels or {}
    labelled = (
        labels.get("app.kubernetes.io/managed-by") == "poweraware.k8s"
        or labels.get("app.kubernetes.io/part-of") == "poweraware"
    )
    managers = sorted(
        {entry.manager for entry in meta.managedFields or [] if (entry.manager or "").startswith(OUR_MANAGERS)}
    )
    return labelled, managers


def _copied_up(info: os.stat_result, host_path: str) -> bool:
    """A node's disk is the upper layer of an overlay on the machine's own /etc, /usr, /var ...
    (lab/node_init.py): a directory there with the same mode and owner as the machine's is one the
    kernel copied up when something was written below it, which the node sees unchanged."""
    if not stat.S_ISDIR(info.st_mode):
        return False
    try:
        lower = os.lstat(host_path)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(lower.st_mode) and (lower.st_mode, lower.st_uid, lower.st_gid) == (
        info.st_mode,
        info.st_uid,
        info.st_gid,
    )


def node_files(lab) -> dict[str, str]:
    """Every node's disk and writable sysfs attributes: (node, path) -> hash of mode, owner and content."""
    files = {}
    for node in [lab.control_plane_node, *lab.worker_nodes]:
        for root in (lab.node_disk(node), lab.node_sysfs(node)):
            for dirpath, dirnames, filenames in os.walk(root):
                rel_dir = os.path.relpath(dirpath, root)
                dirnames[:] = sorted(d for d in dirnames if not any(v in os.path.join(rel_dir, d) for v in VOLATILE))
                for name in [*filenames, *dirnames]:
                    path = os.path.join(dirpath, name)
                    if any(v in os.path.relpath(path, root) for v in VOLATILE):
                        continue
                    try:
                        info = os.lstat(path)
                        if root == lab.node_sysfs(node) and not info.st_mode & 0o200:
                            continue  # read-only counters move by themselves
                        if root == lab.node_disk(node) and _copied_up(info, "/" + os.path.relpath(path, root)):
                            continue  # the node sees the same directory as before it was copied up
                        if os.path.islink(path):
                            data = os.readlink(path).encode()
                        elif os.path.isfile(path):
                            data = pathlib.Path(path).read_bytes()
                        else:
                            data = b""
                    except FileNotFoundError:
                        # gone between the listing and the read: a temporary file a process of the lab
                        # renames over its target (the power meter's .energy_uj.new), never a result
                        continue
                    head = f"{info.st_mode} {info.st_uid}:{info.st_gid}\n".encode()
                    files[f"{node}:{os.path.relpath(path, root)}"] = hashlib.sha256(head + data).hexdigest()
    return files


# Not stored objects but views metrics-server computes from its scrapes: a pod's PodMetrics appears
# once two scrapes have seen it (ci1 saw the Peaks pods' appear between two snapshots of a re-run).
COMPUTED_GROUPS = {"metrics.k8s.io"}


def _listed(lab):
    """(resource, item) for every object of every listable API resource (stored ones: not
    COMPUTED_GROUPS)."""
    from kubernetes import dynamic

    client = dynamic.DynamicClient(lab.apis()["core"].api_client)
    for resource in client.resources.search():
        if "list" not in (resource.verbs or []) or "/" in resource.name or resource.kind.endswith("List"):
            continue
        if resource.group in COMPUTED_GROUPS:
            continue
        try:
            items = resource.get().items
        except Exception:  # noqa: BLE001, S112 - aggregated APIs that are not served (the lab's adapter)
            continue
        for item in items:
            yield resource, item


def api_objects(lab) -> set[tuple]:
    """Every object of every listable API resource: kind, namespace, name, uid, and (for objects
    that do not move by themselves) resourceVersion."""
    objects = set()
    for resource, item in _listed(lab):
        meta = item.metadata
        version = "" if resource.kind in MOVING_KINDS else meta.resourceVersion
        objects.add((resource.group_version, resource.kind, meta.namespace or "", meta.name, meta.uid, version))
    return objects


def our_fields(lab) -> tuple[set[tuple], set[tuple]]:
    """(identities, our entries): every object that does not come and go by itself, and every
    managedFields entry of the collection's field managers with its time and a digest of its fields."""
    identities, entries = set(), set()
    for resource, item in _listed(lab):
        meta = item.metadata
        key = (resource.group_version, resource.kind, meta.namespace or "", meta.name, meta.uid)
        if resource.kind not in TRANSIENT_KINDS:
            identities.add(key)
        for entry in meta.managedFields or []:
            if (entry.manager or "").startswith(OUR_MANAGERS):
                fields = json.dumps(entry.fieldsV1.to_dict() if entry.fieldsV1 else None, sort_keys=True)
                digest = hashlib.sha256(fields.encode()).hexdigest()[:16]
                entries.add((*key, entry.manager, entry.operation, entry.subresource or "", entry.time, digest))
    return identities, entries


def static_pods(lab) -> dict[str, tuple]:
    """What the control-plane node's kubelet runs: manifest hash and pids per static pod."""
    status = json.loads((lab.node_disk(lab.control_plane_node) / KUBELET_STATUS).read_text())
    return {name: (pod["sha256"], tuple(pod["pids"])) for name, pod in status["pods"].items()}


def snapshot(lab) -> dict:
    """A converged cluster and its nodes, as a run that changes nothing must leave them."""
    identities, entries = our_fields(lab)
    return {"files": node_files(lab), "objects": identities, "ours": entries, "static_pods": static_pods(lab)}


def differences(before: dict, after: dict, limit: int = 20) -> dict[str, list]:
    """What moved between two snapshots, by part: files and static pods by key, objects and our
    managedFields entries as the ones that appeared and the ones that went."""
    found = {}
    for part in ("files", "static_pods"):
        moved = sorted(k for k in before[part].keys() | after[part].keys() if before[part].get(k) != after[part].get(k))
        if moved:
            found[part] = moved[:limit]
    for part in ("objects", "ours"):
        new, gone = sorted(after[part] - before[part]), sorted(before[part] - after[part])
        if new or gone:
            found[part] = [("new", *x) for x in new[:limit]] + [("gone", *x) for x in gone[:limit]]
    return found
