"""Scoring of the benchmark's policies, against the upstream code they reproduce."""

from __future__ import annotations

import _placement_policies as pol
import _placement_sim as sim
import numpy as np
import pytest

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
    least = prepared(pol.LeastAllocated(), nodes)
    most = prepared(pol.MostAllocated(), nodes)
    alloc = [3000, 1000, 1000]
    assert choose(least, alloc, 1000) == 2  # c: (8000-2000)*100//8000 = 75 beats b's 50
    assert choose(most, alloc, 1000) == 0  # a: 100 % after the pod
    assert choose(most, alloc, 2000) == 1  # a cannot take it; b 75 % beats c 37 %


def test_ties_are_broken_at_random_but_reproducibly():
    nodes = [node(f"n{i}", 4) for i in range(4)]
    picks = [choose(prepared(pol.LeastAllocated(), nodes, seed=s), [0, 0, 0, 0], 500) for s in range(20)]
    assert len(set(picks)) > 1
    again = [choose(prepared(pol.LeastAllocated(), nodes, seed=s), [0, 0, 0, 0], 500) for s in range(20)]
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


# --- oracle ------------------------------------------------------------------------------------


@pytest.mark.parametrize("regime", sim.REGIMES)
def test_oracle_minimises_true_marginal_power(regime):
    oracle = prepared(pol.Oracle(), [node("a", 2), node("b", 2, FLAT)], regime=regime)
    assert choose(oracle, [1000, 0], 1000) == (1 if regime == "on" else 0)
