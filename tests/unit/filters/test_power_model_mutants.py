"""_power_model's small helpers checked one by one: exact results and messages, hand-computed oracles.

Written against the mutants mutmut left alive (docs/development.md, "Mutation testing"); only the
first functions in mutmut's order were scored (see the commit message): _exp_basis, _fail,
_finite_floats, _finite_number and _fit_linear_weighted. The fit and the PromQL rendering are covered by
test_power_model_fit.py and tests/unit/power_models.
"""

from __future__ import annotations

import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils import _power_model as pm


class TaggedFloat(float):
    """What Ansible's templating hands over: a float subclass."""


# --- _finite_floats --------------------------------------------------------------------------------


def test_finite_floats_copies_a_list_of_floats():
    values = [1.5, 2.5]
    floats = pm._finite_floats(values)
    assert floats == [1.5, 2.5]
    assert floats is not values
    floats.append(3.5)
    assert values == [1.5, 2.5]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((0, 50, 100), [0.0, 50.0, 100.0]),
        ([0, 2.5, TaggedFloat(100)], [0.0, 2.5, 100.0]),
        ((v for v in (0, 40, 100)), [0.0, 40.0, 100.0]),  # any iterable, read once
        (range(3), [0.0, 1.0, 2.0]),
        ({0: "a", 100: "b"}, [0.0, 100.0]),  # iterating a mapping gives its keys
        ([], []),
    ],
)
def test_finite_floats_turns_numbers_into_a_list_of_floats(values, expected):
    floats = pm._finite_floats(values)
    assert floats == expected
    assert [type(f) for f in floats] == [float] * len(expected)


@pytest.mark.parametrize(
    "values",
    [
        5,  # not iterable
        2.5,
        None,
        "0,100",  # a string iterates, but is no list of numbers
        b"\x00d",
        [0, True],
        [0, "100"],
        [0, None],
        [0, math.nan],
        (0, math.inf),
        [math.inf, -math.inf],  # sum is NaN
        [0, 10**400],  # an int too large for a float
        [1e308, 1e308],  # finite values whose sum overflows count as non-finite too
    ],
)
def test_finite_floats_refuses_anything_else(values):
    assert pm._finite_floats(values) is None


# --- _finite_number -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(0, True), (-2.5, True), (TaggedFloat(3), True), (10**20, True)])
def test_finite_number_accepts_finite_ints_and_floats(value, expected):
    assert pm._finite_number(value) is expected


@pytest.mark.parametrize("value", [True, False, math.nan, math.inf, -math.inf, "1", None, 1j])
def test_finite_number_refuses_bools_non_finite_and_non_numbers(value):
    assert pm._finite_number(value) is False


# --- _fit_linear_weighted -------------------------------------------------------------------------


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
    params, predict = pm._fit_linear_weighted(utils, watts, weights)
    assert params == pytest.approx({"idle_w": idle_w, "max_w": max_w}, abs=1e-9)
    assert predict(0.0) == pytest.approx(idle_w, abs=1e-9)
    assert predict(100.0) == pytest.approx(max_w, abs=1e-9)


# --- _exp_basis and _fail ---------------------------------------------------------------------------


@pytest.mark.parametrize(("k2", "u"), [(0.02, 50.0), (-0.03, 10.0), (0.5, 2.0)])
def test_exp_basis_is_expm1_of_k2_u_over_k2(k2, u):
    # (e^(k2 u) - 1) / k2 written out, against the well-conditioned expm1 of the code
    assert pm._exp_basis(k2, u) == pytest.approx((math.exp(k2 * u) - 1.0) / k2, rel=1e-12)


def test_fail_names_the_node_and_the_field():
    with pytest.raises(pm.PowerModelError) as err:
        pm._fail("w1", "samples[3].util", "must be a number")
    assert str(err.value) == "power model for node 'w1': samples[3].util: must be a number"
    with pytest.raises(pm.PowerModelError) as err:
        pm._fail(None, "kind", "unknown")
    assert str(err.value) == "power model: kind: unknown"


# Mutants left alive on purpose (same observable behaviour), from the mutation run of this file:
# - _fit_linear_weighted, cov with `u + mean_u` or `y + mean_y` instead of the differences: the
#   extra terms are 2 mean_u * sum(w (y - mean_y)) and mean_y * sum(w (u - mean_u)), both zero, so
#   the covariance is the same up to rounding.
