"""Driver scenario x operation (apply, re-apply, absent/restore, check mode) against the kernel model."""

from __future__ import annotations

import errno
import json

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as cf

# scenario, shape, request, expected read-back per managed policy: (min kHz, max kHz, governor, epp)
SCENARIOS = {
    "intel_pstate_active": (
        {},
        {"cpus": "1-3", "min_mhz": 1200, "max_mhz": 3000, "governor": "powersave", "epp": "balance_power"},
        {"policy1": ("1200000", "3000000", "powersave", "balance_power")},
    ),
    "intel_cpufreq_passive": (
        {},
        {"cpus": "0-3", "min_mhz": 1000, "max_mhz": 2500, "governor": "ondemand"},
        {"policy0": ("1000000", "2500000", "ondemand", None), "policy3": ("1000000", "2500000", "ondemand", None)},
    ),
    "acpi_cpufreq_shared": (
        {},
        {"cpus": "2-5", "min_mhz": 1500, "max_mhz": 2450, "governor": "conservative"},
        # table driver: max resolves down to 2400 MHz (within the 100 MHz tolerance)
        {
            "policy2": ("1500000", "2400000", "conservative", None),
            "policy4": ("1500000", "2400000", "conservative", None),
        },
    ),
    "amd_pstate_epp": (
        {},
        {"cpus": "all", "reserved_cpus": "0-1", "min_mhz": 1000, "max_mhz": 3000, "epp": "power"},
        {
            "policy2": ("1000000", "3000000", "powersave", "power"),
            "policy7": ("1000000", "3000000", "powersave", "power"),
        },
    ),
    "hybrid": (
        {},
        {"cpus": "0-7", "min_mhz": 1000, "max_mhz": "max", "epp": "balance_power"},
        # max = each CPU's own limit: P-cores 5000 MHz, E-cores 3800 MHz
        {
            "policy0": ("1000000", "5000000", "powersave", "balance_power"),
            "policy7": ("1000000", "3800000", "powersave", "balance_power"),
        },
    ),
    # cppc_cpufreq (ARM64): no frequency table, so any value within the limits is kept as written;
    # no EPP; the generic governors
    "arm64_cppc": (
        {},
        {"cpus": "all", "reserved_cpus": "0", "min_mhz": 1500, "max_mhz": 2750, "governor": "ondemand"},
        {
            "policy1": ("1500000", "2750000", "ondemand", None),
            "policy7": ("1500000", "2750000", "ondemand", None),
        },
    ),
    "offline_cpus": (
        {},
        {"cpus": "4-7", "min_mhz": 1000, "max_mhz": 3000, "governor": "powersave", "epp": "power"},
        {
            "policy4": ("1000000", "3000000", "powersave", "power"),
            "policy5": ("1000000", "3000000", "powersave", "power"),
        },
    ),
}


def request(**kw):
    return cf.Request(**kw)


def readback(node, name):
    attrs = ("scaling_min_freq", "scaling_max_freq", "scaling_governor")
    values = tuple(node.policy(name, a) for a in attrs)
    epp_file = node.sys / f"devices/system/cpu/cpufreq/{name}/energy_performance_preference"
    return values + ((epp_file.read_text().strip() if epp_file.exists() else None),)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_apply_reapply_restore(make_node, scenario):
    shape, req, expected = SCENARIOS[scenario]
    node = make_node(scenario, **shape)
    pristine = node.digest()

    first = cf.apply_profile(node.kernel, request(**req), state_file=str(node.state_file))
    assert first["changed"] is True
    for name, values in expected.items():
        assert readback(node, name) == values, name
    originals = json.loads(node.state_file.read_text())["policies"]
    assert set(expected) <= set(originals)
    if scenario == "offline_cpus":
        assert first["skipped_offline"] == "6-7"
        assert "policy6" not in originals
    applied = node.digest()

    second = cf.apply_profile(node.kernel, request(**req), state_file=str(node.state_file))
    assert second["changed"] is False
    assert all(p["changed"] == [] for p in second["policies"])
    assert node.digest() == applied

    restored = cf.restore_profile(node.kernel, state_file=str(node.state_file))
    assert restored["changed"] is True
    assert json.loads(node.state_file.read_text())["policies"] == {}
    node.state_file.unlink()  # the only difference left must be the (now empty) state file
    assert node.digest() == pristine

    node.state_file.write_text(json.dumps({"version": 1, "policies": {}}))
    again = cf.restore_profile(node.kernel, state_file=str(node.state_file))
    assert again["changed"] is False


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_check_mode_changes_nothing(make_node, scenario):
    shape, req, expected = SCENARIOS[scenario]
    node = make_node(scenario, **shape)
    pristine = node.digest()
    result = cf.apply_profile(node.kernel, request(**req), state_file=str(node.state_file), check_mode=True)
    assert result["changed"] is True
    assert node.digest() == pristine
    assert not node.state_file.exists()
    assert node.kernel.writes == []
    predicted = {p["policy"]: p["after"] for p in result["policies"]}
    for name in expected:
        assert predicted[name]["governor"] == expected[name][2]
    assert "-" in result["diff"]["before"] or "balance_performance" in result["diff"]["before"]
    assert result["diff"]["before"] != result["diff"]["after"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_check_mode_absent_changes_nothing(make_node, scenario):
    shape, req, _expected = SCENARIOS[scenario]
    node = make_node(scenario, **shape)
    cf.apply_profile(node.kernel, request(**req), state_file=str(node.state_file))
    applied = node.digest()
    result = cf.restore_profile(node.kernel, state_file=str(node.state_file), check_mode=True)
    assert result["changed"] is True
    assert node.digest() == applied


def test_no_cpufreq_machine(make_node):
    node = make_node("no_cpufreq")
    info = cf.gather_info(node.kernel)
    assert info["cpufreq_available"] is False
    assert info["driver"] is None
    assert info["policies"] == []
    assert "no cpufreq policy found" in info["messages"][0]
    assert info["rapl"]["available"] is True
    pristine = node.digest()
    with pytest.raises(cf.ValidationError, match="no cpufreq policy found under"):
        cf.apply_profile(node.kernel, request(cpus="all", epp="power"), state_file=str(node.state_file))
    result = cf.restore_profile(node.kernel, state_file=str(node.state_file))
    assert result["changed"] is False
    assert node.digest() == pristine


def test_shared_policy_written_once_and_siblings_follow(make_node):
    node = make_node("acpi_cpufreq_shared")
    cf.apply_profile(node.kernel, request(cpus="2-3", max_mhz=2000), state_file=str(node.state_file))
    writes = [w for w in node.kernel.writes if w[0].endswith("scaling_max_freq")]
    assert writes == [("devices/system/cpu/cpufreq/policy2/scaling_max_freq", "2000000")]
    # the sibling sees the change through its own link
    assert node.read("devices/system/cpu/cpu3/cpufreq/scaling_max_freq") == "2000000"
    assert node.read("devices/system/cpu/cpu4/cpufreq/scaling_max_freq") == "2601000"


@pytest.mark.parametrize("clamp", [True, False], ids=["kernel>=5.4-clamps", "old-kernel-EINVAL"])
def test_safe_write_order(make_node, clamp):
    node = make_node("intel_pstate_active", clamp=clamp)
    sf = str(node.state_file)
    # lowering the range below the current minimum: min first, then max
    cf.apply_profile(node.kernel, request(cpus="0", min_mhz=1000, max_mhz=1200), state_file=sf)
    assert [w[0].rsplit("/", 1)[1] for w in node.kernel.writes] == ["scaling_min_freq", "scaling_max_freq"]
    node.kernel.writes.clear()
    # raising above the current maximum: max first, then min
    cf.apply_profile(node.kernel, request(cpus="0", min_mhz=3000, max_mhz=3500), state_file=sf)
    assert [w[0].rsplit("/", 1)[1] for w in node.kernel.writes] == ["scaling_max_freq", "scaling_min_freq"]
    assert node.policy("policy0", "scaling_min_freq") == "3000000"
    node.kernel.writes.clear()
    # governor before EPP: moving off performance and setting a non-performance EPP
    cf.apply_profile(node.kernel, request(cpus="0", governor="performance", epp="performance"), state_file=sf)
    node.kernel.writes.clear()
    cf.apply_profile(node.kernel, request(cpus="0", governor="powersave", epp="power"), state_file=sf)
    assert [w[0].rsplit("/", 1)[1] for w in node.kernel.writes] == [
        "scaling_governor",
        "energy_performance_preference",
    ]
    # restore goes back through the same safe ordering
    cf.restore_profile(node.kernel, state_file=sf)
    assert readback(node, "policy0") == ("800000", "3900000", "powersave", "balance_performance")


def test_wrong_order_would_fail_on_old_kernels(make_node):
    """The kernel model is strict: min above max is EINVAL on pre-5.4 kernels, clamped on newer ones."""
    strict = make_node("intel_pstate_active", clamp=False)
    # one refused write per pytest.raises: otherwise the first refusal hides whether the later ones are
    strict.kernel.write("devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1000000")  # above min: fine
    with pytest.raises(OSError) as exc:  # min above max
        strict.kernel.write("devices/system/cpu/cpufreq/policy0/scaling_min_freq", "2000000")
    assert exc.value.errno == errno.EINVAL
    with pytest.raises(OSError) as exc:  # max below min
        strict.kernel.write("devices/system/cpu/cpufreq/policy0/scaling_max_freq", "700000")
    assert exc.value.errno == errno.EINVAL
    assert strict.policy("policy0", "scaling_min_freq") == "800000"
    assert strict.policy("policy0", "scaling_max_freq") == "1000000"
    modern = make_node("intel_pstate_active")
    modern.kernel.write("devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1000000")
    modern.kernel.write("devices/system/cpu/cpufreq/policy0/scaling_min_freq", "2000000")
    assert modern.policy("policy0", "scaling_min_freq") == "1000000"  # silently clamped to max


def test_originals_recorded_once(make_node):
    node = make_node("intel_pstate_active")
    sf = str(node.state_file)
    cf.apply_profile(node.kernel, request(cpus="0", max_mhz=3000), state_file=sf)
    cf.apply_profile(node.kernel, request(cpus="0", max_mhz=2000, epp="power"), state_file=sf)
    original = json.loads(node.state_file.read_text())["policies"]["policy0"]["original"]
    assert original == {"scaling_max_freq": "3900000", "energy_performance_preference": "balance_performance"}
    cf.restore_profile(node.kernel, state_file=sf)
    assert readback(node, "policy0") == ("800000", "3900000", "powersave", "balance_performance")


def test_restore_subset_of_cpus(make_node):
    node = make_node("intel_pstate_active")
    sf = str(node.state_file)
    cf.apply_profile(node.kernel, request(cpus="0-3", epp="power"), state_file=sf)
    result = cf.restore_profile(node.kernel, cpus="2", state_file=sf)
    assert result["cpus"] == "2"
    assert node.policy("policy2", "energy_performance_preference") == "balance_performance"
    assert node.policy("policy3", "energy_performance_preference") == "power"
    assert sorted(json.loads(node.state_file.read_text())["policies"]) == ["policy0", "policy1", "policy3"]


def test_raw_integer_epp_is_read_and_restored(make_node):
    node = make_node("intel_pstate_active")
    node.kernel.write("devices/system/cpu/cpufreq/policy1/energy_performance_preference", "64")
    assert node.policy("policy1", "energy_performance_preference") == "64"
    info = cf.gather_info(node.kernel)
    assert info["policies"][1]["epp"] == "64"
    node.kernel.write("devices/system/cpu/cpufreq/policy2/energy_performance_preference", "192")
    assert cf.gather_info(node.kernel)["policies"][2]["epp"] == "balance_power"  # the name the raw value maps to
    sf = str(node.state_file)
    cf.apply_profile(node.kernel, request(cpus="1-2", epp="balance_power"), state_file=sf)
    # policy2 already had 192 == balance_power: judged on read-back, so no write
    assert [w[0] for w in node.kernel.writes if "policy2" in w[0]] == [
        "devices/system/cpu/cpufreq/policy2/energy_performance_preference"
    ]
    node.kernel.writes.clear()
    cf.restore_profile(node.kernel, state_file=sf)
    assert node.policy("policy1", "energy_performance_preference") == "64"


def test_a_raw_epp_is_a_value_with_no_name_on_this_cpu_model(make_node):
    """A CPU model whose balance_performance is 32 (intel_pstate.c intel_epp_default), with EPP 128 set
    by the firmware: the kernel shows "128" because 128 is no preference there. The old code read it
    as balance_performance through a fixed table: facts named the wrong preference and a request for
    balance_performance was judged applied (changed=false, nothing written)."""
    node = make_node("intel_pstate_active", epp_values={"balance_performance": 32}, epp="128")
    assert node.policy("policy1", "energy_performance_preference") == "128"
    pristine = node.digest()
    assert cf.gather_info(node.kernel)["policies"][1]["epp"] == "128"
    sf = str(node.state_file)
    result = cf.apply_controls(node.kernel, request(cpus="1-2", epp="balance_performance"), state_file=sf)
    assert result["changed"] is True
    assert [p["after"]["epp"] for p in result["policies"]] == ["balance_performance"] * 2
    assert node.policy("policy1", "energy_performance_preference") == "balance_performance"  # 32 in the register
    node.kernel.writes.clear()
    again = cf.apply_controls(node.kernel, request(cpus="1-2", epp="balance_performance"), state_file=sf)
    assert again["changed"] is False and node.kernel.writes == []
    cf.restore_controls(node.kernel, state_file=sf)
    assert node.policy("policy1", "energy_performance_preference") == "128"
    node.state_file.unlink()
    assert node.digest() == pristine


def test_a_raw_epp_request_is_compared_as_the_number_it_is(make_node):
    node = make_node("intel_pstate_active", epp_values={"balance_performance": 32})
    sf = str(node.state_file)
    result = cf.apply_controls(node.kernel, request(cpus="1", epp="64"), state_file=sf)
    assert result["changed"] is True and node.policy("policy1", "energy_performance_preference") == "64"
    node.kernel.writes.clear()
    assert cf.apply_controls(node.kernel, request(cpus="1", epp="64"), state_file=sf)["changed"] is False
    # a number this CPU names reads back as the name: accepted as written
    result = cf.apply_controls(node.kernel, request(cpus="2", epp="32"), state_file=sf)
    assert result["changed"] is True
    assert node.policy("policy2", "energy_performance_preference") == "balance_performance"


def test_performance_governor_forces_epp_and_restores_cache(make_node):
    node = make_node("amd_pstate_epp")
    sf = str(node.state_file)
    cf.apply_profile(node.kernel, request(cpus="0", epp="balance_power"), state_file=sf)
    cf.apply_profile(node.kernel, request(cpus="0", governor="performance", epp="performance"), state_file=sf)
    assert node.policy("policy0", "energy_performance_preference") == "performance"
    with pytest.raises(OSError) as exc:
        node.kernel.write("devices/system/cpu/cpufreq/policy0/energy_performance_preference", "power")
    assert exc.value.errno == errno.EBUSY
    cf.restore_profile(node.kernel, state_file=sf)
    assert readback(node, "policy0") == ("400000", "3700000", "powersave", "balance_performance")


# --- failure midway: the run restores what it changed and fails -------------------------------


def test_failure_midway_rolls_back(make_node):
    node = make_node("intel_pstate_active")
    pristine = node.digest()
    node.kernel.fail_write("policy2/energy_performance_preference", errno.EIO)
    with pytest.raises(cf.ApplyError) as exc:
        cf.apply_profile(node.kernel, request(cpus="0-3", max_mhz=3000, epp="power"), state_file=str(node.state_file))
    message = str(exc.value)
    assert message.startswith("writing 'power' to ")
    assert "policy2/energy_performance_preference (CPU 2) failed: EIO" in message
    assert "rolled back the 5 value(s) this run had changed" in message
    # policies 0, 1 fully written and 2's max: all restored; state file back to "no originals"
    assert json.loads(node.state_file.read_text())["policies"] == {}
    node.state_file.unlink()
    assert node.digest() == pristine


def test_cpu_goes_offline_between_validation_and_write(make_node):
    node = make_node("intel_pstate_active")
    pristine_policy1 = readback(node, "policy1")
    topo = cf.Topology(node.kernel)
    plan = cf.plan_present(topo, request(cpus="0-3", epp="power"))
    node.kernel.take_offline(2)  # hot-unplug: policy2 becomes inactive (EBUSY)
    store = cf.StateStore(str(node.state_file))
    with pytest.raises(cf.ApplyError, match=r"policy2/energy_performance_preference \(CPU 2\) failed: EBUSY"):
        cf.execute(node.kernel, topo, plan, store=store)
    assert readback(node, "policy1") == pristine_policy1
    assert node.policy("policy0", "energy_performance_preference") == "balance_performance"
    # the next run sees CPU 2 offline and skips it
    result = cf.apply_profile(node.kernel, request(cpus="0-3", epp="power"), state_file=str(node.state_file))
    assert result["skipped_offline"] == "2"
    assert result["cpus"] == "0-1,3"


def test_silent_clamp_detected_by_readback(make_node):
    node = make_node("acpi_cpufreq_shared")
    pristine = node.digest()
    node.kernel.set_platform_max("policy4", 2000000)  # firmware limit: max silently capped
    pristine = node.digest()
    with pytest.raises(cf.ApplyError) as exc:
        cf.apply_profile(node.kernel, request(cpus="2-5", max_mhz=2500), state_file=str(node.state_file))
    assert "policy4/scaling_max_freq reads back '2000000' after writing '2500000' (CPU 4-5)" in str(exc.value)
    assert "the kernel clamped or refused the value silently" in str(exc.value)
    assert "rolled back the 1 value(s)" in str(exc.value)
    node.state_file.unlink()
    assert node.digest() == pristine


def test_missing_attribute_fails_and_is_not_created(make_node):
    node = make_node("intel_pstate_active")
    topo = cf.Topology(node.kernel)
    plan = cf.plan_present(topo, request(cpus="0-1", min_mhz=1000, max_mhz=3000))
    victim = node.sys / "devices/system/cpu/cpufreq/policy1/scaling_min_freq"
    victim.unlink()
    with pytest.raises(cf.ApplyError, match=r"policy1/scaling_min_freq \(CPU 1\) failed: ENOENT"):
        cf.execute(node.kernel, topo, plan, store=cf.StateStore(str(node.state_file)))
    assert not victim.exists()
    assert node.policy("policy0", "scaling_max_freq") == "3900000"  # rolled back
    # the real accessor (no kernel model) must not create it either
    with pytest.raises(FileNotFoundError):
        cf.SysfsAccessor(str(node.sys)).write("devices/system/cpu/cpufreq/policy1/scaling_min_freq", "1000000")
    assert not victim.exists()


def test_rollback_failure_is_reported_and_keeps_the_original_of_what_stayed_changed(make_node):
    """A write back that fails leaves its attribute changed: its original stays in the state file,
    so state=absent restores it later (the journal used to go back to the run's start and forget it:
    absent then said changed=false and the EPP stayed 'power')."""
    node = make_node("intel_pstate_active")
    pristine = node.digest()
    node.kernel.fail_write("policy1/energy_performance_preference", errno.EIO)
    node.kernel.fail_write("policy0/energy_performance_preference", errno.EIO, after=1)  # the rollback write
    with pytest.raises(cf.ApplyError) as exc:
        cf.apply_profile(node.kernel, request(cpus="0-1", epp="power"), state_file=str(node.state_file))
    assert "rollback FAILED for: policy0/energy_performance_preference=balance_performance: EIO" in str(exc.value)
    assert str(exc.value).endswith(f"; their originals stay in {node.state_file}: state=absent restores them")
    assert node.policy("policy0", "energy_performance_preference") == "power"
    kept = json.loads(node.state_file.read_text())["policies"]
    assert {name: entry["original"] for name, entry in kept.items()} == {
        "policy0": {"energy_performance_preference": "balance_performance"}
    }
    restored = cf.restore_profile(node.kernel, state_file=str(node.state_file))
    assert restored["changed"] is True
    assert node.policy("policy0", "energy_performance_preference") == "balance_performance"
    node.state_file.unlink()
    assert node.digest() == pristine


def test_a_control_whose_rollback_fails_keeps_its_original_for_absent(make_node):
    """The other controls likewise: C-state disables written, the power cap refused (BIOS lock), one
    C-state's write back fails: that attribute's original stays, absent restores it."""
    node = make_node("powercap_locked")
    pristine = node.digest()
    node.kernel.fail_write("cpu2/cpuidle/state3/disable", errno.EIO, after=1)  # its write back
    with pytest.raises(cf.ApplyError) as exc:
        cf.apply_controls(
            node.kernel,
            request(cpus="all"),
            cstates={"disable": ["C6"]},
            power_cap={"watts": 100},
            state_file=str(node.state_file),
        )
    assert "rollback FAILED for: devices/system/cpu/cpu2/cpuidle/state3/disable=0: EIO" in str(exc.value)
    assert str(exc.value).endswith(f"; their originals stay in {node.state_file}: state=absent restores them")
    assert node.read("devices/system/cpu/cpu2/cpuidle/state3/disable") == "1"
    kept = json.loads(node.state_file.read_text())["attributes"]
    assert list(kept) == ["devices/system/cpu/cpu2/cpuidle/state3/disable"]
    assert kept["devices/system/cpu/cpu2/cpuidle/state3/disable"]["original"] == "0"
    restored = cf.restore_controls(node.kernel, state_file=str(node.state_file))
    assert restored["changed"] is True
    assert node.read("devices/system/cpu/cpu2/cpuidle/state3/disable") == "0"
    node.state_file.unlink()
    assert node.digest() == pristine


def test_intel_pstate_status_never_written(make_node):
    for scenario in ("intel_pstate_active", "intel_cpufreq_passive", "hybrid"):
        node = make_node(scenario)
        sf = str(node.state_file)
        cf.apply_profile(node.kernel, request(cpus="all", max_mhz=2000), state_file=sf)
        cf.restore_profile(node.kernel, state_file=sf)
        assert not [w for w in node.kernel.writes if "intel_pstate" in w[0]]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_plain_tree_restore_is_byte_identical(make_node, scenario):
    """The real accessor on a plain lab tree (no kernel model): restore leaves the files as they were."""
    shape, req, _expected = SCENARIOS[scenario]
    node = make_node(scenario, **shape)
    pristine = node.digest()
    plain = cf.SysfsAccessor(str(node.sys))
    assert cf.apply_profile(plain, request(**req), state_file=str(node.state_file))["changed"] is True
    assert cf.apply_profile(plain, request(**req), state_file=str(node.state_file))["changed"] is False
    cf.restore_profile(plain, state_file=str(node.state_file))
    node.state_file.unlink()
    assert node.digest() == pristine
