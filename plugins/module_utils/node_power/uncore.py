# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Uncore frequency per package/die: discovery, kernel rules and the planner (no writes here).

Kernel facts (Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst,
drivers/platform/x86/intel/uncore-frequency/uncore-frequency{,-common,-tpmi}.c):

* ``/sys/devices/system/cpu/intel_uncore_frequency/``: legacy (MSR 0x620) driver: one
  ``package_XX_die_YY`` directory per die; TPMI driver: one ``uncoreNN`` directory per power
  domain / fabric cluster with ``package_id``, ``domain_id``, ``fabric_cluster_id`` (root-only
  reads), plus a ``package_XX_die_00`` directory per package whose writes apply to every
  cluster of the package. This planner writes the ``uncoreNN`` directories on TPMI machines and
  leaves the package-level directory alone.
* ``min_freq_khz`` / ``max_freq_khz`` (0644), ``initial_min_freq_khz`` / ``initial_max_freq_khz``
  (0444, sampled at driver load: the range to go back to), ``current_freq_khz`` (0400).
* A write is ``kstrtouint`` (EINVAL otherwise) divided by 100000 (the ratio unit): the value is
  truncated to 100 MHz, and a ratio of 0 or above 127 is EINVAL. The driver does not compare min
  with max nor with the ``initial_*`` range (the hardware clamps the running frequency), so this
  planner refuses min > max and values outside ``initial_*`` itself, and values that are not a
  multiple of 100000 kHz (they would read back truncated).
* When the last CPU of a die goes offline the legacy directory is removed.
* AMD and ARM have no such interface: the control says so and changes nothing.

Request (``uncore``): ``min_khz`` / ``max_khz`` (kHz) or ``min_pct`` / ``max_pct`` (0-100 of each
domain's initial range, rounded down to 100 MHz), and ``packages`` (package ids; default all).

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import re

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import CPU_DIR, read_optional

CONTROL = "uncore"
UNCORE_DIR = CPU_DIR + "/intel_uncore_frequency"
RATIO_KHZ = 100000
KEYS = ("min_khz", "max_khz", "min_pct", "max_pct", "packages")
_LEGACY = re.compile(r"^package_(\d+)_die_(\d+)$")
_TPMI = re.compile(r"^uncore(\d+)$")


def _int(acc, rel):
    text = read_optional(acc, rel)
    return int(text) if text is not None and text.isdigit() else None


def domain_identity(domain):
    """What names a TPMI uncore domain across boots: its package and domain ids. ``uncoreNN`` is an
    id handed out in registration order (uncore-frequency-common.c, ida_alloc), which may differ on
    the next boot. A legacy directory's name (package_XX_die_YY) is its identity already: None."""
    if domain.get("domain_id") is None or domain.get("package") is None:
        return None
    return f"uncore package {domain['package']} domain {domain['domain_id']}"


def _read_domain(acc, entry):
    rel = f"{UNCORE_DIR}/{entry}"
    domain = {
        "name": entry,
        "path": rel,
        "min_khz": _int(acc, f"{rel}/min_freq_khz"),
        "max_khz": _int(acc, f"{rel}/max_freq_khz"),
        "initial_min_khz": _int(acc, f"{rel}/initial_min_freq_khz"),
        "initial_max_khz": _int(acc, f"{rel}/initial_max_freq_khz"),
        "current_khz": _int(acc, f"{rel}/current_freq_khz"),
    }
    legacy = _LEGACY.match(entry)
    if legacy:
        domain.update(package=int(legacy.group(1)), die=int(legacy.group(2)), domain_id=None)
    else:
        domain.update(
            package=_int(acc, f"{rel}/package_id"),
            die=None,
            domain_id=_int(acc, f"{rel}/domain_id"),
            cluster_id=_int(acc, f"{rel}/fabric_cluster_id"),
        )
    return domain


def read_uncore(acc):
    """The uncore domains the planner manages (``interface``: legacy, tpmi or None)."""
    if not acc.isdir(UNCORE_DIR):
        return {"available": False, "interface": None, "domains": [], "package_dirs": []}
    entries = acc.listdir(UNCORE_DIR)
    tpmi = [e for e in entries if _TPMI.match(e)]
    legacy = [e for e in entries if _LEGACY.match(e)]
    if tpmi:
        domains = [_read_domain(acc, e) for e in sorted(tpmi, key=lambda e: int(e[6:]))]
        return {"available": True, "interface": "tpmi", "domains": domains, "package_dirs": legacy}
    domains = [_read_domain(acc, e) for e in legacy]
    return {"available": bool(domains), "interface": "legacy" if domains else None, "domains": domains,
            "package_dirs": []}  # fmt: skip


def uncore_facts(info):
    messages = []
    if not info["available"]:
        messages.append(
            "no intel_uncore_frequency directory: the driver is not loaded, or this is not an Intel server "
            "(AMD and ARM have no uncore frequency interface); uncore settings cannot be applied"
        )
    return dict(info, messages=messages)


# --- request validation ------------------------------------------------------------------------


def _check_pct(spec, key, problems):
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        problems.append(
            f"uncore.{key}={value!r} is not a percentage: give a whole number 0-100 "
            "(0 = initial_min_freq_khz, 100 = initial_max_freq_khz of each domain)"
        )
        return None
    return value


def _check_khz(spec, key, problems):
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        problems.append(
            f"uncore.{key}={value!r} is not a frequency: give kHz as a positive whole number "
            "(e.g. 2000000), or min_pct / max_pct"
        )
        return None
    if value % RATIO_KHZ:
        down = value - value % RATIO_KHZ
        # below one step the kernel's ratio would be 0, which it refuses (EINVAL): only the step up is a fix
        fix = (
            f"it would be ratio 0, which the kernel refuses; use {RATIO_KHZ}"
            if down == 0
            else f"the kernel truncates it to {down}; use {down} or {down + RATIO_KHZ}"
        )
        problems.append(
            f"uncore.{key}={value} is not a multiple of {RATIO_KHZ} kHz: "
            f"the uncore ratio is set in 100 MHz steps and {fix}"
        )
        return None
    return value


def check_spec(spec):
    """Validate the shape of an ``uncore`` request. Returns (bounds, packages, problems)."""
    if not isinstance(spec, dict):
        return {}, None, [f"uncore={spec!r} is not a mapping: give min_khz/max_khz or min_pct/max_pct"]
    problems = []
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        problems.append(f"uncore has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
    bounds = {}
    for bound in ("min", "max"):
        if spec.get(bound + "_khz") is not None and spec.get(bound + "_pct") is not None:
            problems.append(f"uncore: give {bound}_khz or {bound}_pct, not both")
            continue
        khz = _check_khz(spec, bound + "_khz", problems)
        pct = _check_pct(spec, bound + "_pct", problems)
        if khz is not None:
            bounds[bound] = ("khz", khz)
        elif pct is not None:
            bounds[bound] = ("pct", pct)
    if all(spec.get(k) is None for k in KEYS if k != "packages"):
        problems.append("uncore is empty: give min_khz/max_khz (kHz) or min_pct/max_pct (0-100)")
    packages = spec.get("packages")
    if packages is not None and (
        not isinstance(packages, (list, tuple))
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in packages)
    ):
        problems.append(f"uncore.packages={packages!r} is not a list of package ids, e.g. [0, 1]")
        packages = None
    elif packages is not None and len(packages) == 0:
        # an empty list selects no domain: the run would succeed and set nothing
        problems.append("uncore.packages is empty, which sets no package: omit it for every package or name them, "
                        "e.g. [0, 1]")  # fmt: skip
        packages = None
    return bounds, packages, problems


def _resolve(bound, spec, domain, problems):
    if bound not in spec:
        return None
    kind, value = spec[bound]
    lo, hi = domain["initial_min_khz"], domain["initial_max_khz"]
    if kind == "pct":
        khz = lo + (hi - lo) * value // 100
        return max(lo, khz - khz % RATIO_KHZ)
    if not lo <= value <= hi:
        problems.append(
            f"uncore.{bound}_khz={value} is outside {domain['name']}'s limits {lo}-{hi} kHz "
            f"(initial_min_freq_khz/initial_max_freq_khz); use a value in that range or {bound}_pct"
        )
        return None
    return value


def _domain_writes(domain, new_min, new_max):
    """Target writes for one domain in safe order: raising writes max first, lowering min first."""
    targets = []
    if new_min is not None:
        targets.append(("min_freq_khz", new_min, domain["min_khz"]))
    if new_max is not None:
        targets.append(("max_freq_khz", new_max, domain["max_khz"]))
    if new_max is not None and domain["max_khz"] is not None and new_max > domain["max_khz"]:
        targets.reverse()
    identity = {"identity": domain_identity(domain)} if domain_identity(domain) else {}
    return [
        {
            "control": CONTROL,
            "path": f"{domain['path']}/{attr}",
            "cpu": None,
            "label": f"{domain['name']} {attr}",
            "current": None if current is None else str(current),
            "target": str(value),
            "compare": "exact",
            **identity,
        }
        for attr, value, current in targets
    ]


def plan_uncore(info, spec):
    """Validate ``spec`` against every uncore domain and return the control plan (no writes)."""
    bounds, packages, problems = check_spec(spec)
    plan = {"control": CONTROL, "available": info["available"], "messages": [], "writes": [], "problems": problems}
    if problems:
        return plan
    if not info["available"]:
        plan["messages"].append(
            "uncore: no intel_uncore_frequency directory (driver not loaded, or an AMD/ARM machine without an "
            "uncore frequency interface); uncore skipped, nothing changed"
        )
        return plan
    known = sorted({d["package"] for d in info["domains"]})
    for pkg in packages or []:
        if pkg not in known:
            problems.append(
                f"uncore.packages names package {pkg}, which has no uncore domain "
                f"(packages: {', '.join(str(p) for p in known)}); fix packages"
            )
    domains = [d for d in info["domains"] if packages is None or d["package"] in packages]
    for domain in domains:
        new_min = _resolve("min", bounds, domain, problems)
        new_max = _resolve("max", bounds, domain, problems)
        eff_min = new_min if new_min is not None else domain["min_khz"]
        eff_max = new_max if new_max is not None else domain["max_khz"]
        if eff_min is not None and eff_max is not None and eff_min > eff_max and (new_min or new_max):
            problems.append(
                f"uncore: min {eff_min} kHz is above max {eff_max} kHz for {domain['name']}; "
                "min must be <= max (set both bounds)"
            )
            continue
        plan["writes"].extend(_domain_writes(domain, new_min, new_max))
    return plan
