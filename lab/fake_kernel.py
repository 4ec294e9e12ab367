"""A model of the kernel's sysfs rules on top of a lab/fake_sysfs.py tree: one model, two tiers.

``FakeKernel`` is a drop-in for ``sysfs.SysfsAccessor``: the unit tests inject it where the module
utilities take their accessor (tests/unit/plugins/module_utils/node_power/conftest.py), and every lab node's ``/sys``
is served from it through FUSE (lab/components/node_kernel.py), so the roles, the boot re-apply
script and anything else on a node meet the same rules over real system calls. Reads come from
the files; writes go through the rules below and the files are rewritten with what the kernel
would then report:

* frequencies: non-numbers -> EINVAL; numbers are clamped silently into cpuinfo limits and
  ``min`` is clamped to ``max`` (freq QoS, kernels >= 5.4; ``clamp=False`` models older kernels,
  which return EINVAL for min > max); table drivers (acpi-cpufreq) resolve min up / max down to an
  available frequency; a platform limit (``_PPC``-like) caps max silently.
* governor: must be in scaling_available_governors, else EINVAL.
* EPP: a name from energy_performance_available_preferences, or (intel_pstate only) a raw
  integer 0-255, else EINVAL; under the ``performance`` governor in active mode anything but
  performance is EBUSY; the performance governor forces EPP 0 and switching back restores the
  cached value; values without a name read back as raw integers. The value behind a name is the
  CPU model's (shape ``epp_values``; intel_pstate.c ``intel_epp_default``): a raw read is a value
  that matches no name on this CPU, whatever it means on another.
* policies of offline CPUs are inactive: reads and writes give EBUSY; offline CPUs have no
  ``cpufreq`` link (ENOENT through it).
* missing attributes: ENOENT (never created); read-only attributes: EACCES.
* shared policies: one directory, so a write through cpu2 is seen through cpu3.

The other controls (checked against the kernel source, cited where the rule is applied):

* cpuidle (drivers/cpuidle/sysfs.c): only ``stateK/disable`` is writable; it is parsed with
  ``kstrtouint(buf, 0)`` (decimal, 0x hex, 0 octal; EINVAL otherwise) and reads back 0 or 1 per
  CPU; ``name``/``latency``/... are read-only (EACCES). CPUs never online have no cpuidle dir
  (ENOENT through the path).
* uncore (drivers/platform/x86/intel/uncore-frequency/): ``min_freq_khz``/``max_freq_khz`` are
  ``kstrtouint`` (EINVAL), divided by 100000 (the value is truncated to 100 MHz), a ratio of 0 or
  above 127 is EINVAL; on TPMI a write to ``package_XX_die_00`` sets every cluster of the package
  and its ratio bounds, and a cluster write outside those bounds is EINVAL (uncore-frequency-tpmi.c).
  The driver does not compare min with max or with ``initial_*``; this model does not either.
* powercap (drivers/powercap/powercap_sys.c, intel_rapl_common.c): ``constraint_K_power_limit_uw``
  and ``_time_window_us`` are ``kstrtoull`` (EINVAL); a BIOS-locked zone refuses them and
  ``enabled`` with EACCES; a limit is truncated to the 1/8 W power unit and masked to 15 bits,
  never compared with ``max_power_uw``; a time window is encoded as 2^Y * (1 + F/4) * 976 us;
  ``enabled`` is ``kstrtobool``. ``name``, ``max_power_uw``, ``energy_uj`` ...: EACCES.
* hwmon: every attribute of these trees is read-only (EACCES).
* topology (drivers/base/topology.c, drivers/base/node.c): ``cpuN/topology/*`` and the NUMA nodes'
  files are read-only (EACCES); a CPU taken offline loses its ``topology`` directory and leaves its
  siblings' lists and its node's ``cpulist``.

RAPL ``energy_uj`` is computed when it is read, as the kernel computes it from the energy-status
MSR: where the lab's power meter (lab/components/node_power.py) runs, it publishes each metered
zone's counter at an instant and the power it draws from then on (``publish_meter``, a file in the
tree's root, which no node sees: only subtrees are grafted at /sys), and a read shows
``(counter + power x time since) mod (max_energy_range_uj + 1)`` on CLOCK_MONOTONIC, which every
process of the machine shares. Two reads a millisecond apart differ by a millisecond's energy;
nothing ticks. Without a published zone (the unit tests, test_node_power's node hosts, the dram
sub-zone) the file's value is shown.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import re
import shutil
import time

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist  # lab/__init__.py
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor

METER = ".poweraware-meter.json"  # in the tree's root, beside lab/fake_sysfs.py's marker
# an hwmon energy counter (Documentation/hwmon/sysfs-interface.rst: energy[1-*]_input, microjoules)
_HWMON_ENERGY = re.compile(r"^energy\d+_input$")


def publish_meter(root, at, zones) -> None:
    """The power meter's record: ``zones`` maps a zone's directory (root-relative, symlinks resolved,
    as ``FakeKernel.resolve`` gives it), or an hwmon ``energyN_input`` file likewise, to ``{"uj":
    counter at ``at``, "uw": power from then on in microwatts, "max": max_energy_range_uj}``; ``at``
    is ``time.monotonic()``. Replaced atomically."""
    path = os.path.join(root, METER)
    tmp = f"{path}.new"
    # read-only from its creation, as the counters it stands for: it moves by itself, no run writes it
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444), "w") as handle:
        json.dump({"at": at, "zones": zones}, handle, sort_keys=True)
    os.replace(tmp, path)


def metered_energy(zone, at, now) -> int:
    """A published zone's counter at ``now``: it wraps at ``max`` as the kernel's does."""
    return (zone["uj"] + round(zone["uw"] * max(0.0, now - at))) % (zone["max"] + 1)


ACTIVE = ("intel_pstate", "amd-pstate-epp")
EPP_VALUES = {
    "intel_pstate": {"performance": 0, "balance_performance": 128, "balance_power": 192, "power": 255},
    "amd-pstate-epp": {"performance": 0, "balance_performance": 128, "balance_power": 191, "power": 255},
}
READ_ONLY = {
    "cpuinfo_min_freq",
    "cpuinfo_max_freq",
    "cpuinfo_transition_latency",
    "related_cpus",
    "affected_cpus",
    "scaling_driver",
    "scaling_available_governors",
    "energy_performance_available_preferences",
    "scaling_available_frequencies",
    "base_frequency",
    "scaling_cur_freq",
}


def _oserror(code, path):
    return OSError(code, os.strerror(code), path)


_CPUIDLE = re.compile(r"^devices/system/cpu/cpu\d+/cpuidle/state\d+/(\w+)$")
_TOPOLOGY = re.compile(r"^devices/system/(?:cpu/cpu\d+/topology|node)/")
# a topology directory's lists of CPUs (the kernel's ``%*pbl`` of online CPUs)
_SIBLING_LISTS = ("core_cpus_list", "thread_siblings_list", "package_cpus_list", "core_siblings_list", "die_cpus_list")
_UNCORE = re.compile(r"^devices/system/cpu/intel_uncore_frequency/([^/]+)/(\w+)$")
# zones are resolved to where the kernel keeps them (class/powercap only links there); a sub-zone is
# nested in its package's directory
# zone ids are hexadecimal ("%s:%x" in powercap_sys.c): intel-rapl:a is the 11th top-level zone
_POWERCAP = re.compile(
    r"^devices/virtual/powercap/intel-rapl/(?:intel-rapl:[0-9a-f]+/)?(intel-rapl(?::[0-9a-f]+)+)/(\w+)$"
)
_POWERCAP_RW = re.compile(r"^(constraint_\d+_(power_limit_uw|time_window_us)|enabled)$")
POWER_UNIT_UW = 125000  # 1/8 W, MSR_RAPL_POWER_UNIT bits 3:0 = 3 on most parts
TIME_UNIT_US = 976  # 1/1024 s, MSR_RAPL_POWER_UNIT bits 19:16 = 10
UNCORE_RATIO_KHZ = 100000
UNCORE_MAX_RATIO = 127  # GENMASK(6, 0)


def kstrtouint_base0(text, path):
    """kstrtouint(buf, 0): decimal, 0x hexadecimal or 0 octal, unsigned, 32 bits."""
    text = text.strip()
    try:
        if text[:2].lower() == "0x":
            value = int(text[2:], 16)
        elif text.startswith("0") and len(text) > 1:
            value = int(text[1:], 8)
        elif text.isdigit():
            value = int(text)
        else:
            raise ValueError(text)
    except ValueError:
        raise _oserror(errno.EINVAL, path) from None
    if value > 0xFFFFFFFF:
        raise _oserror(errno.ERANGE, path)
    return value


def kstrtou(text, path):
    """kstrtouint / kstrtoull with base 10."""
    text = text.strip()
    if not text.isdigit():
        raise _oserror(errno.EINVAL, path)
    return int(text)


def rapl_time_window(us):
    """intel_rapl_common.c compute_time_window: 2^Y * (1 + F/4) time units, as read back."""
    units = max(us // TIME_UNIT_US, 1)
    y = units.bit_length() - 1
    f = (4 * (units - (1 << y))) // (1 << y)
    return (1 << y) * (4 + f) * TIME_UNIT_US // 4


class Policy:
    def __init__(self, kernel, rel):
        self.kernel = kernel
        self.rel = rel
        rd = kernel.raw_read
        self.related = [int(c) for c in rd(f"{rel}/related_cpus").split()]
        self.driver = rd(f"{rel}/scaling_driver")
        self.lo = int(rd(f"{rel}/cpuinfo_min_freq"))
        self.hi = int(rd(f"{rel}/cpuinfo_max_freq"))
        self.min_req = int(rd(f"{rel}/scaling_min_freq"))
        self.max_req = int(rd(f"{rel}/scaling_max_freq"))
        self.governor = rd(f"{rel}/scaling_governor")
        self.governors = rd(f"{rel}/scaling_available_governors").split()
        self.has_epp = kernel.raw_exists(f"{rel}/energy_performance_preference")
        self.table = None
        if kernel.raw_exists(f"{rel}/scaling_available_frequencies"):
            self.table = sorted(int(f) for f in rd(f"{rel}/scaling_available_frequencies").split())
        self.epp_names = {**EPP_VALUES.get(self.driver, {}), **kernel.epp_values}
        self.epp_cached = 128
        if self.has_epp:
            self.available_epp = rd(f"{rel}/energy_performance_available_preferences").split()
            current = rd(f"{rel}/energy_performance_preference")
            self.epp_cached = int(current) if current.isdigit() else self.epp_names[current]
        self.platform_max = None

    @property
    def active(self):
        return any(c in self.kernel.online for c in self.related)

    def effective(self):
        lo, hi = self.lo, self.hi
        if self.platform_max is not None:
            hi = min(hi, self.platform_max)
        mx = min(max(self.max_req, lo), hi)
        mn = min(max(self.min_req, lo), hi)
        mn = min(mn, mx)
        if self.table:
            up = [f for f in self.table if f >= mn]
            down = [f for f in self.table if f <= mx]
            mx = down[-1] if down else self.table[0]
            mn = min(up[0] if up else self.table[-1], mx)  # resolved min never above resolved max
        return mn, mx

    def epp_value(self):
        if self.driver in ACTIVE and self.governor == "performance":
            return 0
        return self.epp_cached

    def sync(self):
        mn, mx = self.effective()
        wr = self.kernel.raw_write
        wr(f"{self.rel}/scaling_min_freq", mn)
        wr(f"{self.rel}/scaling_max_freq", mx)
        wr(f"{self.rel}/scaling_governor", self.governor)
        if self.has_epp:
            value = self.epp_value()
            names = {v: k for k, v in self.epp_names.items()}
            wr(f"{self.rel}/energy_performance_preference", names.get(value, value))

    def store(self, attr, text, path):
        text = text.strip()
        if attr in ("scaling_min_freq", "scaling_max_freq"):
            if not text.isdigit():
                raise _oserror(errno.EINVAL, path)
            value = int(text)
            if not self.kernel.clamp:
                mn, mx = self.effective()
                if (attr == "scaling_min_freq" and value > mx) or (attr == "scaling_max_freq" and value < mn):
                    raise _oserror(errno.EINVAL, path)
            if attr == "scaling_min_freq":
                self.min_req = value
            else:
                self.max_req = value
        elif attr == "scaling_governor":
            if text not in self.governors:
                raise _oserror(errno.EINVAL, path)
            self.governor = text
        elif attr == "energy_performance_preference":
            if text == "default":
                value = 128
            elif text in self.available_epp and text in self.epp_names:
                value = self.epp_names[text]
            elif text.isdigit() and self.driver == "intel_pstate" and int(text) <= 255:
                value = int(text)
            else:
                raise _oserror(errno.EINVAL, path)
            if self.driver in ACTIVE and self.governor == "performance" and value != 0:
                raise _oserror(errno.EBUSY, path)
            if not (self.driver in ACTIVE and self.governor == "performance"):
                self.epp_cached = value
        else:
            self.kernel.raw_write(f"{self.rel}/{attr}", text)
            return
        self.sync()


class FakeKernel(SysfsAccessor):
    """Kernel model over a fake sysfs tree; inject it instead of ``SysfsAccessor``."""

    def __init__(self, root, clamp=True, clock=time.monotonic):
        super().__init__(str(root))
        self._clock = clock
        self._meter_path = os.path.join(self.root, METER)
        self._meter_seen = None  # (inode, mtime) of the record read last
        self._meter = {}
        self._real_root = os.path.realpath(self.root)  # resolve() runs on every read the lab's kernel serves
        self._inside = self._real_root.rstrip("/") + "/"
        self.clamp = clamp
        self.writes = []
        self._failures = []
        cpu_dir = pathlib.Path(self.root, "devices/system/cpu")
        online_file = cpu_dir / "online"
        present = self._parse(self.raw_read("devices/system/cpu/present"))
        self.online = set(self._parse(online_file.read_text().strip())) if online_file.exists() else set(present)
        self.locked_zones = set()
        marker = pathlib.Path(self.root, ".poweraware-fake-sysfs.json")
        shape = json.loads(marker.read_text())["shape"] if marker.is_file() else {}
        # the CPU model's EPP values where they differ from the driver's (intel_pstate.c intel_epp_default)
        self.epp_values = dict(shape.get("epp_values") or {})
        if shape.get("powercap") == "locked":
            powercap = pathlib.Path(self.root, "class/powercap")
            self.locked_zones = {z.name for z in powercap.iterdir() if re.match(r"^intel-rapl:[0-9a-f]+$", z.name)}
        self.uncore_bounds = {}  # TPMI: package id -> {"min": ratio, "max": ratio} set by package-level writes
        self.policies = {}
        pol_dir = cpu_dir / "cpufreq"
        if pol_dir.is_dir():
            for entry in sorted(pol_dir.iterdir()):
                rel = f"devices/system/cpu/cpufreq/{entry.name}"
                self.policies[rel] = Policy(self, rel)

    @staticmethod
    def _parse(text):
        out = []
        for part in filter(None, text.split(",")):
            lo, _sep, hi = part.partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
        return out

    # raw file access (the model's own bookkeeping; bypasses the rules)
    def raw_read(self, rel):
        return pathlib.Path(self.root, rel).read_text().strip()

    def raw_write(self, rel, value):
        # A sysfs read never sees half a store (the attribute's show() formats the whole value), so
        # the model replaces the file whole: a reader in another process (a second run, the boot unit)
        # must never read '' between a truncate and a write.
        path = pathlib.Path(self.root, rel)
        temp = path.with_name(f".{path.name}.{os.getpid()}.model")
        temp.write_text(f"{value}\n")
        os.chmod(temp, path.stat().st_mode & 0o7777)
        os.replace(temp, path)

    def raw_exists(self, rel):
        return pathlib.Path(self.root, rel).exists()

    # test controls
    def fail_write(self, match, code, after=0):
        """Make the (after+1)-th write whose path contains ``match`` fail with ``code``."""
        self._failures.append({"match": match, "code": code, "skip": after})

    def set_platform_max(self, policy, khz):
        """A firmware limit (like ACPI _PPC) that silently caps scaling_max_freq."""
        pol = self.policies[f"devices/system/cpu/cpufreq/{policy}"]
        pol.platform_max = khz
        pol.sync()

    def take_offline(self, cpu):
        """Hot-unplug a CPU as the kernel does: online=0, link removed, policy inactive if last."""
        self.online.discard(cpu)
        pathlib.Path(self.root, f"devices/system/cpu/cpu{cpu}/online").write_text("0\n")
        link = pathlib.Path(self.root, f"devices/system/cpu/cpu{cpu}/cpufreq")
        if link.is_symlink():
            link.unlink()
        ordered = sorted(self.online)
        self.raw_write("devices/system/cpu/online", ",".join(str(c) for c in ordered))
        # topology_remove_dev: its topology attributes go, and it leaves every list of online CPUs
        shutil.rmtree(pathlib.Path(self.root, f"devices/system/cpu/cpu{cpu}/topology"), ignore_errors=True)
        lists = [f"devices/system/cpu/cpu{c}/topology/{name}" for c in ordered for name in _SIBLING_LISTS]
        lists += [
            str(p.relative_to(self.root)) for p in pathlib.Path(self.root, "devices/system/node").glob("node*/cpulist")
        ]
        for rel in lists:
            if self.raw_exists(rel):
                left = [c for c in self._parse(self.raw_read(rel)) if c != cpu]
                self.raw_write(rel, format_cpulist(left))

    def lock_powercap(self, zone):
        """The BIOS lock bit: every power-limit write of ``zone`` becomes EACCES, enabled reads 0."""
        self.locked_zones.add(zone)
        self.raw_write(f"class/powercap/{zone}/enabled", 0)

    # --- the other controls' rules ---------------------------------------------------------------
    def _other_rule(self, real):
        """(handler, writable) for cpuidle / uncore / powercap / hwmon attributes; None for the rest."""
        match = _CPUIDLE.match(real)
        if match:
            return self._store_cpuidle, match.group(1) == "disable"
        match = _UNCORE.match(real)
        if match:
            return self._store_uncore, match.group(2) in ("min_freq_khz", "max_freq_khz")
        match = _POWERCAP.match(real)
        if match:
            return self._store_powercap, bool(_POWERCAP_RW.match(match.group(2)))
        if real.startswith("class/hwmon/") or _TOPOLOGY.match(real):
            return None, False
        return None

    def _store_cpuidle(self, real, text, path):
        # store_state_disable: any non-zero value sets CPUIDLE_STATE_DISABLED_BY_USER; shows 0/1
        self.raw_write(real, 1 if kstrtouint_base0(text, path) else 0)

    def _uncore_clusters(self, package):
        base = pathlib.Path(self.root, "devices/system/cpu/intel_uncore_frequency")
        return [d for d in sorted(base.glob("uncore*")) if int((d / "package_id").read_text()) == package]

    def _store_uncore(self, real, text, path):
        directory, attr = os.path.split(real)
        ratio = kstrtou(text, path) // UNCORE_RATIO_KHZ  # uncore_write_control_freq: input /= 100000
        if not ratio or ratio > UNCORE_MAX_RATIO:
            raise _oserror(errno.EINVAL, path)
        bound = "max" if attr == "max_freq_khz" else "min"
        name = os.path.basename(directory)
        package_dir = re.match(r"^package_(\d+)_die_\d+$", name)
        clusters = self._uncore_clusters(int(package_dir.group(1))) if package_dir else []
        if package_dir and clusters:  # TPMI root domain: every cluster of the package, then its bounds
            for cluster in clusters:
                (cluster / attr).write_text(f"{ratio * UNCORE_RATIO_KHZ}\n")
            self.uncore_bounds.setdefault(int(package_dir.group(1)), {})[bound] = ratio
        elif name.startswith("uncore"):
            package = int(self.raw_read(f"{directory}/package_id"))
            limit = self.uncore_bounds.get(package, {})
            if (bound == "max" and limit.get("max") and ratio > limit["max"]) or (
                bound == "min" and limit.get("min") and ratio < limit["min"]
            ):
                raise _oserror(errno.EINVAL, path)
        self.raw_write(real, ratio * UNCORE_RATIO_KHZ)

    def _store_powercap(self, real, text, path):
        directory, attr = os.path.split(real)
        zone = os.path.basename(directory)
        if attr == "enabled":
            first = text.strip()[:2].lower()
            if first[:1] not in ("0", "1", "y", "n") and first not in ("on", "of"):
                raise _oserror(errno.EINVAL, path)  # kstrtobool
            if zone in self.locked_zones:
                raise _oserror(errno.EACCES, path)  # set_domain_enable: DOMAIN_STATE_BIOS_LOCKED
            self.raw_write(real, 1 if first[:1] in ("1", "y") or first == "on" else 0)
            return
        value = kstrtou(text, path)  # store_constraint_*: kstrtoull
        if zone in self.locked_zones:
            raise _oserror(errno.EACCES, path)  # "locked by BIOS, monitoring only"
        if attr.endswith("_power_limit_uw"):
            raw = (value // POWER_UNIT_UW) & 0x7FFF  # rapl_unit_xlate to raw, POWER_LIMIT1_MASK
            self.raw_write(real, raw * POWER_UNIT_UW)
        else:
            self.raw_write(real, rapl_time_window(value))

    def resolve(self, rel):
        real = os.path.realpath(self.path(rel))
        inside = self._inside
        return real[len(inside) :] if real.startswith(inside) else os.path.relpath(real, self._real_root)

    def _policy_for(self, rel):
        real = self.resolve(rel)
        directory, attr = os.path.split(real)
        return self.policies.get(directory), attr

    def _meter_record(self):
        """The power meter's record as published last ({} without one)."""
        try:
            info = os.stat(self._meter_path)
        except FileNotFoundError:
            self._meter_seen, self._meter = None, {}
            return self._meter
        seen = (info.st_ino, info.st_mtime_ns)
        if seen != self._meter_seen:
            try:
                with open(self._meter_path) as handle:
                    self._meter = json.load(handle)
            except (OSError, ValueError):
                return self._meter  # replaced under us: the one read before still holds
            self._meter_seen = seen
        return self._meter

    def _energy_now(self, rel):
        """A metered counter at this instant, or None (not metered: the file holds it): a powercap
        zone's ``energy_uj`` (the record is the zone's directory's) or an hwmon ``energyN_input``
        (the record is the file's: amd_energy has a counter per core and per socket in one chip)."""
        name = os.path.basename(rel)
        if name == "energy_uj":
            key = os.path.dirname(self.resolve(rel))
        elif _HWMON_ENERGY.match(name):
            key = self.resolve(rel)
        else:
            return None
        record = self._meter_record()
        zone = record.get("zones", {}).get(key)
        return None if zone is None else metered_energy(zone, record["at"], self._clock())

    # accessor interface
    def show(self, rel):
        """What read(2) of the attribute returns (the bytes, newline included), under the read rules."""
        self._check_readable(rel)
        energy = self._energy_now(rel)
        if energy is not None:
            return f"{energy}\n".encode()
        with open(self.path(rel), "rb") as handle:
            return handle.read()

    def _check_readable(self, rel):
        """A policy's attributes read EBUSY while the policy is inactive (all its CPUs offline)."""
        pol, _attr = self._policy_for(rel)
        if pol is not None and not pol.active:
            raise _oserror(errno.EBUSY, self.path(rel))

    def read(self, rel):
        if self.exists(rel):
            self._check_readable(rel)
            energy = self._energy_now(rel)
            if energy is not None:
                return str(energy)
        return super().read(rel)

    def write(self, rel, value):
        path = self.path(rel)
        if not os.path.lexists(path) or not os.path.exists(path):
            raise _oserror(errno.ENOENT, path)
        for failure in self._failures:
            if failure["match"] in rel:
                if failure["skip"] == 0:
                    self._failures.remove(failure)
                    raise _oserror(failure["code"], path)
                failure["skip"] -= 1
        pol, attr = self._policy_for(rel)
        real = self.resolve(rel)
        rule = self._other_rule(real)
        if attr in READ_ONLY or (rule is not None and not rule[1]):
            raise _oserror(errno.EACCES, path)
        self.writes.append((real, str(value)))
        if rule is not None and rule[0] is not None:
            rule[0](real, str(value), path)
            return
        if pol is None:
            super().write(rel, value)
            return
        if not pol.active:
            raise _oserror(errno.EBUSY, path)
        pol.store(attr, str(value), path)
