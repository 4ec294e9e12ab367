"""An in-memory sysfs accessor for the pure node power helpers (no files, no kernel model).

It has the methods of ``sysfs.SysfsAccessor`` the discovery, planning and apply code uses:
``files`` maps a root-relative path to its text (an exception instance is raised on read instead),
``links`` maps a path to the root-relative path ``resolve`` returns (``cpuN/cpufreq`` ->
``cpufreq/policyX``). Directories exist implicitly: a path is a directory when some file or link
lies under it. ``read_errors`` maps a path to the exception every read raises, even after a write.
Writes are scripted, not ruled: ``write_errors`` maps a path to the exception its write raises,
``clamp`` to what it reads after its next write (a kernel that silently clamped). The kernel's own
rules are the kernel model's (``lab/fake_kernel.py``), which the module tests use.
"""

from __future__ import annotations

import errno

CPU = "devices/system/cpu"


def eacces():
    """The error a write to a read-only attribute raises (as the kernel reports it)."""
    return PermissionError(errno.EACCES, "Permission denied")


def eio():
    """The error a failing device attribute raises."""
    return OSError(errno.EIO, "Input/output error")


class MemorySysfs:
    def __init__(self, files=None, links=None, root="/sys", write_errors=None, clamp=None, read_errors=None):
        self.files = dict(files or {})
        self.links = dict(links or {})
        self.root = root
        self.write_errors = dict(write_errors or {})
        self.clamp = dict(clamp or {})
        self.read_errors = dict(read_errors or {})
        self.reads = []
        self.writes = []

    def path(self, rel):
        return f"{self.root}/{rel}"

    def _under(self, rel):
        prefix = rel.rstrip("/") + "/"
        return [p for p in list(self.files) + list(self.links) if p.startswith(prefix)]

    def isdir(self, rel):
        return bool(self._under(rel))

    def exists(self, rel):
        return rel in self.files or rel in self.links or self.isdir(rel)

    def listdir(self, rel):
        if not self.isdir(rel):
            raise FileNotFoundError(rel)
        start = len(rel.rstrip("/")) + 1
        return sorted({p[start:].split("/")[0] for p in self._under(rel)})

    def resolve(self, rel):
        return self.links.get(rel, rel)

    def read(self, rel):
        self.reads.append(rel)
        if rel in self.read_errors:  # after writes too: the attribute stays unreadable
            raise self.read_errors[rel]
        value = self.files.get(rel)
        if value is None:
            raise FileNotFoundError(rel)
        if isinstance(value, BaseException):
            raise value
        return str(value).strip()

    def write(self, rel, value):
        if rel in self.write_errors:
            raise self.write_errors[rel]
        self.writes.append((rel, value))
        self.files[rel] = self.clamp.pop(rel, str(value))


def policy_files(name, cpus, driver="intel_pstate", lo=800000, hi=3900000, base=None, governors="performance powersave",
                 epp=None, epp_available=None, values=None, related=None):  # fmt: skip
    """The files of ``cpufreq/<name>``; ``values``: scaling_min/max_freq, governor (defaults)."""
    rel = f"{CPU}/cpufreq/{name}"
    values = dict({"scaling_min_freq": lo, "scaling_max_freq": hi, "scaling_governor": "powersave"}, **(values or {}))
    files = {
        f"{rel}/related_cpus": related if related is not None else " ".join(str(c) for c in cpus),
        f"{rel}/affected_cpus": " ".join(str(c) for c in cpus),
        f"{rel}/scaling_driver": driver,
        f"{rel}/cpuinfo_min_freq": lo,
        f"{rel}/cpuinfo_max_freq": hi,
        f"{rel}/scaling_available_governors": governors,
    }
    if base is not None:
        files[f"{rel}/base_frequency"] = base
    for attr, value in values.items():
        if value is not None:
            files[f"{rel}/{attr}"] = value
    if epp is not None:
        files[f"{rel}/energy_performance_preference"] = epp
        files[f"{rel}/energy_performance_available_preferences"] = epp_available or (
            "default performance balance_performance balance_power power"
        )
    return files


def machine(present="0-3", online=None, policies=(), extra=None):
    """A machine: ``policies`` is a list of (policy name, CPUs, policy_files keywords)."""
    files = {f"{CPU}/present": present}
    if online is not None:
        files[f"{CPU}/online"] = online
    links = {}
    for name, cpus, kw in policies:
        files.update(policy_files(name, cpus, **kw))
        for cpu in cpus:
            links[f"{CPU}/cpu{cpu}/cpufreq"] = f"{CPU}/cpufreq/{name}"
    files.update(extra or {})
    return MemorySysfs(files, links)
