# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 5 of the node power library: ordered writes, read-back, rollback, and the entry points.

* Each cpufreq policy is written once, in the safe order the planner chose; every written value
  is read back (kernels >= 5.4 clamp silently).
* The other controls (C-states, uncore, power cap) are lists of single-attribute writes with
  their own read-back rule; they run after the P-states, in the order their planners return.
* Originals are journaled before the first write; on any failure the values this run changed
  are written back newest first, the state file returns to its previous content, and the error
  says what was rolled back.
* ``intel_pstate/status`` is never written.

This module is also the library's entry point: the modules and the boot-time runner import
from here (``__all__``).

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import copy

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import (
    Topology,
    gather_cpufreq_info,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpufreq_plan import (
    Request,
    plan_absent,
    plan_present,
    resolve_cpus,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist, parse_cpulist
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cstates import (
    cpuidle_facts,
    plan_cstates,
    read_cpuidle,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import (
    DEFAULT_STATE_FILE,
    StateStore,
    state_lock,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_report import (
    combined_diff,
    control_summary,
    diff_table,
    summarize,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import find_power_source
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.powercap import (
    plan_power_cap,
    powercap_facts,
    read_powercap,
    zone_identity,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    HWMON_DIR,
    POWERCAP_DIR,
    ApplyError,
    PowerError,
    SysfsAccessor,
    ValidationError,
    read_optional,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.uncore import (
    domain_identity,
    plan_uncore,
    read_uncore,
    uncore_facts,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.writes import (
    compare_mode,
    execute,
    needs_write,
    rewind_journal,
    rollback_policies,
    rollback_steps,
    run_steps,
    safe_range_order,
)

__all__ = [
    "ApplyError",
    "PowerError",
    "Request",
    "StateStore",
    "SysfsAccessor",
    "Topology",
    "ValidationError",
    "apply_assignments",
    "apply_controls",
    "apply_profile",
    "diff_table",
    "execute",
    "gather_info",
    "plan_absent",
    "plan_present",
    "restore_controls",
    "restore_profile",
    "summarize",
]


def apply_profile(acc, request, state_file=DEFAULT_STATE_FILE, check_mode=False, tolerance_mhz=100):
    """state=present: validate everything, then write changed policies. Returns the result dict."""
    with state_lock(state_file, exclusive=not check_mode):
        topo = Topology(acc)
        plan = plan_present(topo, request, tolerance_mhz)
        store = StateStore(state_file)
        changed, results = execute(acc, topo, plan, store=store, check_mode=check_mode)
        return {
            "changed": changed,
            "cpus": format_cpulist(plan["managed"]),
            "skipped_offline": format_cpulist(plan["skipped_offline"]),
            "driver": topo.driver,
            "policies": summarize(topo, results),
            "state_file": state_file,
            "diff": diff_table(topo, results),
        }


def restore_profile(acc, cpus=None, state_file=DEFAULT_STATE_FILE, check_mode=False, tolerance_mhz=100):
    """state=absent: restore recorded originals and forget them. Returns the result dict."""
    with state_lock(state_file, exclusive=not check_mode):
        topo = Topology(acc)
        store = StateStore(state_file)
        plan = plan_absent(topo, store, cpus, tolerance_mhz)
        changed, results = execute(acc, topo, plan, store=None, check_mode=check_mode)
        if plan["forget"]:
            changed = True
            if not check_mode:
                for name in plan["forget"]:
                    store.forget(name)
                store.save()
        managed = sorted({c for item in plan["policies"] for c in item["cpus"]})
        return {
            "changed": changed,
            "cpus": format_cpulist(managed),
            "skipped_offline": format_cpulist(plan["skipped_offline"]),
            "driver": topo.driver,
            "policies": summarize(topo, results),
            "state_file": state_file,
            "diff": diff_table(topo, results),
        }


# --------------------------------------------------------------------------------------------
# The other controls (C-states, uncore, power cap): single-attribute steps
# --------------------------------------------------------------------------------------------


def plan_controls(acc, topo, online, cstates=None, uncore=None, power_cap=None):
    """Plans of the requested controls, in execution order; validation problems are in each plan."""
    plans = []
    if cstates is not None:
        plans.append(plan_cstates(acc, read_cpuidle(acc, topo.online), online, cstates))
    if uncore is not None:
        plans.append(plan_uncore(read_uncore(acc), uncore))
    if power_cap is not None:
        plans.append(plan_power_cap(read_powercap(acc), power_cap))
    return plans


def validate_all(acc, topo, request, controls, tolerance_mhz):
    """Plan the P-states and every control; raise one ValidationError listing all problems."""
    problems = []
    online, skipped, pstate = [], [], None
    try:
        online, skipped = resolve_cpus(topo, request)
    except ValidationError as exc:
        problems.append(str(exc))
    if not problems and any(v is not None for v in request.settings().values()):
        try:
            pstate = plan_present(topo, request, tolerance_mhz)
        except ValidationError as exc:
            problems.append(str(exc))
    plans = plan_controls(acc, topo, online, **controls)
    for plan in plans:
        problems.extend(plan["problems"])
    if problems:
        raise ValidationError("; ".join(problems))
    return online, skipped, pstate, plans


def identity_directories(acc):
    """Where each RAPL package zone and TPMI uncore domain is now: identity -> directory. An identity
    two directories claim (firmware naming two zones alike) is left out: it cannot say which is which."""
    found = {}
    for zone in read_powercap(acc)["zones"]:
        found.setdefault(zone_identity(zone), []).append(zone["path"])
    for domain in read_uncore(acc)["domains"]:
        found.setdefault(domain_identity(domain), []).append(domain["path"])
    return {identity: dirs[0] for identity, dirs in found.items() if identity and len(dirs) == 1}


def open_store(acc, state_file):
    """The journal, its originals moved to where their zones and domains are on this boot
    (StateStore.relocate). Returns the store and the paths whose zone or domain is not present."""
    store = StateStore(state_file)
    # the zones are read only when an entry has an identity to place (C-states alone need none)
    if not any(entry.get("identity") for entry in store.attributes.values()):
        return store, []
    return store, store.relocate(identity_directories(acc))


def _nothing_to_apply(request, controls):
    if all(v is None for v in request.settings().values()) and all(v is None for v in controls.values()):
        raise ValidationError(
            "nothing to apply: give at least one of min_mhz, max_mhz, governor, epp, cstates, uncore, power_cap"
        )


def _apply_validated(acc, topo, validated, store, check_mode, state_file):
    """Write what ``validate_all`` planned (rolling back this part on failure). Returns the result
    and what was written, for a caller that must undo it later (``apply_assignments``)."""
    online, skipped, pstate, plans = validated
    snapshot = copy.deepcopy(store.data)
    changed, results = execute(acc, topo, pstate, store=store, check_mode=check_mode) if pstate else (False, [])
    steps = [s for plan in plans for s in plan["writes"] if needs_write(s)]
    items = [i for i in pstate["policies"] if i["changes"]] if pstate and not check_mode else []
    tolerance_khz = pstate["tolerance_khz"] if pstate else 0
    if steps and not check_mode:
        run_steps(acc, topo, steps, store, snapshot, items, tolerance_khz)
    result = {
        "changed": changed or bool(steps),
        "cpus": format_cpulist(pstate["managed"] if pstate else online),
        "skipped_offline": format_cpulist(pstate["skipped_offline"] if pstate else skipped),
        "driver": topo.driver,
        "policies": summarize(topo, results),
        "controls": {plan["control"]: control_summary(plan, steps) for plan in plans},
        "messages": [m for plan in plans for m in plan["messages"]],
        "state_file": state_file,
        "diff": combined_diff(topo, results, steps),
    }
    written = {"topo": topo, "items": items, "steps": [] if check_mode else steps, "tolerance_khz": tolerance_khz}
    return result, written


def apply_controls(acc, request, cstates=None, uncore=None, power_cap=None, state_file=DEFAULT_STATE_FILE,
                   check_mode=False, tolerance_mhz=100):  # fmt: skip
    """state=present for P-states and the other controls: validate all, then write. Returns the result."""
    controls = {"cstates": cstates, "uncore": uncore, "power_cap": power_cap}
    _nothing_to_apply(request, controls)
    with state_lock(state_file, exclusive=not check_mode):
        topo = Topology(acc)
        validated = validate_all(acc, topo, request, controls, tolerance_mhz)
        store, _absent = open_store(acc, state_file)
        result, _written = _apply_validated(acc, topo, validated, store, check_mode, state_file)
        return result


# --------------------------------------------------------------------------------------------
# Several assignments in one run (a node's pools and its node-level controls)
# --------------------------------------------------------------------------------------------

ASSIGNMENT_CONTROLS = ("cstates", "uncore", "power_cap")


def assignment_label(item, index):
    """How messages name an assignment: its pool (and profile) when given, else its position."""
    pool, profile = item.get("pool"), item.get("profile")
    if pool is None:
        return f"assignments[{index}]"
    return f"pool {pool}" + (f" (profile {profile})" if profile is not None else "")


def _assignment_request(item, reserved_cpus):
    request = Request(
        cpus=item.get("cpus"),
        reserved_cpus=reserved_cpus,
        min_mhz=item.get("min_mhz"),
        max_mhz=item.get("max_mhz"),
        governor=item.get("governor"),
        epp=item.get("epp"),
    )
    controls = {name: item.get(name) for name in ASSIGNMENT_CONTROLS}
    _nothing_to_apply(request, controls)
    return request, controls


def _recorded_since(store, snapshot):
    """Originals the journal holds now that ``snapshot`` did not: what a failed part kept because
    its own rollback could not write them back (they stay changed, so they must stay recorded)."""
    old_policies = snapshot.get("policies", {})
    attrs = [
        (name, attr)
        for name, entry in store.policies.items()
        for attr in entry["original"]
        if attr not in old_policies.get(name, {}).get("original", {})
    ]
    paths = [path for path in store.attributes if path not in snapshot.get("attributes", {})]
    return attrs, paths


def _undo_earlier(acc, label, exc, written, store, start, before_failed):
    """A later assignment failed (and rolled itself back): write back what the earlier ones wrote,
    newest first, and return the journal to where the run started. Returns the ApplyError to raise."""
    kept_attrs, kept_paths = _recorded_since(store, before_failed)
    failed_attrs, failed_paths, problems, restored = [], [], [], 0
    for part in reversed(written):
        count, more = rollback_steps(acc, part["steps"], failed_paths)
        restored += count
        problems.extend(more)
        count, more = rollback_policies(acc, part["topo"], part["items"], part["tolerance_khz"], failed_attrs)
        restored += count
        problems.extend(more)
    note = rewind_journal(store, start, problems, failed_attrs + kept_attrs, failed_paths + kept_paths)
    if problems:
        return ApplyError(
            f"{label}: {exc}; rolling back the earlier assignments FAILED for: {'; '.join(problems)} - check "
            f"these attributes by hand{note}"
        )
    return ApplyError(
        f"{label}: {exc}; the earlier assignments were rolled back too ({restored} value(s)): the node is as "
        "before this run"
    )


def apply_assignments(acc, assignments, reserved_cpus=(), state_file=DEFAULT_STATE_FILE, check_mode=False,
                      tolerance_mhz=100):  # fmt: skip
    """state=present for several assignments in one run, under one lock: every assignment is
    validated against the node before the first write (all problems reported at once, each named by
    its pool), then they are applied in order; a failure in any rolls back what the earlier ones
    wrote, so the node ends as it was or as asked, never with some pools applied.

    Each assignment is a dict: ``cpus`` and the settings of ``apply_controls`` (``min_mhz``,
    ``max_mhz``, ``governor``, ``epp``, ``cstates``, ``uncore``, ``power_cap``), with ``pool`` and
    ``profile`` naming it in messages. Returns the combined result with one entry per assignment."""
    if not assignments:
        raise ValidationError("assignments is empty: give at least one assignment (cpus and what to set)")
    problems, requests = [], []
    for index, item in enumerate(assignments):
        label = assignment_label(item, index)
        try:
            requests.append((label, item, *_assignment_request(item, reserved_cpus)))
        except ValidationError as exc:
            problems.append(f"{label}: {exc}")
    with state_lock(state_file, exclusive=not check_mode):
        if not problems:
            topo = Topology(acc)
            for label, _item, request, controls in requests:
                try:
                    validate_all(acc, topo, request, controls, tolerance_mhz)
                except ValidationError as exc:
                    problems.append(f"{label}: {exc}")
        if problems:
            raise ValidationError("; ".join(problems))
        store, _absent = open_store(acc, state_file)
        start = copy.deepcopy(store.data)
        results, written = [], []
        for label, item, request, controls in requests:
            before = copy.deepcopy(store.data)
            try:
                # planned again from what the kernel holds now: an earlier assignment may share CPUs
                topo = Topology(acc)
                validated = validate_all(acc, topo, request, controls, tolerance_mhz)
                result, done = _apply_validated(acc, topo, validated, store, check_mode, state_file)
            except (PowerError, OSError) as exc:
                if not written:  # nothing of this run is left to undo (a part rolls itself back)
                    if isinstance(exc, PowerError):
                        raise type(exc)(f"{label}: {exc}") from exc
                    raise
                raise _undo_earlier(acc, label, exc, written, store, start, before) from exc
            written.append(done)
            results.append({"pool": item.get("pool"), "profile": item.get("profile"), **result})
        return _combined_assignments(results, state_file)


def _combined_assignments(results, state_file):
    before, after = [], []
    for index, result in enumerate(results):
        diff = result.pop("diff")
        if result["changed"]:
            header = f"# {assignment_label(result, index)}\n"
            before.append(header + diff["before"])
            after.append(header + diff["after"])
    return {
        "changed": any(r["changed"] for r in results),
        "driver": results[0]["driver"],
        "assignments": results,
        "messages": [f"{assignment_label(r, i)}: {m}" for i, r in enumerate(results) for m in r["messages"]],
        "state_file": state_file,
        "diff": {"before": "".join(before), "after": "".join(after)},
    }


def plan_attribute_restore(acc, store, cpus=None, absent=()):
    """Steps that write recorded originals back, newest first; CPU-less entries only for all CPUs.
    ``absent``: paths whose zone or domain is not present on this boot (kept, not written)."""
    wanted = None if cpus in (None, "all") else set(parse_cpulist(cpus))
    steps, missing = [], []
    for path, entry in sorted(store.attributes.items(), key=lambda kv: -kv[1]["seq"]):
        if wanted is not None and (entry.get("cpu") is None or entry["cpu"] not in wanted):
            continue
        if path in absent:
            missing.append(f"{entry['label']}: {entry['identity']} is not present on this boot")
            continue
        if not acc.exists(path):
            missing.append(f"{entry['label']}: the attribute is gone (CPU or die offline)")
            continue
        steps.append(
            {
                "control": entry["control"],
                "path": path,
                "cpu": entry.get("cpu"),
                "label": entry["label"],
                "current": read_optional(acc, path),
                "target": entry["original"],
                "compare": compare_mode(path),
                # the original was read from the kernel: restore it exactly, not within the read-back rule
                "held": entry["original"],
            }
        )
    return safe_range_order(steps), missing


def restore_controls(acc, cpus=None, state_file=DEFAULT_STATE_FILE, check_mode=False, tolerance_mhz=100):
    """state=absent: restore every recorded original (P-states and the other controls), then forget them."""
    with state_lock(state_file, exclusive=not check_mode):
        topo = Topology(acc)
        store, absent = open_store(acc, state_file)
        plan = plan_absent(topo, store, cpus, tolerance_mhz)
        steps, missing = plan_attribute_restore(acc, store, cpus, absent)
        changed, results = execute(acc, topo, plan, store=None, check_mode=check_mode)
        todo = [s for s in steps if needs_write(s)]
        if todo and not check_mode:
            items = [i for i in plan["policies"] if i["changes"]]
            run_steps(acc, topo, todo, None, None, items, plan["tolerance_khz"])
        if plan["forget"] or steps:
            changed = True
            if not check_mode:
                for name in plan["forget"]:
                    store.forget(name)
                for step in steps:
                    store.forget_attribute(step["path"])
                store.save()
        managed = sorted({c for item in plan["policies"] for c in item["cpus"]})
        messages = [f"{what}; its original stays recorded" for what in missing]
        return {
            "changed": changed,
            "cpus": format_cpulist(managed),
            "skipped_offline": format_cpulist(plan["skipped_offline"]),
            "driver": topo.driver,
            "policies": summarize(topo, results),
            "controls": {
                "restored": [s["label"] for s in todo],
                "unchanged": [s["label"] for s in steps if s not in todo],
            },
            "messages": messages,
            "state_file": state_file,
            "diff": combined_diff(topo, results, todo),
        }


def power_reading_facts(acc, rules=None):
    """Which package power source this machine has (RAPL powercap, else hwmon), as cpu_power_info reports it.

    ``rules`` classify hwmon labels (``power_zones.hwmon_label_rules``); ``ignored`` lists every
    hwmon energy or power sensor that is not package power, and why.
    """
    found = find_power_source(acc, POWERCAP_DIR, HWMON_DIR, rules)
    zones = [{k: v for k, v in z.items() if k != "path"} for z in found["zones"]]
    messages = []
    if found["source"] is None:
        messages.append("no package power source: neither RAPL powercap package zones nor a hwmon energy/power sensor")
    elif found["source"] == "hwmon":
        messages.append("no RAPL powercap package zone: package power is read from hwmon")
    if found["ignored"]:
        messages.append(
            "%d hwmon energy/power sensor(s) are not package power (see ignored); hwmon_labels classifies labels"
            % len(found["ignored"])
        )
    return {"source": found["source"], "zones": zones, "ignored": found["ignored"], "messages": messages}


def gather_info(acc, rules=None):
    """The cpu_power_info facts: cpufreq and RAPL, cpuidle, uncore, powercap, power-reading source."""
    topo = Topology(acc)
    info = gather_cpufreq_info(acc, topo)
    info["cpuidle"] = cpuidle_facts(read_cpuidle(acc, topo.online))
    info["uncore"] = uncore_facts(read_uncore(acc))
    info["powercap"] = powercap_facts(read_powercap(acc))
    info["power_reading"] = power_reading_facts(acc, rules)
    return info
