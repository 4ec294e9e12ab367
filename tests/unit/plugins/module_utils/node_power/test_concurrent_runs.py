"""Two runs at once against one node: the state file's lock (issue: concurrent runs lost originals).

Each trial starts two processes at a barrier on one kernel-model tree, each changing its own CPU's
policy (and the second a C-state too), then restores everything with state=absent: an original a
concurrent save dropped would leave its attribute changed, and the tree would not hash as before.
Without the lock (state_lock a no-op) a few trials of each kind lose an original.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.filter.module_utils_closure import module_utils_closure
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_journal as journal
from poweraware_testing import load_module, race, tree_digest

TRIALS = 40
REPO_ROOT = pathlib.Path(__file__).resolve().parents[5]
# the kernel model as conftest.py loaded it (a bare "conftest" import is whichever directory's ran last)
fake_kernel = sys.modules["poweraware_lab_fake_kernel"]
LIBRARY_PACKAGE = "ansible_collections.poweraware.k8s.plugins.module_utils"


def _apply(node_sys, state_file, cpus, max_mhz, cstates=None):
    """cpu_power_profile runs, as a task calls the module: each on the machine as it is at its start."""

    def run_on(kernel):
        return lambda: pa.apply_controls(
            kernel, pa.Request(cpus=cpus, max_mhz=max_mhz), cstates=cstates, state_file=state_file
        )

    return lambda: lambda: run_on(fake_kernel.FakeKernel(node_sys))


def _boot_unit(runner_dir, config):
    """The boot unit's runs, as systemd starts it: its library is the package tree beside it."""

    def runs():
        for name in [n for n in sys.modules if n == LIBRARY_PACKAGE or n.startswith(LIBRARY_PACKAGE + ".")]:
            del sys.modules[name]
        runner = load_module("poweraware_boot_runner", runner_dir / "cpu_power_apply.py")

        def run():
            if runner.main(["cpu_power_apply.py", str(config)]) != 0:
                raise AssertionError("the boot runner failed")

        return lambda: run

    return runs


def _restore(node):
    result = pa.restore_controls(fake_kernel.FakeKernel(node.sys), state_file=str(node.state_file))
    assert result["changed"] is True
    state = json.loads(node.state_file.read_text())
    assert (state["policies"], state.get("attributes", {})) == ({}, {})


# what the runs change: each policy's scaling_max_freq, CPU 2's C6 (read before and after each trial;
# the whole tree is hashed once, after the last)
WATCHED = [f"devices/system/cpu/cpufreq/policy{n}/scaling_max_freq" for n in range(8)] + [
    "devices/system/cpu/cpu2/cpuidle/state3/disable"
]


def _recorded_and_restored(node, policies, attributes):
    """What is wrong after a trial: originals missing from the state file, or absent not restoring them."""
    problems = []
    recorded = json.loads(node.state_file.read_text())
    if sorted(recorded["policies"]) != policies or len(recorded.get("attributes", {})) != attributes:
        problems.append(f"recorded {sorted(recorded['policies'])} and {sorted(recorded.get('attributes', {}))}")
    _restore(node)
    left = {rel: node.read(rel) for rel, value in node.initial.items() if node.read(rel) != value}
    if left:
        problems.append(f"state=absent left {left}")
    return problems


def _watch(node):
    node.initial = {rel: node.read(rel) for rel in WATCHED if (node.sys / rel).exists()}
    return tree_digest(node.sys)


def test_two_concurrent_applies_lose_no_original(make_node):
    node = make_node("intel_idle_uncore")
    before = _watch(node)
    state = str(node.state_file)
    problems = race(
        TRIALS,
        lambda: _recorded_and_restored(node, ["policy1", "policy2"], 1),
        (_apply(node.sys, state, "1", 2000), 0),
        (_apply(node.sys, state, "2", 2100, {"disable": ["C6"]}), 0),
    )
    assert problems == []
    assert tree_digest(node.sys) == before


@pytest.fixture
def boot_runner(tmp_path):
    """The boot unit's runner installed as the role installs it: the script and the module_utils files
    its imports reach (the module_utils_closure filter's list), in their package tree beside it."""
    runner = (REPO_ROOT / "roles/cpu_power/files/cpu_power_apply.py").read_text()
    directory = tmp_path / "usr/local/lib/poweraware"
    directory.mkdir(parents=True)
    for entry in module_utils_closure(runner, "cpu_power_apply.py", str(directory)):
        path = pathlib.Path(entry["path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(entry["content"])
    (directory / "cpu_power_apply.py").write_text(runner)
    return directory


def test_an_apply_beside_the_boot_unit_loses_no_original(make_node, boot_runner, tmp_path):
    node = make_node("intel_pstate_active")
    before = _watch(node)
    state = str(node.state_file)
    config = tmp_path / "cpu_power.json"
    config.write_text(
        json.dumps(
            {
                "sysfs_root": str(node.sys),
                "state_file": state,
                "tolerance_mhz": 100,
                "reserved_cpus": [0],
                "assignments": [
                    {"pool": "shared", "cpus": [2], "min_mhz": None, "max_mhz": 2100, "governor": None, "epp": None},
                    {"pool": "node", "cpus": [3], "min_mhz": None, "max_mhz": 2200, "governor": None, "epp": None},
                ],
            }
        )
    )
    problems = race(
        TRIALS,
        lambda: _recorded_and_restored(node, ["policy1", "policy2", "policy3"], 0),
        (_apply(node.sys, state, "1", 2000), 0.004),
        (_boot_unit(boot_runner, config), 0),
    )
    assert problems == []
    assert tree_digest(node.sys) == before


def test_two_first_runs_both_create_the_state_directory(make_node):
    """Two first runs at once: neither fails on the directory the other created ("File exists")."""
    node = make_node("intel_pstate_active")
    state = str(node.state_file)

    def check():
        problems = [] if node.state_file.exists() else ["no state file"]
        if not problems and sorted(json.loads(node.state_file.read_text())["policies"]) != ["policy1", "policy2"]:
            problems.append(f"recorded {node.state_file.read_text()}")
        _restore(node)
        node.state_file.unlink()
        node.state_file.parent.rmdir()
        return problems

    problems = race(20, check, (_apply(node.sys, state, "1", 2000), 0), (_apply(node.sys, state, "2", 2100), 0))
    assert problems == []


# --- the lock itself ------------------------------------------------------------------------------


def test_a_refused_first_run_leaves_no_state_directory(make_node):
    node = make_node("intel_pstate_active")
    base = node.base / "var"
    assert not base.exists()
    with pytest.raises(pa.ValidationError):
        pa.apply_controls(
            fake_kernel.FakeKernel(node.sys), pa.Request(cpus="1", max_mhz=99999), state_file=str(node.state_file)
        )
    assert not base.exists()  # var/lib/poweraware and its parents were created for the lock, then removed
    current_mhz = int(node.policy("policy1", "scaling_max_freq")) // 1000
    result = pa.apply_controls(
        fake_kernel.FakeKernel(node.sys), pa.Request(cpus="1", max_mhz=current_mhz), state_file=str(node.state_file)
    )
    assert result["changed"] is False and not base.exists()  # a no-change first run records nothing


def test_check_mode_creates_nothing_and_takes_a_shared_lock(make_node):
    node = make_node("intel_pstate_active")
    acc = fake_kernel.FakeKernel(node.sys)
    result = pa.apply_controls(
        acc, pa.Request(cpus="1", max_mhz=2000), state_file=str(node.state_file), check_mode=True
    )
    assert result["changed"] is True and not (node.base / "var").exists()
    pa.apply_controls(acc, pa.Request(cpus="1", max_mhz=2000), state_file=str(node.state_file))
    with journal.state_lock(str(node.state_file), exclusive=False):
        # a second reader is let in beside the first; a writer is not
        with journal.state_lock(str(node.state_file), exclusive=False, wait=0):
            pass
        with pytest.raises(pa.PowerError) as info, journal.state_lock(str(node.state_file), wait=0):
            pytest.fail("a writer got the lock a reader holds")
    assert str(info.value) == (
        f"state file {node.state_file}: another run has held its lock (on {node.state_file.parent}) for more than "
        "0 s - a cpu_power_profile task or the boot unit that re-applies the profiles; nothing was changed: let "
        "it finish, then run again"
    )


def test_a_run_that_waited_on_a_removed_directory_locks_the_new_one(tmp_path, monkeypatch):
    """The run holding the lock removed the directory it had created (a refused first run); the run
    waiting on it must not go on under a lock nobody else can see."""
    state = tmp_path / "var/lib/poweraware/cpu_power_state.json"
    opened = []
    real_open = os.open

    def open_and_replace_once(path, flags, *args):
        fd = real_open(path, flags, *args)
        if path == str(state.parent) and not opened:
            opened.append(os.fstat(fd).st_ino)
            os.rmdir(path)  # gone while this run waited
            os.mkdir(path)  # and made again by the next first run
        return fd

    monkeypatch.setattr(journal.os, "open", open_and_replace_once)
    with journal.state_lock(str(state)):
        assert state.parent.stat().st_ino != opened[0]
        assert pathlib.Path(state.parent).is_dir()
    assert state.parent.is_dir()  # made by "the other run", not this one: left in place


def test_the_lock_refuses_a_directory_it_cannot_open(tmp_path):
    (tmp_path / "not-a-dir").write_text("")
    state = tmp_path / "not-a-dir" / "cpu_power_state.json"
    with pytest.raises(pa.PowerError) as info, journal.state_lock(str(state)):
        pytest.fail("locked a file's child")
    assert str(info.value) == (
        f"state file {state}: cannot lock its directory {state.parent}: [Errno 20] Not a directory: "
        f"'{state.parent}'; nothing was changed"
    )


def test_at_boot_a_pool_whose_cpus_are_all_offline_fails_alone(make_node, boot_runner, tmp_path):
    """The boot unit applies each pool on its own: a pool whose CPUs are all offline at boot (maxcpus=,
    a CPU taken down) is refused and named, the unit exits 1 (systemctl --failed shows it), and the
    other pools are still applied - a pool's offline CPUs never cost the node its other settings."""
    node = make_node("offline_cpus")  # CPUs 6-7 offline
    config = tmp_path / "cpu_power.json"
    config.write_text(
        json.dumps(
            {
                "sysfs_root": str(node.sys),
                "state_file": str(node.state_file),
                "tolerance_mhz": 100,
                "reserved_cpus": [0],
                "assignments": [
                    {"pool": "down", "cpus": [6, 7], "max_mhz": 2000},
                    {"pool": "up", "cpus": [2], "max_mhz": 2100},
                ],
            }
        )
    )
    # as systemd runs it: its own process, its library the tree beside it (in this process the runner's
    # sys.path entry would replace the collection's module_utils for the tests that follow); the venv's
    # Python has no poweraware.k8s, so a module the tree lacked would fail the import
    run = subprocess.run(
        [sys.executable, str(boot_runner / "cpu_power_apply.py"), str(config)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
    )
    assert run.returncode == 1, run
    assert run.stderr.startswith("down: every CPU to manage is offline (cpus 6-7; online: 0-5)"), run.stderr
    assert run.stdout == "up: CPUs 2 changed\n"
    assert (node.sys / "devices/system/cpu/cpu2/cpufreq/scaling_max_freq").read_text().strip() == "2100000"
