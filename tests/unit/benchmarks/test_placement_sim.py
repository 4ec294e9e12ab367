"""The placement simulator: trace loading, replay, energy integration, lower bound, draws."""

from __future__ import annotations

import itertools

import _placement_policies as pol
import _placement_sim as sim
import numpy as np
import pytest

LINEAR = tuple(100.0 + 10.0 * k for k in range(11))  # 100 W idle .. 200 W at full load
CONCAVE = (100.0, 160.0, 170.0, 180.0, 190.0, 200.0, 210.0, 220.0, 230.0, 240.0, 250.0)
STEEP_TOP = (50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0, 140.0, 400.0)


def node(name, threads, watts):
    return sim.Node(name=name, server_id=name, capacity_m=threads * 1000, watts=tuple(watts))


def run(cluster, pods, policy, regime="on", seed=0):
    return sim.simulate(cluster, sim.make_trace(pods), policy, regime, np.random.default_rng(seed))


class FirstFit(sim.Policy):
    name = "first-fit"

    def choose(self, alloc_m, request_m, feasible):
        return int(np.flatnonzero(feasible)[0])


# --- trace ---------------------------------------------------------------------------------


def test_load_pods_sorts_clips_and_drops_zero_length(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,creation_time,deletion_time\n"
        "b,2000,1,50,80\n"
        "a,1000,1,10,100\n"
        "z,500,1,30,30\n"
        "c,3000,1,50,\n"
    )
    trace = sim.load_pods(path)
    assert trace.names == ("a", "b", "c")  # by creation; b before c (file order at equal times)
    assert trace.dropped_zero_duration == 1
    assert list(trace.deleted) == [100.0, 80.0, 100.0]  # no deletion time: lives to the trace end
    clipped = sim.load_pods(path, start=60, end=90)
    assert clipped.names == ("a", "b", "c")
    assert list(clipped.created) == [60.0, 60.0, 60.0]
    assert list(clipped.deleted) == [90.0, 80.0, 90.0]
    assert sim.load_pods(path, start=85).names == ("a", "c")


def test_load_pods_reports_missing_columns(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,creation_time\nx,1,0\n")
    with pytest.raises(sim.TraceError, match="deletion_time"):
        sim.load_pods(path)


def test_peak_demand_counts_deletions_before_creations_at_one_instant():
    trace = sim.make_trace([("a", 1000, 0, 10), ("b", 1000, 10, 20), ("c", 500, 5, 15)])
    assert sim.peak_demand(trace) == 1500  # a leaves at 10 as b arrives: never 2500


# --- power curves --------------------------------------------------------------------------


def test_curve_power_matches_specpower_true_power(shared_data):
    from lab import specpower as _specpower

    servers = _specpower.load_servers(shared_data)[:20]
    for server, util in itertools.product(servers, (0.0, 3.3, 10.0, 47.5, 99.9, 100.0)):
        n = sim.node_from_server("n", server)
        assert sim.curve_power(n.watts, util) == pytest.approx(_specpower.true_power(server, util))


def test_cluster_power_off_regime_zero_for_empty_nodes():
    cluster = sim.Cluster([node("a", 1, LINEAR), node("b", 2, LINEAR)])
    alloc = np.array([0, 1000])
    assert list(cluster.power(alloc, "on")) == [100.0, 150.0]
    assert list(cluster.power(alloc, "off")) == [0.0, 150.0]


# --- replay ----------------------------------------------------------------------------------


def test_energy_is_integrated_exactly_between_events():
    cluster = sim.Cluster([node("a", 1, LINEAR)])
    # 0..10 s: 500 m (150 W); 10..20 s: 500 m + 250 m (175 W); 20..30 s: 250 m (125 W)
    res = run(cluster, [("p", 500, 0, 20), ("q", 250, 10, 30)], FirstFit())
    assert res.energy_j == pytest.approx(150 * 10 + 175 * 10 + 125 * 10)
    assert list(res.times) == [0, 10, 20, 30]
    assert list(res.watts) == [150, 175, 125, 125]  # the last entry repeats the value up to the end
    assert (res.placed, res.delayed, res.rejected) == (2, 0, 0)


def test_off_regime_counts_nothing_for_an_empty_node():
    cluster = sim.Cluster([node("a", 1, LINEAR), node("b", 1, LINEAR)])
    pods = [("p", 500, 0, 10), ("q", 500, 20, 30)]
    on = run(cluster, pods, FirstFit(), "on")
    off = run(cluster, pods, FirstFit(), "off")
    assert on.energy_j == pytest.approx((150 + 100 + 150) * 10 + 100 * 30)  # a busy, idle, busy; b idle
    assert off.energy_j == pytest.approx((150 + 0 + 150) * 10)


def test_node_freed_and_reused_at_one_instant():
    cluster = sim.Cluster([node("a", 1, LINEAR)])
    res = run(cluster, [("p", 1000, 0, 10), ("q", 1000, 10, 20)], FirstFit())
    assert (res.placed, res.delayed, res.rejected) == (2, 0, 0)
    assert res.energy_j == pytest.approx(200 * 20)


def test_pod_that_does_not_fit_waits_then_runs_its_duration():
    cluster = sim.Cluster([node("a", 1, LINEAR), node("b", 1, LINEAR)])
    # p fills a, r fills b; q arrives at 5, starts when p leaves at 10 and runs its 20 s to 30
    pods = [("p", 1000, 0, 10), ("r", 1000, 0, 40), ("q", 1000, 5, 25)]
    res = run(cluster, pods, FirstFit())
    assert (res.placed, res.delayed, res.rejected) == (3, 1, 0)
    assert res.started[2] == 10.0
    assert res.energy_j == pytest.approx(400 * 30 + 300 * 10)  # a busy 0..30, idle 30..40


def test_rejected_pods_are_counted():
    cluster = sim.Cluster([node("a", 1, LINEAR), node("b", 2, LINEAR)])
    pods = [
        ("huge", 3000, 0, 10),  # larger than every node: rejected at once
        ("p", 2000, 0, 100),  # fills b until the end
        ("q", 1000, 1, 100),  # fills a
        ("r", 1000, 2, 50),  # waits for capacity that never frees within the window
    ]
    res = run(cluster, pods, FirstFit())
    assert res.rejected == 2
    assert res.placed == 2
    assert list(res.assignment) == [-1, 1, 0, -1]


def test_policy_choosing_an_infeasible_node_is_an_error():
    class Bad(sim.Policy):
        name = "bad"

        def choose(self, alloc_m, request_m, feasible):
            return int(np.argmin(feasible))  # the first node, full after the first pod

    cluster = sim.Cluster([node("a", 1, LINEAR), node("b", 1, LINEAR)])
    with pytest.raises(RuntimeError, match="does not fit"):
        run(cluster, [("p", 1000, 0, 10), ("q", 1000, 1, 10)], Bad())


# --- lower bound ------------------------------------------------------------------------------


def test_lower_bound_curve_by_hand():
    # a: 1 thread, concave (first 10 % costs 60 W: hull from (0,100) to (1000,250): 0.15 W/m);
    # b: 1 thread, linear 0.1 W/m. Always on: base 200 W, then b (0.1), then a (0.15).
    cluster = sim.Cluster([node("a", 1, CONCAVE), node("b", 1, LINEAR)])
    dx, dy = sim.lower_bound_curve(cluster, "on")
    assert sim.lower_bound_power(cluster, "on", 0.0) == pytest.approx(200.0)
    assert sim.lower_bound_power(cluster, "on", 1000.0) == pytest.approx(300.0)
    assert sim.lower_bound_power(cluster, "on", 2000.0) == pytest.approx(450.0)
    # off: a's hull from (0,0) has slope 0.25 W/m (to (1000, 250)); b's 0.2 (to (1000, 200))
    assert sim.lower_bound_power(cluster, "off", 500.0) == pytest.approx(100.0)
    assert sim.lower_bound_power(cluster, "off", 1500.0) == pytest.approx(200.0 + 125.0)
    assert dx[-1] == 2000


ALL_POLICIES = (pol.KubeDefault, pol.MostAllocated, pol.TasPower, pol.GreedyTrue, FirstFit)


@pytest.mark.parametrize("regime", sim.REGIMES)
@pytest.mark.parametrize("seed", range(8))
def test_lower_bound_below_every_policy(regime, seed):
    rng = np.random.default_rng(seed)
    curves = (LINEAR, CONCAVE, STEEP_TOP)
    nodes = [node(f"n{i}", int(rng.integers(1, 5)), curves[int(rng.integers(3))]) for i in range(4)]
    cluster = sim.Cluster(nodes)
    pods = []
    for i in range(40):
        start = float(rng.integers(0, 100))
        pods.append((f"p{i}", int(rng.integers(1, 9)) * 125, start, start + float(rng.integers(1, 30))))
    trace = sim.make_trace(pods)
    bound = sim.lower_bound_energy(cluster, regime, trace)[0]
    for cls in ALL_POLICIES:
        res = sim.simulate(cluster, trace, cls(), regime, np.random.default_rng(seed))
        if res.rejected == 0 and res.delayed == 0:
            assert bound <= res.energy_j + 1e-6, cls.name


# --- greedy-true on hand-checkable clusters ----------------------------------------------------


def test_greedy_true_uses_the_efficient_node_always_on():
    # b is flat (cheap) per millicore; a is steep; greedy-true puts both pods on b
    cheap = tuple(100.0 + 2.0 * k for k in range(11))
    cluster = sim.Cluster([node("a", 2, LINEAR), node("b", 2, cheap)])
    pods = [("p", 1000, 0, 10), ("q", 1000, 0, 10)]
    results = {cls.name: run(cluster, pods, cls()).energy_j for cls in ALL_POLICIES}
    assert results["greedy-true"] == pytest.approx((100 + 120) * 10)  # a idle, b full
    assert results["default"] == pytest.approx((150 + 110) * 10)  # one pod on each node
    assert all(results["greedy-true"] <= e + 1e-9 for e in results.values())


def test_greedy_true_packs_when_nodes_power_off():
    cluster = sim.Cluster([node("a", 2, CONCAVE), node("b", 2, CONCAVE)])
    pods = [("p", 1000, 0, 10), ("q", 1000, 0, 10)]
    results = {cls.name: run(cluster, pods, cls(), "off").energy_j for cls in ALL_POLICIES}
    assert results["greedy-true"] == pytest.approx(250.0 * 10)  # both on one node at 100 %, the other off
    assert results["default"] == pytest.approx(2 * 200.0 * 10)  # spread: two nodes at 50 %
    assert all(results["greedy-true"] <= e + 1e-9 for e in results.values())


# --- draws and determinism ----------------------------------------------------------------


class _Server:
    def __init__(self, sid, cores, watts):
        self.id, self.cores, self.threads_per_core, self.watts = sid, cores, 2, watts


SERVERS = [_Server(f"s{i}", 8 * (i + 1), LINEAR if i % 2 else CONCAVE) for i in range(6)]


def test_draw_cluster_has_headroom_and_few_models():
    cluster = sim.draw_cluster(SERVERS, 200_000, np.random.default_rng(3), headroom=0.5, types=2)
    assert cluster.total_capacity_m >= 300_000
    assert cluster.total_capacity_m - max(cluster.capacity_m) < 300_000  # stops once sized
    assert len({n.server_id for n in cluster.nodes}) <= 2


def test_same_seed_same_result_different_seed_differs():
    pods = [(f"p{i}", 1000 + 250 * (i % 5), float(i), float(i + 7 + i % 3)) for i in range(60)]
    trace = sim.make_trace(pods)

    def once(seed):
        cluster = sim.draw_cluster(SERVERS, sim.peak_demand(trace), np.random.default_rng(seed), types=3)
        res = sim.simulate(cluster, trace, pol.KubeDefault(), "off", np.random.default_rng(seed))
        return [n.server_id for n in cluster.nodes], res.energy_j, list(res.assignment)

    assert once(11) == once(11)
    assert any(once(11) != once(s) for s in (12, 13, 14))


# --- memory and trace copies ------------------------------------------------------------------


def test_load_pods_reads_memory_requests(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,creation_time,deletion_time\na,1000,2048,0,10\nb,500,,5,10\n")
    trace = sim.load_pods(path)
    assert list(trace.mem_mib) == [2048, 0]
    assert sim.peak_demand(trace, "memory") == 2048
    no_memory = tmp_path / "cpu-only.csv"
    no_memory.write_text("name,cpu_milli,creation_time,deletion_time\na,1000,0,10\n")
    assert list(sim.load_pods(no_memory).mem_mib) == [0]


def test_replicate_trace_shifts_and_wraps_copies():
    pods = [("a", 1000, 0.0, 40.0, 10), ("b", 2000, 50.0, 100.0, 20), ("c", 500, 10.0, 90.0, 0)]
    trace = sim.make_trace(pods)
    assert sim.replicate_trace(trace, 1, np.random.default_rng(0)) is trace
    copies = sim.replicate_trace(trace, 5, np.random.default_rng(4))
    # every copy keeps each pod's size and total duration, inside the window
    assert copies.start >= 0.0 and copies.end <= 100.0
    seconds = (copies.deleted - copies.created) * copies.cpu_m
    assert seconds.sum() == pytest.approx(5 * sum((d - c) * cpu for _pod, cpu, c, d, _rest in pods))
    assert sorted(set(copies.mem_mib.tolist())) == [0, 10, 20]
    assert any(n.endswith("+") for n in copies.names)  # some copy wrapped around the end
    assert sim.peak_demand(copies) <= 5 * sim.peak_demand(trace)
    again = sim.replicate_trace(trace, 5, np.random.default_rng(4))
    assert again.names == copies.names and list(again.created) == list(copies.created)
    with pytest.raises(ValueError, match="copies"):
        sim.replicate_trace(trace, 0, np.random.default_rng(0))


def test_draw_cluster_sizes_for_memory_too():
    cluster = sim.draw_cluster(
        SERVERS,
        10_000,
        np.random.default_rng(3),
        headroom=0.0,
        types=2,
        demand_mem_mib=500_000,
        memory_per_thread_mib=1024,
    )
    assert int(cluster.memory_mib.sum()) >= 500_000  # memory, not CPU, decided the size
    assert all(n.memory_mib == n.capacity_m // 1000 * 1024 for n in cluster.nodes)


def test_pods_too_big_for_every_node_by_memory_are_rejected_and_left_out_of_the_bound():
    cluster = sim.Cluster([sim.Node("a", "a", 4000, LINEAR, memory_mib=1024)])
    trace = sim.make_trace([("big", 1000, 0, 10, 4096), ("ok", 1000, 0, 10, 512)])
    res = sim.simulate(cluster, trace, FirstFit(), "on", np.random.default_rng(0))
    assert res.rejected == 1 and list(res.assignment) == [-1, 0]
    bound = sim.lower_bound_energy(cluster, "on", trace)[0]
    assert bound == pytest.approx(res.energy_j)  # one node, one pod of 1000m: both 125 W for 10 s


@pytest.mark.parametrize("seed", range(4))
def test_a_regime_independent_policy_gives_both_regimes_in_one_replay(seed):
    rng = np.random.default_rng(seed)
    cluster = sim.Cluster([node(f"n{i}", int(rng.integers(1, 5)), (LINEAR, CONCAVE)[i % 2]) for i in range(5)])
    pods = []
    for i in range(40):
        start = float(rng.integers(0, 100))
        pods.append((f"p{i}", int(rng.integers(1, 9)) * 125, start, start + float(rng.integers(1, 30))))
    trace = sim.make_trace(pods)
    on = sim.simulate(cluster, trace, pol.KubeDefault(), "on", np.random.default_rng(seed))
    off = sim.simulate(cluster, trace, pol.KubeDefault(), "off", np.random.default_rng(seed))
    assert list(on.assignment) == list(off.assignment)
    assert on.energy_by_regime["off"] == pytest.approx(off.energy_j)
    assert off.energy_by_regime["on"] == pytest.approx(on.energy_j)
    assert sim.simulate(cluster, trace, pol.GreedyTrue(), "on", np.random.default_rng(0)).energy_by_regime is None
