"""Per-pod power profiles (docs/pod-power.md) on the site the lab converged (site_run.py).

The site converge runs the pod_power role on the lab's `pod_power_nodes` (inventory/lab/hosts.yml):
its CRDs, admission policy and profiles in the API server, its agent as a systemd unit on the node.
These tests run the Kubernetes Power Manager seed's example adapted only in names: a shared profile,
then a Guaranteed pod asking for ``power.intel.com/performance-<node>: 2`` and ``cpu: 2``; the
scheduler places it by the extended resource the agent advertises, the kubelet's static CPU manager
gives it two CPUs, and the node's kernel (its sysfs) shows those two at the profile and every other
non-reserved CPU at the shared profile; deleted, the pod's CPUs go back. Then each refusal, with its
message.
"""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_run import REPO_ROOT
from kubernetes.client.rest import ApiException
from poweraware_testing import at_profile, cpu_cpufreq, wait_until

from lab.kubelet import cpu_manager

pytestmark = pytest.mark.slow

GROUP, VERSION = "power.poweraware.io", "v1"
ALPINE = "docker.io/library/alpine:3.17.3"
RESERVED = {0, 1}  # the lab workers' reservedSystemCPUs (lab/nodes.py)


def _pod_power_node() -> str:
    inventory = yaml.safe_load((REPO_ROOT / "inventory" / "lab" / "hosts.yml").read_text())
    (name,) = inventory["all"]["children"]["pod_power_nodes"]["hosts"]
    return name


def _cpufreq(lab, node: str, cpu: int) -> dict:
    return cpu_cpufreq(lab.node_sysfs(node), cpu)


def _online(lab, node: str) -> list[int]:
    text = (lab.node_sysfs(node) / "devices" / "system" / "cpu" / "online").read_text().strip()
    return sorted(cpu_manager.parse_cpuset(text))


_at = at_profile


def _guaranteed(name: str, resources: dict, node: str | None = None) -> dict:
    spec: dict = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "main", "image": ALPINE, "command": ["sleep", "3600"], "resources": resources},
        ],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


@pytest.fixture
def namespace(lab):
    with lab.scratch_namespace("pod-power") as name:
        yield name


def _power_node(custom, node: str) -> dict:
    return custom.get_cluster_custom_object(GROUP, VERSION, "powernodes", node).get("status") or {}


def test_the_power_manager_example_pod_gets_its_profile_and_gives_it_back(lab, site, api, namespace):
    core, custom = api["core"], api["custom"]
    node = _pod_power_node()
    cpus = [c for c in _online(lab, node) if c not in RESERVED]
    reserved_before = {c: _cpufreq(lab, node, c) for c in RESERVED}
    shared = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PowerProfile",
        "metadata": {"name": "shared"},
        "spec": {"name": "shared", "shared": True, "max": "40%", "min": "0%", "epp": "power"},
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "powerprofiles", shared)
    try:
        wait_until(
            lambda: all(_at(_cpufreq(lab, node, c), 0, 40, "power") for c in cpus),
            30,
            "every CPU at the shared profile",
        )
        capacity = core.read_node(node).status.allocatable
        resource = f"power.intel.com/performance-{node}"
        assert capacity.get(resource) and capacity.get("power.intel.com/performance"), capacity

        fixed = {"cpu": "2", "memory": "64Mi", resource: "2"}
        core.create_namespaced_pod(namespace, _guaranteed("example", {"requests": fixed, "limits": fixed}))
        pod = wait_until(
            lambda: (p := core.read_namespaced_pod("example", namespace)).status.phase == "Running" and p,
            60,
            "the example pod running",
        )
        assert pod.spec.node_name == node, "the scheduler placed it by the extended resource only that node has"
        checkpoint = json.loads((lab.node_disk(node) / "var/lib/kubelet/cpu_manager_state").read_text())
        given = sorted(cpu_manager.parse_cpuset(checkpoint["entries"][pod.metadata.uid]["main"]))
        assert len(given) == 2 and not set(given) & RESERVED, checkpoint
        wait_until(
            lambda: all(_at(_cpufreq(lab, node, c), 80, 100, "performance") for c in given),
            30,
            f"CPUs {given} at the performance profile",
        )
        others = [c for c in cpus if c not in given]
        assert all(_at(_cpufreq(lab, node, c), 0, 40, "power") for c in others), "the rest stay at the shared profile"
        assert {c: _cpufreq(lab, node, c) for c in RESERVED} == reserved_before, "reserved CPUs never touched"
        status = wait_until(
            lambda: (s := _power_node(custom, node)).get("workloads") and s, 30, "the PowerNode status shows the pod"
        )
        (workload,) = status["workloads"]
        assert workload["pod"] == f"{namespace}/example" and workload["profile"] == "performance", status
        assert sorted(cpu_manager.parse_cpuset(workload["cpus"])) == given, status
        assert status["sharedPool"]["profile"] == "shared", status

        core.delete_namespaced_pod("example", namespace)
        wait_until(
            lambda: all(_at(_cpufreq(lab, node, c), 0, 40, "power") for c in given), 30, f"CPUs {given} returned"
        )
        wait_until(lambda: not _power_node(custom, node).get("workloads"), 30, "the workload gone from the status")
        print(
            f"PROOF pod power: {node} gave {namespace}/example CPUs {given} at performance, the rest shared; returned"
        )
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, "powerprofiles", "shared")
    # no shared profile: every CPU the agent wrote gets its original back
    wait_until(
        lambda: not any(_at(_cpufreq(lab, node, c), 0, 40, "power") for c in cpus), 30, "the CPUs' originals back"
    )


REFUSALS = {
    "two-profiles": (
        [{"cpu": "2", "memory": "64Mi", "power.intel.com/performance": "1", "power.intel.com/balance-power": "1"}],
        "two power profiles",
    ),
    "count-differs": ([{"cpu": "2", "memory": "64Mi", "power.intel.com/performance": "1"}], "as many"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_admission_refuses_what_the_power_manager_silently_ignores(lab, site, api, namespace, case):
    core = api["core"]
    (resources,), expected = REFUSALS[case]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, _guaranteed(case, {"requests": resources, "limits": resources}))
    assert refused.value.status in (403, 422) and expected in refused.value.body, refused.value.body
    print(f"PROOF pod power refusal {case}: {json.loads(refused.value.body)['message']}")


def test_admission_refuses_a_pod_that_is_not_guaranteed(lab, site, api, namespace):
    core = api["core"]
    requests = {"cpu": "2", "memory": "64Mi", "power.intel.com/performance": "2"}
    limits = {"cpu": "4", "memory": "64Mi", "power.intel.com/performance": "2"}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, _guaranteed("burstable", {"requests": requests, "limits": limits}))
    assert refused.value.status in (403, 422) and "Guaranteed" in refused.value.body, refused.value.body
    print(f"PROOF pod power refusal not-guaranteed: {json.loads(refused.value.body)['message']}")


def test_a_profile_the_node_cannot_do_is_not_offered_and_said_in_the_node_status(lab, site, api):
    core, custom = api["core"], api["custom"]
    node = _pod_power_node()
    too_fast = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PowerProfile",
        "metadata": {"name": "too-fast"},
        "spec": {"max": 99000, "min": 98000, "epp": "performance"},
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "powerprofiles", too_fast)
    try:

        def refused() -> dict | None:
            status = _power_node(custom, node)
            found = any(
                c["type"] == "ProfilesValid" and c["status"] == "False" and "too-fast" in c["message"]
                for c in status.get("conditions", [])
            )
            return status if found else None

        status = wait_until(refused, 30, "the PowerNode condition naming the profile")
        assert "power.intel.com/too-fast" not in (core.read_node(node).status.allocatable or {})
        message = next(c["message"] for c in status["conditions"] if c["type"] == "ProfilesValid")
        print(f"PROOF pod power refusal profile-the-node-cannot-do: {message}")
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, "powerprofiles", "too-fast")
