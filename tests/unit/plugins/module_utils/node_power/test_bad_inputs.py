"""Catalogue of bad requests: each fails with its exact message and changes no file.

``make unit PYTEST_ARGS='-k bad_input -v'`` lists them; docs/node-power.md reproduces the table.
"""

from __future__ import annotations

import json

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as cf

# (id, scenario, shape, prepare, request kwargs, exact message)
CATALOGUE = [
    (
        "cpu-not-present",
        "intel_pstate_active",
        {"cpus": "0-3,64", "epp": "power"},
        "CPU 64 is not present on this machine (present: 0-3); remove it from cpus",
    ),
    (
        "descending-range",
        "intel_pstate_active",
        {"cpus": "3-1", "epp": "power"},
        "invalid CPU list '3-1': range '3-1' is descending",
    ),
    (
        "not-a-cpu-list",
        "intel_pstate_active",
        {"cpus": "a,b", "epp": "power"},
        "invalid CPU list 'a,b': 'a' is not a CPU number (expected a form like '0-3,8,10-11')",
    ),
    (
        "max-above-cpuinfo-max",
        "intel_pstate_active",
        {"cpus": "0-3", "max_mhz": 4500},
        "max_mhz=4500 MHz is outside CPU 0's limits 800-3900 MHz (policy0, cpuinfo_min_freq/cpuinfo_max_freq); "
        "use a value in that range or 'min'/'max'",
    ),
    (
        "min-below-cpuinfo-min",
        "amd_pstate_epp",
        {"cpus": "2-3", "min_mhz": 300},
        "min_mhz=300 MHz is outside CPU 2's limits 400-3700 MHz (policy2, cpuinfo_min_freq/cpuinfo_max_freq); "
        "use a value in that range or 'min'/'max'",
    ),
    (
        "hybrid-e-core-limit",
        "hybrid",
        {"cpus": "0-7", "max_mhz": 4500},
        "max_mhz=4500 MHz is outside CPU 4's limits 800-3800 MHz (policy4, cpuinfo_min_freq/cpuinfo_max_freq); "
        "use a value in that range or 'min'/'max'",
    ),
    (
        "min-above-max",
        "intel_pstate_active",
        {"cpus": "0-3", "min_mhz": 3000, "max_mhz": 2000},
        "min_mhz (3000) is above max_mhz (2000) for CPU 0; min_mhz must be <= max_mhz",
    ),
    (
        "min-above-current-max",
        "intel_pstate_active",
        {"cpus": "1", "min_mhz": 2500},
        "min_mhz (2500) would be above CPU 1's current scaling_max_freq (2000 MHz) and the kernel would clamp it; "
        "also set max_mhz",
    ),
    (
        "max-below-current-min",
        "intel_pstate_active",
        {"cpus": "1", "max_mhz": 1500},
        "max_mhz (1500) would be below CPU 1's current scaling_min_freq (2500 MHz) and the kernel would clamp it; "
        "also set min_mhz",
    ),
    (
        "frequency-not-a-number",
        "intel_pstate_active",
        {"cpus": "0", "max_mhz": "fast"},
        "max_mhz='fast' is not a frequency: give MHz as an integer, or 'min' / 'max' for each CPU's own limit",
    ),
    (
        "frequency-zero",
        "intel_pstate_active",
        {"cpus": "0", "min_mhz": 0},
        "min_mhz=0 is not a frequency: give a positive integer in MHz",
    ),
    (
        "governor-not-available",
        "intel_pstate_active",
        {"cpus": "0-3", "governor": "schedutil"},
        "governor 'schedutil' is not available for CPU 0 (policy0, driver intel_pstate); "
        "scaling_available_governors: performance powersave",
    ),
    (
        "epp-not-available",
        "intel_pstate_active",
        {"cpus": "0-3", "epp": "turbo"},
        "epp 'turbo' is not available for CPU 0 (policy0); energy_performance_available_preferences: "
        "default performance balance_performance balance_power power",
    ),
    (
        "epp-under-performance-intel",
        "intel_pstate_active",
        {"cpus": "0-3", "governor": "performance", "epp": "balance_power"},
        "epp 'balance_power' is refused by intel_pstate (EBUSY) while CPU 0 (policy0) uses the 'performance' "
        "governor; set governor: powersave, or epp: performance",
    ),
    (
        "epp-under-current-performance-amd",
        "amd_pstate_epp",
        {"cpus": "4-7", "epp": "power"},
        "epp 'power' is refused by amd-pstate-epp (EBUSY) while CPU 4 (policy4) uses the 'performance' "
        "governor; set governor: powersave, or epp: performance",
    ),
    (
        "epp-without-hwp",
        "intel_cpufreq_passive",
        {"cpus": "0-3", "epp": "power"},
        "CPU 0 (policy0, driver intel_cpufreq) has no energy_performance_preference: EPP needs intel_pstate or "
        "amd-pstate-epp with HWP/CPPC; drop epp for this node",
    ),
    (
        "epp-default-unverifiable",
        "intel_pstate_active",
        {"cpus": "0", "epp": "default"},
        "epp='default' cannot be verified on read-back (the kernel reports the firmware value it maps to); "
        "name the preference explicitly, e.g. balance_performance",
    ),
    (
        "splits-shared-policy",
        "acpi_cpufreq_shared",
        {"cpus": "2", "max_mhz": 2000},
        "CPU 2 shares cpufreq policy policy2 with CPU 3 (related_cpus 2-3); one write changes all of them: "
        "include or exclude the whole policy (check reserved_cpus and pools)",
    ),
    (
        "reserved-splits-shared-policy",
        "acpi_cpufreq_shared",
        {"cpus": "2-5", "reserved_cpus": "3", "max_mhz": 2000},
        "CPU 2 shares cpufreq policy policy2 with CPU 3 (related_cpus 2-3); one write changes all of them: "
        "include or exclude the whole policy (check reserved_cpus and pools)",
    ),
    (
        "everything-reserved",
        "intel_pstate_active",
        {"cpus": "0-1", "reserved_cpus": "0-1", "epp": "power"},
        "no CPU left to manage: cpus 0-1 minus reserved_cpus 0-1 is empty",
    ),
    (
        "reserved-not-present",
        "intel_pstate_active",
        {"cpus": "all", "reserved_cpus": "0,99", "epp": "power"},
        "reserved CPU 99 is not present on this machine (present: 0-3); fix reserved_cpus",
    ),
    (
        "nothing-to-apply",
        "intel_pstate_active",
        {"cpus": "0-3"},
        "nothing to apply: give at least one of min_mhz, max_mhz, governor, epp",
    ),
    (
        "online-cpu-without-cpufreq",
        "intel_pstate_active",
        {"cpus": "0-3", "epp": "power"},
        "CPU 1 is online but has no cpufreq directory ({sys}/devices/system/cpu/cpu1/cpufreq is missing); "
        "remove it from cpus",
    ),
]


def _prepare(node, case_id):
    if case_id == "min-above-current-max":
        cf.apply_profile(node.kernel, cf.Request(cpus="1", max_mhz=2000), state_file=str(node.state_file))
    elif case_id == "max-below-current-min":
        cf.apply_profile(node.kernel, cf.Request(cpus="1", min_mhz=2500), state_file=str(node.state_file))
    elif case_id == "epp-under-current-performance-amd":
        for cpu in range(4, 8):
            node.kernel.write(f"devices/system/cpu/cpufreq/policy{cpu}/scaling_governor", "performance")
    elif case_id == "online-cpu-without-cpufreq":
        (node.sys / "devices/system/cpu/cpu1/cpufreq").unlink()
    node.kernel.writes.clear()


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 15
    assert len({case[0] for case in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize(("case_id", "scenario", "kwargs", "message"), CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_bad_input(make_node, case_id, scenario, kwargs, message):
    node = make_node(scenario)
    _prepare(node, case_id)
    before = node.digest()
    with pytest.raises(cf.ValidationError) as exc:
        cf.apply_profile(node.kernel, cf.Request(**kwargs), state_file=str(node.state_file))
    assert str(exc.value) == message.format(sys=node.sys)
    assert node.kernel.writes == []
    assert node.digest() == before


def test_no_cpufreq_message(make_node):
    node = make_node("no_cpufreq")
    before = node.digest()
    with pytest.raises(cf.ValidationError) as exc:
        cf.apply_profile(node.kernel, cf.Request(cpus="all", epp="power"), state_file=str(node.state_file))
    assert str(exc.value) == (
        f"no cpufreq policy found under {node.sys}/devices/system/cpu/cpufreq: the kernel exposes no CPU "
        "frequency scaling on this machine (no cpufreq driver, intel_pstate=disable, or a VM); nothing can be "
        "applied. Check cpu_power_info's cpufreq_available before calling cpu_power_profile"
    )
    assert node.digest() == before


def test_restore_partial_policy_refused(make_node):
    node = make_node("acpi_cpufreq_shared")
    cf.apply_profile(node.kernel, cf.Request(cpus="2-3", max_mhz=2000), state_file=str(node.state_file))
    before = node.digest()
    with pytest.raises(cf.ValidationError) as exc:
        cf.restore_profile(node.kernel, cpus="3", state_file=str(node.state_file))
    assert str(exc.value) == "cpus 3 cover only part of cpufreq policy policy2 (CPUs 2-3); restore the whole policy"
    assert node.digest() == before


def test_corrupt_state_file_refused(make_node):
    node = make_node("intel_pstate_active")
    node.state_file.parent.mkdir(parents=True)
    node.state_file.write_text("{not json")
    before = node.digest()
    with pytest.raises(cf.PowerError, match="holds the original CPU settings: repair it or move it away"):
        cf.apply_profile(node.kernel, cf.Request(cpus="0", epp="power"), state_file=str(node.state_file))
    assert node.digest() == before


def test_damaged_state_file_entry_refused(make_node):
    """Row 27: an entry whose CPUs are not a CPU list is refused on load, by a restore and an apply alike."""
    node = make_node("intel_pstate_active")
    node.state_file.parent.mkdir(parents=True)
    node.state_file.write_text(
        '{"version": 1, "policies": {"policy0": {"path": "devices/system/cpu/cpufreq/policy0", "cpus": "0-x", '
        '"original": {"energy_performance_preference": "balance_performance"}, '
        '"order": ["energy_performance_preference"]}}}'
    )
    before = node.digest()
    for run in (
        lambda: cf.restore_profile(node.kernel, state_file=str(node.state_file)),
        lambda: cf.apply_profile(node.kernel, cf.Request(cpus="0", epp="power"), state_file=str(node.state_file)),
    ):
        with pytest.raises(cf.PowerError) as exc:
            run()
        assert str(exc.value) == (
            f"state file {node.state_file} is damaged: policy policy0: cpus: invalid CPU list '0-x': 'x' is not a "
            "CPU number (expected a form like '0-3,8,10-11'); it holds the original CPU settings: repair it or "
            "move it away (originals then become the current values)"
        )
    assert node.digest() == before


@pytest.mark.parametrize("escape", ["devices/system/cpu/../../../../outside.conf", "{base}/outside.conf"])
def test_a_journal_path_out_of_the_sysfs_root_is_refused_before_a_restore_writes_there(make_node, escape):
    """state=absent writes each recorded original back as root: an entry whose path leaves the
    sysfs root (through "..", or absolute) is refused on load, and the file there is not touched
    (the old journal check read only the policies part: the restore wrote 'restored' into it)."""
    from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor

    node = make_node("intel_pstate_active")
    outside = node.base / "outside.conf"
    outside.write_text("the user's file\n")
    path = escape.format(base=node.base)
    node.state_file.parent.mkdir(parents=True)
    entry = {"control": "cstates", "cpu": None, "label": "C6 disable", "original": "restored", "seq": 1}
    node.state_file.write_text(json.dumps({"version": 1, "policies": {}, "attributes": {path: entry}}))
    before = node.digest()
    with pytest.raises(cf.PowerError) as exc:
        cf.restore_controls(SysfsAccessor(str(node.sys)), state_file=str(node.state_file))
    assert str(exc.value).startswith(f"state file {node.state_file} is damaged: attribute {path!r}: path {path!r} ")
    assert outside.read_text() == "the user's file\n"
    assert node.digest() == before
