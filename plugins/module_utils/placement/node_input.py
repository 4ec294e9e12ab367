# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one check of a node as the scorers take it: the power score (``power_score``) and the
placement policy (``placement_score``) read the same node mappings, so they check them here, with
the same rules and messages. Each scorer puts its own name before a message (``power score: ...``).

A scorer asks for the fields it reads and no others: a field it ignores is not checked, so a
value that means nothing to it cannot stop it. Checks stop at the first problem, which names the
node (its index when it has no name yet), the field, the value and what is expected.

Pure Python, standard library only, Python 3.8: our scheduler extender ships it to its pod.
"""

from __future__ import annotations

import math

from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError, parse_cpu_quantity

__all__ = ["NODE_INPUT_FIELDS", "NodeInputError", "cpu_millicores", "node_input", "node_list"]


class NodeInputError(ValueError):
    """A bad field of a node or of the pod: ``<where>: <field>: <problem>``."""


# What node_input returns, in this order: a plain tuple, because a named one costs a sizeable
# share of the time to score a node (docs/filters.md, "Throughput"). Each scorer's fields come first
# in it: name, util and capacity for the upstream arithmetic, then the CPU requests for power_score.
NODE_INPUT_FIELDS = (
    "name",
    "util",
    "cpu_capacity",
    "cpu_allocatable",
    "cpu_requested",
    "memory_allocatable",
    "memory_requested",
    "powered_off",
)


def _fail(where, field, problem):
    raise NodeInputError(f"{where}: {field}: {problem}")


def _fail_node(name, field, problem):
    # The "node 'x'" label is built only on failure: scoring runs over thousands of nodes.
    _fail(f"node {name!r}", field, problem)


def cpu_millicores(value, where, field):
    """``value`` (millicores, or a quantity such as '500m' or '2') in millicores; ``where`` and
    ``field`` name it in the error."""
    try:
        return parse_cpu_quantity(value)
    except QuantityError as err:
        _fail(where, field, str(err))


def node_list(nodes):
    """``nodes`` when it can be a list of nodes: any iterable but a string."""
    if isinstance(nodes, (str, bytes)) or not hasattr(nodes, "__iter__"):
        _fail("nodes", "nodes", f"expected a list of node mappings, got {type(nodes).__name__}")
    return nodes


def _node_cpu(value, name, field):
    # cpu_millicores, with the node's label built only on failure
    try:
        return parse_cpu_quantity(value)
    except QuantityError as err:
        _fail_node(name, field, str(err))


def _name(node, index, seen):
    if not hasattr(node, "get"):
        _fail(f"nodes[{index}]", "node", f"expected a mapping, got {type(node).__name__}")
    name = node.get("name")
    if not isinstance(name, str) or not name:
        _fail(f"nodes[{index}]", "name", f"must be a non-empty string, got {name!r}")
    if name in seen:
        _fail_node(name, "name", f"appears twice (nodes[{seen[name]}] and nodes[{index}])")
    seen[name] = index
    return name


def _util(util, name):
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not math.isfinite(util):
        _fail_node(name, "util", f"must be a number within 0..100 (percent) or null for no metrics, got {util!r}")
    if not 0.0 <= util <= 100.0:
        _fail_node(name, "util", f"must be within 0..100 (percent), got {util!r}")
    return float(util)


def _capacity(capacity, name):
    if isinstance(capacity, int) and not isinstance(capacity, bool) and capacity > 0:  # the common case: millicores
        return capacity
    if capacity is None:
        _fail_node(name, "cpu_capacity", "missing; give millicores (int) or a quantity such as '16' or '15500m'")
    capacity = _node_cpu(capacity, name, "cpu_capacity")
    if capacity == 0:
        _fail_node(name, "cpu_capacity", "is zero; a node that can run pods has some CPU")
    return capacity


def _optional_count(node, name, field):
    value = node.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail_node(name, field, f"must be a non-negative integer, got {value!r}")
    return value


def node_input(node, index, seen, util=False, cpu_requests=False, memory=False, power_state=False):
    """Check ``nodes[index]`` and return its fields, in the order of ``NODE_INPUT_FIELDS``; raises
    ``NodeInputError``. A field not asked for is None (``powered_off``: False), as is an optional
    field the node does not give.

    Always: the node is a mapping with a ``name`` (a non-empty string, not in ``seen``, the names
    met so far mapped to their index; the name is added) and a ``cpu_capacity`` (millicores or a
    quantity, above zero). On request:

    ``util``: ``util``, the CPU utilisation in percent, 0..100, or null for no metrics.
    ``cpu_requests``: ``cpu_allocatable`` and ``cpu_requested``, CPU quantities or null.
    ``memory``: ``memory_allocatable`` and ``memory_requested``, non-negative integers or null.
    ``power_state``: ``powered_off``, a boolean (default false); a powered-off node runs no pods,
    so it has no CPU requested (with ``cpu_requests``).
    """
    # Scoring runs over thousands of nodes: the common cases are tested inline, the helpers take
    # the rest and say what is wrong.
    name = _name(node, index, seen)
    checked_util = None
    if util:
        checked_util = node.get("util")
        # the common cases: no metrics, or a float in range (NaN fails the range test)
        if checked_util is not None and not (isinstance(checked_util, float) and 0.0 <= checked_util <= 100.0):
            checked_util = _util(checked_util, name)
    capacity = node.get("cpu_capacity")
    # the common case: millicores (a bool is no count of millicores)
    if not (isinstance(capacity, int) and not isinstance(capacity, bool) and capacity > 0):
        capacity = _capacity(capacity, name)
    allocatable = requested = memory_allocatable = memory_requested = None
    if cpu_requests:
        allocatable, requested = node.get("cpu_allocatable"), node.get("cpu_requested")
        if allocatable is not None:
            allocatable = _node_cpu(allocatable, name, "cpu_allocatable")
        if requested is not None:
            requested = _node_cpu(requested, name, "cpu_requested")
    if memory:
        memory_allocatable = _optional_count(node, name, "memory_allocatable")
        memory_requested = _optional_count(node, name, "memory_requested")
    powered_off = False
    if power_state:
        powered_off = node.get("powered_off", False)
        if not isinstance(powered_off, bool):
            _fail_node(name, "powered_off", f"must be true or false, got {powered_off!r}")
        if powered_off and requested:
            _fail_node(name, "powered_off", f"a powered-off node runs no pods, but {requested}m are requested")
    return name, checked_util, capacity, allocatable, requested, memory_allocatable, memory_requested, powered_off
