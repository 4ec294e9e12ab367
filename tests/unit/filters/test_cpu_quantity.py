"""parse_cpu_quantity: Kubernetes CPU quantities to millicores."""

from __future__ import annotations

import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils._quantity import QuantityError, parse_cpu_quantity
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
