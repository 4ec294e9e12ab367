"""Scoring of the benchmark's policies, against the upstream code they reproduce."""

from __future__ import annotations

import _placement_policies as pol
import _placement_sim as sim
import numpy as np
import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import rank_nodes
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import score_nodes_upstream_peaks

LINEAR = tuple(100.0 + 10.0 * k for k in range(11))
FLAT = tuple(100.0 + 2.0 * k for k in range(11))


def node(name, threads, watts=LINEAR):
    return sim.Node(name=name, server_id=name, capacity_m=threads * 1000, watts=tuple(watts))


def prepared(policy, nodes, regime="on", seed=0):
    policy.prepare(sim.Cluster(nodes), regime, np.random.default_rng(seed))
    return policy


def choose(policy, alloc, request):
    alloc = np.array(alloc, dtype=np.int64)
    feasible = alloc + request <= policy.cluster.capacity_m
    return policy.choose(alloc, request, feasible)


# --- in-tree strategies --------------------------------------------------------------------


def test_least_allocated_spreads_and_most_allocated_packs():
    nodes = [node("a", 4), node("b", 4), node("c", 8)]
    least = prepared(pol.KubeDefault(), nodes)
    most = prepared(pol.MostAllocated(), nodes)
    alloc = [3000, 1000, 1000]
    assert choose(least, alloc, 1000) == 2  # c: (8000-2000)*100//8000 = 75 beats b's 50
    assert choose(most, alloc, 1000) == 0  # a: 100 % after the pod
    assert choose(most, alloc, 2000) == 1  # a cannot take it; b 75 % beats c 37 %


def test_ties_are_broken_at_random_but_reproducibly():
    nodes = [node(f"n{i}", 4) for i in range(4)]
    picks = [choose(prepared(pol.KubeDefault(), nodes, seed=s), [0, 0, 0, 0], 500) for s in range(20)]
    assert len(set(picks)) > 1
    again = [choose(prepared(pol.KubeDefault(), nodes, seed=s), [0, 0, 0, 0], 500) for s in range(20)]
    assert picks == again


# --- TAS ---------------------------------------------------------------------------------------


def test_tas_prefers_lowest_power_relative_to_max():
    # a at 50 % of a linear 100..200 W curve: 150/200 = 75 %; b (flat) at 50 %: 110/120 = 92 %
    tas = prepared(pol.TasPower(), [node("a", 2), node("b", 2, FLAT)])
    assert choose(tas, [1000, 1000], 500) == 0


def test_tas_off_regime_ranks_powered_off_nodes_last():
    # b is empty (off, no telemetry): score 0; a has the metric and gets 10
    tas = prepared(pol.TasPower(), [node("a", 4), node("b", 4)], regime="off")
    assert all(choose(tas, [3000, 0], 500) == 0 for attempt in range(10))


def test_tas_ranks_many_nodes_by_metric():
    nodes = [node(f"n{i}", 10) for i in range(13)]
    tas = prepared(pol.TasPower(), nodes)
    alloc = np.array([1000 * ((i * 5) % 13) for i in range(13)], dtype=np.int64)
    feasible = alloc + 1000 <= tas.cluster.capacity_m
    assert tas.choose(alloc, 1000, feasible) == int(np.argmin(alloc))


# --- upstream Peaks and ours ------------------------------------------------------------------


def peaks_model(k0, k1, k2):
    return {"kind": "peaks", "params": {"k0": k0, "k1": k1, "k2": k2}}


def linear_model(idle, top):
    return {"kind": "linear", "params": {"idle_w": idle, "max_w": top}}


def test_peaks_picks_smallest_predicted_jump_and_prefers_nodes_without_model():
    models = {0: peaks_model(50.0, 50.0, 0.01), 1: peaks_model(90.0, 10.0, 0.01)}
    peaks = prepared(pol.UpstreamPeaks(models), [node("a", 4), node("b", 4)])
    assert choose(peaks, [0, 0], 1000) == 1  # b's jump is 5x smaller
    peaks = prepared(pol.UpstreamPeaks({0: models[0]}), [node("a", 4), node("b", 4)])
    assert choose(peaks, [0, 0], 1000) == 1  # b has no model: cost 0 normalises to the best score


def test_peaks_off_regime_gives_powered_off_nodes_the_best_score():
    models = {0: peaks_model(50.0, 50.0, 0.01), 1: peaks_model(50.0, 50.0, 0.01)}
    peaks = prepared(pol.UpstreamPeaks(models), [node("a", 4), node("b", 4)], regime="off")
    assert all(choose(peaks, [1000, 0], 1000) == 1 for attempt in range(5))  # b off: no metrics -> best


def test_ours_picks_smallest_jump_and_gives_unknown_nodes_a_neutral_score():
    models = {0: linear_model(100.0, 300.0), 1: linear_model(100.0, 150.0)}
    ours = prepared(pol.Ours(models), [node("a", 4), node("b", 4), node("c", 4)])
    assert choose(ours, [0, 0, 0], 1000) == 1  # b: 12.5 W; a: 50 W; c (no model): neutral 50
    ours = prepared(pol.Ours(models), [node("a", 4), node("b", 4), node("c", 4)], regime="off")
    assert all(choose(ours, [1000, 1000, 0], 1000) == 1 for attempt in range(5))  # c off: neutral, not best


# --- greedy-true -----------------------------------------------------------------------------


@pytest.mark.parametrize("regime", sim.REGIMES)
def test_greedy_true_minimises_true_marginal_power(regime):
    greedy = prepared(pol.GreedyTrue(), [node("a", 2), node("b", 2, FLAT)], regime=regime)
    assert choose(greedy, [1000, 0], 1000) == (1 if regime == "on" else 0)


# --- kube-scheduler's default scoring, by hand from the upstream formulas ------------------------


def mem_node(name, threads, memory_gib, watts=LINEAR):
    return sim.Node(name, name, threads * 1000, tuple(watts), memory_mib=memory_gib * 1024)


def test_default_scores_cpu_and_memory_least_allocated_plus_balanced_allocation():
    # pod: 1 CPU, 4 GiB. a: 4 CPUs / 8 GiB, empty; b: 4 CPUs / 32 GiB, 2 CPUs and 4 GiB requested.
    # a: cpu (4-1)*100/4 = 75, memory (8-4)*100/8 = 50, fit (75+50)/2 = 62;
    #    balanced: fractions 0.25 and 0.5, 100 * (1 - 0.25 / 2) = 87; total 149
    # b: cpu (4-3)*100/4 = 25, memory (32-8)*100/32 = 75, fit 50;
    #    balanced: fractions 0.75 and 0.25, 100 * (1 - 0.5 / 2) = 75; total 125
    default = prepared(pol.KubeDefault(), [mem_node("a", 4, 8), mem_node("b", 4, 32)])
    default.mem_alloc = np.array([0, 4096], dtype=np.int64)
    default.mem_request = 4096
    assert list(default.scores(np.array([0, 2000]), 1000)) == [149.0, 125.0]
    assert choose(default, [0, 2000], 1000) == 0
    # most-allocated: a: cpu 25, memory 50 -> 37; b: cpu 75, memory 25 -> 50; plus the same balanced scores
    most = prepared(pol.MostAllocated(), [mem_node("a", 4, 8), mem_node("b", 4, 32)])
    most.mem_alloc, most.mem_request = default.mem_alloc, 4096
    assert list(most.scores(np.array([0, 2000]), 1000)) == [37.0 + 87.0, 50.0 + 75.0]


def test_default_scores_memory_in_bytes_with_integer_division():
    # 3 GiB node, 1 GiB requested after the pod: (3 - 1) * 100 // 3 = 66 (not 66.7)
    default = prepared(pol.KubeDefault(), [mem_node("a", 3, 3)])
    default.mem_request = 1024
    # cpu (3-1)*100//3 = 66, memory 66, fit 66; balanced 100 (equal fractions)
    assert list(default.scores(np.array([0]), 1000)) == [166.0]


def test_memory_is_a_feasibility_limit_in_the_replay():
    # most-allocated would pack q next to p by CPU, but the memory left there is too small
    cluster = sim.Cluster([mem_node("a", 8, 4), mem_node("b", 8, 4)])
    trace = sim.make_trace([("p", 500, 0, 10, 3072), ("q", 500, 1, 10, 2048), ("r", 500, 2, 10, 8192)])
    for seed in range(5):
        res = sim.simulate(cluster, trace, pol.MostAllocated(), "on", np.random.default_rng(seed))
        assert sorted(res.assignment[:2]) == [0, 1]
        assert res.assignment[2] == -1 and res.rejected == 1  # more memory than any node: rejected at once
        assert res.delayed == 0


# --- tie-breaks --------------------------------------------------------------------------------


def test_interchangeable_nodes_do_not_use_the_generator():
    same = [sim.Node(f"n{i}", "model-x", 4000, LINEAR) for i in range(4)]
    policy = prepared(pol.KubeDefault(), same)
    assert choose(policy, [0, 0, 0, 0], 500) == 0  # all alike: the first, no draw
    assert policy.random_ties == 0
    assert choose(policy, [1000, 0, 0, 1000], 500) == 1  # 1 and 2 tie and are alike
    assert policy.random_ties == 0
    mixed = prepared(pol.KubeDefault(), [node("a", 4), node("b", 4)])  # same size, other server models
    choose(mixed, [0, 0], 500)
    assert mixed.random_ties == 1


# --- Peaks and ours against the module_utils implementations ------------------------------------


def random_state(seed, regime):
    rng = np.random.default_rng(seed)
    n = 9
    nodes = [node(f"n{i}", int(rng.choice([4, 8, 16]))) for i in range(n)]
    cluster = sim.Cluster(nodes)
    alloc = np.array([int(rng.integers(0, c // 250 + 1)) * 250 for c in cluster.capacity_m], dtype=np.int64)
    alloc[rng.random(n) < 0.3] = 0
    request = int(rng.choice([250, 1000, 3000]))
    feasible = alloc + request <= cluster.capacity_m
    feasible[0] = True  # at least one candidate
    alloc[0] = 0
    return cluster, alloc, request, feasible, rng


@pytest.mark.parametrize("regime", sim.REGIMES)
@pytest.mark.parametrize("seed", range(12))
def test_peaks_replay_scores_are_upstream_scores(regime, seed):
    cluster, alloc, request, feasible, rng = random_state(seed, regime)
    models = {
        i: peaks_model(float(rng.uniform(50, 150)), float(rng.uniform(1, 40)), float(rng.uniform(0.005, 0.03)))
        for i in range(len(cluster))
        if rng.random() < 0.8
    }
    peaks = prepared(pol.UpstreamPeaks(models), list(cluster.nodes), regime=regime)
    inputs = []
    for i in np.flatnonzero(feasible):
        metrics = not (regime == "off" and alloc[i] == 0)
        cap = int(cluster.capacity_m[i])
        inputs.append(
            {
                "name": str(int(i)),
                "util": 100.0 * int(alloc[i]) / cap if metrics else None,
                "cpu_capacity": cap,
                "model": models.get(int(i)),
            }
        )
    upstream = score_nodes_upstream_peaks(inputs, request)
    top = max(r["score"] for r in upstream)
    best = {int(r["name"]) for r in upstream if r["score"] == top}
    picks = {
        prepared(pol.UpstreamPeaks(models), list(cluster.nodes), regime, seed=s).choose(alloc, request, feasible)
        for s in range(30)
    }
    assert picks <= best
    assert peaks.choose(alloc, request, feasible) in best


@pytest.mark.parametrize("regime", sim.REGIMES)
@pytest.mark.parametrize("seed", range(12))
def test_ours_picks_rank_nodes_first(regime, seed):
    cluster, alloc, request, feasible, rng = random_state(seed, regime)
    models = {
        i: linear_model(float(rng.uniform(50, 150)), float(rng.uniform(160, 400)))
        for i in range(len(cluster))
        if rng.random() < 0.8
    }
    ours = prepared(pol.Ours(models), list(cluster.nodes), regime=regime)
    inputs = [
        {
            "name": cluster.nodes[i].name,
            "cpu_capacity": int(cluster.capacity_m[i]),
            "cpu_requested": int(alloc[i]),
            "model": models.get(int(i)),
            "powered_off": bool(regime == "off" and alloc[i] == 0),
        }
        for i in np.flatnonzero(feasible)
    ]
    expected = rank_nodes(inputs, request)[0]["name"]
    assert cluster.nodes[ours.choose(alloc, request, feasible)].name == expected
    assert ours.choose(alloc, request, feasible) == ours.choose(alloc, request, feasible)  # cached, same
    assert ours.random_ties == 0
