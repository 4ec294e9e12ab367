# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The numerics of the power models: weighted least squares for each kind, their predictors, and the
Huber reweighting around them (power_model.py validates, publishes and chooses among them).

Pure Python (no Ansible, no numpy), Python 3.9 compatible, deterministic. Each ``fit_*_weighted``
returns ``(params, predict)`` for the given sample weights; every fitted curve is non-decreasing
in utilisation.
"""

from __future__ import annotations

import bisect
import math

# Knots: dense where real curves bend (idle to 10 %), every 10 % above. Chosen by
# benchmarks/model_fit.py; see docs/filters.md.
DEFAULT_KNOTS = (0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)
DEFAULT_SMOOTHING = 0.001

# Huber tuning constant for 95 % efficiency under Gaussian noise; MAD-to-sigma factor.
_HUBER_C = 1.345
_MAD_TO_SIGMA = 1.4826
_IRLS_MAX_ITERATIONS = 10
_IRLS_TOLERANCE = 1e-3
# Residuals are never judged against a noise level below this fraction of typical power.
_MIN_NOISE_FRACTION = 0.005

# Search range for the exponent of the peaks form, in 1/percent: exp(0.1 * 100) is a 22,000-fold
# rise, far beyond any server.
_PEAKS_K2_LIMIT = 0.1
_PEAKS_K2_GRID_STEP = 0.0025
# |k2| stays above this so that k1 = slope / k2 is finite; closer to 0 the form is a straight line.
_PEAKS_K2_MIN_ABS = 1e-6
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
# 30 golden steps shrink a grid cell by 0.618**30, about 5e-7: k2 to 1e-9 per percent.
_PEAKS_GOLDEN_STEPS = 30


# --- small dense linear algebra (matrices of at most a dozen rows) ---------------------------


def solve(matrix, rhs):
    """Solve matrix @ x = rhs by Gaussian elimination with partial pivoting; None if singular."""
    size = len(rhs)
    rows = [list(matrix[i]) + [rhs[i]] for i in range(size)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        if abs(rows[pivot][col]) < 1e-12:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(col + 1, size):
            factor = rows[r][col] / rows[col][col]
            if factor:
                for c in range(col, size + 1):
                    rows[r][c] -= factor * rows[col][c]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        total = rows[r][size] - sum(rows[r][c] * solution[c] for c in range(r + 1, size))
        solution[r] = total / rows[r][r]
    return solution


def nonnegative_quadratic_min(gram, linear, free):
    """Minimise 0.5 x'Gx - h'x subject to x_j >= 0 for j not in ``free`` (Lawson-Hanson active set).

    Exact for the small, positive definite systems of the piecewise fit; the active set method
    terminates in finitely many steps and visits sets in a fixed order, so the result is
    deterministic.
    """
    size = len(linear)
    passive = set(free)

    def solve_on(indices):
        order = sorted(indices)
        sub = solve([[gram[i][j] for j in order] for i in order], [linear[i] for i in order])
        full = [0.0] * size
        if sub is not None:
            for i, value in zip(order, sub):
                full[i] = value
        return full

    x = solve_on(passive)
    for _outer_step in range(3 * size):
        # Inner loop: step towards the unconstrained optimum on the passive set, dropping any
        # constrained variable that would turn negative.
        for _inner_step in range(3 * size):
            trial = solve_on(passive)
            blocked = [j for j in passive if j not in free and trial[j] <= 0.0]
            if not blocked:
                x = trial
                break
            # A variable just freed at 0 whose trial is not positive (rounding) blocks at once.
            alpha = min(x[j] / (x[j] - trial[j]) if x[j] > trial[j] else 0.0 for j in blocked)
            x = [xi + alpha * (ti - xi) for xi, ti in zip(x, trial)]
            passive -= {j for j in passive if j not in free and x[j] <= 1e-12}
            for j in range(size):
                if j not in passive:
                    x[j] = 0.0
        gradient = [linear[i] - sum(gram[i][j] * x[j] for j in range(size)) for i in range(size)]
        candidates = [j for j in range(size) if j not in passive and gradient[j] > 1e-9 * (1.0 + abs(linear[j]))]
        if not candidates:
            break
        passive.add(max(candidates, key=lambda j: (gradient[j], -j)))
    return x


# --- per-kind weighted least squares ----------------------------------------------------------
# Each returns (params, predict) for the given sample weights.


def fit_linear_weighted(utils, watts, weights, **_options):
    total = sum(weights)
    mean_u = sum(w * u for w, u in zip(weights, utils)) / total
    mean_y = sum(w * y for w, y in zip(weights, watts)) / total
    var_u = sum(w * (u - mean_u) ** 2 for w, u in zip(weights, utils))
    cov = sum(w * (u - mean_u) * (y - mean_y) for w, u, y in zip(weights, utils, watts))
    slope = max(0.0, cov / var_u) if var_u > 0.0 else 0.0
    idle = mean_y - slope * mean_u
    params = {"idle_w": idle, "max_w": idle + 100.0 * slope}
    return params, linear_predictor(params)


def exp_basis(k2, u):
    # (exp(k2 u) - 1) / k2: increasing in u for either sign of k2, and well scaled near k2 = 0.
    return math.expm1(k2 * u) / k2


def peaks_for_exponent(k2, utils, watts, weights):
    """Best (k0 + k1 exp(k2 u)) for fixed k2 with k1*k2 >= 0 (non-decreasing); returns (sse, c, b)."""
    basis = [exp_basis(k2, u) for u in utils]
    sw = sum(weights)
    sg = sum(w * g for w, g in zip(weights, basis))
    sy = sum(w * y for w, y in zip(weights, watts))
    sgg = sum(w * g * g for w, g in zip(weights, basis))
    sgy = sum(w * g * y for w, g, y in zip(weights, basis, watts))
    denominator = sw * sgg - sg * sg
    slope = (sw * sgy - sg * sy) / denominator if denominator > 0.0 else 0.0
    slope = max(0.0, slope)
    offset = (sy - slope * sg) / sw
    sse = sum(w * (y - offset - slope * g) ** 2 for w, y, g in zip(weights, watts, basis))
    return sse, offset, slope


def fit_peaks_weighted(utils, watts, weights, previous=None, **_options):
    def sse(k2):
        return peaks_for_exponent(k2, utils, watts, weights)[0]

    if previous is None:
        # Coarse grid over k2 (zero excluded: the form degenerates there) ...
        steps = int(round(_PEAKS_K2_LIMIT / _PEAKS_K2_GRID_STEP))
        grid = [(i + 0.5) * _PEAKS_K2_GRID_STEP for i in range(-steps, steps)]
        centre = min(grid, key=lambda k2: (sse(k2), k2))
    else:
        # ... or, when reweighting, the previous exponent: the optimum moves little.
        centre = previous["k2"]
    # Golden-section refinement within a grid cell either side, kept on the same side of zero.
    low, high = centre - _PEAKS_K2_GRID_STEP, centre + _PEAKS_K2_GRID_STEP
    if centre > 0.0:
        low = max(low, _PEAKS_K2_MIN_ABS)
    else:
        high = min(high, -_PEAKS_K2_MIN_ABS)
    a, b = high - _GOLDEN * (high - low), low + _GOLDEN * (high - low)
    fa, fb = sse(a), sse(b)
    for _golden_step in range(_PEAKS_GOLDEN_STEPS):
        if fa <= fb:
            high, b, fb = b, a, fa
            a = high - _GOLDEN * (high - low)
            fa = sse(a)
        else:
            low, a, fa = a, b, fb
            b = low + _GOLDEN * (high - low)
            fb = sse(b)
    k2 = a if fa <= fb else b
    _sse, offset, slope = peaks_for_exponent(k2, utils, watts, weights)
    # offset + slope * (exp(k2 u) - 1) / k2  ==  k0 + k1 exp(k2 u)
    k1 = slope / k2
    params = {"k0": offset - k1, "k1": k1, "k2": k2}
    return params, peaks_predictor(params)


def fit_piecewise_weighted(utils, watts, weights, knots=DEFAULT_KNOTS, smoothing=DEFAULT_SMOOTHING, **_options):
    # Parameters: x[0] = watts at 0 %, x[j] = rise over segment j (>= 0 keeps the model monotone);
    # P(u) = x[0] + sum_j x[j] * ramp_j(u), ramp_j rising from 0 to 1 across segment j.
    size = len(knots)
    # Per-segment weighted sums of 1, t, t^2, y, t*y (t = position inside the segment): every
    # sample in segment k has the design row [1] * (k + 1) + [t] + [0, ...], so these sums
    # give the normal equations without a per-sample pass over the full row.
    sums = [[0.0] * 5 for _segment in range(size - 1)]
    for u, y, w in zip(utils, watts, weights):
        segment = min(bisect.bisect_right(knots, u) - 1, size - 2)
        t = (u - knots[segment]) / (knots[segment + 1] - knots[segment])
        acc = sums[segment]
        acc[0] += w
        acc[1] += w * t
        acc[2] += w * t * t
        acc[3] += w * y
        acc[4] += w * t * y
    gram = [[0.0] * size for _row in range(size)]
    linear = [0.0] * size
    for segment, (s_1, s_t, s_tt, s_y, s_ty) in enumerate(sums):
        edge = segment + 1
        for i in range(edge):
            linear[i] += s_y
            gram[i][edge] += s_t
            gram[edge][i] += s_t
            for j in range(edge):
                gram[i][j] += s_1
        linear[edge] += s_ty
        gram[edge][edge] += s_tt
    # Slope-change penalty (watts per 10 % of utilisation), scaled with the total sample weight
    # so that the data/penalty balance does not depend on the number of samples.
    strength = smoothing * sum(weights)
    for j in range(1, size - 1):
        penalty = [0.0] * size
        penalty[j] = -10.0 / (knots[j] - knots[j - 1])
        penalty[j + 1] = 10.0 / (knots[j + 1] - knots[j])
        for a in (j, j + 1):
            for b in (j, j + 1):
                gram[a][b] += strength * penalty[a] * penalty[b]
    rises = nonnegative_quadratic_min(gram, linear, free={0})
    knot_watts = [rises[0]]
    for rise in rises[1:]:
        knot_watts.append(knot_watts[-1] + rise)
    params = {"knot_util": list(knots), "knot_watts": knot_watts}
    return params, piecewise_predictor(params)


# --- predictors -------------------------------------------------------------------------------


def linear_predictor(params):
    idle, slope = params["idle_w"], (params["max_w"] - params["idle_w"]) / 100.0
    return lambda u: idle + slope * u


def peaks_predictor(params):
    k0, k1, k2 = params["k0"], params["k1"], params["k2"]
    return lambda u: k0 + k1 * math.exp(k2 * u)


def piecewise_predictor(params):
    knots, values = params["knot_util"], params["knot_watts"]
    last = len(knots) - 1

    def predict(u):
        # lo=1, hi=last clamps the segment index to 0..last-1 without min/max.
        segment = bisect.bisect_right(knots, u, 1, last) - 1
        lower = knots[segment]
        return values[segment] + (values[segment + 1] - values[segment]) * (u - lower) / (knots[segment + 1] - lower)

    return predict


# --- robust fitting: Huber weights, iteratively reweighted ------------------------------------


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else 0.5 * (ordered[middle - 1] + ordered[middle])


def robust_fit(weighted_fit, utils, watts, options):
    """Huber IRLS around a weighted least-squares fit: samples far from the curve (in units of
    the residuals' MAD) get weight c*scale/|r| instead of 1."""
    weights = [1.0] * len(utils)
    params, predict = weighted_fit(utils, watts, weights, **options)
    # Without a floor, near noise-free data makes the MAD tiny and the few samples where the
    # model must bend (the idle-to-10 % knee) look like outliers, so the fit flattens the knee.
    noise_floor = _MIN_NOISE_FRACTION * median([abs(y) for y in watts])
    for _iteration in range(_IRLS_MAX_ITERATIONS):
        residuals = [y - predict(u) for u, y in zip(utils, watts)]
        scale = max(_MAD_TO_SIGMA * median([abs(r) for r in residuals]), noise_floor)
        if scale <= 0.0:  # an exact fit of all-zero power: nothing to reweight
            break
        limit = _HUBER_C * scale
        new_weights = [1.0 if abs(r) <= limit else limit / abs(r) for r in residuals]
        change = max(abs(a - b) for a, b in zip(new_weights, weights))
        weights = new_weights
        params, predict = weighted_fit(utils, watts, weights, previous=params, **options)
        if change < _IRLS_TOLERANCE:
            break
    return params, predict
