# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cpu_power role's plan for one node: pools, reserved and shared CPUs, and each pool's
frequency range per group of CPUs with identical cpuinfo limits.

Pure logic, no Ansible imports, no I/O: the input is the ``cpu_power`` fact of
``cpu_power_info`` and the role's variables; the output is what the role applies (and writes
into the boot-time configuration). Nothing here touches the node.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import CpuListError, parse_cpulist

__all__ = ["PROFILE_KEYS", "CSTATES_KEYS", "expand_cpus", "plan_node", "profile_frequency_mhz", "reserved_choice"]

# Keys a profile may have; anything else is refused (a typo would otherwise be ignored).
PROFILE_KEYS = ("epp", "governor", "min_pct", "max_pct", "cstates")
CSTATES_KEYS = ("disable", "enable", "max_latency_us")


def expand_cpus(value):
    """``(cpus, bad_parts)``: the CPU numbers of a CPU list in first-seen order, without repeats,
    and the parts that are not CPU numbers or ranges.

    ``value`` is a string (``"0-3,8"``; blank parts are skipped), a number or a list of either;
    None is no CPUs. Each part is parsed by ``parse_cpulist``, so a descending range (``7-4``) or
    a CPU above the kernel's limit is a bad part.
    """
    cpus, bad = [], []

    def add(numbers_):
        for cpu in numbers_:
            if cpu not in cpus:
                cpus.append(cpu)

    if value is None:
        pass
    elif isinstance(value, str):
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                add(parse_cpulist(part))
            except CpuListError:
                bad.append(part)
    elif isinstance(value, numbers.Number):
        add([int(value)])
    elif hasattr(value, "__iter__"):
        for item in value:
            sub, sub_bad = expand_cpus(item)
            add(sub)
            bad.extend(sub_bad)
    return cpus, bad


def _difference(a, b):
    return [x for x in a if x not in b]


def _intersect(a, b):
    return [x for x in a if x in b]


def _join(values):
    return ",".join(str(v) for v in values)


def profile_frequency_mhz(lo, hi, pct):
    """A profile percentage placed within [lo, hi] MHz, rounded down to 100 MHz, never below lo."""
    pct = float(pct)
    if pct >= 100:
        value = hi
    elif pct <= 0:
        value = lo
    else:
        value = max(int((lo + (hi - lo) * pct / 100) / 100) * 100, lo)
    return int(float(value))


def _checked_cpus(value, label, errors):
    cpus, bad = expand_cpus(value)
    if bad:
        errors.append(f"{label} {value} is not a CPU list (bad part: {', '.join(bad)})")
    return cpus


def reserved_choice(given, kubelet_given, kubelet_document, kubelet_config_path):
    """The reserved CPUs and what they are checked against, as ``plan_node`` takes them:
    ``{reserved, reserved_given, kubelet_reserved, kubelet_source}``.

    ``given`` is ``cpu_power_reserved_cpus`` and ``kubelet_given`` ``cpu_power_kubelet_reserved_cpus``
    as set, None when unset (an empty string, which ``-e name=`` gives, is set: no CPUs).
    ``kubelet_document`` is the kubelet's configuration as parsed from ``kubelet_config_path`` (None,
    or anything but a mapping, has no ``reservedSystemCPUs``).

    The kubelet's reserved CPUs are ``kubelet_given``, else the document's ``reservedSystemCPUs``
    (None: unknown). The reserved CPUs are ``given``, else the kubelet's, else none; only a given
    value is cross-checked against the kubelet's.
    """
    if kubelet_given is not None:
        kubelet, source = kubelet_given, "cpu_power_kubelet_reserved_cpus"
    else:
        document = kubelet_document if isinstance(kubelet_document, Mapping) else {}
        kubelet, source = document.get("reservedSystemCPUs"), kubelet_config_path
    fallback = kubelet if kubelet is not None else ""
    return {
        "reserved": given if given is not None else fallback,
        "reserved_given": given is not None,
        "kubelet_reserved": kubelet,
        "kubelet_source": source,
    }


def _check_reserved(plan, reserved_given, kubelet_reserved, kubelet_source):
    reserved = plan["reserved"]
    if not reserved_given and kubelet_reserved is not None:
        plan["notes"].append(f"reserved CPUs {_join(reserved) or 'none'} from {kubelet_source}")
    elif kubelet_reserved is not None:
        kubelet = sorted(expand_cpus(kubelet_reserved)[0])
        if kubelet != reserved:
            plan["errors"].append(
                f"cpu_power_reserved_cpus ({_join(reserved) or 'none'}) does not match the kubelet reserved CPUs "
                f"({_join(kubelet) or 'none'}, from {kubelet_source}): the shared pool would take CPUs the kubelet "
                "keeps for system daemons, or leave some unmanaged; make them equal"
            )
    else:
        plan["notes"].append(
            "kubelet reserved CPUs unknown (cpu_power_kubelet_reserved_cpus unset and no reservedSystemCPUs in "
            f"{kubelet_source}): reserved CPUs not cross-checked"
        )


def _check_pools(plan, pools, profiles, present, present_text, host):
    errors, reserved = plan["errors"], plan["reserved"]
    claimed, seen = {}, {}
    for index, pool in enumerate(pools, 1):
        name = pool["name"]
        if name in seen:
            # the boot unit, the messages and the journal name a pool: two alike would be one pool twice
            errors.append(
                f"pool {name} is defined twice (cpu_power_pools entries {seen[name]} and {index}); pool names must be "
                "unique: rename one, or merge their CPUs into one pool"
            )
        seen.setdefault(name, index)
        cpus = sorted(_checked_cpus(pool["cpus"], f"pool {name}: cpus", errors))
        if pool["profile"] not in profiles:
            errors.append(
                f"pool {name}: profile {pool['profile']} is not defined "
                f"(cpu_power_profiles has: {', '.join(sorted(profiles))})"
            )
        if not cpus:
            errors.append(f"pool {name} has no CPUs")
        missing = _difference(cpus, present)
        if missing:
            errors.append(
                f"pool {name} names CPUs {_join(missing)} that are not present on {host} (present: {present_text})"
            )
        overlap = _intersect(cpus, reserved)
        if overlap:
            errors.append(
                f"pool {name} overlaps the reserved CPUs on {_join(overlap)}; "
                "exclusive pools must not use reserved CPUs"
            )
        for cpu in cpus:
            if cpu in claimed:
                errors.append(f"pools {claimed[cpu]} and {name} overlap on CPU {cpu}; each CPU belongs to one pool")
            else:
                claimed[cpu] = name
    return list(claimed)


def _check_profiles(errors, profiles, shared_profile):
    if shared_profile is not None and shared_profile not in profiles:
        errors.append(f"cpu_power_shared_profile {shared_profile} is not defined in cpu_power_profiles")
    for name, prof in profiles.items():
        if not isinstance(prof, dict):
            errors.append(f"profile {name}: {prof!r} is not a mapping of {', '.join(PROFILE_KEYS)}")
            continue
        unknown = sorted(set(prof) - set(PROFILE_KEYS))
        if unknown:
            errors.append(f"profile {name}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(PROFILE_KEYS)}")
        bounds, percentages = {"min_pct": 0, "max_pct": 100}, True
        for key in bounds:
            value = prof.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 100:
                errors.append(f"profile {name}: {key} {value} is not a percentage within 0..100")
                percentages = False  # their order is not judged on a value that is not a percentage
            else:
                bounds[key] = value
        if percentages and bounds["min_pct"] > bounds["max_pct"]:
            low, high = prof.get("min_pct", ""), prof.get("max_pct", "")
            errors.append(f"profile {name}: min_pct {low} is above max_pct {high}")
        _check_cstates(errors, name, prof.get("cstates"))


def _check_cstates(errors, name, cstates):
    if cstates is None:
        return
    where = f"profile {name}: cstates"
    if not isinstance(cstates, dict):
        errors.append(f"{where} must be a mapping with keys {', '.join(CSTATES_KEYS)}, got {cstates!r}")
        return
    unknown = sorted(set(cstates) - set(CSTATES_KEYS))
    if unknown:
        errors.append(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(CSTATES_KEYS)}")
    for key in ("disable", "enable"):
        names = cstates.get(key)
        if names is not None and (
            isinstance(names, str) or not isinstance(names, list) or not all(isinstance(n, str) for n in names)
        ):
            errors.append(f"{where}.{key} {names!r} is not a list of state names, e.g. [C6] or [C1E, C6]")
    latency = cstates.get("max_latency_us")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int) or latency < 0):
        errors.append(f"{where}.max_latency_us {latency!r} is not a whole number of microseconds >= 0")


def _targets(pools, shared_profile, shared):
    targets = [{"pool": p["name"], "profile": p["profile"], "cpus": expand_cpus(p["cpus"])[0]} for p in pools]
    if shared_profile is not None and shared:
        targets.append({"pool": "shared", "profile": shared_profile, "cpus": shared})
    return targets


def _assign(plan, info, profiles, targets, fallback_governor):
    offline_cpus = expand_cpus(info.get("offline"))[0]
    for target in targets:
        prof = profiles[target["profile"]]
        for group in info["limit_groups"]:
            members = sorted(_intersect(target["cpus"], group["cpus"]))
            if not members:
                continue
            lo, hi = group["cpuinfo_min_mhz"], group["cpuinfo_max_mhz"]
            entry = {
                "pool": target["pool"],
                "profile": target["profile"],
                "cpus": members,
                # A bare `min_pct:` (null) is no bound, as when the key is left out.
                "min_mhz": profile_frequency_mhz(lo, hi, 0 if prof.get("min_pct") is None else prof["min_pct"]),
                "max_mhz": profile_frequency_mhz(lo, hi, 100 if prof.get("max_pct") is None else prof["max_pct"]),
            }
            if info.get("epp_supported"):
                entry["epp"] = prof.get("epp")
                entry["governor"] = prof.get("governor")
            else:
                entry["epp"] = None
                available = info.get("available_governors") or []
                entry["governor"] = fallback_governor if fallback_governor in available else None
            if prof.get("cstates") is not None:
                entry["cstates"] = prof["cstates"]
            plan["assignments"].append(entry)
            if entry["max_mhz"] < hi:
                epp = f", EPP {entry['epp']}" if entry["epp"] else ""
                plan["slowdowns"].append(
                    f"pool {target['pool']} (profile {target['profile']}): CPUs {_join(members)} capped at "
                    f"{entry['max_mhz']} MHz of {hi} MHz{epp}"
                )
        offline = _intersect(target["cpus"], offline_cpus)
        if offline:
            plan["notes"].append(f"pool {target['pool']}: CPUs {_join(offline)} are offline and skipped")


def plan_node(info, pools, profiles, reserved=None, reserved_given=False, kubelet_reserved=None,
              kubelet_source="", shared_profile=None, fallback_governor=None, host="",
              uncore=None, power_cap=None):  # fmt: skip
    """Plan one node. ``info`` is the ``cpu_power`` fact of ``cpu_power_info``; ``reserved`` the CPUs
    to leave alone (``reserved_given``: the user gave them, so they are cross-checked against
    ``kubelet_reserved``, read from ``kubelet_source``); ``uncore``/``power_cap`` the node-level
    controls (None: not managed).

    Returns ``{errors, notes, slowdowns, assignments, reserved, shared, node, apply, unmanaged}``: ``assignments``
    ``[{pool, profile, cpus, min_mhz, max_mhz, epp, governor[, cstates]}]`` one per pool x limit
    group (empty when there are errors or no cpufreq); ``node`` the node-level controls as a
    ``cpu_power_profile`` request (``{pool: node, cpus: all, uncore, power_cap}``) or None;
    ``apply`` what the role applies in one ``cpu_power_profile`` call (its ``assignments``);
    ``unmanaged`` the CPUs no pool manages now (restored from the journal before ``apply``).
    """
    pools = pools or []
    profiles = profiles or {}
    plan = {"errors": [], "notes": [], "slowdowns": [], "assignments": []}
    targets = []
    errors = plan["errors"]
    present = expand_cpus(info.get("present"))[0]
    present_text = info.get("present")
    reserved_cpus = sorted(_checked_cpus(reserved, "cpu_power_reserved_cpus", errors))
    plan["reserved"] = reserved_cpus
    missing = _difference(reserved_cpus, present)
    if missing:
        errors.append(
            f"cpu_power_reserved_cpus names CPUs {_join(missing)} that are not present on {host} "
            f"(present: {present_text})"
        )
    _check_reserved(plan, reserved_given, kubelet_reserved, kubelet_source)
    pooled = _check_pools(plan, pools, profiles, present, present_text, host)
    shared = sorted(_difference(_difference(present, reserved_cpus), pooled))
    _check_profiles(errors, profiles, shared_profile)
    if not info.get("cpufreq_available"):
        plan["notes"].append(f"no cpufreq on {host}: {'; '.join(info.get('messages') or [])} - nothing applied")
    elif not errors:
        targets = _targets(pools, shared_profile, shared)
        _assign(plan, info, profiles, targets, fallback_governor)
    # CPUs no pool (nor the shared profile) manages now, the reserved ones among them: what an earlier
    # run recorded for them (a pool since removed, a shared profile since switched off, CPUs reserved
    # since) is restored before this run applies, instead of staying applied for good.
    claimed = {c for t in targets for c in t["cpus"]} if info.get("cpufreq_available") and not errors else None
    plan["unmanaged"] = [] if claimed is None else sorted(set(present) - claimed)
    node = {k: v for k, v in (("uncore", uncore), ("power_cap", power_cap)) if v is not None}
    plan["node"] = dict(pool="node", profile=None, cpus="all", **node) if node and not errors else None
    plan["shared"] = shared
    # The node-level controls first: a BIOS-locked power limit is found only by writing it (EACCES),
    # and found first it fails the run before any pool was written (nothing to roll back).
    plan["apply"] = ([plan["node"]] if plan["node"] else []) + plan["assignments"]
    keys = ("errors", "notes", "slowdowns", "assignments", "reserved", "shared", "node", "apply", "unmanaged")
    return {k: plan[k] for k in keys}
