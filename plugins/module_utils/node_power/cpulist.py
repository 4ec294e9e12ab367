# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Linux CPU list strings (``0-3,8,10-11``) as used by sysfs, the kubelet and taskset.

Pure logic, no Ansible imports; runs on targets, so Python 3.9 compatible.
"""

from __future__ import annotations

MAX_CPU = 8191  # NR_CPUS upper bound on x86_64 (CONFIG_MAXSMP)


class CpuListError(ValueError):
    """A CPU list that cannot be parsed; the message says which part is wrong."""


def is_decimal(text):
    """Whether ``text`` is a whole number in ASCII digits, as the kernel's kstrto* parse them.
    str.isdigit alone takes '²' (which int() then refuses with a traceback) and '３' (which the
    kernel would refuse)."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def _parse_int(token, whole):
    token = token.strip()
    if not is_decimal(token):
        raise CpuListError(
            f"invalid CPU list {whole!r}: {token!r} is not a CPU number (expected a form like '0-3,8,10-11')"
        )
    value = int(token)
    if value > MAX_CPU:
        raise CpuListError(f"invalid CPU list {whole!r}: CPU {value} is above the kernel limit of {MAX_CPU}")
    return value


def parse_cpulist(value):
    """Return the sorted list of CPU numbers in ``value``.

    ``value`` is a sysfs/kubelet style string (``"0-3,8"``, ``""`` for none), an int, or a list
    of ints / numeric strings / range strings. Duplicates are merged.
    """
    if value is None:
        return []
    if isinstance(value, bool):
        raise CpuListError(f"invalid CPU list {value!r}: expected a string like '0-3,8' or a list of CPU numbers")
    if isinstance(value, int):
        if value < 0 or value > MAX_CPU:
            raise CpuListError(f"invalid CPU number {value}")
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        cpus = set()
        for item in value:
            cpus.update(parse_cpulist(item))
        return sorted(cpus)
    if not isinstance(value, str):
        raise CpuListError(f"invalid CPU list {value!r}: expected a string like '0-3,8' or a list of CPU numbers")
    text = value.strip()
    cpus = set()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CpuListError(f"invalid CPU list {value!r}: empty element between commas")
        if "-" in part:
            lo_s, _sep, hi_s = part.partition("-")
            lo = _parse_int(lo_s, value)
            hi = _parse_int(hi_s, value)
            if lo > hi:
                raise CpuListError(f"invalid CPU list {value!r}: range {part!r} is descending")
            cpus.update(range(lo, hi + 1))
        else:
            cpus.add(_parse_int(part, value))
    return sorted(cpus)


def format_cpulist(cpus):
    """Return the canonical compact string for an iterable of CPU numbers (``[0,1,2,5]`` -> ``"0-2,5"``)."""
    ordered = sorted(set(int(c) for c in cpus))
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if i == j:
            parts.append(str(ordered[i]))
        else:
            parts.append(f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
