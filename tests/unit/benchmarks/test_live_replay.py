"""benchmarks/_live_replay.py: the live placement replay's pure pieces, and ``replay`` against an
in-memory API that binds as a scheduler would."""

from __future__ import annotations

import csv
import types

import _live_replay as live
import _placement_policies as policies
import numpy as np
import pytest
from _placement_sim import Cluster, Node, make_trace, simulate

WATTS_A = tuple(100.0 + 10.0 * i for i in range(11))  # 100 .. 200 W
WATTS_B = tuple(50.0 + 30.0 * i for i in range(11))  # 50 .. 350 W


def write_pods(path, rows):
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["name", "cpu_milli", "memory_mib", "creation_time", "deletion_time"])
        writer.writerows(rows)
    return path


# --- energy ---------------------------------------------------------------------------------------


def test_each_sample_is_the_average_power_of_the_interval_it_ends():
    # 10 s samples: 100 W over (0, 10], 200 W over (10, 20], 300 W over (20, 30]
    samples = [(10.0, 100.0), (20.0, 200.0), (30.0, 300.0)]
    assert live.integrate_power(samples, 0.0, 30.0, 10.0) == pytest.approx(6000.0)
    # a window inside the samples takes the overlaps: 5 s of 100 W, 10 s of 200 W, 2 s of 300 W
    assert live.integrate_power(samples, 5.0, 22.0, 10.0) == pytest.approx(500 + 2000 + 600)
    # repeated samples (two scrapes of one collectd value) count once; order does not matter
    assert live.integrate_power([*samples, (20.0, 200.0)][::-1], 0.0, 30.0, 10.0) == pytest.approx(6000.0)
    # the sample of (10, 20] was not kept (15 s scrapes of 10 s reads): its interval at the mean of
    # its neighbours', 200 W
    assert live.integrate_power([(10.0, 100.0), (30.0, 300.0)], 0.0, 30.0, 10.0) == pytest.approx(6000.0)
    # samples closer than the interval (a read that came late, then one on time) do not overlap
    assert live.integrate_power([(10.0, 100.0), (14.0, 200.0), (20.0, 300.0)], 0.0, 20.0, 10.0) == pytest.approx(
        1000.0 + 800.0 + 1800.0
    )


def test_a_window_the_samples_do_not_cover_or_a_gap_is_refused():
    samples = [(10.0, 100.0), (20.0, 200.0)]
    with pytest.raises(ValueError, match=r"cover \[0.0, 20.0\], not the window \[0.0, 25.0\]: query a wider range"):
        live.integrate_power(samples, 0.0, 25.0, 10.0)
    with pytest.raises(ValueError, match=r"cover \[0.0, 20.0\], not the window \[-1.0, 15.0\]"):
        live.integrate_power(samples, -1.0, 15.0, 10.0)
    with pytest.raises(ValueError, match=r"no sample between 10.0 and 40.0 \(interval 10.0 s\)"):
        live.integrate_power([(10.0, 1.0), (40.0, 1.0), (50.0, 1.0)], 5.0, 45.0, 10.0)
    # a gap outside the window is harmless
    assert live.integrate_power([(10.0, 1.0), (40.0, 1.0), (50.0, 2.0)], 42.0, 48.0, 10.0) == pytest.approx(12.0)
    with pytest.raises(ValueError, match="no samples"):
        live.integrate_power([], 0.0, 1.0, 10.0)
    with pytest.raises(ValueError, match="empty window"):
        live.integrate_power(samples, 5.0, 5.0, 10.0)


def test_cluster_energy_sums_the_packages_of_each_node_from_the_range_query():
    body = {
        "data": {
            "result": [
                {"metric": {"node": "a", "rapl": "package-0"}, "values": [[10, "100"], [20, "100"]]},
                {"metric": {"node": "a", "rapl": "package-1"}, "values": [[10, "50"], [20, "50"]]},
                {"metric": {"node": "b", "rapl": "package-0"}, "values": [[10, "10"], [20, "30"]]},
            ]
        }
    }
    asked = []

    def get(url):
        asked.append(url)
        return 200, live.json.dumps(body).encode()

    energy = live.cluster_energy(get, "http://prom:9090", ["a", "b"], 0.0, 20.0, 10.0)
    assert energy == {"a": pytest.approx(3000.0), "b": pytest.approx(400.0)}
    assert asked[0].startswith("http://prom:9090/api/v1/query?query=collectd_rapl_power")
    with pytest.raises(RuntimeError, match="no collectd_rapl_power.* series for node c"):
        live.cluster_energy(get, "http://prom:9090", ["c"], 0.0, 20.0, 10.0)
    with pytest.raises(RuntimeError, match="Prometheus answered 503"):
        live.cluster_energy(lambda _u: (503, b"down"), "http://prom:9090", ["a"], 0.0, 20.0, 10.0)


# --- the slice ------------------------------------------------------------------------------------


def test_a_slice_scales_requests_to_the_fill_and_compresses_the_clock(tmp_path):
    pods = write_pods(
        tmp_path / "pods.csv",
        [
            ("alive", 8000, 1000, 0, 7200),  # alive at the start: created at 0
            ("late", 4000, 2000, 1800, 3000),  # 1200 s long: 20 s live
            ("short", 4000, 0, 3100, 3160),  # 60 s: 1 s live, made min_live long
            ("after", 4000, 0, 3600, 9000),  # starts at the window's end: left out
        ],
    )
    piece = live.make_slice(pods, 600.0, 3000 / 3600, 50.0, 20_000, fill=0.6, min_live_s=5.0)
    trace = piece.trace
    assert len(trace) == 3 and piece.warm == 1 and piece.floored == 1
    assert piece.compression == pytest.approx(60.0) and piece.window == (600.0, 3600.0)
    # peak demand 8000 + 4000 = 12000 m (alive and late overlap), 60 % of 20000 m is 12000 m
    assert piece.scale == pytest.approx(1.0)
    assert list(trace.created) == pytest.approx([0.0, 20.0, 2500 / 60])
    assert list(trace.deleted) == pytest.approx([50.0, 40.0, 2500 / 60 + 5.0])  # alive: clipped at the end
    assert list(trace.cpu_m) == [8000, 4000, 4000] and list(trace.mem_mib) == [1000, 2000, 0]
    half = live.make_slice(pods, 600.0, 3000 / 3600, 50.0, 10_000, fill=0.6)
    assert list(half.trace.cpu_m) == [4000, 2000, 2000] and list(half.trace.mem_mib) == [500, 1000, 0]


def test_a_slice_says_what_is_wrong(tmp_path):
    pods = write_pods(tmp_path / "pods.csv", [("p", 1000, 0, 0, 100)])
    with pytest.raises(live.SliceError, match="no pod of the trace lives in .*choose another --start"):
        live.make_slice(pods, 5000.0, 1.0, 60.0, 1000)
    with pytest.raises(live.SliceError, match=r"fill must be in \(0, 1\], got 1.5"):
        live.make_slice(pods, 0.0, 1.0, 60.0, 1000, fill=1.5)
    with pytest.raises(live.SliceError, match="hours and seconds must be > 0"):
        live.make_slice(pods, 0.0, 1.0, 0.0, 1000)


def test_spread_pods_keeps_the_first_and_the_last_and_every_kth_between():
    trace = make_trace([(f"p{i}", 100, float(i), float(i) + 10, 0) for i in range(10)])
    piece = live.Slice(trace, 20.0, 1.0, 1.0, (0.0, 20.0), 0, 1)
    small = live.spread_pods(piece, 4)
    assert small.trace.names == ("p0", "p3", "p6", "p9") and small.warm == 1
    assert live.spread_pods(piece, 50).trace.names == trace.names


# --- the cluster ----------------------------------------------------------------------------------


def test_quantities_as_the_api_writes_them():
    assert live.cpu_m("32") == 32000 and live.cpu_m("31500m") == 31500 and live.cpu_m("1.5") == 1500
    assert live.memory_mib("127Gi") == 127 * 1024 and live.memory_mib("64Mi") == 64
    assert live.memory_mib("2048Ki") == 2 and live.memory_mib(str(3 * 2**20)) == 3
    assert live.memory_mib("1G") == 953


def test_the_simulators_cluster_is_made_of_the_live_nodes():
    servers = {"s1": types.SimpleNamespace(watts=WATTS_A), "s2": types.SimpleNamespace(watts=WATTS_B)}
    nodes = [
        {"name": "w2", "labels": {"srv": "s2"}, "allocatable": {"cpu": "16", "memory": "64Gi"}},
        {"name": "w1", "labels": {"srv": "s1"}, "allocatable": {"cpu": "32", "memory": "127Gi"}},
    ]
    cluster = live.cluster_of(nodes, servers, "srv")
    assert [(n.name, n.server_id, n.capacity_m, n.memory_mib) for n in cluster.nodes] == [
        ("w1", "s1", 32000, 127 * 1024),
        ("w2", "s2", 16000, 64 * 1024),
    ]
    assert cluster.nodes[1].watts == WATTS_B
    nodes.append({"name": "w3", "labels": {}, "allocatable": {"cpu": "1", "memory": "1Gi"}})
    with pytest.raises(live.SliceError, match="node w3: label srv=None names no server of the data set"):
        live.cluster_of(nodes, servers, "srv")


def pod(name, namespace, node, cpu=None, memory=None, phase="Running"):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container = types.SimpleNamespace(resources=types.SimpleNamespace(requests=requests))
    return types.SimpleNamespace(
        metadata=types.SimpleNamespace(name=name, namespace=namespace),
        spec=types.SimpleNamespace(node_name=node, containers=[container, container]),
        status=types.SimpleNamespace(phase=phase),
    )


def test_the_baseline_is_what_other_pods_request_on_each_node():
    pods = [
        pod("collectd", "monitoring", "w1", "100m", "64Mi"),  # two containers: 200m, 128Mi
        pod("nfd", "nfd", "w2", "5m"),
        pod("mine", live.NAMESPACE, "w1", "4"),  # the replay's own
        pod("done", "default", "w2", "1", phase="Succeeded"),
        pod("elsewhere", "default", "cp", "1"),
        pod("pending", "default", None, "1"),
    ]
    assert live.baseline(pods, ["w1", "w2"]) == ([200, 10], [128, 0])


def test_the_window_energy_pads_the_simulators_replay_with_the_baseline_power():
    cluster = Cluster([Node("w1", "s1", 10_000, WATTS_A), Node("w2", "s2", 10_000, WATTS_B)])
    trace = make_trace([("p", 5000, 10.0, 20.0, 0)])  # 50 % for 10 s of a 30 s window
    piece = live.Slice(trace, 30.0, 1.0, 1.0, (0.0, 30.0), 0, 0)
    got = live.simulate_window(cluster, piece, policies.GreedyTrue(), 0, ([1000, 0], [0, 0]))
    # w1 at 10 % (110 W) the whole window; w2 50 W; the pod on w1 (110 -> 160 W: +50 W) beats w2 (+150 W)
    assert got["assignment"] == {"p": "w1"}
    assert got["energy_j"] == pytest.approx(30 * (110 + 50) + 10 * 50)
    assert got["rejected"] == 0 and got["delayed"] == 0


# --- the policies as kube-scheduler runs them -------------------------------------------------------


def _linear(idle, peak):
    return {"kind": "linear", "params": {"idle_w": idle, "max_w": peak}}


def _piecewise(watts):
    return {"kind": "piecewise_linear", "params": {"knot_util": [0.0, 50.0, 100.0], "knot_watts": watts}}


def test_tas_on_the_jump_metric_ranks_by_a_one_cpu_pods_predicted_jump():
    cluster = Cluster([Node(f"n{i}", "s", 10_000, WATTS_A) for i in range(3)])
    # jump of 1 CPU (10 %) at 0 %: 10 W, 30 W, 20 W; node 2 has no model in the second case
    models = {0: _piecewise([0.0, 50.0, 500.0]), 1: _piecewise([0.0, 150.0, 200.0]), 2: _piecewise([0.0, 100.0, 200.0])}
    policy = policies.TasModelJump(models)
    policy.prepare(cluster, "on", np.random.default_rng(0))
    alloc = np.zeros(3, dtype=np.int64)
    feasible = np.ones(3, dtype=bool)
    assert list(policy.priorities(alloc, 3000, feasible)) == [10, 8, 9]
    # at 60 % node 0's curve is steep (90 W per CPU): it ranks last, whatever the pod's own size
    assert list(policy.priorities(np.array([6000, 0, 0]), 100, feasible)) == [8, 9, 10]
    # past 100 % the last slope continues
    assert policy.metric(0, 9500) == pytest.approx(45.0 + 45.0)
    no_model = policies.TasModelJump({0: models[0], 1: models[1]})
    no_model.prepare(cluster, "on", np.random.default_rng(0))
    assert list(no_model.priorities(alloc, 1000, feasible)) == [10, 9, 0]
    assert list(no_model.priorities(alloc, 1000, np.array([False, True, True]))) == [0, 10, 0]


def test_our_extenders_priorities_are_rank_nodes_scores_in_tenths():
    cluster = Cluster([Node(f"n{i}", "s", 10_000, WATTS_A) for i in range(3)])
    models = {0: _linear(100.0, 200.0), 1: _linear(100.0, 400.0)}  # 10 W and 30 W per CPU; node 2 none
    policy = policies.OursExtender(models)
    policy.prepare(cluster, "on", np.random.default_rng(0))
    scores = policy.priorities(np.zeros(3, dtype=np.int64), 1000, np.ones(3, dtype=bool))
    assert scores[0] > scores[1] and scores[2] == 5  # no model: the neutral priority
    assert scores[0] == 10


def test_registered_adds_the_extenders_priorities_times_weight_to_the_default_scores():
    # n0 is cheap but half full; n1 empty and dear. The default profile prefers the empty n1 (its
    # LeastAllocated and balance scores), a heavy extender weight prefers n0.
    cluster = Cluster([Node("n0", "s", 10_000, WATTS_A, 10_000), Node("n1", "s", 10_000, WATTS_A, 10_000)])
    models = {0: _linear(100.0, 110.0), 1: _linear(100.0, 1000.0)}
    alloc = np.array([5000, 0], dtype=np.int64)
    feasible = np.ones(2, dtype=bool)

    def pick(weight):
        policy = policies.Registered(policies.OursExtender(models), weight, "ours")
        policy.prepare(cluster, "on", np.random.default_rng(0))
        policy.mem_alloc = np.zeros(2, dtype=np.int64)
        policy.mem_request = 0
        return policy.choose(alloc, 1000, feasible)

    default = policies.KubeDefault()
    default.prepare(cluster, "on", np.random.default_rng(0))
    assert default.choose(alloc, 1000, feasible) == 1
    assert pick(0) == 1 and pick(5) == 0
    # and in a replay it runs as any policy
    trace = make_trace([("a", 1000, 0.0, 5.0, 0), ("b", 1000, 1.0, 5.0, 0)])
    result = simulate(
        cluster, trace, policies.Registered(policies.OursExtender(models), 5, "ours"), "on", np.random.default_rng(0)
    )
    assert list(result.assignment) == [0, 0]


# --- the table ------------------------------------------------------------------------------------


def test_rows_compare_each_policy_with_default_on_each_side_and_the_order():
    live_side = {
        "default": {"energy_j": 3600.0 * 100, "delayed": 0, "rejected": 0},
        "ours": {"energy_j": 3600.0 * 90, "delayed": 1, "rejected": 0},
    }
    sim_side = {
        "default": {"energy_j": 3600.0 * 200, "delayed": 0, "rejected": 0},
        "ours": {"energy_j": 3600.0 * 184, "delayed": 0, "rejected": 2},
    }
    rows = live.comparison_rows(live_side, sim_side)
    assert rows[1]["live_vs"] == pytest.approx(-10.0) and rows[1]["sim_vs"] == pytest.approx(-8.0)
    assert rows[1]["gap_pp"] == pytest.approx(-2.0) and rows[0]["gap_pp"] == pytest.approx(0.0)
    assert live.order_agrees(rows)
    table = live.markdown(rows)
    assert "| ours | 90.00 | -10.00 % | 184.00 | -8.00 % | -2.00 pp | 1 / 0 | 0 / 2 |" in table
    sim_side["ours"]["energy_j"] = 3600.0 * 201
    assert not live.order_agrees(live.comparison_rows(live_side, sim_side))
    assert "| n/a |" not in table
    alone = live.comparison_rows({"ours": live_side["ours"]}, {})
    assert alone[0]["live_vs"] is None and "n/a" in live.markdown(alone)
    # a second simulation (the policies on current telemetry) as the last column
    current = {"default": {"energy_j": 100.0}, "ours": {"energy_j": 95.0}}
    rows = live.comparison_rows(live_side, sim_side, current=current)
    assert rows[1]["cur_vs"] == pytest.approx(-5.0) and "cur_vs" not in alone[0]
    table = live.markdown(rows)
    assert table.splitlines()[0].endswith("| sim vs default, current telemetry |")
    assert table.splitlines()[-1].endswith("| 1 / 0 | 0 / 2 | -5.00 % |")
    assert "cur_vs" not in live.comparison_rows(live_side, sim_side, current={"ours": current["ours"]})[1]


# --- the replay against an in-memory API ------------------------------------------------------------


class FakeCore:
    """Pods bound at creation to the node with the fewest pods (a scheduler), or never (pending)."""

    def __init__(self, nodes, pending=()):
        self.nodes = nodes
        self.pending = set(pending)
        self.pods = {}
        self.log = []

    def create_namespaced_pod(self, namespace, body):
        name = body["metadata"]["name"]
        assert name not in self.pods
        self.log.append(("create", name))
        node = None
        if name not in self.pending:
            node = min(self.nodes, key=lambda n: (sum(1 for v in self.pods.values() if v == n), n))
        self.pods[name] = node
        assert body["spec"]["terminationGracePeriodSeconds"] == 0
        assert body["metadata"]["labels"]["telemetry-policy"] == "p"
        assert body["spec"]["schedulerName"] == "s"
        resources = body["spec"]["containers"][0]["resources"]
        assert resources == {"requests": {"cpu": "100m", "memory": "0Mi"}, "limits": {"telemetry/scheduling": "1"}}

    def read_namespaced_pod(self, name, namespace):
        return types.SimpleNamespace(spec=types.SimpleNamespace(node_name=self.pods[name]))

    def delete_namespaced_pod(self, name, namespace, grace_period_seconds):
        self.log.append(("delete", name))
        del self.pods[name]


def test_replay_creates_and_deletes_in_order_and_leaves_nothing():
    trace = make_trace(
        [("w1", 100, 0.0, 0.3, 0), ("w2", 100, 0.0, 0.5, 0), ("a", 100, 0.1, 0.3, 0), ("b", 100, 0.3, 0.5, 0)]
    )
    piece = live.Slice(trace, 0.5, 1.0, 1.0, (0.0, 0.5), 0, 2)
    core = FakeCore(["n1", "n2"], pending={"b"})
    limits = {"telemetry/scheduling": "1"}
    labels = {"telemetry-policy": "p"}
    result = live.replay(core, piece, "x", labels, "s", bind_wait=0.05, settle=0.0, limits=limits, log=lambda _m: None)
    # warm pods first, then the events; at 0.3 the deletions before the creation; the rest at the end
    assert core.log == [
        ("create", "w1"),
        ("create", "w2"),
        ("create", "a"),
        ("delete", "w1"),
        ("delete", "a"),
        ("create", "b"),
        ("delete", "w2"),
        ("delete", "b"),
    ]
    assert core.pods == {}
    assert result.assignment == {"w1": "n1", "w2": "n2", "a": "n1"}
    assert result.rejected == 1 and result.delayed == 0
    assert result.t1 - result.t0 == pytest.approx(0.5)


def test_tas_on_lagged_telemetry_sees_the_cluster_as_it_was():
    # TAS's metric is power over the node's maximum: empty, a shows 100/200 W = 50 %, b 50/350 W =
    # 14 %. 3-CPU pods 1 s apart. With current telemetry: b (40 %), b (66 %), then a (50 % < 66 %:
    # 65 %), a (65 % < 66 %). With telemetry 10 s old every pod sees the empty cluster and goes to b
    # until b is full: herding.
    cluster = Cluster([Node("a", "s", 10_000, WATTS_A), Node("b", "s", 10_000, WATTS_B)])
    trace = make_trace([(f"p{i}", 3000, float(i), 50.0, 0) for i in range(4)])

    def placements(tas, lag):
        tas.lag_s = lag
        return list(simulate(cluster, trace, tas, "on", np.random.default_rng(0)).assignment)

    assert placements(policies.TasPower(), 0.0) == [1, 1, 0, 0]
    assert placements(policies.TasPower(), 10.0) == [1, 1, 1, 0]
    # one policy object, two replays: the history starts again with each
    tas = policies.TasPower()
    assert placements(tas, 10.0) == placements(tas, 10.0) == [1, 1, 1, 0]
    # as registered, the wrapper passes the clock and the history on to TAS: the start, then one
    # entry per event (four creations; the deletions at 50 s end the window)
    registered = policies.Registered(policies.TasPower(), 1, "tas-power")
    registered.extender.lag_s = 10.0
    simulate(cluster, trace, registered, "on", np.random.default_rng(0))
    assert [h[0] for h in registered.extender.history] == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert registered.extender.now == 3.0


# --- telemetry as deployed: load-watcher's average for Peaks ---------------------------------------


def test_telemetry_age_is_half_of_every_period_on_the_path():
    # collectd 10 s, scrape 15 s, rule evaluation 15 s, TAS's 2 s sync: 5 + 7.5 + 7.5 + 1
    assert policies.telemetry_age_s(10.0, 15.0, 15.0, 2.0) == pytest.approx(21.0)
    assert policies.telemetry_age_s(10.0, 15.0, 15.0) == pytest.approx(20.0)


def test_window_mean_is_the_time_average_of_the_steps_it_covers():
    times = np.array([-100.0, 0.0, 10.0])
    values = np.array([[0.0, 50.0], [100.0, 50.0], [40.0, 0.0]])
    # [-20, 20]: 20 s at 0, 10 s at 100, 10 s at 40 -> 35; the other node 30 s at 50, 10 s at 0
    assert list(live_mean := policies.window_mean(times, values, -20.0, 20.0)) == pytest.approx([35.0, 37.5])
    assert live_mean.dtype == np.float64
    # what is before the first sample is unknown: the average over what is there
    assert list(policies.window_mean(times, values, -1000.0, 0.0)) == pytest.approx([0.0, 50.0])
    assert list(policies.window_mean(times, values, -300.0, -200.0)) == pytest.approx([0.0, 50.0])
    # the last value holds for ever; an empty range gives the value at its end
    assert list(policies.window_mean(times, values, 50.0, 60.0)) == pytest.approx([40.0, 0.0])
    assert list(policies.window_mean(times, values, 5.0, 5.0)) == pytest.approx([100.0, 50.0])


def test_the_utilisation_before_a_replay_comes_from_prometheus_on_one_grid():
    body = {
        "data": {
            "result": [
                {"metric": {"instance": "a", "node": "a"}, "values": [[970, "0.5"], [985, "0.25"]]},
                {"metric": {"instance": "b", "node": "b"}, "values": [[975, "0.1"]]},
            ]
        }
    }
    asked = []

    def get(url):
        asked.append(url)
        return 200, live.json.dumps(body).encode()

    times, values = live.utilisation_before(get, "http://prom:9090", ["a", "b"], 1000.0, 60.0)
    assert "query=instance%3Anode_cpu%3Aratio%5B60s%5D" in asked[0] and "time=1000.000" in asked[0]
    assert list(times) == [-30.0, -25.0, -15.0]
    # percent; b has no sample at -30 s yet and takes its first, a carries 50 % to -25 s
    assert values.tolist() == [[50.0, 10.0], [50.0, 10.0], [25.0, 10.0]]
    with pytest.raises(RuntimeError, match="no instance:node_cpu:ratio before the replay for c"):
        live.utilisation_before(get, "http://prom:9090", ["a", "c"], 1000.0, 60.0)
    with pytest.raises(RuntimeError, match="Prometheus answered 500"):
        live.utilisation_before(lambda _u: (500, b"x"), "http://prom:9090", ["a"], 1000.0, 60.0)


def _peaks(k1=10.0, k2=0.03):
    return {"kind": "peaks", "params": {"k0": 50.0, "k1": k1, "k2": k2}}


def test_peaks_on_load_watchers_average_sees_the_last_fetch_of_the_window():
    cluster = Cluster([Node("a", "s", 10_000, WATTS_A), Node("b", "s", 10_000, WATTS_A)])
    peaks = policies.UpstreamPeaks({0: _peaks(), 1: _peaks()})
    peaks.window_s, peaks.fetch_s, peaks.poll_s, peaks.delay_s = 100.0, 60.0, 30.0, 10.0
    # before the replay: a at 80 % for the last 100 s, b at 0 %
    peaks.before = (np.array([-500.0, -100.0]), np.array([[0.0, 0.0], [80.0, 0.0]]))
    peaks.prepare(cluster, "on", np.random.default_rng(0))
    peaks.fetch_phase, peaks.poll_phase = 0.0, 0.0
    peaks.observe(0.0, np.array([0, 5000]), None)  # from 0 s: a empty, b half full
    peaks.now = 29.0  # Peaks' copy is of the fetch at 0 s: [-110, -10] -> a 80 % (90 of 100 s) ...
    assert list(peaks.utilisation(np.array([0, 5000]))) == pytest.approx([72.0, 0.0])
    peaks.now = 119.0  # ... the fetch at 60 s: [-50, 50] -> a 40 %, b 25 %
    assert list(peaks.utilisation(np.array([0, 5000]))) == pytest.approx([40.0, 25.0])
    peaks.now = 121.0  # the poll at 120 s copies the fetch at 120 s: [10, 110] -> a 0 %, b 50 %
    assert list(peaks.utilisation(np.array([0, 5000]))) == pytest.approx([0.0, 50.0])
    # on the current utilisation (the default), what the requests say now
    current = policies.UpstreamPeaks({0: _peaks(), 1: _peaks()})
    current.prepare(cluster, "on", np.random.default_rng(0))
    assert list(current.utilisation(np.array([0, 5000]))) == pytest.approx([0.0, 50.0])


def test_peaks_on_a_stale_average_herds_where_current_utilisation_spreads():
    # Two equal nodes with a convex model, both empty. On current utilisation each 2-CPU pod goes to
    # the emptier node (2 and 2). On load-watcher's average of a past in which b was busy, b looks
    # dearer until the next fetch: every pod goes to a.
    cluster = Cluster([Node("a", "s", 10_000, WATTS_A), Node("b", "s", 10_000, WATTS_A)])
    trace = make_trace([(f"p{i}", 2000, float(i), 50.0, 0) for i in range(4)])
    models = {0: _peaks(), 1: _peaks()}

    def run(window):
        peaks = policies.UpstreamPeaks(models)
        if window:
            peaks.window_s, peaks.fetch_s, peaks.poll_s = 900.0, 60.0, 30.0
            peaks.before = (np.array([-1000.0]), np.array([[0.0, 50.0]]))
        return peaks, simulate(cluster, trace, peaks, "on", np.random.default_rng(1))

    _current, now = run(False)
    assert sorted(np.bincount(now.assignment, minlength=2)) == [2, 2]
    stale, herded = run(True)
    assert list(herded.assignment) == [0, 0, 0, 0]
    assert len(stale.served) == 1  # one fetch served the whole replay (4 s)
