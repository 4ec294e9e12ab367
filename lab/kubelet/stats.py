"""The lab kubelet's resource statistics, as kubelet serves them: the Summary API (``/stats/summary``),
the resource metrics (``/metrics/resource``, what metrics-server and so ``kubectl top`` and the
resource-metric HPAs read) and cAdvisor's container metrics (``/metrics/cadvisor``).

Where the figures come from, with no cgroups to read:

- the node: its ``/proc/stat`` (the node's own, lab/fake_procfs.py: the CPU time of the load its
  power follows) for CPU, busy time being every field but ``idle`` and ``iowait`` as cAdvisor's root
  usage counts it, plus the node agent's own CPU time (this kubelet's: a node's root cgroup counts
  its system daemons too, so an idle node's usage is never 0, which metrics-server would refuse as
  an incomplete node metric); this machine's ``/proc/meminfo`` for memory (usage ``MemTotal - MemFree``, working
  set that minus ``Inactive(file)``, available ``MemAvailable``), as the root cgroup's figures are;
- a container: its process and every descendant (``/proc/<pid>/stat``): user and system time,
  with the reaped children's, and the resident set as its working set; a container of a stress
  image (the power demo's stress-ng, which the lab does not let burn this machine's CPUs) adds the
  CPUs its arguments stress for as long as it has run, the load the node's power meter counts;
- a pod: the sum of its containers.

kubelet's rules kept: resource metrics carry their sample's timestamp and are sorted by family, the
counters are core-seconds, ``usageNanoCores`` needs two samples (kubelet's cached previous one) and
is left out before that, ``resource_scrape_error`` says whether the figures could be read.
Standard library only: the node's system Python runs it.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import time

try:  # on a node stress_ng.py sits beside this package (the lab library, on sys.path); on the controller, lab.stress_ng
    import stress_ng
except ImportError:  # pragma: no cover - depends on how it is started
    from lab import stress_ng

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
USER_HZ = 100  # /proc/stat's unit, whatever CONFIG_HZ is
NANO = 1_000_000_000
_NOT_BUSY = (3, 4)  # idle and iowait in /proc/stat's cpu line


@dataclasses.dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    cpu_ticks: int  # utime + stime + cutime + cstime, in clock ticks
    rss_pages: int


def parse_process_stat(text: str) -> Process:
    """One ``/proc/<pid>/stat`` line; the command name may hold spaces and parentheses, so the fields
    are read after its last ``)`` (proc(5))."""
    pid = int(text.split(" ", 1)[0])
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): ppid is 4, utime 14, stime 15, cutime 16, cstime 17, rss 24
    return Process(pid, int(fields[1]), sum(int(fields[i]) for i in (11, 12, 13, 14)), int(fields[21]))


def read_processes(proc: pathlib.Path = pathlib.Path("/proc")) -> dict[int, Process]:
    found = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                process = parse_process_stat((entry / "stat").read_text())
            except (OSError, ValueError, IndexError):
                continue  # gone while read
            found[process.pid] = process
    return found


def tree_usage(processes: dict[int, Process], root: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of a process and all its descendants; (0, 0) when it is gone."""
    if root not in processes:
        return 0.0, 0
    children: dict[int, list[int]] = {}
    for process in processes.values():
        children.setdefault(process.ppid, []).append(process.pid)
    ticks = pages = 0
    stack, seen = [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        ticks += processes[pid].cpu_ticks
        pages += processes[pid].rss_pages
        stack.extend(children.get(pid, ()))
    return ticks / CLK_TCK, pages * PAGE_SIZE


def node_cpu_seconds(stat: str) -> float:
    """Busy core-seconds of the ``cpu`` line of a /proc/stat text."""
    for line in stat.splitlines():
        name, *values = line.split()
        if name == "cpu":
            times = [int(v) for v in values[:8]]
            return sum(t for i, t in enumerate(times) if i not in _NOT_BUSY) / USER_HZ
    raise ValueError("/proc/stat has no cpu line")


def node_memory(meminfo: str) -> dict[str, int]:
    """The root cgroup's memory figures from /proc/meminfo (kB there, bytes here)."""
    values = {}
    for line in meminfo.splitlines():
        name, _sep, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[name] = int(parts[0]) * 1024
    usage = values["MemTotal"] - values["MemFree"]
    return {
        "availableBytes": values.get("MemAvailable", values["MemFree"]),
        "usageBytes": usage,
        "workingSetBytes": max(0, usage - values.get("Inactive(file)", 0)),
        "rssBytes": values.get("AnonPages", 0),
        "pageFaults": 0,
        "majorPageFaults": 0,
    }


@dataclasses.dataclass
class ContainerRun:
    """A running container as the runtime knows it: its first process, when it started, and the
    stress-ng arguments when its image is a stress image (the load the lab simulates for it)."""

    name: str
    pid: int
    started: float  # wall clock
    image: str = ""
    stress_args: list[str] | None = None


@dataclasses.dataclass
class PodRun:
    """A pod the runtime runs: its running containers and its sandbox, a process in the pod's network
    namespace (the node's own for host-network and static pods; None when it has none running)."""

    namespace: str
    name: str
    uid: str
    started: float
    containers: list[ContainerRun]
    sandbox: int | None = None


def _timestamp(wall: float) -> str:
    return datetime.datetime.fromtimestamp(wall, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpulist_count(text: str) -> int:
    """How many CPUs a kernel cpulist (``0-3,8,10-11``) names."""
    count = 0
    for part in text.strip().split(","):
        if part:
            first, _sep, last = part.partition("-")
            count += int(last or first) - int(first) + 1
    return count


class Stats:
    """The figures at one moment, and the previous sample per container for ``usageNanoCores``.
    ``proc`` and ``sys`` are the node's (its mount namespace's /proc and /sys)."""

    def __init__(
        self,
        node: str,
        proc: pathlib.Path = pathlib.Path("/proc"),
        sys: pathlib.Path = pathlib.Path("/sys"),
        agent_cpu=time.process_time,
    ):
        self.node = node
        self.proc = proc
        self.sys = sys
        self.agent_cpu = agent_cpu  # () -> CPU seconds the node's own agent (this kubelet) has used
        self.previous: dict[tuple, tuple[float, float]] = {}

    def online_cpus(self) -> int:
        """The node's online CPUs (its kernel's cpulist): stress-ng's ``--cpu 0`` stresses them all."""
        return cpulist_count((self.sys / "devices/system/cpu/online").read_text())

    def machine(self) -> tuple[int, int]:
        """(logical CPUs, bytes of memory) as cAdvisor's machine info has them."""
        meminfo = (self.proc / "meminfo").read_text()
        mem_total = next(int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemTotal:"))
        return self.online_cpus(), mem_total

    def _cpu(self, key: tuple, seconds: float, now: float) -> dict:
        cpu = {"time": _timestamp(now), "usageCoreNanoSeconds": round(seconds * NANO)}
        before = self.previous.get(key)
        if before is not None and now > before[0] and seconds >= before[1]:
            cpu["usageNanoCores"] = round((seconds - before[1]) / (now - before[0]) * NANO)
        self.previous[key] = (now, seconds)
        return cpu

    def summary(self, pods: list[PodRun], now: float) -> dict:
        """kubelet's Summary (stats/v1alpha1) for the node and its pods."""
        node_cpu = node_cpu_seconds((self.proc / "stat").read_text()) + self.agent_cpu()
        memory = node_memory((self.proc / "meminfo").read_text())
        uptime = float((self.proc / "uptime").read_text().split()[0])
        node = {
            "nodeName": self.node,
            "startTime": _timestamp(now - uptime),
            "cpu": self._cpu(("node",), node_cpu, now),
            "memory": {"time": _timestamp(now), **memory},
        }
        processes = read_processes(self.proc)
        online = None
        items = []
        for pod in pods:
            containers = []
            pod_cpu = 0.0
            pod_memory = 0
            for run in pod.containers:
                seconds, resident = tree_usage(processes, run.pid)
                if run.stress_args is not None:
                    online = self.online_cpus() if online is None else online
                    seconds += stress_ng.cpus(run.stress_args, online) * max(0.0, now - run.started)
                pod_cpu += seconds
                pod_memory += resident
                containers.append(
                    {
                        "name": run.name,
                        "startTime": _timestamp(run.started),
                        "cpu": self._cpu((pod.uid, run.name), seconds, now),
                        "memory": {
                            "time": _timestamp(now),
                            "usageBytes": resident,
                            "workingSetBytes": resident,
                            "rssBytes": resident,
                        },
                    }
                )
            items.append(
                {
                    "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                    "startTime": _timestamp(pod.started),
                    "containers": containers,
                    "cpu": self._cpu((pod.uid,), pod_cpu, now),
                    "memory": {"time": _timestamp(now), "usageBytes": pod_memory, "workingSetBytes": pod_memory},
                }
            )
        live = {("node",)} | {(p.uid,) for p in pods} | {(p.uid, c.name) for p in pods for c in p.containers}
        for key in list(self.previous):
            if key not in live:
                del self.previous[key]
        return {"node": node, "pods": items}


# --- the text exposition (what the Prometheus client kubelet uses writes) -----------------------
# /metrics/resource's STABLE families (pkg/kubelet/metrics/collectors/resource_metrics.go): type and
# help as kubelet writes them (the ALPHA swap families have nothing to say without swap)
_STABLE = "[STABLE] "
RESOURCE_FAMILIES = {
    "container_cpu_usage_seconds_total": (
        "counter",
        _STABLE + "Cumulative cpu time consumed by the container in core-seconds",
    ),
    "container_memory_working_set_bytes": ("gauge", _STABLE + "Current working set of the container in bytes"),
    "container_start_time_seconds": ("gauge", _STABLE + "Start time of the container since unix epoch in seconds"),
    "node_cpu_usage_seconds_total": ("counter", _STABLE + "Cumulative cpu time consumed by the node in core-seconds"),
    "node_memory_working_set_bytes": ("gauge", _STABLE + "Current working set of the node in bytes"),
    "pod_cpu_usage_seconds_total": ("counter", _STABLE + "Cumulative cpu time consumed by the pod in core-seconds"),
    "pod_memory_working_set_bytes": ("gauge", _STABLE + "Current working set of the pod in bytes"),
    "resource_scrape_error": (
        "gauge",
        _STABLE + "1 if there was an error while getting container metrics, 0 otherwise",
    ),
}
# cAdvisor's (github.com/google/cadvisor metrics/prometheus.go) families the lab can fill
CADVISOR_FAMILIES = {
    "container_cpu_usage_seconds_total": ("counter", "Cumulative cpu time consumed in seconds."),
    "container_memory_rss": ("gauge", "Size of RSS in bytes."),
    "container_memory_usage_bytes": (
        "gauge",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
    ),
    "container_memory_working_set_bytes": ("gauge", "Current working set in bytes."),
    "container_start_time_seconds": ("gauge", "Start time of the container since unix epoch in seconds."),
    "machine_cpu_cores": ("gauge", "Number of logical CPU cores."),
    "machine_memory_bytes": ("gauge", "Amount of memory installed on the machine."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in sorted(labels.items())) + "}"


def _families(families: dict[str, tuple[str, str, list[str]]]) -> str:
    """HELP, TYPE and samples per family, families sorted by name and left out when empty."""
    out = []
    for name in sorted(families):
        kind, help_text, samples = families[name]
        if samples:
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
    return "\n".join(out) + "\n"


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def _seconds(timestamp: str) -> float:
    """An RFC 3339 time of the Summary (whole seconds) as seconds since the epoch."""
    moment = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _sample(fams: dict, family: str, value: float, labels: dict, stamp: int | None = None) -> None:
    """One sample line of a family: its labels sorted, its value, and its timestamp in ms if any."""
    line = f"{family}{_labels(**labels)} {_number(value)}"
    fams[family][2].append(line if stamp is None else f"{line} {stamp}")


def resource_metrics(summary: dict | None, now: float = 0.0) -> str:
    """``/metrics/resource`` (pkg/kubelet/metrics/collectors/resource_metrics.go): the STABLE
    families, each usage sample with its timestamp in milliseconds (``now``, when the summary was
    sampled: the Summary's RFC 3339 times keep only seconds); ``resource_scrape_error`` 1 when there
    is no summary."""
    fams = {name: (kind, help_text, []) for name, (kind, help_text) in RESOURCE_FAMILIES.items()}
    _sample(fams, "resource_scrape_error", 0 if summary is not None else 1, {})
    if summary is None:
        return _families(fams)
    stamp = int(now * 1000)
    node = summary["node"]
    _sample(fams, "node_cpu_usage_seconds_total", node["cpu"]["usageCoreNanoSeconds"] / NANO, {}, stamp)
    _sample(fams, "node_memory_working_set_bytes", node["memory"]["workingSetBytes"], {}, stamp)
    for pod in summary["pods"]:
        ref = {"pod": pod["podRef"]["name"], "namespace": pod["podRef"]["namespace"]}
        for container in pod["containers"]:
            labels = {**ref, "container": container["name"]}
            _sample(fams, "container_start_time_seconds", _seconds(container["startTime"]), labels)
            cpu_seconds = container["cpu"]["usageCoreNanoSeconds"] / NANO
            _sample(fams, "container_cpu_usage_seconds_total", cpu_seconds, labels, stamp)
            _sample(fams, "container_memory_working_set_bytes", container["memory"]["workingSetBytes"], labels, stamp)
        _sample(fams, "pod_cpu_usage_seconds_total", pod["cpu"]["usageCoreNanoSeconds"] / NANO, ref, stamp)
        _sample(fams, "pod_memory_working_set_bytes", pod["memory"]["workingSetBytes"], ref, stamp)
    return _families(fams)


def cadvisor_metrics(
    summary: dict, pods: list[PodRun], machine_cpus: int, machine_memory: int, now: float = 0.0
) -> str:
    """``/metrics/cadvisor``'s container families for the node's root (``id="/"``) and each
    container (``id`` its place under kubepods, ``name`` its runtime ID, ``image`` its image), each
    usage sample stamped ``now`` (ms), and the machine's size."""
    runs = {(pod.uid, run.name): run for pod in pods for run in pod.containers}
    fams = {name: (kind, help_text, []) for name, (kind, help_text) in CADVISOR_FAMILIES.items()}
    _sample(fams, "machine_cpu_cores", machine_cpus, {})
    _sample(fams, "machine_memory_bytes", machine_memory, {})
    stamp = int(now * 1000)

    def usage(labels: dict, cpu: dict, memory: dict) -> None:
        _sample(fams, "container_cpu_usage_seconds_total", cpu["usageCoreNanoSeconds"] / NANO, labels, stamp)
        _sample(fams, "container_memory_usage_bytes", memory["usageBytes"], labels, stamp)
        _sample(fams, "container_memory_working_set_bytes", memory["workingSetBytes"], labels, stamp)
        _sample(fams, "container_memory_rss", memory["rssBytes"], labels, stamp)

    node = summary["node"]
    usage(
        {"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": ""}, node["cpu"], node["memory"]
    )
    for pod in summary["pods"]:
        ref = pod["podRef"]
        for container in pod["containers"]:
            run = runs.get((ref["uid"], container["name"]))
            labels = {
                "container": container["name"],
                "id": f"/kubepods/pod{ref['uid']}/{run.pid if run else ''}",
                "image": run.image if run else "",
                "name": f"lab://{run.pid}" if run else "",
                "namespace": ref["namespace"],
                "pod": ref["name"],
            }
            usage(labels, container["cpu"], container["memory"])
            _sample(fams, "container_start_time_seconds", _seconds(container["startTime"]), labels)
    return _families(fams)
