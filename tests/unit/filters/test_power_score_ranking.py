"""score_nodes: PEAKS arithmetic, the fixed upstream defects, ranking properties, errors."""

from __future__ import annotations

import copy
import math
import random

import pytest
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
