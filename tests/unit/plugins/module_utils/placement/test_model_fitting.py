"""model_fitting: the numerics of the power models checked function by function against
hand-computed oracles: the small linear algebra (solve against hand-solved systems,
nonnegative_quadratic_min against a brute-force search over the active sets in exact arithmetic),
the weighted fits of each kind against least-squares solutions worked out by hand, the predictors,
and the Huber reweighting of robust_fit (with the weighted mean as the fit).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement import model_fitting as fitting

# --- fit_linear_weighted -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("utils", "watts", "weights", "idle_w", "max_w"),
    [
        # two points one percent apart (weighted variance 0.5): slope 2 W per %, by hand
        ([0.0, 1.0], [10.0, 12.0], [1.0, 1.0], 10.0, 210.0),
        # weights 3:1 at 20 % and 60 %, a line 50 + 1.5 u through both: the fit is that line
        ([20.0, 60.0], [80.0, 140.0], [3.0, 1.0], 50.0, 200.0),
        # falling power: the slope is clamped at 0, the model is the weighted mean (100*1 + 50*3) / 4
        ([0.0, 100.0], [100.0, 50.0], [1.0, 3.0], 62.5, 62.5),
        # one utilisation only (no variance): flat at the weighted mean (90*1 + 110*1) / 2
        ([50.0, 50.0], [90.0, 110.0], [1.0, 1.0], 100.0, 100.0),
    ],
)
def test_fit_linear_weighted_against_hand_computed_lines(utils, watts, weights, idle_w, max_w):
    params, predict = fitting.fit_linear_weighted(utils, watts, weights)
    assert params == pytest.approx({"idle_w": idle_w, "max_w": max_w}, abs=1e-9)
    assert predict(0.0) == pytest.approx(idle_w, abs=1e-9)
    assert predict(100.0) == pytest.approx(max_w, abs=1e-9)


# --- exp_basis -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("k2", "u"), [(0.02, 50.0), (-0.03, 10.0), (0.5, 2.0)])
def test_exp_basis_is_expm1_of_k2_u_over_k2(k2, u):
    # (e^(k2 u) - 1) / k2 written out, against the well-conditioned expm1 of the code
    assert fitting.exp_basis(k2, u) == pytest.approx((math.exp(k2 * u) - 1.0) / k2, rel=1e-12)


# --- solve ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("matrix", "rhs", "expected"),
    [
        # 2x + y = 3, x + 3y = 5
        ([[2.0, 1.0], [1.0, 3.0]], [3.0, 5.0], [0.8, 1.4]),
        # a zero on the diagonal: needs a row swap
        ([[0.0, 1.0], [1.0, 0.0]], [2.0, 3.0], [3.0, 2.0]),
        # the largest pivot is in the first row (a pivot from the last row would be 0)
        ([[1.0, 1.0], [0.0, 1.0]], [3.0, 1.0], [2.0, 1.0]),
        # x = 6 from the last row, then y + z = -8 and 3y + 2z = -1
        ([[2.0, 1.0, 1.0], [1.0, 3.0, 2.0], [1.0, 0.0, 0.0]], [4.0, 5.0, 6.0], [6.0, 15.0, -23.0]),
        # a pivot of exactly 1e-12 is still used
        ([[1e-12]], [2e-12], [2.0]),
    ],
)
def test_solve_against_hand_solved_systems(matrix, rhs, expected):
    copies = [list(row) for row in matrix], list(rhs)
    assert fitting.solve(matrix, rhs) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert (matrix, rhs) == copies  # the inputs are left alone


def test_solve_pivots_on_the_largest_entry():
    # Without partial pivoting the 1e-20 pivot wipes out x (it comes out as 0); the answer is 1, 1.
    assert fitting.solve([[1e-20, 1.0], [1.0, 1.0]], [1.0, 2.0]) == pytest.approx([1.0, 1.0], rel=1e-12)


@pytest.mark.parametrize(
    ("matrix", "rhs"),
    [([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]), ([[1e-13]], [1.0]), ([[0.0, 0.0], [0.0, 1.0]], [0.0, 1.0])],
)
def test_solve_returns_none_for_singular_systems(matrix, rhs):
    assert fitting.solve(matrix, rhs) is None


# --- nonnegative_quadratic_min -------------------------------------------------------------------


def _exact_solve(matrix, rhs):
    """Gauss-Jordan on Fractions (exact); the matrices here are positive definite."""
    size = len(rhs)
    rows = [[Fraction(v) for v in matrix[i]] + [Fraction(rhs[i])] for i in range(size)]
    for col in range(size):
        pivot = next(r for r in range(col, size) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        rows[col] = [v / rows[col][col] for v in rows[col]]
        for r in range(size):
            if r != col and rows[r][col] != 0:
                rows[r] = [a - rows[r][col] * b for a, b in zip(rows[r], rows[col], strict=False)]
    return [row[size] for row in rows]


def _brute_force_min(gram, linear, free):
    """Minimum of 0.5 x'Gx - h'x with x_j >= 0 outside ``free``: try every set of bound variables,
    keep the feasible stationary points, take the lowest objective (exact arithmetic)."""
    size = len(linear)
    bounded = [j for j in range(size) if j not in free]
    best = None
    for mask in range(2 ** len(bounded)):
        at_zero = {bounded[k] for k in range(len(bounded)) if mask >> k & 1}
        keep = [j for j in range(size) if j not in at_zero]
        x = [Fraction(0)] * size
        if keep:
            for j, value in zip(
                keep, _exact_solve([[gram[i][j] for j in keep] for i in keep], [linear[i] for i in keep]), strict=False
            ):
                x[j] = value
        if any(x[j] < 0 for j in bounded):
            continue
        objective = sum(Fraction(gram[i][j]) * x[i] * x[j] for i in range(size) for j in range(size)) / 2 - sum(
            Fraction(linear[i]) * x[i] for i in range(size)
        )
        if best is None or objective < best[0]:
            best = (objective, x)
    return [float(v) for v in best[1]]


@pytest.mark.parametrize("seed", range(60))
def test_nonnegative_quadratic_min_matches_brute_force(seed):
    rng = random.Random(seed)
    size = 2 + seed % 4
    rows = [[rng.uniform(-1.0, 1.0) for _j in range(size)] for _i in range(size)]
    gram = [
        [sum(rows[i][k] * rows[j][k] for k in range(size)) + (0.05 if i == j else 0.0) for j in range(size)]
        for i in range(size)
    ]
    linear = [rng.uniform(-2.0, 2.0) for _i in range(size)]
    free = [set(), {0}, {size - 1}][seed % 3]
    result = fitting.nonnegative_quadratic_min(gram, linear, free)
    assert result == pytest.approx(_brute_force_min(gram, linear, free), rel=1e-7, abs=1e-9)
    assert all(result[j] >= 0.0 for j in range(size) if j not in free)


def _cumulative_problem(seed):
    """A problem shaped like the piecewise fit's: design rows of leading ones (cumulative rises)."""
    rng = random.Random(seed)
    dense = rng.random() < 0.5
    size = rng.randint(2, 8)
    if dense:
        rows = [[rng.uniform(-1.0, 1.0) for _j in range(size)] for _i in range(size)]
    else:
        rows = []
        for _row in range(size + rng.randint(0, 6)):
            cut = rng.randint(0, size - 1)
            rows.append([1.0 if j <= cut else 0.0 for j in range(size)])
            rows[-1][min(cut + 1, size - 1)] += rng.random()
        rows = [list(column) for column in zip(*rows, strict=True)]
    gram = [
        [sum(a * b for a, b in zip(rows[i], rows[j], strict=True)) + (0.01 if i == j else 0.0) for j in range(size)]
        for i in range(size)
    ]
    linear = [rng.uniform(-3.0, 3.0) for _i in range(size)]
    return gram, linear, set(rng.sample(range(size), rng.randint(0, 1)))


# seeds whose active-set search drops a variable part-way (a step of 0 < alpha < 1) and drops
# variables in two steps in a row
@pytest.mark.parametrize("seed", [17, 37, 363])
def test_nonnegative_quadratic_min_on_piecewise_shaped_problems(seed):
    gram, linear, free = _cumulative_problem(seed)
    result = fitting.nonnegative_quadratic_min(gram, linear, free)
    assert result == pytest.approx(_brute_force_min(gram, linear, free), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize(
    ("gram", "linear", "free", "expected"),
    [
        # identity: the optimum is h with its negative bounded entries set to 0
        ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.5, 0.25, -1.0], set(), [0.5, 0.25, 0.0]),
        ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.5, 0.25, -1.0], {2}, [0.5, 0.25, -1.0]),
        # G = [[2, 1], [1, 2]], h = (1, -2): unconstrained (4/3, -5/3); with x1 = 0, x0 = 1/2
        ([[2.0, 1.0], [1.0, 2.0]], [1.0, -2.0], set(), [0.5, 0.0]),
        ([[2.0, 1.0], [1.0, 2.0]], [1.0, -2.0], {0, 1}, [4.0 / 3.0, -5.0 / 3.0]),
        # the free variable may be negative: x0 = -3 alone, x1 held at 0
        ([[1.0, 0.0], [0.0, 1.0]], [-3.0, -1.0], {0}, [-3.0, 0.0]),
        ([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0], set(), [0.0, 0.0]),
    ],
)
def test_nonnegative_quadratic_min_hand_solved(gram, linear, free, expected):
    assert fitting.nonnegative_quadratic_min(gram, linear, free) == pytest.approx(expected, rel=1e-12, abs=1e-12)


# --- peaks_for_exponent --------------------------------------------------------------------------


def _g(k2, u):
    return (math.exp(k2 * u) - 1.0) / k2


@pytest.mark.parametrize("k2", [0.02, -0.02])
def test_peaks_for_exponent_fits_two_points_exactly(k2):
    watts = [10.0, 10.0 + 3.0 * _g(k2, 50.0)]
    sse, offset, slope = fitting.peaks_for_exponent(k2, [0.0, 50.0], watts, [1.0, 1.0])
    assert (sse, offset, slope) == pytest.approx((0.0, 10.0, 3.0), abs=1e-9)


def test_peaks_for_exponent_small_weights_and_close_utilisations():
    # weights 0.5 one percent apart: the normal equations' determinant is about 0.25, still a fit
    watts = [10.0, 10.0 + 3.0 * _g(0.02, 1.0)]
    sse, offset, slope = fitting.peaks_for_exponent(0.02, [0.0, 1.0], watts, [0.5, 0.5])
    assert (sse, offset, slope) == pytest.approx((0.0, 10.0, 3.0), abs=1e-9)


def test_peaks_for_exponent_weights_the_samples():
    # at u = 0 the weighted mean of 10 (weight 2) and 16 (weight 1) is 12; the curve goes through
    # (0, 12) and (50, 40), leaving 2 * 2^2 + 1 * 4^2 = 24
    sse, offset, slope = fitting.peaks_for_exponent(0.02, [0.0, 0.0, 50.0], [10.0, 16.0, 40.0], [2.0, 1.0, 1.0])
    assert offset == pytest.approx(12.0, rel=1e-12)
    assert slope == pytest.approx(28.0 / _g(0.02, 50.0), rel=1e-12)
    assert sse == pytest.approx(24.0, rel=1e-9)


def test_peaks_for_exponent_keeps_the_slope_non_negative():
    # falling power: slope 0, the weighted mean (40 + 3 * 10) / 4 = 17.5, sse 22.5^2 + 3 * 7.5^2
    assert fitting.peaks_for_exponent(0.02, [0.0, 50.0], [40.0, 10.0], [1.0, 3.0]) == pytest.approx((675.0, 17.5, 0.0))


def test_peaks_for_exponent_one_utilisation_is_flat():
    assert fitting.peaks_for_exponent(0.02, [30.0, 30.0], [10.0, 20.0], [1.0, 1.0]) == (50.0, 15.0, 0.0)


# --- fit_peaks_weighted --------------------------------------------------------------------------


def _peaks_samples(k0, k1, k2):
    utils = [float(u) for u in range(0, 101, 5)]
    return utils, [k0 + k1 * math.exp(k2 * u) for u in utils], [1.0] * len(utils)


@pytest.mark.parametrize(
    ("k0", "k1", "k2"), [(40.0, 25.0, 0.021), (300.0, -200.0, -0.015), (50.0, 1.0, 0.0995), (300.0, -250.0, -0.1)]
)
def test_fit_peaks_weighted_recovers_the_exponent(k0, k1, k2):
    params, predict = fitting.fit_peaks_weighted(*_peaks_samples(k0, k1, k2))
    assert params["k2"] == pytest.approx(k2, abs=1e-6)
    assert params["k1"] == pytest.approx(k1, rel=1e-3)
    assert params["k0"] == pytest.approx(k0, rel=1e-3, abs=1e-3)
    assert predict(60.0) == pytest.approx(k0 + k1 * math.exp(k2 * 60.0), rel=1e-6)


def test_fit_peaks_weighted_refines_around_the_previous_exponent():
    samples = _peaks_samples(40.0, 25.0, 0.021)
    params, _predict = fitting.fit_peaks_weighted(*samples, previous={"k2": 0.0215})
    assert params["k2"] == pytest.approx(0.021, abs=1e-6)
    # Only one grid cell (0.0025) either side of the previous exponent is searched: the best there
    # is the edge nearest to the true exponent.
    params, _predict = fitting.fit_peaks_weighted(*samples, previous={"k2": 0.05})
    assert params["k2"] == pytest.approx(0.0475, abs=1e-6)
    params, _predict = fitting.fit_peaks_weighted(*samples, previous={"k2": -0.01})
    assert params["k2"] == pytest.approx(-0.0075, abs=1e-6)
    params, _predict = fitting.fit_peaks_weighted(*samples, previous={"k2": -0.001})
    assert params["k2"] == pytest.approx(-1e-6, abs=1e-8)  # kept below zero
    # a positive previous exponent keeps k2 above 1e-6 (the optimum here is the concave -0.015)
    params, _predict = fitting.fit_peaks_weighted(*_peaks_samples(300.0, -200.0, -0.015), previous={"k2": 0.001})
    assert params["k2"] == pytest.approx(1e-6, abs=1e-8)


def test_fit_peaks_weighted_zero_power_is_deterministic():
    # Every exponent fits zero power exactly (k1 = 0, squared error exactly 0); ties go to the
    # lowest exponent of the grid (-0.09875) and, within its cell, to the lower edge: -0.10125.
    params, predict = fitting.fit_peaks_weighted([0.0, 50.0, 100.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert (params["k0"], params["k1"]) == (0.0, 0.0)
    assert params["k2"] == pytest.approx(-0.10125, abs=1e-8)
    assert predict(30.0) == 0.0


# --- fit_piecewise_weighted ----------------------------------------------------------------------


def test_fit_piecewise_weighted_goes_through_weighted_means_without_smoothing():
    # 15 (weight 2) and 21 (weight 1) at 25 % average 17: the line through (0, 10), (25, 17) and
    # (75, 40) on knots 0, 50, 100 has the values 10, 24, 56
    params, predict = fitting.fit_piecewise_weighted(
        [0.0, 25.0, 25.0, 75.0], [10.0, 15.0, 21.0, 40.0], [1.0, 2.0, 1.0, 1.0], knots=(0.0, 50.0, 100.0), smoothing=0
    )
    assert params["knot_util"] == [0.0, 50.0, 100.0]
    assert params["knot_util"].__class__ is list
    assert params["knot_watts"] == pytest.approx([10.0, 24.0, 56.0], abs=1e-9)
    assert predict(75.0) == pytest.approx(40.0, abs=1e-9)


@pytest.mark.parametrize("weight", [1.0, 2.0])
def test_fit_piecewise_weighted_smoothing_by_hand(weight):
    # Samples on the knots 0, 50, 100 at 70, 70, 80. The fit minimises
    # sum w (y - P)^2 + smoothing * sum(w) * (10 * slope change per %)^2; the slope change is
    # (P0 - 2 P50 + P100) / 50, so with smoothing 25/3 both terms have the same weight and
    # P = y - v (v.y) / (1 + v.v) with v = (1, -2, 1): (480, 510, 550) / 7, for any common weight.
    params, _predict = fitting.fit_piecewise_weighted(
        [0.0, 50.0, 100.0], [70.0, 70.0, 80.0], [weight] * 3, knots=(0.0, 50.0, 100.0), smoothing=25.0 / 3.0
    )
    assert params["knot_watts"] == pytest.approx([480.0 / 7.0, 510.0 / 7.0, 550.0 / 7.0], rel=1e-12)


def test_fit_piecewise_weighted_never_falls():
    # falling samples: the best non-decreasing fit is flat at their mean
    params, _predict = fitting.fit_piecewise_weighted(
        [0.0, 50.0, 100.0], [10.0, 0.0, 0.0], [1.0] * 3, knots=(0.0, 50.0, 100.0), smoothing=0
    )
    assert params["knot_watts"] == pytest.approx([10.0 / 3.0] * 3, rel=1e-12)


def test_fit_piecewise_weighted_default_knots_follow_a_line():
    utils = [float(u) for u in range(0, 101, 5)]
    params, _predict = fitting.fit_piecewise_weighted(utils, [50.0 + 2.0 * u for u in utils], [1.0] * len(utils))
    assert params["knot_util"] == [0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    assert params["knot_watts"] == pytest.approx([50.0 + 2.0 * k for k in params["knot_util"]], abs=1e-6)


# --- predictors ------------------------------------------------------------------------------------


def test_linear_predictor():
    predict = fitting.linear_predictor({"idle_w": 50.0, "max_w": 250.0})
    assert [predict(u) for u in (0.0, 30.0, 100.0)] == pytest.approx([50.0, 110.0, 250.0], rel=1e-15)


def test_peaks_predictor():
    predict = fitting.peaks_predictor({"k0": 10.0, "k1": 2.0, "k2": 0.03})
    # e^1.5 = 4.4816890703380645
    assert predict(50.0) == pytest.approx(10.0 + 2.0 * 4.4816890703380645, rel=1e-15)
    assert predict(0.0) == 12.0


@pytest.mark.parametrize(
    ("util", "watts"),
    [(0.0, 50.0), (5.0, 75.0), (10.0, 100.0), (55.0, 145.0), (100.0, 190.0), (120.0, 210.0), (-10.0, 0.0)],
)
def test_piecewise_predictor_interpolates_and_continues_the_end_slopes(util, watts):
    predict = fitting.piecewise_predictor({"knot_util": [0.0, 10.0, 100.0], "knot_watts": [50.0, 100.0, 190.0]})
    assert predict(util) == pytest.approx(watts, rel=1e-15)


# --- median and robust_fit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "median"), [([3.0, 1.0, 2.0], 2.0), ([4.0, 1.0, 3.0, 2.0], 2.5), ([5.0], 5.0), ([8.0, 2.0], 5.0)]
)
def test_median(values, median):
    assert fitting.median(values) == median


class WeightedMean:
    """The simplest weighted fit (a constant: the weighted mean), keeping the weights of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, _utils, watts, weights, previous=None, **options):
        self.calls.append({"weights": list(weights), "previous": previous, "options": options})
        level = sum(w * y for w, y in zip(weights, watts, strict=False)) / sum(weights)
        return {"level": level}, lambda _u: level


def _huber_weights(watts, level):
    residuals = [y - level for y in watts]
    ordered = sorted(abs(y) for y in watts)
    median_power = 0.5 * (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2])
    ordered = sorted(abs(r) for r in residuals)
    mad = 0.5 * (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2])
    limit = 1.345 * max(1.4826 * mad, 0.005 * median_power)
    return [1.0 if abs(r) <= limit else limit / abs(r) for r in residuals]


def test_robust_fit_stops_when_no_weight_changes():
    fit = WeightedMean()
    params, predict = fitting.robust_fit(fit, [0.0, 1.0, 2.0], [10.0, 11.0, 12.0], {"knots": (0.0, 100.0)})
    assert params == {"level": 11.0}
    assert predict(50.0) == 11.0
    assert fit.calls == [
        {"weights": [1.0, 1.0, 1.0], "previous": None, "options": {"knots": (0.0, 100.0)}},
        {"weights": [1.0, 1.0, 1.0], "previous": {"level": 11.0}, "options": {"knots": (0.0, 100.0)}},
    ]


def test_robust_fit_down_weights_an_outlier_by_huber():
    fit = WeightedMean()
    watts = [10.0, 10.0, 10.0, 10.0, 50.0]
    params, _predict = fitting.robust_fit(fit, [0.0, 1.0, 2.0, 3.0, 4.0], watts, {})
    # first reweighting, by hand: mean 18, residuals -8 (x4) and 32, MAD 8, limit 1.345 * 1.4826 * 8
    assert fit.calls[1]["weights"] == pytest.approx([1.0] * 4 + [1.345 * 1.4826 * 8 / 32], rel=1e-12)
    levels = [None] + [
        sum(w * y for w, y in zip(c["weights"], watts, strict=False)) / sum(c["weights"]) for c in fit.calls
    ]
    for step, call in enumerate(fit.calls[1:], start=1):
        assert call["previous"] == {"level": levels[step]}
        assert call["weights"] == pytest.approx(_huber_weights(watts, levels[step]), rel=1e-12)
    changes = [
        max(abs(a - b) for a, b in zip(c["weights"], p["weights"], strict=False))
        for p, c in zip(fit.calls, fit.calls[1:], strict=False)
    ]
    # reweighted until the weights move by less than 1e-3, at most 10 times
    assert all(change >= 1e-3 for change in changes[:-1])
    assert changes[-1] < 1e-3 or len(changes) == 10
    assert 2 < len(fit.calls) <= 11
    assert params == {"level": levels[-1]}
    assert 10.0 < params["level"] < 14.0


def test_robust_fit_never_judges_residuals_below_half_a_percent_of_the_power():
    # MAD 0.08 would put 0.32 W beyond the Huber limit; the floor (0.5 % of 100 W) keeps all weights 1
    fit = WeightedMean()
    fitting.robust_fit(fit, [0.0, 1.0, 2.0, 3.0, 4.0], [100.0, 100.0, 100.0, 100.0, 100.4], {})
    assert [call["weights"] for call in fit.calls] == [[1.0] * 5, [1.0] * 5]


def test_robust_fit_all_zero_power_is_not_reweighted():
    fit = WeightedMean()
    params, _predict = fitting.robust_fit(fit, [0.0, 50.0, 100.0], [0.0, 0.0, 0.0], {})
    assert params == {"level": 0.0}
    assert len(fit.calls) == 1


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - fit_linear_weighted 33, 34: cov with `u + mean_u` or `y + mean_y` instead of the differences:
#   the extra terms are 2 mean_u * sum(w (y - mean_y)) and mean_y * sum(w (u - mean_u)), both zero,
#   so the covariance is the same up to rounding.
# - solve 32 (eliminate from column 0 instead of col): the pivot row's entries left of col are
#   already 0, so the extra updates subtract 0. 41 (solution starts at 1.0) and 60 (back substitution
#   sums over all columns): the entries below the diagonal are 0 and solution[c] for c >= r is
#   still its start value when row r is solved, or overwritten before it is read.
# - fit_piecewise_weighted 70, 72, 77, 79 (`=` instead of `+=` for gram[i][edge], gram[edge][i],
#   linear[edge], gram[edge][edge]): segment k is the only one that touches those cells before
#   the later segments add to them (earlier segments only reach indices below their own edge), so
#   the cells are still 0 when assigned. 93 (penalty starts as [1.0] * size): only the entries j and
#   j + 1 of the penalty vector are read, and both are assigned.
# - nonnegative_quadratic_min: the problems are positive definite, so the optimum is unique and an
#   active-set search that still ends at a point satisfying the optimality conditions returns it.
#   20 (x starts as None): the first inner step never blocks (passive = free) and assigns x.
#   24, 27 (4 * size instead of 3 * size steps): the loops end earlier by `break`. 33, 58
#   (`< 0.0`, `< 1e-12`): a variable exactly at the bound is kept or dropped at 0, same point.
#   63 (non-passive x set to 1.0 after a blocking step): x is replaced by the trial before it is
#   used for the gradient. 72, 74, 75, 77, 78 (the candidate test: `or`, `>=`, 1e-9 / (...),
#   1 - |h|, 2 + |h|): they add variables whose gradient is 0 or within 1e-9 of it, or already
#   passive; the next trial drops them again at alpha = 0 and the point does not move.
#   84, 86, 88 (another variable added first: the largest index or the other tie-break): the
#   search still ends at the unique optimum. 41, 44, 45 (the `else 0.0` branch of alpha): it is
#   taken only for a variable added at 0 whose trial is exactly 0.0; no problem produced that
#   (60 random and 3 piecewise-shaped ones in the tests, 20,000 random ones searched).
# - fit_peaks_weighted 37 (`centre >= 0.0`): the centre is a grid point ((i + 0.5) * step, never 0)
#   or a previous exponent, which is at least 1e-6 away from 0.
# - fit_peaks_weighted 77, 78, 79 (the last pick between the golden-section points a and b):
#   after 30 steps a and b are within 0.618**30 of a grid cell (about 1e-9 per percent) of each
#   other, the resolution the search promises; the fitted curves agree to that precision.
# - robust_fit 42 (`abs(r) < limit`): at abs(r) == limit the weight limit / abs(r) is 1.0 too.
#   64 (`change <= 1e-3`): differs only when the largest weight change is exactly 0.001.
