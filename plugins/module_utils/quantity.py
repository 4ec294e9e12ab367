# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes CPU quantities as integer millicores, and other quantities (memory) as whole units.

Pure Python, no Ansible imports, Python 3.9 compatible (module_utils may run on targets).

The string grammar is the one of k8s.io/apimachinery ``resource.Quantity``: an optionally signed
decimal number followed by a binary SI suffix (``Ki`` .. ``Ei``), a decimal SI suffix (``n u m``
none ``k M G T P E``) or a decimal exponent (``e3``, ``E-2``). Like ``Quantity.MilliValue()``,
fractions of a millicore round up, so a request is never understated.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "parse_byte_quantity", "parse_cpu_quantity"]

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_QUANTITY = re.compile(r"^(?P<number>" + _NUMBER + r")(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")

_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """A CPU quantity that Kubernetes would reject, or that is negative."""


def _suffix_multiplier(suffix: str) -> Fraction:
    if not suffix:
        return Fraction(1)
    if suffix in _BINARY_SUFFIX:
        return Fraction(_BINARY_SUFFIX[suffix])
    exponent = _DECIMAL_EXPONENT[suffix] if suffix in _DECIMAL_EXPONENT else int(suffix[1:])
    return Fraction(10) ** exponent


def _whole(text: str, scale: int, kind: str, examples: str) -> int:
    """``text`` times ``scale``, rounded up; ``kind`` and ``examples`` word the errors."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a Kubernetes {kind} (examples: {examples})")
    amount = Fraction(match.group("number")) * _suffix_multiplier(match.group("suffix") or "") * scale
    if amount < 0:
        # Checked before rounding: ceil would turn -1n (-0.000001 millicores) into 0.
        raise QuantityError(f"{text!r} is negative; a {kind} must be zero or more")
    return math.ceil(amount)


# Node capacities repeat across thousands of nodes ("64", "96"): parse each spelling once.
@functools.lru_cache(maxsize=256)
def _string_millicores(text: str) -> int:
    return _whole(text, 1000, "CPU quantity", "'250m', '2', '1.5'")


def parse_cpu_quantity(value: object) -> int:
    """Return a CPU amount in millicores (a non-negative int).

    * ``int`` (or an integral ``float``): already millicores, as in ``cpu_milli`` columns and the
      ``MilliValue()`` of the scheduler; ``1500`` means 1.5 CPUs.
    * ``str``: a Kubernetes quantity, ``"500m"`` (0.5 CPU), ``"2"`` (2 CPUs), ``"1.5"``, ``"2k"``,
      ``"1e3m"``; fractions of a millicore round up like ``Quantity.MilliValue()``.

    Raises ``QuantityError`` (a ``ValueError``) naming the rejected value for booleans, NaN,
    infinities, non-integral numbers, negative amounts and strings outside the grammar.
    """
    # bool is an int subclass; True is never a CPU amount.
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a CPU quantity (expected millicores or a string like '500m')")
    if isinstance(value, int):
        millicores = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise QuantityError(
                f"{value!r} is not a whole number of millicores; write fractional CPUs as a string like '1.5'"
            )
        millicores = int(value)
    elif isinstance(value, str):
        millicores = _string_millicores(value)
    else:
        raise QuantityError(f"{value!r} ({type(value).__name__}) is not a CPU quantity")
    if millicores < 0:
        raise QuantityError(f"{value!r} is negative; a CPU quantity must be zero or more")
    return millicores


@functools.lru_cache(maxsize=256)
def _string_units(text: str) -> int:
    return _whole(text, 1, "quantity", "'512Mi', '1G', '1500'")


def parse_byte_quantity(value: object) -> int:
    """Return a quantity in whole units (bytes for memory), rounding fractions up like ``Quantity.Value()``.

    ``int``: already units; ``str``: a Kubernetes quantity (``"512Mi"``, ``"1G"``, ``"1.5Ki"``).
    Raises ``QuantityError`` for booleans, floats, negative amounts and strings outside the grammar.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise QuantityError(
            f"{value!r} ({type(value).__name__}) is not a quantity (expected an integer or a string like '512Mi')"
        )
    units = _string_units(value) if isinstance(value, str) else value
    if units < 0:
        raise QuantityError(f"{value!r} is negative; a quantity must be zero or more")
    return units
