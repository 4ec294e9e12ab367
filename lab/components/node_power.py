"""The lab's power meter: each node's RAPL energy counters advance as a real server's would.

A bare-metal node draws power that follows its CPU load, and its RAPL ``energy_uj`` counters
count that energy. The lab's fake kernels (lab/fake_sysfs.py) are plain files, so this process plays
the hardware: each node (the workers and the control plane) is a SPECpower_ssj2008 server
(``../shared/data/specpower/servers.csv``, read in place; chosen per lab shape by ``choose_servers``
and ``choose_control_plane_server`` and recorded in the node's label
``lab.poweraware.io/specpower-server``), and each package zone draws the power the server's curve
gives at the node's current CPU utilisation, split evenly over the node's packages; the platform
zone (psys) draws the whole server's. The meter publishes each zone's counter and power whenever
the power changes (lab/fake_kernel.py ``publish_meter``), and the node's kernel computes ``energy_uj``
when it is read, wrapping at ``max_energy_range_uj`` as the kernel's counter does: no counter ticks.
The node's ``/proc/stat`` (lab/fake_procfs.py) counts CPU time at the same utilisation, every
``TICK`` seconds, so its exporters see the load that draws the power.

Utilisation is the CPU the node's pods use over the node's allocatable CPU, capped at 100 %: for
the pods in phase ``Running``, each container's CPU request (init containers not counted), except
a container of a stress image (lab/images.py ``cpu_use``, the power demo's stress-ng), which uses
what its stress-ng arguments stress (lab/stress_ng.py) while its status says it runs, and nothing
between two runs (the demo's ``--timeout`` ends it, kubelet restarts it after a back-off); the API
is read every ``POLL`` seconds. At each publication the counter file is also replaced atomically
with the counter's value then (its mode kept: root-only counters stay 0400), for whoever reads the
tree itself; a counter a power cycle rebuilt is continued from its new value.

What it simulated last is in ``<state>/node-power.json`` (per node: server, utilisation, watts,
packages, TDP, and the power in percent of TDP), which tests compare the telemetry against.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import pathlib
import time
import urllib.error

from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import parse_cpu_quantity  # its grammar

from lab import (
    fake_kernel,
    fake_procfs,
    fake_sysfs,
    images,
    specpower,  # one reader of the data set, the benchmarks' too
    stress_ng,
)
from lab.api import Api
from lab.kubelet.containers import stress_arguments
from lab.kubelet.pull import reference_of
from lab.process import LabProcess, python_module

TICK = 0.1  # /proc/stat's step: a collectd interval of 10 s sees at most 1 % of error from it
POLL = 1.0
SERVER_LABEL = "lab.poweraware.io/specpower-server"
STATUS_FILE = "node-power.json"
POWERCAP = "devices/virtual/powercap/intel-rapl"


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} node-power: {message}", flush=True)


def servers_csv() -> pathlib.Path:
    return specpower.data_dir() / "specpower" / "servers.csv"


class NoData(RuntimeError):
    """The SPECpower data set is not where the lab looks; the message says where to put it."""


@functools.lru_cache(maxsize=8)
def lab_servers(workers: int, packages: int, types: int = 0) -> tuple[specpower.Server, ...]:
    """The servers of a lab with ``workers`` workers of ``packages`` RAPL packages each, one per
    worker (``types`` server models among them, 0: every worker its own), then the control plane's
    (``choose_control_plane_server``)."""
    path = servers_csv()
    if not path.is_file():
        raise NoData(
            f"the lab's workers are SPECpower servers, and {path} is missing: set SHARED_DATA to the "
            "folder that holds specpower/servers.csv (the workspace's shared/data)"
        )
    servers = specpower.load_servers(path)
    return (*choose_servers(servers, workers, packages, types), choose_control_plane_server(servers, packages))


def choose_servers(
    servers: list[specpower.Server], workers: int, packages: int, types: int = 0
) -> list[specpower.Server]:
    """One server per worker, spread over the data set: among the servers with as many chips as
    the lab's nodes have RAPL packages (all servers when none has), ordered by idle power, the
    ones at evenly spaced quantiles, so the workers differ as a mixed fleet does and the choice is
    the same on every machine.

    ``types`` > 0 makes a fleet of that many server models bought in bulk, as real clusters are
    (and as the placement benchmark draws them): the models are the quantiles for ``types``
    servers, and worker i gets model ``i mod types``, so every model has workers when there are at
    least as many workers as models. 0 (or ``types`` >= ``workers``): every worker its own model."""
    if workers <= 0:
        return []
    if types < 0:
        raise ValueError(f"server types must be >= 0 (0: one per worker), got {types}")
    pool = [s for s in servers if s.chips == packages] or list(servers)
    if not pool:
        raise ValueError("the SPECpower data set has no server")
    pool.sort(key=lambda s: (s.idle_w, s.peak_w, s.id))
    models = min(types, workers) if types else workers
    picked = [pool[min(len(pool) - 1, int((i + 0.5) * len(pool) / models))] for i in range(models)]
    return [picked[i % models] for i in range(workers)]


def choose_control_plane_server(servers: list[specpower.Server], packages: int) -> specpower.Server:
    """The control plane's server: the median of the workers' pool by idle power (a fleet's control
    plane is usually one of its common models). The workers' choice does not depend on it."""
    pool = sorted(
        [s for s in servers if s.chips == packages] or list(servers), key=lambda s: (s.idle_w, s.peak_w, s.id)
    )
    if not pool:
        raise ValueError("the SPECpower data set has no server")
    return pool[len(pool) // 2]


def package_tdp_w(server: specpower.Server, packages: int) -> float:
    """The TDP each package reports (constraint_0_max_power_uw): the server's peak shared by its
    packages, rounded up to 5 W as data sheets give it, so the package power never exceeds it."""
    return 5.0 * math.ceil(server.peak_w / packages / 5.0)


def cores(quantity: str) -> float:
    """A CPU quantity as the API writes it ("250m", "2", "1.5") in cores."""
    return parse_cpu_quantity(str(quantity)) / 1000.0


STRESS_IMAGES = images.stress_images()  # the table does not change while the meter runs


def container_cpu(container: dict, running: bool, online: float) -> float:
    """The CPUs one container of a Running pod uses: a stress image's while it runs (its arguments,
    the image's entrypoint semantics), any other's request."""
    image = STRESS_IMAGES.get(reference_of(str(container.get("image", ""))))
    if image is not None:
        if not running:
            return 0.0
        args = stress_arguments(container, image, {})
        # a command that is not the image's stress-ng: the lab runs no load for it
        return stress_ng.cpus(args, online) if args is not None else 0.0
    requests = (container.get("resources") or {}).get("requests") or {}
    return cores(requests["cpu"]) if "cpu" in requests else 0.0


def pod_cpu(pod: dict, online: float) -> float:
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        running = "running" in ((statuses.get(container.get("name")) or {}).get("state") or {})
        total += container_cpu(container, running, online)
    return total


def utilisation(pods: list[dict], allocatable: dict[str, float]) -> dict[str, float]:
    """Per node, percent of its allocatable CPU its Running pods use (0..100)."""
    used = dict.fromkeys(allocatable, 0.0)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in used and (pod.get("status") or {}).get("phase") == "Running":
            used[node] += pod_cpu(pod, allocatable[node])
    return {node: min(100.0, 100.0 * used[node] / allocatable[node]) if allocatable[node] > 0 else 0.0 for node in used}


@dataclasses.dataclass
class Meter:
    """One worker: its server, its fake kernel's zones, the power it draws now."""

    node: str
    server: specpower.Server
    sysfs: pathlib.Path
    util: float = 0.0
    # the node's /proc/stat (lab/fake_procfs.py): its CPU times follow the same utilisation
    cpu_times: fake_procfs.CpuTimes = dataclasses.field(init=False, repr=False)
    # found once: a power cycle rebuilds the tree at the same paths (publish waits for its counters)
    _zones: tuple[list[pathlib.Path], list[pathlib.Path]] = dataclasses.field(
        default_factory=lambda: ([], []), init=False, repr=False
    )
    # what the node's kernel computes energy_uj from: the record published last, the tree it was
    # published for (lab/fake_sysfs.py's marker: a power cycle rebuilds the tree) and the power then
    _published: dict | None = dataclasses.field(default=None, init=False, repr=False)
    _published_for: tuple | None = dataclasses.field(default=None, init=False, repr=False)
    _published_watts: float | None = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.cpu_times = fake_procfs.CpuTimes(fake_procfs.stat_path(self.sysfs), self.sysfs)

    @property
    def watts(self) -> float:
        return specpower.true_power(self.server, self.util)

    def zones(self) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
        """(package zones, platform zones) by name, as the collectd plugin finds them."""
        if self._zones[0]:
            return self._zones
        packages, platform = [], []
        control = self.sysfs / POWERCAP
        for zone in sorted(control.glob("intel-rapl:*")):
            try:
                name = (zone / "name").read_text().strip()
            except OSError:
                continue
            if name.startswith("package-"):
                packages.append(zone)
            elif name == "psys":
                platform.append(zone)
        self._zones = (packages, platform)
        return self._zones

    def advance(self, seconds: float, now: float | None = None) -> None:
        """``seconds`` more of CPU time at the current utilisation, and the energy counters published
        anew if the power changed (``now``: ``time.monotonic()``, the clock the node's kernel reads)."""
        # CPU time every tick: a 10 s collectd interval pairs it with the energy (exact at any instant)
        # within 1 % when the load steps (at 0.5 s a step from 0 to 100 % put 5 points on the wrong side)
        self.cpu_times.advance(seconds, self.util)
        self.publish(time.monotonic() if now is None else now)

    def publish(self, now: float) -> None:
        """Publish every zone's counter at ``now`` and the power it draws from then on, when the power
        changed or the tree was rebuilt since the last publication; otherwise nothing (no write)."""
        built = fake_sysfs.built(self.sysfs)
        watts = self.watts
        if self._published is not None and built == self._published_for and watts == self._published_watts:
            return
        packages, platform = self.zones()
        if not packages or built is None:
            return
        same_tree = self._published is not None and built == self._published_for
        shares = [(zone, watts / len(packages)) for zone in packages] + [(zone, watts) for zone in platform]
        zones = {}  # in the order of shares
        for zone, share_w in shares:
            rel = str(zone.relative_to(self.sysfs))
            before = self._published["zones"].get(rel) if same_tree else None
            try:
                limit = before["max"] if before else int((zone / "max_energy_range_uj").read_text())
                counter = (
                    fake_kernel.metered_energy(before, self._published["at"], now)
                    if before
                    else int((zone / "energy_uj").read_text())
                )
            except (OSError, ValueError):
                return  # being rebuilt (a power cycle): the next tick publishes from the new counters
            zones[rel] = {"uj": counter, "uw": share_w * 1e6, "max": limit}
        for (zone, _share), published in zip(shares, zones.values(), strict=True):
            write_counter(zone, published["uj"])
        fake_kernel.publish_meter(self.sysfs, now, zones)
        self._published, self._published_for, self._published_watts = {"at": now, "zones": zones}, built, watts

    def status(self) -> dict:
        packages, _platform = self.zones()
        tdp = package_tdp_w(self.server, max(1, len(packages)))
        return {
            # what the power rules' node_package_power_avg computes: each package's power over its TDP
            "tdp_percent": round(100.0 * self.watts / max(1, len(packages)) / tdp, 3),
            "server": self.server.id,
            "system": self.server.name,
            "util_percent": round(self.util, 3),
            "watts": round(self.watts, 3),
            "packages": len(packages),
            "package_tdp_w": tdp,
        }


def write_counter(zone: pathlib.Path, value: int) -> None:
    """The zone's energy_uj file holds ``value``, replaced atomically with its mode kept."""
    path = zone / "energy_uj"
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return  # being rebuilt: the next publication writes the new tree
    tmp = zone / ".energy_uj.new"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as handle:
        handle.write(f"{value}\n")
    os.chmod(tmp, mode)  # the umask may have taken bits from it
    os.replace(tmp, path)


def write_status(path: pathlib.Path, meters: list[Meter]) -> None:
    data = {"at": time.time(), "nodes": {m.node: m.status() for m in meters}}
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def run(api: Api, meters: list[Meter], status_path: pathlib.Path) -> None:
    allocatable: dict[str, float] = {}
    last_poll = 0.0
    last = time.monotonic()
    log("metering " + ", ".join(f"{m.node}={m.server.id} ({m.server.name})" for m in meters))
    while True:
        now = time.monotonic()
        if now - last_poll >= POLL:
            last_poll = now
            try:
                if len(allocatable) < len(meters):
                    for node in api.get("/api/v1/nodes")["items"]:
                        name = node["metadata"]["name"]
                        cpu = (node.get("status") or {}).get("allocatable", {}).get("cpu")
                        if cpu is not None:
                            allocatable[name] = cores(cpu)
                pods = api.get("/api/v1/pods")["items"]
                util = utilisation(pods, {m.node: allocatable.get(m.node, 0.0) for m in meters})
                for meter in meters:
                    meter.util = util[meter.node]
            except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
                log(f"cannot read the cluster ({exc}); power stays at the last utilisation")
            write_status(status_path, meters)
        for meter in meters:
            meter.advance(now - last, now)
        last = now
        time.sleep(max(0.0, TICK - (time.monotonic() - now)))


def component(api_url: str, pki_dir: pathlib.Path, state_dir: pathlib.Path, nodes: dict[str, tuple]) -> LabProcess:
    """``nodes``: node name -> (its fake sysfs directory, SPECpower server id)."""
    args = [f"--api={api_url}", f"--pki={pki_dir}", f"--status={state_dir / STATUS_FILE}"]
    args += [f"--node={name}={sysfs}={server}" for name, (sysfs, server) in sorted(nodes.items())]
    return python_module("node-power", __name__, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True)
    parser.add_argument("--pki", type=pathlib.Path, required=True)
    parser.add_argument("--status", type=pathlib.Path, required=True)
    parser.add_argument("--node", action="append", default=[], help="NAME=SYSFS=SERVER_ID")
    args = parser.parse_args()
    servers = {s.id: s for s in specpower.load_servers(servers_csv())}
    meters = []
    for spec in args.node:
        name, sysfs, server = spec.split("=", 2)
        meters.append(Meter(name, servers[server], pathlib.Path(sysfs)))
    run(Api(args.api, args.pki, "admin"), meters, args.status)


if __name__ == "__main__":
    main()
