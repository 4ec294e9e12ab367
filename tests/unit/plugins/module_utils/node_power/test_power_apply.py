# ruff: noqa: E501 - exact, long messages
"""power_apply, the node power library's entry points, on a small machine in memory (power_machine.py):
every request validated before the first write with all problems at once (validate_all), the
P-state profile applied and restored, the other controls (C-states, uncore, power cap) applied and
restored with the P-states, which recorded originals a restore takes (plan_attribute_restore), the
package power source and the facts. Each test states what is written, what the state file holds
afterwards (byte for byte), what a failure rolls back, that check mode changes nothing, and the exact
messages and results.
"""

from __future__ import annotations

import os

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import writes
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import Topology
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpufreq_plan import Request
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import StateStore
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    ApplyError,
    PowerError,
    ValidationError,
)
from memory_sysfs import eio
from power_machine import (
    CPU,
    EMPTY_STATE,
    EPP,
    GOV,
    HEADER,
    LIMIT,
    MAX,
    P0,
    P2,
    STATE_MAX_EPP,
    UNC,
    UNCORE,
    UNCORE_FILES,
    Acc,
    cstate_files,
    node,
    planned,
    rollback_item,
    state_file,
    text,
)


class Attributes:
    def __init__(self, attributes):
        self.attributes = attributes


RECORDED = {
    "devices/system/cpu/cpu0/cpuidle/state2/disable": {
        "control": "cstates",
        "cpu": 0,
        "label": "cpu0 C6",
        "original": "0",
        "seq": 1,
    },
    "devices/system/cpu/cpu3/cpuidle/state2/disable": {
        "control": "cstates",
        "cpu": 3,
        "label": "cpu3 C6",
        "original": "0",
        "seq": 2,
    },
    LIMIT: {"control": "power_cap", "cpu": None, "label": "package-0 limit", "original": "150000000", "seq": 3},
    f"{UNCORE}/max_freq_khz": {"control": "uncore", "label": "die 0 max", "original": "2400000", "seq": 4},
}


def test_plan_attribute_restore_all_newest_first_with_compare_modes():
    acc = Acc(
        {
            "devices/system/cpu/cpu0/cpuidle/state2/disable": "1",
            "devices/system/cpu/cpu3/cpuidle/state2/disable": "1",
            LIMIT: "100000000",
            f"{UNCORE}/max_freq_khz": "2000000",
        }
    )
    for cpus in (None, "all"):
        steps, missing = pa.plan_attribute_restore(acc, Attributes(RECORDED), cpus)
        assert missing == []
        assert steps == [
            {
                "control": "uncore",
                "path": f"{UNCORE}/max_freq_khz",
                "cpu": None,
                "label": "die 0 max",
                "current": "2000000",
                "target": "2400000",
                "compare": "exact",
                "held": "2400000",
            },
            {
                "control": "power_cap",
                "path": LIMIT,
                "cpu": None,
                "label": "package-0 limit",
                "current": "100000000",
                "target": "150000000",
                "compare": "tolerance",
                "held": "150000000",
            },
            {
                "control": "cstates",
                "path": "devices/system/cpu/cpu3/cpuidle/state2/disable",
                "cpu": 3,
                "label": "cpu3 C6",
                "current": "1",
                "target": "0",
                "compare": "exact",
                "held": "0",
            },
            {
                "control": "cstates",
                "path": "devices/system/cpu/cpu0/cpuidle/state2/disable",
                "cpu": 0,
                "label": "cpu0 C6",
                "current": "1",
                "target": "0",
                "compare": "exact",
                "held": "0",
            },
        ]


def test_plan_attribute_restore_for_some_cpus_skips_cpu_less_and_reports_gone_ones():
    acc = Acc({"devices/system/cpu/cpu0/cpuidle/state2/disable": "1", LIMIT: "1"})
    steps, missing = pa.plan_attribute_restore(acc, Attributes(RECORDED), "0,3")
    assert [s["label"] for s in steps] == ["cpu0 C6"]
    assert missing == ["cpu3 C6: the attribute is gone (CPU or die offline)"]
    steps, missing = pa.plan_attribute_restore(acc, Attributes(RECORDED), "3")
    assert (steps, missing) == ([], ["cpu3 C6: the attribute is gone (CPU or die offline)"])
    steps, missing = pa.plan_attribute_restore(acc, Attributes(RECORDED), None)
    assert [s["label"] for s in steps] == ["package-0 limit", "cpu0 C6"]
    assert missing == [
        "die 0 max: the attribute is gone (CPU or die offline)",
        "cpu3 C6: the attribute is gone (CPU or die offline)",
    ]


def test_plan_attribute_restore_unreadable_current_is_none():
    acc = Acc({LIMIT: "1"}, read_errors={LIMIT: eio()})
    steps, _missing = pa.plan_attribute_restore(acc, Attributes({LIMIT: RECORDED[LIMIT]}), None)
    assert steps[0]["current"] is None


IGNORED_IO = {"chip": "hwmon0", "driver": "d", "attr": "power2_input", "label": "IO", "reason": "class io"}


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (
            {
                "source": "rapl",
                "zones": [{"name": "package-0", "path": "class/powercap/intel-rapl:0"}],
                "skipped": [],
                "ignored": [],
            },
            {"source": "rapl", "zones": [{"name": "package-0"}], "ignored": [], "messages": []},
        ),
        (
            {
                "source": "hwmon",
                "zones": [{"name": "amd_energy", "path": "x", "kind": "energy"}],
                "skipped": [],
                "ignored": [IGNORED_IO, IGNORED_IO],
            },
            {
                "source": "hwmon",
                "zones": [{"name": "amd_energy", "kind": "energy"}],
                "ignored": [IGNORED_IO, IGNORED_IO],
                "messages": [
                    "no RAPL powercap package zone: package power is read from hwmon",
                    "2 hwmon energy/power sensor(s) are not package power (see ignored); hwmon_labels classifies labels",
                ],
            },
        ),
        (
            {"source": None, "zones": [], "skipped": [], "ignored": []},
            {
                "source": None,
                "zones": [],
                "ignored": [],
                "messages": [
                    "no package power source: neither RAPL powercap package zones nor a hwmon energy/power sensor"
                ],
            },
        ),
    ],
)
def test_power_reading_facts(monkeypatch, found, expected):
    calls = []
    rules = object()

    def find(acc, powercap_dir, hwmon_dir, rules):
        calls.append((acc, powercap_dir, hwmon_dir, rules))
        return found

    monkeypatch.setattr(pa, "find_power_source", find)
    acc = Acc()
    assert pa.power_reading_facts(acc, rules) == expected
    assert calls == [(acc, pa.POWERCAP_DIR, pa.HWMON_DIR, rules)]


# --- apply_profile, restore_profile --------------------------------------------------------------


def test_apply_profile_result_and_state_file(tmp_path):
    path = state_file(tmp_path)
    acc = node(online="0-2")
    result = pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000, epp="power"), state_file=path)
    assert result == {
        "changed": True,
        "cpus": "0-2",
        "skipped_offline": "3",
        "driver": "intel_pstate",
        "policies": [
            {
                "policy": "policy0",
                "cpus": "0-1",
                "changed": [EPP, MAX],
                "before": {"min_mhz": 800, "max_mhz": 3900, "governor": "powersave", "epp": "balance_performance"},
                "after": {"min_mhz": 800, "max_mhz": 2000, "governor": "powersave", "epp": "power"},
            },
            {
                "policy": "policy2",
                "cpus": "2",
                "changed": [EPP, MAX],
                "before": {"min_mhz": 800, "max_mhz": 3900, "governor": "powersave", "epp": "balance_performance"},
                "after": {"min_mhz": 800, "max_mhz": 2000, "governor": "powersave", "epp": "power"},
            },
        ],
        "state_file": path,
        "diff": {
            "before": HEADER
            + "\n   0 policy0         800     3900 powersave    balance_performance"
            + "\n   1 policy0         800     3900 powersave    balance_performance"
            + "\n   2 policy2         800     3900 powersave    balance_performance\n",
            "after": HEADER
            + "\n   0 policy0         800     2000 powersave    power"
            + "\n   1 policy0         800     2000 powersave    power"
            + "\n   2 policy2         800     2000 powersave    power\n",
        },
    }
    assert text(path) == STATE_MAX_EPP


def test_apply_profile_check_mode_and_tolerance(tmp_path):
    path = state_file(tmp_path)
    acc = node(values0={MAX: "2050000"}, values2={MAX: "2050000"})
    result = pa.apply_profile(acc, Request(cpus="all", max_mhz=2000), state_file=path, tolerance_mhz=50)
    assert result["changed"] is False and acc.writes == []
    result = pa.apply_profile(
        acc, Request(cpus="all", max_mhz=2000), state_file=path, tolerance_mhz=49, check_mode=True
    )
    assert result["changed"] is True and result["policies"][0]["after"]["max_mhz"] == 2000
    assert acc.writes == [] and not os.path.exists(path)
    assert result["state_file"] == path


def test_restore_profile_writes_originals_back_and_forgets_them(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000, epp="power"), state_file=path)
    acc.writes.clear()
    result = pa.restore_profile(acc, state_file=path)
    assert acc.writes == [
        (f"{P2}/{MAX}", "3900000"),
        (f"{P2}/{EPP}", "balance_performance"),
        (f"{P0}/{MAX}", "3900000"),
        (f"{P0}/{EPP}", "balance_performance"),
    ]
    assert text(path) == EMPTY_STATE
    assert result["changed"] is True
    assert result["cpus"] == "0-3" and result["skipped_offline"] == "" and result["driver"] == "intel_pstate"
    assert [(p["policy"], p["changed"], p["after"]["max_mhz"]) for p in result["policies"]] == [
        ("policy2", [EPP, MAX], 3900),
        ("policy0", [EPP, MAX], 3900),
    ]
    assert result["state_file"] == path
    assert (
        result["diff"]["after"].splitlines()[1] == "   0 policy0         800     3900 powersave    balance_performance"
    )


def test_restore_profile_of_some_cpus_in_check_mode_and_of_unchanged_values(tmp_path):
    path = state_file(tmp_path)
    acc = node(online="0-2")
    pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000), state_file=path)
    recorded = text(path)
    acc.writes.clear()
    result = pa.restore_profile(acc, cpus="0-1", state_file=path, check_mode=True)
    assert result["changed"] is True and acc.writes == [] and text(path) == recorded
    assert result["policies"][0]["after"]["max_mhz"] == 3900
    # the value is back already (by hand): nothing to write, but the original is forgotten
    acc.files[f"{P0}/{MAX}"] = "3900000"
    result = pa.restore_profile(acc, cpus="0-1", state_file=path)
    assert result["changed"] is True and acc.writes == []
    assert list(StateStore(path).policies) == ["policy2"]
    assert result["cpus"] == "0-1"
    # nothing recorded for these CPUs any more
    result = pa.restore_profile(acc, cpus="0-1", state_file=path)
    assert result["changed"] is False and result["policies"] == [] and result["cpus"] == ""
    assert list(StateStore(path).policies) == ["policy2"]


def test_restore_profile_skips_an_offline_policy(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000), state_file=path)
    acc.files[f"{CPU}/online"] = "0-1"
    acc.writes.clear()
    result = pa.restore_profile(acc, state_file=path)
    assert result["skipped_offline"] == "2-3" and result["cpus"] == "0-1"
    assert acc.writes == [(f"{P0}/{MAX}", "3900000")]
    assert list(StateStore(path).policies) == ["policy2"]


# --- plan_controls, validate_all -----------------------------------------------------------------


def test_plan_controls_in_execution_order():
    acc = node(online="0-2", extra=dict(cstate_files((0, 1, 2)), **UNCORE_FILES))
    topo = Topology(acc)
    assert pa.plan_controls(acc, topo, [0, 1]) == []
    plans = pa.plan_controls(
        acc, topo, [1], cstates={"disable": ["C6"]}, uncore={"max_khz": 2000000}, power_cap={"watts": 100}
    )
    assert [p["control"] for p in plans] == ["cstates", "uncore", "power_cap"]
    assert [(w["path"], w["current"], w["target"]) for w in plans[0]["writes"]] == [
        (f"{CPU}/cpu1/cpuidle/state2/disable", "0", "1")
    ]
    assert [(w["path"], w["current"], w["target"]) for w in plans[1]["writes"]] == [
        (f"{UNC}/max_freq_khz", "2400000", "2000000")
    ]
    assert plans[2]["messages"] == [
        "power_cap: no RAPL package zone in powercap on this machine; power_cap skipped, nothing changed"
    ]
    assert pa.plan_controls(acc, topo, [0], uncore={"min_khz": 900000})[0]["control"] == "uncore"
    assert pa.plan_controls(acc, topo, [0], power_cap={"watts": 100})[0]["control"] == "power_cap"


def test_validate_all_lists_every_problem():
    acc = node(extra=UNCORE_FILES)
    topo = Topology(acc)
    with pytest.raises(ValidationError) as info:
        pa.validate_all(acc, topo, Request(cpus="0-7", max_mhz=2000), {"uncore": {"max_khz": 1}, "cstates": None}, 100)
    # the P-state plan is not made for a refused CPU list (its problem would be listed twice)
    assert str(info.value) == (
        "CPU 4-7 is not present on this machine (present: 0-3); remove it from cpus; uncore.max_khz=1 is not a "
        "multiple of 100000 kHz: the uncore ratio is set in 100 MHz steps and it would be ratio 0, which the kernel "
        "refuses; use 100000"
    )
    with pytest.raises(ValidationError) as info:
        pa.validate_all(acc, topo, Request(cpus="0-1", max_mhz=9000), {"uncore": {"bogus": 1}}, 100)
    assert str(info.value) == (
        "max_mhz=9000 MHz is outside CPU 0's limits 800-3900 MHz (policy0, cpuinfo_min_freq/cpuinfo_max_freq); "
        "use a value in that range or 'min'/'max'; uncore has unknown key(s) bogus; allowed: min_khz, max_khz, "
        "min_pct, max_pct, packages; uncore is empty: give min_khz/max_khz (kHz) or min_pct/max_pct (0-100)"
    )


def test_validate_all_returns_the_plans():
    acc = node(online="0-2", extra=UNCORE_FILES)
    topo = Topology(acc)
    online, skipped, pstate, plans = pa.validate_all(
        acc, topo, Request(cpus="1-3"), {"uncore": {"max_khz": 2000000}}, 100
    )
    assert (online, skipped, pstate) == ([1, 2], [3], None)
    assert [p["control"] for p in plans] == ["uncore"]
    with pytest.raises(ValidationError) as info:
        pa.validate_all(acc, topo, Request(cpus="1-3", max_mhz=2000), {}, 100)
    assert str(info.value).startswith("CPU 1 shares cpufreq policy policy0 with CPU 0")
    online, skipped, pstate, plans = pa.validate_all(acc, topo, Request(cpus="2-3", max_mhz=2050), {}, 50)
    assert (online, skipped, plans) == ([2], [3], [])
    assert pstate["tolerance_khz"] == 50000
    assert [(i["policy"]["name"], i["changes"]) for i in pstate["policies"]] == [("policy2", {MAX: "2050000"})]


# --- apply_controls ------------------------------------------------------------------------------


def test_apply_controls_needs_something_to_apply(tmp_path):
    with pytest.raises(ValidationError) as info:
        pa.apply_controls(node(), Request(cpus="all"), state_file=state_file(tmp_path))
    assert str(info.value) == (
        "nothing to apply: give at least one of min_mhz, max_mhz, governor, epp, cstates, uncore, power_cap"
    )


def test_apply_controls_writes_pstates_then_controls_and_journals_both(tmp_path):
    path = state_file(tmp_path)
    acc = node(online="0-2", extra=dict(cstate_files((0, 1, 2)), **UNCORE_FILES))
    result = pa.apply_controls(
        acc, Request(cpus="0-1", max_mhz=2000), cstates={"disable": ["C6"]}, uncore={"max_khz": 2000000},
        state_file=path,
    )  # fmt: skip
    assert acc.writes == [
        (f"{P0}/{MAX}", "2000000"),
        (f"{CPU}/cpu0/cpuidle/state2/disable", "1"),
        (f"{CPU}/cpu1/cpuidle/state2/disable", "1"),
        (f"{UNC}/max_freq_khz", "2000000"),
    ]
    assert result == {
        "changed": True,
        "cpus": "0-1",
        "skipped_offline": "",
        "driver": "intel_pstate",
        "policies": [
            {
                "policy": "policy0",
                "cpus": "0-1",
                "changed": [MAX],
                "before": {"min_mhz": 800, "max_mhz": 3900, "governor": "powersave", "epp": "balance_performance"},
                "after": {"min_mhz": 800, "max_mhz": 2000, "governor": "powersave", "epp": "balance_performance"},
            }
        ],
        "controls": {
            "cstates": {
                "available": True,
                "changed": ["cpu0 state2 (C6) disable", "cpu1 state2 (C6) disable"],
                "settings": [
                    {"attribute": "cpu0 state2 (C6) disable", "before": "0", "after": "1"},
                    {"attribute": "cpu1 state2 (C6) disable", "before": "0", "after": "1"},
                ],
                "messages": [],
            },
            "uncore": {
                "available": True,
                "changed": ["package_00_die_00 max_freq_khz"],
                "settings": [{"attribute": "package_00_die_00 max_freq_khz", "before": "2400000", "after": "2000000"}],
                "messages": [],
            },
        },
        "messages": [],
        "state_file": path,
        "diff": {
            "before": HEADER
            + "\n   0 policy0         800     3900 powersave    balance_performance"
            + "\n   1 policy0         800     3900 powersave    balance_performance"
            + "\ncpu0 state2 (C6) disable: 0\ncpu1 state2 (C6) disable: 0\npackage_00_die_00 max_freq_khz: 2400000\n",
            "after": HEADER
            + "\n   0 policy0         800     2000 powersave    balance_performance"
            + "\n   1 policy0         800     2000 powersave    balance_performance"
            + "\ncpu0 state2 (C6) disable: 1\ncpu1 state2 (C6) disable: 1\npackage_00_die_00 max_freq_khz: 2000000\n",
        },
    }
    assert text(path) == (
        '{\n  "attributes": {\n'
        '    "devices/system/cpu/cpu0/cpuidle/state2/disable": {\n      "control": "cstates",\n      "cpu": 0,\n'
        '      "label": "cpu0 state2 (C6) disable",\n      "original": "0",\n      "seq": 1\n    },\n'
        '    "devices/system/cpu/cpu1/cpuidle/state2/disable": {\n      "control": "cstates",\n      "cpu": 1,\n'
        '      "label": "cpu1 state2 (C6) disable",\n      "original": "0",\n      "seq": 2\n    },\n'
        '    "devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz": {\n      "control": "uncore",\n'
        '      "cpu": null,\n      "label": "package_00_die_00 max_freq_khz",\n      "original": "2400000",\n      "seq": 3\n    }\n  },\n'
        '  "policies": {\n    "policy0": {\n      "cpus": "0-1",\n      "order": [\n        "scaling_max_freq"\n      ],\n'
        '      "original": {\n        "scaling_max_freq": "3900000"\n      },\n'
        '      "path": "devices/system/cpu/cpufreq/policy0"\n    }\n  },\n  "version": 1\n}\n'
    )


def test_apply_controls_without_pstates_and_with_unchanged_steps(tmp_path):
    path = state_file(tmp_path)
    acc = node(online="0-2", extra=dict(cstate_files((0, 1, 2), disabled={(1, "C6")}), **UNCORE_FILES))
    result = pa.apply_controls(acc, Request(cpus="1-3"), cstates={"disable": ["C6"]}, uncore={"max_khz": 2400000},
                               state_file=path)  # fmt: skip
    assert acc.writes == [(f"{CPU}/cpu2/cpuidle/state2/disable", "1")]
    assert result["changed"] is True
    assert (result["cpus"], result["skipped_offline"], result["policies"]) == ("1-2", "3", [])
    assert result["controls"]["cstates"]["changed"] == ["cpu2 state2 (C6) disable"]
    assert result["controls"]["uncore"] == {
        "available": True,
        "changed": [],
        "settings": [{"attribute": "package_00_die_00 max_freq_khz", "before": "2400000", "after": "2400000"}],
        "messages": [],
    }
    assert result["diff"] == {"before": "cpu2 state2 (C6) disable: 0\n", "after": "cpu2 state2 (C6) disable: 1\n"}
    assert list(StateStore(path).attributes) == [f"{CPU}/cpu2/cpuidle/state2/disable"]
    assert StateStore(path).policies == {}
    # again: nothing left to change
    acc.writes.clear()
    result = pa.apply_controls(acc, Request(cpus="1-3"), cstates={"disable": ["C6"]}, state_file=path)
    assert result["changed"] is False and acc.writes == []


def test_apply_controls_messages_of_unavailable_controls(tmp_path):
    acc = node()
    result = pa.apply_controls(acc, Request(), uncore={"max_khz": 2000000}, power_cap={"watts": 100},
                               state_file=state_file(tmp_path))  # fmt: skip
    assert result["changed"] is False
    assert (result["cpus"], result["skipped_offline"]) == ("0-3", "")
    assert result["messages"] == [
        "uncore: no intel_uncore_frequency directory (driver not loaded, or an AMD/ARM machine without an "
        "uncore frequency interface); uncore skipped, nothing changed",
        "power_cap: no RAPL package zone in powercap on this machine; power_cap skipped, nothing changed",
    ]
    assert result["diff"] == {"before": "", "after": ""}


def test_apply_controls_pstates_only(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    result = pa.apply_controls(acc, Request(cpus="2-3", governor="performance", epp="performance"), state_file=path)
    assert acc.writes == [(f"{P2}/{GOV}", "performance"), (f"{P2}/{EPP}", "performance")]
    assert result["changed"] is True and result["controls"] == {} and result["messages"] == []
    assert result["cpus"] == "2-3"
    assert list(StateStore(path).policies) == ["policy2"]


def test_apply_controls_check_mode_changes_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=UNCORE_FILES)
    result = pa.apply_controls(acc, Request(cpus="0-3", max_mhz=2000), uncore={"min_khz": 1000000},
                               state_file=path, check_mode=True)  # fmt: skip
    assert result["changed"] is True and acc.writes == [] and not os.path.exists(path)
    assert result["controls"]["uncore"]["settings"] == [
        {"attribute": "package_00_die_00 min_freq_khz", "before": "800000", "after": "1000000"}
    ]
    result = pa.apply_controls(acc, Request(), uncore={"min_khz": 1000000}, state_file=path, check_mode=True)
    assert result["changed"] is True and acc.writes == [] and not os.path.exists(path)


def test_apply_controls_failed_control_rolls_back_the_pstates_and_the_journal(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=UNCORE_FILES, values0={MAX: "3000000"})
    acc.clamp[f"{UNC}/max_freq_khz"] = "2400000"
    with pytest.raises(ApplyError) as info:
        pa.apply_controls(acc, Request(cpus="0-1", max_mhz=2000), uncore={"max_khz": 2000000}, state_file=path,
                          tolerance_mhz=0)  # fmt: skip
    assert str(info.value) == (
        f"/sys/{UNC}/max_freq_khz reads back '2400000' after writing '2000000' (package_00_die_00 max_freq_khz): "
        "the kernel clamped or refused the value silently; rolled back the 1 value(s) this run had changed, "
        "nothing else was touched"
    )
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{UNC}/max_freq_khz", "2000000"), (f"{P0}/{MAX}", "3000000")]
    # the state file returns to what it was before the run: nothing recorded
    assert text(path) == EMPTY_STATE


def test_apply_controls_rollback_of_the_pstates_uses_their_tolerance(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=UNCORE_FILES, values0={MAX: "3000000"})

    def firmware_moves_the_limit():
        acc.files[f"{P0}/{MAX}"] = "2950000"

    acc.fail = {f"{UNC}/max_freq_khz": {1: eio()}}
    acc.hook = firmware_moves_the_limit
    with pytest.raises(ApplyError) as info:
        pa.apply_controls(acc, Request(cpus="0-1", max_mhz=2000), uncore={"max_khz": 2000000}, state_file=path)
    # 2950 MHz is within 100 MHz of the original 3000: not written again
    assert acc.writes == [(f"{P0}/{MAX}", "2000000")]
    assert str(info.value).endswith("; rolled back the 0 value(s) this run had changed, nothing else was touched")


# --- restore_controls ----------------------------------------------------------------------------


def test_restore_controls_restores_everything_newest_first_and_forgets_it(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=dict(cstate_files((0, 1, 2, 3)), **UNCORE_FILES))
    pa.apply_controls(acc, Request(cpus="0-3", max_mhz=2000), cstates={"disable": ["C6"]},
                      uncore={"min_khz": 1000000, "max_khz": 2000000}, state_file=path)  # fmt: skip
    acc.files[f"{CPU}/cpu3/cpuidle/state2/disable"] = "0"  # put back by hand already
    acc.writes.clear()
    result = pa.restore_controls(acc, state_file=path)
    assert acc.writes == [
        (f"{P2}/{MAX}", "3900000"),
        (f"{P0}/{MAX}", "3900000"),
        (f"{UNC}/max_freq_khz", "2400000"),
        (f"{UNC}/min_freq_khz", "800000"),
        (f"{CPU}/cpu2/cpuidle/state2/disable", "0"),
        (f"{CPU}/cpu1/cpuidle/state2/disable", "0"),
        (f"{CPU}/cpu0/cpuidle/state2/disable", "0"),
    ]
    assert text(path) == '{\n  "attributes": {},\n  "policies": {},\n  "version": 1\n}\n'
    assert result["changed"] is True
    assert (result["cpus"], result["skipped_offline"], result["driver"]) == ("0-3", "", "intel_pstate")
    assert [p["policy"] for p in result["policies"]] == ["policy2", "policy0"]
    assert result["controls"] == {
        "restored": [
            "package_00_die_00 max_freq_khz",
            "package_00_die_00 min_freq_khz",
            "cpu2 state2 (C6) disable",
            "cpu1 state2 (C6) disable",
            "cpu0 state2 (C6) disable",
        ],
        "unchanged": ["cpu3 state2 (C6) disable"],
    }
    assert result["messages"] == []
    assert result["state_file"] == path
    assert result["diff"]["before"].endswith(
        "\npackage_00_die_00 max_freq_khz: 2000000\npackage_00_die_00 min_freq_khz: 1000000\n"
        "cpu2 state2 (C6) disable: 1\ncpu1 state2 (C6) disable: 1\ncpu0 state2 (C6) disable: 1\n"
    )
    assert result["diff"]["after"].endswith("\ncpu0 state2 (C6) disable: 0\n")
    # nothing left
    acc.writes.clear()
    result = pa.restore_controls(acc, state_file=path)
    assert result["changed"] is False and acc.writes == []
    assert result["controls"] == {"restored": [], "unchanged": []}


def test_restore_controls_check_mode_changes_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=cstate_files())
    pa.apply_controls(acc, Request(cpus="0-1", max_mhz=2000), cstates={"disable": ["C6"]}, state_file=path)
    recorded = text(path)
    acc.writes.clear()
    result = pa.restore_controls(acc, cpus="0-1", state_file=path, check_mode=True)
    assert result["changed"] is True and acc.writes == [] and text(path) == recorded
    assert result["controls"]["restored"] == ["cpu1 state2 (C6) disable", "cpu0 state2 (C6) disable"]


def test_restore_controls_only_attributes_already_back(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=cstate_files())
    pa.apply_controls(acc, Request(cpus="0"), cstates={"disable": ["C6"]}, state_file=path)
    acc.files[f"{CPU}/cpu0/cpuidle/state2/disable"] = "0"
    acc.writes.clear()
    result = pa.restore_controls(acc, state_file=path)
    assert result["changed"] is True and acc.writes == []
    assert result["controls"] == {"restored": [], "unchanged": ["cpu0 state2 (C6) disable"]}
    assert text(path) == '{\n  "attributes": {},\n  "policies": {},\n  "version": 1\n}\n'


def test_restore_controls_keeps_the_original_of_a_gone_attribute(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=cstate_files())
    pa.apply_controls(acc, Request(cpus="0-1"), cstates={"disable": ["C6"]}, state_file=path)
    for name in ("name", "desc", "latency", "residency", "disable"):
        del acc.files[f"{CPU}/cpu1/cpuidle/state2/{name}"]
    acc.writes.clear()
    result = pa.restore_controls(acc, cpus="all", state_file=path)
    assert acc.writes == [(f"{CPU}/cpu0/cpuidle/state2/disable", "0")]
    assert result["messages"] == [
        "cpu1 state2 (C6) disable: the attribute is gone (CPU or die offline); its original stays recorded"
    ]
    assert list(StateStore(path).attributes) == [f"{CPU}/cpu1/cpuidle/state2/disable"]


def test_restore_controls_bad_cpu_list(tmp_path):
    with pytest.raises(ValidationError) as info:
        pa.restore_controls(node(), cpus="0-x", state_file=state_file(tmp_path))
    assert str(info.value) == "invalid CPU list '0-x': 'x' is not a CPU number (expected a form like '0-3,8,10-11')"


def test_restore_controls_failed_write_rolls_back_the_restored_policies(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=cstate_files())
    pa.apply_controls(acc, Request(cpus="0-1", max_mhz=2000), cstates={"disable": ["C6"]}, state_file=path)
    recorded = text(path)
    acc.fail = {f"{CPU}/cpu0/cpuidle/state2/disable": {2: eio()}}
    acc.writes.clear()
    with pytest.raises(ApplyError) as info:
        pa.restore_controls(acc, state_file=path)
    assert str(info.value) == (
        f"writing '0' to /sys/{CPU}/cpu0/cpuidle/state2/disable (cpu0 state2 (C6) disable) failed: EIO: "
        "Input/output error; rolled back the 2 value(s) this run had changed, nothing else was touched"
    )
    assert acc.writes == [
        (f"{P0}/{MAX}", "3900000"),
        (f"{CPU}/cpu1/cpuidle/state2/disable", "0"),
        (f"{CPU}/cpu1/cpuidle/state2/disable", "1"),
        (f"{P0}/{MAX}", "2000000"),
    ]
    assert text(path) == recorded


# --- gather_info ---------------------------------------------------------------------------------


def test_gather_info_of_a_machine_with_cpuidle_and_uncore():
    # CPU 2 is offline: its C6, disabled too, is not reported
    acc = node(online="0-1", extra=dict(cstate_files((0, 1, 2), disabled={(1, "C6"), (2, "C6")}), **UNCORE_FILES))
    info = pa.gather_info(acc)
    assert (info["cpufreq_available"], info["driver"], info["online"], info["offline"]) == (
        True,
        "intel_pstate",
        "0-1",
        "2-3",
    )
    assert [p["name"] for p in info["policies"]] == ["policy0"]
    assert info["cpuidle"] == {
        "available": True,
        "driver": "intel_idle",
        "governor": "menu",
        "states": [
            {
                "state": "state0",
                "name": "POLL",
                "desc": "POLL idle",
                "latency_us": 0,
                "residency_us": 0,
                "disabled_cpus": "",
            },
            {
                "state": "state1",
                "name": "C1",
                "desc": "C1 idle",
                "latency_us": 2,
                "residency_us": 6,
                "disabled_cpus": "",
            },
            {
                "state": "state2",
                "name": "C6",
                "desc": "C6 idle",
                "latency_us": 170,
                "residency_us": 510,
                "disabled_cpus": "1",
            },
        ],
        "cpus_without_cpuidle": "",
        "messages": [],
    }
    assert info["uncore"] == {
        "available": True,
        "interface": "legacy",
        "domains": [
            {
                "name": "package_00_die_00",
                "path": UNC,
                "min_khz": 800000,
                "max_khz": 2400000,
                "initial_min_khz": 800000,
                "initial_max_khz": 2400000,
                "current_khz": 1800000,
                "package": 0,
                "die": 0,
                "domain_id": None,
            }
        ],
        "package_dirs": [],
        "messages": [],
    }
    assert info["powercap"]["available"] is False
    assert info["power_reading"] == {
        "source": None,
        "zones": [],
        "ignored": [],
        "messages": ["no package power source: neither RAPL powercap package zones nor a hwmon energy/power sensor"],
    }


# --- edges of the entry points -------------------------------------------------------------------


def test_rollback_compares_epp_as_the_kernel_shows_it():
    # already the original as the kernel showed it: nothing to write
    acc = node(epp="power")
    topo, item = rollback_item(acc, "policy0", {EPP: "power"}, {EPP: "balance_power"})
    assert writes.rollback_policies(acc, topo, [item], 0) == (0, [])
    assert acc.writes == []
    # a number is not a name (no table says 128 is balance_performance on this CPU): written back
    acc = node(epp="128")
    topo, item = rollback_item(acc, "policy0", {EPP: "balance_performance"}, {EPP: "power"})
    assert writes.rollback_policies(acc, topo, [item], 0) == (1, [])
    assert acc.writes == [(f"{P0}/{EPP}", "balance_performance")]


def test_execute_failure_with_nothing_journaled_leaves_the_state_file_alone(tmp_path):
    path = state_file(tmp_path)
    acc = node(fail={f"{P0}/{MAX}": {1: eio()}})
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    with pytest.raises(ApplyError):
        writes.execute(acc, topo, plan, store=StateStore(path), record=False)
    assert not os.path.exists(path)


@pytest.mark.parametrize(("live", "written"), [("2100000", False), ("2101000", True)])
def test_apply_default_tolerance_is_100_mhz(tmp_path, live, written):
    for apply in (pa.apply_profile, pa.apply_controls):
        acc = node(values0={MAX: live})
        result = apply(acc, Request(cpus="0-1", max_mhz=2000), state_file=state_file(tmp_path / apply.__name__))
        assert result["changed"] is written
        assert acc.writes == ([(f"{P0}/{MAX}", "2000000")] if written else [])


def test_restore_default_tolerance_is_100_mhz_and_a_given_one_is_used(tmp_path):
    for restore in (pa.restore_profile, pa.restore_controls):
        path = state_file(tmp_path / restore.__name__)
        acc = node()
        pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000), state_file=path)
        acc.files[f"{P0}/{MAX}"] = "3799000"  # 101 MHz below the original 3900
        acc.files[f"{P2}/{MAX}"] = "3800000"  # 100 MHz below
        acc.writes.clear()
        restore(acc, state_file=path, check_mode=True, tolerance_mhz=0)
        assert acc.writes == []
        restore(acc, state_file=path)
        assert acc.writes == [(f"{P0}/{MAX}", "3900000")]
        # the original of policy2 is forgotten too: it was back within the tolerance
        assert StateStore(path).policies == {}
        acc = node()
        pa.apply_profile(acc, Request(cpus="0-3", max_mhz=2000), state_file=path)
        acc.files[f"{P0}/{MAX}"] = acc.files[f"{P2}/{MAX}"] = "3850000"
        acc.writes.clear()
        restore(acc, state_file=path, tolerance_mhz=0)
        assert acc.writes == [(f"{P2}/{MAX}", "3900000"), (f"{P0}/{MAX}", "3900000")]


def test_plan_controls_names_the_missing_cpuidle_directory():
    acc = node(extra=cstate_files((0,)))
    plans = pa.plan_controls(acc, Topology(acc), [0, 1], cstates={"disable": ["C6"]})
    assert plans[0]["problems"] == [
        f"CPU 1 is online but has no cpuidle directory (/sys/{CPU}/cpu1/cpuidle is missing); remove it from cpus"
    ]


def test_restore_controls_of_some_cpus_keeps_the_others_and_cpu_less_originals(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=dict(cstate_files(), **UNCORE_FILES))
    pa.apply_controls(acc, Request(cpus="0-3"), cstates={"disable": ["C6"]}, uncore={"max_khz": 2000000},
                      state_file=path)  # fmt: skip
    acc.writes.clear()
    result = pa.restore_controls(acc, cpus="2-3", state_file=path)
    assert acc.writes == [(f"{CPU}/cpu3/cpuidle/state2/disable", "0"), (f"{CPU}/cpu2/cpuidle/state2/disable", "0")]
    assert result["controls"] == {"restored": ["cpu3 state2 (C6) disable", "cpu2 state2 (C6) disable"], "unchanged": []}
    assert list(StateStore(path).attributes) == [
        f"{CPU}/cpu0/cpuidle/state2/disable",
        f"{CPU}/cpu1/cpuidle/state2/disable",
        f"{UNC}/max_freq_khz",
    ]


def test_restore_controls_rollback_of_the_pstates_uses_their_tolerance(tmp_path):
    path = state_file(tmp_path)
    acc = node(extra=cstate_files())
    pa.apply_controls(acc, Request(cpus="0-1", max_mhz=2000), cstates={"disable": ["C6"]}, state_file=path)

    def firmware_moves_the_limit():
        acc.files[f"{P0}/{MAX}"] = "2050000"

    acc.fail = {f"{CPU}/cpu1/cpuidle/state2/disable": {2: eio()}}
    acc.hook = firmware_moves_the_limit
    acc.writes.clear()
    with pytest.raises(ApplyError) as info:
        pa.restore_controls(acc, state_file=path)
    # 2050 MHz is within 100 MHz of the 2000 this restore found: not written again
    assert acc.writes == [(f"{P0}/{MAX}", "3900000")]
    assert str(info.value).endswith("; rolled back the 0 value(s) this run had changed, nothing else was touched")


def test_restore_controls_state_file_with_a_bad_cpu_list(tmp_path):
    path = state_file(tmp_path)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write(
            '{"version": 1, "policies": {"policy0": {"path": "devices/system/cpu/cpufreq/policy0", "cpus": "0-x", '
            '"original": {"scaling_max_freq": "3900000"}, "order": ["scaling_max_freq"]}}}'
        )
    acc = node()
    for restore in (pa.restore_controls, pa.restore_profile):
        with pytest.raises(PowerError) as info:
            restore(acc, state_file=path)
        assert str(info.value) == (
            f"state file {path} is damaged: policy policy0: cpus: invalid CPU list '0-x': 'x' is not a CPU number "
            "(expected a form like '0-3,8,10-11'); it holds the original CPU settings: repair it or move it away "
            "(originals then become the current values)"
        )
    assert acc.writes == []


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - restore_profile 24 and restore_controls 33, `execute(..., store=None, ...)` -> the argument left
#   out: None is execute's default for store.
# - apply_controls 74, `pstate["tolerance_khz"] if pstate else 0` -> `else 1`: without a P-state plan
#   there are no policies to roll back, and the tolerance is used only to judge those.
# - apply_controls 96 and 103, `pstate["managed"] if pstate else online` (and `skipped_offline` /
#   `skipped`) -> always `online` / `skipped`: plan_present takes both lists from the same
#   resolve_cpus(topo, request) call validate_all made, so they are equal.
# - gather_info 5 and 7, `gather_cpufreq_info(acc, topo)` -> `(acc, None)` / `(acc)`: it then builds
#   Topology(acc) itself from the same files; the facts are the same.
