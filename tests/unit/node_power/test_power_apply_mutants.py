# ruff: noqa: E501 - exact, long messages
"""_power_apply's single-attribute steps, restore planning and reports, checked directly.

Written against mutmut's mutants (docs/development.md, "Mutation testing"): the module tests of
tests/unit/node_power reach these helpers only through whole fake machines (two minutes for the
four files), too slow to run once per mutant. Here each helper gets a small in-memory accessor:
the read-back rules (exact, power limit within a tolerance, time windows within a quarter), the
write/read-back/clamp messages with their hints, rollback newest first and its failure report, the
state file's journal, the safe order of an uncore min/max pair, which recorded originals a restore
takes, and the reports (summary, diff tables, power source).
"""

from __future__ import annotations

import errno

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import StateStore
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import ApplyError
from memory_sysfs import MemorySysfs, eacces, eio

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


# Mutants left alive on purpose (same observable behaviour), from the mutation run of this file:
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
