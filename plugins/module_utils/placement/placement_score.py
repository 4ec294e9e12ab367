# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where one pod should run for the least extra power: the collection's placement policy.

Pure Python, no Ansible imports, Python 3.9 compatible. This is the one implementation of the policy
the placement benchmark calls "ours" (``benchmarks/placement.py``); a scheduler extender ranks nodes
with the same ``rank_nodes``.

Utilisation at decision time comes from the CPU requests the API reports: the sum of the requests
of the pods bound to the node, over its CPU capacity. Requests are known for every node the moment
a pod is bound, whereas measured utilisation lags by a scrape interval and an averaging window, so
a burst of pods scored on telemetry would all see the same stale figure and pile onto one node. The
power model itself is fitted on measured utilisation; where pods use what they request (the
benchmark's assumption) the two agree.

Order, best first (a total, deterministic order: class, then predicted watts, then node name):

1. ``on``: powered-on nodes with a model, smallest predicted jump ``P(u + 100 r / C) - P(u)``;
2. ``on_neutral``: powered-on nodes without a model (or without fresh data: pass ``model: null``),
   after every node whose jump is predicted and before any node that would have to be woken;
3. ``wake``: powered-off nodes with a model, smallest predicted power to run the pod there,
   idle power included: ``P(100 r / C)`` (the node draws nothing now); or, with
   ``wake="efficiency"``, smallest best-case watts per CPU, ``min over u of P(u) / (u C)`` (the node
   that runs a full share of load for the least power, whatever this pod's size);
4. ``wake_neutral``: powered-off nodes without a model;
5. ``unfit``: nodes the pod does not fit on (CPU or memory beyond allocatable, or above 100 %).

Nodes already on come first because waking a node adds its whole idle power, which the jump on a
running node (its marginal power) does not; among powered-off nodes the cheapest to run the pod wins,
and ties in watts fall to the node name, so the same input always gives the same node.

Scores, for callers that need a bounded score (an extender's prioritize): ``on`` 51..100 (min-max of
the jump, smallest 100), ``on_neutral`` 50, ``wake`` 2..49 (min-max of the wake cost), ``wake_neutral``
1, ``unfit`` 0. Equal scores can still differ in rank; ``rank`` is the decision.
"""

from __future__ import annotations

import math

from ansible_collections.poweraware.k8s.plugins.module_utils.placement.node_input import (
    NodeInputError,
    cpu_millicores,
    node_input,
    node_list,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import PowerModelError, compile_model
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import PowerScoreError

__all__ = [
    "STATUSES",
    "WAKE_ORDERS",
    "PlacementScoreError",
    "best_watts_per_cpu",
    "placement_cost",
    "rank_key",
    "rank_nodes",
]

WAKE_ORDERS = ("pod", "efficiency")

STATUSES = ("on", "on_neutral", "wake", "wake_neutral", "unfit")
_CLASS = {status: index for index, status in enumerate(STATUSES)}
# Score bands (inclusive) of the classes with a predicted cost; the others have one score each.
_BANDS = {"on": (51, 100), "wake": (2, 49)}
_FIXED_SCORE = {"on_neutral": 50, "wake_neutral": 1, "unfit": 0}


class PlacementScoreError(PowerScoreError):
    """Invalid node or pod input; the message names the node and the field."""


def _fail(where, field, problem):
    raise PlacementScoreError(f"placement score: {where}: {field}: {problem}")


def _checked(check, *args, **fields):
    """Run one of ``node_input``'s checks, its error worded as this module's."""
    try:
        return check(*args, **fields)
    except NodeInputError as err:
        raise PlacementScoreError(f"placement score: {err}") from None


def best_watts_per_cpu(predict, capacity_m):
    """Least predicted watts per CPU over utilisations 1..100 % (1 % steps): the node's best efficiency."""
    cpus = capacity_m / 1000.0
    return min(predict(float(u)) / (u / 100.0 * cpus) for u in range(1, 101))


def placement_cost(predict, capacity_m, requested_m, request_m, powered_off, wake="pod"):
    """``(status, cost_w, util_after)`` of one node the pod fits on by requests (hot loop, no checks).

    ``predict``: ``compile_model`` result or None (no model); ``capacity_m``: CPU capacity,
    ``requested_m``: CPU already requested on the node, ``request_m``: the pod's request, millicores;
    ``powered_off``: the node draws nothing and runs no pods. ``cost_w`` is the predicted jump (on),
    the predicted power of the node running the pod (wake; with ``wake="efficiency"`` the node's
    best watts per CPU, ``best_watts_per_cpu``), or None (neutral, unfit).
    """
    util_after = 100.0 * (requested_m + request_m) / capacity_m
    if util_after > 100.0:
        return "unfit", None, util_after
    if powered_off:
        if predict is None:
            return "wake_neutral", None, util_after
        if wake == "efficiency":
            return "wake", best_watts_per_cpu(predict, capacity_m), util_after
        return "wake", predict(util_after), util_after
    if predict is None:
        return "on_neutral", None, util_after
    return "on", predict(util_after) - predict(100.0 * requested_m / capacity_m), util_after


def rank_key(status, cost_w, name):
    """Sort key of the order above: class, predicted watts, name."""
    return (_CLASS[status], 0.0 if cost_w is None else cost_w, name)


def _fits(limit, already, request, mem_limit, mem_used, memory_request):
    """'' when the pod fits by requests, else why not."""
    if already + request > limit:
        return f"pod does not fit: CPU requested {already}m + pod {request}m > allocatable {limit}m"
    if memory_request is not None and mem_limit is not None and mem_used + memory_request > mem_limit:
        return f"pod does not fit: memory requested {mem_used} + pod {memory_request} > allocatable {mem_limit}"
    return ""


_REASONS = {
    "on": "powered on; predicted power jump {cost:.2f} W",
    "on_neutral": "powered on, no power model or no fresh data; neutral score, after nodes with a predicted jump",
    "wake": "powered off; predicted {cost:.2f} W to run the pod, idle power of waking it included",
    "wake_efficiency": "powered off; best predicted efficiency {cost:.2f} W per CPU",
    "wake_neutral": "powered off, no power model; after powered-off nodes with a prediction",
}


def rank_nodes(nodes, pod_cpu_request, pod_memory_request=None, wake="pod", pod_cpu_size=None):
    """Rank every node for one pod; return result dicts, best first.

    ``nodes``: mappings with ``name`` (unique), ``cpu_capacity`` (millicores or a quantity string),
    optional ``cpu_allocatable`` (default: capacity), ``cpu_requested`` (CPU requests of the pods on
    the node, default 0), ``memory_allocatable`` and ``memory_requested`` (integers, the unit of
    ``pod_memory_request``; checked only when both the pod's memory request and the node's
    allocatable memory are given), ``model`` (a ``fit_model`` result, or null: no model or no fresh
    data) and ``powered_off`` (bool, default false; a powered-off node has no pods).
    ``pod_cpu_request``: millicores or a quantity string; ``pod_memory_request``: integer or None.
    ``wake``: how powered-off nodes are ordered, ``"pod"`` (predicted power to run this pod, idle
    included) or ``"efficiency"`` (best predicted watts per CPU). ``pod_cpu_size``: the CPU the
    pod's power is predicted for, millicores (default: its request); fitting always uses the request.
    A pod that requests no CPU is sized as kube-scheduler's scoring sizes it (``extender``'s
    ``DEFAULT_POD_CPU_M``), or every node's jump is 0 W and they all tie.

    Each result: ``name``, ``rank`` (1 = best), ``score`` (0..100), ``status`` (see ``STATUSES``),
    ``cost_w`` (predicted watts, None for neutral and unfit nodes), ``util_after`` (percent, by
    requests) and ``reason``. Raises ``PlacementScoreError`` (a ``ValueError``) naming the node and
    the field on bad input.
    """
    if wake not in WAKE_ORDERS:
        _fail("options", "wake", f"must be one of {', '.join(WAKE_ORDERS)}, got {wake!r}")
    request = _checked(cpu_millicores, pod_cpu_request, "pod", "pod_cpu_request")
    size = request if pod_cpu_size is None else _checked(cpu_millicores, pod_cpu_size, "pod", "pod_cpu_size")
    if pod_memory_request is not None and (
        isinstance(pod_memory_request, bool) or not isinstance(pod_memory_request, int) or pod_memory_request < 0
    ):
        _fail("pod", "pod_memory_request", f"must be a non-negative integer or null, got {pod_memory_request!r}")
    _checked(node_list, nodes)
    results = []
    seen = {}
    memory = pod_memory_request is not None  # a node's memory figures are read only for a pod that asks
    for index, node in enumerate(nodes):
        try:
            name, _util, capacity, allocatable, requested, mem_limit, mem_used, powered_off = node_input(
                node, index, seen, cpu_requests=True, memory=memory, power_state=True
            )
        except NodeInputError as err:
            raise PlacementScoreError(f"placement score: {err}") from None
        already = requested or 0
        limit = capacity if allocatable is None else allocatable
        reason = _fits(limit, already, request, mem_limit, mem_used or 0, pod_memory_request)
        model = node.get("model")
        predict = None
        if model is not None:
            try:
                predict = compile_model(model, name)
            except PowerModelError as err:
                raise PlacementScoreError(f"placement score: {err}") from None
        if reason:
            status, cost, util_after = "unfit", None, None
        else:
            # it fits by its request; it is predicted for its size, at most the CPU the node has free
            sized = request if already + request > capacity else min(size, capacity - already)
            status, cost, util_after = placement_cost(predict, capacity, already, sized, powered_off, wake)
            if status == "unfit":
                reason = f"pod does not fit: utilisation would reach {util_after:.1f} % of CPU capacity"
            else:
                template = "wake_efficiency" if status == "wake" and wake == "efficiency" else status
                reason = _REASONS[template].format(cost=cost)
        results.append({"name": name, "status": status, "cost_w": cost, "util_after": util_after, "reason": reason})
    for status, (low_score, high_score) in _BANDS.items():
        costs = [r["cost_w"] for r in results if r["status"] == status]
        if not costs:
            continue
        low, spread = min(costs), max(costs) - min(costs)
        for result in results:
            if result["status"] == status:
                fraction = (result["cost_w"] - low) / spread if spread > 0.0 else 0.0
                # Round half up (Python's round() rounds half to even).
                result["score"] = high_score - int(math.floor((high_score - low_score) * fraction + 0.5))
    for result in results:
        if result["status"] in _FIXED_SCORE:
            result["score"] = _FIXED_SCORE[result["status"]]
    results.sort(key=lambda r: rank_key(r["status"], r["cost_w"], r["name"]))
    for rank, result in enumerate(results, start=1):
        result["rank"] = rank
    return results
