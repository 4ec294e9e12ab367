# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node power models: wall power in watts as a function of CPU utilisation in percent.

Pure Python (no Ansible, no numpy), Python 3.9 compatible, deterministic.

Kinds (see docs/filters.md for the measurements behind the default):

``piecewise_linear`` (default)
    Straight segments between fixed utilisation knots, constrained to be non-decreasing, with a
    small penalty on slope changes so that knots without samples continue the neighbouring
    slope. Follows real servers, which rise steeply from idle to 10 % and are convex above.
    Params: ``{"knot_util": [0, 5, 10, ..., 100], "knot_watts": [...]}``.
``peaks``
    ``P(u) = k0 + k1 * exp(k2 * u)``, u in percent: the form and units of the upstream Peaks
    scheduler plugin (kubernetes-sigs/scheduler-plugins), so ``params`` (exactly ``k0``, ``k1``,
    ``k2``) can be handed to it unchanged.
``linear``
    A straight line from idle to full load, the assumption of cloud-carbon style estimators.
    Params: ``{"idle_w": ..., "max_w": ...}``.

Every kind is fitted by least squares with Huber weights (iteratively reweighted), so a few
outlying samples do not drag the curve, and every fitted model is non-decreasing in utilisation
(power does not fall when load rises; a falling model would give negative power jumps).
"""

from __future__ import annotations

import json
import math
import operator

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import is_dns1123_subdomain
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.model_fitting import (
    fit_linear_weighted,
    fit_peaks_weighted,
    fit_piecewise_weighted,
    linear_predictor,
    peaks_predictor,
    piecewise_predictor,
    robust_fit,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import parse_cpu_quantity

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "PowerModelError",
    "annotation_prefix_problems",
    "compile_model",
    "config_errors",
    "fit_model",
    "fit_nodes",
    "judge_fit",
    "power_jump_promql",
    "predict_power",
]

DEFAULT_KIND = "piecewise_linear"
# Utilisations (percent) are told apart to this many decimals when a kind counts distinct ones.
UTIL_RESOLUTION_DIGITS = 9
KINDS = ("piecewise_linear", "peaks", "linear")


class PowerModelError(ValueError):
    """Invalid samples, options or model; the message names the node and the field."""


def _where(node):
    return "power model" if node is None else f"power model for node {node!r}"


def _fail(node, field, problem):
    raise PowerModelError(f"{_where(node)}: {field}: {problem}")


_FLOAT_TYPE = {float}


def finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --- input validation -----------------------------------------------------------------------


def _validated_samples(samples, node):
    if isinstance(samples, (str, bytes)) or not hasattr(samples, "__iter__"):
        _fail(node, "samples", f"expected a list of {{util, watts}} mappings, got {type(samples).__name__}")
    utils, watts = [], []
    for index, sample in enumerate(samples):
        field = f"samples[{index}]"
        if not hasattr(sample, "get"):
            _fail(node, field, f"expected a mapping with util and watts, got {type(sample).__name__}")
        util, power = sample.get("util"), sample.get("watts")
        if not finite_number(util) or not 0.0 <= util <= 100.0:
            _fail(node, field + ".util", f"must be a number within 0..100 (percent), got {util!r}")
        if not finite_number(power) or power < 0.0:
            _fail(node, field + ".watts", f"must be a finite number >= 0, got {power!r}")
        utils.append(float(util))
        watts.append(float(power))
    if not utils:
        _fail(node, "samples", "no samples; need measured {util, watts} pairs")
    return utils, watts


def _finite_floats(values):
    """``values`` as a new list of floats, or None unless all are finite int/float (not bool).

    One set of types and one sum instead of a check per element: this runs for every model of a
    scoring call over thousands of nodes. A NaN or infinity anywhere makes the sum non-finite.
    """
    if not isinstance(values, (list, tuple)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            return None
        values = list(values)
    types = set(map(type, values))
    if types == _FLOAT_TYPE:
        floats = list(values)
    # Subclasses count: Ansible's templating hands over tagged int/float subclasses.
    elif all(issubclass(t, (int, float)) and not issubclass(t, bool) for t in types):
        try:
            floats = list(map(float, values))
        except OverflowError:  # an int too large for a float
            return None
    else:
        return None
    return floats if math.isfinite(sum(floats)) else None


def _validated_knots(knots, node, field):
    values = _finite_floats(knots)
    if values is None:
        _fail(node, field, f"expected a list of finite utilisation percentages, got {knots!r}")
    if len(values) < 2 or values[0] != 0.0 or values[-1] != 100.0:
        _fail(node, field, f"must start at 0 and end at 100, got {values!r}")
    if not all(map(operator.lt, values, values[1:])):
        _fail(node, field, f"must be strictly increasing, got {values!r}")
    return tuple(values)


# --- PromQL: the power jump P(u + d) - P(u) of each kind ---------------------------------------
# ``x`` is the utilisation series (percent), ``d`` the jump in percentage points. Above 100 % the
# last slope continues, so a node the pod would overfill never looks cheap.


def _num(value):
    return f"{float(value):.10g}"


def _plus(value):
    """``+ v`` or ``- |v|`` (``-0.0`` stays ``+ -0``, as the rules have always been written)."""
    value = float(value)
    return f"+ {_num(value)}" if value >= 0 else f"- {_num(-value)}"


def _segments_promql(knots, values, x, d):
    """Piecewise linear through (knots, values): a sum of clamped ramps, the last slope continued."""
    terms = []
    for k in range(1, len(knots)):
        width = float(knots[k]) - float(knots[k - 1])
        slope = (float(values[k]) - float(values[k - 1])) / width
        if slope != 0:
            lower = float(knots[k - 1])
            terms.append(
                f"{_num(slope)} * (clamp({x} {_plus(d - lower)}, 0, {_num(width)}) - clamp({x} {_plus(-lower)}, 0, "
                f"{_num(width)}))"
            )
    last = (float(values[-1]) - float(values[-2])) / (float(knots[-1]) - float(knots[-2]))
    terms.append(f"{_num(last)} * (clamp_min({x} {_plus(d - 100)}, 0) - clamp_min({x} - 100, 0))")
    return terms


def _piecewise_promql(params, x, d):
    return _segments_promql(params["knot_util"], params["knot_watts"], x, d)


def _linear_promql(params, x, d):
    return _segments_promql([0, 100], [params["idle_w"], params["max_w"]], x, d)


def _peaks_promql(params, x, d):
    k1, k2 = _num(params["k1"]), _num(params["k2"])
    return [f"{k1} * (exp({k2} * ({x} {_plus(d)})) - exp({k2} * {x}))"]


class _Kind:
    """Everything about one model kind: its parameters, fit, predictor and PromQL rendering."""

    def __init__(self, params, fit, predictor, promql, min_distinct, options):
        self.params = params
        self.fit = fit
        self.predictor = predictor
        self.promql = promql
        self.min_distinct = min_distinct
        self.options = options


_KINDS = {
    "piecewise_linear": _Kind(
        ("knot_util", "knot_watts"), fit_piecewise_weighted, piecewise_predictor, _piecewise_promql, 2,
        ("knots", "smoothing", "robust"),
    ),
    "peaks": _Kind(("k0", "k1", "k2"), fit_peaks_weighted, peaks_predictor, _peaks_promql, 3, ("robust",)),
    "linear": _Kind(("idle_w", "max_w"), fit_linear_weighted, linear_predictor, _linear_promql, 2, ("robust",)),
}  # fmt: skip


def compile_model(model, node=None):
    """Validate a ``fit_model`` result once and return ``predict(util_percent) -> watts``.

    The returned function does no checks, for hot loops such as scoring thousands of nodes.
    Raises ``PowerModelError`` naming the node and the offending field.
    """
    if not hasattr(model, "get"):
        _fail(node, "model", f"expected a mapping from power_model, got {type(model).__name__}")
    kind = model.get("kind")
    if kind not in _KINDS:
        _fail(node, "model.kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    params = model.get("params")
    if not hasattr(params, "get"):
        _fail(node, "model.params", f"expected a mapping, got {type(params).__name__}")
    for name in _KINDS[kind].params:
        if name not in params:
            _fail(node, f"model.params.{name}", f"missing for kind {kind!r}")
    if kind == "piecewise_linear":
        knots, values = params["knot_util"], params["knot_watts"]
        # Fast path for what fit_model returns (float lists); anything else gets the detailed checks.
        if (
            isinstance(knots, list)
            and isinstance(values, list)
            and len(knots) == len(values) >= 2
            and set(map(type, knots)) == _FLOAT_TYPE
            and set(map(type, values)) == _FLOAT_TYPE
            and knots[0] == 0.0
            and knots[-1] == 100.0
            and all(map(operator.lt, knots, knots[1:]))
            and math.isfinite(sum(values))
        ):
            return piecewise_predictor({"knot_util": list(knots), "knot_watts": list(values)})
        knots = _validated_knots(params["knot_util"], node, "model.params.knot_util")
        values = _finite_floats(params["knot_watts"])
        if values is None or len(values) != len(knots):
            _fail(
                node,
                "model.params.knot_watts",
                f"need {len(knots)} finite numbers (one per knot), got {params['knot_watts']!r}",
            )
        return piecewise_predictor({"knot_util": list(knots), "knot_watts": values})
    for name in _KINDS[kind].params:
        if not finite_number(params[name]):
            _fail(node, f"model.params.{name}", f"must be a finite number, got {params[name]!r}")
    return _KINDS[kind].predictor(params)


def predict_power(model, util, node=None):
    """Predicted wall power in watts of ``model`` (a ``fit_model`` result) at ``util`` percent."""
    if not finite_number(util) or not 0.0 <= util <= 100.0:
        _fail(node, "util", f"must be a number within 0..100 (percent), got {util!r}")
    return compile_model(model, node)(float(util))


# --- fitting ----------------------------------------------------------------------------------


def fit_model(samples, kind=DEFAULT_KIND, node=None, **options):
    """Fit a power model to measured samples.

    ``samples``: iterable of mappings ``{"util": percent 0..100, "watts": W >= 0}``.
    ``kind``: ``"piecewise_linear"`` (default), ``"peaks"`` or ``"linear"``.
    ``node``: only used to name the node in error messages.
    ``options``: ``robust`` (bool, default True: Huber-weighted fit; False: plain least squares);
    for ``piecewise_linear`` also ``knots`` (utilisation percentages, from 0 to 100, strictly
    increasing) and ``smoothing`` (>= 0, penalty on slope changes relative to the data).

    Returns ``{"kind", "params", "quality": {"rmse_w", "samples", "util_min", "util_max"}}``,
    where ``rmse_w`` is the root-mean-square residual over the samples, in watts.
    Raises ``PowerModelError`` (a ``ValueError``) naming the node and the field on bad input.
    """
    if kind not in _KINDS:
        _fail(node, "kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    unknown = sorted(set(options) - set(_KINDS[kind].options))
    if unknown:
        _fail(node, unknown[0], f"not an option of kind {kind!r} (options: {', '.join(_KINDS[kind].options)})")
    robust = options.pop("robust", True)
    if not isinstance(robust, bool):
        _fail(node, "robust", f"must be true or false, got {robust!r}")
    if "knots" in options:
        options["knots"] = _validated_knots(options["knots"], node, "knots")
    if "smoothing" in options:
        smoothing = options["smoothing"]
        if not finite_number(smoothing) or smoothing < 0.0:
            _fail(node, "smoothing", f"must be a finite number >= 0, got {smoothing!r}")
    utils, watts = _validated_samples(samples, node)
    # Distinct at a billionth of a percentage point: utilisations closer than that (subnormal floats,
    # 1e-45 % apart) are one point to the fit, whose sums of squares underflow there.
    distinct = len({round(u, UTIL_RESOLUTION_DIGITS) for u in utils})
    if distinct < _KINDS[kind].min_distinct:
        _fail(
            node,
            "samples",
            f"kind {kind!r} needs samples at {_KINDS[kind].min_distinct} or more distinct utilisation values, "
            f"got {distinct}",
        )
    weighted_fit = _KINDS[kind].fit
    if robust:
        params, predict = robust_fit(weighted_fit, utils, watts, options)
    else:
        params, predict = weighted_fit(utils, watts, [1.0] * len(utils), **options)
    rmse = math.sqrt(sum((y - predict(u)) ** 2 for u, y in zip(utils, watts)) / len(utils))
    return {
        "kind": kind,
        "params": params,
        "quality": {"rmse_w": rmse, "samples": len(utils), "util_min": min(utils), "util_max": max(utils)},
    }


# --- publishing --------------------------------------------------------------------------------


def power_jump_promql(model, util_series, reference_cpu, capacity_cpu, node=None):
    """PromQL for the watts a pod of ``reference_cpu`` adds at the utilisation ``util_series``:
    ``P(u + d) - P(u)`` with ``d = 100 * reference / capacity`` percentage points and the last slope
    continued above 100 %. Quantities are Kubernetes CPU quantities (``"2"``, ``"500m"``).

    Returns the terms of the sum, one per ramp (``" + "`` joins them into the expression).
    """
    compile_model(model, node)
    capacity = parse_cpu_quantity(str(capacity_cpu))
    if capacity <= 0:
        _fail(node, "capacity", f"must be a positive CPU quantity, got {capacity_cpu!r}")
    d = 100.0 * float(parse_cpu_quantity(str(reference_cpu))) / float(capacity)
    return _KINDS[model["kind"]].promql(model["params"], util_series, d)


def judge_fit(samples, model, peaks, known, min_samples, max_rmse_percent):
    """The verdict on one node's fits (``model`` of the published kind and ``peaks``, each a
    ``fit_model`` result or None when the samples were too few or too narrow to fit).

    Returns ``{status, samples, util_span, rmse_percent, model, quality, peaks, peaks_rmse_percent}``;
    ``status`` is ``ok``, ``unknown_node`` (no such Kubernetes node), ``too_few_samples``,
    ``narrow_utilisation_range`` or ``poor_fit`` (RMSE above ``max_rmse_percent`` of the mean power).
    ``model``/``quality`` are published only for ``ok``; ``peaks`` (its params) only when it is ``ok``
    and the Peaks fit is within the same limit.
    """
    samples = list(samples or [])
    utils = [float(s["util"]) for s in samples]
    mean_w = sum(float(s["watts"]) for s in samples) / max(len(samples), 1)

    def rmse_percent(fit):
        return 100 * fit["quality"]["rmse_w"] / mean_w if fit and mean_w > 0 else None

    rmse, peaks_rmse = rmse_percent(model), rmse_percent(peaks)
    if not known:
        status = "unknown_node"
    elif len(samples) < int(min_samples):
        status = "too_few_samples"
    elif not model:
        status = "narrow_utilisation_range"
    elif rmse is None or rmse > float(max_rmse_percent):
        status = "poor_fit"
    else:
        status = "ok"
    ok = status == "ok"
    return {
        "status": status,
        "samples": len(samples),
        "util_span": round((max(utils) - min(utils)) if utils else 0.0, 1),
        "rmse_percent": round(rmse, 2) if rmse is not None else None,
        "model": {"kind": model["kind"], "params": model["params"]} if ok else None,
        "quality": model["quality"] if ok else None,
        "peaks": peaks["params"] if ok and peaks_rmse is not None and peaks_rmse <= float(max_rmse_percent) else None,
        "peaks_rmse_percent": round(peaks_rmse, 2) if peaks_rmse is not None else None,
    }


# The node annotations the power_models role publishes a node's fit under: ``<prefix>/power-model``
# (what our extender reads: extender imports it) and ``<prefix>/power-model-quality``.
MODEL_ANNOTATION = "power-model"
QUALITY_ANNOTATION = "power-model-quality"


def node_annotation_objects(results, prefix):
    """The Node objects that publish ``fit_nodes`` results, for one server-side apply of them all.

    Every node of the cluster gets one: with its model and quality as sorted JSON when its fit is
    ``ok``, with no annotation otherwise, so that the apply takes back what the same field manager
    published there before. Nodes that only have samples (status ``unknown_node``) get none: they
    are not in the cluster. Sorted by node name.
    """
    if not isinstance(results, dict):
        raise PowerModelError(f"the fit results must be a mapping of node to result, got {type(results).__name__}")
    objects = []
    for node in sorted(results):
        result = results[node]
        if result.get("status") == "unknown_node":
            continue
        metadata = {"name": node}
        if result.get("status") == "ok":
            metadata["annotations"] = {
                f"{prefix}/{MODEL_ANNOTATION}": json.dumps(result["model"], sort_keys=True),
                f"{prefix}/{QUALITY_ANNOTATION}": json.dumps(result["quality"], sort_keys=True),
            }
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": metadata})
    return objects


# The upstream Peaks plugin's model file (its NODE_POWER_MODEL): JSON {"<node>": {"k0": .., "k1": ..,
# "k2": ..}}, P(u) = k0 + k1 * exp(k2 * u). The power_models role publishes it in a ConfigMap; the
# peaks role reads it back (scheduler.peaks.parse_models).
PEAKS_COEFFICIENTS = ("k0", "k1", "k2")


def peaks_models_text(results):
    """The Peaks model file of ``fit_nodes`` results: every node whose Peaks fit was good enough
    (its result's ``peaks``), sorted, as JSON with sorted keys; ``{}`` when no node has one."""
    if not isinstance(results, dict):
        raise PowerModelError(f"the fit results must be a mapping of node to result, got {type(results).__name__}")
    models = {
        node: {k: result["peaks"][k] for k in PEAKS_COEFFICIENTS}
        for node, result in sorted(results.items())
        if isinstance(result, dict) and result.get("peaks")
    }
    return json.dumps(models, sort_keys=True)


def annotation_prefix_problems(variable, prefix, fix):
    """[] when ``prefix`` can go before the model annotations (``<prefix>/power-model``): a DNS
    subdomain, as Kubernetes takes the prefix of any annotation key. Else the one problem, naming
    ``variable``, the value, why and ``fix``.

    The one check of both roles' prefixes, which must be the same: the power_models role publishes
    under power_models_annotation_prefix, our extender reads power_extender_annotation_prefix.
    """
    if is_dns1123_subdomain(prefix):
        return []
    return [f"{variable}={prefix!r}: must be a DNS subdomain, {fix}"]


def config_errors(values):
    """Every problem with the power_models role's variables checked here (the annotation prefix; the
    role's own assertion checks the others), each naming variable, value, reason and fix."""
    return annotation_prefix_problems(
        "power_models_annotation_prefix",
        values.get("power_models_annotation_prefix"),
        "lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or "
        "digit, at most 253 characters, such as poweraware.io; the power_extender role's "
        "power_extender_annotation_prefix must be the same",
    )


def fit_nodes(samples_by_node, nodes, kind=DEFAULT_KIND, min_samples=30, min_util_span=20.0, max_rmse_percent=10.0):
    """Fit and judge every node: those of the cluster (``nodes``, names) and those with samples.

    A node is fitted (the published ``kind`` and, on the same samples, ``peaks``) when it has at
    least ``min_samples`` samples spanning ``min_util_span`` utilisation points at 3 or more
    distinct utilisations. Returns ``{node: judge_fit(...)}``.
    """
    samples_by_node = samples_by_node or {}
    known = set(nodes or [])
    results = {}
    for node in sorted(known | set(samples_by_node)):
        samples = list(samples_by_node.get(node) or [])
        utils = [float(s["util"]) for s in samples]
        span = (max(utils) - min(utils)) if utils else 0.0
        fit = len(samples) >= int(min_samples) and span >= float(min_util_span) and len(set(utils)) >= 3
        model = fit_model(samples, kind=kind, node=node) if fit else None
        peaks = fit_model(samples, kind="peaks", node=node) if fit else None
        results[node] = judge_fit(samples, model, peaks, node in known, min_samples, max_rmse_percent)
    return results
