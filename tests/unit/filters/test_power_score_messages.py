# ruff: noqa: E501 - exact, long messages
"""score_nodes / score_nodes_upstream_peaks: the exact error messages, the fit bounds and the rounding."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement import power_score as ps

OK = {"name": "a", "util": 10.0, "cpu_capacity": 4000}


def line(idle_w, max_w):
    return {"kind": "linear", "params": {"idle_w": idle_w, "max_w": max_w}}


def error(scorer, nodes, request, **kw):
    with pytest.raises(ps.PowerScoreError) as exc:
        scorer(nodes, request, **kw)
    return str(exc.value)


# Errors both scorers raise, with the exact message.
COMMON = [
    ([dict(OK, util=120.0)], "power score: node 'a': util: must be within 0..100 (percent), got 120.0"),
    ([dict(OK, util=120)], "power score: node 'a': util: must be within 0..100 (percent), got 120"),
    ([dict(OK, util=-1)], "power score: node 'a': util: must be within 0..100 (percent), got -1"),
    (
        [dict(OK, util="5")],
        "power score: node 'a': util: must be a number within 0..100 (percent) or null for no metrics, got '5'",
    ),
    (
        [dict(OK, util=True)],
        "power score: node 'a': util: must be a number within 0..100 (percent) or null for no metrics, got True",
    ),
    (
        [dict(OK, cpu_capacity=None)],
        "power score: node 'a': cpu_capacity: missing; give millicores (int) or a quantity such as '16' or '15500m'",
    ),
    (
        [dict(OK, cpu_capacity="0")],
        "power score: node 'a': cpu_capacity: is zero; a node that can run pods has some CPU",
    ),
    ([dict(OK, cpu_capacity=0)], "power score: node 'a': cpu_capacity: is zero; a node that can run pods has some CPU"),
    (
        [dict(OK, cpu_capacity=True)],
        "power score: node 'a': cpu_capacity: True is not a CPU quantity (expected millicores or a string like '500m')",
    ),
    (
        [dict(OK, cpu_capacity="x")],
        "power score: node 'a': cpu_capacity: 'x' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')",
    ),
    ([OK, OK], "power score: node 'a': name: appears twice (nodes[0] and nodes[1])"),
    (
        [OK, dict(OK, name="b"), dict(OK, name="a")],
        "power score: node 'a': name: appears twice (nodes[0] and nodes[2])",
    ),
    ([{"util": 1}], "power score: nodes[0]: name: must be a non-empty string, got None"),
    ([OK, {"name": ""}], "power score: nodes[1]: name: must be a non-empty string, got ''"),
    ([5], "power score: nodes[0]: node: expected a mapping, got int"),
]


@pytest.mark.parametrize(("nodes", "message"), COMMON)
@pytest.mark.parametrize("scorer", [ps.score_nodes, ps.score_nodes_upstream_peaks])
def test_common_errors(scorer, nodes, message):
    assert error(scorer, nodes, 1) == message


@pytest.mark.parametrize(
    ("nodes", "request_value", "kw", "message"),
    [
        (5, 1, {}, "power score: nodes: nodes: expected a list of node mappings, got int"),
        ("ab", 1, {}, "power score: nodes: nodes: expected a list of node mappings, got str"),
        (
            [OK],
            "x",
            {},
            "power score: pod: pod_cpu_request: 'x' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')",
        ),
        (
            [OK],
            1,
            {"neutral_score": True},
            "power score: options: neutral_score: must be an integer within 0..99, got True",
        ),
        (
            [OK],
            1,
            {"neutral_score": 1.0},
            "power score: options: neutral_score: must be an integer within 0..99, got 1.0",
        ),
        (
            [OK],
            1,
            {"neutral_score": 100},
            "power score: options: neutral_score: must be within 0..99 (below the best score), got 100",
        ),
        (
            [OK],
            1,
            {"neutral_score": -1},
            "power score: options: neutral_score: must be within 0..99 (below the best score), got -1",
        ),
        (
            [dict(OK, cpu_allocatable="x")],
            1,
            {},
            "power score: node 'a': cpu_allocatable: 'x' is not a Kubernetes CPU quantity (examples: '250m', '2', '1.5')",
        ),
        (
            [dict(OK, cpu_requested=-1)],
            1,
            {},
            "power score: node 'a': cpu_requested: -1 is negative; a CPU quantity must be zero or more",
        ),
        (
            [dict(OK, model={"kind": "x"})],
            1,
            {},
            "power score: power model for node 'a': model.kind: unknown kind 'x'; expected one of piecewise_linear, peaks, linear",
        ),
    ],
)
def test_score_nodes_errors(nodes, request_value, kw, message):
    assert error(ps.score_nodes, nodes, request_value, **kw) == message


def test_bounds_of_the_fit():
    nodes = [
        {"name": "full-util", "util": 50.0, "cpu_capacity": 2000, "model": line(10, 20)},  # 50 + 50 = 100 %: fits
        {"name": "over-util", "util": 50.5, "cpu_capacity": 2000, "model": line(10, 20)},
        {
            "name": "full-alloc",
            "util": 0.0,
            "cpu_capacity": 8000,
            "cpu_allocatable": 3000,
            "cpu_requested": 2000,
            "model": line(10, 20),
        },
        {
            "name": "over-alloc",
            "util": 0.0,
            "cpu_capacity": 8000,
            "cpu_allocatable": 3000,
            "cpu_requested": 2001,
            "model": line(10, 20),
        },
        {"name": "over-capacity", "util": 0.0, "cpu_capacity": 8000, "cpu_requested": 7001, "model": line(10, 20)},
        {"name": "alloc-only", "util": 0.0, "cpu_capacity": 8000, "cpu_allocatable": "1", "model": line(10, 20)},
    ]
    results = {r["name"]: r for r in ps.score_nodes(nodes, 1000)}
    assert results["full-util"]["status"] == "scored" and results["full-util"]["util_after"] == 100.0
    assert results["over-util"]["status"] == "unfit"
    assert results["over-util"]["reason"] == "pod does not fit: utilisation would reach 100.5 % of CPU capacity"
    assert results["full-alloc"]["status"] == "scored"
    assert results["over-alloc"]["reason"] == "pod does not fit: requested 2001m + pod 1000m > allocatable 3000m"
    assert results["over-capacity"]["reason"] == "pod does not fit: requested 7001m + pod 1000m > capacity 8000m"
    assert results["alloc-only"]["status"] == "scored"  # 0 requested + 1000m <= 1000m


@pytest.mark.parametrize(("max_b", "score_b"), [(4, 99), (12, 97)])
def test_scores_round_half_up(max_b, score_b):
    """(jump - min) / spread * 99 lands exactly on .5 here: 0.5 -> 1 and 2.5 -> 3 (round() would give 0 and 2)."""
    nodes = [
        {"name": "a", "util": 0.0, "cpu_capacity": 2000, "model": line(0, 2)},  # jump 1 W
        {"name": "b", "util": 0.0, "cpu_capacity": 2000, "model": line(0, max_b)},
        {"name": "c", "util": 0.0, "cpu_capacity": 2000, "model": line(0, 398)},  # jump 199 W
    ]
    results = {r["name"]: r for r in ps.score_nodes(nodes, 1000)}
    assert (results["a"]["score"], results["b"]["score"], results["c"]["score"]) == (100, score_b, 1)
    assert results["b"]["reason"] == f"fits; predicted power jump {max_b / 2:.2f} W"


def test_ties_rank_scored_before_neutral_before_unfit_then_by_jump_and_name():
    assert ps.MAX_SCORE == 100 and ps.MIN_FITTING_SCORE == 1
    nodes = [
        {"name": "u", "util": 99.0, "cpu_capacity": 1000, "model": line(0, 100)},  # unfit, score 0
        {"name": "n", "util": None, "cpu_capacity": 1000},  # neutral 0
        {"name": "s2", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 100)},
        {"name": "s1", "util": 0.0, "cpu_capacity": 1000, "model": line(0, 100)},
    ]
    results = ps.score_nodes(nodes, 100, neutral_score=0)
    assert [(r["name"], r["score"], r["status"], r["rank"]) for r in results] == [
        ("s1", 100, "scored", 1),
        ("s2", 100, "scored", 2),
        ("n", 0, "neutral", 3),
        ("u", 0, "unfit", 4),
    ]
    assert results[2]["reason"] == "no utilisation metrics; neutral score"
    assert results[2]["jump_w"] is None and results[2]["util_after"] is None
