# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-pod CPU power profiles (issue 47), the Kubernetes Power Manager way: which profile each CPU
of a node runs, from the PowerProfiles and TimeOfDays, the pods bound to the node and the kubelet's
CPU manager checkpoint.

Pure logic, no Ansible imports, no I/O: the node agent (``poweraware-pod-power.service``) reads the
API server, ``/var/lib/kubelet/cpu_manager_state`` and the node's ``cpu_power`` facts and hands them
here; what comes back is what it applies (``power_apply.apply_assignments``), restores
(``restore_controls``), offers (extended resources) and reports (PowerNode status, Events on pods).
Runs on nodes, so Python 3.8 compatible (no ``str.removesuffix``, no ``dict | dict``, zoneinfo
only when importable).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import timezone
from fractions import Fraction

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_power_plan import (
    CSTATES_KEYS,
    expand_cpus,
    profile_frequency_mhz,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
)

__all__ = [
    "EPP_VALUES",
    "GROUP",
    "RESOURCE_PREFIX",
    "SPEC_KEYS",
    "PodPowerError",
    "check_profiles",
    "parse_cpu_manager_state",
    "plan",
    "pod_claims",
    "profiles_for_node",
    "resolve",
    "resource_profile",
    "shared_profile",
]

RESOURCE_PREFIX = "power.intel.com/"
GROUP = "power.poweraware.io"

# The kernel's preference names (intel_pstate and amd-pstate-epp alike).
EPP_VALUES = ("default", "performance", "balance_performance", "balance_power", "power")
# PowerProfile spec fields: the Power Manager's (name, shared, max, min, epp, governor) and ours.
SPEC_KEYS = ("name", "shared", "max", "min", "epp", "governor", "cstates", "cpuCapacity", "nodeSelector")
TIME_OF_DAY_KEYS = ("timeZone", "nodeSelector", "schedule")
# The Power Manager's schedule entries also take pods and cState; they are refused, not ignored.
SCHEDULE_KEYS = ("time", "powerProfile")
TERMINAL_PHASES = ("Succeeded", "Failed")

FREQUENCY_HINT = 'give whole MHz (e.g. 2400) or a percentage of the CPUs\' range as a string (e.g. "80%")'
CAPACITY_HINT = 'give whole CPUs (e.g. 4) or a share of the node\'s non-reserved online CPUs as a string (e.g. "50%")'

_PERCENT = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*%")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{2})")
# validation.IsQualifiedName's name part: what an extended resource name may hold after its domain.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# resource.Quantity's grammar (k8s.io/apimachinery), as plugins/module_utils/quantity.py parses it;
# node_power may not import that module (the module_utils layers), and only needs exact comparisons.
_QUANTITY = re.compile(
    r"(?P<number>[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class PodPowerError(ValueError):
    """Input that is not what the node agent reads (a kubelet checkpoint of another shape)."""


# --- small helpers -------------------------------------------------------------------------------


def _mapping(value):
    return value if isinstance(value, Mapping) else {}


def _join(values):
    return ", ".join(str(v) for v in values)


def _unique(items):
    """``items`` without repeats, first-seen order kept (the same problem found for two groups)."""
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _percent(value):
    """The number of an ``"N%"`` string, else None."""
    if isinstance(value, str):
        match = _PERCENT.fullmatch(value.strip())
        if match:
            return float(match.group(1))
    return None


def _whole_number(value):
    """An int that is not a bool (JSON true would otherwise pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _quantity(value):
    """A Kubernetes quantity as an exact Fraction, None when it is not one (or is negative)."""
    if _whole_number(value):
        return Fraction(value) if value >= 0 else None
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        return None
    suffix = match.group("suffix") or ""
    if suffix in _BINARY_SUFFIX:
        scale = Fraction(_BINARY_SUFFIX[suffix])
    elif suffix in _DECIMAL_EXPONENT:
        scale = Fraction(10) ** _DECIMAL_EXPONENT[suffix]
    else:
        scale = Fraction(10) ** int(suffix[1:] or 0)
    return Fraction(match.group("number")) * scale


def _resource_name_valid(resource):
    """Whether ``power.intel.com/<name>`` is an extended resource name the API server takes."""
    name = resource[len(RESOURCE_PREFIX) :]
    return len(name) <= 63 and bool(_QUALIFIED_NAME.fullmatch(name))


def _labels_match(selector, node_labels):
    labels = _mapping(node_labels)
    return all(labels.get(key) == value for key, value in selector.items())


# --- PowerProfiles -------------------------------------------------------------------------------


def _frequency(name, key, value, problems):
    """``min``/``max`` as ``("mhz", int)`` or ``("pct", float)``; None when unset or wrong."""
    if value is None:
        return None
    pct = _percent(value)
    if pct is not None:
        if pct > 100:
            problems.append(f'profile {name}: {key} {value!r} is above 100%: give a percentage within "0%".."100%"')
            return None
        return ("pct", pct)
    if isinstance(value, bool):
        problems.append(f"profile {name}: {key} {value!r} is a boolean, not a frequency: {FREQUENCY_HINT}")
    elif _whole_number(value) and value <= 0:
        problems.append(f"profile {name}: {key} {value} MHz is not above 0: {FREQUENCY_HINT}")
    elif _whole_number(value):
        return ("mhz", value)
    else:
        problems.append(f"profile {name}: {key} {value!r} is neither whole MHz nor a percentage: {FREQUENCY_HINT}")
    return None


def _check_order(name, spec, low, high, problems):
    # Of one kind the order is known now; MHz against a percentage only on a node (resolve()).
    if low is not None and high is not None and low[0] == high[0] and low[1] > high[1]:
        problems.append(f"profile {name}: min {spec['min']!r} is above max {spec['max']!r}: lower min or raise max")


def _epp(name, value, problems):
    if value is None:
        return None
    normal = value.strip().replace("-", "_") if isinstance(value, str) else None
    if normal not in EPP_VALUES:
        # The Power Manager spells balance-performance with a hyphen; the kernel with an underscore.
        problems.append(
            f"profile {name}: epp {value!r} is not an energy performance preference the kernel knows: "
            f"give one of {_join(EPP_VALUES)}"
        )
        return None
    return normal


def _governor(name, value, problems):
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(
            f"profile {name}: governor {value!r} is not a governor name: give one like powersave or performance "
            "(the node's scaling_available_governors), or leave governor out to keep each CPU's own"
        )
        return None
    return value.strip()


def _cstates(name, value, problems):
    """The same checks as cpu_power's profiles (CSTATES_KEYS), a copy of the mapping when valid."""
    if value is None:
        return None
    where = f"profile {name}: cstates"
    if not isinstance(value, Mapping):
        problems.append(f"{where} must be a mapping with keys {_join(CSTATES_KEYS)}, got {value!r}")
        return None
    before = len(problems)
    unknown = sorted(set(value) - set(CSTATES_KEYS))
    if unknown:
        problems.append(f"{where}: unknown key(s) {_join(unknown)}; allowed: {_join(CSTATES_KEYS)}")
    for key in ("disable", "enable"):
        names = value.get(key)
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            problems.append(f"{where}.{key} {names!r} is not a list of state names, e.g. [C6] or [C1E, C6]")
    latency = value.get("max_latency_us")
    if latency is not None and (not _whole_number(latency) or latency < 0):
        problems.append(f"{where}.max_latency_us {latency!r} is not a whole number of microseconds >= 0")
    return dict(value) if len(problems) == before else None


def _capacity(name, value, problems):
    if value is None:
        return ("pct", 100.0)  # every CPU of the node may run the profile
    pct = _percent(value)
    if pct is not None and pct <= 100:
        return ("pct", pct)
    if pct is not None:
        problems.append(f"profile {name}: cpuCapacity {value!r} is above 100%: {CAPACITY_HINT}")
    elif _whole_number(value) and value >= 0:
        return ("count", value)
    elif _whole_number(value):
        problems.append(f"profile {name}: cpuCapacity {value} is below 0: {CAPACITY_HINT}")
    else:
        problems.append(
            f"profile {name}: cpuCapacity {value!r} is neither whole CPUs nor a percentage: {CAPACITY_HINT}"
        )
    return None


def _selector(where, value, problems):
    """A nodeSelector's matchLabels (None: every node). Only matchLabels: an expression this code
    does not evaluate must not silently select every node."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{where}: nodeSelector {value!r} is not a mapping: give {{matchLabels: {{label: value}}}}")
        return None
    unknown = sorted(set(value) - {"matchLabels"})
    if unknown:
        problems.append(
            f"{where}: nodeSelector field(s) {_join(unknown)} are not supported: only matchLabels is "
            "(every label equal); select the nodes by labels"
        )
    labels = value.get("matchLabels")
    if labels is None:
        labels = {}
    if not isinstance(labels, Mapping):
        problems.append(f"{where}: nodeSelector.matchLabels {labels!r} is not a mapping of label: value")
        return None
    wrong = sorted(str(k) for k, v in labels.items() if not isinstance(v, str) or not isinstance(k, str))
    if wrong:
        problems.append(
            f'{where}: nodeSelector.matchLabels {_join(wrong)}: label values are strings; quote them (e.g. "true", "1")'
        )
    return None if unknown or wrong else dict(labels)


def _profile(name, spec, problems):
    """One PowerProfile's spec normalised, None when it has a problem (they are added to ``problems``)."""
    mine = []
    unknown = sorted(str(k) for k in spec if k not in SPEC_KEYS)
    if unknown:
        mine.append(f"profile {name}: unknown spec field(s) {_join(unknown)}; allowed: {_join(SPEC_KEYS)}")
    given = spec.get("name")
    if given is not None and given != name:
        # The Power Manager repeats the name in the spec; a different one is a copy-paste left over.
        mine.append(
            f"profile {name}: spec.name {given!r} differs from metadata.name {name!r}: make them equal or leave "
            "spec.name out"
        )
    shared = spec.get("shared")
    if shared is not None and not isinstance(shared, bool):
        mine.append(f"profile {name}: shared {shared!r} is not true or false: write shared: true or false")
    low = _frequency(name, "min", spec.get("min"), mine)
    high = _frequency(name, "max", spec.get("max"), mine)
    _check_order(name, spec, low, high, mine)
    profile = {
        "name": name,
        "shared": shared is True,
        "min": low,
        "max": high,
        "epp": _epp(name, spec.get("epp"), mine),
        "governor": _governor(name, spec.get("governor"), mine),
        "cstates": _cstates(name, spec.get("cstates"), mine),
        "cpu_capacity": _capacity(name, spec.get("cpuCapacity"), mine),
        "node_selector": _selector(f"profile {name}", spec.get("nodeSelector"), mine),
    }
    problems.extend(mine)
    return None if mine else profile


def check_profiles(objects):
    """``(profiles, problems)``: the valid PowerProfiles of ``objects`` (as the API returns them) by
    name, normalised (see the module's design notes), and a message for each problem found, all of
    them at once. A profile with any problem is left out: half a profile could slow a pod's CPUs in a
    way nobody asked for."""
    profiles, problems = {}, []
    for index, obj in enumerate(objects or []):
        if not isinstance(obj, Mapping):
            problems.append(f"PowerProfile #{index}: {obj!r} is not an object with metadata and spec")
            continue
        name = _mapping(obj.get("metadata")).get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"PowerProfile #{index} has no metadata.name: every PowerProfile is named")
            continue
        if name in profiles:
            problems.append(f"PowerProfile {name} is given twice: the second one is left out")
            continue
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, Mapping):
            problems.append(f"profile {name}: spec {spec!r} is not a mapping of {_join(SPEC_KEYS)}")
            continue
        profile = _profile(name, spec or {}, problems)
        if profile is not None:
            profiles[name] = profile
    return profiles, problems


def profiles_for_node(profiles, node_labels):
    """The profiles whose nodeSelector.matchLabels the node's labels all equal (no selector: all nodes)."""
    return {name: p for name, p in profiles.items() if _labels_match(p["node_selector"], node_labels)}


# --- the kubelet's CPU manager checkpoint --------------------------------------------------------


def _cpuset(text, label, problems):
    if not isinstance(text, str):
        problems.append(f'{label} {text!r} is not a cpuset string (kubelet writes them like "2-3,8")')
        return []
    try:
        return parse_cpulist(text)
    except CpuListError as exc:
        problems.append(f"{label}: {exc}")
        return []


def _state_entries(entries, problems):
    if entries is None:
        return {}  # kubelet leaves entries out when no container holds exclusive CPUs
    if not isinstance(entries, Mapping):
        problems.append(f"entries {entries!r} is not a mapping of pod UID to containers")
        return {}
    found = {}
    for uid, containers in entries.items():
        if isinstance(containers, str):
            # v1 checkpoints map container IDs to cpusets; kubelet has written v2 (by pod UID) for years
            problems.append(
                f"entries[{uid!r}] is a cpuset, not a mapping of container name to cpuset: a v1 checkpoint (by "
                "container ID) from an old kubelet; pod_power reads the v2 checkpoint (by pod UID, then container)"
            )
            continue
        if not isinstance(containers, Mapping):
            problems.append(f"entries[{uid!r}] {containers!r} is not a mapping of container name to cpuset")
            continue
        found[uid] = {name: _cpuset(text, f"entries[{uid!r}][{name!r}]", problems) for name, text in containers.items()}
    return found


def parse_cpu_manager_state(text):
    """The kubelet's ``cpu_manager_state`` (``{"policyName", "defaultCpuSet", "entries", "checksum"}``)
    as ``{"policy", "default": [cpus], "entries": {uid: {container: [cpus]}}}``. The checksum is not
    verified: the kubelet verifies it when it starts, and a file it replaces between reads is read
    again on the next pass. Raises PodPowerError naming every problem of text of another shape."""
    where = "the kubelet's cpu_manager_state"
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PodPowerError(f"{where} is not UTF-8 text ({exc})") from None
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise PodPowerError(
            f'{where} is not JSON ({exc}): expected {{"policyName", "defaultCpuSet", "entries", "checksum"}}'
        ) from None
    if not isinstance(doc, dict):
        raise PodPowerError(
            f'{where} is {type(doc).__name__} JSON, not an object {{"policyName", "defaultCpuSet", ...}}'
        )
    problems = []
    policy = doc.get("policyName")
    if not isinstance(policy, str):
        problems.append(f"policyName {policy!r} is not a string (kubelet writes none or static)")
    if "defaultCpuSet" not in doc:
        problems.append('defaultCpuSet is missing (kubelet always writes it, "" for no CPUs)')
    default = _cpuset(doc.get("defaultCpuSet", ""), "defaultCpuSet", problems)
    entries = _state_entries(doc.get("entries"), problems)
    if problems:
        raise PodPowerError(f"{where} is not a CPU manager checkpoint: {'; '.join(problems)}")
    return {"policy": policy, "default": default, "entries": entries}


# --- TimeOfDay: the shared pool's profile by time of day -----------------------------------------


def _default_tz_lookup(name):
    if name in ("UTC", "Etc/UTC"):
        return timezone.utc
    try:
        from zoneinfo import ZoneInfo  # Python 3.9+; nodes with 3.8 know UTC only
    except ImportError:
        raise LookupError("this node's Python has no zoneinfo (3.9+), so it knows UTC only") from None
    return ZoneInfo(name)


def _minutes(text):
    match = _TIME.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        return None
    return int(match.group(1)) * 60 + int(match.group(2))


def _schedule_entry(where, index, entry, profiles, problems):
    """``(minute of day, profile)`` of one schedule entry, None when it has a problem."""
    at = f"{where}: schedule[{index}]"
    if not isinstance(entry, Mapping):
        problems.append(f"{at} {entry!r} is not a mapping of {_join(SCHEDULE_KEYS)}")
        return None
    before = len(problems)
    unknown = sorted(str(k) for k in entry if k not in SCHEDULE_KEYS)
    if unknown:
        problems.append(
            f"{at} has unknown field(s) {_join(unknown)}; allowed: {_join(SCHEDULE_KEYS)} (the Power Manager's pods "
            "and cState schedule keys are not supported)"
        )
    minute = _minutes(entry.get("time"))
    if minute is None:
        problems.append(f'{at}.time {entry.get("time")!r} is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")')
    name = entry.get("powerProfile")
    if name not in profiles:
        here = [n for n, p in sorted(profiles.items()) if p["shared"]]
        problems.append(
            f"{at}.powerProfile {name!r} is no PowerProfile for this node: create it (shared: true) or name one of: "
            f"{_join(here) or 'none'}"
        )
    elif not profiles[name]["shared"]:
        problems.append(
            f"{at}.powerProfile {name} is not shared: true: the schedule sets the shared pool's profile; name a "
            f"shared profile or set shared: true on {name}"
        )
    return (minute, name) if len(problems) == before else None


def _schedule(where, spec, profiles, problems):
    schedule = spec.get("schedule")
    if not isinstance(schedule, list) or not schedule:
        problems.append(f"{where}: schedule {schedule!r} is empty or not a list: give [{{time, powerProfile}}, ...]")
        return []
    entries, first = [], {}
    for index, entry in enumerate(schedule):
        found = _schedule_entry(where, index, entry, profiles, problems)
        if found is None:
            continue
        if found[0] in first:
            problems.append(
                f"{where}: schedule[{first[found[0]]}] and schedule[{index}] both start at "
                f"{entry['time'].strip()}: give each time once"
            )
        first.setdefault(found[0], index)
        entries.append(found)
    return sorted(entries)


def _zone(where, spec, tz_lookup, problems):
    zone = spec.get("timeZone")
    zone = "UTC" if zone is None else zone
    try:
        tz = tz_lookup(zone) if isinstance(zone, str) and zone else None
        why = "not a zone name"
    except Exception as exc:  # ZoneInfoNotFoundError (a KeyError), ValueError, LookupError: all unknown here
        tz, why = None, str(exc)
    if tz is None:
        problems.append(
            f"{where}: timeZone {zone!r} is unknown on this node ({why}): give an IANA name like Europe/Berlin, or UTC"
        )
    return tz


def _time_of_day(obj, index, profiles, now_utc, tz_lookup, problems):
    """The profile one (matching) TimeOfDay names for now, None when it has a problem."""
    name = _mapping(obj.get("metadata")).get("name") or f"#{index}"
    where = f"TimeOfDay {name}"
    spec = _mapping(obj.get("spec"))
    mine = []
    unknown = sorted(str(k) for k in spec if k not in TIME_OF_DAY_KEYS)
    if unknown:
        mine.append(f"{where}: unknown spec field(s) {_join(unknown)}; allowed: {_join(TIME_OF_DAY_KEYS)}")
    tz = _zone(where, spec, tz_lookup, mine)
    entries = _schedule(where, spec, profiles, mine)
    problems.extend(mine)
    if mine or tz is None:
        return None
    now = now_utc if now_utc.tzinfo is not None else now_utc.replace(tzinfo=timezone.utc)
    local = now.astimezone(tz)
    minute = local.hour * 60 + local.minute
    started = [entry for entry in entries if entry[0] <= minute]
    # before the day's first entry, the previous day's last one still holds
    return (started or entries)[-1][1]


def shared_profile(profiles, time_of_days, node_labels, now_utc, tz_lookup=None):
    """``(name or None, problems)``: the shared pool's profile on this node now.

    A TimeOfDay whose nodeSelector matches the node decides: the entry with the latest time <= the
    local time now (wrapping to the previous day's last entry). Without one, the single shared:
    true profile for the node, or None. Anything ambiguous or wrong chooses none (the shared CPUs
    are restored, never slowed by a guess). ``tz_lookup(name)`` returns a tzinfo; by default
    zoneinfo's, where Python has it (UTC is always known).
    """
    tz_lookup = tz_lookup or _default_tz_lookup
    here = profiles_for_node(profiles, node_labels)
    problems, matching, unreadable = [], [], False
    for index, obj in enumerate(time_of_days or []):
        obj = _mapping(obj)
        where = f"TimeOfDay {_mapping(obj.get('metadata')).get('name') or f'#{index}'}"
        selector = _selector(where, _mapping(obj.get("spec")).get("nodeSelector"), problems)
        if selector is None:
            unreadable = True  # it may be meant for this node: no guess
        elif _labels_match(selector, node_labels):
            matching.append((index, obj))
    if unreadable:
        return None, problems
    if len(matching) > 1:
        names = [_mapping(obj.get("metadata")).get("name") or f"#{i}" for i, obj in matching]
        problems.append(
            f"TimeOfDays {_join(names)} all select this node: one TimeOfDay may apply to a node; narrow their "
            "nodeSelectors (the shared pool keeps no profile until then)"
        )
        return None, problems
    if matching:
        index, obj = matching[0]
        return _time_of_day(obj, index, here, now_utc, tz_lookup, problems), problems
    shared = sorted(name for name, p in here.items() if p["shared"])
    if len(shared) > 1:
        problems.append(
            f"profiles {_join(shared)} are all shared: true for this node: at most one shared profile may apply to "
            "a node without a TimeOfDay; set shared: false on all but one, narrow their nodeSelectors, or choose "
            "by time with a TimeOfDay (the shared pool keeps no profile until then)"
        )
        return None, problems
    return (shared[0] if shared else None), problems


# --- one profile on one group of CPUs ------------------------------------------------------------


def _bound(profile, key, lo, hi, cpus):
    """``(MHz, reason or None)`` of ``min``/``max`` on CPUs with cpuinfo range [lo, hi]."""
    value = profile[key]
    if value is None:
        return (lo if key == "min" else hi), None
    if value[0] == "pct":
        return profile_frequency_mhz(lo, hi, value[1]), None
    mhz = value[1]
    if mhz > hi:
        return mhz, (
            f"{key} {mhz} MHz is above CPUs {cpus}'s cpuinfo_max {hi} MHz on this node; lower {key} or use a "
            'percentage like "100%"'
        )
    if mhz < lo:
        return mhz, (
            f"{key} {mhz} MHz is below CPUs {cpus}'s cpuinfo_min {lo} MHz on this node; raise {key} or use a "
            'percentage like "0%"'
        )
    return mhz, None


def _describe(value):
    return f"{value[1]:g}%" if value[0] == "pct" else f"{value[1]} MHz"


def _frequency_reasons(profile, group, cpus):
    lo, hi = group.get("cpuinfo_min_mhz"), group.get("cpuinfo_max_mhz")
    if not _whole_number(lo) or not _whole_number(hi):
        return None, None, [f"CPUs {cpus} report no cpuinfo_min_freq/cpuinfo_max_freq, so no frequency can be set"]
    low, low_reason = _bound(profile, "min", lo, hi, cpus)
    high, high_reason = _bound(profile, "max", lo, hi, cpus)
    reasons = [r for r in (low_reason, high_reason) if r]
    if not reasons and low > high:
        reasons.append(
            f"min {_describe(profile['min'])} is above max {_describe(profile['max'])} on CPUs {cpus} "
            f"({low} MHz > {high} MHz on this node); lower min or raise max"
        )
    return low, high, reasons


def _control_reasons(profile, info):
    reasons, epp, governor = [], profile["epp"], profile["governor"]
    driver = info.get("driver") or "unknown"
    if epp is not None and not info.get("epp_supported"):
        reasons.append(
            f"epp {epp} needs an energy performance preference, which this node's CPUs do not offer (driver "
            f"{driver}); remove epp from the profile, or keep this node out with nodeSelector"
        )
    elif epp is not None and info.get("available_epp") and epp not in info["available_epp"]:
        reasons.append(
            f"epp {epp} is not among this node's energy_performance_available_preferences "
            f"({_join(info['available_epp'])}); give one of those"
        )
    available = info.get("available_governors") or []
    if governor is not None and governor not in available:
        reasons.append(
            f"governor {governor} is not available on this node (scaling_available_governors: "
            f"{_join(available) or 'none'}); give one of those or leave governor out"
        )
    if epp not in (None, "performance") and governor == "performance" and info.get("epp_refused_under_performance"):
        # intel_pstate / amd-pstate active mode: the kernel refuses the write (EBUSY)
        reasons.append(
            f"epp {epp} is refused by {driver} (EBUSY) while the governor is performance; set governor: powersave, "
            "or epp: performance"
        )
    return reasons


def _group_setting(profile, group, info):
    """``(setting, reasons)``: ``reasons`` without the ``profile <name>:`` every message starts with."""
    cpus = group.get("cpulist") or format_cpulist(group.get("cpus") or [])
    low, high, reasons = _frequency_reasons(profile, group, cpus)
    reasons += _control_reasons(profile, info)
    setting = {"min_mhz": low, "max_mhz": high, "epp": profile["epp"], "governor": profile["governor"]}
    if profile["cstates"] is not None:
        setting["cstates"] = profile["cstates"]
    return setting, reasons


def resolve(profile, group, info):
    """``(setting, problems)``: what ``profile`` sets on one limit group of ``info`` (the cpu_power
    fact): ``{min_mhz, max_mhz, epp, governor[, cstates]}``; ``problems`` say why this node cannot
    do it there (absolute MHz outside the group's cpuinfo range, EPP or a governor it lacks)."""
    setting, reasons = _group_setting(profile, group, info)
    return setting, [f"profile {profile['name']}: {reason}" for reason in reasons]


# --- pods ----------------------------------------------------------------------------------------


def resource_profile(resource, node_name, profiles):
    """The profile ``power.intel.com/<p>`` names: ``p`` itself, else ``p`` without a ``-<node>``
    suffix (the Power Manager's per-node resource names); None when neither is a profile."""
    if not isinstance(resource, str) or not resource.startswith(RESOURCE_PREFIX):
        return None
    name = resource[len(RESOURCE_PREFIX) :]
    if name in profiles:
        return name
    suffix = f"-{node_name}"
    if node_name and name.endswith(suffix) and name[: -len(suffix)] in profiles:
        return name[: -len(suffix)]
    return None


def _containers(pod):
    """``(kind, container)`` of the init containers and the containers: both get exclusive CPUs."""
    spec = _mapping(_mapping(pod).get("spec"))
    init = [("init container", c) for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    return init + [("container", c) for c in spec.get("containers") or [] if isinstance(c, Mapping)]


def _resources(container):
    resources = _mapping(container.get("resources"))
    return _mapping(resources.get("requests")), _mapping(resources.get("limits"))


def _power_resources(container):
    """``{resource: amount as written}`` of a container's power.intel.com resources (limit first:
    the API server requires one for extended resources and makes requests equal to it)."""
    requests, limits = _resources(container)
    found = {}
    for source in (requests, limits):
        for resource, amount in source.items():
            if isinstance(resource, str) and resource.startswith(RESOURCE_PREFIX):
                found[resource] = amount
    return found


def _qos_reasons(pod):
    """Why the pod is not Guaranteed (the kubelet gives exclusive CPUs to Guaranteed pods only)."""
    reasons = []
    for kind, container in _containers(pod):
        name = container.get("name")
        requests, limits = _resources(container)
        for resource in ("cpu", "memory"):
            limit = _quantity(limits.get(resource))
            if limit is None or limit <= 0:
                reasons.append(f"{kind} {name} has no {resource} limit")
            elif resource in requests and _quantity(requests[resource]) != limit:
                reasons.append(
                    f"{kind} {name} requests {resource} {requests[resource]} but its limit is {limits[resource]}"
                )
    return reasons


def _cpu_request(container):
    requests, limits = _resources(container)
    return requests.get("cpu", limits.get("cpu"))


def _claim(kind, container, resource, amount, node_name, profiles, refusals):
    """One container's claim, None (with a refusal) when it cannot be one."""
    name = container.get("name")
    profile = resource_profile(resource, node_name, profiles)
    if profile is None:
        offered = sorted(n for n, p in profiles.items() if not p["shared"])
        refusals.append(
            f"{kind} {name} asks for {resource}, but no PowerProfile of that name applies to node {node_name} "
            f"(profiles here: {_join(offered) or 'none'}): create it, or ask for one of those"
        )
        return None
    if profiles[profile]["shared"]:
        refusals.append(
            f"{kind} {name} asks for {resource}, but profile {profile} is the shared pool's (shared: true): ask for "
            "a profile without shared: true"
        )
        return None
    count = _quantity(amount)
    if count is None or count.denominator != 1:
        refusals.append(
            f"{kind} {name} asks for {amount} {resource}, not a whole number: ask for whole profile units, one per CPU"
        )
        return None
    cpu_text = _cpu_request(container)
    cpu = _quantity(cpu_text)
    if cpu is not None and cpu.denominator != 1:
        refusals.append(
            f"{kind} {name} asks for {amount} {resource} but cpu {cpu_text}, not a whole number of CPUs: the "
            f"kubelet gives exclusive CPUs only for whole CPUs; ask for cpu {int(count)}"
        )
        return None
    if cpu is not None and cpu != count:
        refusals.append(
            f"{kind} {name} asks for {amount} {resource} but cpu {cpu_text}: ask for as many profile units as CPUs"
        )
        return None
    # cpu None: no cpu limit, a refusal of the pod's QoS already
    return {"container": name, "profile": profile, "resource": resource, "count": int(count)}


def pod_claims(pod, node_name, profiles):
    """``(claims, refusals)`` of one pod: ``[{container, profile, resource, count}]`` and a message
    for each reason the pod is refused. ``profiles`` are those for the node. A refused pod claims
    nothing (its CPUs are restored, not run at a profile it half asked for)."""
    claims, refusals = [], []
    asked = [(kind, c, _power_resources(c)) for kind, c in _containers(pod)]
    resources = sorted({r for _kind, _c, found in asked for r in found})
    if not resources:
        return [], []
    if len(resources) > 1:
        count = {2: "two", 3: "three"}.get(len(resources), str(len(resources)))
        refusals.append(
            f"pod requests {count} power profiles ({_join(resources)}); a pod's CPUs run one profile: ask for one"
        )
    qos = _qos_reasons(pod)
    if qos:
        refusals.append(
            f"pod is not Guaranteed ({'; '.join(qos)}): the kubelet gives exclusive CPUs only to Guaranteed pods; "
            "give every container cpu and memory limits, with requests equal to them or left out"
        )
    for kind, container, found in asked:
        for resource, amount in sorted(found.items()):
            claim = _claim(kind, container, resource, amount, node_name, profiles, refusals)
            if claim is not None:
                claims.append(claim)
    return ([] if refusals else claims), refusals


# --- the node's plan -----------------------------------------------------------------------------


def _live_on(pod, node_name):
    """Bound here, not finished, not being deleted: the pods whose claims count."""
    metadata, spec, status = (_mapping(_mapping(pod).get(k)) for k in ("metadata", "spec", "status"))
    return (
        spec.get("nodeName") == node_name
        and status.get("phase") not in TERMINAL_PHASES
        and not metadata.get("deletionTimestamp")
    )


def _pod_id(pod):
    metadata = _mapping(pod.get("metadata"))
    return metadata.get("namespace") or "", metadata.get("name") or "", metadata.get("uid") or ""


def _capacity_cpus(capacity, usable):
    kind, value = capacity
    return value if kind == "count" else int(math.floor(usable * value / 100))


class _Node:
    """What the plan knows of the node: CPUs, limit groups and each profile's settings on them."""

    def __init__(self, name, info, reserved, profiles, problems):
        self.name, self.info = name, info
        self.reserved = sorted(self._reserved(reserved, problems))
        self.online = set(expand_cpus(info.get("online"))[0])
        self.managed = sorted(self.online - set(self.reserved))
        self.groups = list(info.get("limit_groups") or []) if info.get("cpufreq_available") else []
        self.group_of = {cpu: i for i, g in enumerate(self.groups) for cpu in expand_cpus(g.get("cpus"))[0]}
        self.ungrouped = [cpu for cpu in self.managed if cpu not in self.group_of]
        # cpufreq policies of several CPUs (acpi-cpufreq's shared ones; the cpu_power facts' policies):
        # one write sets all their CPUs, so they run one profile or none
        self.policies = {}
        for policy in (info.get("policies") or []) if self.groups else []:
            policy = _mapping(policy)
            cpus = expand_cpus(policy.get("cpus"))[0]
            if len(cpus) > 1:
                self.policies[policy.get("name")] = cpus
        # (setting, reasons) of every profile on every group: a profile the node cannot do anywhere
        # must be known before any CPU is given to it
        self.settings = {
            name: [_group_setting(p, g, info) for g in self.groups] for name, p in sorted(profiles.items())
        }

    @staticmethod
    def _reserved(reserved, problems):
        cpus, bad = expand_cpus(reserved)
        if bad:
            problems.append(
                f"reserved CPUs {reserved!r} is not a CPU list (bad part: {_join(bad)}): give the kubelet's "
                "reservedSystemCPUs, like 0-1"
            )
        return cpus

    def reasons(self, profile, cpus):
        """Why ``profile`` cannot run on ``cpus`` here ([] when it can)."""
        found = []
        ungrouped = [cpu for cpu in cpus if cpu not in self.group_of]
        if ungrouped:
            found.append(f"CPUs {format_cpulist(ungrouped)} have no cpufreq policy on this node")
        for index in sorted({self.group_of[cpu] for cpu in cpus if cpu in self.group_of}):
            found.extend(self.settings[profile][index][1])
        return _unique(found)

    def split_policies(self, wanted):
        """The shared policies whose online CPUs want different profiles (a reserved CPU wants none:
        it is never changed; offline CPUs follow their policy)."""
        return [
            name
            for name, cpus in sorted(self.policies.items())
            if len({wanted.get(cpu) for cpu in cpus if cpu in self.online}) > 1
        ]

    def all_reasons(self, profile):
        return self.reasons(profile, self.managed) if self.groups else ["this node has no cpufreq"]


def _refusal(pod, message):
    namespace, name, uid = _pod_id(pod)
    return {"namespace": namespace, "name": name, "uid": uid, "message": message}


def _held_cpus(node, pod, claim, given, problems):
    """The CPUs a claim runs its profile on: those the kubelet gave, online and not reserved."""
    wrong = [cpu for cpu in given if cpu in node.reserved]
    if wrong:
        namespace, name, _uid = _pod_id(pod)
        problems.append(
            f"the kubelet gave container {claim['container']} of pod {namespace}/{name} reserved CPUs "
            f"{format_cpulist(wrong)}: the reserved CPUs given here differ from the kubelet's reservedSystemCPUs; "
            "make them equal (reserved CPUs are never changed)"
        )
    return [cpu for cpu in given if cpu in node.online and cpu not in node.reserved]


def _pod_workloads(node, pod, entries, profiles, out, static=True):
    """One live pod: its refusals, or its workloads (and their CPUs' wanted profile). Where the kubelet
    does not run the static CPU manager (``static`` false) no pod has CPUs of its own: a pod that claims
    a profile is refused."""
    claims, refusals = pod_claims(pod, node.name, profiles)
    out["refusals"].extend(_refusal(pod, message) for message in refusals)
    if claims and not static:
        out["refusals"].append(
            _refusal(
                pod,
                f"node {node.name}'s kubelet does not run the static CPU manager policy: the pod has no CPUs of its "
                "own to give a profile",
            )
        )
        return
    namespace, name, uid = _pod_id(pod)
    held = []
    for claim in claims:
        given = _mapping(entries.get(uid)).get(claim["container"])
        if given is not None:  # None: not admitted by the kubelet yet; the next pass sees its CPUs
            held.append((claim, _held_cpus(node, pod, claim, given, out["problems"])))
    cannot = []
    for profile in _unique(claim["profile"] for claim, _cpus in held):
        why = node.reasons(profile, [cpu for claim, cpus in held if claim["profile"] == profile for cpu in cpus])
        if why:
            cannot.append(_refusal(pod, f"node {node.name} cannot do profile {profile}: {'; '.join(why)}"))
    if cannot:
        out["refusals"].extend(cannot)  # the whole pod: its CPUs are restored, not half profiled
        return
    for claim, cpus in held:
        out["workloads"].append(
            {
                "pod": f"{namespace}/{name}",
                "uid": uid,
                "container": claim["container"],
                "cpus": format_cpulist(cpus),
                "profile": claim["profile"],
            }
        )
        for cpu in cpus:
            out["wanted"][cpu] = claim["profile"]


def _split_refusal(node, workloads, wanted, split):
    """The refusal of a pod whose profile would also set CPUs that are not its at that profile."""
    first = workloads[0]
    namespace, _sep, name = first["pod"].partition("/")
    messages = []
    for profile in _unique(w["profile"] for w in workloads):
        held = {cpu for w in workloads if w["profile"] == profile for cpu in parse_cpulist(w["cpus"])}
        names = [n for n in split if held & set(node.policies[n])]
        if not names:
            continue  # its other profile's CPUs split the policy
        policy_cpus = {cpu for n in names for cpu in node.policies[n] if cpu in node.online}
        others = sorted(cpu for cpu in policy_cpus if wanted.get(cpu) != profile)
        size = max(len(node.policies[n]) for n in names)
        messages.append(
            f"node {node.name} cannot do profile {profile}: CPUs {format_cpulist(sorted(held & policy_cpus))} share "
            f"cpufreq policies ({'; '.join(f'{n}: CPUs {format_cpulist(node.policies[n])}' for n in names)}) with "
            f"CPUs {format_cpulist(others)}, which do not run it (one write sets every CPU of a policy): a profile "
            f"runs here only on whole policies of {size} CPUs; ask for a multiple of {size} CPUs where a policy is a "
            "core (the kubelet's full-pcpus-only policy option gives whole cores), or keep this node out with the "
            "profile's nodeSelector"
        )
    return {"namespace": namespace, "name": name, "uid": first["uid"], "message": "; ".join(messages)}


def _whole_policies(node, out):
    """A shared cpufreq policy runs one profile or none (apply_assignments refuses half a policy).
    A pod whose CPUs share one with CPUs that want another profile (the shared pool's, another
    pod's, none: a reserved CPU, a pod without a claim) is refused whole and its CPUs restored,
    which may split another pod's policy: so again, until no pod's is. The policies still split
    then (the shared pool beside CPUs that keep their originals) are restored whole: no CPU runs a
    profile chosen for another."""
    while True:
        split = node.split_policies(out["wanted"])
        touched = {cpu for name in split for cpu in node.policies[name]}
        refused = _unique(w["uid"] for w in out["workloads"] if set(parse_cpulist(w["cpus"])) & touched)
        if not refused:
            break
        for uid in refused:
            mine = [w for w in out["workloads"] if w["uid"] == uid]
            out["refusals"].append(_split_refusal(node, mine, out["wanted"], split))
            for workload in mine:
                for cpu in parse_cpulist(workload["cpus"]):
                    out["wanted"][cpu] = None
        out["workloads"] = [w for w in out["workloads"] if w["uid"] not in refused]
    for name in split:
        for cpu in node.policies[name]:
            if cpu in out["wanted"]:
                out["wanted"][cpu] = None


def _restored(node, wanted):
    """The CPUs to restore: those wanted at no profile, and the offline CPUs of shared policies
    restored whole (the journal restores a policy with all its CPUs or refuses)."""
    cpus = {cpu for cpu, profile in wanted.items() if profile is None}
    for policy in node.policies.values():
        if all(wanted.get(cpu) is None for cpu in policy if cpu in node.online):
            cpus.update(cpu for cpu in policy if cpu not in node.online and cpu not in node.reserved)
    return sorted(cpus)


def _assignments(node, wanted, shared_name):
    """One assignment per (profile, limit group), the shared pool's first, then by profile name."""
    cpus_of = {}
    for cpu, profile in wanted.items():
        if profile is not None:
            cpus_of.setdefault((profile, node.group_of[cpu]), []).append(cpu)
    order = sorted(cpus_of, key=lambda key: (key[0] != shared_name, key[0], key[1]))
    assignments = []
    for profile, index in order:
        setting = node.settings[profile][index][0]
        pool = "shared" if profile == shared_name else f"profile {profile}"
        assignments.append(
            dict({"pool": pool, "profile": profile, "cpus": format_cpulist(cpus_of[(profile, index)])}, **setting)
        )
    return assignments


def _offers(node, profiles, honoured, problems):
    """Extended resources and the status' profiles: the non-shared profiles the node can do on every
    CPU the kubelet may give (offered where it cannot, a pod would be admitted and then refused)."""
    resources, status = {}, []
    for name, profile in sorted(profiles.items()):
        if profile["shared"] or not honoured or node.all_reasons(name):
            continue
        resource = RESOURCE_PREFIX + name
        if not _resource_name_valid(resource):
            problems.append(
                f"profile {name}: {resource} is no valid extended resource name (the part after the / must be at "
                "most 63 characters, alphanumerics, '-', '_' or '.'): give the profile a shorter name"
            )
            continue
        capacity = _capacity_cpus(profile["cpu_capacity"], len(node.managed))
        resources[resource] = capacity
        per_node = f"{resource}-{node.name}"  # Power Manager v1 pod specs ask for this one
        if _resource_name_valid(per_node):
            resources[per_node] = capacity
        settings = [setting for setting, _reasons in node.settings[name]]
        status.append(
            {
                "name": name,
                "resource": resource,
                "capacity": capacity,
                # a profile's MHz differ between limit groups (a percentage, hybrid parts): the span
                "minMHz": min(s["min_mhz"] for s in settings),
                "maxMHz": max(s["max_mhz"] for s in settings),
                "epp": profile["epp"],
                "governor": profile["governor"],
            }
        )
    return resources, status


def _node_problems(node, profiles, state, shared_name, problems):
    if node.ungrouped and node.groups:
        problems.append(
            f"CPUs {format_cpulist(node.ungrouped)} have no cpufreq policy on this node: no profile runs on them "
            "(the kernel offers no frequency control there)"
        )
    elif not node.groups:
        detail = "; ".join(node.info.get("messages") or []) or "no cpufreq limit groups in the cpu_power facts"
        problems.append(f"this node has no cpufreq ({detail}): no profile can run here")
    for name in sorted(profiles):
        # the groups' reasons only: CPUs without cpufreq are one problem above, not one per profile
        grouped = [cpu for cpu in node.managed if cpu in node.group_of]
        problems.extend(f"profile {name}: {reason}" for reason in node.reasons(name, grouped))
    if state is None:
        problems.append(
            "no kubelet CPU manager state was read: which CPUs pods hold exclusively is unknown, so no profile is "
            "applied and none offered"
        )
    elif state.get("policy") != "static":
        problems.append(
            f"the kubelet's CPU manager policy is {state.get('policy')!r}, not static: pods get no exclusive CPUs, "
            "so no per-pod profile is offered; set cpuManagerPolicy: static in the kubelet configuration"
        )
    if shared_name is not None and shared_name not in profiles:
        problems.append(
            f"shared profile {shared_name} is no PowerProfile for this node: the shared pool keeps no profile"
        )


def plan(node_name, node_labels, pods, state, reserved, info, profiles, shared_name):
    """The node's wanted profile per CPU and everything the agent does with it (see the design notes):
    ``{assignments, restore, wanted, workloads, refusals, problems, shared, extended_resources, status}``.

    ``state`` is ``parse_cpu_manager_state``'s result (None: not read - then nothing is applied, since
    which CPUs are exclusive is unknown); ``reserved`` the kubelet's reservedSystemCPUs, never in
    ``assignments`` nor ``restore``; ``profiles`` ``check_profiles``' (those for other nodes are left
    out here); ``shared_name`` ``shared_profile``'s choice. ``wanted`` maps each online non-reserved
    CPU to a profile name or None (restored: exclusive CPUs of pods without a claim are never slowed).
    The CPUs of a shared cpufreq policy (``info``'s ``policies``) get one profile or none; ``restore``
    holds a restored policy's offline CPUs too (the journal restores a policy whole).
    """
    profiles = profiles_for_node(profiles, node_labels)
    out = {"refusals": [], "problems": [], "workloads": [], "wanted": {}}
    node = _Node(node_name, info, reserved, profiles, out["problems"])
    _node_problems(node, profiles, state, shared_name, out["problems"])
    shared_name = shared_name if shared_name in profiles else None
    entries = state["entries"] if state is not None else {}
    exclusive = {cpu for containers in entries.values() for cpus in containers.values() for cpu in cpus}
    # without a state the shared pool is unknown: any CPU may be a pod's
    shared_cpus = [cpu for cpu in node.managed if cpu not in exclusive] if state is not None else []
    for cpu in node.managed:
        # the shared profile where the node can do it; without a state every CPU may be exclusive
        ok = state is not None and shared_name is not None and not node.reasons(shared_name, [cpu])
        out["wanted"][cpu] = shared_name if ok and cpu not in exclusive else None
    # a state not read says so in the problems; its pods are not refused for it
    static = state is None or state.get("policy") == "static"
    for pod in sorted((p for p in pods or [] if _live_on(p, node.name)), key=_pod_id):
        _pod_workloads(node, pod, entries, profiles, out, static)
    _whole_policies(node, out)
    wanted = out["wanted"]
    honoured = state is not None and state.get("policy") == "static"
    resources, offered = _offers(node, profiles, honoured, out["problems"])
    assignments = _assignments(node, wanted, shared_name)
    shared = {"profile": shared_name, "cpus": format_cpulist(shared_cpus)}
    return {
        "assignments": assignments,
        "restore": _restored(node, wanted),
        "wanted": wanted,
        "workloads": out["workloads"],
        "refusals": out["refusals"],
        "problems": _unique(out["problems"]),
        "shared": shared,
        "extended_resources": resources,
        "status": {
            "sharedPool": dict(shared),
            "reservedCPUs": format_cpulist(node.reserved),
            "activeProfiles": sorted({a["profile"] for a in assignments}),
            "workloads": [dict(w) for w in out["workloads"]],
            "profiles": offered,
        },
    }
