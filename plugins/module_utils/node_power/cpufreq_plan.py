# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 4 of the node power library: P-state request validation and planning (no writes).

* Frequencies must lie within each CPU's own cpuinfo limits (hybrid CPUs differ); min <= max.
* Raising a range writes max then min, lowering writes min then max; governor before EPP.
* In intel_pstate / amd-pstate active mode an EPP other than ``performance`` is refused (EBUSY)
  while the governor is ``performance``: such a request is refused before anything is written.
* A CPU list must cover whole cpufreq policies (one write changes every CPU of a policy).

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import (
    EPP,
    GOV,
    MAX,
    MIN,
    normalize_epp,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import (
    CpuListError,
    format_cpulist,
    is_decimal,
    parse_cpulist,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import CPU_DIR, ValidationError


def _freq_spec_to_khz(spec, pol, label, cpu):
    """``spec`` is an int (MHz) or 'min'/'max' (this CPU's own cpuinfo limit)."""
    if spec is None:
        return None
    lo = int(pol["cpuinfo_min_freq"])
    hi = int(pol["cpuinfo_max_freq"])
    not_a_frequency = ValidationError(
        f"{label}={spec!r} is not a frequency: give MHz as an integer, or 'min' / 'max' for each CPU's own limit"
    )
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "min":
            return lo
        if text == "max":
            return hi
        if not is_decimal(text):
            raise not_a_frequency
        spec = int(text)
    elif isinstance(spec, float) and spec.is_integer():
        spec = int(spec)  # 2000.0 from a YAML float or a Jinja expression
    elif isinstance(spec, bool) or not isinstance(spec, int):
        # a list, a bool, 2000.5 (int() would drop the .5 silently)
        raise not_a_frequency
    khz = spec * 1000
    if khz < lo or khz > hi:
        raise ValidationError(
            f"{label}={spec} MHz is outside CPU {cpu}'s limits {lo // 1000}-{hi // 1000} MHz "
            f"({pol['name']}, cpuinfo_min_freq/cpuinfo_max_freq); use a value in that range or 'min'/'max'"
        )
    return khz


class Request:
    """What the user asked for, after parsing (no I/O)."""

    def __init__(self, cpus=None, reserved_cpus=None, min_mhz=None, max_mhz=None, governor=None, epp=None):
        try:
            self.cpus = parse_cpulist(cpus) if cpus not in (None, "all") else None
            self.reserved = parse_cpulist(reserved_cpus)
        except CpuListError as exc:
            raise ValidationError(str(exc)) from exc
        self.all_cpus = cpus == "all"
        self.min_mhz = min_mhz
        self.max_mhz = max_mhz
        self.governor = governor
        self.epp = str(epp) if epp is not None else None
        for label, value in (("min_mhz", min_mhz), ("max_mhz", max_mhz)):
            if isinstance(value, bool) or (isinstance(value, int) and value <= 0):
                raise ValidationError(f"{label}={value!r} is not a frequency: give a positive integer in MHz")
        if self.epp == "default":
            raise ValidationError(
                "epp='default' cannot be verified on read-back (the kernel reports the firmware value it maps to); "
                "name the preference explicitly, e.g. balance_performance"
            )

    def settings(self):
        return {"min_mhz": self.min_mhz, "max_mhz": self.max_mhz, "governor": self.governor, "epp": self.epp}


def resolve_cpus(topo, request):
    """Return (managed online CPUs, skipped offline CPUs) or raise ValidationError."""
    wanted = list(topo.present) if request.all_cpus or request.cpus is None else request.cpus
    not_present = [c for c in wanted if c not in topo.present]
    if not_present:
        raise ValidationError(
            f"CPU {format_cpulist(not_present)} is not present on this machine (present: "
            f"{format_cpulist(topo.present)}); remove it from cpus"
        )
    not_present = [c for c in request.reserved if c not in topo.present]
    if not_present:
        raise ValidationError(
            f"reserved CPU {format_cpulist(not_present)} is not present on this machine (present: "
            f"{format_cpulist(topo.present)}); fix reserved_cpus"
        )
    managed = [c for c in wanted if c not in request.reserved]
    if not managed:
        raise ValidationError(
            f"no CPU left to manage: cpus {format_cpulist(wanted)} minus reserved_cpus "
            f"{format_cpulist(request.reserved)} is empty"
        )
    skipped = [c for c in managed if c not in topo.online]
    online = [c for c in managed if c in topo.online]
    if not online:  # the run would succeed having applied nothing, and say nothing
        raise ValidationError(
            f"every CPU to manage is offline (cpus {format_cpulist(managed)}; online: {format_cpulist(topo.online)}): "
            "nothing would be applied; bring them online first (echo 1 > /sys/devices/system/cpu/cpuN/online) or "
            "choose online CPUs in cpus"
        )
    return online, skipped


def values_equal(attr, current, desired, tolerance_khz):
    if current is None:
        return desired is None
    if attr in (MIN, MAX):
        if not str(current).isdigit():
            return False
        return abs(int(current) - int(desired)) <= tolerance_khz
    # EPP too: compared as the kernel shows it (a number is a value with no name on this CPU)
    return str(current).strip() == str(desired).strip()


def order_writes(current, target):
    """Safe write order for one policy: frequencies (raise: max first; lower: min first), governor, EPP.

    ``current`` and ``target`` map attribute -> sysfs string; only attributes in ``target``
    that differ are written (the caller filters).
    """
    writes = []
    freq = [a for a in (MIN, MAX) if a in target]
    if freq:
        cur_max = int(current.get(MAX) or 0)
        new_max = int(target.get(MAX, cur_max))
        order = [MAX, MIN] if new_max > cur_max else [MIN, MAX]
        writes.extend((a, target[a]) for a in order if a in target)
    if GOV in target:
        writes.append((GOV, target[GOV]))
    if EPP in target:
        writes.append((EPP, target[EPP]))
    return writes


def _frequency_target(request, pol, current, first):
    """Validated kHz targets {MIN: ..., MAX: ...} for one policy (only the bounds the request sets)."""
    target = {}
    new_min = _freq_spec_to_khz(request.min_mhz, pol, "min_mhz", first)
    new_max = _freq_spec_to_khz(request.max_mhz, pol, "max_mhz", first)
    # The current bounds, None when unreadable: a bound the request leaves alone is judged against
    # the other only when the kernel told us what it is.
    cur_min = int(current[MIN]) if current.get(MIN) else None
    cur_max = int(current[MAX]) if current.get(MAX) else None
    if new_min is not None and new_max is not None:
        if new_min > new_max:
            raise ValidationError(
                f"min_mhz ({new_min // 1000}) is above max_mhz ({new_max // 1000}) for CPU {first}; "
                "min_mhz must be <= max_mhz"
            )
    elif new_min is not None and cur_max is not None and new_min > cur_max:
        raise ValidationError(
            f"min_mhz ({new_min // 1000}) would be above CPU {first}'s current scaling_max_freq "
            f"({cur_max // 1000} MHz) and the kernel would clamp it; also set max_mhz"
        )
    elif new_max is not None and cur_min is not None and new_max < cur_min:
        raise ValidationError(
            f"max_mhz ({new_max // 1000}) would be below CPU {first}'s current scaling_min_freq "
            f"({cur_min // 1000} MHz) and the kernel would clamp it; also set min_mhz"
        )
    if new_min is not None:
        target[MIN] = str(new_min)
    if new_max is not None:
        target[MAX] = str(new_max)
    return target


def _governor_epp_target(topo, request, pol, name, current, first):
    """Validated governor / EPP targets for one policy."""
    target = {}
    governor = request.governor
    if governor is not None:
        if governor not in pol["available_governors"]:
            raise ValidationError(
                f"governor {governor!r} is not available for CPU {first} ({name}, driver {topo.driver}); "
                f"scaling_available_governors: {' '.join(pol['available_governors']) or 'none'}"
            )
        target[GOV] = governor
    if request.epp is not None:
        if not pol["has_epp"]:
            raise ValidationError(
                f"CPU {first} ({name}, driver {topo.driver}) has no energy_performance_preference: EPP needs "
                "intel_pstate or amd-pstate-epp with HWP/CPPC; drop epp for this node"
            )
        epp = normalize_epp(str(request.epp))
        if is_decimal(epp):
            # a register value: intel_pstate takes 0-255 (Documentation/admin-guide/pm/intel_pstate.rst);
            # which preference it is differs by CPU model, so it is compared as the number it is
            if topo.driver != "intel_pstate" or int(epp) > 255:
                raise ValidationError(
                    f"epp {request.epp!r} is a raw register value, which {topo.driver} does not take"
                    + (" (intel_pstate takes 0-255)" if topo.driver == "intel_pstate" else "")
                    + f"; give a name from energy_performance_available_preferences: {' '.join(pol['available_epp'])}"
                )
        elif epp not in pol["available_epp"]:
            raise ValidationError(
                f"epp {request.epp!r} is not available for CPU {first} ({name}); "
                f"energy_performance_available_preferences: {' '.join(pol['available_epp'])}"
            )
        final_gov = governor if governor is not None else current.get(GOV)
        # 0 is HWP_EPP_PERFORMANCE on every model (both drivers): the one value the kernel allows there
        if topo.epp_active_mode and final_gov == "performance" and epp not in ("performance", "0"):
            raise ValidationError(
                f"epp {request.epp!r} is refused by {topo.driver} (EBUSY) while CPU {first} ({name}) uses the "
                "'performance' governor; set governor: powersave, or epp: performance"
            )
        target[EPP] = epp
    return target


def _plan_policy(topo, request, name, cpus, managed_set, tolerance_khz):
    """Validate the request for one policy and return its plan item."""
    pol = topo.policies[name]
    first = cpus[0]
    outside = [c for c in pol["related_cpus"] if c not in managed_set and c in topo.online]
    if outside:
        raise ValidationError(
            f"CPU {format_cpulist(cpus)} {'shares' if len(cpus) == 1 else 'share'} cpufreq policy {name} "
            f"with CPU {format_cpulist(outside)} "
            f"(related_cpus {format_cpulist(pol['related_cpus'])}); one write changes all of them: "
            "include or exclude the whole policy (check reserved_cpus and pools)"
        )
    current = dict(pol["values"])
    target = _frequency_target(request, pol, current, first)
    target.update(_governor_epp_target(topo, request, pol, name, current, first))
    changes = {a: v for a, v in target.items() if not values_equal(a, current.get(a), v, tolerance_khz)}
    return {"policy": pol, "cpus": cpus, "current": current, "target": target, "changes": changes}


def _checked_tolerance_khz(topo, names, tolerance_mhz):
    """The read-back tolerance in kHz, refused where it would take a wrong frequency for applied: a
    tolerance of half a policy's cpuinfo range or more judges a request in the middle of the range
    equal to either end, so the run would report changed=false with nothing written."""
    tolerance_khz = int(tolerance_mhz) * 1000
    for name in names:
        pol = topo.policies[name]
        lo, hi = int(pol["cpuinfo_min_freq"]), int(pol["cpuinfo_max_freq"])
        if tolerance_khz and tolerance_khz * 2 >= hi - lo:
            first = min(pol["related_cpus"] or [0])
            raise ValidationError(
                f"tolerance_mhz={tolerance_mhz} is not below half of CPU {first}'s range ({lo // 1000}-{hi // 1000} "
                f"MHz, {name}): a frequency that far from the request would be taken for applied and nothing "
                f"written; keep the default 100 (drivers round to 100 MHz steps), at most {(hi - lo) // 2000 - 1}"
            )
    return tolerance_khz


def plan_present(topo, request, tolerance_mhz=100):
    """Validate the whole request against the live topology and return the plan (no writes)."""
    if not topo.policies:
        raise ValidationError(
            "no cpufreq policy found under "
            f"{topo.acc.path(CPU_DIR + '/cpufreq')}: the kernel exposes no CPU frequency scaling on this machine "
            "(no cpufreq driver, intel_pstate=disable, or a VM); nothing can be applied. "
            "Check cpu_power_info's cpufreq_available before calling cpu_power_profile"
        )
    settings = request.settings()
    if all(v is None for v in settings.values()):
        raise ValidationError("nothing to apply: give at least one of min_mhz, max_mhz, governor, epp")
    online, skipped = resolve_cpus(topo, request)
    no_cpufreq = [c for c in online if c not in topo.cpu_policy]
    if no_cpufreq:
        raise ValidationError(
            f"CPU {format_cpulist(no_cpufreq)} is online but has no cpufreq directory "
            f"({topo.acc.path(CPU_DIR)}/cpu{no_cpufreq[0]}/cpufreq is missing); remove it from cpus"
        )
    by_policy = {}
    for cpu in online:
        by_policy.setdefault(topo.cpu_policy[cpu], []).append(cpu)
    tolerance_khz = _checked_tolerance_khz(topo, topo.policy_order(by_policy), tolerance_mhz)
    managed_set = set(online) | set(skipped)
    plan = [
        _plan_policy(topo, request, name, by_policy[name], managed_set, tolerance_khz)
        for name in topo.policy_order(by_policy)
    ]
    return {"policies": plan, "skipped_offline": skipped, "managed": online, "tolerance_khz": tolerance_khz}


def plan_absent(topo, store, cpus=None, tolerance_mhz=100):
    """Plan restoring recorded originals (for the policies covering ``cpus``, or all)."""
    wanted = None
    if cpus not in (None, "all"):
        try:
            wanted = set(parse_cpulist(cpus))
        except CpuListError as exc:
            raise ValidationError(str(exc)) from exc
    tolerance_khz = int(tolerance_mhz) * 1000
    plan = []
    skipped = []
    forget = []
    names = sorted(store.policies, key=lambda n: min(parse_cpulist(store.policies[n]["cpus"]) or [0]))
    for name in reversed(names):  # reverse of application order
        entry = store.policies[name]
        related = parse_cpulist(entry["cpus"])
        if wanted is not None and not wanted.intersection(related):
            continue
        if wanted is not None and not set(related) <= wanted:
            raise ValidationError(
                f"cpus {format_cpulist(sorted(wanted))} cover only part of cpufreq policy {name} "
                f"(CPUs {entry['cpus']}); restore the whole policy"
            )
        online_members = [c for c in related if c in topo.online]
        if not online_members or name not in topo.policies:
            skipped.extend(related)
            continue
        pol = topo.policies[name]
        current = dict(pol["values"])
        target = dict(entry["original"])
        changes = {a: v for a, v in target.items() if not values_equal(a, current.get(a), v, tolerance_khz)}
        plan.append({"policy": pol, "cpus": online_members, "current": current, "target": target, "changes": changes})
        forget.append(name)
    return {"policies": plan, "skipped_offline": sorted(set(skipped)), "forget": forget, "tolerance_khz": tolerance_khz}
