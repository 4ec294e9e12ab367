"""Live placement replay: a slice of the Alibaba trace through the lab's real schedulers, once per
policy, energy measured from the nodes' power through Prometheus, beside the simulator on the
same slice, cluster and policies (issue 15; docs/placement-benchmark.md, "Live replay").

    make lab-down && .venv/bin/python -m lab up --workers 8 --server-types 4
    .venv/bin/python benchmarks/live_placement.py --data ../shared/data --prepare

Not part of ``make test`` (an hour on this machine; its 20-pod smoke version is, in
tests/integration/test_power_extender.py) nor of ``make bench`` (it needs the lab); ``make live-bench``
runs it. Steps:

1. ``--prepare``: site.yml on the lab (every node: the inventory of the lab's shape is written to the
   output directory), a load sweep on every worker and the power models play fitted from the
   sweep's own Prometheus data (models on every worker: node annotations for our extender, the
   recorded jump metric for TAS, the ConfigMap for Peaks), the Peaks play.
2. Two TAS policies of the ``tas_policy`` role: ``live-tas-power`` (``package_power_avg``, TAS's power
   demo) and ``live-tas-jump`` (``power_model_jump_watts``, the power models' metric), both
   ``scheduleonmetric LessThan`` without ``dontschedule`` (the simulator's TAS has none).
3. Per policy, the slice (``_live_replay.make_slice``: requests scaled to the cluster, the window
   compressed to ``--minutes``) is replayed by ``_live_replay.replay``: ``default`` (no label: TAS
   answers nothing for a pod without a policy), ``tas-power`` and ``tas-jump`` (the pods' label
   ``telemetry-policy``), ``peaks`` (``schedulerName: Peaks``), ``ours`` (kube-scheduler re-registered
   with our extender by playbooks/scheduler_extender.yml, TAS registered again afterwards).
4. The energy of the workers in the window from ``collectd_rapl_power`` (Prometheus' raw samples,
   ``_live_replay.cluster_energy``); the simulator on the same slice, with the live nodes' servers,
   capacities and the published models, each policy as kube-scheduler runs it (``Registered``:
   the default profile's scores plus the extender's priorities x weight).

Output (``--out``, default benchmarks/results): live-placement.md (table), .json, .png (chart).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # sibling helpers when run as a script
sys.path.insert(0, str(ROOT))  # the checkout: lab.specpower

import _live_replay as live  # noqa: E402
import _placement_policies as policies  # noqa: E402
import _placement_sim as sim  # noqa: E402

from lab import specpower  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
POLICIES = ("default", "tas-power", "tas-jump", "peaks", "ours")
SERVER_LABEL = "lab.poweraware.io/specpower-server"
ANNOTATION = "poweraware.io/power-model"
PEAKS_CONFIGMAP = ("kube-system", "peaks-node-power-model", "power_model")
TAS_POLICIES = {
    "tas-power": ("live-tas-power", "package_power_avg"),
    "tas-jump": ("live-tas-jump", "power_model_jump_watts"),
}
TAS_WEIGHT, OURS_WEIGHT = 1, 5  # scheduler_extender's registrations (roles/scheduler_extender/defaults)
COLLECTD_INTERVAL = 10.0  # collectd_interval's default
# The telemetry path as site.yml deploys it: Prometheus' scrape and rule evaluation intervals
# (prometheus_scrape_interval, prometheus_evaluation_interval), TAS's --syncPeriod (tas_sync_period),
# load-watcher's window and fetch period (roles/peaks/templates/load-watcher.yml.j2) and Peaks' poll
# of load-watcher (scheduler-plugins pkg/trimaran/collector.go metricsUpdateIntervalSeconds).
SCRAPE_S, EVALUATION_S, TAS_SYNC_S = 15.0, 15.0, 2.0
LOAD_WATCHER_WINDOW_S, LOAD_WATCHER_FETCH_S, PEAKS_POLL_S = 900.0, 60.0, 30.0
TAS_AGE_S = policies.telemetry_age_s(COLLECTD_INTERVAL, SCRAPE_S, EVALUATION_S, TAS_SYNC_S)
UTILISATION_AGE_S = policies.telemetry_age_s(COLLECTD_INTERVAL, SCRAPE_S, EVALUATION_S)
SWEEP_LEVELS = (0, 20, 40, 60, 80, 100)
SWEEP_HOLD_S = 30


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    data = pathlib.Path(os.environ.get("SHARED_DATA", ROOT.parent / "shared" / "data"))
    parser.add_argument("--data", type=pathlib.Path, default=data, help="the shared data folder")
    parser.add_argument("--lab-dir", type=pathlib.Path, default=ROOT / ".cache" / "lab")
    parser.add_argument("--start", type=float, default=12_240_000.0, help="window start (trace seconds)")
    parser.add_argument("--hours", type=float, default=12.0, help="window length (trace hours)")
    parser.add_argument("--minutes", type=float, default=6.0, help="the window's length live")
    parser.add_argument("--fill", type=float, default=0.7, help="peak CPU demand over the workers' capacity")
    parser.add_argument("--min-live", type=float, default=5.0, help="shortest pod life live (seconds)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--prepare", action="store_true", help="converge site.yml, sweep, fit models, deploy Peaks")
    parser.add_argument("--sim-seeds", type=int, default=5, help="tie-break seeds of the simulator (median reported)")
    parser.add_argument(
        "--tas-lags", default="0,10,20,30,60", help="TAS telemetry ages (live seconds) for the simulator's lag table"
    )
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.policies.split(",")) - set(POLICIES))
    if unknown or "default" not in args.policies.split(","):
        parser.error(f"--policies: choose among {', '.join(POLICIES)}, with default (the reference); got {unknown}")
    return args


class LabAccess:
    """The running lab: API clients, the lab network (for Prometheus' pod address), the inventory."""

    def __init__(self, state_dir: pathlib.Path):
        from kubernetes import client, config

        from lab import cluster
        from lab.components import network

        self.lab = cluster.Lab.from_state(state_dir, log=lambda _m: None)
        if self.lab is None:
            raise SystemExit(f"no lab in {state_dir}: start one with `python -m lab up --workers 8 --server-types 4`")
        self._network = network
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(state_dir / "kubeconfig"), client_configuration=configuration)
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.config = self.lab.config

    def http_get(self, url: str, timeout: float = 30.0) -> tuple[int, bytes]:
        network = self._network
        return network.http_get(network.netns_path(self.lab.processes["network"]["pid"]), url, timeout)

    def prometheus(self) -> str:
        pods = self.core.list_namespaced_pod("monitoring", label_selector="app.kubernetes.io/name=prometheus").items
        running = [p for p in pods if p.status.pod_ip and p.status.phase == "Running"]
        if not running:
            raise SystemExit("no running Prometheus in namespace monitoring: run with --prepare (site.yml)")
        return f"http://{running[0].status.pod_ip}:9090"

    def inventory(self, out: pathlib.Path) -> list[str]:
        """``-i`` arguments: the lab's inventory, and the workers it does not list in a file beside."""
        base = ROOT / "inventory" / "lab" / "hosts.yml"
        listed = base.read_text()
        extra = {
            node.name: {"ansible_host": node.address}
            for node in self.config.nodes
            if not node.control_plane and f"{node.name}:" not in listed
        }
        args = ["-i", str(base)]
        if extra:
            # inventory/lab's group_vars find the key and known_hosts relative to the inventory's
            # folder; the hosts added here name them absolutely.
            ssh = self.lab.paths.state_dir / "ssh"
            for host in extra.values():
                host["ansible_ssh_private_key_file"] = str(ssh / "id_ed25519")
                host["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={ssh / 'known_hosts'} -o IdentitiesOnly=yes"
            path = out / "live-placement-inventory.yml"
            tree = {"all": {"children": {"k8s_cluster": {"children": {"kube_node": {"hosts": extra}}}}}}
            path.write_text(json.dumps(tree, indent=2) + "\n")
            args += ["-i", str(path)]
        return args

    def workers(self) -> list[dict]:
        found = []
        for node in self.core.list_node().items:
            if "node-role.kubernetes.io/control-plane" in (node.metadata.labels or {}):
                continue
            found.append(
                {
                    "name": node.metadata.name,
                    "labels": node.metadata.labels or {},
                    "annotations": node.metadata.annotations or {},
                    "allocatable": node.status.allocatable,
                }
            )
        return sorted(found, key=lambda n: n["name"])


def playbook(inventory: list[str], name: str, extra: dict | None = None, tags: str | None = None) -> None:
    cmd = [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), *inventory, str(ROOT / name)]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    if tags:
        cmd += ["--tags", tags]
    log(f"ansible-playbook {name} {json.dumps(extra or {})} {tags or ''}")
    started = time.monotonic()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(f"{name} failed (rc {result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    log(f"  done in {time.monotonic() - started:.0f} s")


def sweep(access: LabAccess, workers: list[dict]) -> None:
    """Every worker through SWEEP_LEVELS of its allocatable CPU (half the workers upwards, half
    downwards), SWEEP_HOLD_S each: the samples the power models are fitted from."""
    core = access.core
    names = []
    try:
        for step in range(len(SWEEP_LEVELS)):
            for i, node in enumerate(workers):
                level = SWEEP_LEVELS[step if i % 2 == 0 else -1 - step]
                name = f"lp-sweep-{i}-{step}"
                if level:
                    millicores = live.cpu_m(node["allocatable"]["cpu"]) * level // 100
                    body = live.pod_manifest(name, millicores, 0, {"app": "power-model-sweep"}, None)
                    body["spec"]["nodeName"] = node["name"]
                    core.create_namespaced_pod(live.NAMESPACE, body)
                    names.append(name)
                previous = f"lp-sweep-{i}-{step - 1}"
                if step and previous in names:
                    core.delete_namespaced_pod(previous, live.NAMESPACE, grace_period_seconds=0)
            time.sleep(SWEEP_HOLD_S)
    finally:
        core.delete_collection_namespaced_pod(live.NAMESPACE, label_selector="app=power-model-sweep")


def ensure_namespace(core, timeout: float = 120.0) -> None:
    """The replay's namespace, once the previous run's is gone (deleting one takes a while)."""
    from kubernetes.client.rest import ApiException

    deadline = time.monotonic() + timeout
    while True:
        try:
            core.create_namespace({"metadata": {"name": live.NAMESPACE}})
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
        if core.read_namespace(live.NAMESPACE).status.phase != "Terminating":
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"namespace {live.NAMESPACE} still terminating after {timeout:.0f} s")
        time.sleep(2.0)


def prepare(access: LabAccess, inventory: list[str], out: pathlib.Path) -> None:
    playbook(inventory, "site.yml")
    ensure_namespace(access.core)
    workers = access.workers()
    log(f"load sweep on {len(workers)} workers ({len(SWEEP_LEVELS) * SWEEP_HOLD_S} s)")
    started = time.time()
    sweep(access, workers)
    minutes = int((time.time() - started) / 60) + 2
    playbook(
        inventory,
        "playbooks/power_models.yml",
        {"power_models_window": f"{minutes}m", "power_models_step": "10s", "power_models_min_samples": 10},
    )
    playbook(
        inventory,
        "playbooks/peaks.yml",
        {"poweraware_enable_peaks": True, "peaks_load_watcher_image": "localhost:5000/load-watcher"},
    )


def models_of(access: LabAccess, workers: list[dict]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(our models from the node annotations, Peaks' from its ConfigMap), by worker index."""
    ours = {}
    for i, node in enumerate(workers):
        text = node["annotations"].get(ANNOTATION)
        if text:
            ours[i] = json.loads(text)
    namespace, name, key = PEAKS_CONFIGMAP
    from kubernetes.client.rest import ApiException

    try:
        data = json.loads(access.core.read_namespaced_config_map(name, namespace).data[key])
    except ApiException as exc:
        if exc.status != 404:
            raise
        data = {}
    # {"<node>": {"k0": .., "k1": .., "k2": ..}} (docs/power-models.md)
    peaks = {i: {"kind": "peaks", "params": data[n["name"]]} for i, n in enumerate(workers) if n["name"] in data}
    return ours, peaks


def sim_policy(name: str, ours: dict, peaks: dict, lag_s: float = 0.0, before=None) -> sim.Policy:
    """The simulator's policy as the lab's kube-scheduler runs it. ``lag_s``: TAS's telemetry age;
    ``before``: Peaks on load-watcher's 15-minute average, with the utilisation measured before the
    replay (``_live_replay.utilisation_before``); without it, Peaks on the current utilisation."""
    if name == "default":
        return policies.KubeDefault()
    if name in TAS_POLICIES:
        tas = policies.TasPower() if name == "tas-power" else policies.TasModelJump(ours)
        tas.lag_s = lag_s
        return policies.Registered(tas, TAS_WEIGHT, name)
    if name == "peaks":
        upstream = policies.UpstreamPeaks(peaks)
        if before is not None:
            upstream.window_s, upstream.delay_s = LOAD_WATCHER_WINDOW_S, UTILISATION_AGE_S
            upstream.fetch_s, upstream.poll_s = LOAD_WATCHER_FETCH_S, PEAKS_POLL_S
            upstream.before = before
        return upstream
    return policies.Registered(policies.OursExtender(ours), OURS_WEIGHT, name)


def simulate_median(
    cluster, piece, name, ours, peaks, seeds: int, initial=None, lag_s: float = 0.0, before=None
) -> dict:
    """The run of median energy among ``seeds`` tie-break seeds, with the spread of all."""
    runs = [
        live.simulate_window(cluster, piece, sim_policy(name, ours, peaks, lag_s, before), seed, initial)
        for seed in range(seeds)
    ]
    runs.sort(key=lambda r: r["energy_j"])
    chosen = dict(runs[len(runs) // 2])
    chosen["seed_spread_j"] = runs[-1]["energy_j"] - runs[0]["energy_j"]
    return chosen


def scheduler(inventory: list[str], service: str) -> None:
    extra = {"scheduler_extender_service": service}
    if service == "tas":
        extra["power_extender_state"] = "absent"
    playbook(inventory, "playbooks/scheduler_extender.yml", extra)


def run_policy(access: LabAccess, piece: live.Slice, name: str) -> live.LiveResult:
    labels, scheduler_name, limits = {}, None, None
    if name in TAS_POLICIES:  # a TAS pod: its policy's label, and TAS's resource (its managedResources)
        labels = {"telemetry-policy": TAS_POLICIES[name][0]}
        limits = {"telemetry/scheduling": "1"}
    if name == "peaks":
        scheduler_name = "Peaks"
    live.wait_empty(access.core)
    steady = COLLECTD_INTERVAL + 5  # one exporter interval of steady load on either side of the window
    try:
        result = live.replay(
            access.core, piece, name, labels, scheduler_name, settle=steady, hold=steady, limits=limits, log=log
        )
    finally:  # whatever happened, the namespace empty again
        access.core.delete_collection_namespaced_pod(live.NAMESPACE, grace_period_seconds=0)
        live.wait_empty(access.core)
    wait = result.t1 + 2 * COLLECTD_INTERVAL + 20 - time.time()  # one collectd interval and one scrape after the end
    if wait > 0:
        time.sleep(wait)
    nodes = sorted({*result.assignment.values()} | {w["name"] for w in access.workers()})
    energy = live.cluster_energy(access.http_get, access.prometheus(), nodes, result.t0, result.t1, COLLECTD_INTERVAL)
    result.node_energy_j = energy
    result.energy_j = sum(energy.values())
    log(f"{name}: {result.energy_j / 3600:.2f} Wh")
    return result


def chart(rows: list[dict], path: pathlib.Path) -> None:
    """Bars per policy: the change against default live, simulated with telemetry as deployed, and
    simulated on current telemetry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["policy"] for r in rows]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(x - 0.27, [r["live_vs"] for r in rows], 0.27, label="live (lab)")
    ax.bar(x, [r.get("sim_vs") or 0.0 for r in rows], 0.27, label="simulator, telemetry as deployed")
    ax.bar(x + 0.27, [r.get("cur_vs") or 0.0 for r in rows], 0.27, label="simulator, current telemetry")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, names)
    ax.set_ylabel("energy vs default (%)")
    ax.set_title("Live placement replay vs simulator, same slice and cluster")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    access = LabAccess(args.lab_dir)
    inventory = access.inventory(args.out)
    ensure_namespace(access.core)
    if args.prepare:
        prepare(access, inventory, args.out)
    chosen = args.policies.split(",")
    try:
        return measure(args, access, inventory, chosen)
    finally:  # the benchmark's TAS policies and namespace go; the stack stays as site.yml made it
        from kubernetes.client.rest import ApiException

        for name in [n for n in chosen if n in TAS_POLICIES]:
            tas_policy(inventory, name, "absent")
        try:
            access.core.delete_namespace(live.NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise


def tas_policy(inventory: list[str], name: str, state: str) -> None:
    policy, metric = TAS_POLICIES[name]
    playbook(
        inventory,
        "playbooks/cluster_stack.yml",
        {
            "tas_policy_name": policy,
            "tas_policy_namespace": live.NAMESPACE,
            "tas_policy_metric": metric,
            "tas_policy_dontschedule_enabled": False,
            "tas_policy_state": state,
        },
        tags="tas_policy",
    )


def measure(args: argparse.Namespace, access: LabAccess, inventory: list[str], chosen: list[str]) -> int:
    """Every chosen policy live and simulated; the tables, the JSON and the chart."""
    for name in chosen:
        if name in TAS_POLICIES:
            tas_policy(inventory, name, "present")
    workers = access.workers()
    servers = {s.id: s for s in specpower.load_servers(args.data / "specpower" / "servers.csv")}
    cluster = live.cluster_of(workers, servers, SERVER_LABEL)
    ours, peaks = models_of(access, workers)
    if "peaks" in chosen and not peaks:
        log("peaks: no Peaks models published (run with --prepare): left out")
        chosen.remove("peaks")
    piece = live.make_slice(
        args.data / "alibaba-openb" / "pods.csv",
        args.start,
        args.hours,
        args.minutes * 60.0,
        cluster.total_capacity_m,
        args.fill,
        args.min_live,
    )
    log(
        f"slice: {len(piece.trace)} pods ({piece.warm} at the start, {piece.floored} made {args.min_live:.0f} s long), "
        f"requests x {piece.scale:.3f}, {piece.compression:.0f} trace s per live s, on {len(cluster)} workers"
    )
    measured, simulated, baselines, before = {}, {}, {}, None
    for name in chosen:
        live.wait_empty(access.core)
        names = [n.name for n in cluster.nodes]
        initial = live.baseline(access.core.list_pod_for_all_namespaces().items, names)
        simulated[name] = simulate_median(cluster, piece, name, ours, peaks, args.sim_seeds, initial)
        baselines[name] = initial
        if name == "ours":
            scheduler(inventory, "poweraware")
        try:
            result = run_policy(access, piece, name)
        finally:
            if name == "ours":
                scheduler(inventory, "tas")
        if name == "peaks":  # what load-watcher averaged when the replay began, for the simulator
            span = LOAD_WATCHER_WINDOW_S + LOAD_WATCHER_FETCH_S + PEAKS_POLL_S + UTILISATION_AGE_S + 60.0
            before = live.utilisation_before(access.http_get, access.prometheus(), names, result.t0, span)
        measured[name] = {
            "energy_j": result.energy_j,
            "delayed": result.delayed,
            "rejected": result.rejected,
            "node_energy_j": result.node_energy_j,
            "window": [result.t0, result.t1],
            "assignment": result.assignment,
        }
    # The simulator with each policy's telemetry as the stack delivers it: TAS's metric TAS_AGE_S
    # old, Peaks' utilisation load-watcher's 15-minute average (default and ours read the API's
    # requests, which have no delay); the table's "sim" column. ``simulated`` (current telemetry)
    # is the last column.
    deployed = dict(simulated)
    for name in [n for n in chosen if n in TAS_POLICIES or n == "peaks"]:
        deployed[name] = simulate_median(
            cluster, piece, name, ours, peaks, args.sim_seeds, baselines[name], TAS_AGE_S, before
        )
    # on the same server model: kube-scheduler and the simulator may take either of two identical nodes
    model = {n.name: n.server_id for n in cluster.nodes}
    for name, got in measured.items():
        placed = deployed[name]["assignment"]
        assignment = got.pop("assignment")
        same = sum(1 for pod, node in assignment.items() if model.get(placed.get(pod)) == model[node])
        got["same_model_as_sim"] = same
    rows = live.comparison_rows(measured, deployed, current=simulated)
    table = live.markdown(rows)
    agree = live.order_agrees(rows)
    agree_current = live.order_agrees(live.comparison_rows(measured, simulated))
    header = (
        f"Slice: trace [{piece.window[0]:.0f}, {piece.window[1]:.0f}) s, {len(piece.trace)} pods "
        f"({piece.warm} alive at the start), requests x {piece.scale:.3f}, {args.minutes:g} min live; "
        f"{len(cluster)} workers ({', '.join(sorted({n.server_id for n in cluster.nodes}))}).\n"
        f"Simulator (sim): telemetry as deployed (TAS's metric {TAS_AGE_S:g} s old, Peaks on load-watcher's "
        f"{LOAD_WATCHER_WINDOW_S / 60:g}-minute average); last column: every policy on current telemetry.\n"
        f"Pods on the server model the simulator chose: "
        + ", ".join(f"{k} {v['same_model_as_sim']}/{len(piece.trace)}" for k, v in measured.items())
        + f"\nOrder of the policies live and simulated agrees: {agree} (current telemetry: {agree_current})\n"
    )
    lag_rows = []
    for name in [n for n in chosen if n in TAS_POLICIES]:
        row = {"policy": name, "live_vs": live.saving(measured[name]["energy_j"], measured["default"]["energy_j"])}
        for lag in [float(x) for x in args.tas_lags.split(",") if x]:
            run = simulate_median(cluster, piece, name, ours, peaks, args.sim_seeds, baselines[name], lag)
            row[lag] = live.saving(run["energy_j"], simulated["default"]["energy_j"])
        lag_rows.append(row)
    lags = [float(x) for x in args.tas_lags.split(",") if x]
    lag_table = "\n".join(
        [
            "| TAS policy | live vs default | " + " | ".join(f"sim, telemetry {lag:g} s old" for lag in lags) + " |",
            "|---|---:|" + "---:|" * len(lags),
            *(
                f"| {r['policy']} | {r['live_vs']:+.2f} % | " + " | ".join(f"{r[lag]:+.2f} %" for lag in lags) + " |"
                for r in lag_rows
            ),
        ]
    )
    print(header)
    print(table)
    print()
    print(lag_table)
    (args.out / "live-placement.md").write_text(header + "\n" + table + "\n\n" + lag_table + "\n")
    (args.out / "live-placement.json").write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "live": measured,
                "simulated": {k: {kk: vv for kk, vv in v.items() if kk != "assignment"} for k, v in deployed.items()},
                "simulated_current": {
                    k: {kk: vv for kk, vv in v.items() if kk != "assignment"} for k, v in simulated.items()
                },
                "telemetry_age_s": {"tas": TAS_AGE_S, "load_watcher": UTILISATION_AGE_S},
                "rows": rows,
                "tas_lag_rows": [{str(k): v for k, v in r.items()} for r in lag_rows],
                "order_agrees": agree,
                "order_agrees_current_telemetry": agree_current,
            },
            indent=2,
        )
    )
    chart(rows, args.out / "live-placement.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
