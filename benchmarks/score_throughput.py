"""Time to score 10,000 nodes for one pod with score_nodes (the power_score filter's engine).

Nodes are SPECpower servers (round-robin over the data set) with their own fitted model each
(a separate dict per node, as fitted per node from telemetry; nothing is shared or cached
between nodes), utilisation from the benchmark sampler, CPU capacity as the API reports it
(a quantity string such as "64"), and 2 % of nodes each without metrics or without a model.
Side by side, in the same run: the upstream Peaks arithmetic (score_nodes_upstream_peaks) on
the same nodes with peaks models. Each timing is the median of several repeats, wall clock and
process CPU time (the machine is shared, so CPU time is the steadier figure).

Usage: python benchmarks/score_throughput.py [--data DIR] [--nodes N] [--repeats R]
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import statistics
import sys
import time

# The checkout, for lab.specpower (the SPECpower data set's one reader).
_ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

# The collection's power-model library, found where `make collection` links the checkout.
_COLLECTIONS = pathlib.Path(__file__).resolve().parent.parent / ".cache" / "collections"
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))

from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import fit_model  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import (  # noqa: E402
    score_nodes,
    score_nodes_upstream_peaks,
)

from lab import specpower  # noqa: E402

GOAL_MS = 100.0
POD_CPU_REQUEST = "500m"
FIT_SAMPLES = 100  # model quality does not matter here, only the scoring time
UNMEASURED_EVERY = 50  # every 50th node has no metrics, every 50th (offset) no model


def build_nodes(servers, count, kind, seed):
    """``count`` node dicts for ``score_nodes``; the model of each is a deep copy (no sharing)."""
    models = [fit_model(specpower.noisy_samples(s, FIT_SAMPLES, seed=seed), kind=kind, node=s.id) for s in servers]
    rng = specpower.server_rng(servers[0], seed)
    nodes = []
    for index in range(count):
        server = servers[index % len(servers)]
        nodes.append(
            {
                "name": f"node-{index:05d}",
                "util": None if index % UNMEASURED_EVERY == 0 else specpower.sample_util(rng),
                "cpu_capacity": str(server.cores * server.threads_per_core),
                "model": None if index % UNMEASURED_EVERY == 1 else copy.deepcopy(models[index % len(servers)]),
            }
        )
    return nodes


def timed(function, repeats):
    """Median wall and CPU milliseconds of ``function()`` over ``repeats`` runs."""
    wall, cpu = [], []
    for _repeat in range(repeats):
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        function()
        wall.append(1000.0 * (time.perf_counter() - wall_start))
        cpu.append(1000.0 * (time.process_time() - cpu_start))
    return statistics.median(wall), statistics.median(cpu), min(wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    specpower.data_dir_argument(parser)
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes to score")
    parser.add_argument("--repeats", type=int, default=9, help="timed repeats per scorer")
    parser.add_argument("--seed", type=int, default=specpower.DEFAULT_SEED, help="sampler seed")
    args = parser.parse_args()

    servers = specpower.load_servers(args.data)
    default_nodes = build_nodes(servers, args.nodes, "piecewise_linear", args.seed)
    peaks_nodes = build_nodes(servers, args.nodes, "peaks", args.seed)
    runs = [
        ("score_nodes", "piecewise_linear", lambda: score_nodes(default_nodes, POD_CPU_REQUEST)),
        ("score_nodes", "peaks", lambda: score_nodes(peaks_nodes, POD_CPU_REQUEST)),
        (
            "upstream Peaks arithmetic (baseline)",
            "peaks",
            lambda: score_nodes_upstream_peaks(peaks_nodes, POD_CPU_REQUEST),
        ),
    ]
    # Warm-up once each (imports, caches of quantity spellings), then measure side by side.
    for _name, _kind, run in runs:
        run()
    results = [(name, kind, *timed(run, args.repeats)) for name, kind, run in runs]

    print(f"### Scoring {args.nodes:,} nodes for one pod ({POD_CPU_REQUEST}), median of {args.repeats} runs")
    print()
    print("| scorer | models | wall ms (median) | CPU ms (median) | wall ms (best) | ns per node (CPU) |")
    print("|---|---|---:|---:|---:|---:|")
    for name, kind, wall, cpu, best in results:
        print(f"| {name} | {kind} | {wall:.1f} | {cpu:.1f} | {best:.1f} | {1e6 * cpu / args.nodes:,.0f} |")
    print()
    default_wall, default_cpu = results[0][2], results[0][3]
    baseline_cpu = results[2][3]
    ok = default_cpu < GOAL_MS
    print(
        f"- {'met' if ok else 'NOT MET'}: default models, {default_cpu:.1f} ms CPU "
        f"({default_wall:.1f} ms wall) < {GOAL_MS:.0f} ms goal"
    )
    print(
        f"- score_nodes (validation, fit checks, neutral handling, ranking) costs {results[1][3] / baseline_cpu:.2f}x "
        "the upstream arithmetic on the same peaks nodes"
    )
    # Context for the figures: this machine is shared, so report how busy it was.
    load1 = os.getloadavg()[0]
    print(f"- machine: {os.cpu_count()} CPUs, 1-minute load average {load1:.1f} at the end of the run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
