"""_power_score's boundaries and tie-breaks checked one by one, against hand-computed oracles.

Written against the mutants mutmut left alive (docs/development.md, "Mutation testing"): integer
utilisations at and just past the ends of 0..100, the upstream Peaks baseline at exactly 100 % and
just above it, its normalisation when every cost is equal and its pod request error, the default
neutral score and its reasons, the 1..100 normalisation of score_nodes when the jumps differ by
less than a watt, and the ranking of nodes whose scores tie.
"""

from __future__ import annotations

import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement import power_score as ps


def line(idle_w, max_w):
    return {"kind": "linear", "params": {"idle_w": idle_w, "max_w": max_w}}


def peaks(k0, k1, k2):
    return {"kind": "peaks", "params": {"k0": k0, "k1": k1, "k2": k2}}


# --- score_nodes_upstream_peaks --------------------------------------------------------------------


def test_upstream_scores_a_node_the_pod_fills_to_exactly_100_percent():
    # 50 % of 2000m plus 1000m is 2000m: 100 %, which upstream still scores (predicted <= 100)
    nodes = [
        {"name": "full", "util": 50.0, "cpu_capacity": 2000, "model": peaks(7, 1.0, 0.01)},
        {"name": "idle", "util": 0.0, "cpu_capacity": 2000, "model": None},
    ]
    full, idle = ps.score_nodes_upstream_peaks(nodes, 1000)
    # by hand: k1 * (e^(0.01 * 100) - e^(0.01 * 50)) = e - e^0.5 = 1.0696...
    assert full["raw_score"] == int((math.e - math.sqrt(math.e)) * 1e15)
    assert full["raw_score"] > 10**15
    assert (full["score"], idle["raw_score"], idle["score"]) == (0, 0, 100)


def test_upstream_gives_a_node_just_past_100_percent_the_minimum_cost():
    # 50.5 % + 50 % = 100.5 %: overfull by half a percent, raw cost 0 (MinNodeScore)
    nodes = [
        {"name": "over", "util": 50.5, "cpu_capacity": 2000, "model": peaks(0, 1.0, 0.01)},
        {"name": "fits", "util": 0.0, "cpu_capacity": 2000, "model": peaks(0, 1.0, 0.01)},
    ]
    over, fits = ps.score_nodes_upstream_peaks(nodes, 1000)
    assert over == {"name": "over", "raw_score": 0, "score": 100}
    assert fits["raw_score"] == int((math.exp(0.5) - 1.0) * 1e15)
    assert fits["score"] == 0


def test_upstream_equal_nonzero_costs_all_score_100():
    nodes = [{"name": n, "util": 10.0, "cpu_capacity": 4000, "model": peaks(1, 2.0, 0.02)} for n in ("b", "a")]
    results = ps.score_nodes_upstream_peaks(nodes, 1000)  # 10 % -> 35 %
    raw = int(2.0 * (math.exp(0.7) - math.exp(0.2)) * 1e15)
    assert results == [
        {"name": "b", "raw_score": raw, "score": 100},
        {"name": "a", "raw_score": raw, "score": 100},
    ]


def test_upstream_names_the_pod_request_in_its_error():
    with pytest.raises(ps.PowerScoreError) as err:
        ps.score_nodes_upstream_peaks([], "1 cpu")
    assert str(err.value) == (
        "power score: pod: pod_cpu_request: '1 cpu' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')"
    )


def test_upstream_scores_no_nodes_as_an_empty_list():
    assert ps.score_nodes_upstream_peaks([], 1000) == []


# --- score_nodes -----------------------------------------------------------------------------------


def test_the_default_neutral_score_is_50():
    nodes = [
        {"name": "no-metrics", "util": None, "cpu_capacity": 1000},
        {"name": "no-model", "util": 10.0, "cpu_capacity": 1000},
    ]
    assert [(r["name"], r["score"], r["status"], r["reason"]) for r in ps.score_nodes(nodes, 100)] == [
        ("no-metrics", 50, "neutral", "no utilisation metrics; neutral score"),
        ("no-model", 50, "neutral", "no power model; neutral score"),
    ]


def test_integer_utilisations_at_both_ends_of_the_range_are_accepted():
    nodes = [
        {"name": "a-zero", "util": 0, "cpu_capacity": 1000, "model": line(0, 100)},
        {"name": "b-full", "util": 100, "cpu_capacity": 1000, "model": line(0, 100)},
    ]
    for scorer in (ps.score_nodes, ps.score_nodes_upstream_peaks):
        assert [r["name"] for r in scorer(nodes, 0)] == ["a-zero", "b-full"]
    zero, full = ps.score_nodes(nodes, 0)
    assert (zero["util_after"], full["util_after"]) == (0.0, 100.0)
    assert (zero["jump_w"], full["jump_w"]) == (0.0, 0.0)
    assert zero["status"] == full["status"] == "scored"


@pytest.mark.parametrize("util", [101, 100.5, 100.000001, -0.5])
@pytest.mark.parametrize("scorer", [ps.score_nodes, ps.score_nodes_upstream_peaks])
def test_utilisations_just_outside_the_range_are_refused(scorer, util):
    with pytest.raises(ps.PowerScoreError) as err:
        scorer([{"name": "a", "util": util, "cpu_capacity": 1000}], 0)
    assert str(err.value) == f"power score: node 'a': util: must be within 0..100 (percent), got {util!r}"


def test_jumps_less_than_a_watt_apart_still_spread_over_1_to_100():
    nodes = [
        {"name": "a", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 1)},  # 0 -> 50 %: 0.5 W
        {"name": "b", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 2)},  # 1.0 W
        {"name": "c", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 1.5)},  # 0.75 W
    ]
    results = ps.score_nodes(nodes, 500)
    # spread 0.5 W; c: 100 - floor(99 * 0.25 / 0.5 + 0.5) = 100 - floor(50.0) = 50
    assert [(r["name"], r["score"], r["jump_w"]) for r in results] == [
        ("a", 100, 0.5),
        ("c", 50, 0.75),
        ("b", 1, 1.0),
    ]


def test_equal_scores_rank_by_the_smaller_jump_before_the_name():
    nodes = [
        {"name": "a", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 1)},  # 0.5 W, rounds to 100
        {"name": "b", "util": 0.0, "cpu_capacity": 1000, "model": line(10, 10)},  # flat: 0.0 W exactly
        {"name": "c", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 0.8)},  # 0.4 W, rounds to 100
        {"name": "d", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 400)},  # 200 W
    ]
    results = ps.score_nodes(nodes, 500)
    # 99 * 0.5 / 200 + 0.5 = 0.7475 and 99 * 0.4 / 200 + 0.5 = 0.698: both floor to 0, score 100
    assert [(r["name"], r["score"], r["rank"]) for r in results] == [
        ("b", 100, 1),
        ("c", 100, 2),
        ("a", 100, 3),
        ("d", 1, 4),
    ]
    assert results[0]["jump_w"] == 0.0
    assert results[0]["reason"] == "fits; predicted power jump 0.00 W"


# Mutants left alive on purpose (same observable behaviour), from the mutation run of this file:
# - _request_fits_allocatable, both `return True, ""` -> "XXXX": a fitting node's reason is always
#   replaced (neutral, unfit by utilisation, or the "fits; predicted power jump" of scored nodes).
# In _node_input.node_input, which checks the nodes of both scorers (and its helpers):
# - `0.0 <= checked_util` -> `1.0 <= ...` / `0.0 < ...` in the util fast path: a float below 1 (or
#   0.0) falls through to _util, which accepts it and returns float(util), the same; likewise
#   `checked_util <= 100.0` -> `< 100.0` there (100.0 falls through and comes back as 100.0).
# - `capacity > 0` -> `capacity > 1` in the capacity fast paths: capacity 1 falls through to
#   parse_cpu_quantity(1), which returns the same int 1.
