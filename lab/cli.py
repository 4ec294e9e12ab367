"""Command line of the lab: ``python -m lab {up,down,status,build,reboot}`` (the Makefile's lab targets).

Exit status: 0 on success, 1 when the lab cannot be brought up or down (the message and the
failing component's log tail are printed), 3 from ``status`` when no healthy lab is running.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

from lab import assets, cluster, config, kubeadm, nodes


def _relative(path: pathlib.Path) -> str:
    try:
        return str(path.relative_to(pathlib.Path.cwd()))
    except ValueError:
        return str(path)


def node_rows(lab: cluster.Lab) -> list[str]:
    rows = [f"  {'NAME':<22}{'STATUS':<10}{'ROLES':<15}{'CPU':<6}{'MEMORY':<10}VERSION"]
    for node in sorted(lab.nodes(), key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels", {})
        roles = "control-plane" if kubeadm.CONTROL_PLANE_LABEL in labels else "<none>"
        status = "Ready" if cluster.node_ready(node) else "NotReady"
        capacity = node.get("status", {}).get("capacity", {})
        version = node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
        rows.append(
            f"  {node['metadata']['name']:<22}{status:<10}{roles:<15}{capacity.get('cpu', ''):<6}"
            f"{capacity.get('memory', ''):<10}{version}"
        )
    return rows


def scheduler_manifest_path(lab: cluster.Lab) -> str:
    return "/etc/kubernetes/manifests/kube-scheduler.yaml"


def ssh_rows(lab: cluster.Lab) -> list[str]:
    ssh_dir = lab.paths.state_dir / "ssh"
    key, known = _relative(ssh_dir / "id_ed25519"), _relative(ssh_dir / "known_hosts")
    return [
        f"  {node.name:<22}ssh -i {key} -o UserKnownHostsFile={known} {nodes.LOGIN_USER}@{node.address}"
        for node in lab.config.nodes
    ]


def summary(lab: cluster.Lab) -> str:
    paths = lab.paths
    inventory = config.REPO_ROOT / "inventory" / "lab"
    lines = [
        f"Kubernetes {assets.kubernetes_version()} lab at {lab.config.api_url}",
        f"kubeconfig (this machine, for you and the tests): {paths.kubeconfig}",
        f"logs:               {paths.logs}",
        "nodes:",
        *node_rows(lab),
        "",
        f"Each node is a host with its own address (sudo works without a password; kube-scheduler's "
        f"manifest is {scheduler_manifest_path(lab)} on {lab.config.control_plane}):",
        *ssh_rows(lab),
        f"  or: ssh -F {_relative(paths.state_dir / 'ssh' / 'ssh_config')} NODE",
        "",
        "Use it:",
        f"  ansible-playbook -i {_relative(inventory)} site.yml",
        f"  export KUBECONFIG={paths.kubeconfig}   # kubectl from this machine",
        "Simulate a node restart: python -m lab reboot NODE. Stop it and remove its state: make lab-down",
    ]
    return "\n".join(lines)


def config_from(args: argparse.Namespace) -> config.LabConfig:
    return config.LabConfig(
        state_dir=args.state_dir,
        workers=args.workers,
        server_types=args.server_types,
        cpu=str(args.cpu),
        memory=args.memory,
        allocatable_memory=args.allocatable_memory,
        pods=args.pods,
        sysfs_scenario=args.sysfs_scenario,
        timeout=args.timeout,
    )


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    lab = cluster.Lab(config_from(args))
    lab.up(build=not args.no_build)
    print(summary(lab))
    print(f"({time.monotonic() - started:.1f} s)")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    state_dir = args.state_dir.resolve()
    lab = cluster.Lab.from_state(state_dir) or cluster.Lab(config.LabConfig(state_dir=state_dir))
    stopped = lab.down()
    remaining = cluster.tagged_processes(state_dir)
    print(f"stopped {len(stopped)} process group(s){': pids ' + ' '.join(map(str, stopped)) if stopped else ''}")
    print(f"state {'still present' if state_dir.exists() else 'removed'}: {state_dir}")
    print(f"lab processes left: {' '.join(map(str, remaining)) if remaining else 'none'}")
    return 1 if remaining or state_dir.exists() else 0


def cmd_status(args: argparse.Namespace) -> int:
    lab = cluster.Lab.from_state(args.state_dir)
    if lab is None:
        print(f"no lab in {args.state_dir.resolve()} (start one with `make lab`)")
        return 3
    for name, info in lab.processes.items():
        for label, record in ((name, info), ("  its kernel", info.get("kernel"))):
            if record:
                alive = cluster.process_alive(record["pid"], record.get("start_time"))
                print(f"  {label:<25} pid {record['pid']:<8} {'running' if alive else 'DEAD'}  log {record['log']}")
    if not lab.healthy():
        print("the lab is not healthy (see the logs above); `make lab` replaces it")
        return 3
    scheduler = "healthy" if lab.scheduler_healthy() else "NOT healthy"
    print(f"  kube-scheduler /healthz on port {lab.config.port('scheduler')}: {scheduler}")
    print(summary(lab))
    return 0


def cmd_reboot(args: argparse.Namespace) -> int:
    lab = cluster.Lab.from_state(args.state_dir)
    if lab is None or not lab.healthy():
        print(f"no healthy lab in {args.state_dir.resolve()} (start one with `make lab`)")
        return 3
    started = time.monotonic()
    report = lab.reboot(args.node)
    changed = {
        k: (v, report["after_boot"].get(k))
        for k, v in report["before_units"].items()
        if report["after_boot"].get(k) != v
    }
    print(f"{args.node} rebooted in {time.monotonic() - started:.1f} s")
    print("boot:")
    print("\n".join(f"  {line.split(' boot: ', 1)[1]}" for line in report["boot_log"]) or "  (no boot units)")
    print(f"cpufreq settings changed by the boot units: {len(changed)} of {len(report['before_units'])}")
    for key, (before, after) in sorted(changed.items()):
        print(f"  {key}: {before} (power-on) -> {after}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if args.all:
        assets.build_all()
    if args.previous:
        assets.previous_release_binaries(build=True)
    binaries = assets.resolve_binaries(build=True)
    for name, path in binaries.items():
        print(f"{name:<25} {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description="local Kubernetes lab on 127.0.0.1")
    parser.add_argument(
        "--state-dir",
        type=pathlib.Path,
        default=pathlib.Path(os.environ.get("POWERAWARE_LAB_DIR", config.DEFAULT_STATE_DIR)),
        help="where the lab keeps everything (default .cache/lab, or POWERAWARE_LAB_DIR)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="build once (cached) and start the lab; a running lab is left alone")
    defaults = config.LabConfig()
    up.add_argument("--workers", type=int, default=defaults.workers)
    up.add_argument(
        "--server-types",
        type=int,
        default=defaults.server_types,
        help="SPECpower server models among the workers, each worker i model i mod K (default 0: one per worker)",
    )
    up.add_argument("--cpu", type=int, default=int(defaults.cpu), help="CPUs (capacity and allocatable) of every node")
    up.add_argument("--memory", default=defaults.memory, help="memory capacity of every node")
    up.add_argument("--allocatable-memory", default=defaults.allocatable_memory)
    up.add_argument("--pods", default=defaults.pods, help="pod capacity of every node")
    up.add_argument(
        "--sysfs-scenario", default=defaults.sysfs_scenario, help="fake sysfs of every node (lab/fake_sysfs.py)"
    )
    up.add_argument("--timeout", type=float, default=defaults.timeout, help="seconds allowed to each health wait")
    up.add_argument("--no-build", action="store_true", help="fail instead of building missing binaries")
    up.set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop every lab process and remove the lab state").set_defaults(func=cmd_down)
    sub.add_parser("status", help="show the lab's processes, health and nodes").set_defaults(func=cmd_status)
    build = sub.add_parser("build", help="only build (or find) the binaries")
    build.add_argument("--all", action="store_true", help="also the older kube-schedulers the tests load configs in")
    build.add_argument(
        "--previous",
        action="store_true",
        help="also the previous release's images, which the upgrade test runs (make lifecycle)",
    )
    build.set_defaults(func=cmd_build)
    reboot = sub.add_parser("reboot", help="simulate a node restart: kernel at power-on values, boot units run")
    reboot.add_argument("node")
    reboot.set_defaults(func=cmd_reboot)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (cluster.LabError, assets.AssetsError, nodes.NodeError) as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
