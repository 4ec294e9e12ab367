"""_node_input: the one check of the nodes both scorers take, and what each scorer asks of it.

The oracle for "one check" is the message: a bad node gives the same text from ``node_input`` as
from ``score_nodes`` and ``rank_nodes``, which only put their own name before it.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.node_input import (
    NODE_INPUT_FIELDS,
    NodeInputError,
    cpu_millicores,
    node_input,
    node_list,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import (
    PlacementScoreError,
    rank_nodes,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import (
    PowerScoreError,
    score_nodes,
    score_nodes_upstream_peaks,
)

OK = {"name": "a", "util": 10.0, "cpu_capacity": 4000}


def message(call):
    with pytest.raises(ValueError) as exc:
        call()
    return str(exc.value)


@pytest.mark.parametrize(
    ("nodes", "problem"),
    [
        ([5], "nodes[0]: node: expected a mapping, got int"),
        ([{"cpu_capacity": 1}], "nodes[0]: name: must be a non-empty string, got None"),
        ([OK, OK], "node 'a': name: appears twice (nodes[0] and nodes[1])"),
        (
            [dict(OK, cpu_capacity=None)],
            "node 'a': cpu_capacity: missing; give millicores (int) or a quantity such as '16' or '15500m'",
        ),
        ([dict(OK, cpu_capacity="0")], "node 'a': cpu_capacity: is zero; a node that can run pods has some CPU"),
        ([dict(OK, cpu_capacity=-1)], "node 'a': cpu_capacity: -1 is negative; a CPU quantity must be zero or more"),
        (
            [dict(OK, cpu_allocatable="4 cores")],
            "node 'a': cpu_allocatable: '4 cores' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')",
        ),
        ([dict(OK, cpu_requested=-1)], "node 'a': cpu_requested: -1 is negative; a CPU quantity must be zero or more"),
    ],
)
def test_both_scorers_report_a_bad_node_in_the_same_words(nodes, problem):
    seen = {}
    with pytest.raises(NodeInputError) as exc:
        for index, node in enumerate(nodes):
            node_input(node, index, seen, cpu_requests=True)
    assert str(exc.value) == problem
    assert message(lambda: score_nodes(nodes, 1)) == f"power score: {problem}"
    assert message(lambda: rank_nodes(nodes, 1)) == f"placement score: {problem}"


def test_the_pod_request_and_the_node_list_are_checked_in_the_same_words():
    bad = "pod: pod_cpu_request: '2 cpus' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')"
    assert message(lambda: cpu_millicores("2 cpus", "pod", "pod_cpu_request")) == bad
    assert message(lambda: score_nodes([OK], "2 cpus")) == f"power score: {bad}"
    assert message(lambda: rank_nodes([OK], "2 cpus")) == f"placement score: {bad}"
    assert cpu_millicores("1.5", "pod", "pod_cpu_request") == 1500
    not_a_list = "nodes: nodes: expected a list of node mappings, got str"
    assert message(lambda: node_list("abc")) == not_a_list
    assert message(lambda: score_nodes("abc", 1)) == f"power score: {not_a_list}"
    assert message(lambda: rank_nodes("abc", 1)) == f"placement score: {not_a_list}"
    assert node_list(()) == ()


def test_fields_come_back_in_their_order_and_those_not_asked_for_are_empty():
    node = {
        "name": "w1",
        "util": 25,
        "cpu_capacity": "4",
        "cpu_allocatable": "3500m",
        "cpu_requested": 0,
        "memory_allocatable": 4096,
        "memory_requested": 1024,
        "powered_off": False,
    }
    seen = {}
    everything = node_input(node, 0, seen, util=True, cpu_requests=True, memory=True, power_state=True)
    expected = dict(node, util=25.0, cpu_capacity=4000, cpu_allocatable=3500)
    assert dict(zip(NODE_INPUT_FIELDS, everything, strict=True)) == expected
    assert seen == {"w1": 0}
    assert node_input(node, 0, {}) == ("w1", None, 4000, None, None, None, None, False)
    # optional fields a node leaves out are None; a powered-on node is the default
    assert node_input({"name": "w2", "cpu_capacity": 1000}, 0, {}, True, True, True, True) == (
        "w2",
        None,
        1000,
        None,
        None,
        None,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("util", 101, "must be within 0..100 (percent), got 101"),
        ("util", "5", "must be a number within 0..100 (percent) or null for no metrics, got '5'"),
        ("memory_allocatable", -1, "must be a non-negative integer, got -1"),
        ("memory_requested", True, "must be a non-negative integer, got True"),
        ("powered_off", "yes", "must be true or false, got 'yes'"),
    ],
)
def test_a_field_is_checked_only_when_asked_for(field, value, problem):
    node = dict(OK, **{field: value})
    asked = {"util": "util", "memory_allocatable": "memory", "memory_requested": "memory", "powered_off": "power_state"}
    assert node_input(node, 0, {})[0] == "a"
    with pytest.raises(NodeInputError) as exc:
        node_input(node, 0, {}, **{asked[field]: True})
    assert str(exc.value) == f"node 'a': {field}: {problem}"


def test_a_powered_off_node_runs_no_pods():
    node = dict(OK, powered_off=True, cpu_requested="250m")
    assert node_input(node, 0, {}, power_state=True)[-1] is True  # requests not asked for
    with pytest.raises(NodeInputError) as exc:
        node_input(node, 0, {}, cpu_requests=True, power_state=True)
    assert str(exc.value) == "node 'a': powered_off: a powered-off node runs no pods, but 250m are requested"


def test_each_scorer_checks_only_the_fields_it_reads():
    odd = dict(OK, powered_off="yes", memory_allocatable="4Gi")
    assert score_nodes([odd], 1)[0]["status"] == "neutral"  # power_score reads neither
    assert rank_nodes([dict(odd, powered_off=False)], 1)[0]["status"] == "on_neutral"  # no memory asked of the pod
    upstream = dict(OK, cpu_allocatable="x", cpu_requested="x")  # the upstream arithmetic reads no requests
    assert score_nodes_upstream_peaks([upstream], 1) == [{"name": "a", "raw_score": 0, "score": 0}]
    with pytest.raises(PowerScoreError, match="cpu_allocatable"):
        score_nodes([upstream], 1)
    rank_nodes([dict(OK, util="not read")], 1)  # utilisation comes from requests in the placement policy


def test_a_nodes_memory_figures_are_checked_whatever_its_cpu_fit():
    # the pod does not fit by CPU; its memory figures are still the node's input, and wrong
    full = dict(OK, cpu_requested=4000, memory_allocatable="4Gi")
    with pytest.raises(PlacementScoreError) as exc:
        rank_nodes([full], 1, pod_memory_request=1)
    assert str(exc.value) == "placement score: node 'a': memory_allocatable: must be a non-negative integer, got '4Gi'"
