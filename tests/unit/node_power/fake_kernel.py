"""A model of the kernel's cpufreq sysfs rules on top of a lab/fake_sysfs.py tree.

``FakeKernel`` is a drop-in for ``_cpufreq.SysfsAccessor`` (it is injected where the module
utilities take their accessor). Reads come from the files; writes go through the rules below
and the files are rewritten with what the kernel would then report:

* frequencies: non-numbers -> EINVAL; numbers are clamped silently into cpuinfo limits and
  ``min`` is clamped to ``max`` (freq QoS, kernels >= 5.4; ``clamp=False`` models older kernels,
  which return EINVAL for min > max); table drivers (acpi-cpufreq) resolve min up / max down to an
  available frequency; a platform limit (``_PPC``-like) caps max silently.
* governor: must be in scaling_available_governors, else EINVAL.
* EPP: a name from energy_performance_available_preferences, or (intel_pstate only) a raw
  integer 0-255, else EINVAL; under the ``performance`` governor in active mode anything but
  performance is EBUSY; the performance governor forces EPP 0 and switching back restores the
  cached value; values without a name read back as raw integers.
* policies of offline CPUs are inactive: reads and writes give EBUSY; offline CPUs have no
  ``cpufreq`` link (ENOENT through it).
* missing attributes: ENOENT (never created); read-only attributes: EACCES.
* shared policies: one directory, so a write through cpu2 is seen through cpu3.
"""

from __future__ import annotations

import errno
import os
import pathlib

from ansible_collections.poweraware.k8s.plugins.module_utils._cpufreq import SysfsAccessor

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
        self.epp_names = EPP_VALUES.get(self.driver, {})
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

    def __init__(self, root, clamp=True):
        super().__init__(str(root))
        self.clamp = clamp
        self.writes = []
        self._failures = []
        cpu_dir = pathlib.Path(self.root, "devices/system/cpu")
        online_file = cpu_dir / "online"
        present = self._parse(self.raw_read("devices/system/cpu/present"))
        self.online = set(self._parse(online_file.read_text().strip())) if online_file.exists() else set(present)
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
        pathlib.Path(self.root, rel).write_text(f"{value}\n")

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

    def _policy_for(self, rel):
        real = self.resolve(rel)
        directory, attr = os.path.split(real)
        return self.policies.get(directory), attr

    # accessor interface
    def read(self, rel):
        if self.exists(rel):
            pol, _attr = self._policy_for(rel)
            if pol is not None and not pol.active:
                raise _oserror(errno.EBUSY, self.path(rel))
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
        if attr in READ_ONLY:
            raise _oserror(errno.EACCES, path)
        self.writes.append((real, str(value)))
        if pol is None:
            super().write(rel, value)
            return
        if not pol.active:
            raise _oserror(errno.EBUSY, path)
        pol.store(attr, str(value), path)
