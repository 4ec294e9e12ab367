"""Placement benchmark: energy of pod placement policies on real server power curves.

Replays the pod trace of Alibaba's cluster-trace-gpu-v2023 (``alibaba-openb/pods.csv``; "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC
2023) on simulated heterogeneous clusters whose nodes draw the wall power published in
SPECpower_ssj2008 results (``specpower/servers.csv``; SPEC and SPECpower_ssj2008 are trademarks of
the Standard Performance Evaluation Corporation, results from www.spec.org/power_ssj2008), and
compares placement policies by the energy the cluster draws. See docs/placement-benchmark.md.

    python benchmarks/placement.py --data ../shared/data [--draws 6] [--seed N] [--out DIR]

Prints one markdown table per regime (median over cluster draws) and writes, under ``--out``
(default benchmarks/results), ``placement.md``, ``placement.json`` and ``placement-power.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # sibling helpers when run as a script

import _placement_policies as policies  # noqa: E402
import _placement_sim as sim  # noqa: E402
import _specpower as specpower  # noqa: E402

POLICY_ORDER = ("default", "most-allocated", "tas-power", "peaks", "ours", "oracle")
REGIME_TITLES = {
    "on": "all nodes always on",
    "off": "empty nodes powered off (0 W)",
}
RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"


@dataclasses.dataclass
class DrawResult:
    draw: int
    nodes: int
    server_ids: list[str]
    lower_bound_j: dict[str, float]
    runs: dict[str, dict[str, sim.SimResult]]  # regime -> policy -> result
    lb_steps: dict[str, tuple[np.ndarray, np.ndarray]]
    fit_failures: dict[str, int]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    specpower.data_dir_argument(parser)
    parser.add_argument("--pods", type=pathlib.Path, help="pods.csv (default: DATA/alibaba-openb/pods.csv)")
    parser.add_argument("--servers", type=pathlib.Path, help="servers.csv (default: DATA/specpower/servers.csv)")
    parser.add_argument("--seed", type=int, default=specpower.DEFAULT_SEED, help="seed for draws, noise, ties")
    parser.add_argument("--draws", type=int, default=6, help="cluster draws (>= 1; the table shows medians)")
    parser.add_argument("--headroom", type=float, default=0.3, help="capacity above peak demand (0.3 = +30 %%)")
    parser.add_argument("--types", type=int, default=4, help="server models per cluster")
    parser.add_argument("--min-threads", type=int, default=32, help="smallest node (hardware threads)")
    parser.add_argument("--max-threads", type=int, default=256, help="largest node (hardware threads)")
    parser.add_argument(
        "--samples", type=int, default=288, help="noisy samples per node for the fitted models (288 = 1 day at 5 min)"
    )
    parser.add_argument("--start", type=float, help="replay window start (trace seconds; default: trace start)")
    parser.add_argument("--end", type=float, help="replay window end (trace seconds; default: trace end)")
    parser.add_argument(
        "--policies", default=",".join(POLICY_ORDER), help=f"comma-separated subset of {','.join(POLICY_ORDER)}"
    )
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR, help="directory for the table, JSON, chart")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    args = parser.parse_args(argv)
    args.pods = args.pods or args.data / "alibaba-openb" / "pods.csv"
    args.servers = args.servers or args.data / "specpower" / "servers.csv"
    chosen = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    unknown = sorted(set(chosen) - set(POLICY_ORDER))
    if unknown:
        parser.error(f"unknown policies {unknown}; choose from {','.join(POLICY_ORDER)}")
    if "default" not in chosen:
        parser.error("the 'default' policy is the reference of the table; keep it in --policies")
    args.policies = tuple(p for p in POLICY_ORDER if p in chosen)
    for name in ("draws", "types", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    for path in (args.pods, args.servers):
        if not path.is_file():
            parser.error(f"{path} not found (set --data or SHARED_DATA to the shared data directory)")
    return args


def fit_node_models(cluster: sim.Cluster, servers: dict, samples: int, seed: int, draw: int):
    """Fit both model kinds per node on the same noisy samples.

    Returns (peaks models by node index, default-kind models by node index, failures by kind).
    A node whose fit fails has no model (and the policies treat it as upstream / ours do).
    """
    peaks_models: dict[int, dict] = {}
    our_models: dict[int, dict] = {}
    failures = {"peaks": 0, "ours": 0}
    for i, node in enumerate(cluster.nodes):
        node_seed = (seed * 1_000_003 + draw * 10_007 + i) % 2**63
        data = specpower.noisy_samples(servers[node.server_id], samples, seed=node_seed)
        try:
            peaks_models[i] = policies.fit_model(data, kind="peaks", node=node.name)
        except policies.PowerModelError:
            failures["peaks"] += 1
        try:
            our_models[i] = policies.fit_model(data, node=node.name)
        except policies.PowerModelError:
            failures["ours"] += 1
    return peaks_models, our_models, failures


def make_policy(name: str, peaks_models: dict, our_models: dict) -> sim.Policy:
    if name == "default":
        return policies.LeastAllocated()
    if name == "most-allocated":
        return policies.MostAllocated()
    if name == "tas-power":
        return policies.TasPower()
    if name == "peaks":
        return policies.UpstreamPeaks(peaks_models)
    if name == "ours":
        return policies.Ours(our_models)
    if name == "oracle":
        return policies.Oracle()
    raise ValueError(name)


def run_draw(draw: int, child: np.random.SeedSequence, args, pool, servers_by_id, trace, peak) -> DrawResult:
    rng = np.random.default_rng(child)
    cluster = sim.draw_cluster(pool, peak, rng, headroom=args.headroom, types=args.types)
    need_fits = {"peaks", "ours"} & set(args.policies)
    if need_fits:
        peaks_models, our_models, failures = fit_node_models(cluster, servers_by_id, args.samples, args.seed, draw)
    else:
        peaks_models, our_models, failures = {}, {}, {"peaks": 0, "ours": 0}
    runs: dict[str, dict[str, sim.SimResult]] = {}
    lower: dict[str, float] = {}
    lb_steps = {}
    for r_index, regime in enumerate(sim.REGIMES):
        energy, times, watts = sim.lower_bound_energy(cluster, regime, trace)
        lower[regime] = energy
        lb_steps[regime] = (times, watts)
        runs[regime] = {}
        for p_index, name in enumerate(args.policies):
            tie_rng = np.random.default_rng([args.seed, draw, r_index, p_index])
            policy = make_policy(name, peaks_models, our_models)
            runs[regime][name] = sim.simulate(cluster, trace, policy, regime, tie_rng)
    return DrawResult(
        draw=draw,
        nodes=len(cluster),
        server_ids=[n.server_id for n in cluster.nodes],
        lower_bound_j=lower,
        runs=runs,
        lb_steps=lb_steps,
        fit_failures=failures,
    )


def summarise(results: list[DrawResult], regime: str, names: tuple[str, ...]) -> list[dict]:
    """Per policy, medians over draws of energy, % vs default, gaps (pp) and queue counts."""
    rows = []
    for name in (*names, "lower bound"):
        energy, vs_default, gap_oracle, gap_lb, rejected, delayed = [], [], [], [], [], []
        for res in results:
            base = res.runs[regime]["default"].energy_j
            lb = res.lower_bound_j[regime]
            e = lb if name == "lower bound" else res.runs[regime][name].energy_j
            energy.append(e / sim.J_PER_KWH)
            pct = 100.0 * (e / base - 1.0)
            vs_default.append(pct)
            if "oracle" in res.runs[regime]:
                gap_oracle.append(pct - 100.0 * (res.runs[regime]["oracle"].energy_j / base - 1.0))
            gap_lb.append(pct - 100.0 * (lb / base - 1.0))
            if name != "lower bound":
                rejected.append(res.runs[regime][name].rejected)
                delayed.append(res.runs[regime][name].delayed)
        rows.append(
            {
                "policy": name,
                "energy_kwh": statistics.median(energy),
                "vs_default_pct": statistics.median(vs_default),
                "gap_oracle_pp": statistics.median(gap_oracle) if gap_oracle else None,
                "gap_lower_bound_pp": statistics.median(gap_lb),
                "rejected": statistics.median(rejected) if rejected else None,
                "rejected_max": max(rejected) if rejected else None,
                "delayed": statistics.median(delayed) if delayed else None,
                "per_draw_vs_default_pct": vs_default,
            }
        )
    return rows


def wins(results: list[DrawResult], regime: str, a: str, b: str) -> tuple[int, int]:
    """Draws where policy ``a`` drew less energy than ``b``, out of the draws with both."""
    both = [r for r in results if a in r.runs[regime] and b in r.runs[regime]]
    return sum(r.runs[regime][a].energy_j < r.runs[regime][b].energy_j for r in both), len(both)


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def markdown_table(rows: list[dict]) -> str:
    lines = [
        "| policy | energy (kWh) | vs default | gap to oracle (pp) | gap to lower bound (pp) "
        "| pods rejected (median / max) | pods delayed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        rejected = "-" if row["rejected"] is None else f"{row['rejected']:g} / {row['rejected_max']:g}"
        lines.append(
            f"| {row['policy']} | {row['energy_kwh']:,.0f} | {row['vs_default_pct']:+.1f} % "
            f"| {_fmt(row['gap_oracle_pp'], '+.1f')} | {row['gap_lower_bound_pp']:+.1f} "
            f"| {rejected} | {_fmt(row['delayed'], 'g')} |"
        )
    return "\n".join(lines)


def chart(results: list[DrawResult], names: tuple[str, ...], path: pathlib.Path, bin_s: float = 3600.0) -> None:
    """Cluster power over time per policy (hourly means, draw 0), one panel per regime."""
    import matplotlib  # noqa: PLC0415 - only needed for the chart

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    res = results[0]
    fig, axes = plt.subplots(len(sim.REGIMES), 1, figsize=(13, 8), sharex=True)
    for ax, regime in zip(axes, sim.REGIMES, strict=True):
        any_run = next(iter(res.runs[regime].values()))
        t0, t1 = any_run.times[0], any_run.times[-1]
        edges = np.r_[np.arange(t0, t1, bin_s), t1]
        series = [(name, res.runs[regime][name].times, res.runs[regime][name].watts) for name in names]
        series.append(("lower bound", *res.lb_steps[regime]))
        for name, times, watts in series:
            mean = _bin_mean(times, watts, edges)
            style = {"linestyle": "--", "color": "black"} if name == "lower bound" else {}
            ax.plot((edges[:-1] - t0) / 86400.0, mean / 1000.0, label=name, linewidth=0.8, **style)
        ax.set_title(f"{REGIME_TITLES[regime]} (draw 0: {res.nodes} nodes)")
        ax.set_ylabel("cluster power (kW, hourly mean)")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("days since trace start")
    axes[0].legend(loc="upper left", ncol=4, fontsize="small")
    fig.suptitle(
        "Pods: Alibaba cluster-trace-gpu-v2023 (ATC'23 'Beware of Fragmentation'); "
        "node power: SPECpower_ssj2008 results (SPEC)",
        fontsize="small",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bin_mean(times: np.ndarray, watts: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact mean of a step function (value watts[i] on [times[i], times[i+1])) over each bin."""
    cum_t = times
    cum_e = np.r_[0.0, np.cumsum(watts[:-1] * np.diff(times))]

    def energy_at(x):
        i = np.clip(np.searchsorted(cum_t, x, side="right") - 1, 0, len(cum_t) - 1)
        return cum_e[i] + watts[i] * (x - cum_t[i])

    e = energy_at(np.clip(edges, times[0], times[-1]))
    return np.diff(e) / np.diff(edges)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    all_servers = specpower.load_servers(args.servers)
    servers_by_id = {s.id: s for s in all_servers}
    pool = sim.eligible_servers(all_servers, args.min_threads, args.max_threads)
    if len(pool) < args.types:
        print(f"error: only {len(pool)} servers have {args.min_threads}..{args.max_threads} threads", file=sys.stderr)
        return 2
    trace = sim.load_pods(args.pods, args.start, args.end)
    peak = sim.peak_demand(trace)
    children = np.random.SeedSequence(args.seed).spawn(args.draws)
    results = [run_draw(d, child, args, pool, servers_by_id, trace, peak) for d, child in enumerate(children)]
    elapsed = time.monotonic() - started

    out = []
    out.append(f"# Placement benchmark (seed {args.seed}, {args.draws} cluster draws, medians)")
    out.append("")
    out.append(
        f"Trace: {len(trace)} pods replayed over {(trace.end - trace.start) / 86400:.1f} days, peak demand "
        f"{peak / 1000:.0f} CPUs ({trace.dropped_zero_duration} zero-length pods left out). "
        f"Clusters: {args.types} server models drawn from the {len(pool)} SPECpower results with "
        f"{args.min_threads}-{args.max_threads} hardware threads, nodes added until capacity is "
        f"{100 * (1 + args.headroom):.0f} % of peak demand; sizes "
        f"{', '.join(str(r.nodes) for r in results)} nodes. Models fitted per node on {args.samples} noisy samples."
    )
    summary = {"args": {k: str(v) for k, v in vars(args).items()}, "regimes": {}, "draws": []}
    for regime in sim.REGIMES:
        rows = summarise(results, regime, args.policies)
        out.append("")
        out.append(f"## {REGIME_TITLES[regime]}")
        out.append("")
        out.append(markdown_table(rows))
        notes = []
        if "ours" in args.policies:
            for other in ("default", "tas-power", "peaks", "oracle"):
                if other in args.policies:
                    won, total = wins(results, regime, "ours", other)
                    notes.append(f"ours below {other} in {won}/{total} draws")
        below = [
            (r.draw, name)
            for r in results
            for name, run in r.runs[regime].items()
            if run.energy_j < r.lower_bound_j[regime] and run.rejected
        ]
        if below:
            notes.append(f"below the bound only by rejecting pods: {below}")
        if notes:
            out.append("")
            out.append("; ".join(notes) + ".")
        summary["regimes"][regime] = rows
    for r in results:
        summary["draws"].append(
            {
                "draw": r.draw,
                "nodes": r.nodes,
                "servers": r.server_ids,
                "fit_failures": r.fit_failures,
                "energy_kwh": {
                    regime: {
                        **{n: run.energy_kwh for n, run in r.runs[regime].items()},
                        "lower bound": r.lower_bound_j[regime] / sim.J_PER_KWH,
                    }
                    for regime in sim.REGIMES
                },
                "rejected": {regime: {n: run.rejected for n, run in r.runs[regime].items()} for regime in sim.REGIMES},
            }
        )
    out.append("")
    out.append(
        "pp = percentage points of the default's energy. Sources: pods from Alibaba cluster-trace-gpu-v2023 "
        '("Beware of Fragmentation", USENIX ATC 2023); node power from SPECpower_ssj2008 results '
        "(www.spec.org/power_ssj2008; SPEC and SPECpower_ssj2008 are trademarks of the Standard Performance "
        "Evaluation Corporation)."
    )
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_chart:
        chart_path = args.out / "placement-power.png"
        chart(results, args.policies, chart_path)
        out.append(f"Chart: {chart_path}")
    out.append(f"Runtime: {elapsed:.0f} s.")
    text = "\n".join(out)
    print(text)
    (args.out / "placement.md").write_text(text + "\n")
    summary["runtime_s"] = elapsed
    (args.out / "placement.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
