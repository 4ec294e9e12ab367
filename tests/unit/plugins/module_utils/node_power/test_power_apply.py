# ruff: noqa: E501 - exact, long messages
"""power_apply's single-attribute steps, restore planning and reports, checked directly.

The module tests reach these helpers only through whole fake machines (minutes a run). Here each helper gets a small in-memory accessor:
the read-back rules (exact, power limit within a tolerance, time windows within a quarter), the
write/read-back/clamp messages with their hints, rollback newest first and its failure report, the
state file's journal, the safe order of an uncore min/max pair, which recorded originals a restore
takes, and the reports (summary, diff tables, power source).

power_apply's entry points and P-state writes checked directly on an in-memory sysfs.

For ``_write_policy``,
``_rollback``, ``execute``, ``plan_controls``, ``_validate_all``, ``apply_profile``,
``restore_profile``, ``apply_controls``, ``restore_controls`` and ``gather_info``: the module tests
reach them only through whole fake machines (minutes a run). Here a small machine in memory
(memory_sysfs.py: two cpufreq policies, uncore, C-states) takes the writes; each test states what
is written in which order, what the state file holds afterwards (byte for byte), what a failed
write rolls back, that check mode changes nothing, and the exact messages and results.
"""

from __future__ import annotations

import errno
import os

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import Topology
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpufreq_plan import Request, plan_present
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import StateStore
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    ApplyError,
    PowerError,
    ValidationError,
)
from memory_sysfs import MemorySysfs, eacces, eio, machine

LIMIT = "class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
WINDOW = "class/powercap/intel-rapl:0/constraint_0_time_window_us"
UNCORE = "devices/system/cpu/intel_uncore_frequency/package_00_die_00"


def Acc(files=None, write_errors=None, read_errors=None, clamp=None):  # noqa: N802 - reads like a class
    """memory_sysfs.MemorySysfs under the short name these tests use."""
    return MemorySysfs(files, write_errors=write_errors, clamp=clamp, read_errors=read_errors)


def step(path, target, current=None, label=None, **extra):
    return {"control": "test", "path": path, "target": target, "current": current, "label": label or path, **extra}


# --- compare_mode, step_equal --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "mode"),
    [
        (LIMIT, "tolerance"),
        (WINDOW, "time_window"),
        (f"{UNCORE}/max_freq_khz", "exact"),
        ("x_power_limit_uw_max", "exact"),
        ("x_time_window_us/y", "exact"),
    ],
)
def test_compare_mode(path, mode):
    assert pa.compare_mode(path) == mode


@pytest.mark.parametrize(
    ("target", "value", "equal"),
    [
        ("100", "100", True),
        ("100", " 100\n", True),
        ("100", "101", False),
        ("disabled", "disabled", True),
        ("1", "0", False),
        (None, None, True),
        ("1", None, False),
        (None, "1", False),
        (0, "0", True),
    ],
)
def test_step_equal_exact(target, value, equal):
    assert pa.step_equal(step(f"{UNCORE}/max_freq_khz", target), value) is equal


@pytest.mark.parametrize(
    ("value", "equal"),
    [("150000000", True), ("151000000", True), ("149000000", True), ("151000001", False), ("148999999", False)],
)
def test_step_equal_power_limit_within_the_default_tolerance(value, equal):
    assert pa.POWER_TOLERANCE_UW == 1000000
    assert pa.step_equal(step(LIMIT, "150000000"), value) is equal


@pytest.mark.parametrize(("value", "equal"), [("105", True), ("95", True), ("106", False), ("94", False)])
def test_step_equal_power_limit_with_the_steps_tolerance(value, equal):
    assert pa.step_equal(step(LIMIT, "100", tolerance=5), value) is equal


@pytest.mark.parametrize(
    ("value", "equal"),
    [("8000", True), ("11000", True), ("5000", True), ("11001", False), ("4999", False), ("abc", False)],
)
def test_step_equal_time_window_within_a_quarter_and_a_millisecond(value, equal):
    assert pa.step_equal(step(WINDOW, "8000"), value) is equal


def test_step_equal_time_window_small_values():
    # want // 4 + 1000 with want 3: 1000 either side
    assert pa.step_equal(step(WINDOW, "3"), "1003") is True
    assert pa.step_equal(step(WINDOW, "3"), "1004") is False


def test_step_equal_non_numbers_compare_exactly_in_every_mode():
    assert pa.step_equal(step(LIMIT, "-5"), "-5") is True
    assert pa.step_equal(step(LIMIT, "-5"), "-4") is False
    assert pa.step_equal(step(LIMIT, "5"), "5.0") is False
    assert pa.step_equal(step(WINDOW, "x"), "x") is True


def test_step_equal_the_steps_compare_wins_over_the_path():
    assert pa.step_equal(step(LIMIT, "100", compare="exact"), "101") is False
    assert pa.step_equal(step("plain", "100", compare="tolerance"), "1000100") is True
    assert pa.step_equal(step("plain", "8000", compare="time_window"), "11000") is True


def test_step_equal_a_missing_value_equals_only_a_missing_target():
    assert pa.step_equal(step("a", "None"), None) is False
    assert pa.step_equal(step("a", None), "None") is False


def test_step_equal_an_explicit_target_replaces_the_steps():
    s = step(f"{UNCORE}/max_freq_khz", "100", current="200")
    assert pa.step_equal(s, "200", s["current"]) is True
    assert pa.step_equal(s, "100", "200") is False
    assert pa.step_equal(s, "100", None) is True


# --- _write_steps --------------------------------------------------------------------------------


def test_write_steps_writes_reads_back_and_journals():
    acc = Acc({LIMIT: "100000000", "a": "1"}, clamp={LIMIT: "149875000"})
    steps = [step(LIMIT, "150000000", "100000000", "power limit"), step("a", "2", "1", "a")]
    journal = []
    pa._write_steps(acc, steps, journal)
    assert acc.writes == [(LIMIT, "150000000"), ("a", "2")]
    assert journal == steps
    assert [s["after"] for s in steps] == ["149875000", "2"]


def test_write_steps_failed_write_names_value_path_label_and_hint():
    acc = Acc({LIMIT: "1"}, write_errors={LIMIT: eacces()})
    s = step(LIMIT, "150000000", "1", "package-0 long-term limit", hints={errno.EACCES: "locked by the BIOS"})
    journal = []
    with pytest.raises(ApplyError) as info:
        pa._write_steps(acc, [s, step("b", "1")], journal)
    assert str(info.value) == (
        f"writing '150000000' to /sys/{LIMIT} (package-0 long-term limit) failed: EACCES: Permission denied - locked by the BIOS"
    )
    assert journal == [] and acc.writes == [] and "after" not in s


def test_write_steps_failed_write_without_a_hint_for_its_errno():
    acc = Acc({"a": "1"}, write_errors={"a": eio()})
    with pytest.raises(ApplyError) as info:
        pa._write_steps(acc, [step("a", "2", "1", "uncore max", hints={errno.EACCES: "locked"})], [])
    assert str(info.value) == "writing '2' to /sys/a (uncore max) failed: EIO: Input/output error"


def test_write_steps_failed_write_of_a_step_without_hints():
    acc = Acc({"a": "1"}, write_errors={"a": eacces()})
    with pytest.raises(ApplyError) as info:
        pa._write_steps(acc, [step("a", "2", "1", "cpu0 C6")], [])
    assert str(info.value) == "writing '2' to /sys/a (cpu0 C6) failed: EACCES: Permission denied"


def test_write_steps_failed_read_back_keeps_the_write_in_the_journal():
    acc = Acc({"a": "1"}, read_errors={"a": eio()})
    s = step("a", "2", "1", "uncore max")
    journal = []
    with pytest.raises(ApplyError) as info:
        pa._write_steps(acc, [s], journal)
    assert str(info.value) == "reading back /sys/a failed: EIO: Input/output error"
    assert journal == [s]


def test_write_steps_silent_clamp_is_an_error_and_stops():
    acc = Acc({"a": "1", "b": "1"}, clamp={"a": "5"})
    s = step("a", "10", "1", "uncore max")
    with pytest.raises(ApplyError) as info:
        pa._write_steps(acc, [s, step("b", "2", "1")], [])
    assert str(info.value) == (
        "/sys/a reads back '5' after writing '10' (uncore max): the kernel clamped or refused the value silently"
    )
    assert acc.writes == [("a", "10")]


# --- _rollback_steps, _fail_and_roll_back --------------------------------------------------------


def test_rollback_steps_newest_first_skipping_unknown_and_unchanged():
    acc = Acc({"a": "2", "b": "2", "c": "1", "d": "9"})
    journal = [step("a", "2", "1"), step("b", "2", None), step("c", "2", "1"), step("d", "9", "3")]
    assert pa._rollback_steps(acc, journal) == (2, [])
    assert acc.writes == [("d", "3"), ("a", "1")]


def test_rollback_steps_reports_failed_writes_and_counts_the_rest():
    acc = Acc({"a": "2", "b": "2"}, write_errors={"b": eacces()})
    assert pa._rollback_steps(acc, [step("a", "2", "1"), step("b", "2", "1")]) == (
        1,
        ["b=1: EACCES: Permission denied"],
    )


def test_rollback_steps_of_a_gone_attribute_writes_the_original():
    acc = Acc({})
    assert pa._rollback_steps(acc, [step("a", "2", "1")]) == (1, [])
    assert acc.writes == [("a", "1")]


class Store:
    def __init__(self, data, fail=False):
        self.path = "/var/lib/poweraware/state.json"
        self.data = data
        self.fail = fail
        self.restored = []

    @property
    def policies(self):
        return self.data.get("policies", {})

    @property
    def attributes(self):
        return self.data.get("attributes", {})

    rewind = StateStore.rewind  # the journal's own rule, over this store's restore_saved

    def restore_saved(self, snapshot):
        if self.fail:
            raise OSError(errno.EROFS, "Read-only file system")
        self.restored.append(snapshot)
        self.data = snapshot


def test_fail_and_roll_back_counts_steps_and_policies(monkeypatch):
    calls = []

    def rollback(acc, topo, items, tolerance_khz, failed=None):
        calls.append((acc, topo, items, tolerance_khz))
        return 3, []

    monkeypatch.setattr(pa, "_rollback", rollback)
    acc = Acc({"a": "2"})
    store = Store({"new": 1})
    with pytest.raises(ApplyError) as info:
        pa._fail_and_roll_back(
            acc, "topo", ApplyError("boom"), [step("a", "2", "1")], ["item"], 50000, store, {"old": 1}
        )
    assert str(info.value) == "boom; rolled back the 4 value(s) this run had changed, nothing else was touched"
    assert calls == [(acc, "topo", ["item"], 50000)]
    assert store.restored == [{"old": 1}]


def test_fail_and_roll_back_without_policies_or_store_changes(monkeypatch):
    monkeypatch.setattr(pa, "_rollback", lambda *a: pytest.fail("no P-state items to roll back"))
    store = Store({"same": 1})
    with pytest.raises(ApplyError) as info:
        pa._fail_and_roll_back(
            Acc({"a": "1"}), None, ApplyError("boom"), [step("a", "2", "1")], [], 0, store, {"same": 1}
        )
    assert str(info.value) == "boom; rolled back the 0 value(s) this run had changed, nothing else was touched"
    assert store.restored == []


def test_fail_and_roll_back_reports_every_problem(monkeypatch):
    monkeypatch.setattr(pa, "_rollback", lambda *a: (0, ["policy0/scaling_max_freq=2000000: EIO: Input/output error"]))
    acc = Acc({"a": "2"}, write_errors={"a": eacces()})
    store = Store({"new": 1}, fail=True)
    with pytest.raises(ApplyError) as info:
        pa._fail_and_roll_back(acc, None, ApplyError("boom"), [step("a", "2", "1")], ["item"], 0, store, {"old": 1})
    assert str(info.value) == (
        "boom; rollback FAILED for: a=1: EACCES: Permission denied; policy0/scaling_max_freq=2000000: EIO: "
        "Input/output error; state file /var/lib/poweraware/state.json: [Errno 30] Read-only file system - check "
        "these attributes by hand"
    )
    assert isinstance(info.value.__cause__, ApplyError)


# --- run_steps -----------------------------------------------------------------------------------


def test_run_steps_journals_originals_then_writes(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    a, b = "devices/system/cpu/cpu0/cpuidle/state3/disable", "class/powercap/intel-rapl:a/enabled"
    acc = Acc({a: "0", b: "0"})
    steps = [dict(step(a, "1", "0", "A", cpu=0), control="cstates"), dict(step(b, "1", "0", "B"), control="power_cap")]
    pa.run_steps(acc, None, steps, store, {})
    assert acc.writes == [(a, "1"), (b, "1")]
    saved = StateStore(str(tmp_path / "state.json")).attributes
    assert saved == {
        a: {"control": "cstates", "cpu": 0, "label": "A", "original": "0", "seq": 1},
        b: {"control": "power_cap", "cpu": None, "label": "B", "original": "0", "seq": 2},
    }


def test_run_steps_without_a_store_only_writes():
    acc = Acc({"a": "1"})
    pa.run_steps(acc, None, [step("a", "2", "1")])
    assert acc.writes == [("a", "2")]


def test_run_steps_failure_rolls_back_writes_and_the_state_file(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore(str(path))
    snapshot = {"version": 1, "policies": {}}
    acc = Acc({"a": "1", "b": "5"}, clamp={"b": "4"})
    with pytest.raises(ApplyError) as info:
        pa.run_steps(acc, None, [step("a", "2", "1", "A"), step("b", "6", "5", "B")], store, snapshot)
    assert str(info.value) == (
        "/sys/b reads back '4' after writing '6' (B): the kernel clamped or refused the value silently; "
        "rolled back the 2 value(s) this run had changed, nothing else was touched"
    )
    assert acc.files == {"a": "1", "b": "5"}
    assert StateStore(str(path)).data == snapshot


def recorded_rollback(monkeypatch):
    calls = []

    def rollback(acc, topo, items, tolerance_khz, failed=None):
        calls.append((acc, topo, items, tolerance_khz))
        return 1, []

    monkeypatch.setattr(pa, "_rollback", rollback)
    return calls


def test_run_steps_failure_rolls_back_the_policies_changed_before(monkeypatch):
    calls = recorded_rollback(monkeypatch)
    acc = Acc({"a": "1"}, clamp={"a": "0"})
    with pytest.raises(ApplyError) as info:
        pa.run_steps(acc, "topo", [step("a", "2", "1", "A")], None, None, ("policy0",), 50000)
    assert calls == [(acc, "topo", ["policy0"], 50000)]
    assert str(info.value).endswith("; rolled back the 2 value(s) this run had changed, nothing else was touched")
    calls.clear()
    with pytest.raises(ApplyError):
        pa.run_steps(Acc({"a": "1"}, clamp={"a": "0"}), "topo", [step("a", "2", "1", "A")], pstate_items=["p"])
    assert calls[0][2:] == (["p"], 0)


def test_run_steps_unwritable_state_file_rolls_back_the_policies_changed_before(monkeypatch, tmp_path):
    calls = recorded_rollback(monkeypatch)
    (tmp_path / "not-a-dir").write_text("")
    store = StateStore(str(tmp_path / "not-a-dir" / "state.json"))
    acc = Acc({"a": "1"})
    with pytest.raises(ApplyError) as info:
        pa.run_steps(acc, "topo", [step("a", "2", "1")], store, {}, ("policy0",), 50000)
    assert calls == [(acc, "topo", ["policy0"], 50000)]
    assert str(info.value).endswith("; rolled back the 1 value(s) this run had changed, nothing else was touched")
    assert acc.writes == []


def test_run_steps_unwritable_state_file_changes_nothing(tmp_path):
    (tmp_path / "not-a-dir").write_text("")
    store = StateStore(str(tmp_path / "not-a-dir" / "state.json"))
    acc = Acc({"a": "1"})
    with pytest.raises(ApplyError) as info:
        pa.run_steps(acc, None, [step("a", "2", "1")], store, {})
    message = str(info.value)
    assert message.startswith(f"cannot write state file {tmp_path / 'not-a-dir' / 'state.json'}: ")
    assert message.endswith("; rolled back the 0 value(s) this run had changed, nothing else was touched")
    assert acc.writes == []


# --- _safe_range_order, plan_attribute_restore ---------------------------------------------------


def pair(current_max, target_max, current_min, target_min, min_first):
    high = step(f"{UNCORE}/max_freq_khz", target_max, current_max)
    low = step(f"{UNCORE}/min_freq_khz", target_min, current_min)
    return [low, high] if min_first else [high, low]


@pytest.mark.parametrize("min_first", [True, False])
def test_raising_a_range_writes_max_first(min_first):
    steps = pair("2000000", "3000000", "1000000", "2500000", min_first)
    assert [s["path"].rsplit("/", 1)[1] for s in pa._safe_range_order(steps)] == ["max_freq_khz", "min_freq_khz"]


@pytest.mark.parametrize("min_first", [True, False])
@pytest.mark.parametrize("current_max", ["3000000", "2000000", "unknown", None])
def test_lowering_or_keeping_a_range_writes_min_first(min_first, current_max):
    steps = pair(current_max, "2000000", "1500000", "800000", min_first)
    assert [s["path"].rsplit("/", 1)[1] for s in pa._safe_range_order(steps)] == ["min_freq_khz", "max_freq_khz"]


def test_safe_range_order_leaves_other_steps_and_lone_max_alone():
    other = step("a", "1", "2")
    lone = step("devices/x/max_freq_khz", "3000000", "2000000")
    low = step(f"{UNCORE}/min_freq_khz", "800000", "1500000")
    high = step(f"{UNCORE}/max_freq_khz", "2000000", "3000000")
    steps = [other, high, lone, low]
    assert pa._safe_range_order(steps) == [other, low, lone, high]


def test_a_lone_max_does_not_stop_the_ordering_of_a_later_pair():
    lone = step("devices/x/max_freq_khz", "3000000", "2000000")
    high, low = pair("2000000", "3000000", "1000000", "2500000", min_first=True)[::-1]
    assert pa._safe_range_order([lone, low, high]) == [lone, high, low]


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


# --- reports -------------------------------------------------------------------------------------


def test_control_summary():
    a, b, c = step("a", "2", "1", "A"), step("b", "3", "3", "B"), step("c", "9", "8", "C")
    a["after"] = "1999"
    plan = {"available": True, "writes": [a, b, c], "messages": ["note"]}
    assert pa._control_summary(plan, [c, a]) == {
        "available": True,
        "changed": ["A", "C"],
        "settings": [
            {"attribute": "A", "before": "1", "after": "1999"},
            {"attribute": "B", "before": "3", "after": "3"},
            {"attribute": "C", "before": "8", "after": "9"},
        ],
        "messages": ["note"],
    }


def test_steps_diff():
    a, b = step("a", "2", "1", "A"), step("b", "3", None, "B")
    a["after"] = "2000"
    assert pa._steps_diff([a, b]) == (["A: 1", "B: None"], ["A: 2000", "B: 3"])


class Topo:
    def __init__(self, driver="intel_pstate"):
        self.driver = driver


def policy_item(name, cpus, current, changes=(), target=None):
    return {
        "policy": {"name": name, "path": f"devices/system/cpu/cpufreq/{name}"},
        "cpus": cpus,
        "current": current,
        "changes": dict.fromkeys(changes, None),
        "target": target or {},
    }


HEADER = " cpu policy      min_mhz  max_mhz governor     epp"


def test_diff_table_one_line_per_cpu_sorted_with_names_and_dashes():
    p1 = policy_item(
        "policy2",
        [3, 2],
        {
            "scaling_min_freq": "800000",
            "scaling_max_freq": "3500999",
            "scaling_governor": "powersave",
            "energy_performance_preference": "balance_performance",
        },
        ["scaling_max_freq"],
    )
    p0 = policy_item("policy0", [0], {"scaling_min_freq": "x"})
    results = [
        {
            "item": p1,
            "after": {**p1["current"], "scaling_max_freq": "2000000", "energy_performance_preference": "power"},
            "other": {},
        },
        {
            "item": p0,
            "after": {"scaling_governor": "performance", "energy_performance_preference": " power "},
            "other": {},
        },
    ]
    assert pa.diff_table(Topo(), results) == {
        "before": "\n".join(
            [
                HEADER,
                "   0 policy0        None     None -            -",
                "   2 policy2         800     3500 powersave    balance_performance",
                "   3 policy2         800     3500 powersave    balance_performance",
            ]
        )
        + "\n",
        "after": "\n".join(
            [
                HEADER,
                "   0 policy0        None     None performance  power",
                "   2 policy2         800     2000 powersave    power",
                "   3 policy2         800     2000 powersave    power",
            ]
        )
        + "\n",
    }
    other = pa.diff_table(Topo("acpi-cpufreq"), results, after_key="other")
    assert other["after"].splitlines()[1] == "   0 policy0        None     None -            -"
    assert other["before"].splitlines()[2] == "   2 policy2         800     3500 powersave    balance_performance"


def test_diff_table_without_results_is_the_header():
    assert pa.diff_table(Topo(), []) == {"before": HEADER + "\n", "after": HEADER + "\n"}


def test_summarize():
    item = policy_item(
        "policy0",
        [0, 1, 2],
        {
            "scaling_min_freq": "800000",
            "scaling_max_freq": "3000000",
            "scaling_governor": "powersave",
            "energy_performance_preference": "performance",
        },
        ["scaling_max_freq", "energy_performance_preference"],
    )
    after = {
        "scaling_min_freq": "800000",
        "scaling_max_freq": "2000000",
        "scaling_governor": "powersave",
        "energy_performance_preference": "power",
    }
    bare = policy_item("policy3", [3], {})
    assert pa.summarize(Topo(), [{"item": item, "after": after}, {"item": bare, "after": {}}]) == [
        {
            "policy": "policy0",
            "cpus": "0-2",
            "changed": ["energy_performance_preference", "scaling_max_freq"],
            "before": {"min_mhz": 800, "max_mhz": 3000, "governor": "powersave", "epp": "performance"},
            "after": {"min_mhz": 800, "max_mhz": 2000, "governor": "powersave", "epp": "power"},
        },
        {
            "policy": "policy3",
            "cpus": "3",
            "changed": [],
            "before": {"min_mhz": None, "max_mhz": None, "governor": None, "epp": None},
            "after": {"min_mhz": None, "max_mhz": None, "governor": None, "epp": None},
        },
    ]


def test_mhz():
    assert pa.mhz("2400999") == 2400
    assert pa.mhz(None) is None
    assert pa.mhz("n/a") is None


def test_combined_diff():
    item = policy_item("policy0", [0], {"scaling_max_freq": "3000000", "energy_performance_preference": "power"})
    results = [
        {"item": item, "after": {"scaling_max_freq": "2000000", "energy_performance_preference": "balance_performance"}}
    ]
    a = step("a", "2", "1", "A")
    table = pa.diff_table(Topo(), results)
    assert table["after"].splitlines()[1] == "   0 policy0        None     2000 -            balance_performance"
    assert pa._combined_diff(Topo(), results, []) == table
    assert pa._combined_diff(Topo(), [], []) == {"before": "", "after": ""}
    assert pa._combined_diff(Topo(), [], [a]) == {"before": "A: 1\n", "after": "A: 2\n"}
    assert pa._combined_diff(Topo(), results, [a, step("b", "4", "3", "B")]) == {
        "before": table["before"] + "A: 1\nB: 3\n",
        "after": table["after"] + "A: 2\nB: 4\n",
    }


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


CPU = "devices/system/cpu"
P0 = f"{CPU}/cpufreq/policy0"
P2 = f"{CPU}/cpufreq/policy2"
MIN, MAX, GOV, EPP = "scaling_min_freq", "scaling_max_freq", "scaling_governor", "energy_performance_preference"
UNC = f"{CPU}/intel_uncore_frequency/package_00_die_00"


class Sysfs(MemorySysfs):
    """MemorySysfs whose n-th write of a path fails (``fail``: {path: {n: exception}}), after ``hook``."""

    def __init__(self, base, fail=None, hook=None):
        super().__init__(base.files, base.links)
        self.fail = fail or {}
        self.hook = hook
        self.count = {}

    def write(self, rel, value):
        self.count[rel] = self.count.get(rel, 0) + 1
        exc = self.fail.get(rel, {}).get(self.count[rel])
        if exc is not None:
            if self.hook is not None:
                self.hook()
            raise exc
        super().write(rel, value)


def cstate_files(cpus=(0, 1, 2, 3), disabled=()):
    files = {f"{CPU}/cpuidle/current_driver": "intel_idle", f"{CPU}/cpuidle/current_governor": "menu"}
    for cpu in cpus:
        for k, (name, latency) in enumerate((("POLL", 0), ("C1", 2), ("C6", 170))):
            rel = f"{CPU}/cpu{cpu}/cpuidle/state{k}"
            files.update(
                {
                    f"{rel}/name": name,
                    f"{rel}/desc": f"{name} idle",
                    f"{rel}/latency": latency,
                    f"{rel}/residency": latency * 3,
                    f"{rel}/disable": "1" if (cpu, name) in disabled else "0",
                }
            )
    return files


UNCORE_FILES = {
    f"{UNC}/min_freq_khz": "800000",
    f"{UNC}/max_freq_khz": "2400000",
    f"{UNC}/initial_min_freq_khz": "800000",
    f"{UNC}/initial_max_freq_khz": "2400000",
    f"{UNC}/current_freq_khz": "1800000",
}


def node(online=None, extra=None, values0=None, values2=None, epp="balance_performance", **kw):
    """policy0: CPUs 0-1, policy2: CPUs 2-3; 800-3900 MHz, current 800-3900, powersave, EPP."""
    return Sysfs(
        machine(
            online=online,
            policies=[
                ("policy0", [0, 1], {"epp": epp, "values": values0}),
                ("policy2", [2, 3], {"epp": epp, "values": values2}),
            ],
            extra=extra,
        ),
        **kw,
    )


def state_file(tmp_path):
    return str(tmp_path / "state" / "cpu_power_state.json")


def text(path):
    with open(path) as handle:
        return handle.read()


STATE_MAX_EPP = """{
  "policies": {
    "policy0": {
      "cpus": "0-1",
      "order": [
        "scaling_max_freq",
        "energy_performance_preference"
      ],
      "original": {
        "energy_performance_preference": "balance_performance",
        "scaling_max_freq": "3900000"
      },
      "path": "devices/system/cpu/cpufreq/policy0"
    },
    "policy2": {
      "cpus": "2-3",
      "order": [
        "scaling_max_freq",
        "energy_performance_preference"
      ],
      "original": {
        "energy_performance_preference": "balance_performance",
        "scaling_max_freq": "3900000"
      },
      "path": "devices/system/cpu/cpufreq/policy2"
    }
  },
  "version": 1
}
"""

EMPTY_STATE = '{\n  "policies": {},\n  "version": 1\n}\n'


# --- _write_policy -------------------------------------------------------------------------------


def planned(acc, **request):
    topo = Topology(acc)
    return topo, plan_present(topo, Request(**request))


def test_write_policy_writes_in_safe_order_reads_every_target_back_and_journals():
    acc = node(values0={MIN: "800000", MAX: "2000000"})
    acc.clamp[f"{P0}/{MIN}"] = "2550000"
    topo, plan = planned(acc, cpus="0-1", min_mhz=2500, max_mhz=3000, governor="powersave")
    item = plan["policies"][0]
    assert item["changes"] == {MIN: "2500000", MAX: "3000000"}
    journal = []
    acc.reads.clear()
    readback = pa._write_policy(acc, topo, item, journal, 100000)
    # raising: max first; the unchanged governor is read back too, nothing is written to it
    assert acc.writes == [(f"{P0}/{MAX}", "3000000"), (f"{P0}/{MIN}", "2500000")]
    assert journal == [(item, MAX), (item, MIN)]
    assert acc.reads == [f"{P0}/{MIN}", f"{P0}/{MAX}", f"{P0}/{GOV}"]
    assert readback == {MIN: "2550000", MAX: "3000000", GOV: "powersave"}
    assert topo.policies["policy0"]["values"] == {
        MIN: "2550000",
        MAX: "3000000",
        GOV: "powersave",
        EPP: "balance_performance",
    }
    assert item["current"] == {MIN: "800000", MAX: "2000000", GOV: "powersave", EPP: "balance_performance"}


def test_write_policy_lowering_writes_min_first():
    acc = node(values0={MIN: "2000000", MAX: "3000000"})
    topo, plan = planned(acc, cpus="0-1", min_mhz=1000, max_mhz=1500)
    pa._write_policy(acc, topo, plan["policies"][0], [], 100000)
    assert acc.writes == [(f"{P0}/{MIN}", "1000000"), (f"{P0}/{MAX}", "1500000")]


def test_write_policy_orders_by_the_policys_values_not_the_items_current():
    # the item's current says max 3900000, the policy's live values 1000000: raising, so max first
    acc = node()
    topo, plan = planned(acc, cpus="0-1", min_mhz=1500, max_mhz=2000)
    item = plan["policies"][0]
    topo.policies["policy0"]["values"][MAX] = "1000000"
    pa._write_policy(acc, topo, item, [], 100000)
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{P0}/{MIN}", "1500000")]


def test_write_policy_failed_write_names_value_path_and_cpus():
    acc = node(fail={f"{P0}/{EPP}": {1: eacces()}})
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000, epp="power")
    journal = []
    with pytest.raises(ApplyError) as info:
        pa._write_policy(acc, topo, plan["policies"][0], journal, 100000)
    assert str(info.value) == (f"writing 'power' to /sys/{P0}/{EPP} (CPU 0-1) failed: EACCES: Permission denied")
    assert isinstance(info.value.__cause__, PermissionError)
    assert journal == [(plan["policies"][0], MAX)]
    assert topo.policies["policy0"]["values"][MAX] == "3900000"


def test_write_policy_failed_read_back():
    acc = node()
    acc.read_errors[f"{P0}/{GOV}"] = eio()
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    topo.policies["policy0"]["values"][GOV] = "powersave"
    plan["policies"][0]["target"][GOV] = "powersave"
    with pytest.raises(ApplyError) as info:
        pa._write_policy(acc, topo, plan["policies"][0], [], 100000)
    assert str(info.value) == f"reading back /sys/{P0}/{GOV} failed: EIO: Input/output error"
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize(
    ("clamped", "ok"), [("2100000", True), ("1900000", True), ("2100001", False), ("1899999", False)]
)
def test_write_policy_read_back_within_the_tolerance(clamped, ok):
    acc = node()
    acc.clamp[f"{P0}/{MAX}"] = clamped
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000)
    if ok:
        assert pa._write_policy(acc, topo, plan["policies"][0], [], 100000) == {MAX: clamped}
        return
    with pytest.raises(ApplyError) as info:
        pa._write_policy(acc, topo, plan["policies"][0], [], 100000)
    assert str(info.value) == (
        f"/sys/{P0}/{MAX} reads back '{clamped}' after writing '2000000' (CPU 0-1): "
        "the kernel clamped or refused the value silently"
    )


def test_write_policy_epp_number_read_back_as_the_cpus_name_for_it():
    # a register value written reads back as the name this CPU model gives it (the kernel's own mapping)
    acc = node()
    acc.clamp[f"{P0}/{EPP}"] = "balance_power"
    topo, plan = planned(acc, cpus="0-1", epp="192")
    assert pa._write_policy(acc, topo, plan["policies"][0], [], 0) == {EPP: "balance_power"}


def test_write_policy_epp_name_read_back_as_a_number_is_refused():
    # a number is a value with no name on this CPU: the name written did not hold
    acc = node()
    acc.clamp[f"{P0}/{EPP}"] = "255"
    topo, plan = planned(acc, cpus="0-1", epp="power")
    with pytest.raises(ApplyError) as info:
        pa._write_policy(acc, topo, plan["policies"][0], [], 0)
    assert "reads back '255' after writing 'power'" in str(info.value)


# --- _rollback -----------------------------------------------------------------------------------


def rollback_item(acc, name, current, changes):
    topo = Topology(acc)
    pol = topo.policies[name]
    return topo, {"policy": pol, "cpus": [], "current": current, "target": dict(changes), "changes": dict(changes)}


def test_rollback_writes_the_originals_back_newest_first_in_safe_order():
    acc = node(values0={MIN: "2500000", MAX: "3000000"}, values2={MAX: "2000000", GOV: "performance"})
    topo, first = rollback_item(acc, "policy0", {MIN: "800000", MAX: "2000000"}, {MIN: "2500000", MAX: "3000000"})
    _topo, second = rollback_item(
        acc, "policy2", {MAX: "3900000", GOV: "powersave"}, {MAX: "2000000", GOV: "performance"}
    )
    assert pa._rollback(acc, topo, [first, second], 100000) == (4, [])
    assert acc.writes == [
        (f"{P2}/{MAX}", "3900000"),
        (f"{P2}/{GOV}", "powersave"),
        (f"{P0}/{MIN}", "800000"),  # lowering back: min first
        (f"{P0}/{MAX}", "2000000"),
    ]


def test_rollback_skips_values_already_back_within_the_tolerance_and_unknown_originals():
    acc = node(values0={MAX: "2050000", GOV: "performance"})
    topo, item = rollback_item(
        acc, "policy0", {MAX: "2000000", GOV: None, EPP: "power"}, {MAX: "3000000", GOV: "performance", EPP: "power"}
    )
    assert pa._rollback(acc, topo, [item], 100000) == (1, [])
    assert acc.writes == [(f"{P0}/{EPP}", "power")]
    acc.writes.clear()
    assert pa._rollback(acc, topo, [item], 0) == (1, [])
    assert acc.writes == [(f"{P0}/{MAX}", "2000000")]


def test_rollback_reads_only_the_attributes_of_the_items_current():
    acc = node(values0={MAX: "2000000"})
    topo, item = rollback_item(acc, "policy0", {MAX: "3900000"}, {MAX: "2000000"})
    acc.reads.clear()
    assert pa._rollback(acc, topo, [item], 100000) == (1, [])
    assert acc.reads == [f"{P0}/{MAX}"]
    assert acc.writes == [(f"{P0}/{MAX}", "3900000")]


def test_rollback_of_a_raised_min_orders_by_the_live_max():
    # live 2500-3000 MHz, originals 800-2000: lowering (live max 3000 > 2000), so min first;
    # without the live max the order would be max first, which the kernel refuses (max < min)
    acc = node(values0={MIN: "2500000", MAX: "3000000"})
    topo, item = rollback_item(acc, "policy0", {MIN: "800000", MAX: "2000000"}, {MIN: "2500000", MAX: "3000000"})
    pa._rollback(acc, topo, [item], 0)
    assert acc.writes == [(f"{P0}/{MIN}", "800000"), (f"{P0}/{MAX}", "2000000")]


def test_rollback_reports_each_failed_write_and_goes_on():
    acc = node(values0={MAX: "2000000", GOV: "performance"}, fail={f"{P0}/{MAX}": {1: eio()}})
    topo, item = rollback_item(acc, "policy0", {MAX: "3900000", GOV: "powersave"}, {MAX: "2000000", GOV: "performance"})
    assert pa._rollback(acc, topo, [item], 0) == (1, ["policy0/scaling_max_freq=3900000: EIO: Input/output error"])
    assert acc.writes == [(f"{P0}/{GOV}", "powersave")]


# --- execute -------------------------------------------------------------------------------------


def test_execute_journals_originals_then_writes_each_changed_policy(tmp_path):
    acc = node(values2={MAX: "2000000"})
    acc.clamp[f"{P0}/{MAX}"] = "1950000"
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, epp="power")
    path = state_file(tmp_path)
    store = StateStore(path)
    changed, results = pa.execute(acc, topo, plan, store=store)
    assert changed is True
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{P0}/{EPP}", "power"), (f"{P2}/{EPP}", "power")]
    assert [r["item"] for r in results] == plan["policies"]
    assert results[0]["after"] == {MIN: "800000", MAX: "1950000", GOV: "powersave", EPP: "power"}
    assert results[1]["after"] == {MIN: "800000", MAX: "2000000", GOV: "powersave", EPP: "power"}
    assert text(path) == (
        '{\n  "policies": {\n    "policy0": {\n      "cpus": "0-1",\n      "order": [\n        "scaling_max_freq",\n'
        '        "energy_performance_preference"\n      ],\n      "original": {\n        "energy_performance_preference": '
        '"balance_performance",\n        "scaling_max_freq": "3900000"\n      },\n      "path": "devices/system/cpu/cpufreq/policy0"\n'
        '    },\n    "policy2": {\n      "cpus": "2-3",\n      "order": [\n        "energy_performance_preference"\n      ],\n'
        '      "original": {\n        "energy_performance_preference": "balance_performance"\n      },\n'
        '      "path": "devices/system/cpu/cpufreq/policy2"\n    }\n  },\n  "version": 1\n}\n'
    )


def test_execute_does_not_overwrite_a_recorded_original(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, epp="power")
    pa.execute(acc, topo, plan, store=StateStore(path))
    assert text(path) == STATE_MAX_EPP
    topo, plan = planned(acc, cpus="0-3", max_mhz=1500, epp="balance_power")
    before = os.stat(path).st_mtime_ns
    os.utime(path, ns=(0, 0))
    assert pa.execute(acc, topo, plan, store=StateStore(path))[0] is True
    assert text(path) == STATE_MAX_EPP
    assert os.stat(path).st_mtime_ns == 0 != before  # nothing new to record: not rewritten
    assert acc.files[f"{P2}/{MAX}"] == "1500000"


def test_execute_without_record_or_store_journals_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    store = StateStore(path)
    assert pa.execute(acc, topo, plan, store=store, record=False)[0] is True
    assert not os.path.exists(path) and store.policies == {}
    topo, plan = planned(acc, cpus="2-3", max_mhz=2000)
    assert pa.execute(acc, topo, plan)[0] is True
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{P2}/{MAX}", "2000000")]


def test_execute_in_check_mode_changes_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, governor="powersave")
    changed, results = pa.execute(acc, topo, plan, store=StateStore(path), check_mode=True)
    assert changed is True
    assert acc.writes == [] and not os.path.exists(path)
    assert [r["after"] for r in results] == [
        {MIN: "800000", MAX: "2000000", GOV: "powersave", EPP: "balance_performance"}
    ] * 2
    assert topo.policies["policy0"]["values"][MAX] == "3900000"


def test_execute_with_nothing_to_change(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-3", max_mhz=3900)
    changed, results = pa.execute(acc, topo, plan, store=StateStore(path))
    assert changed is False
    assert acc.writes == [] and not os.path.exists(path)
    assert [r["after"][MAX] for r in results] == ["3900000", "3900000"]


def test_execute_unwritable_state_file_changes_nothing(tmp_path):
    (tmp_path / "state").write_text("")
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    with pytest.raises(ApplyError) as info:
        pa.execute(acc, topo, plan, store=StateStore(path))
    assert (
        str(info.value)
        == f"cannot write state file {path}: [Errno 17] File exists: '{tmp_path / 'state'}'; nothing was changed"
    )
    assert isinstance(info.value.__cause__, OSError)
    assert acc.writes == []


def test_execute_failure_rolls_back_every_policy_and_the_state_file(tmp_path):
    path = state_file(tmp_path)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write(EMPTY_STATE)
    acc = node(fail={f"{P2}/{EPP}": {1: eacces()}})
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, epp="power")
    with pytest.raises(ApplyError) as info:
        pa.execute(acc, topo, plan, store=StateStore(path))
    assert str(info.value) == (
        f"writing 'power' to /sys/{P2}/{EPP} (CPU 2-3) failed: EACCES: Permission denied; "
        "rolled back the 3 value(s) this run had changed, nothing else was touched"
    )
    assert isinstance(info.value.__cause__, ApplyError)
    assert acc.writes[3:] == [
        (f"{P2}/{MAX}", "3900000"),
        (f"{P0}/{MAX}", "3900000"),
        (f"{P0}/{EPP}", "balance_performance"),
    ]
    assert [acc.files[f"{p}/{a}"] for p in (P0, P2) for a in (MAX, EPP)] == ["3900000", "balance_performance"] * 2
    assert text(path) == EMPTY_STATE


def test_execute_failure_without_a_store_rolls_back_the_writes():
    acc = node()
    acc.clamp[f"{P2}/{MAX}"] = "1000000"
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000)
    with pytest.raises(ApplyError) as info:
        pa.execute(acc, topo, plan)
    assert str(info.value) == (
        f"/sys/{P2}/{MAX} reads back '1000000' after writing '2000000' (CPU 2-3): the kernel clamped or refused "
        "the value silently; rolled back the 2 value(s) this run had changed, nothing else was touched"
    )
    assert acc.files[f"{P0}/{MAX}"] == acc.files[f"{P2}/{MAX}"] == "3900000"


def test_execute_failure_whose_rollback_fails_says_what_to_check(tmp_path):
    path = state_file(tmp_path)

    def lose_the_state_directory():
        os.remove(path)
        os.rmdir(os.path.dirname(path))
        with open(os.path.dirname(path), "w") as handle:
            handle.write("")

    acc = node(
        fail={f"{P2}/{MAX}": {1: eacces()}, f"{P0}/{MAX}": {2: eio()}},
        hook=lambda: os.path.exists(path) and lose_the_state_directory(),
    )
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000)
    with pytest.raises(ApplyError) as info:
        pa.execute(acc, topo, plan, store=StateStore(path))
    assert str(info.value) == (
        f"writing '2000000' to /sys/{P2}/{MAX} (CPU 2-3) failed: EACCES: Permission denied; rollback FAILED for: "
        f"policy0/scaling_max_freq=3900000: EIO: Input/output error; state file {path}: [Errno 17] File exists: "
        f"'{tmp_path / 'state'}' - check these attributes by hand"
    )
    assert isinstance(info.value.__cause__, ApplyError)


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


# --- plan_controls, _validate_all ----------------------------------------------------------------


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
        pa._validate_all(acc, topo, Request(cpus="0-7", max_mhz=2000), {"uncore": {"max_khz": 1}, "cstates": None}, 100)
    # the P-state plan is not made for a refused CPU list (its problem would be listed twice)
    assert str(info.value) == (
        "CPU 4-7 is not present on this machine (present: 0-3); remove it from cpus; uncore.max_khz=1 is not a "
        "multiple of 100000 kHz: the uncore ratio is set in 100 MHz steps and it would be ratio 0, which the kernel "
        "refuses; use 100000"
    )
    with pytest.raises(ValidationError) as info:
        pa._validate_all(acc, topo, Request(cpus="0-1", max_mhz=9000), {"uncore": {"bogus": 1}}, 100)
    assert str(info.value) == (
        "max_mhz=9000 MHz is outside CPU 0's limits 800-3900 MHz (policy0, cpuinfo_min_freq/cpuinfo_max_freq); "
        "use a value in that range or 'min'/'max'; uncore has unknown key(s) bogus; allowed: min_khz, max_khz, "
        "min_pct, max_pct, packages; uncore is empty: give min_khz/max_khz (kHz) or min_pct/max_pct (0-100)"
    )


def test_validate_all_returns_the_plans():
    acc = node(online="0-2", extra=UNCORE_FILES)
    topo = Topology(acc)
    online, skipped, pstate, plans = pa._validate_all(
        acc, topo, Request(cpus="1-3"), {"uncore": {"max_khz": 2000000}}, 100
    )
    assert (online, skipped, pstate) == ([1, 2], [3], None)
    assert [p["control"] for p in plans] == ["uncore"]
    with pytest.raises(ValidationError) as info:
        pa._validate_all(acc, topo, Request(cpus="1-3", max_mhz=2000), {}, 100)
    assert str(info.value).startswith("CPU 1 shares cpufreq policy policy0 with CPU 0")
    online, skipped, pstate, plans = pa._validate_all(acc, topo, Request(cpus="2-3", max_mhz=2050), {}, 50)
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


# --- found by the mutation run of this file ------------------------------------------------------


def test_rollback_compares_epp_as_the_kernel_shows_it():
    # already the original as the kernel showed it: nothing to write
    acc = node(epp="power")
    topo, item = rollback_item(acc, "policy0", {EPP: "power"}, {EPP: "balance_power"})
    assert pa._rollback(acc, topo, [item], 0) == (0, [])
    assert acc.writes == []
    # a number is not a name (no table says 128 is balance_performance on this CPU): written back
    acc = node(epp="128")
    topo, item = rollback_item(acc, "policy0", {EPP: "balance_performance"}, {EPP: "power"})
    assert pa._rollback(acc, topo, [item], 0) == (1, [])
    assert acc.writes == [(f"{P0}/{EPP}", "balance_performance")]


def test_execute_failure_with_nothing_journaled_leaves_the_state_file_alone(tmp_path):
    path = state_file(tmp_path)
    acc = node(fail={f"{P0}/{MAX}": {1: eio()}})
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    with pytest.raises(ApplyError):
        pa.execute(acc, topo, plan, store=StateStore(path), record=False)
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
# - step_equal, `want // 4 + 1000` -> `want / 4 + 1000`: the difference of two integers is an
#   integer, and an integer is <= x + 1000 exactly when it is <= floor(x) + 1000.
# - diff_table, `sorted(rows, key=lambda r: r[0])` -> `sorted(rows)` / `key=None`: a CPU belongs to
#   one cpufreq policy, so no two rows share a CPU and the tuple order is the CPU order.
# - summarize, `normalize_epp(...) if values.get(EPP) is not None` -> `or True`: normalize_epp
#   returns None for None, as the else branch does.
# - _safe_range_order, `(i > j) == raising` -> `(i >= j) == raising`: i == j would need the max and
#   the min step to be the same step (their paths differ).
# - run_steps, `snapshot` -> None in the unwritable-state-file call: that call passes store=None,
#   and _fail_and_roll_back reads the snapshot only with a store.
# - restore_profile 24 and restore_controls 33, `execute(..., store=None, ...)` -> the argument left
#   out: None is execute's default for store.
# - apply_controls 74, `pstate["tolerance_khz"] if pstate else 0` -> `else 1`: without a P-state plan
#   there are no policies to roll back, and the tolerance is used only to judge those.
# - apply_controls 96 and 103, `pstate["managed"] if pstate else online` (and `skipped_offline` /
#   `skipped`) -> always `online` / `skipped`: plan_present takes both lists from the same
#   resolve_cpus(topo, request) call _validate_all made, so they are equal.
# - gather_info 5 and 7, `gather_cpufreq_info(acc, topo)` -> `(acc, None)` / `(acc)`: it then builds
#   Topology(acc) itself from the same files; the facts are the same.
