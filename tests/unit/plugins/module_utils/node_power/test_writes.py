# ruff: noqa: E501 - exact, long messages
"""writes: the stage that writes. Each single-attribute step and each cpufreq policy is written in its
safe order and read back by its rule (exact, a power limit within a tolerance, a time window within a
quarter); a failed write or a silent clamp names the value, the path and the hint; rollback writes
the originals back newest first and reports what it could not; the state file journals the originals
before the first write and returns to its earlier content on failure. A small machine in memory
(power_machine.py) takes the writes; each test states what is written in which order and what the
state file holds afterwards, byte for byte.
"""

from __future__ import annotations

import errno
import os

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import writes
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import StateStore
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    ApplyError,
)
from memory_sysfs import eacces, eio
from power_machine import (
    EMPTY_STATE,
    EPP,
    GOV,
    LIMIT,
    MAX,
    MIN,
    P0,
    P2,
    STATE_MAX_EPP,
    UNCORE,
    WINDOW,
    Acc,
    node,
    planned,
    rollback_item,
    state_file,
    step,
    text,
)

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
    assert writes.compare_mode(path) == mode


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
    assert writes.step_equal(step(f"{UNCORE}/max_freq_khz", target), value) is equal


@pytest.mark.parametrize(
    ("value", "equal"),
    [("150000000", True), ("151000000", True), ("149000000", True), ("151000001", False), ("148999999", False)],
)
def test_step_equal_power_limit_within_the_default_tolerance(value, equal):
    assert writes.POWER_TOLERANCE_UW == 1000000
    assert writes.step_equal(step(LIMIT, "150000000"), value) is equal


@pytest.mark.parametrize(("value", "equal"), [("105", True), ("95", True), ("106", False), ("94", False)])
def test_step_equal_power_limit_with_the_steps_tolerance(value, equal):
    assert writes.step_equal(step(LIMIT, "100", tolerance=5), value) is equal


@pytest.mark.parametrize(
    ("value", "equal"),
    [("8000", True), ("11000", True), ("5000", True), ("11001", False), ("4999", False), ("abc", False)],
)
def test_step_equal_time_window_within_a_quarter_and_a_millisecond(value, equal):
    assert writes.step_equal(step(WINDOW, "8000"), value) is equal


def test_step_equal_time_window_small_values():
    # want // 4 + 1000 with want 3: 1000 either side
    assert writes.step_equal(step(WINDOW, "3"), "1003") is True
    assert writes.step_equal(step(WINDOW, "3"), "1004") is False


def test_step_equal_non_numbers_compare_exactly_in_every_mode():
    assert writes.step_equal(step(LIMIT, "-5"), "-5") is True
    assert writes.step_equal(step(LIMIT, "-5"), "-4") is False
    assert writes.step_equal(step(LIMIT, "5"), "5.0") is False
    assert writes.step_equal(step(WINDOW, "x"), "x") is True


def test_step_equal_the_steps_compare_wins_over_the_path():
    assert writes.step_equal(step(LIMIT, "100", compare="exact"), "101") is False
    assert writes.step_equal(step("plain", "100", compare="tolerance"), "1000100") is True
    assert writes.step_equal(step("plain", "8000", compare="time_window"), "11000") is True


def test_step_equal_a_missing_value_equals_only_a_missing_target():
    assert writes.step_equal(step("a", "None"), None) is False
    assert writes.step_equal(step("a", None), "None") is False


def test_step_equal_an_explicit_target_replaces_the_steps():
    s = step(f"{UNCORE}/max_freq_khz", "100", current="200")
    assert writes.step_equal(s, "200", s["current"]) is True
    assert writes.step_equal(s, "100", "200") is False
    assert writes.step_equal(s, "100", None) is True


# --- write_steps ---------------------------------------------------------------------------------


def test_write_steps_writes_reads_back_and_journals():
    acc = Acc({LIMIT: "100000000", "a": "1"}, clamp={LIMIT: "149875000"})
    steps = [step(LIMIT, "150000000", "100000000", "power limit"), step("a", "2", "1", "a")]
    journal = []
    writes.write_steps(acc, steps, journal)
    assert acc.writes == [(LIMIT, "150000000"), ("a", "2")]
    assert journal == steps
    assert [s["after"] for s in steps] == ["149875000", "2"]


def test_write_steps_failed_write_names_value_path_label_and_hint():
    acc = Acc({LIMIT: "1"}, write_errors={LIMIT: eacces()})
    s = step(LIMIT, "150000000", "1", "package-0 long-term limit", hints={errno.EACCES: "locked by the BIOS"})
    journal = []
    with pytest.raises(ApplyError) as info:
        writes.write_steps(acc, [s, step("b", "1")], journal)
    assert str(info.value) == (
        f"writing '150000000' to /sys/{LIMIT} (package-0 long-term limit) failed: EACCES: Permission denied - locked by the BIOS"
    )
    assert journal == [] and acc.writes == [] and "after" not in s


def test_write_steps_failed_write_without_a_hint_for_its_errno():
    acc = Acc({"a": "1"}, write_errors={"a": eio()})
    with pytest.raises(ApplyError) as info:
        writes.write_steps(acc, [step("a", "2", "1", "uncore max", hints={errno.EACCES: "locked"})], [])
    assert str(info.value) == "writing '2' to /sys/a (uncore max) failed: EIO: Input/output error"


def test_write_steps_failed_write_of_a_step_without_hints():
    acc = Acc({"a": "1"}, write_errors={"a": eacces()})
    with pytest.raises(ApplyError) as info:
        writes.write_steps(acc, [step("a", "2", "1", "cpu0 C6")], [])
    assert str(info.value) == "writing '2' to /sys/a (cpu0 C6) failed: EACCES: Permission denied"


def test_write_steps_failed_read_back_keeps_the_write_in_the_journal():
    acc = Acc({"a": "1"}, read_errors={"a": eio()})
    s = step("a", "2", "1", "uncore max")
    journal = []
    with pytest.raises(ApplyError) as info:
        writes.write_steps(acc, [s], journal)
    assert str(info.value) == "reading back /sys/a failed: EIO: Input/output error"
    assert journal == [s]


def test_write_steps_silent_clamp_is_an_error_and_stops():
    acc = Acc({"a": "1", "b": "1"}, clamp={"a": "5"})
    s = step("a", "10", "1", "uncore max")
    with pytest.raises(ApplyError) as info:
        writes.write_steps(acc, [s, step("b", "2", "1")], [])
    assert str(info.value) == (
        "/sys/a reads back '5' after writing '10' (uncore max): the kernel clamped or refused the value silently"
    )
    assert acc.writes == [("a", "10")]


# --- rollback_steps, fail_and_roll_back ----------------------------------------------------------


def test_rollback_steps_newest_first_skipping_unknown_and_unchanged():
    acc = Acc({"a": "2", "b": "2", "c": "1", "d": "9"})
    journal = [step("a", "2", "1"), step("b", "2", None), step("c", "2", "1"), step("d", "9", "3")]
    assert writes.rollback_steps(acc, journal) == (2, [])
    assert acc.writes == [("d", "3"), ("a", "1")]


def test_rollback_steps_reports_failed_writes_and_counts_the_rest():
    acc = Acc({"a": "2", "b": "2"}, write_errors={"b": eacces()})
    assert writes.rollback_steps(acc, [step("a", "2", "1"), step("b", "2", "1")]) == (
        1,
        ["b=1: EACCES: Permission denied"],
    )


def test_rollback_steps_of_a_gone_attribute_writes_the_original():
    acc = Acc({})
    assert writes.rollback_steps(acc, [step("a", "2", "1")]) == (1, [])
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

    monkeypatch.setattr(writes, "rollback_policies", rollback)
    acc = Acc({"a": "2"})
    store = Store({"new": 1})
    with pytest.raises(ApplyError) as info:
        writes.fail_and_roll_back(
            acc, "topo", ApplyError("boom"), [step("a", "2", "1")], ["item"], 50000, store, {"old": 1}
        )
    assert str(info.value) == "boom; rolled back the 4 value(s) this run had changed, nothing else was touched"
    assert calls == [(acc, "topo", ["item"], 50000)]
    assert store.restored == [{"old": 1}]


def test_fail_and_roll_back_without_policies_or_store_changes(monkeypatch):
    monkeypatch.setattr(writes, "rollback_policies", lambda *a: pytest.fail("no P-state items to roll back"))
    store = Store({"same": 1})
    with pytest.raises(ApplyError) as info:
        writes.fail_and_roll_back(
            Acc({"a": "1"}), None, ApplyError("boom"), [step("a", "2", "1")], [], 0, store, {"same": 1}
        )
    assert str(info.value) == "boom; rolled back the 0 value(s) this run had changed, nothing else was touched"
    assert store.restored == []


def test_fail_and_roll_back_reports_every_problem(monkeypatch):
    monkeypatch.setattr(
        writes, "rollback_policies", lambda *a: (0, ["policy0/scaling_max_freq=2000000: EIO: Input/output error"])
    )
    acc = Acc({"a": "2"}, write_errors={"a": eacces()})
    store = Store({"new": 1}, fail=True)
    with pytest.raises(ApplyError) as info:
        writes.fail_and_roll_back(acc, None, ApplyError("boom"), [step("a", "2", "1")], ["item"], 0, store, {"old": 1})
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
    writes.run_steps(acc, None, steps, store, {})
    assert acc.writes == [(a, "1"), (b, "1")]
    saved = StateStore(str(tmp_path / "state.json")).attributes
    assert saved == {
        a: {"control": "cstates", "cpu": 0, "label": "A", "original": "0", "seq": 1},
        b: {"control": "power_cap", "cpu": None, "label": "B", "original": "0", "seq": 2},
    }


def test_run_steps_without_a_store_only_writes():
    acc = Acc({"a": "1"})
    writes.run_steps(acc, None, [step("a", "2", "1")])
    assert acc.writes == [("a", "2")]


def test_run_steps_failure_rolls_back_writes_and_the_state_file(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore(str(path))
    snapshot = {"version": 1, "policies": {}}
    acc = Acc({"a": "1", "b": "5"}, clamp={"b": "4"})
    with pytest.raises(ApplyError) as info:
        writes.run_steps(acc, None, [step("a", "2", "1", "A"), step("b", "6", "5", "B")], store, snapshot)
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

    monkeypatch.setattr(writes, "rollback_policies", rollback)
    return calls


def test_run_steps_failure_rolls_back_the_policies_changed_before(monkeypatch):
    calls = recorded_rollback(monkeypatch)
    acc = Acc({"a": "1"}, clamp={"a": "0"})
    with pytest.raises(ApplyError) as info:
        writes.run_steps(acc, "topo", [step("a", "2", "1", "A")], None, None, ("policy0",), 50000)
    assert calls == [(acc, "topo", ["policy0"], 50000)]
    assert str(info.value).endswith("; rolled back the 2 value(s) this run had changed, nothing else was touched")
    calls.clear()
    with pytest.raises(ApplyError):
        writes.run_steps(Acc({"a": "1"}, clamp={"a": "0"}), "topo", [step("a", "2", "1", "A")], pstate_items=["p"])
    assert calls[0][2:] == (["p"], 0)


def test_run_steps_unwritable_state_file_rolls_back_the_policies_changed_before(monkeypatch, tmp_path):
    calls = recorded_rollback(monkeypatch)
    (tmp_path / "not-a-dir").write_text("")
    store = StateStore(str(tmp_path / "not-a-dir" / "state.json"))
    acc = Acc({"a": "1"})
    with pytest.raises(ApplyError) as info:
        writes.run_steps(acc, "topo", [step("a", "2", "1")], store, {}, ("policy0",), 50000)
    assert calls == [(acc, "topo", ["policy0"], 50000)]
    assert str(info.value).endswith("; rolled back the 1 value(s) this run had changed, nothing else was touched")
    assert acc.writes == []


def test_run_steps_unwritable_state_file_changes_nothing(tmp_path):
    (tmp_path / "not-a-dir").write_text("")
    store = StateStore(str(tmp_path / "not-a-dir" / "state.json"))
    acc = Acc({"a": "1"})
    with pytest.raises(ApplyError) as info:
        writes.run_steps(acc, None, [step("a", "2", "1")], store, {})
    message = str(info.value)
    assert message.startswith(f"cannot write state file {tmp_path / 'not-a-dir' / 'state.json'}: ")
    assert message.endswith("; rolled back the 0 value(s) this run had changed, nothing else was touched")
    assert acc.writes == []


# --- safe_range_order ----------------------------------------------------------------------------


def pair(current_max, target_max, current_min, target_min, min_first):
    high = step(f"{UNCORE}/max_freq_khz", target_max, current_max)
    low = step(f"{UNCORE}/min_freq_khz", target_min, current_min)
    return [low, high] if min_first else [high, low]


@pytest.mark.parametrize("min_first", [True, False])
def test_raising_a_range_writes_max_first(min_first):
    steps = pair("2000000", "3000000", "1000000", "2500000", min_first)
    assert [s["path"].rsplit("/", 1)[1] for s in writes.safe_range_order(steps)] == ["max_freq_khz", "min_freq_khz"]


@pytest.mark.parametrize("min_first", [True, False])
@pytest.mark.parametrize("current_max", ["3000000", "2000000", "unknown", None])
def test_lowering_or_keeping_a_range_writes_min_first(min_first, current_max):
    steps = pair(current_max, "2000000", "1500000", "800000", min_first)
    assert [s["path"].rsplit("/", 1)[1] for s in writes.safe_range_order(steps)] == ["min_freq_khz", "max_freq_khz"]


def test_safe_range_order_leaves_other_steps_and_lone_max_alone():
    other = step("a", "1", "2")
    lone = step("devices/x/max_freq_khz", "3000000", "2000000")
    low = step(f"{UNCORE}/min_freq_khz", "800000", "1500000")
    high = step(f"{UNCORE}/max_freq_khz", "2000000", "3000000")
    steps = [other, high, lone, low]
    assert writes.safe_range_order(steps) == [other, low, lone, high]


def test_a_lone_max_does_not_stop_the_ordering_of_a_later_pair():
    lone = step("devices/x/max_freq_khz", "3000000", "2000000")
    high, low = pair("2000000", "3000000", "1000000", "2500000", min_first=True)[::-1]
    assert writes.safe_range_order([lone, low, high]) == [lone, high, low]


# --- write_policy --------------------------------------------------------------------------------


def test_write_policy_writes_in_safe_order_reads_every_target_back_and_journals():
    acc = node(values0={MIN: "800000", MAX: "2000000"})
    acc.clamp[f"{P0}/{MIN}"] = "2550000"
    topo, plan = planned(acc, cpus="0-1", min_mhz=2500, max_mhz=3000, governor="powersave")
    item = plan["policies"][0]
    assert item["changes"] == {MIN: "2500000", MAX: "3000000"}
    journal = []
    acc.reads.clear()
    readback = writes.write_policy(acc, topo, item, journal, 100000)
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
    writes.write_policy(acc, topo, plan["policies"][0], [], 100000)
    assert acc.writes == [(f"{P0}/{MIN}", "1000000"), (f"{P0}/{MAX}", "1500000")]


def test_write_policy_orders_by_the_policys_values_not_the_items_current():
    # the item's current says max 3900000, the policy's live values 1000000: raising, so max first
    acc = node()
    topo, plan = planned(acc, cpus="0-1", min_mhz=1500, max_mhz=2000)
    item = plan["policies"][0]
    topo.policies["policy0"]["values"][MAX] = "1000000"
    writes.write_policy(acc, topo, item, [], 100000)
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{P0}/{MIN}", "1500000")]


def test_write_policy_failed_write_names_value_path_and_cpus():
    acc = node(fail={f"{P0}/{EPP}": {1: eacces()}})
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000, epp="power")
    journal = []
    with pytest.raises(ApplyError) as info:
        writes.write_policy(acc, topo, plan["policies"][0], journal, 100000)
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
        writes.write_policy(acc, topo, plan["policies"][0], [], 100000)
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
        assert writes.write_policy(acc, topo, plan["policies"][0], [], 100000) == {MAX: clamped}
        return
    with pytest.raises(ApplyError) as info:
        writes.write_policy(acc, topo, plan["policies"][0], [], 100000)
    assert str(info.value) == (
        f"/sys/{P0}/{MAX} reads back '{clamped}' after writing '2000000' (CPU 0-1): "
        "the kernel clamped or refused the value silently"
    )


def test_write_policy_epp_number_read_back_as_the_cpus_name_for_it():
    # a register value written reads back as the name this CPU model gives it (the kernel's own mapping)
    acc = node()
    acc.clamp[f"{P0}/{EPP}"] = "balance_power"
    topo, plan = planned(acc, cpus="0-1", epp="192")
    assert writes.write_policy(acc, topo, plan["policies"][0], [], 0) == {EPP: "balance_power"}


def test_write_policy_epp_name_read_back_as_a_number_is_refused():
    # a number is a value with no name on this CPU: the name written did not hold
    acc = node()
    acc.clamp[f"{P0}/{EPP}"] = "255"
    topo, plan = planned(acc, cpus="0-1", epp="power")
    with pytest.raises(ApplyError) as info:
        writes.write_policy(acc, topo, plan["policies"][0], [], 0)
    assert "reads back '255' after writing 'power'" in str(info.value)


# --- rollback_policies ---------------------------------------------------------------------------


def test_rollback_writes_the_originals_back_newest_first_in_safe_order():
    acc = node(values0={MIN: "2500000", MAX: "3000000"}, values2={MAX: "2000000", GOV: "performance"})
    topo, first = rollback_item(acc, "policy0", {MIN: "800000", MAX: "2000000"}, {MIN: "2500000", MAX: "3000000"})
    _topo, second = rollback_item(
        acc, "policy2", {MAX: "3900000", GOV: "powersave"}, {MAX: "2000000", GOV: "performance"}
    )
    assert writes.rollback_policies(acc, topo, [first, second], 100000) == (4, [])
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
    assert writes.rollback_policies(acc, topo, [item], 100000) == (1, [])
    assert acc.writes == [(f"{P0}/{EPP}", "power")]
    acc.writes.clear()
    assert writes.rollback_policies(acc, topo, [item], 0) == (1, [])
    assert acc.writes == [(f"{P0}/{MAX}", "2000000")]


def test_rollback_reads_only_the_attributes_of_the_items_current():
    acc = node(values0={MAX: "2000000"})
    topo, item = rollback_item(acc, "policy0", {MAX: "3900000"}, {MAX: "2000000"})
    acc.reads.clear()
    assert writes.rollback_policies(acc, topo, [item], 100000) == (1, [])
    assert acc.reads == [f"{P0}/{MAX}"]
    assert acc.writes == [(f"{P0}/{MAX}", "3900000")]


def test_rollback_of_a_raised_min_orders_by_the_live_max():
    # live 2500-3000 MHz, originals 800-2000: lowering (live max 3000 > 2000), so min first;
    # without the live max the order would be max first, which the kernel refuses (max < min)
    acc = node(values0={MIN: "2500000", MAX: "3000000"})
    topo, item = rollback_item(acc, "policy0", {MIN: "800000", MAX: "2000000"}, {MIN: "2500000", MAX: "3000000"})
    writes.rollback_policies(acc, topo, [item], 0)
    assert acc.writes == [(f"{P0}/{MIN}", "800000"), (f"{P0}/{MAX}", "2000000")]


def test_rollback_reports_each_failed_write_and_goes_on():
    acc = node(values0={MAX: "2000000", GOV: "performance"}, fail={f"{P0}/{MAX}": {1: eio()}})
    topo, item = rollback_item(acc, "policy0", {MAX: "3900000", GOV: "powersave"}, {MAX: "2000000", GOV: "performance"})
    assert writes.rollback_policies(acc, topo, [item], 0) == (
        1,
        ["policy0/scaling_max_freq=3900000: EIO: Input/output error"],
    )
    assert acc.writes == [(f"{P0}/{GOV}", "powersave")]


# --- execute -------------------------------------------------------------------------------------


def test_execute_journals_originals_then_writes_each_changed_policy(tmp_path):
    acc = node(values2={MAX: "2000000"})
    acc.clamp[f"{P0}/{MAX}"] = "1950000"
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, epp="power")
    path = state_file(tmp_path)
    store = StateStore(path)
    changed, results = writes.execute(acc, topo, plan, store=store)
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
    writes.execute(acc, topo, plan, store=StateStore(path))
    assert text(path) == STATE_MAX_EPP
    topo, plan = planned(acc, cpus="0-3", max_mhz=1500, epp="balance_power")
    before = os.stat(path).st_mtime_ns
    os.utime(path, ns=(0, 0))
    assert writes.execute(acc, topo, plan, store=StateStore(path))[0] is True
    assert text(path) == STATE_MAX_EPP
    assert os.stat(path).st_mtime_ns == 0 != before  # nothing new to record: not rewritten
    assert acc.files[f"{P2}/{MAX}"] == "1500000"


def test_execute_without_record_or_store_journals_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    store = StateStore(path)
    assert writes.execute(acc, topo, plan, store=store, record=False)[0] is True
    assert not os.path.exists(path) and store.policies == {}
    topo, plan = planned(acc, cpus="2-3", max_mhz=2000)
    assert writes.execute(acc, topo, plan)[0] is True
    assert acc.writes == [(f"{P0}/{MAX}", "2000000"), (f"{P2}/{MAX}", "2000000")]


def test_execute_in_check_mode_changes_nothing(tmp_path):
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-3", max_mhz=2000, governor="powersave")
    changed, results = writes.execute(acc, topo, plan, store=StateStore(path), check_mode=True)
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
    changed, results = writes.execute(acc, topo, plan, store=StateStore(path))
    assert changed is False
    assert acc.writes == [] and not os.path.exists(path)
    assert [r["after"][MAX] for r in results] == ["3900000", "3900000"]


def test_execute_unwritable_state_file_changes_nothing(tmp_path):
    (tmp_path / "state").write_text("")
    path = state_file(tmp_path)
    acc = node()
    topo, plan = planned(acc, cpus="0-1", max_mhz=2000)
    with pytest.raises(ApplyError) as info:
        writes.execute(acc, topo, plan, store=StateStore(path))
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
        writes.execute(acc, topo, plan, store=StateStore(path))
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
        writes.execute(acc, topo, plan)
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
        writes.execute(acc, topo, plan, store=StateStore(path))
    assert str(info.value) == (
        f"writing '2000000' to /sys/{P2}/{MAX} (CPU 2-3) failed: EACCES: Permission denied; rollback FAILED for: "
        f"policy0/scaling_max_freq=3900000: EIO: Input/output error; state file {path}: [Errno 17] File exists: "
        f"'{tmp_path / 'state'}' - check these attributes by hand"
    )
    assert isinstance(info.value.__cause__, ApplyError)


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - step_equal, `want // 4 + 1000` -> `want / 4 + 1000`: the difference of two integers is an
#   integer, and an integer is <= x + 1000 exactly when it is <= floor(x) + 1000.
# - safe_range_order, `(i > j) == raising` -> `(i >= j) == raising`: i == j would need the max and
#   the min step to be the same step (their paths differ).
# - run_steps, `snapshot` -> None in the unwritable-state-file call: that call passes store=None,
#   and fail_and_roll_back reads the snapshot only with a store.
