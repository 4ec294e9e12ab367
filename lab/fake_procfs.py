"""A lab node's ``/proc/stat``: CPU time that follows the node's simulated load.

Every lab node shares this machine's kernel, whose ``/proc/stat`` counts this machine's CPUs and
load, not the node's. A bare-metal node's exporters (collectd's cpu plugin, node_exporter) turn the
deltas of its per-CPU times into utilisation, and the power models are fitted against it, so each
node gets a file of its own, bind-mounted read-only over ``/proc/stat`` in its mount namespace
(lab/node_init.py), that the lab's power meter (lab/components/node_power.py) advances with the
same utilisation it turns into RAPL energy.

The file keeps the kernel's rules (fs/proc/stat.c): times in USER_HZ (100 per second) as
``user nice system idle iowait irq softirq steal guest guest_nice``; the ``cpu`` line sums every
CPU the node has had, the ``cpuN`` lines list the online CPUs only (the node's fake sysfs says
which), counters only grow. The other lines (``intr``, ``ctxt``, ``btime`` ...) are this machine's at
power-on. Busy time is counted as ``user``.

The meter rewrites the file in place (a bind mount pins the inode, so it cannot be replaced by a
rename): one ``pwrite`` of the whole text at offset 0. Counters only grow, so the text only shrinks
when a CPU goes offline (then it is truncated after the write). A reader racing a write may see a
torn number, which the kernel's generated-at-read file never shows (docs/lab.md says so; a FUSE
kernel would serve the file at read time).
"""

from __future__ import annotations

import os
import pathlib

from lab import fake_sysfs

USER_HZ = 100
MICRO = 1_000_000
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
USER, IDLE = FIELDS.index("user"), FIELDS.index("idle")
HOST_STAT = pathlib.Path("/proc/stat")
ONLINE = pathlib.Path("devices/system/cpu/online")


def stat_path(sysfs: pathlib.Path) -> pathlib.Path:
    """Where a node's /proc/stat lives on the controller: beside its fake sysfs (lab/nodes.py)."""
    return sysfs.parent / "proc" / "stat"


def online_cpus(sysfs: pathlib.Path) -> list[int]:
    """The node's online CPUs from its fake sysfs (its cpulist, as the kernel writes it)."""
    return fake_sysfs.parse_cpulist((sysfs / ONLINE).read_text())


def parse(text: str) -> tuple[dict[int, list[int]], list[str]]:
    """(per-CPU times of the ``cpuN`` lines, the lines after them) of a /proc/stat text."""
    cpus: dict[int, list[int]] = {}
    rest: list[str] = []
    for line in text.splitlines():
        name, _sep, values = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            times = [int(v) for v in values.split()]
            cpus[int(name[3:])] = (times + [0] * len(FIELDS))[: len(FIELDS)]
        elif name != "cpu":
            rest.append(line)
    return cpus, rest


def render(cpus: dict[int, list[int]], online: list[int], rest: list[str]) -> str:
    """The kernel's text: the sum over every CPU known, then each online CPU, then the rest."""
    total = [sum(times[i] for times in cpus.values()) for i in range(len(FIELDS))]
    lines = ["cpu  " + " ".join(str(v) for v in total)]
    lines += [f"cpu{cpu} " + " ".join(str(v) for v in cpus[cpu]) for cpu in online if cpu in cpus]
    return "\n".join(lines + rest) + "\n"


def power_on(path: pathlib.Path, sysfs: pathlib.Path, uptime_s: float | None = None) -> None:
    """Write the node's /proc/stat as at boot: every online CPU idle since this machine booted (the
    node's /proc/uptime is this machine's), the other lines this machine's."""
    if uptime_s is None:
        uptime_s = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    online = online_cpus(sysfs)
    idle = int(uptime_s * USER_HZ)
    cpus = {cpu: [idle if i == IDLE else 0 for i in range(len(FIELDS))] for cpu in online}
    _host_cpus, rest = parse(HOST_STAT.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(render(cpus, online, rest))
    os.chmod(tmp, 0o444)
    os.replace(tmp, path)


class CpuTimes:
    """One node's CPU times, advanced by utilisation; whole jiffies go to the file, the fractions
    wait in memory so nothing is lost to rounding."""

    def __init__(self, path: pathlib.Path, sysfs: pathlib.Path):
        self.path = path
        self.sysfs = sysfs
        self._inode: int | None = None
        self._cpus: dict[int, list[int]] = {}
        self._rest: list[str] = []
        self._pending = [0, 0]  # busy, idle micro-jiffies per online CPU not yet written (exact sums)

    def _load(self) -> bool:
        """Read the file when it is new (first use, or rebuilt at a node's power-on)."""
        try:
            inode = self.path.stat().st_ino
            if inode == self._inode:
                return True
            self._cpus, self._rest = parse(self.path.read_text())
        except (OSError, ValueError):
            return False
        self._inode = inode
        self._pending = [0, 0]
        return True

    def advance(self, seconds: float, util_percent: float) -> None:
        """Count ``seconds`` at ``util_percent`` on every online CPU and rewrite the file in place
        with the whole jiffies; the fractions wait for the next call."""
        if not self._load():
            return  # no file (a node without one, or being rebuilt): the next call continues
        share = min(100.0, max(0.0, util_percent)) / 100.0
        self._pending[0] += round(share * seconds * USER_HZ * MICRO)
        self._pending[1] += round((1.0 - share) * seconds * USER_HZ * MICRO)
        busy, idle = self._pending[0] // MICRO, self._pending[1] // MICRO
        if busy == 0 and idle == 0:
            return
        try:
            online = online_cpus(self.sysfs)
        except (OSError, ValueError):
            return
        self._pending[0] -= busy * MICRO
        self._pending[1] -= idle * MICRO
        for cpu in online:
            times = self._cpus.setdefault(cpu, [0] * len(FIELDS))  # a CPU first seen online
            times[USER] += busy
            times[IDLE] += idle
        data = render(self._cpus, online, self._rest).encode()
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except OSError:
            return
        try:
            os.pwrite(fd, data, 0)
            if os.fstat(fd).st_size > len(data):  # fewer CPUs online: the text got shorter
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
