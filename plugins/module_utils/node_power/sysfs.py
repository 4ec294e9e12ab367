# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 1 of the node power library: sysfs access, errors and small value helpers.

Everything the node power controls read or write goes through ``SysfsAccessor`` so that tests
can inject a kernel model (``lab/fake_kernel.py`` in the repository). Attributes are opened for
writing without ``O_CREAT``: a mistyped or missing attribute fails (ENOENT) instead of creating
a file.

Pure logic without Ansible imports; Python 3.9 compatible (it runs on the managed nodes).

The library's stages (one file each):

* ``sysfs``: this file;
* ``cpu_topology``: CPUs, cpufreq policies, RAPL zones, the cpu_power_info facts;
* ``power_journal``: the state file holding the originals;
* ``cpufreq_plan``: P-state request validation and planning;
* ``cstates`` / ``uncore`` / ``powercap``: the other controls (discovery, kernel rules, planner);
* ``power_zones``: power-reading sources (RAPL zones, hwmon), shared with the collectd plugin;
* ``power_apply``: ordered writes, read-back, rollback, the entry points.
"""

from __future__ import annotations

import errno
import os

CPU_DIR = "devices/system/cpu"
POWERCAP_DIR = "class/powercap"
HWMON_DIR = "class/hwmon"


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


def describe_oserror(exc):
    name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else "error"
    return f"{name}: {exc.strerror or exc}"


def read_optional(acc, rel):
    try:
        return acc.read(rel)
    except OSError:
        return None


def khz_to_mhz(value):
    if value is None or not str(value).isdigit():
        return None
    return int(value) // 1000
