"""Placement policies for the placement benchmark, each as the scheduler would score nodes.

Every policy scores the nodes that pass the resource filter (the pod's CPU and memory requests fit
in the node's unallocated CPU and memory, as NodeResourcesFit's filter does) and binds to the best
score; ties are broken uniformly at random with the replay's seeded generator, as kube-scheduler's
selectHost does (``Policy.pick_best``). ``default`` and ``most-allocated`` are kube-scheduler's own
resource scores; the other policies are modelled alone (no other score plugins), which is how the
upstream Peaks deployment configures its profile and the most favourable set-up for TAS.

Telemetry: utilisation and power seen by TAS and Peaks are the true, current values (no scrape
delay, no averaging window), which favours them. In the ``off`` regime a powered-off node exports
no telemetry at all (no load-watcher metrics, no package power series) and stays schedulable.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
from _placement_sim import Cluster, Policy

# The collection's power-model library, found where `make collection` links the checkout.
_COLLECTIONS = pathlib.Path(__file__).resolve().parent.parent / ".cache" / "collections"
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))

from ansible_collections.poweraware.k8s.plugins.module_utils._placement_score import (  # noqa: E402
    placement_cost,
    rank_key,
)
from ansible_collections.poweraware.k8s.plugins.module_utils._power_model import (  # noqa: E402
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


class TasPower(Policy):
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
        cluster = self.cluster
        watts = cluster.power(alloc_m, "on") if self.node_watts is None else self.node_watts
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
        return self.pick_best(scores, feasible, alloc_m)


class _ModelPolicy(Policy):
    """A policy that reads a fitted power model per node (node index -> ``fit_model`` result)."""

    def __init__(self, models: dict[int, dict]):
        self.models = models  # a node missing from the map has no model


class UpstreamPeaks(_ModelPolicy):
    """Upstream Peaks (scheduler-plugins pkg/trimaran/peaks) with its exponential model per node,
    fitted on noisy telemetry: upstream's Score and NormalizeScore over the filtered nodes, the
    arithmetic of ``score_nodes_upstream_peaks`` (``_power_score.py``, the collection's reproduction
    of upstream) vectorised over the nodes; a unit test checks both pick the same nodes.

    Quirks that matter here: predicted utilisation above 100 %, no metrics (a powered-off node)
    and no model all give a raw cost of 0, which normalises to the best score; scores are ints, so
    close jumps tie. Utilisation is load-watcher's, here the true current value.
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
        util = 100.0 * alloc_m / cap
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
    """The collection's policy: ``rank_nodes`` of ``plugins/module_utils/_placement_score.py`` on the
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
