"""Event-driven pod placement simulator for the placement benchmark.

Pieces (each unit-tested in tests/unit/benchmarks):

* ``load_pods``: the pod trace (CPU request in millicores, memory request in MiB, creation and
  deletion times) from a ``pods.csv`` shaped like Alibaba's cluster-trace-gpu-v2023 ``openb`` pods.
* ``replicate_trace``: the trace overlaid on itself, each copy shifted in time, to fill a cluster
  of realistic size.
* ``Node`` / ``Cluster``: simulated nodes whose true wall power follows a published
  SPECpower_ssj2008 curve, linear between the 11 published load levels (0 %, 10 %, ... 100 %).
* ``draw_cluster``: a heterogeneous cluster drawn with a seeded generator and sized so the trace's
  peak demand fits with headroom.
* ``simulate``: replays the trace through one placement policy and integrates cluster power
  over time (exactly: power is constant between events).
* ``lower_bound_power`` / ``lower_bound_energy``: the least power any placement could draw for a
  given total demand (see ``lower_bound_curve`` for why it is a bound).

Modelling assumptions, stated once:

* Node utilisation = allocated CPU requests / node capacity; capacity = hardware threads
  (cores x threads per core) x 1000 millicores; SPECpower's "target load %" is read as that
  utilisation. Pods use exactly what they request. Memory requests are a feasibility limit
  (NodeResourcesFit's filter) and an input of the default scheduler's scores, not of power.
* Regime ``on``: every node draws power all the time. Regime ``off``: a node with no pod is
  powered off and draws 0 W, and is powered on (instantly, at no energy cost) when a pod lands
  on it. Powered-off nodes stay schedulable but export no telemetry.
* A pod that fits on no node when it arrives waits in the scheduling queue (see ``simulate``).
* At equal timestamps, deletions are replayed before creations; creations keep trace order.
"""

from __future__ import annotations

import csv
import dataclasses
import heapq
import pathlib
from collections.abc import Sequence

import numpy as np

LOAD_LEVELS = np.arange(0.0, 101.0, 10.0)  # SPECpower target loads, percent
REGIMES = ("on", "off")
J_PER_KWH = 3.6e6


class TraceError(ValueError):
    """A pod trace that cannot be replayed (missing columns, bad numbers)."""


@dataclasses.dataclass(frozen=True)
class PodTrace:
    """Pods sorted by creation time (stable: ties keep file order)."""

    names: tuple[str, ...]
    cpu_m: np.ndarray  # int64 millicores
    created: np.ndarray  # float64 seconds
    deleted: np.ndarray  # float64 seconds, > created
    dropped_zero_duration: int = 0
    mem_mib: np.ndarray | None = None  # int64 MiB; None: no memory requests (all zero)

    def __post_init__(self):
        if self.mem_mib is None:
            object.__setattr__(self, "mem_mib", np.zeros(len(self.names), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.names)

    @property
    def start(self) -> float:
        return float(self.created.min()) if len(self) else 0.0

    @property
    def end(self) -> float:
        return float(self.deleted.max()) if len(self) else 0.0


def make_trace(pods: Sequence[tuple]) -> PodTrace:
    """Build a trace from ``(name, cpu_millicores, created, deleted[, memory_mib])`` tuples.

    Pods that live for zero seconds (or less) are dropped and counted: they draw no energy and
    would otherwise be deleted before they are created when events at one instant are ordered.
    """
    kept = [p for p in pods if p[3] > p[2]]
    kept.sort(key=lambda p: p[2])  # stable: equal creation times keep input order
    for pod in kept:
        if pod[1] <= 0:
            raise TraceError(f"pod {pod[0]}: CPU request must be positive, got {pod[1]} millicores")
        if len(pod) > 4 and pod[4] < 0:
            raise TraceError(f"pod {pod[0]}: memory request must be >= 0, got {pod[4]} MiB")
    return PodTrace(
        names=tuple(p[0] for p in kept),
        cpu_m=np.array([p[1] for p in kept], dtype=np.int64),
        created=np.array([p[2] for p in kept], dtype=np.float64),
        deleted=np.array([p[3] for p in kept], dtype=np.float64),
        dropped_zero_duration=len(pods) - len(kept),
        mem_mib=np.array([p[4] if len(p) > 4 else 0 for p in kept], dtype=np.int64),
    )


def load_pods(path: str | pathlib.Path, start: float | None = None, end: float | None = None) -> PodTrace:
    """Read ``name, cpu_milli, creation_time, deletion_time`` (and ``memory_mib`` when present) from a pods.csv.

    ``start`` / ``end`` (seconds, trace clock) clip the replay window: a pod alive at ``start``
    is created at ``start``, one alive at ``end`` is deleted at ``end``; pods entirely outside
    the window are left out. A pod without a deletion time lives until the end of the trace.
    """
    path = pathlib.Path(path)
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"name", "cpu_milli", "creation_time", "deletion_time"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise TraceError(f"{path}: missing columns {sorted(missing)} (need {sorted(need)})")
        raw = []
        has_memory = "memory_mib" in (reader.fieldnames or ())
        for line, row in enumerate(reader, start=2):
            try:
                cpu = int(row["cpu_milli"])
                created = float(row["creation_time"])
                deleted = float(row["deletion_time"]) if row["deletion_time"] not in ("", None) else None
                memory = int(row["memory_mib"]) if has_memory and row["memory_mib"] not in ("", None) else 0
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from None
            raw.append((row["name"], cpu, created, deleted, memory))
    if not raw:
        raise TraceError(f"{path}: no pods")
    trace_end = max(max(r[2] for r in raw), max((r[3] for r in raw if r[3] is not None), default=0.0))
    lo = -np.inf if start is None else float(start)
    hi = trace_end if end is None else float(end)
    if hi <= lo:
        raise TraceError(f"empty replay window: start {start} >= end {end}")
    pods = []
    raw.sort(key=lambda r: r[2])  # clipped pods created at ``start`` keep their original order
    for name, cpu, created, deleted, memory in raw:
        deleted = trace_end if deleted is None else deleted
        if deleted <= lo or created >= hi:
            continue
        pods.append((name, cpu, max(created, lo), min(deleted, hi), memory))
    return make_trace(pods)


def replicate_trace(trace: PodTrace, copies: int, rng: np.random.Generator) -> PodTrace:
    """``copies`` overlaid copies of ``trace`` on its own window, to fill a larger cluster.

    Copy 0 is the trace itself; copy k >= 1 is shifted by an offset drawn uniformly over the window
    and wrapped around it (a pod running past the window's end continues from its start: it is
    split into two pods, ``name#k`` and ``name#k+``), like independent tenants whose day starts at
    different times. Every copy keeps the trace's pods, sizes and durations, so demand has the
    trace's distribution and about ``copies`` times its mean; the peak grows less than ``copies``
    times because the copies' peaks do not coincide.
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    if copies == 1 or not len(trace):
        return trace
    t0, t1 = trace.start, trace.end
    span = t1 - t0
    pods = [
        (trace.names[p], int(trace.cpu_m[p]), float(trace.created[p]), float(trace.deleted[p]), int(trace.mem_mib[p]))
        for p in range(len(trace))
    ]
    out = list(pods)
    for k in range(1, copies):
        shift = float(rng.uniform(0.0, span))
        for name, cpu, created, deleted, mem in pods:
            start = t0 + (created - t0 + shift) % span
            end = start + (deleted - created)
            if end <= t1:
                out.append((f"{name}#{k}", cpu, start, end, mem))
            else:
                out.append((f"{name}#{k}", cpu, start, t1, mem))
                out.append((f"{name}#{k}+", cpu, t0, t0 + (end - t1), mem))
    trace_out = make_trace(out)
    return dataclasses.replace(trace_out, dropped_zero_duration=trace.dropped_zero_duration)


def demand_steps(
    trace: PodTrace, mask: np.ndarray | None = None, resource: str = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """Total requested CPU (or memory) over time: (times, demand after each time), both sorted."""
    keep = np.ones(len(trace), dtype=bool) if mask is None else mask
    amount = trace.cpu_m if resource == "cpu" else trace.mem_mib
    times = np.concatenate([trace.created[keep], trace.deleted[keep]])
    deltas = np.concatenate([amount[keep], -amount[keep]])
    order = np.lexsort((deltas, times))  # at one instant, deletions (negative) first
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)
    last = np.r_[times[1:] != times[:-1], True]  # the level once every event at that instant applied
    return times[last], level[last]


def peak_demand(trace: PodTrace, resource: str = "cpu") -> int:
    """The largest total CPU request (millicores) or memory request (MiB) alive at any instant."""
    level = demand_steps(trace, resource=resource)[1]
    return int(level.max()) if len(level) else 0


# --- nodes and clusters ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    server_id: str
    capacity_m: int
    watts: tuple[float, ...]  # at LOAD_LEVELS
    memory_mib: int | None = None  # allocatable memory; None: memory is not limited

    @property
    def p_idle(self) -> float:
        return self.watts[0]

    @property
    def p_max(self) -> float:
        return max(self.watts)


class Cluster:
    """Nodes plus their curves as arrays, for fast power look-ups."""

    def __init__(self, nodes: Sequence[Node]):
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        self.nodes = tuple(nodes)
        self.capacity_m = np.array([n.capacity_m for n in nodes], dtype=np.int64)
        # memory: no limit (and not scored) when no node states it
        self.has_memory = any(n.memory_mib is not None for n in nodes)
        self.memory_mib = np.array(
            [n.memory_mib if n.memory_mib is not None else np.iinfo(np.int64).max // 4 for n in nodes], dtype=np.int64
        )
        # nodes of one server model (same curve, capacity, memory) are interchangeable
        kinds: dict = {}
        self.kind = np.array(
            [kinds.setdefault((n.server_id, n.capacity_m, n.memory_mib, n.watts), len(kinds)) for n in nodes],
            dtype=np.int64,
        )
        self.watts = np.array([n.watts for n in nodes], dtype=np.float64)  # (N, 11)
        self.p_max = self.watts.max(axis=1)
        self.slopes = np.diff(self.watts, axis=1)  # (N, 10): W per 10 % step

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def total_capacity_m(self) -> int:
        return int(self.capacity_m.sum())

    def power(self, alloc_m: np.ndarray, regime: str) -> np.ndarray:
        """True wall power of every node for allocations ``alloc_m`` (millicores)."""
        util = 100.0 * alloc_m / self.capacity_m
        return self.power_at_util(util, alloc_m > 0, regime)

    def power_at_util(self, util: np.ndarray, busy: np.ndarray, regime: str) -> np.ndarray:
        util = np.clip(np.asarray(util, dtype=np.float64), 0.0, 100.0)
        if util.shape != (len(self.nodes),):
            raise ValueError("power_at_util takes one utilisation per node")
        seg = np.minimum((util // 10.0).astype(np.int64), 9)
        frac = (util - 10.0 * seg) / 10.0
        rows = np.arange(len(self.nodes))
        watts = self.watts[rows, seg] + frac * self.slopes[rows, seg]
        if regime == "off":
            watts = np.where(busy, watts, 0.0)
        return watts

    def node_power(self, i: int, alloc_m: int, regime: str) -> float:
        """True wall power of node ``i`` alone (scalar path for the event loop)."""
        if regime == "off" and alloc_m == 0:
            return 0.0
        return curve_power(self.nodes[i].watts, 100.0 * alloc_m / self.nodes[i].capacity_m)


def curve_power(watts: Sequence[float], util: float) -> float:
    """Linear interpolation of a SPECpower curve at ``util`` percent (clamped to 0..100)."""
    util = min(max(float(util), 0.0), 100.0)
    seg = min(int(util // 10.0), 9)
    frac = (util - 10.0 * seg) / 10.0
    return watts[seg] + frac * (watts[seg + 1] - watts[seg])


def server_threads(server) -> int:
    """Hardware threads of a ``_specpower.Server`` (the node's CPU capacity in cores)."""
    return int(server.cores) * int(server.threads_per_core)


def node_from_server(name: str, server, memory_per_thread_mib: float | None = None) -> Node:
    """A node of ``server``: memory ``memory_per_thread_mib`` x threads, or the published
    ``memory_gb`` (x 1024 MiB) when not given, or unlimited when neither is known."""
    threads = server_threads(server)
    if memory_per_thread_mib is not None:
        memory = int(memory_per_thread_mib * threads)
    elif getattr(server, "memory_gb", None) is not None:
        memory = int(float(server.memory_gb) * 1024)
    else:
        memory = None
    return Node(
        name=name,
        server_id=str(server.id),
        capacity_m=threads * 1000,
        watts=tuple(float(w) for w in server.watts),
        memory_mib=memory,
    )


def eligible_servers(servers: Sequence, min_threads: int, max_threads: int) -> list:
    """Servers whose hardware-thread count is in [min_threads, max_threads] (node-sized)."""
    return [s for s in servers if min_threads <= server_threads(s) <= max_threads]


def draw_cluster(
    servers: Sequence,
    demand_m: int,
    rng: np.random.Generator,
    headroom: float = 0.3,
    types: int = 4,
    demand_mem_mib: int = 0,
    memory_per_thread_mib: float | None = None,
) -> Cluster:
    """A heterogeneous cluster: ``types`` server models drawn without replacement, then nodes
    drawn uniformly among those models until CPU capacity >= (1 + headroom) x ``demand_m`` and
    memory >= (1 + headroom) x ``demand_mem_mib``.

    Real fleets buy a few models in bulk, hence a handful of types rather than every node a
    different server.
    """
    if not servers:
        raise ValueError("no servers to draw from (check --min-threads / --max-threads)")
    if headroom < 0:
        raise ValueError(f"headroom must be >= 0, got {headroom}")
    k = min(types, len(servers))
    picks = rng.choice(len(servers), size=k, replace=False)
    models = [servers[int(i)] for i in picks]
    target = (1.0 + headroom) * demand_m
    target_mem = (1.0 + headroom) * demand_mem_mib
    nodes: list[Node] = []
    total = total_mem = 0
    while total < target or total_mem < target_mem or not nodes:
        server = models[int(rng.integers(k))]
        node = node_from_server(f"node-{len(nodes):03d}", server, memory_per_thread_mib)
        nodes.append(node)
        total += node.capacity_m
        total_mem += node.memory_mib if node.memory_mib is not None else target_mem
    return Cluster(nodes)


# --- the lower bound -------------------------------------------------------------------------


def _lower_hull(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the lower convex hull of points sorted by x (monotone chain)."""
    hx: list[float] = []
    hy: list[float] = []
    for x, y in zip(xs, ys, strict=True):
        while len(hx) >= 2 and (hy[-1] - hy[-2]) * (x - hx[-2]) >= (y - hy[-2]) * (hx[-1] - hx[-2]):
            hx.pop()
            hy.pop()
        hx.append(float(x))
        hy.append(float(y))
    return np.array(hx), np.array(hy)


def lower_bound_curve(cluster: Cluster, regime: str) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (demand millicores, watts) of LB(D), the least cluster power for demand D.

    Why it is a bound: any placement puts x_i millicores on node i with sum x_i = D and
    0 <= x_i <= capacity_i, and draws sum f_i(x_i), f_i the node's true power (``off``: f_i(0) = 0).
    Each f_i is >= its lower convex envelope g_i on [0, capacity_i], so the placement draws at
    least min { sum g_i(x_i) : sum x_i = D } -- a relaxation that also forgets that pods are
    indivisible. Minimising a sum of convex piecewise-linear functions under one sum constraint
    is solved exactly by taking hull segments in order of increasing slope (water-filling), which
    makes LB a convex piecewise-linear function of D, evaluated here by interpolation.
    """
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    base = 0.0
    seg_len: list[float] = []
    seg_slope: list[float] = []
    for node in cluster.nodes:
        xs = LOAD_LEVELS / 100.0 * node.capacity_m
        ys = np.array(node.watts, dtype=np.float64)
        if regime == "off":
            ys = ys.copy()
            ys[0] = 0.0  # empty node is off; f(0+) = watts_0 lies above (0, 0) so the hull ignores it
        else:
            base += ys[0]
        hx, hy = _lower_hull(xs, ys)
        seg_len.extend(np.diff(hx))
        seg_slope.extend(np.diff(hy) / np.diff(hx))
    order = np.argsort(np.array(seg_slope), kind="stable")
    lengths = np.array(seg_len)[order]
    slopes = np.array(seg_slope)[order]
    dx = np.r_[0.0, np.cumsum(lengths)]
    dy = base + np.r_[0.0, np.cumsum(lengths * slopes)]
    return dx, dy


def lower_bound_power(cluster: Cluster, regime: str, demand_m: np.ndarray | float) -> np.ndarray:
    dx, dy = lower_bound_curve(cluster, regime)
    return np.interp(np.minimum(demand_m, dx[-1]), dx, dy)


def fits_some_node(cluster: Cluster, cpu_m: np.ndarray, mem_mib: np.ndarray) -> np.ndarray:
    """Per pod: True when some node, empty, can take it (CPU and memory)."""
    out = np.zeros(len(cpu_m), dtype=bool)
    for cap, mem in set(zip(cluster.capacity_m.tolist(), cluster.memory_mib.tolist(), strict=True)):
        out |= (cpu_m <= cap) & (mem_mib <= mem)
    return out


def lower_bound_energy(
    cluster: Cluster, regime: str, trace: PodTrace, window: tuple[float, float] | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    """Energy (J) of the per-instant bound over the replay, with its (times, watts) steps.

    Demand counts the pods that fit on at least one node when it is empty (CPU and memory; the
    others are rejected by every placement), capped at the cluster's capacity. Memory is otherwise
    left out of the relaxation, which can only lower the bound.
    """
    placeable = fits_some_node(cluster, trace.cpu_m, trace.mem_mib)
    times, level = demand_steps(trace, placeable)
    t0, t1 = window if window else (trace.start, trace.end)
    watts = lower_bound_power(cluster, regime, level)
    idle = lower_bound_power(cluster, regime, 0.0)
    times = np.r_[t0, times, t1]
    watts = np.r_[idle, watts, watts[-1] if len(watts) else idle]
    keep = (times >= t0) & (times <= t1)
    times, watts = times[keep], watts[keep]
    energy = float(np.sum(watts[:-1] * np.diff(times)))
    return energy, times, watts


# --- the replay --------------------------------------------------------------------------------


class Policy:
    """A placement policy: ``choose`` returns the index of the node to bind, among feasible ones.

    ``prepare`` is called once per replay with the cluster, the regime and a seeded generator
    (for tie-breaking, as kube-scheduler picks uniformly among the best-scored nodes). During a
    replay ``mem_alloc`` (MiB requested per node) and ``mem_request`` (the pod's) are kept current
    by ``simulate``; ``random_ties`` counts the decisions that needed the generator.
    """

    name = "policy"
    # True when ``choose`` never reads the regime (nor the power telemetry that depends on it):
    # one replay then gives the placement, and its energy, for every regime.
    regime_independent = False

    def prepare(self, cluster: Cluster, regime: str, rng: np.random.Generator) -> None:
        self.cluster = cluster
        self.regime = regime
        self.rng = rng
        self.mem_alloc = np.zeros(len(cluster), dtype=np.int64)
        self.mem_request = 0
        self.node_watts = None  # set by ``simulate``
        self.random_ties = 0
        self.now = 0.0

    def choose(self, alloc_m: np.ndarray, request_m: int, feasible: np.ndarray) -> int:
        raise NotImplementedError

    def observe(self, t: float, alloc_m: np.ndarray, node_watts: np.ndarray) -> None:
        """Called by ``simulate`` at the start and after every event, with the replay's clock (also
        in ``now`` while ``choose`` runs): a policy on delayed telemetry keeps what it needs."""

    def pick_best(self, scores: np.ndarray, feasible: np.ndarray, alloc_m: np.ndarray | None = None) -> int:
        """Highest score among feasible nodes, ties broken uniformly at random.

        Tied nodes that are interchangeable (same server model, same CPU and memory requested)
        lead to the same energy whichever is taken, so the pick is mapped to the first of its
        kind: the outcome has the same distribution as a uniform pick, and the generator is used
        (and counted) only when the tied nodes differ.
        """
        masked = np.where(feasible, scores, -np.inf)
        best = np.flatnonzero(masked == masked.max())
        if len(best) == 1:
            return int(best[0])
        if alloc_m is None:
            self.random_ties += 1
            return int(best[self.rng.integers(len(best))])
        kind, mem = self.cluster.kind, self.mem_alloc
        keys = [(kind[i], alloc_m[i], mem[i]) for i in best.tolist()]
        if keys.count(keys[0]) == len(keys):
            return int(best[0])
        self.random_ties += 1
        return int(best[keys.index(keys[int(self.rng.integers(len(best)))])])


@dataclasses.dataclass
class SimResult:
    policy: str
    regime: str
    energy_j: float
    placed: int
    delayed: int  # placed later than created, after waiting in the scheduling queue
    rejected: int  # never placed within the replay window
    times: np.ndarray  # instants at which cluster power changed (first = window start, last = end)
    watts: np.ndarray  # cluster power from each instant to the next
    assignment: np.ndarray  # node index per pod, -1 when never placed
    started: np.ndarray  # instant each pod was bound (nan when never placed)
    random_ties: int = 0  # decisions broken with the generator (0: the result does not depend on the seed)
    # energy (J) of this same placement in every regime, for a policy whose choices ignore the regime
    energy_by_regime: dict[str, float] | None = None

    @property
    def energy_kwh(self) -> float:
        return self.energy_j / J_PER_KWH


def simulate(
    cluster: Cluster,
    trace: PodTrace,
    policy: Policy,
    regime: str,
    rng: np.random.Generator,
    initial_m: Sequence[int] | None = None,
    initial_mem_mib: Sequence[int] | None = None,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` with ``policy``; integrate true cluster power exactly.

    ``initial_m`` / ``initial_mem_mib``: requests already on each node for the whole replay (a live
    cluster's DaemonSets and services, in the live replay); default none.

    Scheduling queue, as kube-scheduler's: a pod that fits on no node (CPU and memory requests,
    NodeResourcesFit's filter) waits (FIFO) and is tried again each time a pod is deleted; once
    bound it runs for its traced duration. A pod larger than every node is rejected at once; pods
    still waiting at the end of the window are counted as rejected. Energy is integrated over the
    trace window, the same for every policy.
    """
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    policy.prepare(cluster, regime, rng)
    n_pods = len(trace)
    t_start, t_end = trace.start, trace.end
    capacity = cluster.capacity_m
    memory = cluster.memory_mib
    placeable = fits_some_node(cluster, trace.cpu_m, trace.mem_mib)
    alloc = np.zeros(len(cluster), dtype=np.int64) if initial_m is None else np.array(initial_m, dtype=np.int64)
    alloc_mem = (
        np.zeros(len(cluster), dtype=np.int64) if initial_mem_mib is None else np.array(initial_mem_mib, dtype=np.int64)
    )
    if alloc.shape != (len(cluster),) or alloc_mem.shape != (len(cluster),):
        raise ValueError("initial_m and initial_mem_mib take one value per node")
    policy.mem_alloc = alloc_mem
    node_watts = cluster.power(alloc, regime)
    policy.node_watts = node_watts  # kept current: true power per node (0 for a powered-off node)
    total = float(node_watts.sum())
    # the other regime's power of the same placement, when the policy ignores the regime
    other = "off" if regime == "on" else "on"
    other_watts = cluster.power(alloc, other) if policy.regime_independent else None
    other_total = float(other_watts.sum()) if policy.regime_independent else 0.0
    other_energy = 0.0
    assignment = np.full(n_pods, -1, dtype=np.int64)
    started = np.full(n_pods, np.nan)
    duration = trace.deleted - trace.created
    # events (time, kind, pod): kind 0 = deletion, 1 = creation; deletions first at one instant
    events = [(float(trace.created[p]), 1, p) for p in range(n_pods)]
    heapq.heapify(events)
    pending: list[int] = []
    t_prev = t_start
    energy = 0.0
    out_t = [t_start]
    out_w = [total]
    placed = delayed = 0

    def bind(pod: int, t: float) -> bool:
        nonlocal placed, delayed, total
        req = int(trace.cpu_m[pod])
        req_mem = int(trace.mem_mib[pod])
        feasible = (alloc + req <= capacity) & (alloc_mem + req_mem <= memory)
        if not feasible.any():
            return False
        policy.mem_request = req_mem
        policy.now = t
        node = policy.choose(alloc, req, feasible)
        if not feasible[node]:
            raise RuntimeError(f"policy {policy.name} chose node {node}, where the pod does not fit")
        assignment[pod] = node
        started[pod] = t
        alloc[node] += req
        alloc_mem[node] += req_mem
        node_watts[node] = cluster.node_power(node, int(alloc[node]), regime)
        if other_watts is not None:
            other_watts[node] = cluster.node_power(node, int(alloc[node]), other)
        placed += 1
        if t > trace.created[pod]:
            delayed += 1
        heapq.heappush(events, (t + float(duration[pod]), 0, pod))
        return True

    policy.observe(t_start, alloc, node_watts)
    while events:
        t, kind, pod = heapq.heappop(events)
        if t >= t_end:  # nothing that happens at the end of the window draws energy in it
            break
        if t > t_prev:
            energy += total * (t - t_prev)
            other_energy += other_total * (t - t_prev)
            t_prev = t
        if kind == 1:
            if placeable[pod] and not bind(pod, t):
                pending.append(pod)
        else:
            node = int(assignment[pod])
            alloc[node] -= int(trace.cpu_m[pod])
            alloc_mem[node] -= int(trace.mem_mib[pod])
            node_watts[node] = cluster.node_power(node, int(alloc[node]), regime)
            if other_watts is not None:
                other_watts[node] = cluster.node_power(node, int(alloc[node]), other)
            if pending:
                pending = [p for p in pending if not bind(p, t)]
        total = float(node_watts.sum())
        policy.observe(t, alloc, node_watts)
        if other_watts is not None:
            other_total = float(other_watts.sum())
        if out_t[-1] == t:
            out_w[-1] = total
        else:
            out_t.append(t)
            out_w.append(total)
    energy += total * (t_end - t_prev)
    other_energy += other_total * (t_end - t_prev)
    if out_t[-1] != t_end:
        out_t.append(t_end)
        out_w.append(total)
    rejected = int(np.sum(assignment < 0))  # too big for every node, or still waiting at the end
    return SimResult(
        policy=policy.name,
        regime=regime,
        energy_j=energy,
        placed=placed,
        delayed=delayed,
        rejected=rejected,
        times=np.array(out_t),
        watts=np.array(out_w),
        assignment=assignment,
        started=started,
        random_ties=policy.random_ties,
        energy_by_regime={regime: energy, other: other_energy} if policy.regime_independent else None,
    )
