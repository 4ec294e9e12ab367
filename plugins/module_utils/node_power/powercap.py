# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Optional package power cap through powercap (RAPL): discovery, kernel rules, planner.

Kernel facts (Documentation/power/powercap/powercap.rst, drivers/powercap/powercap_sys.c,
drivers/powercap/intel_rapl_common.c):

* Package zones are found and named by ``power_zones.discover_rapl_zones`` (``package-N``).
* Each zone has ``enabled`` and constraints ``constraint_K_{name, power_limit_uw,
  time_window_us, max_power_uw[, min_power_uw, max_time_window_us, min_time_window_us]}``;
  ``constraint_0`` is ``long_term`` (PL1), ``constraint_1`` ``short_term`` (PL2).
  ``power_limit_uw`` / ``time_window_us`` are 0644 and parsed with ``kstrtoull`` (EINVAL).
* A limit locked by the BIOS (MSR lock bit) refuses every write with EACCES ("locked by BIOS,
  monitoring only"), and ``enabled`` then reads 0; nothing in sysfs says "locked" before a write,
  so the lock is found by the first write, which fails, and the run rolls back.
* Writes are converted to the hardware's power unit (1/8 W on most parts: the value is truncated
  to 125000 uW steps) and masked to the 15-bit field; the kernel does not compare the limit with
  ``max_power_uw`` - a limit above it is accepted and the hardware simply never reaches it. This
  planner refuses limits above ``max_power_uw`` and below ``min_power_uw`` where present. Nor is
  there a lower bound (0.5 W on a 125 W package is written and throttles the package to a crawl);
  intel_rapl reports no ``min_power_uw`` for package zones, so the floor there is FLOOR_FRACTION of
  ``max_power_uw``, which ``allow_below_floor: true`` lifts (the zone's own minimum stays).
* Time windows are encoded as 2^Y * (1 + F/4) time units (976 us): the value read back can differ
  by up to a quarter; read-back is judged with that resolution.
* Whether a write is needed is decided by what the kernel would hold after it (``held``), not by
  the read-back tolerance: a 349.5 W / 874496 us limit is not "350 W / 1 s" - the kernel would hold
  350 W / 999424 us. The power unit is the MSR's (1/2^PU W, integer uW in the kernel; PU=3, 125000
  uW, on Intel's parts so far); every value the zone reads is a multiple of it, so a finer unit is
  taken from the readings when they show one. The time unit is 1000000 / 2^10 = 976 us
  (rapl_compute_time_window_core's integer arithmetic); where the current window is not of that
  form, the unit is not the usual one and the quarter-resolution rule decides instead.
* AMD exposes RAPL energy counters without power-limit constraints; hwmon-only machines have no
  powercap: the control says so and changes nothing.

Request (``power_cap``): ``watts`` (required, finite), ``time_window_us``, ``packages`` (package
ids; default all), ``constraint`` (``long_term`` by default), ``allow_below_floor`` (false).

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import errno
import math
import re

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import discover_rapl_zones
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import POWERCAP_DIR, read_optional

CONTROL = "power_cap"
KEYS = ("watts", "time_window_us", "packages", "constraint", "allow_below_floor")
# Without a min_power_uw, a limit under this share of max_power_uw is refused unless allow_below_floor.
FLOOR_FRACTION = 0.25
POWER_TOLERANCE_UW = 1000000  # read-back tolerance: the limit is truncated to the power unit (1/8 W typically)
# MSR_RAPL_POWER_UNIT: power unit 1/2^PU W (PU=3 by default), time unit 1/2^TU s (TU=10), both as the
# kernel's integer microwatts / microseconds (intel_rapl_common.c rapl_check_unit_core)
POWER_UNITS_UW = tuple(1000000 // (1 << pu) for pu in range(3, 16))
TIME_UNIT_US = 1000000 // (1 << 10)
LOCKED_HINT = (
    "the RAPL power limit is locked by the BIOS/firmware (intel_rapl: 'locked by BIOS, monitoring only'); "
    "drop power_cap for this node or unlock it in the firmware setup"
)
_CONSTRAINT = re.compile(r"^constraint_(\d+)_name$")


def _int(acc, rel):
    text = read_optional(acc, rel)
    return int(text) if text is not None and text.isdigit() else None


def zone_identity(zone):
    """What names a package zone across boots: its ``name`` (package-N[-die-M]). Its directory number
    is the id the powercap class handed out in registration order (powercap_sys.c), which may differ
    on the next boot; the journal keeps an original under this identity."""
    return f"RAPL zone {zone['name']}" if zone.get("name") else None


def _constraints(acc, rel):
    out = []
    indexes = sorted(int(m.group(1)) for m in (_CONSTRAINT.match(e) for e in acc.listdir(rel)) if m)
    for k in indexes:
        prefix = f"{rel}/constraint_{k}_"
        if not acc.exists(prefix + "power_limit_uw"):
            continue
        out.append(
            {
                "index": k,
                "name": read_optional(acc, prefix + "name"),
                "power_limit_uw": _int(acc, prefix + "power_limit_uw"),
                "time_window_us": _int(acc, prefix + "time_window_us"),
                "max_power_uw": _int(acc, prefix + "max_power_uw"),
                "min_power_uw": _int(acc, prefix + "min_power_uw"),
                "max_time_window_us": _int(acc, prefix + "max_time_window_us"),
                "min_time_window_us": _int(acc, prefix + "min_time_window_us"),
            }
        )
    return out


def read_powercap(acc):
    """Package zones with their ``enabled`` flag and power-limit constraints."""
    if not acc.isdir(POWERCAP_DIR):
        return {"available": False, "zones": []}
    found, _skipped = discover_rapl_zones(acc, POWERCAP_DIR)
    zones = []
    for zone in found:
        zones.append(
            {
                "zone": zone["zone"],
                "name": zone["name"],
                "package": zone["package"],
                "die": zone["die"],
                "path": zone["path"],
                "enabled": read_optional(acc, f"{zone['path']}/enabled"),
                "constraints": _constraints(acc, zone["path"]),
            }
        )
    return {"available": any(z["constraints"] for z in zones), "zones": zones}


def powercap_facts(info):
    messages = []
    if not info["zones"]:
        messages.append("no RAPL package zone in powercap: a package power cap cannot be set")
    elif not info["available"]:
        messages.append("the RAPL package zones have no power-limit constraints (energy counters only)")
    zones = [{k: v for k, v in z.items() if k != "path"} for z in info["zones"]]
    return {"available": info["available"], "zones": zones, "messages": messages}


# --- request validation ------------------------------------------------------------------------


def _positive_int(spec, key, problems, what):
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        problems.append(f"power_cap.{key}={value!r} is not {what}")
        return None
    return value


def check_spec(spec):
    """Validate the shape of a ``power_cap`` request. Returns (fields, problems)."""
    if not isinstance(spec, dict):
        return {}, [f"power_cap={spec!r} is not a mapping: give watts (and optionally time_window_us, packages)"]
    problems = []
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        problems.append(f"power_cap has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
    watts = spec.get("watts")
    if watts is None:
        problems.append("power_cap.watts is required: the package power limit in watts, e.g. 150")
    elif isinstance(watts, bool) or not isinstance(watts, (int, float)) or not math.isfinite(watts) or watts <= 0:
        # (nan compares false with everything and inf has no microwatt value: both would crash the plan)
        problems.append(f"power_cap.watts={watts!r} is not a power: give watts as a finite positive number, e.g. 150")
        watts = None
    window = _positive_int(
        spec, "time_window_us", problems, "a time window: give microseconds as a positive whole number, e.g. 1000000"
    )
    packages = spec.get("packages")
    if packages is not None and (
        not isinstance(packages, (list, tuple))
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in packages)
    ):
        problems.append(f"power_cap.packages={packages!r} is not a list of package ids, e.g. [0, 1]")
        packages = None
    elif packages is not None and len(packages) == 0:
        # an empty list selects no zone: the run would succeed and cap nothing
        problems.append("power_cap.packages is empty, which caps no package: omit it for every package or name "
                        "them, e.g. [0, 1]")  # fmt: skip
        packages = None
    constraint = spec.get("constraint") or "long_term"
    allow_low = spec.get("allow_below_floor")
    if allow_low is not None and not isinstance(allow_low, bool):
        problems.append(f"power_cap.allow_below_floor={allow_low!r} is not a boolean: give true or false")
        allow_low = None
    fields = {"watts": watts, "time_window_us": window, "packages": packages, "constraint": constraint}
    if allow_low:
        fields["allow_below_floor"] = True
    return fields, problems


def _check_zone(zone, con, fields, problems):
    uw = int(round(fields["watts"] * 1000000))
    where = f"{zone['zone']} ({zone['name']})"
    prefix = f"constraint_{con['index']}"
    if con["max_power_uw"] and uw > con["max_power_uw"]:
        problems.append(
            f"power_cap.watts={fields['watts']:g} is above {where}'s {con['name']} max_power_uw "
            f"{con['max_power_uw'] / 1e6:g} W ({prefix}_max_power_uw): the kernel would accept it but the hardware "
            f"would never reach it; use at most {con['max_power_uw'] / 1e6:g}"
        )
    if con["min_power_uw"] and uw < con["min_power_uw"]:
        problems.append(
            f"power_cap.watts={fields['watts']:g} is below {where}'s {con['name']} min_power_uw "
            f"{con['min_power_uw'] / 1e6:g} W ({prefix}_min_power_uw); use at least {con['min_power_uw'] / 1e6:g}"
        )
    elif not con["min_power_uw"] and con["max_power_uw"] and not fields.get("allow_below_floor"):
        floor = con["max_power_uw"] * FLOOR_FRACTION
        if uw < floor:
            problems.append(
                f"power_cap.watts={fields['watts']:g} is under a quarter of {where}'s {con['name']} max_power_uw "
                f"{con['max_power_uw'] / 1e6:g} W ({prefix}_max_power_uw; the zone reports no min_power_uw): the "
                f"package would be throttled far below its rating; use at least {floor / 1e6:g}, or set "
                "power_cap.allow_below_floor: true if so low a cap is intended"
            )
    window = fields["time_window_us"]
    lo, hi = con["min_time_window_us"], con["max_time_window_us"]
    if window is not None and ((lo and window < lo) or (hi and window > hi)):
        problems.append(
            f"power_cap.time_window_us={window} is outside {where}'s {con['name']} range {lo or 0}-{hi} us "
            f"({prefix}_min_time_window_us/{prefix}_max_time_window_us); use a value in that range"
        )
    return uw


def power_unit_uw(zone):
    """The zone's power unit: the coarsest MSR unit (1/8 W down to 1/2^15 W) that divides every power
    value the zone reads (they are all multiples of the real one); 1 when none does."""
    values = [con[key] for con in zone["constraints"] for key in ("power_limit_uw", "max_power_uw") if con.get(key)]
    for unit in POWER_UNITS_UW:
        if all(value % unit == 0 for value in values):
            return unit
    return 1


def held_power_uw(uw, unit):
    """What power_limit_uw reads after writing ``uw``: rapl_unit_xlate truncates to whole units."""
    return uw // unit * unit


def held_window_us(us, unit=TIME_UNIT_US):
    """What time_window_us reads after writing ``us`` (rapl_compute_time_window_core both ways:
    2^Y * (1 + F/4) units, F truncated; the 7-bit field saturates)."""
    if us < unit:
        return unit  # raw 0: Y=0, F=0, read back as one unit
    units = us // unit
    y = units.bit_length() - 1
    if y > 0x1F:
        y, f = 0x1F, 3
    else:
        f = 4 * (units - (1 << y)) // (1 << y)
    return (1 << y) * (4 + f) * unit // 4


def _window_held(con, window):
    """The window the kernel would hold, when the current one shows the usual time unit (else None:
    the read-back resolution decides)."""
    current = con.get("time_window_us")
    if current is None or held_window_us(current) != current:
        return None
    return str(held_window_us(window))


def _zone_writes(zone, con, uw, window):
    prefix = f"{zone['path']}/constraint_{con['index']}_"
    base = {"control": CONTROL, "cpu": None, "hints": {errno.EACCES: LOCKED_HINT}}
    if zone_identity(zone):
        base["identity"] = zone_identity(zone)
    writes = [
        dict(base, path=prefix + "power_limit_uw", label=f"{zone['name']} {con['name']} power_limit_uw",
             current=_str(con["power_limit_uw"]), target=str(uw), compare="tolerance", tolerance=POWER_TOLERANCE_UW,
             held=str(held_power_uw(uw, power_unit_uw(zone))))
    ]  # fmt: skip
    if window is not None:
        writes.append(
            dict(base, path=prefix + "time_window_us", label=f"{zone['name']} {con['name']} time_window_us",
                 current=_str(con["time_window_us"]), target=str(window), compare="time_window",
                 held=_window_held(con, window))
        )  # fmt: skip
    writes.append(
        dict(base, path=f"{zone['path']}/enabled", label=f"{zone['name']} enabled",
             current=zone["enabled"], target="1", compare="exact")
    )  # fmt: skip
    return writes


def _str(value):
    return None if value is None else str(value)


def plan_power_cap(info, spec):
    """Validate ``spec`` against the package zones and return the control plan (no writes)."""
    fields, problems = check_spec(spec)
    plan = {"control": CONTROL, "available": info["available"], "messages": [], "writes": [], "problems": problems}
    if problems:
        return plan
    if not info["available"]:
        why = "no RAPL package zone in powercap" if not info["zones"] else "RAPL zones without power-limit constraints"
        plan["messages"].append(f"power_cap: {why} on this machine; power_cap skipped, nothing changed")
        return plan
    known = sorted({z["package"] for z in info["zones"]})
    for pkg in fields["packages"] or []:
        if pkg not in known:
            problems.append(
                f"power_cap.packages names package {pkg}, which has no RAPL zone "
                f"(packages: {', '.join(str(p) for p in known)}); fix packages"
            )
    for zone in info["zones"]:
        if fields["packages"] is not None and zone["package"] not in fields["packages"]:
            continue
        con = next((c for c in zone["constraints"] if c["name"] == fields["constraint"]), None)
        if con is None:
            names = " ".join(c["name"] or "?" for c in zone["constraints"])
            problems.append(
                f"power_cap.constraint={fields['constraint']!r} is not a constraint of {zone['zone']} "
                f"({zone['name']}); constraints: {names}"
            )
            continue
        uw = _check_zone(zone, con, fields, problems)
        plan["writes"].extend(_zone_writes(zone, con, uw, fields["time_window_us"]))
    return plan
