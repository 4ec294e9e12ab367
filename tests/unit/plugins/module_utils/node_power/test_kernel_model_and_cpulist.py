"""The kernel model enforces the kernel's rules (it is not a dict that accepts anything); cpulists."""

from __future__ import annotations

import errno

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
)

P0 = "devices/system/cpu/cpufreq/policy0"


def _errno(kernel, rel, value):
    with pytest.raises(OSError) as exc:
        kernel.write(rel, value)
    return exc.value.errno


@pytest.mark.parametrize(
    ("scenario", "rel", "value", "code"),
    [
        ("intel_pstate_active", f"{P0}/scaling_max_freq", "fast", errno.EINVAL),
        ("intel_pstate_active", f"{P0}/scaling_max_freq", "-1", errno.EINVAL),
        ("intel_pstate_active", f"{P0}/scaling_governor", "schedutil", errno.EINVAL),
        ("intel_pstate_active", f"{P0}/energy_performance_preference", "turbo", errno.EINVAL),
        ("intel_pstate_active", f"{P0}/energy_performance_preference", "256", errno.EINVAL),
        ("amd_pstate_epp", f"{P0}/energy_performance_preference", "64", errno.EINVAL),  # amd: names only
        ("intel_pstate_active", f"{P0}/cpuinfo_max_freq", "5000000", errno.EACCES),
        ("intel_pstate_active", f"{P0}/related_cpus", "0-3", errno.EACCES),
        ("intel_pstate_active", f"{P0}/scaling_maxfreq", "1000000", errno.ENOENT),  # typo: never created
        ("intel_cpufreq_passive", f"{P0}/energy_performance_preference", "power", errno.ENOENT),
        ("offline_cpus", "devices/system/cpu/cpu6/cpufreq/scaling_max_freq", "1000000", errno.ENOENT),
        ("offline_cpus", "devices/system/cpu/cpufreq/policy6/scaling_max_freq", "1000000", errno.EBUSY),
    ],
)
def test_kernel_refuses(make_node, scenario, rel, value, code):
    node = make_node(scenario)
    before = node.digest()
    assert _errno(node.kernel, rel, value) == code
    assert node.digest() == before


def test_epp_ebusy_under_performance(make_node):
    for scenario in ("intel_pstate_active", "amd_pstate_epp"):
        node = make_node(scenario)
        node.kernel.write(f"{P0}/scaling_governor", "performance")
        assert node.policy("policy0", "energy_performance_preference") == "performance"
        assert _errno(node.kernel, f"{P0}/energy_performance_preference", "balance_power") == errno.EBUSY
        node.kernel.write(f"{P0}/energy_performance_preference", "performance")  # allowed
        node.kernel.write(f"{P0}/scaling_governor", "powersave")  # cached EPP comes back
        assert node.policy("policy0", "energy_performance_preference") == "balance_performance"


def test_inactive_policy_read_is_ebusy(make_node):
    node = make_node("offline_cpus")
    with pytest.raises(OSError) as exc:
        node.kernel.read("devices/system/cpu/cpufreq/policy7/scaling_governor")
    assert exc.value.errno == errno.EBUSY


def test_clamping_and_table_resolution(make_node):
    node = make_node("acpi_cpufreq_shared")
    node.kernel.write(f"{P0}/scaling_max_freq", "9999999")  # clamped to cpuinfo_max
    assert node.policy("policy0", "scaling_max_freq") == "2601000"
    node.kernel.write(f"{P0}/scaling_max_freq", "2250000")  # resolved down to a table frequency
    assert node.policy("policy0", "scaling_max_freq") == "2200000"
    node.kernel.write(f"{P0}/scaling_min_freq", "1250000")  # resolved up
    assert node.policy("policy0", "scaling_min_freq") == "1300000"
    node.kernel.write(f"{P0}/scaling_min_freq", "2500000")  # above max: clamped to max
    assert node.policy("policy0", "scaling_min_freq") == "2200000"
    node.kernel.write(f"{P0}/scaling_max_freq", "2601000")  # the remembered min request comes back
    assert node.policy("policy0", "scaling_min_freq") == "2500000"
    # shared policy: the sibling sees it
    assert node.read("devices/system/cpu/cpu1/cpufreq/scaling_min_freq") == "2500000"


def test_fake_tree_shapes(make_node):
    node = make_node("offline_cpus")
    assert node.read("devices/system/cpu/online") == "0-5"
    assert not (node.sys / "devices/system/cpu/cpu0/online").exists()
    assert not (node.sys / "devices/system/cpu/cpu6/cpufreq").exists()
    assert (node.sys / "devices/system/cpu/cpufreq/policy6").is_dir()
    hybrid = make_node("hybrid")
    assert hybrid.policy("policy0", "cpuinfo_max_freq") == "5000000"
    assert hybrid.policy("policy7", "cpuinfo_max_freq") == "3800000"
    acpi = make_node("acpi_cpufreq_shared")
    assert acpi.policy("policy2", "related_cpus") == "2 3"
    assert (acpi.sys / "devices/system/cpu/cpu3/cpufreq").readlink().as_posix() == "../cpufreq/policy2"
    assert not (acpi.sys / "devices/system/cpu/intel_pstate").exists()
    none = make_node("no_cpufreq")
    assert not (none.sys / "devices/system/cpu/cpufreq").exists()


def test_build_tree_keeps_existing_state(tmp_path):
    # conftest.py loads lab/fake_sysfs.py under this name (lab/ is not a package on sys.path).
    import poweraware_lab_fake_sysfs as fake_sysfs

    root = fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active")
    governor = root / "devices/system/cpu/cpufreq/policy0/scaling_governor"
    governor.write_text("performance\n")
    fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active")
    assert governor.read_text() == "performance\n"  # same scenario: the lab's applied state survives
    fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active", rebuild=True)
    assert governor.read_text() == "powersave\n"
    with pytest.raises(ValueError, match="unknown scenario"):
        fake_sysfs.build_tree(tmp_path / "x", "pentium4")


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("", []), (" 5 ", [5]), ([1, "3-4"], [1, 3, 4]), (7, [7])],
)
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("bad", ["1,,2", "4-2", "x", "1-", "9000", True, 1.5, [-1]])
def test_parse_cpulist_errors(bad):
    with pytest.raises(CpuListError):
        parse_cpulist(bad)


def test_format_cpulist():
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10, 2]) == "0-3,8,10-11"
    assert format_cpulist([]) == ""
    assert parse_cpulist(format_cpulist(range(0, 64, 3))) == list(range(0, 64, 3))
