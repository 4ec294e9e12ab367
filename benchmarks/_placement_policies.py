"""Placement policies for the placement benchmark, each as the scheduler would score nodes.

Every policy scores the nodes that pass the resource filter (the pod's CPU request fits in the
node's unallocated CPU, as NodeResourcesFit does) and binds to the best score; ties are broken
uniformly at random with the replay's seeded generator, as kube-scheduler's selectHost does.
Each policy is modelled alone (no other score plugins), which is how the upstream Peaks
deployment configures its profile and the most favourable set-up for TAS.

Telemetry: utilisation and power seen by TAS and Peaks are the true, current values (no scrape
delay, no averaging window), which favours them. In the ``off`` regime a powered-off node exports
no telemetry at all (no load-watcher metrics, no package power series).
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

from ansible_collections.poweraware.k8s.plugins.module_utils._power_model import (  # noqa: E402
    PowerModelError,
    fit_model,
)
from ansible_collections.poweraware.k8s.plugins.module_utils._power_score import (  # noqa: E402
    score_nodes,
    score_nodes_upstream_peaks,
)

__all__ = ["PowerModelError", "fit_model"]

MAX_NODE_SCORE = 100  # framework.MaxNodeScore


class LeastAllocated(Policy):
    """Kubernetes default scoring for CPU: NodeResourcesFit with the LeastAllocated strategy.

    score = (capacity - requested) * 100 / capacity in integer arithmetic, requested including
    the incoming pod (pkg/scheduler/framework/plugins/noderesources/least_allocated.go).
    """

    name = "default"

    def choose(self, alloc_m, request_m, feasible):
        cap = self.cluster.capacity_m
        scores = ((cap - (alloc_m + request_m)) * MAX_NODE_SCORE) // cap
        return self.pick_best(scores.astype(np.float64), feasible)


class MostAllocated(Policy):
    """NodeResourcesFit with the MostAllocated strategy: score = requested * 100 / capacity."""

    name = "most-allocated"

    def choose(self, alloc_m, request_m, feasible):
        cap = self.cluster.capacity_m
        scores = ((alloc_m + request_m) * MAX_NODE_SCORE) // cap
        return self.pick_best(scores.astype(np.float64), feasible)


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
        watts = cluster.power(alloc_m, "on")
        metric = 100.0 * watts / cluster.p_max
        has_metric = alloc_m > 0 if self.regime == "off" else np.ones(len(cluster), dtype=bool)
        scores = np.zeros(len(cluster), dtype=np.float64)
        # TAS ranks every node it is asked about that has the metric (the scheduler sends the
        # filtered nodes); ties in the metric are ordered arbitrarily, here at random.
        cand = np.flatnonzero(feasible & has_metric)
        if len(cand):
            jitter = self.rng.random(len(cand))
            ranked = cand[np.lexsort((jitter, metric[cand]))]
            scores[ranked] = 10 - np.arange(len(ranked))
        return self.pick_best(scores, feasible)


class _ModelPolicy(Policy):
    """Shared input of the model-based policies: the feasible nodes as scoring library input."""

    def __init__(self, models: dict[int, dict]):
        self.models = models  # node index -> fit_model result; a missing node has no model

    def node_inputs(self, alloc_m, feasible) -> list[dict]:
        cluster = self.cluster
        nodes = []
        for i in np.flatnonzero(feasible):
            cap = int(cluster.capacity_m[i])
            alloc = int(alloc_m[i])
            metrics = not (self.regime == "off" and alloc == 0)  # a powered-off node exports nothing
            nodes.append(
                {
                    "name": str(int(i)),
                    "util": 100.0 * alloc / cap if metrics else None,
                    "cpu_capacity": cap,
                    "cpu_allocatable": cap,
                    "cpu_requested": alloc,
                    "model": self.models.get(int(i)),
                }
            )
        return nodes

    def best_of(self, results: list[dict], feasible) -> int:
        scores = np.full(len(self.cluster), -np.inf)
        for r in results:
            scores[int(r["name"])] = r["score"]
        return self.pick_best(scores, feasible)


class UpstreamPeaks(_ModelPolicy):
    """Upstream Peaks (scheduler-plugins pkg/trimaran/peaks) with its exponential model per node,
    fitted on noisy telemetry, scored by ``score_nodes_upstream_peaks`` (the collection's exact
    reproduction of upstream's Score and NormalizeScore, defects included).

    Quirks that matter here: predicted utilisation above 100 %, no metrics (a powered-off node)
    and no model all give a raw cost of 0, which normalises to the best score; scores are ints, so
    close jumps tie. Utilisation is load-watcher's, here the true current value.
    """

    name = "peaks"

    def choose(self, alloc_m, request_m, feasible):
        nodes = self.node_inputs(alloc_m, feasible)
        return self.best_of(score_nodes_upstream_peaks(nodes, int(request_m)), feasible)


class Ours(_ModelPolicy):
    """The collection's default model kind, fitted on the same samples, scored by ``score_nodes``:
    smallest predicted jump first, unfit nodes 0, nodes without metrics or model neutral (50)."""

    name = "ours"

    def choose(self, alloc_m, request_m, feasible):
        nodes = self.node_inputs(alloc_m, feasible)
        return self.best_of(score_nodes(nodes, int(request_m)), feasible)


class Oracle(Policy):
    """Greedy minimum marginal true power: knows every node's real curve and the regime."""

    name = "oracle"

    def choose(self, alloc_m, request_m, feasible):
        cluster: Cluster = self.cluster
        before = cluster.power(alloc_m, self.regime)
        after = cluster.power(np.minimum(alloc_m + request_m, cluster.capacity_m), self.regime)
        return self.pick_best(-(after - before), feasible)
