"""fit_model / predict_power / compile_model: shapes, exactness, robustness, monotonicity, errors."""

from __future__ import annotations

import math
import random

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    DEFAULT_KIND,
    KINDS,
    PowerModelError,
    compile_model,
    fit_model,
    predict_power,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# A made-up server curve with the usual SPECpower shape: steep from idle to 10 %, convex above.
CURVE_UTIL = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
CURVE_WATTS = (60.0, 95.0, 108.0, 120.0, 133.0, 147.0, 163.0, 182.0, 205.0, 232.0, 265.0)
PEAK_W = CURVE_WATTS[-1]
GRID = [u * 0.5 for u in range(201)]


def curve(util):
    segment = min(int(util // 10), 9)
    fraction = (util - CURVE_UTIL[segment]) / 10.0
    return CURVE_WATTS[segment] + (CURVE_WATTS[segment + 1] - CURVE_WATTS[segment]) * fraction


def samples_from(utils, noise=0.0, seed=7):
    rng = random.Random(seed)
    return [{"util": u, "watts": curve(u) * (1.0 + noise * rng.gauss(0.0, 1.0))} for u in utils]


def rmse_vs_curve_pct(model, low=0.0, high=100.0):
    predict = compile_model(model)
    grid = [u for u in GRID if low <= u <= high]
    return 100.0 * math.sqrt(sum((predict(u) - curve(u)) ** 2 for u in grid) / len(grid)) / PEAK_W


def is_non_decreasing(model):
    predict = compile_model(model)
    values = [predict(u) for u in GRID]
    return all(b >= a - 1e-9 * max(1.0, abs(a)) for a, b in zip(values, values[1:], strict=False))


# --- shapes and exact recovery -----------------------------------------------------------------


def test_default_kind_is_the_piecewise_fit():
    assert DEFAULT_KIND == "piecewise_linear"
    assert fit_model(samples_from(range(0, 101, 5)))["kind"] == "piecewise_linear"


@pytest.mark.parametrize("kind", KINDS)
def test_result_shape_and_quality(kind):
    samples = samples_from([3.0, 12.5, 40.0, 77.0, 96.0])
    model = fit_model(samples, kind=kind)
    assert set(model) == {"kind", "params", "quality"}
    assert model["kind"] == kind
    assert set(model["quality"]) == {"rmse_w", "samples", "util_min", "util_max"}
    assert model["quality"]["samples"] == 5
    assert model["quality"]["util_min"] == 3.0
    assert model["quality"]["util_max"] == 96.0
    predict = compile_model(model)
    expected_rmse = math.sqrt(sum((s["watts"] - predict(s["util"])) ** 2 for s in samples) / len(samples))
    assert model["quality"]["rmse_w"] == pytest.approx(expected_rmse)


def test_peaks_params_are_exactly_the_upstream_names_and_recover_the_curve():
    k0, k1, k2 = 40.0, 25.0, 0.021
    samples = [{"util": float(u), "watts": k0 + k1 * math.exp(k2 * u)} for u in range(0, 101, 4)]
    model = fit_model(samples, kind="peaks")
    assert set(model["params"]) == {"k0", "k1", "k2"}
    assert model["params"]["k2"] == pytest.approx(k2, rel=1e-4)
    assert model["params"]["k1"] == pytest.approx(k1, rel=1e-3)
    assert model["params"]["k0"] == pytest.approx(k0, rel=1e-3)
    assert model["quality"]["rmse_w"] < 1e-3


def test_peaks_prediction_uses_the_upstream_formula():
    model = {"kind": "peaks", "params": {"k0": 10.0, "k1": 2.0, "k2": 0.03}}
    assert predict_power(model, 50) == pytest.approx(10.0 + 2.0 * math.exp(0.03 * 50))


def test_linear_recovers_a_line():
    samples = [{"util": float(u), "watts": 80.0 + 1.7 * u} for u in (0, 20, 55, 100)]
    params = fit_model(samples, kind="linear")["params"]
    assert params == pytest.approx({"idle_w": 80.0, "max_w": 250.0})


def test_piecewise_without_smoothing_recovers_a_curve_on_its_knots():
    model = fit_model(samples_from([u * 2.5 for u in range(41)]), knots=list(CURVE_UTIL), smoothing=0)
    assert model["params"]["knot_util"] == list(map(float, CURVE_UTIL))
    assert model["params"]["knot_watts"] == pytest.approx(list(CURVE_WATTS), abs=1e-6)


def test_piecewise_with_default_smoothing_stays_close_on_noise_free_data():
    model = fit_model(samples_from([u * 2.5 for u in range(41)]))
    assert rmse_vs_curve_pct(model) < 0.3


def test_fits_are_deterministic():
    rng = random.Random(3)
    samples = samples_from([rng.uniform(0, 100) for _sample in range(150)], noise=0.02)
    for kind in KINDS:
        assert fit_model(samples, kind=kind) == fit_model([dict(s) for s in samples], kind=kind)


# --- robustness --------------------------------------------------------------------------------


def test_few_samples_still_give_a_sane_monotone_model():
    model = fit_model(samples_from([0.0, 8.0, 35.0, 90.0], noise=0.02))
    assert is_non_decreasing(model)
    assert rmse_vs_curve_pct(model) < 6.0


@pytest.mark.parametrize("kind", KINDS)
def test_samples_crowded_at_low_utilisation(kind):
    rng = random.Random(11)
    model = fit_model(samples_from([15.0 * rng.random() ** 2 for _sample in range(300)], noise=0.02), kind=kind)
    assert model["quality"]["util_max"] < 15.0
    assert is_non_decreasing(model)
    predict = compile_model(model)
    assert all(math.isfinite(predict(u)) for u in GRID)
    if kind == "piecewise_linear":
        # Inside the covered range the default kind follows the steep idle-to-10 % rise.
        assert rmse_vs_curve_pct(model, 0.0, 12.0) < 1.0


def test_outliers_are_down_weighted():
    rng = random.Random(5)
    samples = samples_from([100.0 * rng.random() for _sample in range(400)], noise=0.02, seed=5)
    for sample in samples[::10]:  # 10 % of the samples read three times the true power
        sample["watts"] *= 3.0
    robust = fit_model(samples)
    plain = fit_model(samples, robust=False)
    assert rmse_vs_curve_pct(robust) < 1.5
    assert rmse_vs_curve_pct(plain) > 2 * rmse_vs_curve_pct(robust)


def test_noise_is_averaged_out_by_the_default_kind_better_than_by_peaks():
    rng = random.Random(9)
    samples = samples_from([100.0 * rng.betavariate(1.2, 2.5) for _sample in range(500)], noise=0.02, seed=9)
    default_error = rmse_vs_curve_pct(fit_model(samples))
    peaks_error = rmse_vs_curve_pct(fit_model(samples, kind="peaks"))
    assert default_error < 1.0
    assert default_error < peaks_error / 3


# --- monotonicity (property-based) -------------------------------------------------------------

sample_lists = st.lists(
    st.fixed_dictionaries(
        {
            "util": st.floats(min_value=0, max_value=100, allow_nan=False),
            "watts": st.floats(min_value=0, max_value=2000, allow_nan=False),
        }
    ),
    min_size=3,
    max_size=40,
).filter(lambda samples: len({s["util"] for s in samples}) >= 3)


@settings(max_examples=40, deadline=None)
@given(sample_lists, st.sampled_from(KINDS))
def test_every_fitted_model_is_non_decreasing(samples, kind):
    model = fit_model(samples, kind=kind)
    assert is_non_decreasing(model)
    assert math.isfinite(model["quality"]["rmse_w"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=3, max_size=40, unique=True),
    st.lists(st.floats(min_value=0, max_value=50, allow_nan=False), min_size=40, max_size=40),
    st.sampled_from(KINDS),
)
def test_monotone_samples_give_models_that_stay_within_their_range(utils, rises, kind):
    # Monotone data: watts rise with utilisation; the model must be monotone and must not
    # predict outside the measured power range within the covered utilisation range.
    utils = sorted(utils)
    watts, level = [], 50.0
    for rise in rises[: len(utils)]:
        level += rise
        watts.append(level)
    model = fit_model([{"util": u, "watts": w} for u, w in zip(utils, watts, strict=False)], kind=kind)
    assert is_non_decreasing(model)
    predict = compile_model(model)
    slack = 1e-6 * watts[-1] + 1e-6
    for u in (utils[0], utils[-1]):
        assert watts[0] - (watts[-1] - watts[0]) - slack <= predict(u) <= watts[-1] + (watts[-1] - watts[0]) + slack


# --- errors name the node and the field --------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "field"),
    [
        ([{"util": -1, "watts": 100}, {"util": 50, "watts": 120}], "samples[0].util"),
        ([{"util": 10, "watts": 100}, {"util": 100.5, "watts": 120}], "samples[1].util"),
        ([{"util": math.nan, "watts": 100}], "samples[0].util"),
        ([{"util": "10", "watts": 100}], "samples[0].util"),
        ([{"util": True, "watts": 100}], "samples[0].util"),
        ([{"watts": 100}], "samples[0].util"),
        ([{"util": 10, "watts": math.nan}], "samples[0].watts"),
        ([{"util": 10, "watts": math.inf}], "samples[0].watts"),
        ([{"util": 10, "watts": -3}], "samples[0].watts"),
        ([{"util": 10}], "samples[0].watts"),
        ([[10, 100]], "samples[0]"),
        ([], "samples"),
        ("10,100", "samples"),
        (None, "samples"),
        ([{"util": 30, "watts": 100}, {"util": 30, "watts": 101}], "samples"),
    ],
)
def test_bad_samples_name_node_and_field(samples, field):
    with pytest.raises(PowerModelError) as err:
        fit_model(samples, node="worker-7")
    assert "node 'worker-7'" in str(err.value)
    assert f": {field}: " in str(err.value)


GOOD = [{"util": 0, "watts": 50}, {"util": 40, "watts": 90}, {"util": 100, "watts": 160}]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "exponential"}, "kind"),
        ({"kind": "peaks", "knots": [0, 100]}, "knots"),
        ({"kind": "linear", "smoothing": 0.1}, "smoothing"),
        ({"degree": 3}, "degree"),
        ({"knots": [0, 50, 50, 100]}, "knots"),
        ({"knots": [5, 50, 100]}, "knots"),
        ({"knots": [0, 50, 90]}, "knots"),
        ({"knots": [0, math.nan, 100]}, "knots"),
        ({"knots": "0,100"}, "knots"),
        ({"smoothing": -1}, "smoothing"),
        ({"smoothing": math.inf}, "smoothing"),
        ({"robust": "yes"}, "robust"),
    ],
)
def test_bad_options_name_node_and_field(kwargs, field):
    with pytest.raises(PowerModelError) as err:
        fit_model(GOOD, node="worker-7", **kwargs)
    assert "node 'worker-7'" in str(err.value)
    assert f": {field}: " in str(err.value)


def test_peaks_needs_three_distinct_utilisations():
    with pytest.raises(PowerModelError, match="3 or more distinct"):
        fit_model(GOOD[:2], kind="peaks")
    assert fit_model(GOOD[:2], kind="linear")["params"] == pytest.approx({"idle_w": 50.0, "max_w": 150.0})


@pytest.mark.parametrize(
    ("model", "field"),
    [
        (None, "model"),
        ({"kind": "cubic", "params": {}}, "model.kind"),
        ({"kind": "peaks", "params": None}, "model.params"),
        ({"kind": "peaks", "params": {"k0": 1, "k1": 1}}, "model.params.k2"),
        ({"kind": "peaks", "params": {"k0": 1, "k1": math.nan, "k2": 0.1}}, "model.params.k1"),
        ({"kind": "linear", "params": {"idle_w": "50", "max_w": 100}}, "model.params.idle_w"),
        ({"kind": "piecewise_linear", "params": {"knot_util": [0, 100], "knot_watts": [1]}}, "model.params.knot_watts"),
        (
            {"kind": "piecewise_linear", "params": {"knot_util": [0, 100], "knot_watts": [1, math.inf]}},
            "model.params.knot_watts",
        ),
        (
            {"kind": "piecewise_linear", "params": {"knot_util": [0, 60, 40, 100], "knot_watts": [1, 2, 3, 4]}},
            "model.params.knot_util",
        ),
        (
            {"kind": "piecewise_linear", "params": {"knot_util": [0, True, 100], "knot_watts": [1, 2, 3]}},
            "model.params.knot_util",
        ),
    ],
)
def test_bad_models_name_node_and_field(model, field):
    with pytest.raises(PowerModelError) as err:
        compile_model(model, node="worker-7")
    assert "node 'worker-7'" in str(err.value)
    assert f": {field}: " in str(err.value)


@pytest.mark.parametrize("util", [-0.1, 100.1, math.nan, None, "50"])
def test_predict_power_rejects_bad_utilisation(util):
    model = fit_model(GOOD, kind="linear")
    with pytest.raises(PowerModelError, match=r"node 'w1': util: "):
        predict_power(model, util, node="w1")


def test_predict_power_interpolates_piecewise_models():
    model = {"kind": "piecewise_linear", "params": {"knot_util": [0, 10, 100], "knot_watts": [50, 100, 190]}}
    assert predict_power(model, 0) == 50
    assert predict_power(model, 5) == pytest.approx(75)
    assert predict_power(model, 10) == pytest.approx(100)
    assert predict_power(model, 55) == pytest.approx(145)
    assert predict_power(model, 100) == pytest.approx(190)
