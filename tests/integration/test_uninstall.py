"""Uninstall: ``site.yml -e poweraware_state=absent`` on the converged lab gives back the lab as it was.

Every role removes what it applied, in reverse order (kube-scheduler's registration first, the node
power controls last): the real API server deletes the objects (workloads with foreground
propagation, so their pods are gone when the run ends), NFD's own prune step (``nfd-master -prune``
in a Job) takes its labels off the nodes, the CRDs go once no object of theirs is left, the
namespaces once nothing but what Kubernetes puts in every namespace is left there, and the nodes get
back their sysfs values, units and files. Judged against the snapshot the session took before the
first converge (conftest.py ``fresh``): every node file and writable sysfs attribute by hash, every
API object by identity and version, kube-scheduler's manifest byte for byte; and nothing labelled
as ours or written by our field managers is left. (A second uninstall changes nothing but the
Kubernetes client its plays install to ask the API and its last play removes again: measured by
hand, not repeated here, for make test's time.)

Marker lifecycle: not in make test (its time); make lifecycle runs it on a lab of its own after
test_upgrade.py (conftest.py LATE_MODULES: were it run with the lab tests, after all of them, which
would find nothing of the stack left).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time

import pytest
from cluster_snapshot import TRANSIENT_KINDS, _listed, api_objects, node_files, our_marks
from poweraware_testing import wait_until
from site_run import TIMINGS, run_site
from test_air_gapped import NAMESPACES, SECRET

pytestmark = [pytest.mark.lifecycle, pytest.mark.slow]


def _ours_left(lab) -> list[str]:
    """Every object labelled as the collection's, or with fields of its field managers."""
    left = []
    for resource, item in _listed(lab):
        meta = item.metadata
        labelled, managers = our_marks(meta)
        if labelled or managers:
            left.append(f"{resource.kind} {meta.namespace or ''}/{meta.name} {managers}")
    return left


def _lasting(objects: set[tuple]) -> set[tuple]:
    return {o for o in objects if o[1] not in TRANSIENT_KINDS}


def uninstall_and_compare(lab, fresh, extra_vars=None) -> dict:
    """``site.yml -e poweraware_state=absent``, then every difference from ``fresh`` at once (the
    ``problems``: what is left of ours, the manifest, the nodes' files, the API objects), with the run,
    its time and what was compared. test_upgrade.py uses it after an upgrade."""
    from kubernetes import client

    core = client.CoreV1Api(lab.api_client())
    started = time.monotonic()
    removed = run_site(lab, extra_vars={**(extra_vars or {}), "poweraware_state": "absent"})
    seconds = time.monotonic() - started
    # the whole output beside the site's (tests/output): which task failed or took the time
    (TIMINGS.parent / "site-uninstall.log").write_text(removed.stdout + removed.stderr)
    assert removed.rc == 0 and removed.failed == 0, removed.stdout[-6000:]
    # the namespaces the run deleted finish in the background (the namespace controller empties them)
    fresh_namespaces = {o[3] for o in fresh["objects"] if o[1] == "Namespace"}
    wait_until(
        lambda: {n.metadata.name for n in core.list_namespace().items} <= fresh_namespaces,
        120,
        "the deleted namespaces to be gone",
    )

    problems = {}
    left = _ours_left(lab)
    if left:
        problems["ours left"] = left
    if lab.scheduler_manifest.read_bytes() != fresh["manifest"]:
        problems["kube-scheduler manifest"] = "differs from before the first converge"
    files = node_files(lab)
    moved = sorted(k for k in files.keys() | fresh["files"].keys() if files.get(k) != fresh["files"].get(k))
    if moved:
        # by node and the path's first three parts, so that a tree left behind is one entry: how many
        # paths, and the first few of them
        trees: dict[str, list] = {}
        for key in moved:
            node, _sep, path = key.partition(":")
            trees.setdefault(f"{node}:{'/'.join(path.split('/')[:3])}", []).append(path)
        problems["node files"] = {tree: (len(paths), paths[:4]) for tree, paths in trees.items()}
    # Objects that come and go by themselves (pods, events, leases, a controller's replica sets) are
    # not compared: kube-scheduler's mirror pod, for one, is a new object since the manifest came back.
    # That none of ours is left, pods included, is checked above.
    objects = _lasting(api_objects(lab))
    if objects != _lasting(fresh["objects"]):
        problems["API objects"] = {
            "new": sorted(objects - _lasting(fresh["objects"]))[:30],
            "gone or changed": sorted(_lasting(fresh["objects"]) - objects)[:30],
        }
    checked = time.monotonic() - started - seconds
    print(json.dumps({"uninstall_s": round(seconds), "checked_s": round(checked), "problems": problems}, default=str))
    return {
        "problems": problems,
        "removed": removed,
        "seconds": seconds,
        "checked_s": checked,
        "files": files,
        "objects": objects,
    }


def test_site_absent_gives_back_the_lab_as_it_was_before_the_first_converge(lab, site, fresh):
    from kubernetes import client

    assert site["converge"].rc == 0
    core = client.CoreV1Api(lab.api_client())
    # The air-gapped site's pull Secrets are the user's, not the collection's: the user removes them
    # (with them left, the uninstall keeps their namespaces and says what holds them).
    for namespace in NAMESPACES:
        with contextlib.suppress(client.ApiException):
            core.delete_namespaced_secret(SECRET, namespace)

    outcome = uninstall_and_compare(lab, fresh)
    problems, removed, seconds = outcome["problems"], outcome["removed"], outcome["seconds"]
    assert problems == {}, (problems, f"uninstall {seconds:.0f} s", removed.stdout[-3000:])

    files, objects = outcome["files"], outcome["objects"]
    digest = hashlib.sha256("".join(sorted(f"{k}={v}" for k, v in files.items())).encode()).hexdigest()
    print(
        f"PROOF uninstall: site.yml -e poweraware_state=absent in {seconds:.0f} s, {removed.changed} changed; "
        f"{len(files)} node paths (sha256 {digest[:16]}) and {len(objects)} API objects as before the first "
        f"converge (compared in {outcome['checked_s']:.0f} s); kube-scheduler manifest byte for byte"
    )
