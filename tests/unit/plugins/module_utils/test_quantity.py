"""parse_cpu_quantity: Kubernetes CPU quantities to millicores."""

from __future__ import annotations

import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError, parse_cpu_quantity
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "millicores"),
    [
        (0, 0),
        (500, 500),
        (4000.0, 4000),
        ("500m", 500),
        ("2", 2000),
        ("+2", 2000),
        ("1.5", 1500),
        ("0.1", 100),
        (".5", 500),
        ("2k", 2_000_000),
        ("1Ki", 1_024_000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("100u", 1),  # fractions of a millicore round up, as Quantity.MilliValue() does
        ("1500001u", 1501),
        ("250000000n", 250),
    ],
)
def test_valid_quantities(value, millicores):
    assert parse_cpu_quantity(value) == millicores


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "2 cores",
        " 2",
        "1.5.2",
        "-1",
        "-500m",
        "1K",
        "1mi",
        "1e3m",
        "m",
        ".",
        "1e",
        "0x10",
        "١",
        True,
        None,
        [2],
        1.5,
    ]
    + [math.nan, math.inf, -5],
)
def test_invalid_quantities_name_the_value(value):
    with pytest.raises(QuantityError) as err:
        parse_cpu_quantity(value)
    assert repr(value) in str(err.value)


def test_quantity_error_is_a_value_error():
    assert issubclass(QuantityError, ValueError)


@given(st.integers(min_value=0, max_value=10**12))
def test_millicore_and_core_spellings_agree(millicores):
    assert parse_cpu_quantity(f"{millicores}m") == millicores
    assert parse_cpu_quantity(millicores) == millicores
    cores, rest = divmod(millicores, 1000)
    assert parse_cpu_quantity(f"{cores}.{rest:03d}") == millicores


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=999))
def test_sub_millicore_amounts_round_up(millicores, nanos_extra):
    # millicores m plus a fraction of a millicore, written in nanocores
    assert parse_cpu_quantity(f"{millicores * 1_000_000 + nanos_extra}n") == millicores + 1


# Every suffix of the resource.Quantity grammar, with the value apimachinery gives (MilliValue()).
@pytest.mark.parametrize(
    ("value", "millicores"),
    [
        ("1n", 1),
        ("1000000n", 1),
        ("1000001n", 2),
        ("1u", 1),
        ("1000u", 1),
        ("1m", 1),
        ("1", 1000),
        ("1k", 10**6),
        ("1M", 10**9),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1E", 10**21),
        ("1Ki", 1024 * 1000),
        ("1Mi", 2**20 * 1000),
        ("1Gi", 2**30 * 1000),
        ("1Ti", 2**40 * 1000),
        ("1Pi", 2**50 * 1000),
        ("1Ei", 2**60 * 1000),
        ("1e0", 1000),
        ("1e+3", 10**6),
        ("15e-1", 1500),
        ("2E2", 200_000),
        ("1.", 1000),
        ("+.5", 500),
        ("-0", 0),
        ("0.0005", 1),
        ("0.001", 1),
        ("0.0011", 2),
        (0.0, 0),
        (-0.0, 0),
        (10**15, 10**15),
    ],
)
def test_every_suffix(value, millicores):
    assert parse_cpu_quantity(value) == millicores


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "True is not a CPU quantity (expected millicores or a string like '500m')"),
        (1.5, "1.5 is not a whole number of millicores; write fractional CPUs as a string like '1.5'"),
        (math.inf, "inf is not a whole number of millicores; write fractional CPUs as a string like '1.5'"),
        (math.nan, "nan is not a whole number of millicores; write fractional CPUs as a string like '1.5'"),
        ("2 cores", "'2 cores' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')"),
        (None, "None (NoneType) is not a CPU quantity"),
        ([2], "[2] (list) is not a CPU quantity"),
        (-5, "-5 is negative; a CPU quantity must be zero or more"),
        (-2.0, "-2.0 is negative; a CPU quantity must be zero or more"),
        ("-500m", "'-500m' is negative; a CPU quantity must be zero or more"),
    ],
)
def test_invalid_quantities_exact_message(value, message):
    with pytest.raises(QuantityError) as err:
        parse_cpu_quantity(value)
    assert str(err.value) == message


def test_negative_sub_millicore_amounts_are_refused():
    with pytest.raises(QuantityError, match="is negative"):
        parse_cpu_quantity("-1n")
