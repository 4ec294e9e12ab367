# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PEAKS-style power scores: which node takes a pod for the smallest rise in wall power.

Pure Python, no Ansible imports, Python 3.9 compatible.

For a node at utilisation u (percent) with CPU capacity C and a pod requesting r, the pod would
take the node to p = u + 100 * r / C; the predicted power jump is P(p) - P(u) with the node's
power model P. The smallest jump scores highest after min-max normalisation, as in the upstream
Peaks plugin (kubernetes-sigs/scheduler-plugins, pkg/trimaran/peaks), whose defects are fixed:

* a node where the pod does not fit (p > 100, or requests beyond allocatable) scores 0;
  upstream gives it a raw cost of 0, which normalises to the best score;
* a node without metrics or without a model gets ``neutral_score`` (never the best score);
  upstream gives no-metrics nodes a raw cost of 0 and model-less nodes the model {0, 0, 0},
  so both normalise to the best score;
* fitting nodes score 1..100, so none ties with a node that cannot take the pod;
* ranking is total: score, then status (scored, neutral, unfit), then jump, then name.

``score_nodes_upstream_peaks`` reproduces the upstream arithmetic, defects included, as the
baseline for tests and benchmarks.
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

__all__ = ["MAX_SCORE", "PowerScoreError", "score_nodes", "score_nodes_upstream_peaks"]

MAX_SCORE = 100
# Lowest score of a node that can take the pod; 0 is reserved for nodes that cannot.
MIN_FITTING_SCORE = 1
_STATUS_ORDER = {"scored": 0, "neutral": 1, "unfit": 2}
# Upstream scales watts by 1e15 into an int64 raw score before normalising.
_UPSTREAM_SCALE = 1e15


class PowerScoreError(ValueError):
    """Invalid node or pod input; the message names the node and the field."""


def _fail(where, field, problem):
    raise PowerScoreError(f"power score: {where}: {field}: {problem}")


def _checked(check, *args, **fields):
    """Run one of ``node_input``'s checks, its error worded as this module's."""
    try:
        return check(*args, **fields)
    except NodeInputError as err:
        raise PowerScoreError(f"power score: {err}") from None


def _request_fits_allocatable(capacity, allocatable, requested, request):
    """False when requests already on the node plus this pod exceed what the node offers."""
    if allocatable is None and requested is None:
        return True, ""
    limit = capacity if allocatable is None else allocatable
    already = 0 if requested is None else requested
    if already + request > limit:
        bound = "capacity" if allocatable is None else "allocatable"
        return False, f"pod does not fit: requested {already}m + pod {request}m > {bound} {limit}m"
    return True, ""


def _validated_neutral_score(neutral_score):
    if isinstance(neutral_score, bool) or not isinstance(neutral_score, int):
        _fail("options", "neutral_score", f"must be an integer within 0..99, got {neutral_score!r}")
    if not 0 <= neutral_score < MAX_SCORE:
        # 100 would hand the best score to a node the model knows nothing about.
        _fail("options", "neutral_score", f"must be within 0..99 (below the best score), got {neutral_score}")
    return neutral_score


def score_nodes(nodes, pod_cpu_request, neutral_score=50):
    """Score every node for one pod; return result dicts ranked best first.

    ``nodes``: mappings with ``name`` (unique), ``util`` (current CPU utilisation in percent, or
    null/missing when there are no metrics), ``cpu_capacity`` (millicores or a quantity string),
    ``model`` (a ``fit_model`` result, or null/missing) and optionally ``cpu_allocatable`` and
    ``cpu_requested`` (sum of CPU requests already on the node) for the allocatable check.
    ``pod_cpu_request``: millicores (int) or a Kubernetes quantity string (``"500m"``, ``"2"``).
    ``neutral_score``: score for nodes without metrics or model, 0..99.

    Each result: ``name``, ``score`` (int 0..100), ``jump_w`` (predicted watts added, None when
    not predicted), ``util_after`` (percent, None without metrics), ``status`` (``scored``,
    ``neutral`` or ``unfit``), ``reason`` and ``rank`` (1 = best).
    Raises ``PowerScoreError`` (a ``ValueError``) naming the node and the field on bad input.
    """
    neutral_score = _validated_neutral_score(neutral_score)
    request = _checked(cpu_millicores, pod_cpu_request, "pod", "pod_cpu_request")
    _checked(node_list, nodes)
    results = []
    scored = []
    seen = {}
    for index, node in enumerate(nodes):
        try:
            checked = node_input(node, index, seen, util=True, cpu_requests=True)
        except NodeInputError as err:
            raise PowerScoreError(f"power score: {err}") from None
        name, util, capacity, allocatable, requested = checked[:5]
        model = node.get("model")
        predict = None
        if model is not None:
            try:
                predict = compile_model(model, name)
            except PowerModelError as err:
                raise PowerScoreError(f"power score: {err}") from None
        fits, reason = _request_fits_allocatable(capacity, allocatable, requested, request)
        util_after = jump = None
        score, status = 0, "unfit"
        if fits:
            if util is None:
                score, status, reason = neutral_score, "neutral", "no utilisation metrics; neutral score"
            else:
                util_after = util + 100.0 * request / capacity
                if util_after > 100.0:
                    reason = f"pod does not fit: utilisation would reach {util_after:.1f} % of CPU capacity"
                elif predict is None:
                    score, status, reason = neutral_score, "neutral", "no power model; neutral score"
                else:
                    jump = predict(util_after) - predict(util)
                    status = "scored"
        result = {
            "name": name,
            "score": score,
            "jump_w": jump,
            "util_after": util_after,
            "status": status,
            "reason": reason,
        }
        results.append(result)
        if jump is not None:
            scored.append(result)
    if scored:
        low = min(r["jump_w"] for r in scored)
        spread = max(r["jump_w"] for r in scored) - low
        span = MAX_SCORE - MIN_FITTING_SCORE
        for result in scored:
            # Round half up: Python's round() rounds half to even.
            fraction = (result["jump_w"] - low) / spread if spread > 0.0 else 0.0
            result["score"] = MAX_SCORE - int(math.floor(span * fraction + 0.5))
            result["reason"] = f"fits; predicted power jump {result['jump_w']:.2f} W"
    results.sort(key=lambda r: (-r["score"], _STATUS_ORDER[r["status"]], r["jump_w"] or 0.0, r["name"]))
    for rank, result in enumerate(results, start=1):
        result["rank"] = rank
    return results


def score_nodes_upstream_peaks(nodes, pod_cpu_request):
    """The upstream Peaks plugin's Score + NormalizeScore, defects included, in input order.

    Same node fields as ``score_nodes``; only ``peaks`` models are read (upstream knows no other
    form), any other or missing model acts as upstream's default ``{k0: 0, k1: 0, k2: 0}``.
    Returns ``[{"name", "raw_score", "score"}]``: the int64 cost (jump in watts * 1e15,
    truncated) and the normalised score, ``100 - int(100 * (cost - min) / (max - min))``.
    """
    request = _checked(cpu_millicores, pod_cpu_request, "pod", "pod_cpu_request")
    results = []
    seen = {}
    for index, node in enumerate(nodes):
        # upstream reads no requests: a node's cpu_allocatable and cpu_requested are not checked
        try:
            name, util, capacity = node_input(node, index, seen, util=True)[:3]
        except NodeInputError as err:
            raise PowerScoreError(f"power score: {err}") from None
        model = node.get("model")
        raw = 0  # framework.MinNodeScore: no metrics and overfull nodes keep it
        if util is not None:
            predicted = 100.0 * (util / 100.0 * capacity + request) / capacity
            if predicted <= 100.0:
                if hasattr(model, "get") and model.get("kind") == "peaks":
                    try:
                        compile_model(model, name)  # validation only
                    except PowerModelError as err:
                        raise PowerScoreError(f"power score: {err}") from None
                    k1, k2 = model["params"]["k1"], model["params"]["k2"]
                    # upstream getPowerJumpForUtilisation: k0 cancels
                    jump = k1 * (math.exp(k2 * predicted) - math.exp(k2 * util))
                else:
                    jump = 0.0
                raw = int(jump * _UPSTREAM_SCALE)
        results.append({"name": name, "raw_score": raw, "score": raw})
    if not results:
        return results
    low = min(r["raw_score"] for r in results)
    high = max(r["raw_score"] for r in results)
    if low == 0 and high == 0:
        return results
    for result in results:
        if high != low:
            cost = MAX_SCORE * float(result["raw_score"] - low) / float(high - low)
        else:
            cost = float(result["raw_score"] - low)
        result["score"] = MAX_SCORE - int(cost)
    return results
