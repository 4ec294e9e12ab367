"""Each role's ``absent`` alone: ``site.yml --tags <role> -e <role>_state=absent`` on the converged lab
removes that role's objects and files and nothing else, and the role's converge brings them back.

The roles here are the ones whose absent no test of their own runs (node power, the scheduler
extender, our extender, the TAS policy, the power demo, the descheduler and Peaks have theirs):
NFD, collectd, kube-state-metrics, Prometheus, the Prometheus Adapter, TAS, the App QoS
certificates and the power models. For each, against the lab just before its run:

- every API object that went is the collection's (its labels or field managers), or went with a
  namespace the role removed (what Kubernetes puts in every namespace, and what NFD's workers made
  there); no other object was made or changed (its resourceVersion), so a role sharing a namespace
  with others (collectd, kube-state-metrics and Prometheus share ``monitoring``) leaves them alone;
- every node file that changed is under the role's own directories (its certificates, NFD's
  feature files);
- ``site.yml --tags <role>`` then brings back every object that went, by kind, namespace and name.

Marker lifecycle (make lifecycle): it removes parts of the stack the other lab tests rely on, and it
costs make test's time. It runs before test_uninstall.py, whose comparison with the lab before the
first converge then also shows that these removals and converges left nothing behind.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from cluster_snapshot import MOVING_KINDS, TRANSIENT_KINDS, _listed, node_files, our_marks
from poweraware_testing import wait_until
from site_run import run_site

pytestmark = [pytest.mark.lifecycle, pytest.mark.slow]

# role -> the node directories its absent may change (paths on the node, without the leading /)
ROLES = {
    # the power models' annotations and ConfigMaps first: they name nodes and Prometheus' rules
    "power_models": (),
    "tas": ("etc/kubernetes/pki/tas",),
    "prometheus_adapter": ("etc/kubernetes/pki/prometheus-adapter",),
    "prometheus": (),
    "kube_state_metrics": (),
    "collectd": (),
    "nfd": ("etc/kubernetes/node-feature-discovery",),
    # the certificate and key directories, and the parents the role made for them (removed when empty)
    "appqos_certs": ("etc/certs", "etc/poweraware"),
}
# What a role's absent alone leaves on no node (paths on the node): nfd-worker's feature file
# directories, which the container runtime made for its mount.
GONE_FROM_NODES = {"nfd": ("etc/kubernetes/node-feature-discovery",)}
# Roles off by default: switched on for their test (converged first, then absent and converge with the
# switch on), and removed again at its end, as the lab's user (switch off) had them.
SWITCHED_ON = {"appqos_certs": {"poweraware_enable_appqos_certs": True}}


# What the API server keeps for other objects, and deletes with them: a Service's ClusterIP
# allocation, a CRD group's local APIService (labelled kube-aggregator.kubernetes.io/automanaged,
# and without a service: the API server serves it).
DERIVED_KINDS = {"IPAddress"}
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"


def _objects(lab) -> dict[tuple, tuple]:
    """(group/version, kind, namespace, name) -> (uid, resourceVersion or '', ours) for every object
    that does not come and go by itself. A namespace being deleted counts as gone: the roles do not
    wait for the namespace controller to empty it."""
    found = {}
    for resource, item in _listed(lab):
        if resource.kind in TRANSIENT_KINDS or resource.kind in DERIVED_KINDS:
            continue
        meta = item.metadata
        labels = meta.labels or {}
        if labels.get(AUTOMANAGED) or (resource.kind == "Namespace" and meta.deletionTimestamp):
            continue
        if resource.kind == "APIService" and not (item.spec or {}).get("service"):
            continue  # served by the API server itself (a built-in or CRD group), registered and removed with it
        labelled, managers = our_marks(meta)
        version = "" if resource.kind in MOVING_KINDS else meta.resourceVersion
        found[(resource.group_version, resource.kind, meta.namespace or "", meta.name)] = (
            meta.uid,
            version,
            labelled or bool(managers),
        )
    return found


@pytest.mark.parametrize("role", list(ROLES))
def test_a_roles_absent_removes_its_own_only_and_its_converge_brings_it_back(lab, site, role):
    assert site["converge"].rc == 0
    switch = SWITCHED_ON.get(role, {})
    if switch:
        on = run_site(lab, tags=[role], extra_vars=switch)
        assert on.rc == 0 and on.failed == 0 and on.changed > 0, on.stdout[-4000:]
    try:
        _absent_alone_and_back(lab, role, switch)
    finally:
        if switch:
            off = run_site(lab, tags=[role], extra_vars={**switch, f"{role}_state": "absent"})
            assert off.rc == 0 and off.failed == 0, off.stdout[-4000:]


def _absent_alone_and_back(lab, role, switch):
    before, files_before = _objects(lab), node_files(lab)
    started = time.monotonic()
    removed = run_site(lab, tags=[role], extra_vars={**switch, f"{role}_state": "absent"})
    removal_s = time.monotonic() - started
    assert removed.rc == 0 and removed.failed == 0, removed.stdout[-4000:]
    assert removed.changed > 0, role
    after, files_after = _objects(lab), node_files(lab)

    gone = set(before) - set(after)
    moved = sorted(k for k in files_before.keys() | files_after.keys() if files_before.get(k) != files_after.get(k))
    assert gone or moved, f"{role}: its absent removed no object and no node file"
    namespaces_gone = {key[3] for key in gone if key[1] == "Namespace"}
    not_ours = sorted(key for key in gone if not before[key][2] and key[2] not in namespaces_gone)
    made = sorted(set(after) - set(before))
    changed = sorted(key for key in set(before) & set(after) if before[key][:2] != after[key][:2])
    outside = [k for k in moved if not any(k.partition(":")[2].startswith(d) for d in ROLES[role])]
    problems = {
        "gone but not ours": not_ours,
        "made": made,
        "changed": changed,
        "node files outside the role's": outside[:20],
    }
    assert not any(problems.values()), (role, problems)
    left = [
        f"{node}:/{path}"
        for node in [lab.control_plane_node, *lab.worker_nodes]
        for path in GONE_FROM_NODES.get(role, ())
        if (lab.node_disk(node) / path).exists()
    ]
    assert left == [], (role, left)

    # at once: a namespace it deleted may still be terminating, and the converge waits for it
    started = time.monotonic()
    back = run_site(lab, tags=[role], extra_vars=switch)
    converge_s = time.monotonic() - started
    assert back.rc == 0 and back.failed == 0, back.stdout[-4000:]
    missing = sorted(gone - set(_objects(lab)))
    assert missing == [], (role, missing)
    print(
        "PROOF role absent:",
        json.dumps(
            {
                "role": role,
                "absent_s": round(removal_s),
                "absent_changed": removed.changed,
                "objects_removed": len(gone),
                "namespaces_removed": sorted(namespaces_gone),
                "node_paths_changed": len(moved),
                "converge_s": round(converge_s),
                "converge_changed": back.changed,
            }
        ),
    )


HOLD = "poweraware.test/hold"  # a finalizer nothing serves: the namespace stays Terminating until it goes
RELEASE_AFTER_S = 45


def test_a_converge_waits_for_its_namespace_being_deleted_and_stops_when_it_stays(lab, site):
    """A namespace being deleted takes no new object (kube-apiserver: 403 "because it is being
    terminated"). On a real cluster it can stay Terminating a while: finalizers, or an aggregated API
    that is down. The adapter's namespace held by a finalizer: after its absent, a converge with a
    short wait stops naming the namespace and what holds it; another converge waits until the finalizer
    goes, then brings everything back."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(lab.api_client())
    namespace = "custom-metrics"
    core.patch_namespace(namespace, {"metadata": {"finalizers": [HOLD]}})
    held = False
    try:
        removed = run_site(lab, tags=["prometheus_adapter"], extra_vars={"prometheus_adapter_state": "absent"})
        assert removed.rc == 0 and removed.failed == 0, removed.stdout[-4000:]
        assert core.read_namespace(namespace).metadata.deletion_timestamp
        held = True
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_config_map(namespace, {"metadata": {"name": "probe"}})
        assert refused.value.status == 403 and "being terminated" in refused.value.body

        short = run_site(lab, tags=["prometheus_adapter"], extra_vars={"_common_namespace_wait_timeout": "4"})
        assert short.rc != 0 and short.failed == 1, short.stdout[-4000:]
        for part in (
            f"namespace {namespace}, being deleted since",
            "is still there after 4 s",
            "Something it holds keeps a finalizer",
            "set prometheus_adapter_namespace to another namespace",
        ):
            assert part in short.stdout, (part, short.stdout[-3000:])

        def release():  # once the converge waits: it reaches the namespace within seconds of its start
            time.sleep(RELEASE_AFTER_S)
            core.patch_namespace(namespace, {"metadata": {"finalizers": None}})

        releaser = threading.Thread(target=release)
        started = time.monotonic()
        releaser.start()
        back = run_site(lab, tags=["prometheus_adapter"])
        releaser.join()
        held = False
        back_s = time.monotonic() - started
        assert back.rc == 0 and back.failed == 0, back.stdout[-4000:]
        wait = back.stdout[back.stdout.index("Wait until it is gone, when being deleted") :]
        wait = wait[: wait.index("TASK [")]
        retries = wait.count("FAILED - RETRYING")
        assert retries > 0 and "ok: [lab-control-plane]" in wait and back_s > RELEASE_AFTER_S, (back_s, wait)
        assert not core.read_namespace(namespace).metadata.deletion_timestamp
        print(f"PROOF namespace being deleted: stopped after 4 s, then waited ({retries} polls), back in {back_s:.0f}s")
    finally:
        if held:
            core.patch_namespace(namespace, {"metadata": {"finalizers": None}})
            wait_until(
                lambda: namespace not in {n.metadata.name for n in core.list_namespace().items}, 60, "namespace gone"
            )
            assert run_site(lab, tags=["prometheus_adapter"]).rc == 0
