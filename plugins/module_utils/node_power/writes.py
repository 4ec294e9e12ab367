# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 5 of the node power library: ordered writes, read-back and rollback.

* Each cpufreq policy is written once, in the safe order the planner chose; every written value
  is read back (kernels >= 5.4 clamp silently).
* The other controls (C-states, uncore, power cap) are lists of single-attribute writes ("steps")
  with their own read-back rule; they run after the P-states, in the order their planners return.
* Originals are journaled before the first write; on any failure the values this run changed
  are written back newest first, the state file returns to its previous content, and the error
  says what was rolled back.

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import copy

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import EPP, MANAGED_ATTRS
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpufreq_plan import order_writes, values_equal
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.powercap import POWER_TOLERANCE_UW
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    ApplyError,
    describe_oserror,
    read_optional,
)


def write_policy(acc, topo, item, journal, tolerance_khz):
    """Write the changed attributes of one policy in safe order, then read every target back."""
    pol = item["policy"]
    current = dict(pol["values"])
    for attr, value in order_writes(current, item["changes"]):
        rel = f"{pol['path']}/{attr}"
        try:
            acc.write(rel, value)
        except OSError as exc:
            raise ApplyError(
                f"writing {value!r} to {acc.path(rel)} (CPU {format_cpulist(item['cpus'])}) failed: "
                f"{describe_oserror(exc)}"
            ) from exc
        journal.append((item, attr))
    readback = {}
    for attr, value in item["target"].items():
        rel = f"{pol['path']}/{attr}"
        try:
            got = acc.read(rel)
        except OSError as exc:
            raise ApplyError(f"reading back {acc.path(rel)} failed: {describe_oserror(exc)}") from exc
        readback[attr] = got
        # a number written as EPP reads back as a name where the CPU model names that value
        named = attr == EPP and str(value).isdigit() and got is not None and not got.strip().isdigit()
        if not named and not values_equal(attr, got, value, tolerance_khz):
            raise ApplyError(
                f"{acc.path(rel)} reads back {got!r} after writing {value!r} (CPU {format_cpulist(item['cpus'])}): "
                "the kernel clamped or refused the value silently"
            )
    pol["values"].update(readback)
    return readback


def rollback_policies(acc, topo, touched, tolerance_khz, failed=None):
    """Return touched policies to the values read at the start of the run, newest first.

    ``failed`` (a list) receives (policy name, attribute) of each write back that failed."""
    problems = []
    restored = 0
    for item in reversed(touched):
        pol = item["policy"]
        live = {}
        for attr in MANAGED_ATTRS:
            if attr in item["current"]:
                live[attr] = read_optional(acc, f"{pol['path']}/{attr}")
        target = {a: item["current"][a] for a in item["changes"] if item["current"].get(a) is not None}
        changes = {a: v for a, v in target.items() if not values_equal(a, live.get(a), v, tolerance_khz)}
        for attr, value in order_writes(live, changes):
            try:
                acc.write(f"{pol['path']}/{attr}", value)
                restored += 1
            except OSError as exc:
                problems.append(f"{pol['name']}/{attr}={value}: {describe_oserror(exc)}")
                if failed is not None:
                    failed.append((pol["name"], attr))
    return restored, problems


def rewind_journal(store, snapshot, problems, failed_attrs=(), failed_paths=()):
    """Put the state file back after a rollback (keeping the originals of what stayed changed, see
    StateStore.rewind); a failure to write it joins ``problems``. Returns the rollback message's
    note on the kept originals (empty when nothing was kept)."""
    try:
        store.rewind(snapshot, failed_attrs, failed_paths)
    except OSError as err:
        problems.append(f"state file {store.path}: {err}")
        return ""
    return f"; their originals stay in {store.path}: state=absent restores them" if failed_attrs or failed_paths else ""


def execute(acc, topo, plan, store=None, check_mode=False, record=True):
    """Apply a plan. Returns (changed, per-policy results). Raises ApplyError after rolling back."""
    todo = [item for item in plan["policies"] if item["changes"]]
    results = []
    for item in plan["policies"]:
        after = dict(item["current"])
        after.update(item["target"])
        results.append({"item": item, "after": after})
    if not todo or check_mode:
        return bool(todo), results
    snapshot = copy.deepcopy(store.data) if store is not None else None
    if store is not None and record:
        for item in todo:
            for attr in item["changes"]:
                store.record(item["policy"], attr, item["current"].get(attr))
        if store.dirty():
            try:
                store.save()
            except OSError as exc:
                raise ApplyError(f"cannot write state file {store.path}: {exc}; nothing was changed") from exc
    journal = []
    touched = []
    try:
        for item in todo:
            touched.append(item)
            readback = write_policy(acc, topo, item, journal, plan["tolerance_khz"])
            for res in results:
                if res["item"] is item:
                    res["after"].update(readback)
    except ApplyError as exc:
        # no single-attribute steps yet: only the policies this run touched go back
        fail_and_roll_back(acc, topo, exc, [], touched, plan["tolerance_khz"], store, snapshot)
    return True, results


def compare_mode(path):
    """How a read-back of the attribute at ``path`` is judged (also used when restoring)."""
    if path.endswith("_power_limit_uw"):
        return "tolerance"
    if path.endswith("_time_window_us"):
        return "time_window"
    return "exact"


def step_equal(step, value, target=None):
    """Whether ``value`` (as read) satisfies ``target`` (default: the step's target) for this attribute."""
    target = step["target"] if target is None else target
    if value is None or target is None:
        return value == target
    value, target = str(value).strip(), str(target).strip()
    mode = step.get("compare") or compare_mode(step["path"])
    if mode == "exact" or not (value.isdigit() and target.isdigit()):
        return value == target
    got, want = int(value), int(target)
    if mode == "tolerance":
        return abs(got - want) <= step.get("tolerance", POWER_TOLERANCE_UW)
    # time windows are encoded as 2^Y * (1 + F/4) time units: representable values are a quarter apart
    return abs(got - want) <= want // 4 + 1000


def needs_write(step):
    """Whether ``step`` must be written: its current value is not what the kernel would hold after
    the write (``held``, where the planner knows the kernel's granularity), else not the target by
    the step's read-back rule."""
    held = step.get("held")
    if held is not None:
        return step["current"] is None or str(step["current"]).strip() != str(held).strip()
    return not step_equal(step, step["current"])


def step_after(step):
    """What the attribute holds after the run: the read-back when written, the current value when
    no write was needed, else (check mode) what the kernel would hold."""
    if "after" in step:
        return step["after"]
    if not needs_write(step):
        return step["current"]
    return step["held"] if step.get("held") is not None else step["target"]


def write_steps(acc, steps, journal):
    """Write each step, then read it back; raises ApplyError on the first failure."""
    for step in steps:
        path = acc.path(step["path"])
        try:
            acc.write(step["path"], step["target"])
        except OSError as exc:
            hint = step.get("hints", {}).get(exc.errno)
            raise ApplyError(
                f"writing {step['target']!r} to {path} ({step['label']}) failed: {describe_oserror(exc)}"
                + (f" - {hint}" if hint else "")
            ) from exc
        journal.append(step)
        try:
            got = acc.read(step["path"])
        except OSError as exc:
            raise ApplyError(f"reading back {path} failed: {describe_oserror(exc)}") from exc
        if not step_equal(step, got):
            raise ApplyError(
                f"{path} reads back {got!r} after writing {step['target']!r} ({step['label']}): "
                "the kernel clamped or refused the value silently"
            )
        step["after"] = got


def rollback_steps(acc, journal, failed=None):
    """Write back the values read before this run, newest first (``failed`` receives the paths
    whose write back failed)."""
    restored = 0
    problems = []
    for step in reversed(journal):
        # the value read at the start came from the kernel: put back exactly that
        if step["current"] is None or read_optional(acc, step["path"]) == step["current"]:
            continue
        try:
            acc.write(step["path"], step["current"])
            restored += 1
        except OSError as exc:
            problems.append(f"{step['path']}={step['current']}: {describe_oserror(exc)}")
            if failed is not None:
                failed.append(step["path"])
    return restored, problems


def fail_and_roll_back(acc, topo, exc, journal, pstate_items, tolerance_khz, store, snapshot):
    failed_paths, failed_attrs = [], []
    restored, problems = rollback_steps(acc, journal, failed_paths)
    if pstate_items:
        count, more = rollback_policies(acc, topo, pstate_items, tolerance_khz, failed_attrs)
        restored += count
        problems.extend(more)
    note = rewind_journal(store, snapshot, problems, failed_attrs, failed_paths) if store is not None else ""
    if problems:
        raise ApplyError(
            f"{exc}; rollback FAILED for: {'; '.join(problems)} - check these attributes by hand{note}"
        ) from exc
    raise ApplyError(
        f"{exc}; rolled back the {restored} value(s) this run had changed, nothing else was touched"
    ) from exc


def run_steps(acc, topo, steps, store=None, snapshot=None, pstate_items=(), tolerance_khz=0):
    """Journal the originals (when ``store`` is given), write ``steps``; roll everything back on failure.

    ``pstate_items`` are the cpufreq policies this run already changed: they are rolled back too.
    """
    if store is not None:
        for step in steps:
            store.record_attribute(step, step["current"])
        if store.dirty():
            try:
                store.save()
            except OSError as exc:
                problem = ApplyError(f"cannot write state file {store.path}: {exc}")
                fail_and_roll_back(acc, topo, problem, [], list(pstate_items), tolerance_khz, None, snapshot)
    journal = []
    try:
        write_steps(acc, steps, journal)
    except ApplyError as exc:
        fail_and_roll_back(acc, topo, exc, journal, list(pstate_items), tolerance_khz, store, snapshot)


def safe_range_order(steps):
    """Restore a min/max pair (uncore) in the safe order: raising writes max first, lowering min first."""
    by_path = {s["path"]: s for s in steps}
    for step in steps:
        if not step["path"].endswith("/max_freq_khz"):
            continue
        low = by_path.get(step["path"][: -len("max_freq_khz")] + "min_freq_khz")
        if low is None:
            continue
        i, j = steps.index(step), steps.index(low)
        raising = str(step["current"]).isdigit() and int(step["target"]) > int(step["current"])
        if (i > j) == raising:  # max must come first when raising, min first otherwise
            steps[i], steps[j] = steps[j], steps[i]
    return steps
