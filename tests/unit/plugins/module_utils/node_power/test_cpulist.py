"""CPU lists (plugins/module_utils/node_power/cpulist.py): exact messages, bounds and the canonical form.

The kernel's own format (Documentation/admin-guide/cputopology.rst, ``cpulist_parse`` in
lib/bitmap.c) is the oracle: comma-separated CPUs and ascending ``a-b`` ranges.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import (
    MAX_CPU,
    CpuListError,
    format_cpulist,
    parse_cpulist,
)


@pytest.mark.parametrize(
    ("value", "cpus"),
    [
        (None, []),
        ("", []),
        ("   ", []),
        (0, [0]),
        (MAX_CPU, [MAX_CPU]),
        ("8191", [8191]),
        ("0-8191", list(range(8192))),
        ("1 - 3", [1, 2, 3]),
        ("3,1,2,1", [1, 2, 3]),
        ("5-5", [5]),
        ((4, "0-1"), [0, 1, 4]),
        ({2, 1}, [1, 2]),
        (frozenset({7}), [7]),
        ([], []),
        ([[1, 2], "2-3"], [1, 2, 3]),
    ],
)
def test_parse_accepts(value, cpus):
    assert parse_cpulist(value) == cpus


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "invalid CPU list True: expected a string like '0-3,8' or a list of CPU numbers"),
        (False, "invalid CPU list False: expected a string like '0-3,8' or a list of CPU numbers"),
        (1.5, "invalid CPU list 1.5: expected a string like '0-3,8' or a list of CPU numbers"),
        ({"0": 1}, "invalid CPU list {'0': 1}: expected a string like '0-3,8' or a list of CPU numbers"),
        (-1, "invalid CPU number -1"),
        (MAX_CPU + 1, "invalid CPU number 8192"),
        ([0, -1], "invalid CPU number -1"),
        ("8192", "invalid CPU list '8192': CPU 8192 is above the kernel limit of 8191"),
        ("0-8192", "invalid CPU list '0-8192': CPU 8192 is above the kernel limit of 8191"),
        ("1,,2", "invalid CPU list '1,,2': empty element between commas"),
        ("1,", "invalid CPU list '1,': empty element between commas"),
        ("4-2", "invalid CPU list '4-2': range '4-2' is descending"),
        ("1-", "invalid CPU list '1-': '' is not a CPU number (expected a form like '0-3,8,10-11')"),
        ("-1", "invalid CPU list '-1': '' is not a CPU number (expected a form like '0-3,8,10-11')"),
        ("x", "invalid CPU list 'x': 'x' is not a CPU number (expected a form like '0-3,8,10-11')"),
        ("1-x", "invalid CPU list '1-x': 'x' is not a CPU number (expected a form like '0-3,8,10-11')"),
        ("1-2-3", "invalid CPU list '1-2-3': '2-3' is not a CPU number (expected a form like '0-3,8,10-11')"),
    ],
)
def test_parse_refuses_with_the_exact_message(value, message):
    with pytest.raises(CpuListError) as exc:
        parse_cpulist(value)
    assert str(exc.value) == message


def test_cpulist_error_is_a_value_error():
    assert issubclass(CpuListError, ValueError)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        ([], ""),
        ([5], "5"),
        ([1, 2], "1-2"),
        ([1, 3], "1,3"),
        ([0, 1, 2, 4, 6, 7], "0-2,4,6-7"),
        (["3", "1", "2"], "1-3"),
        ((9, 8, 8, 10, 0), "0,8-10"),
        (range(0, 8192), "0-8191"),
    ],
)
def test_format_is_canonical(cpus, text):
    assert format_cpulist(cpus) == text


@pytest.mark.parametrize("text", ["0", "0-1", "0,2", "0-3,8,10-11", "1,3-4,6", "8191"])
def test_format_inverts_parse_on_canonical_lists(text):
    assert format_cpulist(parse_cpulist(text)) == text
