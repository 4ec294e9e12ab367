"""The pod_power node agent (roles/pod_power/files/pod_power_agent.py) end to end on a fake node: the
kernel model (lab/fake_kernel.py) as its sysfs accessor, the lab kubelet's CPU manager
(lab/kubelet/cpu_manager.py) writing ``cpu_manager_state`` as kubelet writes it, a fake API server
that applies the agent's JSON and merge patches as kube-apiserver does, and a fake clock.

The node: intel_pstate in active mode, 16 CPUs (800 .. 3900 MHz, EPP balance_performance, governor
powersave), the kubelet's reservedSystemCPUs 0-1. The profiles are the role's defaults.
"""

from __future__ import annotations

import datetime
import errno
import functools
import io
import json
import os
import pathlib
import random
import re
import sys
import tempfile
import types
import urllib.parse

import pytest
import yaml
from poweraware_testing import load_module, tree_digest

from lab.kubelet import cpu_manager

REPO_ROOT = pathlib.Path(__file__).resolve().parents[5]
fake_sysfs = sys.modules["poweraware_lab_fake_sysfs"]  # loaded by conftest

_path = list(sys.path)
agent_mod = load_module(
    "poweraware_pod_power_agent", REPO_ROOT / "roles" / "pod_power" / "files" / "pod_power_agent.py"
)
sys.path[:] = _path  # the agent puts its own directory first (the role's copy of the collection): not here

NODE = "worker-1"
GROUP_PATH = "/apis/power.poweraware.io/v1"
RESERVED = [0, 1]
START = datetime.datetime(2025, 1, 6, 10, 0, tzinfo=datetime.timezone.utc).timestamp()
KHZ = 1000
CPUINFO = (800, 3900)

# the role's default profiles (roles/pod_power/defaults)
DEFAULT_PROFILES = {
    "performance": {"min": "80%", "max": "100%", "epp": "performance"},
    "balance-performance": {"min": "50%", "max": "80%", "epp": "balance_performance"},
    "balance-power": {"min": "0%", "max": "60%", "epp": "balance_power"},
}


def profile_object(name, **spec):
    return {
        "apiVersion": "power.poweraware.io/v1",
        "kind": "PowerProfile",
        "metadata": {"name": name, "uid": f"uid-profile-{name}"},
        "spec": spec,
    }


def expected_mhz(spec):
    """A default profile's (min, max) MHz on this node: percentages of 800 .. 3900, down to 100 MHz."""
    lo, hi = CPUINFO

    def pct(text):
        value = lo + (hi - lo) * float(text.rstrip("%")) / 100
        return max(lo, int(value // 100 * 100))

    return pct(spec["min"]), pct(spec["max"])


# --- the API server --------------------------------------------------------------------------------
class ApiRefused(Exception):
    pass


def wire(document):
    """``document`` as it arrives over the wire: JSON, sharing nothing with the sender."""
    return json.loads(json.dumps(document))


def _unescape(segment):
    return segment.replace("~1", "/").replace("~0", "~")


def json_patch(document, ops):
    """RFC 6902 on a copy of ``document``, for the object members the agent patches (add, remove,
    replace, test); ApiRefused (422) for an op the document cannot take: the API server refuses the
    whole patch."""
    doc = wire(document)
    for op in ops:
        *parents, last = [_unescape(p) for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parents:
            if not isinstance(parent.get(part), dict):
                raise ApiRefused(f"{op}: {part} is no object")
            parent = parent[part]
        kind = op["op"]
        if kind in ("remove", "replace", "test") and last not in parent:
            raise ApiRefused(f"{op}: {last} does not exist")
        if kind in ("add", "replace"):
            parent[last] = wire(op["value"])
        elif kind == "remove":
            del parent[last]
        elif kind != "test" or parent[last] != op["value"]:
            raise ApiRefused(f"{op}: {'test failed' if kind == 'test' else 'unknown op'}")
    return doc


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return wire(patch)
    result = wire(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pruned(value):
    """What a custom resource stores: null fields dropped (the structural schema's pruning of
    fields that are not nullable)."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


class FakeApi:
    """The agent's Api: GETs of the pods bound to the node, the node, the PowerProfiles, TimeOfDays
    and the PowerNode; PATCHes applied to them; Events recorded. ``calls`` has every request."""

    def __init__(self, node=NODE, capacity_cpus=16):
        self.node_name = node
        self.pods = {}
        self.node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "poweraware.io/pod-power": "true"}},
            "status": {
                field: {"cpu": str(capacity_cpus), "memory": "65843832Ki", "pods": "110", "example.com/dongle": "2"}
                for field in ("capacity", "allocatable")
            },
        }
        self.profiles = {}
        self.days = {}
        self.power_nodes = {node: {"apiVersion": "power.poweraware.io/v1", "kind": "PowerNode",
                                   "metadata": {"name": node}}}  # fmt: skip
        self.events = []
        self.calls = []
        self.closed = 0
        self.schema = pruned  # what the PowerNode CRD keeps of a status

    # test side
    def add_profile(self, name, **spec):
        self.profiles[name] = profile_object(name, **spec)

    def writes(self):
        """The requests that changed something (a 409 AlreadyExists changed nothing)."""
        return [call for call in self.calls if call[0] != "GET" and call[4] < 300]

    def power_node_status(self):
        return self.power_nodes[self.node_name].get("status")

    def condition(self, kind):
        status = self.power_node_status() or {}
        return next(c for c in status.get("conditions") or [] if c["type"] == kind)

    def power_resources(self, field="allocatable"):
        found = self.node["status"][field]
        return {k: v for k, v in found.items() if k.startswith("power.intel.com/")}

    # the agent's side
    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        body = wire(body)  # what the server gets is JSON: nothing the agent keeps is shared
        status, document = self._serve(method, path, wire(body), content_type)
        self.calls.append((method, path, body, content_type, status))
        if status in ok or (method == "GET" and status == 404):
            return status, wire(document)
        raise agent_mod.AgentError(f"{method} {path}: HTTP {status}: {document}")

    def get(self, path):
        status, document = self.request("GET", path)
        return None if status == 404 else document

    def close(self):
        self.closed += 1

    def _serve(self, method, path, body, content_type):
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        route = url.path
        node_path = f"/api/v1/nodes/{self.node_name}"
        power_node = f"{GROUP_PATH}/powernodes/{self.node_name}"
        if method == "GET" and route == "/api/v1/pods":
            assert query == {"fieldSelector": [f"spec.nodeName={self.node_name}"]}, query
            items = [p for p in self.pods.values() if p["spec"].get("nodeName") == self.node_name]
            return 200, {"kind": "PodList", "items": items}
        if method == "GET" and route == node_path:
            return 200, self.node
        if method == "GET" and route == f"{GROUP_PATH}/powerprofiles":
            return 200, {"items": [self.profiles[n] for n in sorted(self.profiles)]}
        if method == "GET" and route == f"{GROUP_PATH}/timeofdays":
            return 200, {"items": [self.days[n] for n in sorted(self.days)]}
        if method == "GET" and route == power_node:
            found = self.power_nodes.get(self.node_name)
            return (200, found) if found is not None else (404, {"message": "not found"})
        if method == "PATCH" and route == f"{node_path}/status":
            assert content_type == "application/json-patch+json"
            try:
                self.node = json_patch(self.node, body)
            except ApiRefused as exc:
                return 422, {"message": str(exc)}
            return 200, self.node
        if method == "PATCH" and route == f"{power_node}/status":
            current = self.power_nodes.get(self.node_name)
            if current is None:
                return 404, {"message": "not found"}
            if content_type == "application/merge-patch+json":
                patched = merge_patch(current, body)
            elif content_type == "application/json-patch+json":
                try:
                    patched = json_patch(current, body)
                except ApiRefused as exc:
                    return 422, {"message": str(exc)}
            else:
                return 415, {"message": content_type}
            # the status subresource: only status changes
            current = dict(current)
            if patched.get("status") is None:
                current.pop("status", None)
            else:
                current["status"] = self.schema(patched["status"])
            self.power_nodes[self.node_name] = current
            return 200, current
        if method == "POST" and route.startswith("/api/v1/namespaces/") and route.endswith("/events"):
            namespace = route.split("/")[4]
            metadata = body["metadata"]
            assert metadata["namespace"] == namespace
            name = metadata.get("name") or f"{metadata['generateName']}{len(self.events):05x}"
            if any(e["metadata"]["name"] == name and e["metadata"]["namespace"] == namespace for e in self.events):
                return 409, {"reason": "AlreadyExists", "message": f'events "{name}" already exists'}
            event = dict(body, metadata=dict(metadata, name=name))
            self.events.append(event)
            return 201, event
        return 404, {"message": f"{method} {path}: no such route in the fake API server"}


# --- the kubelet -----------------------------------------------------------------------------------
class Kubelet:
    """The lab kubelet's static CPU manager policy over the node's topology: admit() gives a
    Guaranteed container its exclusive CPUs, forget() gives them back, both written to the
    checkpoint as kubelet writes it."""

    def __init__(self, node, directory, policy="static"):
        self.directory = directory
        self.path = directory / cpu_manager.STATE_FILE
        topology = cpu_manager.discover(node.sys)
        if policy == "static":
            self.policy = cpu_manager.StaticPolicy(topology, len(RESERVED), frozenset(RESERVED))
        else:
            self.policy = cpu_manager.NonePolicy()
        self.state = cpu_manager.CheckpointState(directory, self.policy.name)
        self.policy.start(self.state)

    def admit(self, pod):
        for container in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
            self.policy.allocate(self.state, pod, container)

    def forget(self, pod):
        for container in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
            self.policy.remove_container(self.state, pod["metadata"]["uid"], container["name"])

    def cpus(self, pod, container="app"):
        return sorted(self.state.get(pod["metadata"]["uid"], container) or [])


def make_pod(name, uid, cpus, profile=None, namespace="apps", node=NODE, resource=None, memory="1Gi", **resources):
    limits = {"cpu": str(cpus), "memory": memory}
    if profile is not None:
        limits[resource or f"power.intel.com/{profile}"] = str(cpus)
    limits.update(resources)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": limits, "requests": dict(limits)},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


class Clock:
    def __init__(self, now=START):
        self.now = now

    def __call__(self):
        return self.now

    def tick(self, seconds=1.0):
        self.now += seconds


# --- the node --------------------------------------------------------------------------------------
class QuickKernel(sys.modules["poweraware_lab_fake_kernel"].FakeKernel):
    """The kernel model with its reads remembered until a write to their directory. The node power
    library plans each assignment from what the kernel holds, so a cycle reads every policy's
    attributes a few times over: on this tree, through the model's symlink resolution, that is most
    of a soak's time. Same rules and same files; nothing else writes the tree while it runs (no
    hotplug), so a remembered value is the file's."""

    def __init__(self, root):
        super().__init__(root)
        self._resolved, self._values, self._keys = {}, {}, {}  # rel -> real; key -> value; directory -> keys

    def resolve(self, rel):
        if rel not in self._resolved:
            self._resolved[rel] = super().resolve(rel)
        return self._resolved[rel]

    def _remembered(self, key, read):
        if key not in self._values:
            self._values[key] = read(key[1])
            self._keys.setdefault(os.path.dirname(self.resolve(key[1])), []).append(key)
        return self._values[key]

    def exists(self, rel):
        return self._remembered(("exists", rel), super().exists)

    def read(self, rel):
        return self._remembered(("read", rel), super().read)

    def write(self, rel, value):
        try:
            super().write(rel, value)
        finally:  # a write may change every attribute of its directory (a policy's min clamps its max)
            for key in self._keys.pop(os.path.dirname(self.resolve(rel)), []):
                self._values.pop(key, None)


class Site:
    """One node as the agent sees it: the fake kernel, the kubelet, the API server, the clock."""

    def __init__(self, node, tmp_path, policy="static"):
        self.node = node
        self.pristine = tree_digest(self.node.sys)
        self.api = FakeApi()
        self.clock = Clock()
        self.kubelet = Kubelet(self.node, tmp_path / "kubelet", policy)
        self.state_file = tmp_path / "var" / "lib" / "poweraware" / "pod_power_state.json"
        self.out = io.StringIO()
        self.config = {
            "node": NODE,
            "api_server": "https://192.0.2.1:6443",
            "ca_file": str(tmp_path / "ca.crt"),
            "token_file": str(tmp_path / "token"),
            "state_file": str(self.state_file),
            "kubelet_state": str(self.kubelet.path),
            "sysfs_root": str(self.node.sys),
            "reserved_cpus": list(RESERVED),
            "tolerance_mhz": 100,
            "interval_s": 1.0,
            "resync_s": 60.0,
        }
        self.agent = self.new_agent()

    def new_agent(self):
        self.agent = agent_mod.Agent(dict(self.config), api=self.api, acc=self.node.kernel, clock=self.clock,
                                     out=self.out)  # fmt: skip
        return self.agent

    def add_default_profiles(self, shared=None):
        for name, spec in DEFAULT_PROFILES.items():
            self.api.add_profile(name, **spec)
        if shared is not None:
            self.api.add_profile("shared", shared=True, **DEFAULT_PROFILES[shared])

    def start(self, pod):
        self.api.pods[pod["metadata"]["uid"]] = pod
        self.kubelet.admit(pod)
        return pod

    def delete(self, pod):
        self.api.pods.pop(pod["metadata"]["uid"], None)
        self.kubelet.forget(pod)

    def cycle(self, seconds=1.0):
        self.clock.tick(seconds)
        return self.agent.cycle()

    # the kernel's view
    def freq(self, cpu):
        """(scaling_min_freq, scaling_max_freq) in MHz, as the kernel shows them."""
        policy = f"devices/system/cpu/cpu{cpu}/cpufreq"
        read = self.node.kernel.read
        return int(read(f"{policy}/scaling_min_freq")) // KHZ, int(read(f"{policy}/scaling_max_freq")) // KHZ

    def cpu(self, cpu):
        epp = self.node.kernel.read(f"devices/system/cpu/cpu{cpu}/cpufreq/energy_performance_preference")
        return (*self.freq(cpu), epp)

    def policy_bytes(self, cpu):
        base = self.node.sys / "devices" / "system" / "cpu" / "cpufreq" / f"policy{cpu}"
        return {p.name: p.read_bytes() for p in sorted(base.iterdir())}

    def journal(self):
        if not self.state_file.exists():
            return {}
        data = json.loads(self.state_file.read_text())
        return {k: v for k, v in data.items() if k in ("policies", "attributes") and v}


ORIGINAL = (800, 3900, "balance_performance")


def at_profile(name):
    spec = DEFAULT_PROFILES[name]
    return (*expected_mhz(spec), spec["epp"])


@pytest.fixture
def tmp_path(tmp_path, monkeypatch):
    """Each test's files (make_node's tree too) on tmpfs where there is one, and fsync a no-op: a
    cycle replaces sysfs files, the journal and the checkpoint, a soak thousands of times, which a
    busy disk's journal makes slow. Durability is not under test."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    shm = pathlib.Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="poweraware-pod-power-agent-") as base:
        yield pathlib.Path(base)


@pytest.fixture
def site(make_node, tmp_path):
    return Site(make_node("intel_pstate_active", cpus=16), tmp_path)


@pytest.fixture
def quick_site(tmp_path):
    """A Site whose kernel model remembers its reads (QuickKernel): for the soak."""
    root = fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active", cpus=16)
    return Site(types.SimpleNamespace(sys=root, kernel=QuickKernel(root)), tmp_path)


def snapshot(site):
    """What a run may change: the sysfs tree, the kernel's write log, the journal (rewritten or not),
    the API server's writes."""
    journal = site.state_file.stat().st_mtime_ns if site.state_file.exists() else None
    return tree_digest(site.node.sys), len(site.node.kernel.writes), journal, len(site.api.writes())


def written_policies(site, since=0):
    return sorted({path.split("/")[4] for path, _value in site.node.kernel.writes[since:]})


def test_the_profiles_here_are_the_roles_defaults():
    defaults = yaml.safe_load((REPO_ROOT / "roles" / "pod_power" / "defaults" / "main.yml").read_text())
    assert defaults["pod_power_profiles"] == DEFAULT_PROFILES


# --- 1. a pod's CPUs at its profile --------------------------------------------------------------
@pytest.mark.parametrize("resource", ["power.intel.com/performance", f"power.intel.com/performance-{NODE}"])
def test_a_guaranteed_pods_cpus_run_its_profile_and_the_shared_pool_the_shared_one(site, resource):
    site.add_default_profiles(shared="balance-power")
    reserved_before = {cpu: site.policy_bytes(cpu) for cpu in RESERVED}
    pod = site.start(make_pod("fast-0", "uid-fast", 2, "performance", resource=resource))
    assert site.kubelet.cpus(pod) == [2, 3]
    checkpoint = json.loads(site.kubelet.path.read_text())
    assert checkpoint["entries"] == {"uid-fast": {"app": "2-3"}} and checkpoint["defaultCpuSet"] == "0-1,4-15"

    plan = site.cycle()
    assert plan["refusals"] == [] and plan["problems"] == []
    assert [site.cpu(cpu) for cpu in (2, 3)] == [at_profile("performance")] * 2 == [(3200, 3900, "performance")] * 2
    assert [site.cpu(cpu) for cpu in range(4, 16)] == [(800, 2600, "balance_power")] * 12
    # the reserved CPUs: never written, byte for byte as they were
    assert {cpu: site.policy_bytes(cpu) for cpu in RESERVED} == reserved_before
    assert [site.cpu(cpu) for cpu in RESERVED] == [ORIGINAL] * 2
    assert written_policies(site) == sorted(f"policy{cpu}" for cpu in range(2, 16))
    # the journal holds the originals of what was written, nothing of the reserved CPUs
    assert sorted(site.journal()["policies"], key=lambda n: int(n[6:])) == [f"policy{c}" for c in range(2, 16)]

    status = site.api.power_node_status()
    assert status["workloads"] == [
        {"pod": "apps/fast-0", "uid": "uid-fast", "container": "app", "cpus": "2-3", "profile": "performance"}
    ]
    assert status["sharedPool"] == {"profile": "shared", "cpus": "4-15"}
    assert status["reservedCPUs"] == "0-1"
    assert status["activeProfiles"] == ["performance", "shared"]
    assert [(p["name"], p["capacity"], p["minMHz"], p["maxMHz"], p["epp"]) for p in status["profiles"]] == [
        ("balance-performance", 14, 2300, 3200, "balance_performance"),
        ("balance-power", 14, 800, 2600, "balance_power"),
        ("performance", 14, 3200, 3900, "performance"),
    ]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Applied", "True"), ("ProfilesValid", "True")]
    offered = {f"power.intel.com/{name}{suffix}": "14" for name in DEFAULT_PROFILES for suffix in ("", f"-{NODE}")}
    for field in ("capacity", "allocatable"):
        assert site.api.power_resources(field) == offered  # the shared profile is no resource
        assert site.api.node["status"][field]["cpu"] == "16"
        assert site.api.node["status"][field]["example.com/dongle"] == "2"  # other resources kept
    assert site.api.events == []
    assert "applied: shared on 4-15; performance on 2-3; restored: none" in site.out.getvalue()


# --- 2. the pod deleted ------------------------------------------------------------------------------
def test_a_deleted_pods_cpus_go_back_to_the_shared_profile_and_without_one_to_their_originals(site):
    site.add_default_profiles(shared="balance-power")
    pod = site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    site.cycle()
    assert site.cpu(2) == at_profile("performance")

    # gone from the API, still in the checkpoint (kubelet has not removed it yet): its CPUs are
    # restored, not given to the shared pool the kubelet has not given them back to
    site.api.pods.clear()
    site.cycle()
    assert [site.cpu(cpu) for cpu in (2, 3)] == [ORIGINAL] * 2
    assert site.api.power_node_status()["workloads"] == []

    site.kubelet.forget(pod)
    site.cycle()
    assert [site.cpu(cpu) for cpu in range(2, 16)] == [at_profile("balance-power")] * 14
    status = site.api.power_node_status()
    assert status["sharedPool"] == {"profile": "shared", "cpus": "2-15"}
    assert status["activeProfiles"] == ["shared"]

    del site.api.profiles["shared"]
    site.cycle()
    assert [site.cpu(cpu) for cpu in range(16)] == [ORIGINAL] * 16
    assert tree_digest(site.node.sys) == site.pristine
    assert site.journal() == {}
    status = site.api.power_node_status()
    assert status["sharedPool"] == {"cpus": "2-15"}  # no profile: the key is gone, not null
    assert status["activeProfiles"] == [] and status["workloads"] == []
    assert "applied: no profile; restored: 2-15" in site.out.getvalue()


def test_the_shared_pool_follows_the_time_of_day_on_the_agents_clock(site):
    site.add_default_profiles()
    site.api.add_profile("day", shared=True, **DEFAULT_PROFILES["balance-performance"])
    site.api.add_profile("night", shared=True, **DEFAULT_PROFILES["balance-power"])
    site.api.days["office"] = {
        "apiVersion": "power.poweraware.io/v1",
        "kind": "TimeOfDay",
        "metadata": {"name": "office"},
        "spec": {
            "timeZone": "UTC",
            "nodeSelector": {"matchLabels": {"poweraware.io/pod-power": "true"}},
            "schedule": [{"time": "07:00", "powerProfile": "day"}, {"time": "19:00", "powerProfile": "night"}],
        },
    }
    site.cycle()  # 10:00:01 UTC
    assert [site.cpu(cpu) for cpu in range(2, 16)] == [at_profile("balance-performance")] * 14
    assert site.api.power_node_status()["sharedPool"]["profile"] == "day"
    site.cycle(seconds=9 * 3600 - 1)  # 19:00:00
    assert [site.cpu(cpu) for cpu in range(2, 16)] == [at_profile("balance-power")] * 14
    assert site.api.power_node_status()["sharedPool"]["profile"] == "night"
    assert site.api.condition("ProfilesValid")["status"] == "True"


# --- 3. restart and idempotence --------------------------------------------------------------------
@pytest.mark.parametrize("shared", ["balance-power", None])
def test_a_second_cycle_and_a_restarted_agent_write_nothing(site, shared):
    site.add_default_profiles(shared=shared)
    site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    site.start(make_pod("eco-0", "uid-eco", 3, "balance-power", namespace="batch"))
    site.start(make_pod("db-0", "uid-db", 2))  # Guaranteed, no profile: its CPUs keep their originals
    two = make_pod("two-0", "uid-two", 2, "performance", **{"power.intel.com/balance-power": "2"})
    site.start(two)  # refused: two profiles
    site.cycle()
    assert len(site.api.events) == 1
    before = snapshot(site)

    site.cycle()  # unchanged inputs: no API write at all (the site's idempotence check snapshots the cluster)
    assert snapshot(site) == before, site.api.writes()[before[3] :]

    site.new_agent()  # a restart: nothing written to the kernel, nothing new published
    site.cycle()
    assert snapshot(site) == before, (site.api.writes()[before[3] :], site.node.kernel.writes[before[1] :])
    # the refusal's Event is posted again under its name, which the API server has already
    assert [c[4] for c in site.api.calls if c[0] == "POST"] == [201, 409]
    site.cycle()
    assert snapshot(site) == before
    assert [c[4] for c in site.api.calls if c[0] == "POST"] == [201, 409]

    site.cycle(seconds=61)  # the resync applies again: the kernel holds the wanted values already
    assert snapshot(site) == before
    assert len(site.api.events) == 1


def test_a_status_the_api_server_stores_otherwise_is_not_patched_again_every_cycle(site):
    """A CRD whose schema drops a field the agent writes (an older one without reservedCPUs): what
    the server made of the status the last time counts as published."""
    site.add_default_profiles()
    site.api.schema = lambda status: {k: v for k, v in pruned(status).items() if k != "reservedCPUs"}
    site.cycle()
    assert "reservedCPUs" not in site.api.power_node_status()
    writes = len(site.api.writes())
    site.cycle()
    site.cycle()
    assert len(site.api.writes()) == writes
    site.new_agent()
    site.cycle()  # a restarted agent does not know: it publishes once more
    site.cycle()
    assert len(site.api.writes()) == writes + 1


# --- 4. refusals ---------------------------------------------------------------------------------
def test_refused_pods_get_one_event_per_message_and_the_node_condition_names_them(site):
    site.add_default_profiles(shared="balance-power")
    two = site.start(make_pod("two-0", "uid-two", 2, "performance", **{"power.intel.com/balance-power": "2"}))
    count = site.start(make_pod("count-0", "uid-count", 2, "performance", resource="power.intel.com/performance"))
    count["spec"]["containers"][0]["resources"]["limits"]["power.intel.com/performance"] = "1"
    count["spec"]["containers"][0]["resources"]["requests"]["power.intel.com/performance"] = "1"
    unknown = site.start(make_pod("unknown-0", "uid-unknown", 1, "turbo"))
    burst = make_pod("burst-0", "uid-burst", 1, "performance")
    burst["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
    site.start(burst)  # Burstable: no exclusive CPUs from the kubelet
    assert site.kubelet.cpus(burst) == []
    plan = site.cycle()

    messages = {(e["involvedObject"]["name"], e["message"]) for e in site.api.events}
    assert {name for name, _message in messages} == {"two-0", "count-0", "unknown-0", "burst-0"}
    assert len(site.api.events) == len(plan["refusals"]) == 4
    by_pod = {e["involvedObject"]["name"]: e for e in site.api.events}
    assert by_pod["two-0"]["message"].startswith("pod requests two power profiles (power.intel.com/balance-power, ")
    assert "asks for 1 power.intel.com/performance but cpu 2" in by_pod["count-0"]["message"]
    assert "no PowerProfile of that name applies to node worker-1" in by_pod["unknown-0"]["message"]
    assert by_pod["burst-0"]["message"].startswith("pod is not Guaranteed (container app requests memory 512Mi")
    for event in site.api.events:
        assert event["type"] == "Warning" and event["reason"] == "PowerProfileRefused"
        assert event["involvedObject"]["kind"] == "Pod" and event["involvedObject"]["uid"].startswith("uid-")
        assert event["source"] == {"component": "poweraware-pod-power", "host": NODE}
        assert re.fullmatch(rf"{event['involvedObject']['name']}\.[0-9a-f]{{16}}", event["metadata"]["name"])
    # the refused pods' exclusive CPUs keep their originals: never a profile they half asked for
    for pod in (two, count, unknown):
        assert {site.cpu(cpu) for cpu in site.kubelet.cpus(pod)} == {ORIGINAL}
    condition = site.api.condition("ProfilesValid")
    assert condition["status"] == "False" and condition["reason"] == "Refused"
    for name in ("two-0", "count-0", "unknown-0", "burst-0"):
        assert f"pod apps/{name}: " in condition["message"], condition["message"]

    site.cycle()
    site.cycle(seconds=61)
    assert len(site.api.events) == 4  # once per pod and message

    # a changed refusal is a new message: one more Event
    del site.api.pods["uid-unknown"]
    site.kubelet.forget(unknown)
    unknown = site.start(make_pod("unknown-0", "uid-unknown-2", 1, "turbo"))
    site.cycle()
    assert len(site.api.events) == 5


def test_a_profile_the_node_cannot_do_is_not_offered_and_named_in_the_condition(site):
    site.add_default_profiles()
    site.api.add_profile("too-fast", min=3000, max=4500, epp="performance")  # above cpuinfo_max 3900
    pod = site.start(make_pod("fast-0", "uid-fast", 2, "too-fast"))  # bound by name: no scheduler
    site.cycle()
    assert "power.intel.com/too-fast" not in site.api.power_resources("capacity")
    assert "power.intel.com/too-fast" not in site.api.power_resources("allocatable")
    assert "power.intel.com/performance" in site.api.power_resources("allocatable")
    condition = site.api.condition("ProfilesValid")
    assert condition["status"] == "False"
    assert (
        "profile too-fast: max 4500 MHz is above CPUs 0-15's cpuinfo_max 3900 MHz on this node; lower max or use a "
        'percentage like "100%"'
    ) in condition["message"]
    (event,) = site.api.events
    assert event["message"].startswith("node worker-1 cannot do profile too-fast: max 4500 MHz is above")
    assert {site.cpu(cpu) for cpu in site.kubelet.cpus(pod)} == {ORIGINAL}
    assert "too-fast" not in [p["name"] for p in site.api.power_node_status()["profiles"]]


def test_kubelet_policy_none_is_a_problem_and_every_pod_asking_for_a_profile_hears_it(make_node, tmp_path):
    site = Site(make_node("intel_pstate_active", cpus=16), tmp_path, policy="none")
    site.add_default_profiles(shared="balance-power")
    site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    site.start(make_pod("db-0", "uid-db", 2))  # asks for no profile: no Event
    done = site.start(make_pod("job-0", "uid-job", 1, "performance"))
    done["status"]["phase"] = "Succeeded"  # finished: nothing to tell it
    leaving = site.start(make_pod("old-0", "uid-old", 1, "performance"))
    leaving["metadata"]["deletionTimestamp"] = "2025-01-06T09:59:00Z"
    assert json.loads(site.kubelet.path.read_text())["policyName"] == "none"
    site.cycle()
    (event,) = site.api.events
    assert event["involvedObject"]["name"] == "fast-0"
    assert event["message"] == (
        "node worker-1's kubelet does not run the static CPU manager policy: the pod has no CPUs of its own to give "
        "a profile"
    )
    condition = site.api.condition("ProfilesValid")
    assert condition["status"] == "False"
    assert "the kubelet's CPU manager policy is 'none', not static" in condition["message"]
    assert site.api.power_resources("capacity") == {} == site.api.power_resources("allocatable")
    assert site.api.power_node_status()["profiles"] == []
    # the shared pool is every non-reserved CPU: the shared profile runs there
    assert [site.cpu(cpu) for cpu in range(2, 16)] == [at_profile("balance-power")] * 14
    site.cycle()
    assert len(site.api.events) == 1


def test_shared_cpufreq_policies_run_one_profile_or_none(make_node, tmp_path):
    """acpi-cpufreq with a policy for every two CPUs (1200 .. 2601 MHz, no EPP), CPU 7 offline: a pod
    holding half a policy is refused (its profile would set its neighbour too), the policy keeps its
    originals; a policy restored whole takes its offline CPU along (the journal restores it whole)."""
    site = Site(make_node("acpi_cpufreq_shared", cpus=8, offline="7"), tmp_path)
    site.api.add_profile("fast", min="80%")
    site.api.add_profile("shared", shared=True, max="60%")
    two = site.start(make_pod("two-0", "uid-two", 2, "fast"))
    one = site.start(make_pod("one-0", "uid-one", 1, "fast"))
    assert (site.kubelet.cpus(two), site.kubelet.cpus(one)) == ([2, 3], [4])
    plan = site.cycle()
    assert site.api.condition("Applied")["status"] == "True"
    assert [site.freq(cpu) for cpu in (2, 4, 6)] == [(2300, 2601), (1200, 2601), (1200, 2000)]
    assert plan["restore"] == [4, 5]
    (event,) = site.api.events
    assert event["involvedObject"]["name"] == "one-0"
    assert event["message"].startswith(
        "node worker-1 cannot do profile fast: CPUs 4 share cpufreq policies (policy4: CPUs 4-5) with CPUs 5, which "
        "do not run it (one write sets every CPU of a policy)"
    )
    assert site.api.power_node_status()["workloads"] == [
        {"pod": "apps/two-0", "uid": "uid-two", "container": "app", "cpus": "2-3", "profile": "fast"}
    ]

    site.delete(one)
    site.cycle()
    assert site.freq(4) == (1200, 2000)
    site.delete(two)
    del site.api.profiles["shared"]
    plan = site.cycle()
    assert plan["restore"] == [2, 3, 4, 5, 6, 7]
    assert site.api.condition("Applied")["status"] == "True"
    assert tree_digest(site.node.sys) == site.pristine
    assert site.journal() == {}


# --- 5. a failing apply ----------------------------------------------------------------------------
def test_a_failing_apply_is_rolled_back_said_and_retried_after_retry_s_or_a_change(site):
    site.add_default_profiles(shared="balance-power")
    site.cycle()
    applied = site.api.condition("Applied")
    for _attempt in range(3):  # the kernel refuses the write three times in a row
        site.node.kernel.fail_write("policy3/energy_performance_preference", errno.EIO)
    site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    sys_before = tree_digest(site.node.sys)
    site.cycle()
    assert tree_digest(site.node.sys) == sys_before  # rolled back: CPU 2 is not left half done
    condition = site.api.condition("Applied")
    assert (condition["status"], condition["reason"]) == ("False", "ApplyFailed")
    assert "policy3/energy_performance_preference" in condition["message"] and "EIO" in condition["message"]
    assert condition["lastTransitionTime"] != applied["lastTransitionTime"]
    assert "apply failed (retried in 10 s or when the wanted state changes)" in site.out.getvalue()
    assert len(site.node.kernel._failures) == 2

    quiet = snapshot(site)
    for _second in range(int(agent_mod.RETRY_S) - 2):
        site.cycle()  # not retried within RETRY_S: no write, nothing new published
    assert snapshot(site) == quiet and len(site.node.kernel._failures) == 2

    site.cycle(seconds=2)  # RETRY_S after the failure: tried again (and refused again)
    assert len(site.node.kernel._failures) == 1
    assert tree_digest(site.node.sys) == sys_before
    assert site.api.condition("Applied")["status"] == "False"

    site.clock.tick(1)
    site.start(make_pod("eco-0", "uid-eco", 2, "balance-power"))  # a new wanted state: tried at once
    site.cycle()
    assert len(site.node.kernel._failures) == 0
    assert site.api.condition("Applied")["status"] == "False"

    site.cycle(seconds=agent_mod.RETRY_S)  # the kernel takes it now
    assert [site.cpu(cpu) for cpu in (2, 3)] == [at_profile("performance")] * 2
    assert [site.cpu(cpu) for cpu in (4, 5)] == [at_profile("balance-power")] * 2
    condition = site.api.condition("Applied")
    assert (condition["status"], condition["message"]) == ("True", "every CPU is at its wanted profile")


def test_after_a_failed_apply_the_state_applied_before_is_applied_again(site):
    """A failure after the restore part leaves the node at neither state: when the wanted state
    then returns to the one applied before, it is written again, not taken for done."""
    site.add_default_profiles()
    first = site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    site.cycle()
    assert site.cpu(2) == at_profile("performance")
    moved = site.start(make_pod("fast-1", "uid-fast-1", 2, "performance"))
    assert site.kubelet.cpus(moved) == [4, 5]
    site.delete(first)
    site.node.kernel.fail_write("policy5/energy_performance_preference", errno.EIO)
    site.cycle()  # CPUs 2-3 restored, 4-5 refused by the kernel (rolled back)
    assert site.api.condition("Applied")["status"] == "False"
    assert site.cpu(2) == ORIGINAL and site.cpu(4) == ORIGINAL
    site.delete(moved)
    again = site.start(make_pod("fast-2", "uid-fast-2", 2, "performance"))
    assert site.kubelet.cpus(again) == [2, 3]  # the wanted state is the first one again
    site.cycle()
    assert [site.cpu(cpu) for cpu in (2, 3)] == [at_profile("performance")] * 2
    assert site.api.condition("Applied")["status"] == "True"


# --- 6. remove() -----------------------------------------------------------------------------------
def test_remove_restores_every_cpu_and_takes_back_what_the_agent_published(site):
    site.add_default_profiles(shared="balance-power")
    site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    site.cycle()
    assert site.api.power_resources("capacity")
    assert site.new_agent().remove() == 0  # as the role's absent runs it: a new process
    assert tree_digest(site.node.sys) == site.pristine
    assert site.journal() == {}
    for field in ("capacity", "allocatable"):
        assert site.api.power_resources(field) == {}
        assert site.api.node["status"][field]["example.com/dongle"] == "2"
        assert site.api.node["status"][field]["cpu"] == "16"
    assert site.api.power_node_status() is None
    assert site.api.closed == 1
    assert "restored CPUs 2-15 from" in site.out.getvalue()

    writes = len(site.api.writes())
    assert site.new_agent().remove() == 0  # again: nothing left to do
    assert len(site.api.writes()) == writes
    assert tree_digest(site.node.sys) == site.pristine


# --- 7. main() -------------------------------------------------------------------------------------
def test_the_api_client_talks_tls_only(tmp_path):
    with pytest.raises(agent_mod.AgentError, match=r"api_server 'http://192.0.2.1:6443' is not an https:// URL"):
        agent_mod.Api("http://192.0.2.1:6443", str(tmp_path / "ca.crt"), str(tmp_path / "token"))


@pytest.mark.parametrize(
    "args",
    [[], ["--once"], ["a.json", "b.json"], ["--once", "--remove", "a.json"], ["--now", "a.json"]],
    ids=["nothing", "no-config", "two-configs", "two-flags", "unknown-flag"],
)
def test_main_usage_errors(args, capsys):
    assert agent_mod.main(["pod_power_agent.py", *args]) == 2
    assert capsys.readouterr().err == "usage: pod_power_agent.py [--once | --remove] CONFIG_JSON\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (json.dumps({"node": NODE, "api_server": "https://192.0.2.1:6443", "kubelet_state": ""}),
         ": missing ca_file, token_file, state_file, kubelet_state; the pod_power role writes them all: run it again"),
        ("{not json", " is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); "
         "the pod_power role writes it: run it again"),
        ("[]", " is not a JSON object of settings; the pod_power role writes it: run it again"),
    ],
    ids=["missing-keys", "not-json", "not-an-object"],
)  # fmt: skip
def test_main_refuses_a_config_it_cannot_use(tmp_path, capsys, text, message):
    config = tmp_path / "pod_power.json"
    config.write_text(text)
    assert agent_mod.main(["pod_power_agent.py", "--once", str(config)]) == 1
    assert capsys.readouterr().err == f"pod_power agent: {config}{message}\n"
    assert agent_mod.main(["pod_power_agent.py", str(tmp_path / "missing.json")]) == 1
    assert capsys.readouterr().err == (
        f"pod_power agent: [Errno 2] No such file or directory: '{tmp_path / 'missing.json'}'\n"
    )


def test_main_once_and_remove(site, monkeypatch):
    site.add_default_profiles(shared="balance-power")
    site.start(make_pod("fast-0", "uid-fast", 2, "performance"))
    config = site.state_file.parent.parent / "pod_power.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(site.config))
    monkeypatch.setattr(agent_mod, "Api", lambda *args, **kwargs: site.api)
    monkeypatch.setattr(agent_mod, "SysfsAccessor", lambda root: site.node.kernel)
    monkeypatch.setattr(agent_mod, "Agent", functools.partial(agent_mod.Agent, out=site.out))
    assert agent_mod.main(["pod_power_agent.py", "--once", str(config)]) == 0
    assert site.cpu(2) == at_profile("performance")
    assert "applied: shared on 4-15; performance on 2-3" in site.out.getvalue()
    site.node.kernel.fail_write("policy4/scaling_max_freq", errno.EIO)
    site.start(make_pod("eco-0", "uid-eco", 2, "balance-performance"))
    assert agent_mod.main(["pod_power_agent.py", "--once", str(config)]) == 1  # the apply failed
    assert agent_mod.main(["pod_power_agent.py", "--remove", str(config)]) == 0
    assert tree_digest(site.node.sys) == site.pristine
    assert site.api.power_resources("allocatable") == {}


def test_run_logs_a_failed_cycle_and_goes_on_until_stopped(site, monkeypatch):
    site.add_default_profiles()
    agent = site.agent
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        site.clock.tick(seconds)
        if len(sleeps) == 1:
            site.api.power_nodes[NODE] = {"metadata": {"name": NODE}}  # the role creates it again
        else:
            agent.stopping = True

    monkeypatch.setattr(agent_mod.time, "sleep", sleep)
    del site.api.power_nodes[NODE]
    assert agent.run() == 0
    log = site.out.getvalue()
    assert "cycle failed (tried again in 1 s): PowerNode worker-1 does not exist" in log
    assert len(sleeps) == 2 and site.api.power_node_status()["reservedCPUs"] == "0-1"
    assert site.api.closed == 1


# --- 8. a randomised soak --------------------------------------------------------------------------
def test_soak_pods_come_and_go_with_restarts(quick_site):
    """400 cycles: each starts or deletes a pod (a random profile, or none, and 1..4 CPUs); a new
    agent about every 40, the shared profile on and off every 100. After each cycle every CPU is at
    its wanted profile or its original."""
    site = quick_site
    rng = random.Random(47)
    site.add_default_profiles()
    shared = DEFAULT_PROFILES["balance-performance"]
    running = {}
    restarts, next_restart = 0, rng.randint(30, 50)
    for step in range(400):
        with_shared = (step // 100) % 2 == 1
        if with_shared:
            site.api.add_profile("shared", shared=True, **shared)
        else:
            site.api.profiles.pop("shared", None)
        free = 14 - sum(len(site.kubelet.cpus(p)) for p in running.values())
        if running and (free < 4 or rng.random() < 0.45):
            uid = rng.choice(sorted(running))
            site.delete(running.pop(uid))
        else:
            profile = rng.choice([*DEFAULT_PROFILES, None])
            uid = f"uid-{step}"
            running[uid] = site.start(make_pod(f"pod-{step}", uid, rng.randint(1, min(4, free)), profile))
        if step == next_restart:
            site.new_agent()
            restarts += 1
            next_restart += rng.randint(30, 50)
        plan = site.cycle()
        assert plan["refusals"] == [] and plan["problems"] == [] and site.agent.apply_error is None, step
        wanted = {cpu: (at_profile("balance-performance") if with_shared else ORIGINAL) for cpu in range(2, 16)}
        for pod in running.values():
            profile = next(
                (k.split("/")[1] for k in pod["spec"]["containers"][0]["resources"]["limits"] if "/" in k), None
            )
            for cpu in site.kubelet.cpus(pod):
                wanted[cpu] = at_profile(profile) if profile else ORIGINAL
        assert {cpu: site.cpu(cpu) for cpu in range(2, 16)} == wanted, step
    assert restarts >= 8 and site.api.events == []
    assert site.api.condition("Applied")["status"] == "True"
    assert "policy0" not in written_policies(site) and "policy1" not in written_policies(site)
    for pod in list(running.values()):
        site.delete(pod)
    site.api.profiles.pop("shared", None)
    site.cycle()
    assert tree_digest(site.node.sys) == site.pristine
    assert site.journal() == {}
