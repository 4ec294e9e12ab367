"""What site.yml costs as clusters grow: the node play against lab node hosts of growing count, the
per-object cost of the cluster plays against growing object counts, both fitted and projected to 100
and 1,000 nodes at forks 10 and 50, with kubespray's reported figures beside them (issue 43).

    .venv/bin/python benchmarks/site_scale.py --data ../shared/data [--workers 3,7,15,31] [--objects 25,50,100,400]

Not part of ``make test`` nor ``make bench``: it replaces the running lab several times (about 25
minutes on this machine); ``make scale-bench`` runs it. Steps:

1. Nodes. For each worker count W: a new lab of W workers and its control plane (``python -m lab up``;
   W + 1 hosts over SSH, each its own sshd, kubelet and kernel model), then ``playbooks/node_power.yml``
   (every worker: App QoS certificates, CPU power profiles, the boot unit) converged once with forks 10,
   and run again with forks 10 and with forks 50, which must change nothing. Each run's wall time, the
   controller's CPU time (ansible-playbook and its workers and ssh clients, from ``getrusage`` of the
   children: the nodes' side is not the controller's), and the host-task count from the recap.
2. Objects. On the last lab: N Node objects made by kwok's way (annotation ``kwok.x-k8s.io/node=fake``, so
   kwok keeps them Ready as it keeps the lab's), then one annotation applied to every one of them from
   the control-plane node as the roles apply objects: one ``kubernetes.core.k8s`` run per object (the
   power_models role's loop before issue 43) and one run for all of them (its task since), side by side
   for each N, each checked by reading the annotations back.
3. Fits: wall and controller CPU = a + b x hosts (least squares), the per-object cost likewise.
   Projections for 100 and 1,000 nodes: ``linear`` continues this machine's fit (its node hosts share
   the controller's two cores, so their work is serial here: an upper bound); ``forks`` assumes nodes
   that do their part in parallel, forks at a time: each task takes ceil(N / forks) batches of the
   per-batch time measured with every host in one batch, and the controller needs its CPU time for N
   hosts spread over CONTROLLER_CORES cores, whichever is longer.

Output (``--out``, default benchmarks/results): site-scale.md (the tables) and site-scale.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # sibling helpers when run as a script

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
NODE_PLAY = "playbooks/node_power.yml"
PROJECT_NODES = (100, 1000)
PROJECT_FORKS = (10, 50)
CONTROLLER_CORES = 4  # an assumption of the "forks" projection, stated with it
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
BENCH_ANNOTATION = "bench.poweraware.io/scale"
BENCH_PREFIX = "scale-bench-"
# kubespray's figures as its users reported them (issue threads of kubernetes-sigs/kubespray; none is a
# controlled benchmark, forks and hardware mostly unstated): nodes -> minutes of cluster.yml.
KUBESPRAY = (
    ("#478 (2016, after fixes)", 10, 15.0),
    ("#478 (2016, after fixes)", 50, 35.0),
    ("#478 (2016, after fixes)", 150, 65.0),
    ("#478 (2016, after fixes)", 350, 220.0),
    ("#5688 (100 KVM VMs)", 100, 90.0),
    ("#7509 (forks 5)", 7, 22.0),
)
_RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)",
    re.MULTILINE,
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- pure parts (tests/unit/benchmarks/test_site_scale.py) ---------------------------------------------
def recap_counts(stdout: str) -> dict[str, int]:
    """Host-task executions and changes of a run, from its PLAY RECAP (summed over the hosts)."""
    counts = {"host_tasks": 0, "changed": 0, "failed": 0, "hosts": 0}
    for match in _RECAP.finditer(stdout):
        counts["hosts"] += 1
        counts["host_tasks"] += sum(int(match[k]) for k in ("ok", "changed", "failed", "skipped", "unreachable"))
        counts["changed"] += int(match["changed"])
        counts["failed"] += int(match["failed"]) + int(match["unreachable"])
    return counts


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (a, b) of y = a + b x; one point gives (0, y / x)."""
    if not points:
        raise ValueError("no points to fit")
    xs = [float(point[0]) for point in points]
    ys = [float(point[1]) for point in points]
    if len(set(xs)) < 2:
        return 0.0, ys[0] / xs[0]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def project_linear(fit: tuple[float, float], nodes: int) -> float:
    return fit[0] + fit[1] * nodes


def project_forks(batch_s: float, fixed_s: float, cpu_fit: tuple[float, float], nodes: int, forks: int,
                  cores: int = CONTROLLER_CORES) -> float:  # fmt: skip
    """Wall seconds for ``nodes`` hosts when each does its part in parallel, ``forks`` at a time: the
    batches (``batch_s`` each, measured with every host in one batch, less the run's fixed part) or
    the controller's CPU time spread over ``cores``, whichever is longer, plus the fixed part."""
    batches = math.ceil(nodes / forks) * batch_s
    controller = project_linear(cpu_fit, nodes) / min(cores, forks)
    return fixed_s + max(batches, controller)


def markdown(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- the lab --------------------------------------------------------------------------------------------
def lab_cli(*args: str, env: dict | None = None) -> None:
    result = subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, capture_output=True, text=True,
                            env=env, check=False)  # fmt: skip
    if result.returncode:
        raise SystemExit(f"python -m lab {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def playbook(inventory: list[str], name: str, forks: int, extra: dict | None = None) -> dict:
    """One ansible-playbook run: wall seconds, the controller's CPU seconds, its recap counts."""
    cmd = [
        str(pathlib.Path(sys.executable).parent / "ansible-playbook"),
        *inventory,
        str(ROOT / name),
        "-f",
        str(forks),
    ]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"{name} failed (rc {result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "controller_cpu_s": round(cpu, 2), **recap_counts(result.stdout)}


def node_runs(workers: int, forks: tuple[int, ...], out: pathlib.Path) -> dict:
    from live_placement import LabAccess  # the inventory of a lab of any size

    log(f"lab of {workers} workers")
    lab_cli("down")
    lab_cli("up", "--workers", str(workers), "--server-types", "4")
    state_dir = pathlib.Path(os.environ.get("POWERAWARE_LAB_DIR", ROOT / ".cache" / "lab"))
    inventory = LabAccess(state_dir).inventory(out)
    row = {"workers": workers, "hosts": workers + 1}
    row["converge"] = playbook(inventory, NODE_PLAY, forks[0])
    log(f"  converge {row['converge']}")
    for f in forks:
        run = playbook(inventory, NODE_PLAY, f)
        if run["changed"]:
            raise SystemExit(f"the re-run with forks {f} changed {run['changed']} things: {run}")
        row[f"rerun_f{f}"] = run
        log(f"  re-run forks {f}: {run}")
    return row


_APPLY_PLAY = """
- hosts: kube_control_plane[0]
  become: true
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s:
      kubeconfig: /etc/kubernetes/admin.conf
  tasks:
    - name: Provide the Kubernetes client on this node
      ansible.builtin.include_role:
        name: poweraware.k8s._common
        tasks_from: k8s_client.yml
    - name: One run per object
      kubernetes.core.k8s:
        apply: true
        server_side_apply: {field_manager: scale-bench}
        definition: "{{ item }}"
      loop: "{{ objects }}"
      loop_control: {label: "{{ item.metadata.name }}"}
      when: mode == 'each'
    - name: One run for all
      kubernetes.core.k8s:
        apply: true
        server_side_apply: {field_manager: scale-bench}
        definition: "{{ objects }}"
      when: mode == 'all'
"""


def object_runs(counts: tuple[int, ...], out: pathlib.Path) -> list[dict]:
    from kubernetes import client, config
    from live_placement import LabAccess

    state_dir = pathlib.Path(os.environ.get("POWERAWARE_LAB_DIR", ROOT / ".cache" / "lab"))
    inventory = LabAccess(state_dir).inventory(out)
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(state_dir / "kubeconfig"), client_configuration=configuration)
    core = client.CoreV1Api(client.ApiClient(configuration))
    play = out / "site-scale-apply.yml"
    play.write_text(_APPLY_PLAY)
    rows = []
    made: list[str] = []
    try:
        for count in counts:
            names = [f"{BENCH_PREFIX}{i:04d}" for i in range(count)]
            for name in names[len(made) :]:
                core.create_node({"metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"}}})
                made.append(name)
            row = {"objects": count}
            for mode in ("each", "all"):
                value = f"{mode}-{count}"
                bodies = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": n, "annotations": {BENCH_ANNOTATION: value}},
                    }
                    for n in names
                ]
                row[mode] = playbook(inventory, str(play), 10, {"objects": bodies, "mode": mode})
                held = {
                    n.metadata.name: (n.metadata.annotations or {}).get(BENCH_ANNOTATION)
                    for n in core.list_node().items
                }
                wrong = [n for n in names if held.get(n) != value]
                if wrong:
                    raise SystemExit(
                        f"{mode} with {count} objects: {len(wrong)} nodes lack the annotation, e.g. {wrong[:3]}"
                    )
                log(f"  {count} objects, {mode}: {row[mode]}")
            rows.append(row)
    finally:
        for name in made:
            core.delete_node(name)
    return rows


def report(nodes: list[dict], objects: list[dict], forks: tuple[int, ...]) -> str:
    parts = ["## Node play (playbooks/node_power.yml) against lab node hosts", ""]
    header = ["hosts", "converge s", "controller CPU s", "host-tasks"] + [f"re-run forks {f} s" for f in forks]
    parts.append(markdown([
        [r["hosts"], r["converge"]["wall_s"], r["converge"]["controller_cpu_s"], r["converge"]["host_tasks"]]
        + [r[f"rerun_f{f}"]["wall_s"] for f in forks]
        for r in nodes
    ], header))  # fmt: skip
    fits = {}
    if nodes:
        workers_only = [(r["hosts"] - 1, r) for r in nodes]  # the node play runs on the workers
        fits["converge"] = fit_line([(w, r["converge"]["wall_s"]) for w, r in workers_only])
        fits["converge_cpu"] = fit_line([(w, r["converge"]["controller_cpu_s"]) for w, r in workers_only])
        for f in forks:
            fits[f"rerun_f{f}"] = fit_line([(w, r[f"rerun_f{f}"]["wall_s"]) for w, r in workers_only])
            fits[f"rerun_cpu_f{f}"] = fit_line([(w, r[f"rerun_f{f}"]["controller_cpu_s"]) for w, r in workers_only])
        parts += ["", "Fitted (seconds = a + b x workers):", ""]
        parts.append(
            markdown([[k, f"{a:.1f}", f"{b:.2f}"] for k, (a, b) in fits.items()], ["run", "a (s)", "b (s per node)"])
        )
        smallest = workers_only[0]
        rows = []
        for kind in ("converge", f"rerun_f{forks[0]}"):
            run = smallest[1][kind]
            cpu_fit = fits["converge_cpu" if kind == "converge" else f"rerun_cpu_f{forks[0]}"]
            batch = max(run["wall_s"] - fits[kind][0], 0.0)  # one batch: the smallest lab is under forks
            for n in PROJECT_NODES:
                row = [kind.replace(f"_f{forks[0]}", ""), n, f"{project_linear(fits[kind], n) / 60:.1f}"]
                row += [f"{project_forks(batch, fits[kind][0], cpu_fit, n, f) / 60:.1f}" for f in PROJECT_FORKS]
                rows.append(row)
        parts += [
            "",
            f"Projection, minutes (forks projection: {CONTROLLER_CORES}-core controller, nodes as fast as the lab's):",
            "",
        ]
        parts.append(markdown(rows, ["run", "nodes", "linear (this machine)"] + [f"forks {f}" for f in PROJECT_FORKS]))
    if objects:
        parts += ["", "## Objects applied from the control-plane node (kubernetes.core.k8s, server-side apply)", ""]
        parts.append(markdown([
            [r["objects"], r["each"]["wall_s"], r["all"]["wall_s"], f"{r['each']['wall_s'] / r['all']['wall_s']:.1f}"]
            for r in objects
        ], ["objects", "one run per object, s", "one run for all, s", "ratio"]))  # fmt: skip
        each = fit_line([(r["objects"], r["each"]["wall_s"]) for r in objects])
        every = fit_line([(r["objects"], r["all"]["wall_s"]) for r in objects])
        at_1000 = f"{project_linear(each, 1000) / 60:.1f} min against {project_linear(every, 1000):.0f} s"
        parts += [
            "",
            f"Per object: {each[1]:.3f} s one run each, {every[1]:.4f} s in one run (1,000 nodes: {at_1000}).",
        ]
    parts += [
        "",
        "## kubespray, as its users reported it (cluster.yml; forks, hardware and versions mostly unstated)",
        "",
    ]
    parts.append(
        markdown(
            [[src, n, m, f"{m * 60 / n:.0f}"] for src, n, m in KUBESPRAY], ["source", "nodes", "minutes", "s per node"]
        )
    )
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--data", default=os.environ.get("SHARED_DATA", str(ROOT.parent / "shared" / "data")))
    parser.add_argument("--workers", default="3,7,15,31", help="worker counts, comma separated")
    parser.add_argument("--forks", default="10,50")
    parser.add_argument("--objects", default="25,50,100,400", help="Node object counts, comma separated")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    os.environ["SHARED_DATA"] = args.data
    args.out.mkdir(parents=True, exist_ok=True)
    forks = tuple(int(f) for f in args.forks.split(",") if f)
    nodes: list[dict] = []
    objects: list[dict] = []

    def save() -> str:  # after every step: a run stopped half-way still leaves its tables
        text = report(nodes, objects, forks)
        (args.out / "site-scale.md").write_text(text)
        (args.out / "site-scale.json").write_text(json.dumps({"nodes": nodes, "objects": objects}, indent=2) + "\n")
        return text

    for workers in (int(w) for w in args.workers.split(",") if w):
        nodes.append(node_runs(workers, forks, args.out))
        save()
    if args.objects:
        objects.extend(object_runs(tuple(int(n) for n in args.objects.split(",") if n), args.out))
    print(save())
    return 0


if __name__ == "__main__":
    sys.exit(main())
