"""rank_nodes (plugins/module_utils/placement/placement_score.py): the order, the powered-off decision, errors."""

from __future__ import annotations

import random

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import (
    STATUSES,
    PlacementScoreError,
    best_watts_per_cpu,
    placement_cost,
    rank_key,
    rank_nodes,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import score_nodes


def line(idle_w, max_w):
    return {"kind": "linear", "params": {"idle_w": idle_w, "max_w": max_w}}


def node(name, model=None, capacity=4000, requested=0, off=False, **extra):
    fields = {"name": name, "cpu_capacity": capacity, "cpu_requested": requested, "model": model, "powered_off": off}
    return {**fields, **extra}


def names(results):
    return [r["name"] for r in results]


def test_on_nodes_by_jump_then_neutral_then_off_by_cost_to_run_then_unfit():
    nodes = [
        node("off-big-idle", line(200.0, 300.0), off=True),  # 200 + 100 * 25 % = 225 W to run the pod
        node("on-steep", line(100.0, 500.0), requested=1000),  # jump 400 * 25 % = 100 W
        node("off-small-idle", line(50.0, 250.0), off=True),  # 50 + 200 * 25 % = 100 W
        node("on-no-model", None, requested=1000),
        node("off-no-model", None, off=True),
        node("full", line(10.0, 20.0), requested=3500),
        node("on-flat", line(100.0, 140.0), requested=2000),  # jump 10 W
    ]
    ranked = rank_nodes(nodes, "1")
    assert names(ranked) == [
        "on-flat",
        "on-steep",
        "on-no-model",
        "off-small-idle",
        "off-big-idle",
        "off-no-model",
        "full",
    ]
    by = {r["name"]: r for r in ranked}
    statuses = ["on", "on", "on_neutral", "wake", "wake", "wake_neutral", "unfit"]
    assert [by[n]["status"] for n in names(ranked)] == statuses
    assert by["on-flat"]["cost_w"] == pytest.approx(10.0)
    assert by["off-small-idle"]["cost_w"] == pytest.approx(100.0)  # idle power of waking it included
    assert by["off-big-idle"]["cost_w"] == pytest.approx(225.0)
    assert [by[n]["score"] for n in names(ranked)] == [100, 51, 50, 49, 2, 1, 0]
    assert [r["rank"] for r in ranked] == list(range(1, 8))
    assert "does not fit" in by["full"]["reason"] and by["full"]["cost_w"] is None
    assert "neutral" in by["on-no-model"]["reason"]
    assert "idle power" in by["off-small-idle"]["reason"]


def test_a_cheap_off_node_never_beats_a_running_one():
    # waking costs at least the idle power: a node already on comes first even with a larger jump
    nodes = [node("on", line(100.0, 900.0), requested=1000), node("off", line(1.0, 2.0), off=True)]
    assert names(rank_nodes(nodes, 1000)) == ["on", "off"]


def test_ties_fall_to_the_name_whatever_the_input_order():
    nodes = [node(f"n{i}", line(100.0, 200.0), off=True) for i in range(6)]
    nodes += [node(f"m{i}", line(100.0, 200.0), requested=1000) for i in range(3)]
    expected = ["m0", "m1", "m2", "n0", "n1", "n2", "n3", "n4", "n5"]
    rng = random.Random(3)
    for _round in range(20):
        rng.shuffle(nodes)
        assert names(rank_nodes(nodes, 500)) == expected


def test_memory_beyond_allocatable_is_unfit_and_ignored_without_figures():
    nodes = [
        node("small-memory", line(10.0, 20.0), memory_allocatable=4096, memory_requested=1024),
        node("big-memory", line(100.0, 400.0), memory_allocatable=65536),
    ]
    ranked = rank_nodes(nodes, 1000, pod_memory_request=8192)
    assert names(ranked) == ["big-memory", "small-memory"]
    assert ranked[1]["status"] == "unfit" and "memory" in ranked[1]["reason"]
    assert names(rank_nodes(nodes, 1000)) == ["small-memory", "big-memory"]  # no pod memory: CPU only


def test_cpu_allocatable_below_capacity():
    nodes = [node("a", line(10.0, 20.0), cpu_allocatable="3500m", requested=3000), node("b", line(50.0, 500.0))]
    ranked = rank_nodes(nodes, "600m")
    assert names(ranked) == ["b", "a"] and ranked[1]["status"] == "unfit"


def test_order_among_running_nodes_is_score_nodes_order():
    # always on, utilisation from requests: the same order as the power_score filter
    rng = random.Random(11)
    for _round in range(30):
        nodes = []
        for i in range(8):
            capacity = rng.choice([8000, 16000, 64000])
            requested = rng.randrange(0, capacity, 250)
            idle = rng.uniform(50.0, 200.0)
            nodes.append(node(f"n{i}", line(idle, idle + rng.uniform(10.0, 400.0)), capacity, requested))
        request = rng.choice([250, 1000, 4000])
        ours = [r for r in rank_nodes(nodes, request) if r["status"] == "on"]
        filt = score_nodes([dict(n, util=100.0 * n["cpu_requested"] / n["cpu_capacity"]) for n in nodes], request)
        filt = [r for r in filt if r["status"] == "scored"]
        assert sorted(names(ours)) == sorted(names(filt))
        assert [r["cost_w"] for r in ours] == pytest.approx(sorted(r["jump_w"] for r in filt))


def test_placement_cost_and_rank_key_are_what_rank_nodes_uses():
    predict = {"a": lambda u: 100.0 + u, "b": None}
    assert placement_cost(predict["a"], 4000, 1000, 1000, False) == ("on", pytest.approx(25.0), 50.0)
    assert placement_cost(predict["a"], 4000, 0, 1000, True) == ("wake", pytest.approx(125.0), 25.0)
    assert placement_cost(predict["b"], 4000, 0, 1000, True)[0] == "wake_neutral"
    assert placement_cost(predict["b"], 4000, 0, 1000, False)[0] == "on_neutral"
    assert placement_cost(predict["a"], 4000, 3500, 1000, False)[0] == "unfit"
    keys = [rank_key(s, 1.0, "x") for s in STATUSES]
    assert keys == sorted(keys)
    assert rank_key("on", 5.0, "a") < rank_key("on", 5.0, "b") < rank_key("on", 6.0, "a")


@pytest.mark.parametrize(
    ("nodes", "pod_cpu", "memory", "match"),
    [
        ([node("a", requested=1000, off=True)], 1000, None, r"node 'a': powered_off: a powered-off node runs no pods"),
        ([node("a", off="yes")], 1000, None, r"node 'a': powered_off: must be true or false"),
        ([node("a", capacity="eight")], 1000, None, r"placement score: node 'a': cpu_capacity"),
        ([node("a", memory_allocatable=-1)], 1000, 5, r"node 'a': memory_allocatable: must be a non-negative integer"),
        ([node("a")], "2 cpus", None, r"placement score: pod: pod_cpu_request"),
        ([node("a")], 1000, "1Gi", r"pod: pod_memory_request: must be a non-negative integer"),
        ([node("a"), node("a")], 1000, None, r"node 'a': name: appears twice"),
        ([node("a", {"kind": "cubic", "params": {}})], 1000, None, r"placement score: .*'a'.*kind"),
        ("nodes", 1000, None, r"nodes: expected a list"),
    ],
)
def test_bad_input_names_node_and_field(nodes, pod_cpu, memory, match):
    with pytest.raises(PlacementScoreError, match=match):
        rank_nodes(nodes, pod_cpu, memory)


def test_error_is_a_value_error():
    assert issubclass(PlacementScoreError, ValueError)


def test_wake_by_efficiency_prefers_the_node_that_runs_load_for_least_power():
    # small: 50 W idle, 100 W full, 8 CPUs: best 12.5 W per CPU at full load, 62.5 W for a 1-CPU pod
    # big: 200 W idle, 400 W full, 64 CPUs: best 6.25 W per CPU, 203 W for the same pod
    nodes = [
        node("small", line(50.0, 100.0), capacity=8000, off=True),
        node("big", line(200.0, 400.0), capacity=64000, off=True),
        node("running", line(100.0, 300.0), capacity=8000, requested=1000),
    ]
    assert names(rank_nodes(nodes, 1000)) == ["running", "small", "big"]  # cheapest for this pod
    ranked = rank_nodes(nodes, 1000, wake="efficiency")
    assert names(ranked) == ["running", "big", "small"]  # least power per CPU once loaded
    by = {r["name"]: r for r in ranked}
    assert by["big"]["cost_w"] == pytest.approx(6.25)
    assert by["small"]["cost_w"] == pytest.approx(12.5)
    assert "W per CPU" in by["big"]["reason"]
    assert best_watts_per_cpu(lambda u: 50.0 + 0.5 * u, 8000) == pytest.approx(12.5)
    with pytest.raises(PlacementScoreError, match="options: wake: must be one of pod, efficiency"):
        rank_nodes(nodes, 1000, wake="cheapest")


@pytest.mark.parametrize(
    ("nodes", "memory", "message"),
    [
        (
            [node("a", cpu_allocatable="4 cores")],
            None,
            "placement score: node 'a': cpu_allocatable: '4 cores' is not a Kubernetes CPU quantity "
            "(examples: '250m', '2', '1.5')",
        ),
        (
            [node("a", requested="x")],
            None,
            "placement score: node 'a': cpu_requested: 'x' is not a Kubernetes CPU quantity "
            "(examples: '250m', '2', '1.5')",
        ),
        (
            [node("a", memory_allocatable=10, memory_requested=-1)],
            5,
            "placement score: node 'a': memory_requested: must be a non-negative integer, got -1",
        ),
        (
            [node("a", memory_allocatable="4Gi")],
            5,
            "placement score: node 'a': memory_allocatable: must be a non-negative integer, got '4Gi'",
        ),
        (
            [node("a", memory_allocatable=True)],
            5,
            "placement score: node 'a': memory_allocatable: must be a non-negative integer, got True",
        ),
        (
            [node("a"), {"cpu_capacity": 1000}],
            None,
            "placement score: nodes[1]: name: must be a non-empty string, got None",
        ),
        (
            # only the prefix of power_score's message is reworded, not a name that happens to contain it
            [node("power score: a"), node("power score: a")],
            None,
            "placement score: node 'power score: a': name: appears twice (nodes[0] and nodes[1])",
        ),
        ("abc", None, "placement score: nodes: nodes: expected a list of node mappings, got str"),
        (None, None, "placement score: nodes: nodes: expected a list of node mappings, got NoneType"),
    ],
)
def test_bad_input_messages_in_full(nodes, memory, message):
    with pytest.raises(PlacementScoreError) as exc:
        rank_nodes(nodes, 1000, memory)
    assert str(exc.value) == message


def test_a_node_without_requests_or_power_flag_is_an_empty_running_node():
    bare = {"name": "bare", "cpu_capacity": 4000, "model": line(100.0, 200.0)}
    (result,) = rank_nodes([bare], 4000)  # the pod takes the whole node: it still fits
    assert result == {
        "name": "bare",
        "status": "on",
        "cost_w": pytest.approx(100.0),
        "util_after": pytest.approx(100.0),
        "reason": "powered on; predicted power jump 100.00 W",
        "score": 100,
        "rank": 1,
    }


def test_cpu_fits_up_to_allocatable_inclusive():
    nodes = [node("exact", line(10.0, 20.0), requested=1000), node("over", requested=1001)]
    by = {r["name"]: r for r in rank_nodes([dict(n, cpu_allocatable=2000) for n in nodes], 1000)}
    assert by["exact"]["status"] == "on" and by["exact"]["util_after"] == pytest.approx(50.0)
    assert by["over"] == {
        "name": "over",
        "status": "unfit",
        "cost_w": None,
        "util_after": None,
        "reason": "pod does not fit: CPU requested 1001m + pod 1000m > allocatable 2000m",
        "score": 0,
        "rank": 2,
    }


def test_allocatable_above_capacity_still_stops_at_full_utilisation():
    # bad node data (allocatable > capacity): the pod fits by requests but would take the node past 100 %
    nodes = [node("a", line(10.0, 20.0), capacity=4000, cpu_allocatable=5000)]
    (result,) = rank_nodes(nodes, 4020)
    assert result["status"] == "unfit" and result["cost_w"] is None
    assert result["util_after"] == pytest.approx(100.5)
    assert result["reason"] == "pod does not fit: utilisation would reach 100.5 % of CPU capacity"
    assert rank_nodes(nodes, 4000)[0]["status"] == "on"  # exactly 100 % fits


def test_memory_fits_up_to_allocatable_inclusive_and_counts_what_is_requested():
    def status(memory_request, **memory):
        return rank_nodes([node("a", line(10.0, 20.0), **memory)], 1000, memory_request)[0]

    assert status(3072, memory_allocatable=4096, memory_requested=1024)["status"] == "on"
    over = status(3073, memory_allocatable=4096, memory_requested=1024)
    assert over["status"] == "unfit"
    assert over["reason"] == "pod does not fit: memory requested 1024 + pod 3073 > allocatable 4096"
    assert status(4096, memory_allocatable=4096)["status"] == "on"  # nothing requested yet
    assert status(1, memory_allocatable=0)["status"] == "unfit"  # zero is a valid allocatable
    assert status(0, memory_allocatable=0, memory_requested=0)["status"] == "on"
    assert status(1 << 40)["status"] == "on"  # the node gives no memory figure: CPU only


def test_scores_of_a_class_alone_and_of_close_or_equal_costs():
    off = [node("w1", line(100.0, 200.0), off=True), node("w2", line(100.0, 300.0), off=True)]
    # no running node: the wake band is still scored, 49 for the cheapest down to 2
    assert [(r["name"], r["score"]) for r in rank_nodes(off, 1000)] == [("w1", 49), ("w2", 2)]
    # jumps of 0.25 W and 0.5 W (a spread below one watt): still the whole band
    close = [node("a", line(100.0, 101.0)), node("b", line(100.0, 102.0))]
    assert [(r["name"], r["score"]) for r in rank_nodes(close, 1000)] == [("a", 100), ("b", 51)]
    # equal jumps: all best
    same = [node("a", line(100.0, 200.0)), node("b", line(100.0, 200.0))]
    assert [r["score"] for r in rank_nodes(same, 1000)] == [100, 100]


def test_a_pod_without_memory_request_may_say_zero():
    ranked = rank_nodes([node("a", line(10.0, 20.0), memory_allocatable=0)], 1000, pod_memory_request=0)
    assert ranked[0]["status"] == "on"


def test_best_watts_per_cpu_looks_from_one_percent():
    # P(u) = u^2 W on one CPU: u^2 / (u / 100) = 100 u W per CPU, least at the lowest utilisation tried
    assert best_watts_per_cpu(lambda u: u * u, 1000) == pytest.approx(100.0)
