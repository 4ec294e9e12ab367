# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU frequency / EPP management through sysfs, for cpu_power_info and cpu_power_profile.

Pure logic without Ansible imports (unit tests drive it directly against a kernel model) and
Python 3.9 compatible, because it runs on the managed nodes.

Facts this follows (Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst):

* ``cpuN/cpufreq`` links to ``cpufreq/policyX``; CPUs in ``related_cpus`` share one policy, so
  every policy is written once. Frequencies are kHz in sysfs.
* Raising a range writes max then min, lowering writes min then max. Kernels >= 5.4 clamp
  silently instead of failing, so every written value is read back and compared.
* Governor before EPP. In intel_pstate / amd-pstate active mode an EPP other than
  ``performance`` is refused (EBUSY) while the governor is ``performance``. EPP reads may
  return a raw integer.
* Offline CPUs are skipped and reported; ``cpu0`` may have no ``online`` file; CPUs are
  enumerated from the ``present`` / ``online`` cpulists.
* ``intel_pstate/status`` is never written. Attributes are opened without ``O_CREAT``.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import tempfile

from ansible_collections.poweraware.k8s.plugins.module_utils._cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
)

CPU_DIR = "devices/system/cpu"
POWERCAP_DIR = "class/powercap"
DEFAULT_STATE_FILE = "/var/lib/poweraware/cpu_power_state.json"
STATE_VERSION = 1

MIN = "scaling_min_freq"
MAX = "scaling_max_freq"
GOV = "scaling_governor"
EPP = "energy_performance_preference"
MANAGED_ATTRS = (MIN, MAX, GOV, EPP)

# Drivers whose EPP is refused (EBUSY) while the governor is "performance" (active mode).
ACTIVE_EPP_DRIVERS = ("intel_pstate", "amd-pstate-epp")

# Raw EPP register values the drivers map to names (intel_pstate.c epp_values,
# amd-pstate.c epp_values). A read returns the integer when the value matches no name.
EPP_RAW_NAMES = {
    "intel_pstate": {0: "performance", 128: "balance_performance", 192: "balance_power", 255: "power"},
    "amd-pstate-epp": {0: "performance", 128: "balance_performance", 191: "balance_power", 255: "power"},
}


class PowerError(Exception):
    """Base error; ``str()`` is the message shown to the user."""


class ValidationError(PowerError):
    """The request is wrong; nothing was written."""


class ApplyError(PowerError):
    """A write or read-back failed; the message says what was rolled back."""


class SysfsAccessor:
    """All sysfs I/O goes through this object so tests can inject a kernel model.

    ``root`` is the sysfs mount point (``/sys``); every path argument is relative to it.
    """

    def __init__(self, root="/sys"):
        self.root = root

    def path(self, rel):
        return os.path.join(self.root, rel)

    def exists(self, rel):
        return os.path.exists(self.path(rel))

    def isdir(self, rel):
        return os.path.isdir(self.path(rel))

    def listdir(self, rel):
        return sorted(os.listdir(self.path(rel)))

    def resolve(self, rel):
        """Follow symlinks (``cpuN/cpufreq`` -> ``cpufreq/policyX``); return a root-relative path."""
        real = os.path.realpath(self.path(rel))
        return os.path.relpath(real, os.path.realpath(self.root))

    def read(self, rel):
        with open(self.path(rel)) as handle:
            return handle.read().strip()

    def write(self, rel, value):
        """Write ``value`` to an existing attribute. Never creates a file (no O_CREAT).

        A trailing newline is added, as ``echo value > attr`` does; the kernel's parsers accept it.
        """
        data = (str(value) + "\n").encode()
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_TRUNC)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)


def _describe_oserror(exc):
    name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else "error"
    return f"{name}: {exc.strerror or exc}"


def _read_optional(acc, rel):
    try:
        return acc.read(rel)
    except OSError:
        return None


def _khz_to_mhz(value):
    if value is None or not str(value).isdigit():
        return None
    return int(value) // 1000


def normalize_epp(driver, raw):
    """Map a raw integer EPP read to its name when the driver defines one."""
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isdigit():
        return EPP_RAW_NAMES.get(driver, {}).get(int(raw), raw)
    return raw


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


def read_policy(acc, rel, name):
    """Read one cpufreq policy directory into a plain dict (sysfs strings, kHz)."""

    def opt(attr):
        return _read_optional(acc, f"{rel}/{attr}")

    def cpus(attr):
        text = opt(attr)
        return parse_cpulist(text.replace(" ", ",")) if text else []

    pol = {
        "name": name,
        "path": rel,
        "related_cpus": cpus("related_cpus"),
        "affected_cpus": cpus("affected_cpus"),
        "driver": opt("scaling_driver"),
        "cpuinfo_min_freq": opt("cpuinfo_min_freq"),
        "cpuinfo_max_freq": opt("cpuinfo_max_freq"),
        "base_frequency": opt("base_frequency"),
        "available_governors": (opt("scaling_available_governors") or "").split(),
        "has_epp": acc.exists(f"{rel}/{EPP}"),
        "available_epp": (opt("energy_performance_available_preferences") or "").split(),
        "values": {},
    }
    for attr in MANAGED_ATTRS:
        if attr == EPP and not pol["has_epp"]:
            continue
        pol["values"][attr] = opt(attr)
    return pol


class Topology:
    """CPUs, policies and driver of one machine, read once per module run."""

    def __init__(self, acc):
        self.acc = acc
        present_text = _read_optional(acc, f"{CPU_DIR}/present")
        if present_text is None:
            raise PowerError(
                f"{acc.path(CPU_DIR + '/present')} is missing: this is not a Linux sysfs tree (check sysfs_root)"
            )
        self.present = parse_cpulist(present_text)
        online_text = _read_optional(acc, f"{CPU_DIR}/online")
        self.online = parse_cpulist(online_text) if online_text is not None else list(self.present)
        self.offline = [c for c in self.present if c not in self.online]
        self.intel_pstate_status = _read_optional(acc, f"{CPU_DIR}/intel_pstate/status")
        self.amd_pstate_status = _read_optional(acc, f"{CPU_DIR}/amd_pstate/status")
        self.policies = {}
        self.cpu_policy = {}
        for cpu in self.online:
            link = f"{CPU_DIR}/cpu{cpu}/cpufreq"
            if not acc.exists(link):
                continue
            rel = acc.resolve(link)
            name = os.path.basename(rel)
            if name == "cpufreq":  # pre-4.7 layout: a real directory under the owner CPU
                name = os.path.basename(os.path.dirname(rel))
            if name not in self.policies:
                self.policies[name] = read_policy(acc, rel, name)
            self.cpu_policy[cpu] = name
        drivers = sorted({p["driver"] for p in self.policies.values() if p["driver"]})
        if not drivers:
            drivers = [_read_optional(acc, f"{CPU_DIR}/cpufreq/policy0/scaling_driver") or ""]
        self.driver = drivers[0] or None

    @property
    def epp_active_mode(self):
        return self.driver in ACTIVE_EPP_DRIVERS

    def policy_order(self, names):
        """Policies sorted by their first CPU (policy2 before policy10)."""
        return sorted(names, key=lambda n: (min(self.policies[n]["related_cpus"] or [0]), n))


def read_rapl(acc):
    """RAPL package zones (psys is skipped: it is the platform, not a package)."""
    zones = []
    skipped = []
    if not acc.isdir(POWERCAP_DIR):
        return {"available": False, "zones": [], "skipped": []}
    for entry in acc.listdir(POWERCAP_DIR):
        if not entry.startswith("intel-rapl:") or entry.count(":") != 1:
            continue
        rel = f"{POWERCAP_DIR}/{entry}"
        name = _read_optional(acc, f"{rel}/name") or ""
        if not name.startswith("package-"):
            skipped.append({"zone": entry, "name": name})
            continue
        parts = name.split("-")
        package = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        die = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None
        tdp_uw = _read_optional(acc, f"{rel}/constraint_0_max_power_uw")
        max_range = _read_optional(acc, f"{rel}/max_energy_range_uj")
        try:
            acc.read(f"{rel}/energy_uj")
            readable = True
        except OSError:
            readable = False
        zones.append(
            {
                "zone": entry,
                "name": name,
                "package": package,
                "die": die,
                "tdp_w": round(int(tdp_uw) / 1e6, 3) if tdp_uw and tdp_uw.isdigit() else None,
                "max_energy_range_uj": int(max_range) if max_range and max_range.isdigit() else None,
                "energy_readable": readable,
            }
        )
    return {"available": bool(zones), "zones": zones, "skipped": skipped}


def _policy_settings(topo, pol):
    """Limits and current settings of one cpufreq policy, as reported per CPU and per policy."""
    return {
        "cpuinfo_min_mhz": _khz_to_mhz(pol["cpuinfo_min_freq"]),
        "cpuinfo_max_mhz": _khz_to_mhz(pol["cpuinfo_max_freq"]),
        "base_mhz": _khz_to_mhz(pol["base_frequency"]),
        "scaling_min_mhz": _khz_to_mhz(pol["values"].get(MIN)),
        "scaling_max_mhz": _khz_to_mhz(pol["values"].get(MAX)),
        "governor": pol["values"].get(GOV),
        "epp": normalize_epp(topo.driver, pol["values"].get(EPP)),
    }


def gather_info(acc):
    """The cpu_power_info facts."""
    topo = Topology(acc)
    cpus = {}
    groups = {}
    for cpu in topo.present:
        entry = {"online": cpu in topo.online, "policy": topo.cpu_policy.get(cpu)}
        pol = topo.policies.get(entry["policy"]) if entry["policy"] else None
        if pol:
            entry.update(_policy_settings(topo, pol))
            key = (entry["cpuinfo_min_mhz"], entry["cpuinfo_max_mhz"], entry["base_mhz"])
            groups.setdefault(key, []).append(cpu)
        cpus[str(cpu)] = entry
    policies = []
    for name in topo.policy_order(topo.policies):
        pol = topo.policies[name]
        policies.append(
            {
                "name": name,
                "cpus": format_cpulist(pol["related_cpus"]),
                "online_cpus": format_cpulist(c for c in pol["related_cpus"] if c in topo.online),
                "shared": len(pol["related_cpus"]) > 1,
                **_policy_settings(topo, pol),
                "available_governors": pol["available_governors"],
                "epp_raw": pol["values"].get(EPP),
                "available_epp": pol["available_epp"],
            }
        )
    limit_groups = [
        {
            "cpus": members,
            "cpulist": format_cpulist(members),
            "cpuinfo_min_mhz": key[0],
            "cpuinfo_max_mhz": key[1],
            "base_mhz": key[2],
        }
        for key, members in sorted(groups.items(), key=lambda kv: kv[1][0])
    ]
    available_governors = sorted({g for p in topo.policies.values() for g in p["available_governors"]})
    available_epp = []
    for pol in topo.policies.values():
        for value in pol["available_epp"]:
            if value not in available_epp:
                available_epp.append(value)
    messages = []
    if not topo.policies:
        messages.append(
            "no cpufreq policy found for any online CPU: the kernel exposes no CPU frequency scaling "
            "(no driver loaded, intel_pstate=disable, or a virtual machine); cpu_power_profile cannot apply profiles"
        )
    if topo.offline:
        messages.append(f"CPUs {format_cpulist(topo.offline)} are offline and are skipped by cpu_power_profile")
    hwp = None
    if topo.driver in ("intel_pstate", "intel_cpufreq"):
        hwp = any(p["has_epp"] for p in topo.policies.values()) or acc.exists(
            f"{CPU_DIR}/intel_pstate/hwp_dynamic_boost"
        )
    rapl = read_rapl(acc)
    return {
        "cpufreq_available": bool(topo.policies),
        "driver": topo.driver,
        "intel_pstate_status": topo.intel_pstate_status,
        "amd_pstate_status": topo.amd_pstate_status,
        "hwp": hwp,
        "epp_supported": any(p["has_epp"] for p in topo.policies.values()),
        "epp_refused_under_performance": topo.epp_active_mode,
        "present": format_cpulist(topo.present),
        "online": format_cpulist(topo.online),
        "offline": format_cpulist(topo.offline),
        "available_governors": available_governors,
        "available_epp": available_epp,
        "policies": policies,
        "cpus": cpus,
        "limit_groups": limit_groups,
        "rapl": rapl,
        "messages": messages,
    }


# --------------------------------------------------------------------------------------------
# State file (originals)
# --------------------------------------------------------------------------------------------


class StateStore:
    """Original values, recorded once per attribute, in a JSON file replaced atomically."""

    def __init__(self, path):
        self.path = path
        self.data = {"version": STATE_VERSION, "policies": {}}
        self.existed = False
        if os.path.exists(path):
            self.existed = True
            try:
                with open(path) as handle:
                    loaded = json.load(handle)
            except (OSError, ValueError) as exc:
                raise PowerError(
                    f"state file {path} cannot be read ({exc}); it holds the original CPU settings: "
                    "repair it or move it away (originals then become the current values)"
                ) from exc
            if not isinstance(loaded, dict) or loaded.get("version") != STATE_VERSION:
                raise PowerError(f"state file {path} has an unknown format (expected version {STATE_VERSION})")
            self.data = loaded
            self.data.setdefault("policies", {})
        self.saved = copy.deepcopy(self.data)

    @property
    def policies(self):
        return self.data["policies"]

    def record(self, policy, attr, value):
        """Record ``value`` as the original of ``attr`` unless one is already recorded."""
        entry = self.policies.setdefault(
            policy["name"],
            {"path": policy["path"], "cpus": format_cpulist(policy["related_cpus"]), "original": {}, "order": []},
        )
        if attr in entry["original"]:
            return False
        entry["original"][attr] = value
        entry["order"].append(attr)
        return True

    def forget(self, name):
        self.policies.pop(name, None)

    def dirty(self):
        return self.data != self.saved

    def save(self):
        """Write atomically: temp file in the same directory, fsync, rename."""
        directory = os.path.dirname(self.path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".cpu_power_state.", dir=directory)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(self.data, handle, indent=2, sort_keys=True)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self.saved = copy.deepcopy(self.data)
        self.existed = True

    def restore_saved(self, snapshot):
        self.data = copy.deepcopy(snapshot)
        self.save()


# --------------------------------------------------------------------------------------------
# Request validation and planning
# --------------------------------------------------------------------------------------------


def _freq_spec_to_khz(spec, pol, label, cpu):
    """``spec`` is an int (MHz) or 'min'/'max' (this CPU's own cpuinfo limit)."""
    if spec is None:
        return None
    lo = int(pol["cpuinfo_min_freq"])
    hi = int(pol["cpuinfo_max_freq"])
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "min":
            return lo
        if text == "max":
            return hi
        if not text.isdigit():
            raise ValidationError(
                f"{label}={spec!r} is not a frequency: give MHz as an integer, "
                "or 'min' / 'max' for each CPU's own limit"
            )
        spec = int(text)
    khz = int(spec) * 1000
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
    return online, skipped


def _values_equal(attr, current, desired, driver, tolerance_khz):
    if current is None:
        return desired is None
    if attr in (MIN, MAX):
        if not str(current).isdigit():
            return False
        return abs(int(current) - int(desired)) <= tolerance_khz
    if attr == EPP:
        return normalize_epp(driver, current) == normalize_epp(driver, str(desired))
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
    tolerance_khz = int(tolerance_mhz) * 1000
    by_policy = {}
    for cpu in online:
        by_policy.setdefault(topo.cpu_policy[cpu], []).append(cpu)
    managed_set = set(online) | set(skipped)
    plan = []
    for name in topo.policy_order(by_policy):
        pol = topo.policies[name]
        cpus = by_policy[name]
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
        target = {}
        new_min = _freq_spec_to_khz(request.min_mhz, pol, "min_mhz", first)
        new_max = _freq_spec_to_khz(request.max_mhz, pol, "max_mhz", first)
        eff_min = new_min if new_min is not None else int(current.get(MIN) or 0)
        eff_max = new_max if new_max is not None else int(current.get(MAX) or 0)
        if eff_min > eff_max:
            if new_min is not None and new_max is not None:
                raise ValidationError(
                    f"min_mhz ({eff_min // 1000}) is above max_mhz ({eff_max // 1000}) for CPU {first}; "
                    "min_mhz must be <= max_mhz"
                )
            raise ValidationError(
                f"min_mhz ({eff_min // 1000}) would be above CPU {first}'s current scaling_max_freq "
                f"({eff_max // 1000} MHz) and the kernel would clamp it; also set max_mhz"
            )
        if new_min is not None:
            target[MIN] = str(new_min)
        if new_max is not None:
            target[MAX] = str(new_max)
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
            epp_name = normalize_epp(topo.driver, request.epp)
            if request.epp not in pol["available_epp"] and epp_name not in pol["available_epp"]:
                raise ValidationError(
                    f"epp {request.epp!r} is not available for CPU {first} ({name}); "
                    f"energy_performance_available_preferences: {' '.join(pol['available_epp'])}"
                )
            final_gov = governor if governor is not None else current.get(GOV)
            if topo.epp_active_mode and final_gov == "performance" and epp_name != "performance":
                raise ValidationError(
                    f"epp {request.epp!r} is refused by {topo.driver} (EBUSY) while CPU {first} ({name}) uses the "
                    "'performance' governor; set governor: powersave, or epp: performance"
                )
            target[EPP] = request.epp
        changes = {
            a: v for a, v in target.items() if not _values_equal(a, current.get(a), v, topo.driver, tolerance_khz)
        }
        plan.append({"policy": pol, "cpus": cpus, "current": current, "target": target, "changes": changes})
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
        changes = {
            a: v for a, v in target.items() if not _values_equal(a, current.get(a), v, topo.driver, tolerance_khz)
        }
        plan.append({"policy": pol, "cpus": online_members, "current": current, "target": target, "changes": changes})
        forget.append(name)
    return {"policies": plan, "skipped_offline": sorted(set(skipped)), "forget": forget, "tolerance_khz": tolerance_khz}


# --------------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------------


def _write_policy(acc, topo, item, journal, tolerance_khz):
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
                f"{_describe_oserror(exc)}"
            ) from exc
        journal.append((item, attr))
    readback = {}
    for attr, value in item["target"].items():
        rel = f"{pol['path']}/{attr}"
        try:
            got = acc.read(rel)
        except OSError as exc:
            raise ApplyError(f"reading back {acc.path(rel)} failed: {_describe_oserror(exc)}") from exc
        readback[attr] = got
        if not _values_equal(attr, got, value, topo.driver, tolerance_khz):
            raise ApplyError(
                f"{acc.path(rel)} reads back {got!r} after writing {value!r} (CPU {format_cpulist(item['cpus'])}): "
                "the kernel clamped or refused the value silently"
            )
    pol["values"].update(readback)
    return readback


def _rollback(acc, topo, touched, tolerance_khz):
    """Return touched policies to the values read at the start of the run, newest first."""
    problems = []
    restored = 0
    for item in reversed(touched):
        pol = item["policy"]
        live = {}
        for attr in MANAGED_ATTRS:
            if attr in item["current"]:
                live[attr] = _read_optional(acc, f"{pol['path']}/{attr}")
        target = {a: item["current"][a] for a in item["changes"] if item["current"].get(a) is not None}
        changes = {a: v for a, v in target.items() if not _values_equal(a, live.get(a), v, topo.driver, tolerance_khz)}
        for attr, value in order_writes(live, changes):
            try:
                acc.write(f"{pol['path']}/{attr}", value)
                restored += 1
            except OSError as exc:
                problems.append(f"{pol['name']}/{attr}={value}: {_describe_oserror(exc)}")
    return restored, problems


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
            readback = _write_policy(acc, topo, item, journal, plan["tolerance_khz"])
            for res in results:
                if res["item"] is item:
                    res["after"].update(readback)
    except ApplyError as exc:
        restored, problems = _rollback(acc, topo, touched, plan["tolerance_khz"])
        if store is not None and snapshot is not None and store.data != snapshot:
            try:
                store.restore_saved(snapshot)
            except OSError as err:
                problems.append(f"state file {store.path}: {err}")
        if problems:
            raise ApplyError(
                f"{exc}; rollback FAILED for: {'; '.join(problems)} - check these attributes by hand"
            ) from exc
        raise ApplyError(
            f"{exc}; rolled back the {restored} value(s) this run had changed, nothing else was touched"
        ) from exc
    return True, results


def mhz(value):
    return _khz_to_mhz(value)


def diff_table(topo, results, after_key="after"):
    """Per-CPU before/after tables (one line per CPU) for Ansible's diff output."""
    header = f"{'cpu':>4} {'policy':<10} {'min_mhz':>8} {'max_mhz':>8} {'governor':<12} epp"

    def line(cpu, name, values):
        epp = normalize_epp(topo.driver, values.get(EPP)) if values.get(EPP) is not None else "-"
        return (
            f"{cpu:>4} {name:<10} {str(mhz(values.get(MIN))):>8} {str(mhz(values.get(MAX))):>8} "
            f"{str(values.get(GOV) or '-'):<12} {epp}"
        )

    before = [header]
    after = [header]
    rows = []
    for res in results:
        item = res["item"]
        for cpu in item["cpus"]:
            rows.append((cpu, item["policy"]["name"], item["current"], res[after_key]))
    for cpu, name, cur, new in sorted(rows, key=lambda r: r[0]):
        before.append(line(cpu, name, cur))
        after.append(line(cpu, name, new))
    return {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}


def summarize(topo, results):
    """Per-policy result entries for the module's return value (MHz, names)."""
    out = []
    for res in results:
        item = res["item"]

        def view(values):
            return {
                "min_mhz": mhz(values.get(MIN)),
                "max_mhz": mhz(values.get(MAX)),
                "governor": values.get(GOV),
                "epp": normalize_epp(topo.driver, values.get(EPP)) if values.get(EPP) is not None else None,
            }

        out.append(
            {
                "policy": item["policy"]["name"],
                "cpus": format_cpulist(item["cpus"]),
                "changed": sorted(item["changes"]),
                "before": view(item["current"]),
                "after": view(res["after"]),
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# Entry points used by the cpu_power_profile module (and the unit tests)
# --------------------------------------------------------------------------------------------


def apply_profile(acc, request, state_file=DEFAULT_STATE_FILE, check_mode=False, tolerance_mhz=100):
    """state=present: validate everything, then write changed policies. Returns the result dict."""
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
