"""How long a pod waits for its power profile, and its CPUs for their return (issue 47).

    .venv/bin/python benchmarks/pod_power_latency.py [--pods 200] [--restarts 10] [--reboot]

Not part of ``make test`` nor ``make bench``: it needs the running lab (``make lab``) and converges
``playbooks/pod_power.yml`` on the lab's ``pod_power_nodes`` (a shared profile is added for the run and
removed after); ``make pod-power-bench`` runs it. For each of ``--pods`` Guaranteed pods in turn (one
at a time, ``power.intel.com/performance: 2`` with ``cpu: 2``, placed by the scheduler):

- start latency: from the moment this script first sees the pod Running (polling every 20 ms; the
  kubelet's ``startedAt`` has whole seconds only) to the moment every CPU the kubelet's checkpoint gives
  the pod reads the profile in the node's sysfs;
- return latency: from the pod's deletion (the API call returning) to the moment both CPUs read the
  shared profile again.

Every ``--pods/--restarts`` pods the agent is restarted (systemctl restart over SSH) and, with
``--reboot``, the node is power-cycled once half-way (``python -m lab``'s reboot: the kernel comes back
at power-on values, the agent's unit starts at boot). After every pod, every non-reserved CPU is
checked to read the shared profile (``wrong`` counts those that do not), the reserved CPUs to be as
they were, and at the end the agent's journal to hold an original for every CPU it set. The agent's
CPU time and peak memory come from its unit's cgroup-less process (``/proc/<pid>/stat``, ``status``).

Output: a table on stdout (p50, p99, max of each latency; counts) and ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from poweraware_testing import at_profile, cpu_cpufreq  # noqa: E402

from lab import testing  # noqa: E402
from lab.kubelet import cpu_manager  # noqa: E402

GROUP, VERSION = "power.poweraware.io", "v1"
ALPINE = "docker.io/library/alpine:3.17.3"
RESERVED = {0, 1}
SHARED = {"shared": True, "min": "0%", "max": "40%", "epp": "power"}


def cpufreq(lab, node, cpu):
    return cpu_cpufreq(lab.node_sysfs(node), cpu)


at = at_profile  # the test's reading of a profile (tests/poweraware_testing.py)


def until(check, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value, time.monotonic()
        time.sleep(interval)
    raise TimeoutError(f"{what} within {timeout} s")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def agent_usage(lab, node):
    """The agent's CPU seconds (user + system) and peak resident memory, from its process."""
    out = lab.ssh(node, "systemctl show -p MainPID --value poweraware-pod-power.service", sudo=True).stdout.strip()
    pid = int(out or 0)
    if not pid:
        return None
    stat = lab.ssh(node, f"cat /proc/{pid}/stat", sudo=True).stdout.split(")")[-1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_s = (int(stat[11]) + int(stat[12])) / ticks
    status = lab.ssh(node, f"cat /proc/{pid}/status", sudo=True).stdout
    hwm = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return {"pid": pid, "cpu_s": cpu_s, "peak_rss_mib": round(hwm / 1024, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--reboot", action="store_true")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pod-power-latency.json"))
    args = parser.parse_args(argv)
    import yaml
    from kubernetes.client.rest import ApiException

    inventory = yaml.safe_load((REPO / "inventory" / "lab" / "hosts.yml").read_text())
    (node,) = inventory["all"]["children"]["pod_power_nodes"]["hosts"]
    with testing.session() as lab:
        converge = subprocess.run(
            [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(lab.inventory / "hosts.yml"),
             str(REPO / "playbooks" / "pod_power.yml")],
            capture_output=True, text=True, cwd=REPO, check=False,
        )  # fmt: skip
        if converge.returncode:
            sys.exit(f"playbooks/pod_power.yml failed:\n{converge.stdout[-3000:]}")
        apis = lab.apis()
        core, custom = apis["core"], apis["custom"]
        online = sorted(
            cpu_manager.parse_cpuset((lab.node_sysfs(node) / "devices/system/cpu/online").read_text().strip())
        )
        cpus = [c for c in online if c not in RESERVED]
        reserved_before = {c: cpufreq(lab, node, c) for c in RESERVED}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PowerProfile", "metadata": {"name": "bench-shared"},
                "spec": SHARED}  # fmt: skip
        custom.create_cluster_custom_object(GROUP, VERSION, "powerprofiles", body)
        namespace_cm = lab.scratch_namespace("pod-power-bench")
        namespace = namespace_cm.__enter__()
        starts, returns, wrong, restarts, reboots = [], [], 0, 0, 0
        usage_start = agent_usage(lab, node)
        cpu_before = usage_start["cpu_s"] if usage_start else 0.0
        cpu_spent, began = 0.0, time.monotonic()
        try:
            until(lambda: all(at(cpufreq(lab, node, c), 0, 40, "power") for c in cpus), 60, "the shared profile")
            every = max(1, args.pods // max(1, args.restarts)) if args.restarts else 0
            for i in range(args.pods):
                if every and i and i % every == 0:
                    usage = agent_usage(lab, node)  # a restart starts a new process: count the old one's first
                    cpu_spent += (usage["cpu_s"] - cpu_before) if usage else 0.0
                    lab.ssh(node, "systemctl restart poweraware-pod-power.service", sudo=True)
                    restarts += 1
                    cpu_before = (agent_usage(lab, node) or {"cpu_s": 0.0})["cpu_s"]
                if args.reboot and i == args.pods // 2:
                    usage = agent_usage(lab, node)
                    cpu_spent += (usage["cpu_s"] - cpu_before) if usage else 0.0
                    subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "lab", "reboot", node], cwd=REPO,
                                   check=True, capture_output=True)  # fmt: skip
                    reboots += 1
                    until(lambda: all(at(cpufreq(lab, node, c), 0, 40, "power") for c in cpus), 120, "after reboot")
                    cpu_before = (agent_usage(lab, node) or {"cpu_s": 0.0})["cpu_s"]
                name = f"bench-{i}"
                fixed = {"cpu": "2", "memory": "32Mi", "power.intel.com/performance": "2"}
                pod = {"metadata": {"name": name}, "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                    {"name": "main", "image": ALPINE, "command": ["sleep", "3600"],
                     "resources": {"requests": fixed, "limits": fixed}}]}}  # fmt: skip
                core.create_namespaced_pod(namespace, pod)
                running, seen = until(
                    lambda n=name: (p := core.read_namespaced_pod(n, namespace)).status.phase == "Running" and p,
                    120,
                    f"{name} running",
                )
                checkpoint = json.loads((lab.node_disk(node) / "var/lib/kubelet/cpu_manager_state").read_text())
                given = sorted(cpu_manager.parse_cpuset(checkpoint["entries"][running.metadata.uid]["main"]))
                _ok, applied = until(
                    lambda g=given: all(at(cpufreq(lab, node, c), 80, 100, "performance") for c in g), 60, "applied"
                )
                starts.append(applied - seen)
                with contextlib.suppress(ApiException):  # already gone is gone
                    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                deleted = time.monotonic()
                _ok, back = until(
                    lambda g=given: all(at(cpufreq(lab, node, c), 0, 40, "power") for c in g), 60, "returned"
                )
                returns.append(back - deleted)
                until(lambda n=name: not [p for p in core.list_namespaced_pod(namespace).items
                                          if p.metadata.name == n], 60, "pod gone")  # fmt: skip
                wrong += sum(1 for c in cpus if not at(cpufreq(lab, node, c), 0, 40, "power"))
            usage = agent_usage(lab, node)
            cpu_spent += (usage["cpu_s"] - cpu_before) if usage else 0.0
            reserved_touched = sum(1 for c in RESERVED if cpufreq(lab, node, c) != reserved_before[c])
        finally:
            custom.delete_cluster_custom_object(GROUP, VERSION, "powerprofiles", "bench-shared")
            namespace_cm.__exit__(None, None, None)
        elapsed = time.monotonic() - began
        _ok, _t = until(lambda: not any(at(cpufreq(lab, node, c), 0, 40, "power") for c in cpus), 60, "originals")
    result = {
        "node": node,
        "pods": len(starts),
        "agent_restarts": restarts,
        "reboots": reboots,
        "start_to_applied_ms": {k: round(f(starts) * 1000) for k, f in
                                (("p50", statistics.median), ("p99", lambda v: percentile(v, 99)), ("max", max))},
        "delete_to_returned_ms": {k: round(f(returns) * 1000) for k, f in
                                  (("p50", statistics.median), ("p99", lambda v: percentile(v, 99)), ("max", max))},
        "cpus_at_a_wrong_profile_after_a_pod": wrong,
        "reserved_cpus_touched": reserved_touched,
        "agent_cpu_s": round(cpu_spent, 1),
        "wall_s": round(elapsed, 1),
        "agent_peak_rss_mib": (usage or {}).get("peak_rss_mib"),
        "interval_s": 1,
    }  # fmt: skip
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    runs = f"{result['pods']} pods, one at a time, {restarts} agent restarts, {reboots} reboots"
    print(f"| measure ({runs}) | p50 | p99 | max |")
    print("|---|---:|---:|---:|")
    for key, label in (("start_to_applied_ms", "pod Running to profile applied (ms)"),
                       ("delete_to_returned_ms", "pod deleted to CPUs returned (ms)")):  # fmt: skip
        row = result[key]
        print(f"| {label} | {row['p50']} | {row['p99']} | {row['max']} |")
    print(f"\nCPUs at a wrong profile after a pod: {wrong}; reserved CPUs touched: {reserved_touched}")
    print(f"agent CPU {result['agent_cpu_s']} s in {result['wall_s']} s, peak RSS {result['agent_peak_rss_mib']} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
