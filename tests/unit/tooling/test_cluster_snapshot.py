"""tests/integration/cluster_snapshot.py's comparison: what a run that "changed nothing" may not move."""

from __future__ import annotations

import copy
import importlib.util
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def _snapshot_module():
    spec = importlib.util.spec_from_file_location(
        "cluster_snapshot", REPO_ROOT / "tests/integration/cluster_snapshot.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OBJECT = ("apps/v1", "Deployment", "telemetry-aware-scheduling", "telemetry-aware-scheduling", "uid-1")
BEFORE = {
    "files": {"lab-worker-1:etc/poweraware/cpu-power.json": "a", "lab-worker-1:cpu/cpu2/cpufreq/scaling_max_freq": "b"},
    "static_pods": {"kube-scheduler.yaml": ("sha", (101,))},
    "objects": {OBJECT},
    "ours": {(*OBJECT, "poweraware", "Apply", "", "2026-11-27T02:41:19Z", "f00d")},
}


def test_identical_snapshots_differ_in_nothing():
    assert _snapshot_module().differences(BEFORE, copy.deepcopy(BEFORE)) == {}


def test_every_kind_of_change_is_named():
    after = copy.deepcopy(BEFORE)
    after["files"]["lab-worker-1:cpu/cpu2/cpufreq/scaling_max_freq"] = "c"  # rewritten
    after["files"]["lab-worker-1:etc/poweraware/new"] = "d"  # written
    after["static_pods"]["kube-scheduler.yaml"] = ("sha", (202,))  # restarted
    after["objects"] = {(*OBJECT[:4], "uid-2")}  # re-created
    after["ours"] = {(*OBJECT, "poweraware", "Apply", "", "2026-11-27T02:50:00Z", "f00d")}  # re-applied with a change
    found = _snapshot_module().differences(BEFORE, after)
    assert found["files"] == ["lab-worker-1:cpu/cpu2/cpufreq/scaling_max_freq", "lab-worker-1:etc/poweraware/new"]
    assert found["static_pods"] == ["kube-scheduler.yaml"]
    assert [entry[0] for entry in found["objects"]] == ["new", "gone"]
    assert [(entry[0], entry[-2]) for entry in found["ours"]] == [
        ("new", "2026-11-27T02:50:00Z"),
        ("gone", "2026-11-27T02:41:19Z"),
    ]


def test_a_file_that_went_is_named():
    after = copy.deepcopy(BEFORE)
    del after["files"]["lab-worker-1:etc/poweraware/cpu-power.json"]
    assert _snapshot_module().differences(BEFORE, after) == {"files": ["lab-worker-1:etc/poweraware/cpu-power.json"]}
