"""The PromQL each model kind renders (module_utils/placement/power_model.py) evaluates to the kind's own
predictor: P(u + d) - P(u), the last slope continued above 100 %. A tiny evaluator for the PromQL
subset the renderers emit (numbers, + - *, clamp, clamp_min, exp, one series) checks every kind at
many utilisations; test_rules_template.py checks the same rules with the real promtool."""

from __future__ import annotations

import ast
import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    KINDS,
    PowerModelError,
    fit_model,
    judge_fit,
    power_jump_promql,
    predict_power,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError

SERIES = 'poweraware:node_cpu_utilisation:percent{node="n1"}'
CURVE = (60.0, 95.0, 108.0, 119.0, 130.0, 142.0, 155.0, 170.0, 188.0, 210.0, 236.0)
_FUNCTIONS = {
    "clamp": lambda v, lo, hi: min(max(v, lo), hi),
    "clamp_min": max,
    "exp": math.exp,
}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}


def evaluate(expression, util):
    """Evaluate the emitted PromQL subset with the series at ``util``; anything else is refused."""
    assert expression.count(SERIES) >= 1

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id == "X":
            return util
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            return _FUNCTIONS[node.func.id](*(walk(a) for a in node.args))
        raise AssertionError(f"not in the PromQL subset: {ast.dump(node)}")

    return walk(ast.parse(expression.replace(SERIES, "X"), mode="eval"))


def true_power(util):
    seg = min(int(util // 10), 9)
    return CURVE[seg] + (CURVE[seg + 1] - CURVE[seg]) * (util - 10 * seg) / 10


def extended(model, util):
    """The Python predictor, its last slope continued above 100 % (peaks: the exponential itself)."""
    if model["kind"] == "peaks":
        p = model["params"]
        return p["k0"] + p["k1"] * math.exp(p["k2"] * util)
    if util <= 100.0:
        return predict_power(model, util)
    knots = model["params"]["knot_util"] if model["kind"] == "piecewise_linear" else [0.0, 100.0]
    slope = (predict_power(model, 100.0) - predict_power(model, knots[-2])) / (100.0 - knots[-2])
    return predict_power(model, 100.0) + slope * (util - 100.0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("reference", "capacity"), [("2", "8"), ("500m", "16000m"), ("4", "4"), ("1.5", "64")])
def test_rendered_jump_equals_the_predictor(kind, reference, capacity):
    samples = [{"util": u / 2, "watts": true_power(u / 2)} for u in range(0, 201)]
    model = fit_model(samples, kind=kind, node="n1")
    terms = power_jump_promql(model, SERIES, reference, capacity)
    expression = " + ".join(terms)
    d = 100.0 * {"2": 2000, "500m": 500, "4": 4000, "1.5": 1500}[reference] / {
        "8": 8000, "16000m": 16000, "4": 4000, "64": 64000}[capacity]  # fmt: skip
    for util in (0.0, 2.5, 5.0, 7.5, 33.3, 50.0, 74.0, 90.0, 99.9, 100.0):
        want = extended(model, util + d) - extended(model, util)
        assert evaluate(expression, util) == pytest.approx(want, rel=1e-8, abs=1e-6), (kind, util)


def test_rendering_is_stable_text():
    model = {"kind": "linear", "params": {"idle_w": 50.0, "max_w": 250.0}}
    assert power_jump_promql(model, "u", "2", "8") == [
        "2 * (clamp(u + 25, 0, 100) - clamp(u + -0, 0, 100))",
        "2 * (clamp_min(u - 75, 0) - clamp_min(u - 100, 0))",
    ]
    peaks = {"kind": "peaks", "params": {"k0": 40.0, "k1": 20.0, "k2": 0.02}}
    assert power_jump_promql(peaks, "u", "1", "4") == ["20 * (exp(0.02 * (u + 25)) - exp(0.02 * u))"]


@pytest.mark.parametrize(
    ("model", "reference", "capacity", "error"),
    [
        ({"kind": "cubic", "params": {}}, "1", "4", PowerModelError),
        ({"kind": "linear", "params": {"idle_w": 1.0}}, "1", "4", PowerModelError),
        ({"kind": "linear", "params": {"idle_w": 1.0, "max_w": 2.0}}, "one", "4", QuantityError),
        ({"kind": "linear", "params": {"idle_w": 1.0, "max_w": 2.0}}, "1", "0", PowerModelError),
    ],
)
def test_bad_models_and_quantities_are_refused(model, reference, capacity, error):
    with pytest.raises(error):
        power_jump_promql(model, "u", reference, capacity)


def _fit(samples, kind="piecewise_linear"):
    return fit_model(samples, kind=kind)


@pytest.mark.parametrize(
    ("case", "status"),
    [("unknown", "unknown_node"), ("few", "too_few_samples"), ("narrow", "narrow_utilisation_range"),
     ("noisy", "poor_fit"), ("good", "ok")],
)  # fmt: skip
def test_judgement_ladder(case, status):
    good = [{"util": float(u), "watts": true_power(u)} for u in range(0, 101, 2)]
    noisy = [{"util": s["util"], "watts": s["watts"] * (1.5 if i % 2 else 0.5)} for i, s in enumerate(good)]
    samples, model, known = {
        "unknown": (good, _fit(good), False),
        "few": (good[:3], None, True),
        "narrow": (good, None, True),
        "noisy": (noisy, _fit(noisy), True),
        "good": (good, _fit(good), True),
    }[case]
    verdict = judge_fit(samples, model, _fit(samples, "peaks") if model else None, known, 30, 10.0)
    assert verdict["status"] == status
    assert (verdict["model"] is not None) == (status == "ok") == (verdict["quality"] is not None)
    if status == "ok":
        assert verdict["model"] == {"kind": "piecewise_linear", "params": model["params"]}
        assert verdict["rmse_percent"] == round(
            100 * model["quality"]["rmse_w"] / (sum(true_power(u) for u in range(0, 101, 2)) / 51), 2
        )
