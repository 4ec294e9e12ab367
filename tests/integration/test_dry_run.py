"""site.yml --check --diff on a cluster that has never seen the collection (docs/site.md, "Dry run").

Runs first in the session (marker fresh_lab), on the lab as `make lab` starts it, in make lifecycle
(not make test, for its time: 117 s in a CI run; the converged cluster's dry runs stay in make test,
test_site.py's check mode and drift): the dry run must
run to the end, print the whole plan (objects in namespaces and of CRDs the run would create are
predicted and say so; steps that need an earlier change say why they are skipped) and write nothing:
every node's files, its writable CPU sysfs attributes and every API object are the same afterwards.
"""

from __future__ import annotations

import json
import re

import pytest
from ansible_run import run_playbook
from cluster_snapshot import api_objects, node_files, static_pods
from conftest import REPO_ROOT

pytestmark = [pytest.mark.timeout(900), pytest.mark.fresh_lab, pytest.mark.lifecycle]

OUTPUT = REPO_ROOT / "tests" / "output" / "dry_run.json"


def leftover_clients(lab) -> dict[str, str]:
    found = {}
    for node in [lab.control_plane_node, *lab.worker_nodes]:
        out = lab.ssh(node, "ls -d /tmp/poweraware-k8s-client.* 2>/dev/null || true", sudo=True).stdout.strip()
        if out:
            found[node] = out
    return found


def test_dry_run_on_a_new_cluster_plans_everything_and_writes_nothing(lab, fresh):
    files_before, objects_before, pods_before = fresh["files"], fresh["objects"], static_pods(lab)
    assert not any(o[1] == "Namespace" and o[3] == "telemetry-aware-scheduling" for o in objects_before), (
        "the lab is not new: TAS is already there (this test must run first in the session)"
    )

    result = run_playbook(REPO_ROOT / "site.yml", inventory=lab.inventory / "hosts.yml", check=True, diff=True)

    assert result.rc == 0, str(result)
    # Nothing written anywhere: not on any node, not on the cluster, no temporary client left behind.
    files_after = node_files(lab)
    assert files_after == files_before, sorted(
        path for path in files_before.keys() | files_after.keys() if files_before.get(path) != files_after.get(path)
    )
    assert static_pods(lab) == pods_before  # kube-scheduler neither changed nor restarted
    objects_after = api_objects(lab)
    assert objects_after == objects_before, {
        "new": sorted(objects_after - objects_before)[:20],
        "gone or changed": sorted(objects_before - objects_after)[:20],
    }
    assert leftover_clients(lab) == {}

    # The plan: objects the server cannot dry-run are predicted, and say so.
    out = result.stdout
    predicted = re.findall(r"would create \(predicted, not dry-run: [^)]*\)", out)
    for label, reason in (
        ("ServiceAccount node-feature-discovery/nfd-master", "namespace node-feature-discovery is created by this run"),
        (
            "Deployment telemetry-aware-scheduling/telemetry-aware-scheduling",
            "namespace telemetry-aware-scheduling is created by this run",
        ),
        (
            "NodeFeatureRule poweraware-power-features",
            "kind NodeFeatureRule.nfd.k8s-sigs.io is served only once this run applies its CustomResourceDefinition",
        ),
        (
            "TASPolicy default/power-sensitive-scheduling-policy",
            "kind TASPolicy.telemetry.intel.com is served only once this run applies its CustomResourceDefinition",
        ),
    ):
        assert f"{label}: would create (predicted, not dry-run: {reason})" in out, (label, reason)
    # Steps that need an earlier change are skipped with one line each, saying why.
    skipped = re.findall(r"dry run: (would [^;]*); skipped in check mode: ([^\"]*)", out)
    whats = " | ".join(what for what, _why in skipped)
    for expected in ("would issue /etc/kubernetes/pki/tas/ca.crt", "would apply Secret telemetry-aware-scheduling/"):
        assert expected in whats, whats

    recap = {host: counts["changed"] for host, counts in result.recap.items()}
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(
        json.dumps({"changed": recap, "predicted": len(predicted), "skipped_lines": len(skipped)}, indent=2) + "\n"
    )
    assert all(recap.values()), recap  # every host has something to do on a new cluster
