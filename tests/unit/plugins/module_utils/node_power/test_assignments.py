"""Several assignments in one run (cpu_power_profile's ``assignments``, the cpu_power role's one
apply task): every pool is validated against the node before the first write, and a failure in a
later pool rolls back what the earlier ones wrote - the node ends as it was or as asked."""

from __future__ import annotations

import errno
import json
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.modules import cpu_power_profile
from poweraware_testing import tree_digest
from test_cpu_power_modules import run

fake_sysfs = sys.modules["poweraware_lab_fake_sysfs"]  # loaded by conftest (a bare 'conftest' import is ambiguous)

POOLS = [
    {
        "pool": "latency",
        "profile": "performance",
        "cpus": "2-3",
        "min_mhz": "max",
        "max_mhz": "max",
        "epp": "performance",
    },  # fmt: skip
    {"pool": "shared", "cpus": "4-7", "max_mhz": 2000, "epp": "power"},
]


@pytest.fixture
def node(make_node, monkeypatch):
    """An intel_pstate node with RAPL package zones (intel_idle_uncore), driven by the kernel model."""
    made = make_node("intel_idle_uncore")
    monkeypatch.setattr(cpu_power_profile, "SysfsAccessor", lambda root: made.kernel)
    return made


def _args(node, assignments, **extra):
    return {"assignments": assignments, "reserved_cpus": "0-1", "sysfs_root": str(node.sys),
            "state_file": str(node.state_file), **extra}  # fmt: skip


def _originals(node):
    if not node.state_file.exists():
        return {}
    data = json.loads(node.state_file.read_text())
    return {"policies": data.get("policies") or {}, "attributes": data.get("attributes") or {}}


def test_every_pool_is_checked_before_the_first_write_and_all_problems_are_named(node, capsys):
    pristine = node.digest()
    bad = [
        POOLS[0],
        {"pool": "batch", "profile": "eco", "cpus": "4-5", "governor": "ondemand"},
        {"pool": "hot", "cpus": "6-7", "governor": "performance", "epp": "power"},
    ]
    out = run(cpu_power_profile, _args(node, bad), capsys)
    assert out["failed"] is True and out["changed"] is False
    assert out["msg"] == (
        "invalid request, nothing was changed: pool batch (profile eco): governor 'ondemand' is not available for "
        "CPU 4 (policy4, driver intel_pstate); scaling_available_governors: performance powersave; pool hot: epp "
        "'power' is refused by intel_pstate (EBUSY) while CPU 6 (policy6) uses the 'performance' governor; set "
        "governor: powersave, or epp: performance"
    )
    assert node.digest() == pristine  # the good first pool was not applied either
    assert not node.state_file.parent.exists()


def test_check_apply_rerun_in_one_call(node, capsys, tmp_path):
    pristine = node.digest()
    pristine_sys = fake_sysfs.build_tree(tmp_path / "pristine", "intel_idle_uncore")
    checked = run(cpu_power_profile, _args(node, POOLS), capsys, check=True, diff=True)
    assert checked["changed"] is True
    assert node.digest() == pristine
    assert [a["pool"] for a in checked["assignments"]] == ["latency", "shared"]
    assert checked["diff"]["before"].startswith("# pool latency (profile performance)\n")
    assert "\n# pool shared\n" in checked["diff"]["after"]

    applied = run(cpu_power_profile, _args(node, POOLS), capsys)
    assert applied["changed"] is True
    assert [a["cpus"] for a in applied["assignments"]] == ["2-3", "4-7"]
    assert node.policy("policy2", "scaling_min_freq") == node.policy("policy2", "cpuinfo_max_freq")
    assert node.policy("policy5", "energy_performance_preference") == "power"
    again = run(cpu_power_profile, _args(node, POOLS), capsys, diff=True)
    assert again["changed"] is False and "diff" not in again

    restored = run(cpu_power_profile, {"state": "absent", "sysfs_root": str(node.sys),
                                       "state_file": str(node.state_file)}, capsys)  # fmt: skip
    assert restored["changed"] is True
    assert tree_digest(node.sys) == tree_digest(pristine_sys)


def test_a_locked_power_limit_after_the_pools_rolls_the_pools_back(node, capsys):
    """The BIOS lock is found only by writing (EACCES): the pools written before it are undone."""
    node.kernel.lock_powercap("intel-rapl:0")
    sys_before = tree_digest(node.sys)
    assignments = [*POOLS, {"pool": "node", "cpus": "all", "power_cap": {"watts": 100}}]
    out = run(cpu_power_profile, _args(node, assignments), capsys)
    assert out["failed"] is True and out["changed"] is False
    assert out["msg"].startswith("pool node: writing "), out["msg"]
    assert "EACCES" in out["msg"]
    assert out["msg"].endswith(
        "the earlier assignments were rolled back too (12 value(s)): the node is as before this run"
    )
    assert tree_digest(node.sys) == sys_before
    assert _originals(node) in ({}, {"policies": {}, "attributes": {}})


def test_a_failed_undo_keeps_the_originals_of_what_stayed_changed(node, capsys):
    """Double fault: the last pool fails, and writing back the first pool fails too - the journal
    keeps that pool's originals (state=absent can restore them later) and the message says so."""
    node.kernel.fail_write("policy6/energy_performance_preference", errno.EIO)
    # the first pool's EPP write succeeds; its write back (the 2nd write there) fails
    node.kernel.fail_write("policy2/energy_performance_preference", errno.EBUSY, after=1)
    out = run(cpu_power_profile, _args(node, POOLS), capsys)
    assert out["failed"] is True
    assert "pool shared: writing 'power'" in out["msg"] and "EIO" in out["msg"]
    assert "rolling back the earlier assignments FAILED for: policy2/energy_performance_preference" in out["msg"]
    assert "state=absent restores them" in out["msg"]
    kept = _originals(node)["policies"]
    assert list(kept) == ["policy2"] and kept["policy2"]["original"] == {
        "energy_performance_preference": "balance_performance"
    }
    assert node.policy("policy2", "energy_performance_preference") == "performance"
    assert node.policy("policy3", "energy_performance_preference") == "balance_performance"  # undone
    assert node.policy("policy5", "energy_performance_preference") == "balance_performance"  # its own rollback
    restored = run(cpu_power_profile, {"state": "absent", "sysfs_root": str(node.sys),
                                       "state_file": str(node.state_file)}, capsys)  # fmt: skip
    assert restored["changed"] is True
    assert node.policy("policy2", "energy_performance_preference") == "balance_performance"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"assignments": [], "sysfs_root": "/sys"}, "invalid request, nothing was changed: assignments is empty"),
        (
            {"assignments": [{"pool": "a", "cpus": "2-3"}], "sysfs_root": "/sys"},
            "invalid request, nothing was changed: pool a: nothing to apply: give at least one of min_mhz",
        ),
        (
            {"assignments": [{"cpus": "2"}], "cpus": "2", "sysfs_root": "/sys"},
            "parameters are mutually exclusive: assignments|cpus",
        ),
        (
            {"assignments": [{"cpus": "2", "epp": "power"}], "state": "absent", "sysfs_root": "/sys"},
            "assignments is for state=present",
        ),
        ({"assignments": [{"pool": "a", "epp": "power"}], "sysfs_root": "/sys"}, "missing required arguments: cpus"),
    ],
    ids=["empty", "nothing-to-set", "with-cpus", "absent", "no-cpus"],
)
def test_bad_assignments_are_refused(node, capsys, args, message):
    pristine = node.digest()
    out = run(cpu_power_profile, {**args, "sysfs_root": str(node.sys), "state_file": str(node.state_file)}, capsys)
    assert out["failed"] is True
    assert message in out["msg"], out["msg"]
    assert node.digest() == pristine


def test_values_from_the_command_line_are_strings_and_behave_alike(node, capsys):
    """-e gives strings: "100" watts and "2000" MHz mean what 100 and 2000 mean in YAML."""
    node_cap = {"pool": "node", "cpus": "all", "power_cap": {"watts": 100}}
    as_yaml = run(cpu_power_profile, _args(node, [POOLS[1], node_cap]), capsys, check=True)
    as_strings = run(
        cpu_power_profile,
        _args(node, [{**POOLS[1], "max_mhz": "2000"}, {**node_cap, "power_cap": {"watts": "100"}}]),
        capsys,
        check=True,
    )
    assert as_yaml["changed"] is True
    assert as_strings["assignments"] == as_yaml["assignments"]


def test_the_library_entry_point_plans_against_what_the_kernel_holds_now(node):
    """Two assignments on the same CPUs: the second is planned after the first wrote."""
    result = pa.apply_assignments(
        node.kernel,
        [{"cpus": "4-5", "max_mhz": 2000}, {"cpus": "4-5", "max_mhz": 2000, "epp": "power"}],
        state_file=str(node.state_file),
    )
    assert [a["changed"] for a in result["assignments"]] == [True, True]
    assert node.policy("policy4", "scaling_max_freq") == "2000000"
    assert json.loads(node.state_file.read_text())["policies"]["policy4"]["original"]["scaling_max_freq"] == "3900000"
