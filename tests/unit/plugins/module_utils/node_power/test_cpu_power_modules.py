"""Run the modules themselves (argument spec, check mode, diff mode, failure output)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.poweraware.k8s.plugins.modules import cpu_power_info, cpu_power_profile
from poweraware_testing import as_target_process


def run(module, args, capsys, check=False, diff=False):
    full = dict(args)
    full["_ansible_check_mode"] = check
    full["_ansible_diff"] = diff
    with as_target_process(), patch_module_args(full), pytest.raises(SystemExit) as exc:
        module.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = exc.value.code
    return out


@pytest.fixture
def kernel_node(make_node, monkeypatch):
    """A node whose sysfs is driven through the kernel model, injected in place of SysfsAccessor."""

    def factory(scenario, **shape):
        node = make_node(scenario, **shape)
        monkeypatch.setattr(cpu_power_profile, "SysfsAccessor", lambda root: node.kernel)
        return node

    return factory


def test_info_module_facts(make_node, capsys):
    node = make_node("hybrid")
    out = run(cpu_power_info, {"sysfs_root": str(node.sys)}, capsys)
    assert out["changed"] is False
    facts = out["ansible_facts"]["poweraware_cpu_power"]
    assert facts == out["cpu_power"]
    assert facts["driver"] == "intel_pstate"
    assert facts["intel_pstate_status"] == "active"
    assert facts["hwp"] is True
    assert [(g["cpulist"], g["cpuinfo_max_mhz"]) for g in facts["limit_groups"]] == [("0-3", 5000), ("4-7", 3800)]
    assert facts["cpus"]["5"]["base_mhz"] == 1800
    assert facts["rapl"]["zones"][0] == {
        "zone": "intel-rapl:0",
        "name": "package-0",
        "package": 0,
        "die": None,
        "tdp_w": 125.0,
        "max_energy_range_uj": 262143328850,
        "energy_readable": True,
    }
    assert facts["rapl"]["skipped"] == [{"zone": "intel-rapl:1", "name": "psys"}]


def test_info_module_offline_and_shared(make_node, capsys):
    node = make_node("offline_cpus")
    facts = run(cpu_power_info, {"sysfs_root": str(node.sys)}, capsys)["cpu_power"]
    assert (facts["present"], facts["online"], facts["offline"]) == ("0-7", "0-5", "6-7")
    assert facts["cpus"]["6"] == {"online": False, "policy": None}
    acpi = make_node("acpi_cpufreq_shared")
    facts = run(cpu_power_info, {"sysfs_root": str(acpi.sys)}, capsys)["cpu_power"]
    assert [(p["name"], p["cpus"], p["shared"]) for p in facts["policies"]][:2] == [
        ("policy0", "0-1", True),
        ("policy2", "2-3", True),
    ]
    assert facts["intel_pstate_status"] is None
    assert facts["epp_supported"] is False


def test_info_module_bad_root(tmp_path, capsys):
    out = run(cpu_power_info, {"sysfs_root": str(tmp_path)}, capsys)
    assert out["failed"] is True
    assert "this is not a Linux sysfs tree (check sysfs_root)" in out["msg"]


def test_info_module_hwmon_labels(make_node, capsys):
    node = make_node("arm64_cppc")
    # a user's rule goes before the defaults: here the SysIO rails are counted instead of the CPU's,
    # which a default rule classes package too (the user's rule wins the package)
    rule = {"class": "package", "pattern": r"sysio power socket (?P<package>\d+)"}
    facts = run(cpu_power_info, {"sysfs_root": str(node.sys), "hwmon_labels": [rule]}, capsys)["cpu_power"]
    reading = facts["power_reading"]
    assert [(z["name"], z["label"]) for z in reading["zones"]] == [
        ("package-0", "SysIO Power Socket 0"),
        ("package-1", "SysIO Power Socket 1"),
    ]
    assert [i["reason"] for i in reading["ignored"]] == [
        "package 0 is read from hwmon0 power1_input (SysIO Power Socket 0)",
        "package 1 is read from hwmon0 power3_input (SysIO Power Socket 1)",
    ]
    assert reading["messages"][-1] == (
        "2 hwmon energy/power sensor(s) are not package power (see ignored); hwmon_labels classifies labels"
    )
    bad = run(
        cpu_power_info,
        {"sysfs_root": str(node.sys), "hwmon_labels": [{"class": "package", "pattern": "["}, {}]},
        capsys,
    )
    assert bad["failed"] is True
    assert bad["msg"] == (
        "invalid hwmon_labels, nothing was read: hwmon_labels entry 1: pattern '[' is not a regular expression "
        "(unterminated character set at position 0); fix or quote it; hwmon_labels entry 2: {} is not a mapping "
        "of exactly 'class' and 'pattern'; write e.g. {class: package, pattern: 'CPU Power Socket (?P<package>\\d+)'}"
    )


def test_profile_module_apply_idempotent_diff_check(kernel_node, capsys):
    node = kernel_node("intel_pstate_active")
    args = {
        "cpus": [1, 2, 3],
        "reserved_cpus": "0",
        "min_mhz": "1200",
        "max_mhz": 3000,
        "governor": "powersave",
        "epp": "balance_power",
        "sysfs_root": str(node.sys),
        "state_file": str(node.state_file),
    }
    pristine = node.digest()
    checked = run(cpu_power_profile, args, capsys, check=True, diff=True)
    assert checked["changed"] is True
    assert node.digest() == pristine
    before_lines = checked["diff"]["before"].splitlines()
    after_lines = checked["diff"]["after"].splitlines()
    assert before_lines[0].split() == ["cpu", "policy", "min_mhz", "max_mhz", "governor", "epp"]
    assert before_lines[1].split() == ["1", "policy1", "800", "3900", "powersave", "balance_performance"]
    assert after_lines[3].split() == ["3", "policy3", "1200", "3000", "powersave", "balance_power"]

    applied = run(cpu_power_profile, args, capsys, diff=True)
    assert applied["changed"] is True
    assert applied["cpus"] == "1-3"
    assert applied["policies"][0]["after"] == {
        "min_mhz": 1200,
        "max_mhz": 3000,
        "governor": "powersave",
        "epp": "balance_power",
    }
    assert sorted(applied["policies"][0]["changed"]) == [
        "energy_performance_preference",
        "scaling_max_freq",
        "scaling_min_freq",
    ]
    assert "diff" in applied
    again = run(cpu_power_profile, args, capsys, diff=True)
    assert again["changed"] is False
    assert "diff" not in again
    no_diff = run(cpu_power_profile, dict(args, max_mhz=2000), capsys)
    assert no_diff["changed"] is True
    assert "diff" not in no_diff  # only in diff mode

    restored = run(cpu_power_profile, {**args, "state": "absent", "cpus": None}, capsys)
    assert restored["changed"] is True
    assert node.policy("policy1", "scaling_max_freq") == "3900000"
    assert run(cpu_power_profile, {**args, "state": "absent", "cpus": None}, capsys)["changed"] is False


def test_profile_module_bad_input_message(kernel_node, capsys):
    node = kernel_node("hybrid")
    before = node.digest()
    out = run(
        cpu_power_profile,
        {"cpus": "0-7", "max_mhz": 4500, "sysfs_root": str(node.sys), "state_file": str(node.state_file)},
        capsys,
    )
    assert out["failed"] is True
    assert out["changed"] is False
    assert out["msg"] == (
        "invalid request, nothing was changed: max_mhz=4500 MHz is outside CPU 4's limits 800-3800 MHz "
        "(policy4, cpuinfo_min_freq/cpuinfo_max_freq); use a value in that range or 'min'/'max'"
    )
    assert node.digest() == before


def test_profile_module_requires_cpus(make_node, capsys):
    node = make_node("intel_pstate_active")
    out = run(cpu_power_profile, {"epp": "power", "sysfs_root": str(node.sys)}, capsys)
    assert out["failed"] is True
    assert "state is present but any of the following are missing: cpus, assignments" in out["msg"]


def test_profile_module_failure_midway(kernel_node, capsys):
    import errno

    node = kernel_node("amd_pstate_epp")
    node.kernel.fail_write("policy5/energy_performance_preference", errno.EIO)
    pristine = node.digest()
    out = run(
        cpu_power_profile,
        {"cpus": "all", "epp": "power", "sysfs_root": str(node.sys), "state_file": str(node.state_file)},
        capsys,
    )
    assert out["failed"] is True
    assert "failed: EIO" in out["msg"]
    assert "rolled back the 5 value(s) this run had changed" in out["msg"]
    node.state_file.unlink()
    assert node.digest() == pristine


def test_profile_module_against_plain_tree(make_node, capsys):
    """Without the kernel model: the real accessor writes the plain files of a fake tree (lab use)."""
    node = make_node("acpi_cpufreq_shared")
    args = {
        "cpus": "all",
        "max_mhz": 2000,
        "governor": "powersave",
        "sysfs_root": str(node.sys),
        "state_file": str(node.state_file),
    }
    assert run(cpu_power_profile, args, capsys)["changed"] is True
    assert node.policy("policy6", "scaling_max_freq") == "2000000"
    assert run(cpu_power_profile, args, capsys)["changed"] is False


def test_info_module_reads_the_kubelet_configuration_in_the_same_run(make_node, tmp_path, capsys):
    node = make_node("hybrid")
    config = tmp_path / "config.yaml"
    config.write_text("kind: KubeletConfiguration\nreservedSystemCPUs: 0-1\n")
    out = run(cpu_power_info, {"sysfs_root": str(node.sys), "kubelet_config": str(config)}, capsys)
    assert out["kubelet_config"] == {
        "path": str(config),
        "exists": True,
        "content": "kind: KubeletConfiguration\nreservedSystemCPUs: 0-1\n",
    }
    missing = run(cpu_power_info, {"sysfs_root": str(node.sys), "kubelet_config": str(tmp_path / "none")}, capsys)
    assert missing["kubelet_config"] == {"path": str(tmp_path / "none"), "exists": False, "content": None}
    assert "kubelet_config" not in run(cpu_power_info, {"sysfs_root": str(node.sys)}, capsys)
    # a file that cannot be read is an error, not a missing configuration
    config.write_bytes(b"\xff\xfe")
    bad = run(cpu_power_info, {"sysfs_root": str(node.sys), "kubelet_config": str(config)}, capsys)
    assert bad["failed"] is True
    assert bad["msg"].startswith(f"kubelet_config={config}: cannot be read (")
    assert "give cpu_power_kubelet_reserved_cpus" in bad["msg"]
