"""C-states, uncore and power cap: control x kernel flavour x operation, against the kernel model.

Every cell of the table in docs/node-power.md ("The other controls") is one test here:
``make unit PYTEST_ARGS='-k test_controls -v'`` lists them.
"""

from __future__ import annotations

import errno
import json
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as cf
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import powercap as pc

# flavour -> fake_sysfs scenario
FLAVOURS = {
    "intel_idle": "intel_idle_uncore",
    "acpi_idle": "acpi_idle",
    "uncore_legacy": "intel_idle_uncore",
    "uncore_tpmi": "uncore_tpmi",
    "amd_no_uncore": "amd_no_uncore",
    "powercap_locked": "powercap_locked",
    "hwmon_only": "hwmon_only",
    "arm64_cppc": "arm64_cppc",
    "many_packages": "many_packages",
}
REQUESTS = {
    "cstates": {"max_latency_us": 20},
    "uncore": {"min_pct": 50, "max_pct": 75},
    "power_cap": {"watts": 100, "time_window_us": 1000000},
}
PATHS = {"cstates": "/cpuidle/", "uncore": "intel_uncore_frequency", "power_cap": "class/powercap"}
UNAVAILABLE = {
    ("uncore", "acpi_idle"),
    ("uncore", "amd_no_uncore"),
    ("uncore", "hwmon_only"),
    ("power_cap", "amd_no_uncore"),
    ("power_cap", "hwmon_only"),
    ("uncore", "arm64_cppc"),
    ("power_cap", "arm64_cppc"),
}
LOCKED = {("power_cap", "powercap_locked")}
OPERATIONS = ("apply", "reapply_noop", "absent_restores", "check_mode", "failure_rolls_back")
CELLS = [(c, f, o) for c in REQUESTS for f in FLAVOURS for o in OPERATIONS]


def run(node, control=None, check_mode=False, controls=None):
    controls = controls if controls is not None else {control: REQUESTS[control]}
    return cf.apply_controls(
        node.kernel,
        cf.Request(cpus="all", reserved_cpus="0"),
        state_file=str(node.state_file),
        check_mode=check_mode,
        **controls,
    )


def control_writes(node, control):
    return [w for w in node.kernel.writes if PATHS[control] in w[0]]


def pristine_after(node, pristine):
    """The tree is back to its original hash (the state file, if any, holds no originals)."""
    if node.state_file.exists():
        state = json.loads(node.state_file.read_text())
        assert state["policies"] == {} and state.get("attributes", {}) == {}
        node.state_file.unlink()
    assert node.digest() == pristine


def check_applied(node, control, flavour):
    if control == "cstates":
        disabled = {
            p.parent.parent.name + "/" + p.parent.name
            for p in node.sys.glob("devices/system/cpu/cpu*/cpuidle/state*/disable")
            if p.read_text().strip() == "1"
        }  # noqa: E501
        assert disabled and not any(d.endswith("/state0") for d in disabled)
        assert not any(d.startswith("cpu0/") for d in disabled)  # reserved
    elif control == "uncore":
        domain = "uncore00" if flavour in ("uncore_tpmi", "many_packages") else "package_00_die_00"
        base = f"devices/system/cpu/intel_uncore_frequency/{domain}"
        lo, hi = int(node.read(f"{base}/initial_min_freq_khz")), int(node.read(f"{base}/initial_max_freq_khz"))
        expect_max = lo + (hi - lo) * 75 // 100
        assert int(node.read(f"{base}/max_freq_khz")) == expect_max - expect_max % 100000
    else:
        assert node.read("class/powercap/intel-rapl:0/constraint_0_power_limit_uw") == "100000000"
        assert node.read("class/powercap/intel-rapl:0/constraint_0_time_window_us") == "999424"  # 2^10 * 976
        assert node.read("class/powercap/intel-rapl:0/enabled") == "1"
        if flavour == "many_packages":  # the 16th package's zone is intel-rapl:f: capped too
            assert node.read("class/powercap/intel-rapl:f/name") == "package-15"
            assert node.read("class/powercap/intel-rapl:f/constraint_0_power_limit_uw") == "100000000"
    if flavour == "many_packages" and control == "uncore":  # the last TPMI domain too
        base = "devices/system/cpu/intel_uncore_frequency/uncore31"
        lo, hi = int(node.read(f"{base}/initial_min_freq_khz")), int(node.read(f"{base}/initial_max_freq_khz"))
        expect_max = lo + (hi - lo) * 75 // 100
        assert int(node.read(f"{base}/max_freq_khz")) == expect_max - expect_max % 100000


@pytest.mark.parametrize(("control", "flavour", "operation"), CELLS, ids=["-".join(c) for c in CELLS])
def test_matrix(make_node, control, flavour, operation):
    node = make_node(FLAVOURS[flavour])
    pristine = node.digest()
    cell = (control, flavour)
    if operation == "apply":
        if cell in LOCKED:
            with pytest.raises(cf.ApplyError, match="failed: EACCES: .* locked by the BIOS/firmware") as exc:
                run(node, control)
            assert "rolled back the 0 value(s) this run had changed" in str(exc.value)
            pristine_after(node, pristine)
            return
        result = run(node, control)
        assert result["controls"][control]["available"] is (cell not in UNAVAILABLE)
        if cell in UNAVAILABLE:
            assert result["changed"] is False
            assert "skipped, nothing changed" in result["messages"][0]
            assert control_writes(node, control) == []
            assert node.digest() == pristine
        else:
            assert result["changed"] is True
            check_applied(node, control, flavour)
    elif operation == "reapply_noop":
        first = pytest.raises(cf.ApplyError) if cell in LOCKED else None
        if first:
            with first:
                run(node, control)
        else:
            run(node, control)
        applied = node.digest()
        node.kernel.writes.clear()
        if cell in LOCKED:  # refused again, the same way; nothing changes
            with pytest.raises(cf.ApplyError, match="EACCES"):
                run(node, control)
            assert [w[0].rsplit("/", 1)[1] for w in node.kernel.writes] == ["constraint_0_power_limit_uw"]
        else:
            assert run(node, control)["changed"] is False
            assert node.kernel.writes == []
        assert node.digest() == applied
    elif operation == "absent_restores":
        if cell in LOCKED:
            with pytest.raises(cf.ApplyError):
                run(node, control)
        else:
            run(node, control)
        restored = cf.restore_controls(node.kernel, state_file=str(node.state_file))
        assert restored["changed"] is (cell not in UNAVAILABLE and cell not in LOCKED)
        pristine_after(node, pristine)
    elif operation == "check_mode":
        result = run(node, control, check_mode=True)
        assert result["changed"] is (cell not in UNAVAILABLE)  # a BIOS lock is invisible until a write
        assert node.kernel.writes == []
        assert not node.state_file.exists()
        assert node.digest() == pristine
    else:  # failure midway, with every control in the run: everything this run changed is rolled back
        full = dict(REQUESTS)
        victim = control if cell not in UNAVAILABLE else "cstates"
        if cell not in LOCKED:
            planned = run(node, controls=full, check_mode=True)["controls"][victim]["changed"]
            node.kernel.fail_write(PATHS[victim], errno.EIO, after=len(planned) - 1)
        with pytest.raises(cf.ApplyError) as exc:
            run(node, controls=full)
        assert "rolled back the" in str(exc.value) and "nothing else was touched" in str(exc.value)
        pristine_after(node, pristine)


def test_matrix_is_complete():
    assert len(CELLS) == 3 * 9 * 5


def test_controls_with_pstates_roll_back_together(make_node):
    node = make_node("intel_idle_uncore")
    pristine = node.digest()
    node.kernel.fail_write("constraint_0_power_limit_uw", errno.EIO, after=1)  # package-1's limit
    with pytest.raises(cf.ApplyError) as exc:
        cf.apply_controls(
            node.kernel,
            cf.Request(cpus="2-5", max_mhz=3000, epp="power"),
            cstates={"disable": ["C6"]},
            uncore={"max_khz": 2000000},
            power_cap={"watts": 100},
            state_file=str(node.state_file),
        )
    assert "intel-rapl:1/constraint_0_power_limit_uw (package-1 long_term power_limit_uw) failed: EIO" in str(exc.value)
    # 4 policies x 2 attributes, 4 CPUs x C6, 2 uncore maxima, package-0's limit and enabled (already 1)
    assert "rolled back the 15 value(s) this run had changed" in str(exc.value)
    pristine_after(node, pristine)


def test_restore_subset_of_cpus_keeps_package_controls(make_node):
    node = make_node("intel_idle_uncore")
    sf = str(node.state_file)
    cf.apply_controls(
        node.kernel, cf.Request(cpus="2-3"), cstates={"disable": ["C6"]}, uncore={"max_pct": 50}, state_file=sf
    )
    result = cf.restore_controls(node.kernel, cpus="2", state_file=sf)
    assert result["controls"]["restored"] == ["cpu2 state3 (C6) disable"]
    assert node.read("devices/system/cpu/cpu3/cpuidle/state3/disable") == "1"
    assert node.read("devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz") == "1600000"
    remaining = json.loads(node.state_file.read_text())["attributes"]
    assert sorted(e["label"] for e in remaining.values()) == [
        "cpu3 state3 (C6) disable",
        "package_00_die_00 max_freq_khz",
        "package_01_die_00 max_freq_khz",
    ]


def test_uncore_write_order_is_safe(make_node):
    node = make_node("intel_idle_uncore")
    sf = str(node.state_file)

    def order(**uncore):
        node.kernel.writes.clear()
        if uncore:
            cf.apply_controls(node.kernel, cf.Request(cpus="all"), uncore=uncore, state_file=sf)
        else:
            cf.restore_controls(node.kernel, state_file=sf)
        return [w[0].rsplit("/", 1)[1] for w in node.kernel.writes if "package_00" in w[0]]

    assert order(min_khz=1000000, max_khz=1200000) == ["min_freq_khz", "max_freq_khz"]  # lowering: min first
    assert order(min_khz=2000000, max_khz=2300000) == ["max_freq_khz", "min_freq_khz"]  # raising: max first
    assert order() == ["max_freq_khz", "min_freq_khz"]  # restoring 800000-2400000 raises max: max first
    assert order(min_khz=1000000, max_khz=1200000) == ["min_freq_khz", "max_freq_khz"]
    assert order() == ["max_freq_khz", "min_freq_khz"]
    assert node.read("devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz") == "2400000"


def test_state0_is_never_disabled_by_a_latency_limit(make_node):
    node = make_node("hwmon_only")
    cf.apply_controls(
        node.kernel, cf.Request(cpus="all"), cstates={"max_latency_us": 0}, state_file=str(node.state_file)
    )
    assert node.read("devices/system/cpu/cpu1/cpuidle/state0/disable") == "0"  # WFI
    assert node.read("devices/system/cpu/cpu1/cpuidle/state1/disable") == "1"


def test_offline_cpus_have_no_cpuidle_and_are_skipped(make_node):
    node = make_node("acpi_idle")
    assert not (node.sys / "devices/system/cpu/cpu7/cpuidle").exists()
    result = cf.apply_controls(
        node.kernel, cf.Request(cpus="4-7"), cstates={"disable": ["C3"]}, state_file=str(node.state_file)
    )
    assert result["skipped_offline"] == "7"
    assert result["controls"]["cstates"]["changed"] == [f"cpu{c} state3 (C3) disable" for c in (4, 5, 6)]


def test_info_reports_the_new_facts(make_node):
    info = cf.gather_info(make_node("uncore_tpmi").kernel)
    assert info["cpuidle"]["driver"] == "intel_idle"
    assert [(s["name"], s["latency_us"]) for s in info["cpuidle"]["states"]] == [
        ("POLL", 0), ("C1", 1), ("C1E", 2), ("C6", 290)
    ]  # fmt: skip
    assert info["uncore"]["interface"] == "tpmi"
    assert [(d["name"], d["package"], d["domain_id"]) for d in info["uncore"]["domains"]] == [
        ("uncore00", 0, 0), ("uncore01", 0, 1), ("uncore02", 1, 0), ("uncore03", 1, 1)
    ]  # fmt: skip
    assert info["uncore"]["package_dirs"] == ["package_00_die_00", "package_01_die_00"]
    assert [c["name"] for c in info["powercap"]["zones"][0]["constraints"]] == ["long_term", "short_term"]
    assert info["power_reading"]["source"] == "rapl"
    amd = cf.gather_info(make_node("amd_no_uncore").kernel)
    assert amd["uncore"]["available"] is False and "AMD and ARM" in amd["uncore"]["messages"][0]
    assert amd["powercap"]["available"] is False and amd["power_reading"]["source"] == "rapl"
    arm = cf.gather_info(make_node("hwmon_only").kernel)
    assert arm["cpuidle"]["driver"] == "psci_idle"
    assert arm["power_reading"]["source"] == "hwmon"
    assert arm["power_reading"]["zones"] == [
        {"name": "package-0", "chip": "hwmon0", "attr": "power1_input", "kind": "power", "driver": "apm_xgene",
         "label": "CPU power", "package": 0}
    ]  # fmt: skip
    assert [(i["chip"], i["label"]) for i in arm["power_reading"]["ignored"]] == [("hwmon0", "IO power")]
    # an ARM64 server with SCMI sensors: both sockets' CPU rails (channels 2 and 4 of one chip)
    scmi = cf.gather_info(make_node("arm64_cppc").kernel)
    assert scmi["driver"] == "cppc_cpufreq" and scmi["power_reading"]["source"] == "hwmon"
    assert [(z["name"], z["attr"], z["label"]) for z in scmi["power_reading"]["zones"]] == [
        ("package-0", "power2_input", "CPU Power Socket 0"),
        ("package-1", "power4_input", "CPU Power Socket 1"),
    ]
    assert [i["reason"] for i in scmi["power_reading"]["ignored"]] == ["class io (default rule), not package power"] * 2
    two_socs = cf.gather_info(make_node("hwmon_only", packages=2).kernel)["power_reading"]
    assert [(z["name"], z["chip"]) for z in two_socs["zones"]] == [("package-0", "hwmon0"), ("package-1", "hwmon1")]
    amd_energy = cf.gather_info(make_node("amd_energy_hwmon").kernel)["power_reading"]
    assert [(z["name"], z["label"]) for z in amd_energy["zones"]] == [
        ("package-0", "Esocket0"),
        ("package-1", "Esocket1"),
    ]


@pytest.mark.parametrize(
    ("rel", "value", "code"),
    [
        ("devices/system/cpu/cpu1/cpuidle/state3/disable", "yes", errno.EINVAL),
        ("devices/system/cpu/cpu1/cpuidle/state3/latency", "0", errno.EACCES),
        ("devices/system/cpu/cpu1/cpuidle/state3/name", "C7", errno.EACCES),
        ("devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz", "50000", errno.EINVAL),
        ("devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz", "12800000", errno.EINVAL),
        ("devices/system/cpu/intel_uncore_frequency/package_00_die_00/min_freq_khz", "fast", errno.EINVAL),
        ("devices/system/cpu/intel_uncore_frequency/package_00_die_00/initial_max_freq_khz", "1", errno.EACCES),
        ("class/powercap/intel-rapl:0/constraint_0_power_limit_uw", "-5", errno.EINVAL),
        ("class/powercap/intel-rapl:0/constraint_0_max_power_uw", "1", errno.EACCES),
        ("class/powercap/intel-rapl:0/enabled", "maybe", errno.EINVAL),
        ("class/powercap/intel-rapl:0/energy_uj", "0", errno.EACCES),
    ],
)
def test_kernel_refuses_other_controls(make_node, rel, value, code):
    node = make_node("intel_idle_uncore")
    before = node.digest()
    with pytest.raises(OSError) as exc:
        node.kernel.write(rel, value)
    assert exc.value.errno == code
    assert node.digest() == before


def test_kernel_model_rules_of_other_controls(make_node):
    node = make_node("uncore_tpmi")
    k = node.kernel
    k.write("devices/system/cpu/cpu2/cpuidle/state3/disable", "0x10")  # kstrtouint base 0, non-zero -> 1
    assert node.read("devices/system/cpu/cpu2/cpuidle/state3/disable") == "1"
    assert node.read("devices/system/cpu/cpu3/cpuidle/state3/disable") == "0"  # per CPU
    u = "devices/system/cpu/intel_uncore_frequency"
    k.write(f"{u}/uncore00/max_freq_khz", "1950000")  # truncated to the 100 MHz ratio
    assert node.read(f"{u}/uncore00/max_freq_khz") == "1900000"
    k.write(f"{u}/uncore00/min_freq_khz", "2100000")  # the driver does not compare min with max
    assert node.read(f"{u}/uncore00/min_freq_khz") == "2100000"
    k.write(f"{u}/package_00_die_00/max_freq_khz", "2000000")  # TPMI package level: every cluster + bound
    assert node.read(f"{u}/uncore01/max_freq_khz") == "2000000"
    with pytest.raises(OSError) as exc:
        k.write(f"{u}/uncore01/max_freq_khz", "2300000")  # above the package-level bound
    assert exc.value.errno == errno.EINVAL
    assert node.read(f"{u}/uncore02/max_freq_khz") == "2200000"  # package 1 untouched
    pc = "class/powercap/intel-rapl:0"
    k.write(f"{pc}/constraint_0_power_limit_uw", "99999999")  # truncated to the 1/8 W unit
    assert node.read(f"{pc}/constraint_0_power_limit_uw") == "99875000"
    k.write(f"{pc}/constraint_0_power_limit_uw", "500000000")  # above max_power_uw: accepted (not compared)
    assert node.read(f"{pc}/constraint_0_power_limit_uw") == "500000000"
    k.write(f"{pc}/constraint_0_time_window_us", "28000000")
    assert node.read(f"{pc}/constraint_0_time_window_us") == "27983872"
    k.lock_powercap("intel-rapl:1")
    with pytest.raises(OSError) as exc:
        k.write("class/powercap/intel-rapl:1/constraint_0_power_limit_uw", "100000000")
    assert exc.value.errno == errno.EACCES
    assert node.read("class/powercap/intel-rapl:1/enabled") == "0"


# --- power cap writes decided by the kernel's granularity (issue 45 item 4) -------------------------

LIMIT0 = "class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
WINDOW0 = "class/powercap/intel-rapl:0/constraint_0_time_window_us"


def test_a_cap_near_the_request_is_written_and_reported_as_the_kernel_holds_it(make_node):
    """99.5 W / 874496 us is within the read-back tolerance of 100 W / 1 s but is not what the kernel
    would hold for it (100 W / 999424 us): written, reported as read back, idempotent, restored exactly.
    The old planner judged it applied (changed=false, nothing written) and reported 100 W / 1000000 us."""
    node = make_node("intel_idle_uncore")
    writer = node.kernel
    writer.write(LIMIT0, "99500000")  # through the model: 1/8 W units, 2^Y*(1+F/4) windows
    writer.write(WINDOW0, "874496")
    assert (node.read(LIMIT0), node.read(WINDOW0)) == ("99500000", "874496")
    pristine = node.digest()
    spec = {"watts": 100, "time_window_us": 1000000, "packages": [0]}
    node.kernel.writes.clear()
    result = run(node, controls={"power_cap": spec})
    assert result["changed"] is True
    assert (node.read(LIMIT0), node.read(WINDOW0)) == ("100000000", "999424")
    settings = {s["attribute"]: (s["before"], s["after"]) for s in result["controls"]["power_cap"]["settings"]}
    assert settings["package-0 long_term power_limit_uw"] == ("99500000", "100000000")
    assert settings["package-0 long_term time_window_us"] == ("874496", "999424")  # what the kernel holds

    node.kernel.writes.clear()
    again = run(node, controls={"power_cap": spec})
    assert again["changed"] is False and node.kernel.writes == []
    settings = {s["attribute"]: s["after"] for s in again["controls"]["power_cap"]["settings"]}
    assert settings["package-0 long_term time_window_us"] == "999424"

    cf.restore_controls(node.kernel, state_file=str(node.state_file))
    assert (node.read(LIMIT0), node.read(WINDOW0)) == ("99500000", "874496")  # not "within 1 W of it"
    pristine_after(node, pristine)


def test_check_mode_reports_what_the_kernel_would_hold(make_node):
    node = make_node("intel_idle_uncore")
    spec = {"watts": 100.06, "time_window_us": 1000000, "packages": [0]}
    result = run(node, check_mode=True, controls={"power_cap": spec})
    settings = {s["attribute"]: s["after"] for s in result["controls"]["power_cap"]["settings"]}
    # 100.06 W truncated to 1/8 W; 1 s as 1024 units of 976 us
    assert settings["package-0 long_term power_limit_uw"] == "100000000"
    assert settings["package-0 long_term time_window_us"] == "999424"
    run(node, controls={"power_cap": spec})
    assert (node.read(LIMIT0), node.read(WINDOW0)) == ("100000000", "999424")
    node.kernel.writes.clear()
    assert run(node, controls={"power_cap": spec})["changed"] is False and node.kernel.writes == []


def test_the_planner_computes_what_the_kernel_model_holds():
    """Our planner's arithmetic against the kernel model's (both from intel_rapl_common.c)."""
    # the model as conftest.py loaded it (a bare "conftest" import is whichever directory's ran last)
    fake_kernel = sys.modules["poweraware_lab_fake_kernel"]

    for us in [1, 975, 976, 977, 1000, 2440, 874496, 875000, 999999, 1000000, 27983872, 40000000]:
        assert pc.held_window_us(us) == fake_kernel.rapl_time_window(us), us
    zone = {"constraints": [{"power_limit_uw": 349500000, "max_power_uw": 400000000}]}
    assert pc.power_unit_uw(zone) == 125000
    assert pc.held_power_uw(350060000, 125000) == 350000000
    finer = {"constraints": [{"power_limit_uw": 100062500, "max_power_uw": 400000000}]}
    assert pc.power_unit_uw(finer) == 62500  # PU=4: the readings show the finer unit
