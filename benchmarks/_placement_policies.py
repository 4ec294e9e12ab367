"""Placement policies for the placement benchmark, each as the scheduler would score nodes.

Every policy scores the nodes that pass the resource filter (the pod's CPU and memory requests fit
in the node's unallocated CPU and memory, as NodeResourcesFit's filter does) and binds to the best
score; ties are broken uniformly at random with the replay's seeded generator, as kube-scheduler's
selectHost does (``Policy.pick_best``). ``default`` and ``most-allocated`` are kube-scheduler's own
resource scores; the other policies are modelled alone (no other score plugins), which is how the
upstream Peaks deployment configures its profile and the most favourable set-up for TAS.

Telemetry: utilisation and power seen by TAS and Peaks are the true, current values (no scrape
delay, no averaging window), which favours them, unless a replay sets their telemetry as the
stack delivers it (``_Lagged.lag_s``, ``_Windowed.window_s``: the live replay's "as deployed").
In the ``off`` regime a powered-off node exports no telemetry at all (no load-watcher metrics, no
package power series) and stays schedulable.
"""

from __future__ import annotations

import bisect
import pathlib
import sys

import numpy as np
from _placement_sim import Cluster, Policy

# The collection's power-model library, found where `make collection` links the checkout.
_COLLECTIONS = pathlib.Path(__file__).resolve().parent.parent / ".cache" / "collections"
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))

from ansible_collections.poweraware.k8s.plugins.module_utils.placement.extender import extender_priority  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import (  # noqa: E402
    placement_cost,
    rank_key,
    rank_nodes,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (  # noqa: E402
    PowerModelError,
    compile_model,
    fit_model,
)

__all__ = ["PowerModelError", "fit_model"]

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
MIB = 1 << 20
# kube-scheduler's defaults: NodeResourcesFit and NodeResourcesBalancedAllocation both weight 1
# (pkg/scheduler/apis/config/v1/default_plugins.go), resources cpu and memory at weight 1 each
# (defaultResourceSpec in pkg/scheduler/apis/config/v1/defaults.go).
FIT_WEIGHT = BALANCED_WEIGHT = 1
CPU_WEIGHT = MEMORY_WEIGHT = 1


def least_requested_score(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """noderesources/least_allocated.go leastRequestedScore: ((capacity - requested) * 100) / capacity,
    integer division, 0 when requested exceeds capacity."""
    return (np.maximum(capacity - requested, 0) * MAX_NODE_SCORE) // capacity


def most_requested_score(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """noderesources/most_allocated.go mostRequestedScore: (min(requested, capacity) * 100) / capacity."""
    return (np.minimum(requested, capacity) * MAX_NODE_SCORE) // capacity


def balanced_allocation_score(cpu_fraction: np.ndarray, mem_fraction: np.ndarray) -> np.ndarray:
    """noderesources/balanced_allocation.go balancedResourceScorer for two resources:
    int64((1 - |f_cpu - f_mem| / 2) * 100), fractions capped at 1."""
    std = np.abs(np.minimum(cpu_fraction, 1.0) - np.minimum(mem_fraction, 1.0)) / 2.0
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)


class KubeDefault(Policy):
    """kube-scheduler's default resource scoring: NodeResourcesFit (strategy LeastAllocated, cpu and
    memory weighted 1:1) plus NodeResourcesBalancedAllocation (cpu and memory), each weight 1.

    Both count the incoming pod in ``requested`` (resource_allocation.go). Per node, integers as
    upstream: fit = (cpu_score * 1 + memory_score * 1) / 2, balanced = int((1 - |f_cpu - f_mem| / 2)
    * 100), total = fit + balanced. Memory in bytes, as the API reports it. Without memory figures
    (a cluster whose nodes state none) only CPU is scored, as upstream skips resources whose
    allocatable is 0.
    """

    name = "default"
    resource_score = staticmethod(least_requested_score)
    regime_independent = True  # requests only: the same placement whether empty nodes are off or not

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.mem_cap = cluster.memory_mib * MIB  # bytes, as the API reports memory

    def scores(self, alloc_m, request_m) -> np.ndarray:
        cluster = self.cluster
        cpu_req = alloc_m + request_m
        cpu = self.resource_score(cpu_req, cluster.capacity_m)
        if not cluster.has_memory:
            return cpu.astype(np.float64)
        mem_req = (self.mem_alloc + self.mem_request) * MIB
        mem = self.resource_score(mem_req, self.mem_cap)
        fit = (cpu * CPU_WEIGHT + mem * MEMORY_WEIGHT) // (CPU_WEIGHT + MEMORY_WEIGHT)
        balanced = balanced_allocation_score(cpu_req / cluster.capacity_m, mem_req / self.mem_cap)
        return (FIT_WEIGHT * fit + BALANCED_WEIGHT * balanced).astype(np.float64)

    def choose(self, alloc_m, request_m, feasible):
        return self.pick_best(self.scores(alloc_m, request_m), feasible, alloc_m)


LeastAllocated = KubeDefault  # the strategy's name, kept for callers of the CPU-only version


class MostAllocated(KubeDefault):
    """kube-scheduler with NodeResourcesFit's MostAllocated strategy (cpu and memory 1:1) plus
    NodeResourcesBalancedAllocation: the in-tree bin-packing configuration."""

    name = "most-allocated"
    resource_score = staticmethod(most_requested_score)


class _Lagged:
    """Telemetry ``lag_s`` seconds old (0: the current value): what TAS reads has passed collectd's
    interval, a scrape, a rule evaluation and TAS's own poll. ``observe`` keeps the replay's history
    of requests and power; ``seen`` returns the state as it was ``lag_s`` before ``now``."""

    lag_s = 0.0

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.history = []  # (t, requests, watts) after each event, when lag_s > 0

    def observe(self, t, alloc_m, node_watts):
        if self.lag_s > 0:
            self.history.append((t, alloc_m.copy(), node_watts.copy()))

    def seen(self, alloc_m, node_watts):
        if self.lag_s <= 0:
            return alloc_m, node_watts
        history = self.history
        cutoff = self.now - self.lag_s
        index = bisect.bisect_right([h[0] for h in history], cutoff) - 1
        _t, alloc, watts = history[max(index, 0)]
        return alloc, watts


def telemetry_age_s(collectd_s: float, scrape_s: float, evaluation_s: float, poll_s: float = 0.0) -> float:
    """Mean age of a recorded metric when a scheduler reads it: collectd's value is the mean of its
    last interval (half an interval old when it is exported), then it waits for a scrape, a rule
    evaluation and the reader's poll, each on average half its period."""
    return (collectd_s + scrape_s + evaluation_s + poll_s) / 2.0


def window_mean(times: np.ndarray, values: np.ndarray, start: float, end: float) -> np.ndarray:
    """Per node, the time average over ``[start, end]`` of a step function: ``values[k]`` (one value
    per node) holds from ``times[k]`` until ``times[k + 1]``, the last one for ever. The part of the
    range before ``times[0]`` is not known and left out (a series' average over what Prometheus has);
    a range that ends before ``times[0]`` gives the first values."""
    if end <= times[0]:
        return values[0].astype(np.float64)
    start = max(start, float(times[0]))
    if end <= start:  # an empty range: the value at ``end``
        return values[np.searchsorted(times, end, side="right") - 1].astype(np.float64)
    edges = np.clip(np.append(times.astype(np.float64), np.inf), start, end)
    return np.diff(edges) @ values / (end - start)


class _Windowed:
    """Utilisation as load-watcher serves it to Peaks (``window_s`` > 0; 0: the current value).

    load-watcher asks Prometheus every ``fetch_s`` for ``avg_over_time(instance:node_cpu:ratio[15m])``
    (``window_s``), whose newest sample is ``delay_s`` old (``telemetry_age_s``), and Peaks' collector
    copies load-watcher's answer every ``poll_s`` (scheduler-plugins pkg/trimaran/collector.go,
    metricsUpdateIntervalSeconds); both clocks start at a random phase (the replay's generator).
    ``before``: the utilisation measured before the replay, ``(times, percent[time, node])`` with
    times before the replay's first event; after it, the replay's own requests over capacity."""

    window_s = 0.0
    fetch_s = 60.0
    poll_s = 30.0
    delay_s = 0.0
    before: tuple[np.ndarray, np.ndarray] | None = None

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.steps = []  # (t, percent per node) after each event, when window_s > 0
        self.served = {}  # load-watcher's answer per fetch time
        if self.window_s > 0:
            self.fetch_phase = float(rng.uniform(0.0, self.fetch_s))
            self.poll_phase = float(rng.uniform(0.0, self.poll_s))

    def observe(self, t, alloc_m, node_watts):
        if self.window_s > 0:
            self.steps.append((t, np.minimum(100.0, 100.0 * alloc_m / self.cluster.capacity_m)))

    def utilisation(self, alloc_m) -> np.ndarray:
        """Percent per node as the policy sees it now."""
        if self.window_s <= 0:
            return 100.0 * alloc_m / self.cluster.capacity_m
        poll = self.poll_phase + np.floor((self.now - self.poll_phase) / self.poll_s) * self.poll_s
        fetch = float(self.fetch_phase + np.floor((poll - self.fetch_phase) / self.fetch_s) * self.fetch_s)
        if fetch not in self.served:
            times = [t for t, _u in self.steps]
            values = [u for _t, u in self.steps]
            if self.before is not None:
                keep = self.before[0] < times[0]
                times = [*self.before[0][keep], *times]
                values = [*self.before[1][keep], *values]
            end = fetch - self.delay_s
            self.served[fetch] = window_mean(np.array(times), np.array(values), end - self.window_s, end)
        return self.served[fetch]


class TasPower(_Lagged, Policy):
    """Telemetry Aware Scheduling power policy (intel/platform-aware-scheduling power demo).

    ``scheduleonmetric`` on ``package_power_avg`` (power relative to TDP, percent) with operator
    ``LessThan``: TAS orders the nodes that have the metric and returns priorities 10, 9, 8, ...
    (``10 - rank``, negative from the 12th node on); nodes without the metric are left out of
    the reply, which the scheduler counts as 0. TDP is taken as the server's maximum wall power.
    The demo's ``dontschedule`` rule (power above 60 % of TDP) is not applied: it was written for
    CPU package power, and wall power of most servers passes 60 % of its maximum at moderate load,
    which would reject pods rather than place them.
    """

    name = "tas-power"

    def choose(self, alloc_m, request_m, feasible):
        return self.pick_best(self.priorities(alloc_m, request_m, feasible), feasible, alloc_m)

    def priorities(self, alloc_m, request_m, feasible) -> np.ndarray:
        """TAS's prioritize reply for the feasible nodes (0 for a node left out of it)."""
        cluster = self.cluster
        watts = cluster.power(alloc_m, "on") if self.node_watts is None else self.node_watts
        _alloc, watts = self.seen(alloc_m, watts)
        metric = 100.0 * watts / cluster.p_max
        scores = np.zeros(len(cluster), dtype=np.float64)
        # TAS ranks every node it is asked about that has the metric (the scheduler sends the
        # filtered nodes); ties in the metric are ordered arbitrarily, here at random. A powered-off
        # node has no metric.
        cand = np.flatnonzero(feasible & (alloc_m > 0)) if self.regime == "off" else np.flatnonzero(feasible)
        if len(cand):
            metric_c = metric[cand]
            if len(np.unique(metric_c)) < len(cand):
                self.random_ties += 1
                order = np.lexsort((self.rng.random(len(cand)), metric_c))
            else:
                order = np.argsort(metric_c, kind="stable")
            scores[cand[order]] = 10 - np.arange(len(cand))
        return scores


class _ModelPolicy(Policy):
    """A policy that reads a fitted power model per node (node index -> ``fit_model`` result)."""

    def __init__(self, models: dict[int, dict]):
        self.models = models  # a node missing from the map has no model


class TasModelJump(_Lagged, _ModelPolicy):
    """TAS on the power models' recorded metric (what ``site.yml`` deploys with power models):
    ``scheduleonmetric`` ``LessThan`` on ``power_model_jump_watts``, the watts the node's model
    predicts a reference pod of ``reference_m`` millicores adds at the node's current utilisation
    (docs/power-models.md; past 100 % the model's last slope continues, as the recording rule's
    ramps do). TAS scores as in ``TasPower`` (10, 9, 8, ... by rank; a node without the metric,
    i.e. without a model, is left out and counts 0). The metric is the true current value (no
    scrape or rule delay), which favours TAS; it ignores the pod's own size."""

    name = "tas-jump"

    def __init__(self, models: dict[int, dict], reference_m: int = 1000):
        super().__init__(models)
        self.reference_m = reference_m

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.predict = {i: compile_model(m, cluster.nodes[i].name) for i, m in self.models.items()}

    def metric(self, i: int, alloc: int) -> float:
        capacity = float(self.cluster.capacity_m[i])
        util = 100.0 * alloc / capacity
        step = 100.0 * self.reference_m / capacity
        predict = self.predict[i]
        top = min(util + step, 100.0)
        jump = predict(top) - predict(util)
        if util + step > 100.0:  # the last slope continues past 100 %
            slope = predict(100.0) - predict(99.0)
            jump += slope * (util + step - 100.0)
        return jump

    def choose(self, alloc_m, request_m, feasible):
        return self.pick_best(self.priorities(alloc_m, request_m, feasible), feasible, alloc_m)

    def priorities(self, alloc_m, request_m, feasible) -> np.ndarray:
        scores = np.zeros(len(self.cluster), dtype=np.float64)
        seen, _watts = self.seen(alloc_m, self.node_watts)
        cand = [i for i in np.flatnonzero(feasible).tolist() if i in self.predict]
        if self.regime == "off":
            cand = [i for i in cand if alloc_m[i] > 0]
        if cand:
            metric = np.array([self.metric(i, int(seen[i])) for i in cand])
            if len(np.unique(metric)) < len(cand):
                self.random_ties += 1
                order = np.lexsort((self.rng.random(len(cand)), metric))
            else:
                order = np.argsort(metric, kind="stable")
            scores[np.array(cand)[order]] = 10 - np.arange(len(cand))
        return scores


class UpstreamPeaks(_Windowed, _ModelPolicy):
    """Upstream Peaks (scheduler-plugins pkg/trimaran/peaks) with its exponential model per node,
    fitted on noisy telemetry: upstream's Score and NormalizeScore over the filtered nodes, the
    arithmetic of ``score_nodes_upstream_peaks`` (``placement/power_score.py``, the collection's reproduction
    of upstream) vectorised over the nodes; a unit test checks both pick the same nodes.

    Quirks that matter here: predicted utilisation above 100 %, no metrics (a powered-off node)
    and no model all give a raw cost of 0, which normalises to the best score; scores are ints, so
    close jumps tie. Utilisation is load-watcher's: the true current value by default, or its
    15-minute average as deployed (``_Windowed``).
    """

    name = "peaks"
    _SCALE = 1e15

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        n = len(cluster)
        self.capacity = cluster.capacity_m.astype(np.float64)
        self.k1 = np.zeros(n)
        self.k2 = np.zeros(n)
        self.has_model = np.zeros(n, dtype=bool)
        for i, model in self.models.items():
            if model.get("kind") == "peaks":
                compile_model(model, cluster.nodes[i].name)  # validation only
                self.k1[i] = float(model["params"]["k1"])
                self.k2[i] = float(model["params"]["k2"])
                self.has_model[i] = True

    def choose(self, alloc_m, request_m, feasible):
        cap = self.capacity
        util = self.utilisation(alloc_m)
        predicted = 100.0 * (util / 100.0 * cap + request_m) / cap
        k1, k2 = self.k1, self.k2
        with np.errstate(over="ignore", invalid="ignore"):
            jump = k1 * (np.exp(k2 * predicted) - np.exp(k2 * util)) * self._SCALE
        scored = self.has_model & (predicted <= 100.0)
        if self.regime == "off":
            scored &= alloc_m > 0  # a powered-off node has no metrics
        raw = np.where(scored, np.trunc(np.where(scored, jump, 0.0)), 0.0)  # int64(...) truncates
        cand = raw[feasible]
        low, high = cand.min(), cand.max()
        if low == 0 and high == 0:
            scores = np.zeros(len(cap))
        elif high != low:
            scores = 100.0 - np.trunc(100.0 * (raw - low) / (high - low))
        else:
            scores = 100.0 - np.trunc(raw - low)
        return self.pick_best(scores, feasible, alloc_m)


class Ours(_ModelPolicy):
    """The collection's policy: ``rank_nodes`` of ``plugins/module_utils/placement/placement_score.py`` on the
    collection's default model kind fitted on the same samples.

    Powered-on nodes by smallest predicted jump, then powered-off nodes by smallest predicted power
    to run the pod (idle included), ties by node name: deterministic, never uses the generator.
    The replay calls the module's ``placement_cost`` and ``rank_key`` directly (what ``rank_nodes``
    is made of, without its input validation) and caches each node's cost while its requests do not
    change; a unit test checks the pick equals ``rank_nodes(...)[0]``.
    """

    name = "ours"
    wake = "pod"

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.predict = {i: compile_model(m, cluster.nodes[i].name) for i, m in self.models.items()}
        self.names = [n.name for n in cluster.nodes]
        self.capacity = [int(c) for c in cluster.capacity_m]
        self.cache: dict[tuple[int, int, int], tuple] = {}

    def choose(self, alloc_m, request_m, feasible):
        off = self.regime == "off"
        best = None
        best_i = -1
        cache = self.cache
        if len(cache) > 1_000_000:
            cache.clear()
        cand = np.flatnonzero(feasible)
        for i, alloc in zip(cand.tolist(), alloc_m[cand].tolist(), strict=True):
            key = (i, alloc, request_m)
            ranked = cache.get(key)
            if ranked is None:
                status, cost, _util = placement_cost(
                    self.predict.get(i), self.capacity[i], alloc, request_m, off and alloc == 0, self.wake
                )
                ranked = cache[key] = rank_key(status, cost, self.names[i])
            if best is None or ranked < best:
                best, best_i = ranked, i
        return best_i


class OursEfficiency(Ours):
    """``ours`` with ``wake="efficiency"``: a node must be woken, wake the one with the best predicted
    watts per CPU rather than the one cheapest for this pod alone."""

    name = "ours-efficiency"
    wake = "efficiency"


class GreedyTrue(Policy):
    """Myopic greedy on the true curves: each pod to the node whose true power rises least
    (knows every node's real curve and the regime). Not an optimum: the lower bound is."""

    name = "greedy-true"

    def choose(self, alloc_m, request_m, feasible):
        cluster: Cluster = self.cluster
        before = cluster.power(alloc_m, self.regime) if self.node_watts is None else self.node_watts
        after = cluster.power(np.minimum(alloc_m + request_m, cluster.capacity_m), self.regime)
        return self.pick_best(-(after - before), feasible, alloc_m)


class OursExtender(_ModelPolicy):
    """Our extender's prioritize reply (``extender.prioritize_result``): ``rank_nodes`` over the
    nodes kube-scheduler sends (the feasible ones), its 0..100 scores as priorities 0..10; a node
    without a model gets the neutral 5. Used through ``Registered``: alone it would be ``ours``
    with its scores rounded to 11 levels."""

    name = "ours-extender"

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        for i, model in self.models.items():
            compile_model(model, cluster.nodes[i].name)  # validation once

    def priorities(self, alloc_m, request_m, feasible) -> np.ndarray:
        cluster = self.cluster
        cand = np.flatnonzero(feasible).tolist()
        nodes = [
            {
                "name": cluster.nodes[i].name,
                "cpu_capacity": int(cluster.capacity_m[i]),
                "cpu_requested": int(alloc_m[i]),
                "model": self.models.get(i),
                "powered_off": bool(self.regime == "off" and alloc_m[i] == 0),
            }
            for i in cand
        ]
        scores = np.zeros(len(cluster), dtype=np.float64)
        index = {cluster.nodes[i].name: i for i in cand}
        for result in rank_nodes(nodes, int(request_m)):
            scores[index[result["name"]]] = extender_priority(result["score"])
        return scores

    def choose(self, alloc_m, request_m, feasible):
        return self.pick_best(self.priorities(alloc_m, request_m, feasible), feasible, alloc_m)


class Registered(KubeDefault):
    """A scheduler extender as kube-scheduler uses it: the default profile's scores (``KubeDefault``)
    plus, per node, the extender's priority (0..10) x its ``weight`` x 10 (MaxNodeScore over
    MaxExtenderPriority; schedule_one.go prioritizeNodes), the best total bound, ties at random.
    The other default score plugins give every node the same score for these pods (no taints,
    affinities, spread constraints or images on the nodes), so they do not change the pick."""

    regime_independent = False

    def __init__(self, extender: Policy, weight: int, name: str):
        self.extender = extender
        self.weight = weight
        self.name = name

    def prepare(self, cluster, regime, rng):
        super().prepare(cluster, regime, rng)
        self.extender.prepare(cluster, regime, rng)

    def observe(self, t, alloc_m, node_watts):
        self.extender.observe(t, alloc_m, node_watts)

    def choose(self, alloc_m, request_m, feasible):
        inner = self.extender
        inner.mem_alloc, inner.mem_request, inner.node_watts = self.mem_alloc, self.mem_request, self.node_watts
        inner.now = self.now
        total = self.scores(alloc_m, request_m) + 10.0 * self.weight * inner.priorities(alloc_m, request_m, feasible)
        pick = self.pick_best(total, feasible, alloc_m)
        self.random_ties += inner.random_ties
        inner.random_ties = 0
        return pick
