"""The live placement replay's pieces (benchmarks/live_placement.py), each unit-tested in
tests/unit/benchmarks/test_live_replay.py; the smoke test (tests/integration/test_power_extender.py)
runs ``replay`` on the lab.

* ``make_slice``: a window of the pod trace, its CPU and memory requests scaled to the cluster and
  its clock compressed to minutes; the same ``PodTrace`` feeds the live replay and the simulator.
* ``cluster_of``: the simulator's cluster made of the live nodes (their SPECpower server, allocatable
  CPU and memory), so both sides place onto the same machines.
* ``replay``: the slice through the real kube-scheduler: pods created and deleted at their
  compressed times by a single client, each creation waiting for the binding (or a short timeout)
  before the next event, so every decision sees the bindings before it, as the simulator's do.
* ``integrate_power``: energy from the exported power samples: each sample is the average power over
  the interval that ends at its timestamp (collectd computes it from the RAPL counter's delta), so
  the energy in a window is the sum of sample x overlap.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from _placement_policies import MIB  # importing it puts the collection (.cache/collections) on sys.path
from _placement_sim import Cluster, Node, PodTrace, Policy, load_pods, make_trace, peak_demand, simulate
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import (
    parse_byte_quantity,
    parse_cpu_quantity,
)

NAMESPACE = "live-placement"
POD_PREFIX = "lp"
IMAGE = "registry.k8s.io/pause:3.10"  # never started on a worker: kwok reports it Running
APP_LABEL = {"app.kubernetes.io/name": "live-placement"}
# What collectd exports per RAPL package (roles/collectd/files/rapl_power.py); the lab's packages
# share the server's wall power, so their sum is the node's power.
POWER_SERIES = 'collectd_rapl_power{type="package", node!=""}'
UTILISATION_SERIES = "instance:node_cpu:ratio"  # what load-watcher averages for Peaks (power_rules.yml)


class SliceError(ValueError):
    """A slice that cannot be replayed (empty window, nothing fits); the message says which option to change."""


@dataclasses.dataclass(frozen=True)
class Slice:
    trace: PodTrace  # live seconds from 0 (the replay's start) to ``seconds``
    seconds: float
    scale: float  # CPU and memory requests x scale
    compression: float  # trace seconds per live second
    window: tuple[float, float]  # trace seconds
    floored: int  # pods made to live ``min_live_s`` (shorter in the compressed trace)
    warm: int  # pods alive at the window's start: created before the clock starts


def make_slice(
    pods_csv,
    start: float,
    hours: float,
    seconds: float,
    capacity_m: int,
    fill: float = 0.7,
    min_live_s: float = 5.0,
) -> Slice:
    """The trace's pods alive in ``[start, start + hours)`` (those alive at ``start`` are created at
    the start, as ``load_pods`` clips), requests scaled so that the peak CPU demand is ``fill`` of
    ``capacity_m`` (memory by the same factor: the pods shrink, their shape stays), the window
    compressed to ``seconds``. A pod the compression makes shorter than ``min_live_s`` lives that
    long (clipped at the end): a binding and the power meter's poll take about a second each, so
    shorter pods would be measured by the lab's latency rather than by their placement."""
    if hours <= 0 or seconds <= 0:
        raise SliceError(f"hours and seconds must be > 0, got hours={hours}, seconds={seconds}")
    if not 0 < fill <= 1:
        raise SliceError(f"fill must be in (0, 1], got {fill}: it is the peak CPU demand over the cluster's capacity")
    end = start + hours * 3600.0
    raw = load_pods(pods_csv, start, end)
    if not len(raw):
        raise SliceError(f"no pod of the trace lives in [{start}, {end}): choose another --start")
    peak = peak_demand(raw)
    scale = fill * capacity_m / peak
    compression = (end - start) / seconds
    pods = []
    floored = 0
    for i in range(len(raw)):
        created = (float(raw.created[i]) - start) / compression
        deleted = (float(raw.deleted[i]) - start) / compression
        if deleted - created < min_live_s:
            deleted = min(created + min_live_s, seconds)
            floored += 1
        cpu = max(10, round(int(raw.cpu_m[i]) * scale))
        memory = round(int(raw.mem_mib[i]) * scale)
        pods.append((f"{POD_PREFIX}-{i:04d}", cpu, created, deleted, memory))
    trace = make_trace(pods)
    warm = int(np.sum(trace.created == 0.0))
    return Slice(trace, float(seconds), scale, compression, (start, end), floored, warm)


def spread_pods(piece: Slice, count: int) -> Slice:
    """``count`` pods of a slice evenly spread over its creation order (those alive at the start and
    later arrivals alike), for the smoke test; demand never exceeds the slice's."""
    total = len(piece.trace)
    wanted = min(count, total)
    keep = sorted({round(i * (total - 1) / max(wanted - 1, 1)) for i in range(wanted)})
    trace = make_trace(
        [
            (
                piece.trace.names[i],
                int(piece.trace.cpu_m[i]),
                float(piece.trace.created[i]),
                float(piece.trace.deleted[i]),
                int(piece.trace.mem_mib[i]),
            )
            for i in keep
        ]
    )
    return dataclasses.replace(piece, trace=trace, warm=int(np.sum(trace.created == 0.0)))


# --- the simulator's view of the live cluster ------------------------------------------------------


def cpu_m(quantity: str) -> int:
    """A CPU quantity as the API writes it ("32", "31500m") in millicores (the collection's grammar)."""
    return parse_cpu_quantity(str(quantity))


def memory_mib(quantity: str) -> int:
    """A memory quantity ("127Gi", "1000Mi", "134217728") in MiB, rounded down."""
    return parse_byte_quantity(str(quantity)) // MIB


def cluster_of(nodes: Sequence[Mapping], servers: Mapping[str, object], server_label: str) -> Cluster:
    """The simulator's cluster of the live nodes (``{"name", "labels", "allocatable"}`` each): the
    curve of the SPECpower server named by ``server_label``, the allocatable CPU and memory."""
    found = []
    problems = []
    for node in sorted(nodes, key=lambda n: n["name"]):
        server_id = node["labels"].get(server_label)
        server = servers.get(server_id)
        if server is None:
            problems.append(f"node {node['name']}: label {server_label}={server_id!r} names no server of the data set")
            continue
        found.append(
            Node(
                name=node["name"],
                server_id=str(server_id),
                capacity_m=cpu_m(node["allocatable"]["cpu"]),
                watts=tuple(float(w) for w in server.watts),
                memory_mib=memory_mib(node["allocatable"]["memory"]),
            )
        )
    if problems:
        raise SliceError("; ".join(problems))
    return Cluster(found)


def baseline(pods: Sequence, nodes: Sequence[str], namespace: str = NAMESPACE) -> tuple[list[int], list[int]]:
    """CPU millicores and memory MiB already requested on each of ``nodes`` by pods outside the
    replay (``pods``: the API's pod objects): DaemonSets and services that stay for the whole
    replay, which the simulator starts from. Containers only, as the lab's power meter counts them;
    finished pods are left out."""
    cpu = dict.fromkeys(nodes, 0)
    memory = dict.fromkeys(nodes, 0)
    for pod in pods:
        node = pod.spec.node_name
        if node not in cpu or pod.metadata.namespace == namespace or pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            requests = (container.resources and container.resources.requests) or {}
            if "cpu" in requests:
                cpu[node] += cpu_m(requests["cpu"])
            if "memory" in requests:
                memory[node] += memory_mib(requests["memory"])
    return [cpu[n] for n in nodes], [memory[n] for n in nodes]


def simulate_window(cluster: Cluster, piece: Slice, policy: Policy, seed: int, initial=None) -> dict:
    """The simulator on the slice over the live window [0, seconds], from the nodes' ``initial``
    requests (``baseline``; their power before the first pod when it comes after 0): energy (J),
    pods late and never placed, pod -> node, the decisions tie-broken at random."""
    cpu, memory = initial or (None, None)
    result = simulate(cluster, piece.trace, policy, "on", np.random.default_rng(seed), cpu, memory)
    start = np.zeros(len(cluster), dtype=np.int64) if cpu is None else np.array(cpu, dtype=np.int64)
    idle = float(cluster.power(start, "on").sum())
    # before the first pod and after the last one has gone, only the baseline draws
    before = idle * piece.trace.start
    after = idle * (piece.seconds - piece.trace.end)
    return {
        "energy_j": result.energy_j + before + after,
        "delayed": result.delayed,
        "rejected": result.rejected,
        "assignment": {piece.trace.names[i]: cluster.nodes[n].name for i, n in enumerate(result.assignment) if n >= 0},
        "random_ties": result.random_ties,
    }


# --- energy from the exported power ----------------------------------------------------------------


def integrate_power(samples: Sequence[tuple[float, float]], t0: float, t1: float, interval: float) -> float:
    """Joules in ``[t0, t1]`` from one series' ``(timestamp, watts)`` samples, each the average power
    over the ``interval`` that ends at its timestamp (collectd's read time: write_prometheus exports
    it). Prometheus scraping less often than collectd reads keeps only some samples (15 s scrapes of a
    10 s collectd keep two in three): an interval no sample covers is taken at the mean of the samples
    on either side. Samples repeated at one timestamp count once. The window must be covered: a gap
    of more than one missed sample (two and a half intervals: collectd's reads jitter), or a window
    the samples do not reach, raises."""
    if t1 <= t0:
        raise ValueError(f"empty window [{t0}, {t1}]")
    points = sorted({float(t): float(w) for t, w in samples}.items())
    if not points:
        raise ValueError("no samples")
    if points[0][0] - interval > t0 or points[-1][0] < t1:
        raise ValueError(
            f"the samples cover [{points[0][0] - interval:.1f}, {points[-1][0]:.1f}], not the window "
            f"[{t0:.1f}, {t1:.1f}]: query a wider range, or wait one interval after the window"
        )
    energy = 0.0

    def add(start: float, end: float, watts: float) -> None:
        nonlocal energy
        overlap = min(end, t1) - max(start, t0)
        if overlap > 0:
            energy += watts * overlap

    previous = None
    for stamp, watts in points:
        start = stamp - interval
        if previous is not None:
            before, before_w = previous
            if stamp - before > 2.5 * interval and stamp > t0 and before < t1:
                raise ValueError(f"no sample between {before:.1f} and {stamp:.1f} (interval {interval} s)")
            if start > before:  # an interval whose sample was not kept
                add(before, start, (before_w + watts) / 2.0)
            start = max(start, before)
        add(start, stamp, watts)
        previous = (stamp, watts)
    return energy


def series_samples(result: Sequence[Mapping]) -> dict[str, list[tuple[float, float]]]:
    """A Prometheus range-vector result as ``"node/zone" -> [(t, value)]``."""
    out: dict[str, list[tuple[float, float]]] = {}
    for series in result:
        labels = series["metric"]
        key = f"{labels.get('node', '')}/{labels.get('rapl', labels.get('instance', ''))}"
        out.setdefault(key, []).extend((float(t), float(v)) for t, v in series["values"])
    return out


def instant_query(prom_get: Callable[[str], tuple[int, bytes]], prometheus: str, query: str, at: float) -> list:
    """The result of one Prometheus instant query evaluated at ``at`` (``prom_get(url) -> (status, body)``)."""
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    status, body = prom_get(url)
    if status != 200:
        raise RuntimeError(f"Prometheus answered {status} to {query}: {body[:300]!r}")
    return json.loads(body)["data"]["result"]


def cluster_energy(
    prom_get: Callable[[str], tuple[int, bytes]],
    prometheus: str,
    nodes: Sequence[str],
    t0: float,
    t1: float,
    interval: float,
) -> dict[str, float]:
    """Joules per node in ``[t0, t1]`` from Prometheus (``prom_get(url) -> (status, body)``): the raw
    samples of every package of ``nodes``, integrated with ``integrate_power`` and summed per node."""
    span = int(math.ceil(time.time() - t0 + 3 * interval))
    per_series = series_samples(instant_query(prom_get, prometheus, f"{POWER_SERIES}[{span}s]", time.time()))
    energy = {}
    for node in nodes:
        zones = {k: v for k, v in per_series.items() if k.split("/", 1)[0] == node}
        if not zones:
            raise RuntimeError(f"Prometheus has no {POWER_SERIES} series for node {node}")
        energy[node] = sum(integrate_power(v, t0, t1, interval) for v in zones.values())
    return energy


def step_grid(per_node: Mapping[str, Sequence[tuple[float, float]]], nodes: Sequence[str]):
    """``(times, values[time, node])``: every node's samples on the union of their timestamps, each
    node's last value carried forward (a node without a sample yet takes its first one)."""
    times = sorted({t for node in nodes for t, _v in per_node.get(node, ())})
    if not times:
        raise ValueError("no samples")
    values = np.zeros((len(times), len(nodes)))
    for j, node in enumerate(nodes):
        samples = sorted(per_node.get(node, ()))
        if not samples:
            raise ValueError(f"no samples for node {node}")
        stamps = np.array([t for t, _v in samples])
        row = np.searchsorted(stamps, times, side="right") - 1
        values[:, j] = np.array([v for _t, v in samples])[np.maximum(row, 0)]
    return np.array(times), values


def utilisation_before(
    prom_get: Callable[[str], tuple[int, bytes]], prometheus: str, nodes: Sequence[str], t0: float, seconds: float
):
    """What load-watcher averaged before a replay: each node's ``instance:node_cpu:ratio`` raw samples
    in the ``seconds`` before ``t0``, in percent, on ``step_grid``, times relative to ``t0``."""
    query = f"{UTILISATION_SERIES}[{int(math.ceil(seconds))}s]"
    per_node: dict[str, list[tuple[float, float]]] = {}
    for series in instant_query(prom_get, prometheus, query, t0):
        node = series["metric"].get("instance", "")
        per_node.setdefault(node, []).extend((float(t) - t0, 100.0 * float(v)) for t, v in series["values"])
    missing = [n for n in nodes if n not in per_node]
    if missing:
        raise RuntimeError(f"Prometheus has no {UTILISATION_SERIES} before the replay for {', '.join(missing)}")
    return step_grid(per_node, nodes)


# --- the replay ----------------------------------------------------------------------------------


@dataclasses.dataclass
class LiveResult:
    policy: str
    t0: float  # wall clock of the slice's second 0
    t1: float
    assignment: dict[str, str]  # pod -> node it was bound to
    delayed: int  # bound later than the creation wait
    rejected: int  # never bound before its deletion or the end
    energy_j: float = 0.0
    node_energy_j: dict[str, float] | None = None


def pod_manifest(
    name: str,
    cpu: int,
    memory: int,
    labels: Mapping[str, str],
    scheduler: str | None,
    limits: Mapping[str, str] | None = None,
) -> dict:
    """A replay pod: its CPU and memory requests, the policy's labels, scheduler and extra limits
    (TAS is called only for pods that ask for its resource ``telemetry/scheduling``)."""
    resources: dict = {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}
    if limits:
        resources["limits"] = dict(limits)
    spec: dict = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "work", "image": IMAGE, "resources": resources}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": name, "labels": {**APP_LABEL, **labels}}, "spec": spec}


def replay(
    core,
    piece: Slice,
    policy: str,
    labels: Mapping[str, str] | None = None,
    scheduler: str | None = None,
    namespace: str = NAMESPACE,
    bind_wait: float = 3.0,
    settle: float = 25.0,
    hold: float = 0.0,
    limits: Mapping[str, str] | None = None,
    log: Callable[[str], None] = print,
) -> LiveResult:
    """Replay ``piece`` through the live scheduler (``core``: a kubernetes ``CoreV1Api``).

    The pods alive at the window's start are created first, each after the previous is bound, and
    the clock starts ``settle`` seconds after the last (the power meter and one exporter interval
    see the load before the window opens). Then each event at its second: a deletion, or a
    creation that waits up to ``bind_wait`` for the binding before the next event, so that every
    decision sees the bindings before it (the simulator's order; a real burst would not wait). A
    pod still pending is looked at again when it is deleted, and at the end. The pods alive at the
    window's end stay ``hold`` seconds longer (so that the exporter interval around the end sees one
    steady load, as ``settle`` does at the start), then every pod left is deleted."""
    trace = piece.trace
    labels = dict(labels or {})
    assignment: dict[str, str] = {}
    created_at: dict[str, float] = {}
    delayed = 0

    def create(i: int) -> None:
        name = trace.names[i]
        core.create_namespaced_pod(
            namespace, pod_manifest(name, int(trace.cpu_m[i]), int(trace.mem_mib[i]), labels, scheduler, limits)
        )
        created_at[name] = time.time()
        deadline = time.monotonic() + bind_wait
        while time.monotonic() < deadline:
            node = core.read_namespaced_pod(name, namespace).spec.node_name
            if node:
                assignment[name] = node
                return
            time.sleep(0.02)

    def look(name: str) -> None:
        nonlocal delayed
        if name in assignment or name not in created_at:
            return
        node = core.read_namespaced_pod(name, namespace).spec.node_name
        if node:
            assignment[name] = node
            delayed += 1

    def delete(name: str) -> None:
        look(name)
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    events = sorted(
        [(float(trace.created[i]), 1, i) for i in range(len(trace)) if trace.created[i] > 0]
        + [(float(trace.deleted[i]), 0, i) for i in range(len(trace)) if trace.deleted[i] < piece.seconds]
    )
    for i in range(len(trace)):
        if trace.created[i] == 0:
            create(i)
    unbound = [trace.names[i] for i in range(len(trace)) if trace.created[i] == 0 and trace.names[i] not in assignment]
    log(f"{policy}: {piece.warm} pods at the start ({len(unbound)} not bound yet); the clock starts in {settle:.0f} s")
    time.sleep(settle)
    t0 = time.time()
    for at, kind, i in events:
        pause = t0 + at - time.time()
        if pause > 0:
            time.sleep(pause)
        if kind == 1:
            create(i)
        else:
            delete(trace.names[i])
    pause = t0 + piece.seconds - time.time()
    if pause > 0:
        time.sleep(pause)
    t1 = t0 + piece.seconds
    if hold > 0:
        time.sleep(hold)
    left = [trace.names[i] for i in range(len(trace)) if trace.deleted[i] >= piece.seconds]
    for name in left:
        delete(name)
    late = time.time() - t1
    rejected = sum(1 for name in trace.names if name not in assignment)
    log(f"{policy}: {len(assignment)} bound, {delayed} late, {rejected} never; last gone {late:.1f} s after the end")
    return LiveResult(policy, t0, t1, assignment, delayed, rejected)


def wait_empty(core, namespace: str = NAMESPACE, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while core.list_namespaced_pod(namespace, label_selector=_selector(APP_LABEL)).items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"pods of the replay still in {namespace} after {timeout:.0f} s")
        time.sleep(1.0)


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


# --- the table -----------------------------------------------------------------------------------


def saving(energy: float, reference: float) -> float:
    """Percent change against the reference (negative: less energy)."""
    return 100.0 * (energy / reference - 1.0)


def comparison_rows(
    live: Mapping[str, Mapping],
    simulated: Mapping[str, Mapping],
    reference: str = "default",
    current: Mapping[str, Mapping] | None = None,
) -> list:
    """One row per policy measured live: live and simulated Wh, each vs ``reference``, the gap in
    percentage points, pods late and never placed on each side; with ``current``, also a second
    simulation's change vs ``reference`` (``cur_vs``: the policies on current telemetry)."""
    rows = []
    for name, got in live.items():
        sim = simulated.get(name)
        row = {
            "policy": name,
            "live_wh": got["energy_j"] / 3600.0,
            "live_vs": saving(got["energy_j"], live[reference]["energy_j"]) if reference in live else None,
            "live_late": got["delayed"],
            "live_never": got["rejected"],
        }
        if sim is not None:
            row.update(
                sim_wh=sim["energy_j"] / 3600.0,
                sim_vs=saving(sim["energy_j"], simulated[reference]["energy_j"]) if reference in simulated else None,
                sim_late=sim["delayed"],
                sim_never=sim["rejected"],
            )
            if row["live_vs"] is not None and row.get("sim_vs") is not None:
                row["gap_pp"] = row["live_vs"] - row["sim_vs"]
        if current is not None and name in current and reference in current:
            row["cur_vs"] = saving(current[name]["energy_j"], current[reference]["energy_j"])
        rows.append(row)
    return rows


def markdown(rows: Sequence[Mapping]) -> str:
    def num(value, spec):
        return "n/a" if value is None else format(value, spec)

    current = any("cur_vs" in r for r in rows)
    lines = [
        "| policy | live Wh | live vs default | sim Wh | sim vs default | live - sim "
        "| late / never (live) | late / never (sim) |" + (" sim vs default, current telemetry |" if current else ""),
        "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if current else ""),
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {r['live_wh']:.2f} | {num(r['live_vs'], '+.2f')} % | {num(r.get('sim_wh'), '.2f')} | "
            f"{num(r.get('sim_vs'), '+.2f')} % | {num(r.get('gap_pp'), '+.2f')} pp | {r['live_late']} / "
            f"{r['live_never']} | {num(r.get('sim_late'), 'd')} / {num(r.get('sim_never'), 'd')} |"
            + (f" {num(r.get('cur_vs'), '+.2f')} % |" if current else "")
        )
    return "\n".join(lines)


def order_agrees(rows: Sequence[Mapping]) -> bool:
    """The policies ranked by live energy and by simulated energy are in the same order."""
    both = [r for r in rows if r.get("sim_wh") is not None]
    return [r["policy"] for r in sorted(both, key=lambda r: r["live_wh"])] == [
        r["policy"] for r in sorted(both, key=lambda r: r["sim_wh"])
    ]
