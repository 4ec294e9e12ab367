# ruff: noqa: E501 - exact, long messages
"""score_nodes: PEAKS arithmetic, the fixed upstream defects, ranking properties, errors.

score_nodes / score_nodes_upstream_peaks: the exact error messages, the fit bounds and the rounding.

power_score's boundaries and tie-breaks checked one by one, against hand-computed oracles.

The edges: integer
utilisations at and just past the ends of 0..100, the upstream Peaks baseline at exactly 100 % and
just above it, its normalisation when every cost is equal and its pod request error, the default
neutral score and its reasons, the 1..100 normalisation of score_nodes when the jumps differ by
less than a watt, and the ranking of nodes whose scores tie.
"""

from __future__ import annotations

import copy
import math
import random

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement import power_score as ps
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import fit_model
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import (
    PowerScoreError,
    score_nodes,
    score_nodes_upstream_peaks,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def line(idle_w, max_w):
    return {"kind": "linear", "params": {"idle_w": idle_w, "max_w": max_w}}


def peaks(k0, k1, k2):
    return {"kind": "peaks", "params": {"k0": k0, "k1": k1, "k2": k2}}


def by_name(results):
    return {r["name"]: r for r in results}


# --- arithmetic --------------------------------------------------------------------------------


def test_jump_is_power_at_predicted_minus_power_at_current_utilisation():
    nodes = [
        {"name": "cheap", "util": 10.0, "cpu_capacity": "8", "model": line(50, 150)},  # 1 W per %
        {"name": "mid", "util": 10.0, "cpu_capacity": 8000, "model": line(50, 250)},  # 2 W per %
        {"name": "dear", "util": 10.0, "cpu_capacity": "8000m", "model": line(50, 450)},  # 4 W per %
    ]
    results = score_nodes(nodes, "2")  # 2 of 8 CPUs: +25 %
    assert [r["name"] for r in results] == ["cheap", "mid", "dear"]
    assert [r["rank"] for r in results] == [1, 2, 3]
    cheap, mid, dear = results
    assert cheap["util_after"] == pytest.approx(35.0)
    assert (cheap["jump_w"], mid["jump_w"], dear["jump_w"]) == pytest.approx((25.0, 50.0, 100.0))
    # min-max normalisation onto 1..100: (100 - jump) / 75 of the span above the minimum
    assert (cheap["score"], mid["score"], dear["score"]) == (100, 100 - round(99 * 25 / 75), 1)
    assert all(r["status"] == "scored" and "fits" in r["reason"] for r in results)


def test_capacity_matters_through_the_predicted_utilisation():
    model = line(100, 300)
    results = by_name(
        score_nodes(
            [
                {"name": "small", "util": 50.0, "cpu_capacity": 4000, "model": model},
                {"name": "large", "util": 50.0, "cpu_capacity": 64000, "model": model},
            ],
            1000,
        )
    )
    assert results["small"]["jump_w"] == pytest.approx(2.0 * 25.0)
    assert results["large"]["jump_w"] == pytest.approx(2.0 * 100 / 64)
    assert results["large"]["score"] == 100
    assert results["small"]["score"] == 1


def test_equal_jumps_all_score_100_and_rank_by_name():
    nodes = [{"name": n, "util": 20.0, "cpu_capacity": 16000, "model": line(80, 280)} for n in ("w3", "w1", "w2")]
    results = score_nodes(nodes, "500m")
    assert [(r["name"], r["score"]) for r in results] == [("w1", 100), ("w2", 100), ("w3", 100)]


# --- the upstream defects, fixed -------------------------------------------------------------------


def defect_nodes():
    model = peaks(60.0, 20.0, 0.02)
    return [
        {"name": "measured-a", "util": 20.0, "cpu_capacity": 16000, "model": model},
        {"name": "measured-b", "util": 60.0, "cpu_capacity": 16000, "model": model},
        {"name": "overfull", "util": 95.0, "cpu_capacity": 16000, "model": model},
        {"name": "no-metrics", "util": None, "cpu_capacity": 16000, "model": model},
        {"name": "no-model", "util": 30.0, "cpu_capacity": 16000, "model": None},
    ]


def test_upstream_peaks_gives_the_best_score_to_nodes_it_knows_nothing_about():
    upstream = by_name(score_nodes_upstream_peaks(defect_nodes(), "2"))
    assert upstream["measured-a"]["raw_score"] == int(20.0 * (math.exp(0.02 * 32.5) - math.exp(0.02 * 20.0)) * 1e15)
    assert upstream["measured-b"]["score"] == 0  # the largest jump
    for name in ("overfull", "no-metrics", "no-model"):
        assert upstream[name]["raw_score"] == 0
        assert upstream[name]["score"] == 100


def test_upstream_peaks_normalisation_truncates_like_go():
    nodes = [
        {"name": "a", "util": 0.0, "cpu_capacity": 1000, "model": peaks(0, 1, 0.01)},
        {"name": "b", "util": 0.0, "cpu_capacity": 1000, "model": peaks(0, 3, 0.01)},
        {"name": "c", "util": 0.0, "cpu_capacity": 1000, "model": peaks(0, 2.5, 0.01)},
    ]
    scores = by_name(score_nodes_upstream_peaks(nodes, 100))  # every node goes 0 % -> 10 %
    raw = {n: scores[n]["raw_score"] for n in "abc"}
    low, high = raw["a"], raw["b"]
    assert scores["c"]["score"] == 100 - int(100 * float(raw["c"] - low) / float(high - low))
    assert (scores["a"]["score"], scores["b"]["score"]) == (100, 0)


def test_upstream_peaks_leaves_all_zero_costs_unnormalised():
    nodes = [{"name": "x", "util": None, "cpu_capacity": 1000, "model": None}]
    assert score_nodes_upstream_peaks(nodes, 100) == [{"name": "x", "raw_score": 0, "score": 0}]


def test_score_nodes_fixes_each_defect_and_says_why():
    results = by_name(score_nodes(defect_nodes(), "2", neutral_score=40))
    assert results["measured-a"]["score"] == 100
    assert results["measured-b"]["score"] == 1
    assert results["overfull"]["score"] == 0
    assert results["overfull"]["status"] == "unfit"
    assert "does not fit" in results["overfull"]["reason"]
    assert results["overfull"]["util_after"] == pytest.approx(107.5)
    assert results["no-metrics"]["score"] == 40
    assert "no utilisation metrics" in results["no-metrics"]["reason"]
    assert results["no-model"]["score"] == 40
    assert "no power model" in results["no-model"]["reason"]
    ranking = [r["name"] for r in score_nodes(defect_nodes(), "2", neutral_score=40)]
    assert ranking == ["measured-a", "no-metrics", "no-model", "measured-b", "overfull"]


def test_allocatable_and_existing_requests_decide_fit():
    model = line(50, 150)
    nodes = [
        {
            "name": "full",
            "util": 5.0,
            "cpu_capacity": 8000,
            "cpu_allocatable": "7500m",
            "cpu_requested": 7000,
            "model": model,
        },
        {
            "name": "room",
            "util": 5.0,
            "cpu_capacity": 8000,
            "cpu_allocatable": "7500m",
            "cpu_requested": 6500,
            "model": model,
        },
        {"name": "capacity-only", "util": 5.0, "cpu_capacity": 8000, "cpu_requested": "7600m", "model": model},
        {"name": "unmeasured-full", "util": None, "cpu_capacity": 8000, "cpu_allocatable": 500, "model": None},
    ]
    results = by_name(score_nodes(nodes, "1"))
    assert results["room"]["score"] == 100
    assert results["full"]["score"] == 0
    assert "allocatable 7500m" in results["full"]["reason"]
    assert results["capacity-only"]["score"] == 0
    assert "capacity 8000m" in results["capacity-only"]["reason"]
    assert results["unmeasured-full"]["score"] == 0


def test_neutral_score_is_configurable_but_never_the_best():
    only_unmodelled = [{"name": "w1", "util": 10.0, "cpu_capacity": 4000, "model": None}]
    assert score_nodes(only_unmodelled, 100, neutral_score=99)[0]["score"] == 99
    assert score_nodes(only_unmodelled, 100, neutral_score=0)[0]["score"] == 0
    for bad in (100, -1, 50.5, True, "50"):
        with pytest.raises(PowerScoreError, match="neutral_score"):
            score_nodes(only_unmodelled, 100, neutral_score=bad)


def test_empty_node_list_scores_nothing():
    assert score_nodes([], "1") == []


# --- properties --------------------------------------------------------------------------------

_FIT_SAMPLES = [
    [{"util": u, "watts": idle + rise * (u / 100.0) ** shape} for u in (0, 5, 10, 30, 50, 70, 90, 100)]
    for idle, rise, shape in ((60, 200, 0.6), (150, 500, 1.8), (40, 90, 1.0))
]
MODELS = [fit_model(samples, kind=kind) for samples in _FIT_SAMPLES for kind in ("piecewise_linear", "peaks", "linear")]

node_strategy = st.fixed_dictionaries(
    {
        "util": st.one_of(st.none(), st.floats(min_value=0, max_value=100, allow_nan=False)),
        "cpu_capacity": st.one_of(
            st.integers(min_value=500, max_value=256_000), st.sampled_from(["4", "16", "96", "2500m", "1.5"])
        ),
        "model": st.one_of(st.none(), st.sampled_from(MODELS)),
    },
    optional={
        "cpu_allocatable": st.integers(min_value=0, max_value=256_000),
        "cpu_requested": st.integers(min_value=0, max_value=256_000),
    },
)
node_lists = st.lists(node_strategy, max_size=30).map(
    lambda nodes: [dict(node, name=f"node-{i:02d}") for i, node in enumerate(nodes)]
)
requests = st.one_of(st.integers(min_value=0, max_value=64_000), st.sampled_from(["100m", "1", "2.5", "8"]))


@settings(max_examples=150, deadline=None)
@given(node_lists, requests, st.integers(min_value=0, max_value=99))
def test_ranking_properties(nodes, request, neutral_score):
    results = score_nodes(nodes, request, neutral_score=neutral_score)
    assert sorted(r["name"] for r in results) == sorted(n["name"] for n in nodes)
    assert [r["rank"] for r in results] == list(range(1, len(nodes) + 1))
    for result in results:
        assert isinstance(result["score"], int)
        assert 0 <= result["score"] <= 100
        assert result["reason"]
    fitting = [r for r in results if r["status"] != "unfit"]
    unfit = [r for r in results if r["status"] == "unfit"]
    # a node that cannot take the pod never outranks (or outscores) one that can
    if fitting and unfit:
        assert max(r["rank"] for r in fitting) < min(r["rank"] for r in unfit)
        assert max(r["score"] for r in unfit) <= min(r["score"] for r in fitting)
    assert all(r["score"] == 0 for r in unfit)
    # nodes without a model or metrics get the neutral score, never the best
    for result in results:
        if result["status"] == "neutral":
            assert result["score"] == neutral_score < 100
    scored = [r for r in results if r["status"] == "scored"]
    if scored:
        assert results[0]["status"] == "scored"
        assert results[0]["score"] == 100
        assert all(r["score"] >= 1 for r in scored)
        # smaller jump, never a lower score
        for a in scored:
            for b in scored:
                if a["jump_w"] < b["jump_w"]:
                    assert a["score"] >= b["score"]
        # fitted models are monotone: adding load never predicts a power drop
        assert all(r["jump_w"] >= -1e-9 for r in scored)


@settings(max_examples=60, deadline=None)
@given(node_lists, requests, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_order(nodes, request, rng):
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    assert score_nodes(shuffled, request) == score_nodes(nodes, request)


def test_inputs_are_left_alone_and_results_repeat():
    """A filter's input is the caller's variables: scoring must not modify it (comparing two calls on
    copies, as this test once did, cannot see that: the copies are modified the same way)."""
    rng = random.Random(4)
    nodes = [
        {"name": f"n{i}", "util": rng.uniform(0, 100), "cpu_capacity": 32000, "model": rng.choice(MODELS)}
        for i in range(200)
    ] + [{"name": "no-metrics", "util": None, "cpu_capacity": "8"}]
    pristine = copy.deepcopy(nodes)
    first = score_nodes(nodes, "3")
    assert nodes == pristine
    assert score_nodes(nodes, "3") == first


# --- errors name the node and the field ----------------------------------------------------------


# Fields both scorers read ...
BAD_FIELDS_COMMON = [
    ({"util": 120.0}, "util"),
    ({"util": -0.5}, "util"),
    ({"util": math.nan}, "util"),
    ({"util": "50"}, "util"),
    ({"util": True}, "util"),
    ({"cpu_capacity": None}, "cpu_capacity"),
    ({"cpu_capacity": "lots"}, "cpu_capacity"),
    ({"cpu_capacity": 0}, "cpu_capacity"),
    ({"cpu_capacity": -4000}, "cpu_capacity"),
    ({"cpu_capacity": "1.2.3"}, "cpu_capacity"),
    ({"model": {"kind": "peaks", "params": {"k0": 1, "k1": 2}}}, "model.params.k2"),
    ({"model": {"kind": "peaks", "params": {"k0": 1, "k1": 2, "k2": math.inf}}}, "model.params.k2"),
]
# ... and those only score_nodes reads (upstream ignores allocatable and non-peaks models).
BAD_FIELDS_OURS_ONLY = [
    ({"cpu_allocatable": "x"}, "cpu_allocatable"),
    ({"cpu_requested": 1.5}, "cpu_requested"),
    ({"model": {"kind": "cubic", "params": {}}}, "model.kind"),
    ({"model": "peaks"}, "model"),
]


def assert_names_node_and_field(scorer, change, field):
    good = {"name": "good", "util": 10.0, "cpu_capacity": 4000, "model": None}
    bad = dict({"name": "worker-9", "util": 10.0, "cpu_capacity": 4000, "model": None}, **change)
    with pytest.raises(PowerScoreError) as err:
        scorer([good, bad], "250m")
    assert "node 'worker-9'" in str(err.value)
    assert f": {field}: " in str(err.value)


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS_COMMON + BAD_FIELDS_OURS_ONLY)
def test_bad_node_fields_name_node_and_field(change, field):
    assert_names_node_and_field(score_nodes, change, field)


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS_COMMON)
def test_upstream_baseline_rejects_bad_fields_too(change, field):
    assert_names_node_and_field(score_nodes_upstream_peaks, change, field)


@pytest.mark.parametrize(
    ("nodes", "where", "field"),
    [
        ([{"util": 1.0, "cpu_capacity": 1000}], "nodes[0]", "name"),
        ([{"name": "", "util": 1.0, "cpu_capacity": 1000}], "nodes[0]", "name"),
        ([{"name": "a", "cpu_capacity": 1000}, "b"], "nodes[1]", "node"),
        ([{"name": "a", "cpu_capacity": 1000}, {"name": "a", "cpu_capacity": 1000}], "node 'a'", "name"),
        ("a,b", "nodes", "nodes"),
    ],
)
def test_bad_node_lists_name_where_and_field(nodes, where, field):
    with pytest.raises(PowerScoreError) as err:
        score_nodes(nodes, 100)
    assert f"{where}: {field}: " in str(err.value)


@pytest.mark.parametrize("request_value", ["lots", "-1", -5, None, 0.5, "1 cpu"])
def test_bad_pod_request_names_the_field(request_value):
    with pytest.raises(PowerScoreError, match=r"pod: pod_cpu_request: "):
        score_nodes([{"name": "a", "util": 1.0, "cpu_capacity": 1000}], request_value)


OK = {"name": "a", "util": 10.0, "cpu_capacity": 4000}


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


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - _request_fits_allocatable, both `return True, ""` -> "XXXX": a fitting node's reason is always
#   replaced (neutral, unfit by utilisation, or the "fits; predicted power jump" of scored nodes).
# In _node_input.node_input, which checks the nodes of both scorers (and its helpers):
# - `0.0 <= checked_util` -> `1.0 <= ...` / `0.0 < ...` in the util fast path: a float below 1 (or
#   0.0) falls through to _util, which accepts it and returns float(util), the same; likewise
#   `checked_util <= 100.0` -> `< 100.0` there (100.0 falls through and comes back as 100.0).
# - `capacity > 0` -> `capacity > 1` in the capacity fast paths: capacity 1 falls through to
#   parse_cpu_quantity(1), which returns the same int 1.
