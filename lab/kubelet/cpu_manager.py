"""kubelet's CPU manager as Kubernetes v1.36 has it (pkg/kubelet/cm/cpumanager), for the lab's kubelet:
the node's CPU topology, the ``none`` and ``static`` policies, and the checkpoint file
``/var/lib/kubelet/cpu_manager_state`` a node agent reads to find the CPUs a Guaranteed container
was given. Each rule cites the kubernetes function it comes from; what kubelet does with the
cpusets afterwards is left out: the lab's nodes have fewer real CPUs than their fake kernel, so
nothing here sets a process's affinity or a cgroup's cpuset (kubelet's reconcileState /
UpdateContainerResources). The assignments are what a real kubelet would write, no more.

Also as kubelet 1.36 runs by default: the topology manager's policy ``none`` (no NUMA hint: the
allocation is takeByTopology over every free CPU), no CPU manager policy options, and pod-level
resources not managed (the PodLevelResourceManagers gate is alpha and off), so the checkpoint is
written in its v2 form, without ``podEntries``.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import tempfile
from fractions import Fraction

from .common import PodError
from .containers import quantity

STATE_FILE = "cpu_manager_state"  # cpu_manager.go cpuManagerStateFileName
NONE, STATIC = "none", "static"
# admission.ErrorReasonUnexpected: the reason a pod whose Allocate failed is rejected with
ADMISSION_REASON = "UnexpectedAdmissionError"
_NUMA, _SOCKET, _CORE = 0, 1, 2  # a CPU's (NUMA node, socket, core), topology.CPUInfo


class CPUManagerError(Exception):
    """kubelet cannot start its CPU manager; the message is kubelet's."""


class AllocationError(Exception):
    """Allocate failed (takeByTopologyNUMAPacked's message)."""


# --- CPU sets: k8s.io/utils/cpuset ---------------------------------------------------------------
def _atoi(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def parse_cpuset(text: str) -> frozenset:
    """cpuset.Parse: "" is the empty set, "0-3,8" four and one CPUs, with its errors."""
    cpus: set[int] = set()
    for part in text.split(",") if text else []:
        first, dash, last = part.partition("-")
        start = _atoi(first)
        end = _atoi(last) if dash else start
        if start > end:
            raise ValueError(f'invalid range "{part}" ({start} > {end})')
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def format_cpuset(cpus) -> str:
    """CPUSet.String: ascending runs, "0-3,8" ("" for none)."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# --- topology: cAdvisor's GetNodesInfo, then topology.Discover -----------------------------------
class Topology:
    """topology.CPUTopology: for each CPU its NUMA node, socket and core (``details``)."""

    def __init__(self, details: dict):
        self.details = {cpu: tuple(info) for cpu, info in details.items()}
        self.cpus = frozenset(self.details)
        self.num_sockets = len({info[_SOCKET] for info in self.details.values()})
        self.num_numa = len({info[_NUMA] for info in self.details.values()})
        num_cores = len({info[_CORE] for info in self.details.values()})
        self.cpus_per_core = len(self.details) // num_cores if num_cores else 0  # CPUsPerCore
        self.cpus_per_socket = len(self.details) // self.num_sockets if self.num_sockets else 0  # CPUsPerSocket


def _read_int(path: pathlib.Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except FileNotFoundError:
        return None


def discover(sysfs: pathlib.Path) -> Topology:
    """The topology kubelet builds from ``sysfs`` (a tree shaped like /sys). cAdvisor
    (utils/sysinfo GetNodesInfo, getCoresInfo) takes each NUMA node's CPUs from
    ``devices/system/node/nodeN/cpuM`` (without node directories, one node per physical package:
    getCPUTopology), skips the CPUs that are not in ``devices/system/cpu/online`` or have no
    ``topology/core_id`` or ``physical_package_id``, and makes a core of the threads with the same
    (core_id, physical_package_id); topology.Discover numbers each core by its lowest CPU
    (getUniqueCoreID). cAdvisor counts sockets in /proc/cpuinfo, which a lab node has from this
    machine: here they are the distinct physical_package_id values, which on real hardware is the same."""
    cpu_dir = sysfs / "devices/system/cpu"
    try:
        online = parse_cpuset((cpu_dir / "online").read_text().strip())
    except FileNotFoundError:
        online = None  # no online file: CPU hotplug is off and every CPU is online (IsCPUOnline)

    def number(path: pathlib.Path, prefix: str) -> int:
        return int(path.name[len(prefix) :])

    def cpu_dirs(directory: pathlib.Path) -> list[pathlib.Path]:
        return sorted(directory.glob("cpu*[0-9]"), key=lambda p: number(p, "cpu"))

    nodes = sorted((sysfs / "devices/system/node").glob("node*[0-9]"), key=lambda p: number(p, "node"))
    groups: dict[int, list[pathlib.Path]] = {}
    if nodes:
        for node in nodes:
            groups[number(node, "node")] = cpu_dirs(node)
    else:
        for path in cpu_dirs(cpu_dir):
            package = _read_int(path / "topology/physical_package_id")
            if package is not None:
                groups.setdefault(package, []).append(path)
    details = {}
    for numa, paths in groups.items():
        cores: dict[tuple[int, int], list[int]] = {}
        for path in paths:
            cpu = number(path, "cpu")
            if online is not None and cpu not in online:
                continue
            core_id = _read_int(path / "topology/core_id")
            package = _read_int(path / "topology/physical_package_id")
            if core_id is None or package is None:
                continue
            cores.setdefault((core_id, package), []).append(cpu)
        for (_core_id, package), threads in cores.items():
            for cpu in threads:
                details[cpu] = (numa, package, min(threads))
    if not details:
        raise CPUManagerError("could not detect number of cpus")
    return Topology(details)


# --- cpu_assignment.go: takeByTopologyNUMAPacked, CPUSortingStrategyPacked ------------------------
class _Accumulator:
    """cpuAccumulator: ``free`` is the part of the topology still free to take."""

    def __init__(self, topo: Topology, available, needed: int):
        self.topo = topo
        self.free = {cpu: info for cpu, info in topo.details.items() if cpu in available}
        self.needed = needed
        self.result: set[int] = set()
        # newCPUAccumulator: NUMA nodes first when they are at least as many as the sockets
        self.numa_first = topo.num_sockets >= topo.num_numa

    def _cpus(self, details: dict, level: int, ident: int) -> set:
        return {cpu for cpu, info in details.items() if info[level] == ident}

    def _sort(self, ids, level: int) -> list:
        # cpuAccumulator.sort: fewest free CPUs first, then the lower id
        return sorted(set(ids), key=lambda i: (len(self._cpus(self.free, level, i)), i))

    def _within(self, level: int, parent_level: int, parent: int) -> list:
        return self._sort((info[level] for info in self.free.values() if info[parent_level] == parent), level)

    def sorted_numas(self) -> list:  # sortAvailableNUMANodes
        if self.numa_first:
            return self._sort((info[_NUMA] for info in self.free.values()), _NUMA)
        return [numa for socket in self.sorted_sockets() for numa in self._within(_NUMA, _SOCKET, socket)]

    def sorted_sockets(self) -> list:  # sortAvailableSockets
        if self.numa_first:
            return [socket for numa in self.sorted_numas() for socket in self._within(_SOCKET, _NUMA, numa)]
        return self._sort((info[_SOCKET] for info in self.free.values()), _SOCKET)

    def sorted_cores(self) -> list:  # sortAvailableCores
        if self.numa_first:
            return [core for socket in self.sorted_sockets() for core in self._within(_CORE, _SOCKET, socket)]
        return [core for numa in self.sorted_numas() for core in self._within(_CORE, _NUMA, numa)]

    def sorted_cpus(self) -> list:  # sortAvailableCPUsPacked: core by core, each core's CPUs ascending
        return [cpu for core in self.sorted_cores() for cpu in sorted(self._cpus(self.free, _CORE, core))]

    def _is_free(self, level: int, ident: int) -> bool:
        # isNUMANodeFree compares with the NUMA node's size, isSocketFree and isCoreFree with the
        # topology's CPUs per socket and per core
        if level == _NUMA:
            whole = len(self._cpus(self.topo.details, _NUMA, ident))
        else:
            whole = self.topo.cpus_per_socket if level == _SOCKET else self.topo.cpus_per_core
        return len(self._cpus(self.free, level, ident)) == whole

    def take(self, cpus) -> None:
        self.result |= set(cpus)
        self.free = {cpu: info for cpu, info in self.free.items() if cpu not in self.result}
        self.needed -= len(cpus)

    def take_full(self, level: int) -> None:
        """takeFullNUMANodes, takeFullSockets, takeFullCores: every free one the request still needs
        whole, in the sorted order of the free ones when the walk starts."""
        ordered = {_NUMA: self.sorted_numas, _SOCKET: self.sorted_sockets, _CORE: self.sorted_cores}[level]()
        for ident in [i for i in ordered if self._is_free(level, i)]:
            cpus = self._cpus(self.topo.details, level, ident)
            if self.needed >= len(cpus):
                self.take(cpus)


def take_by_topology(topo: Topology, available, count: int) -> frozenset:
    """takeByTopologyNUMAPacked without policy options: whole NUMA nodes and sockets (the larger
    level first), then whole cores, then single CPUs in sortAvailableCPUsPacked's order."""
    acc = _Accumulator(topo, available, count)
    if acc.needed < 1:
        return frozenset()
    if acc.needed > len(acc.free):
        raise AllocationError(
            f"not enough cpus available to satisfy request: requested={count}, available={len(available)}"
        )
    for level in (_NUMA, _SOCKET) if acc.numa_first else (_SOCKET, _NUMA):
        acc.take_full(level)
        if acc.needed < 1:
            return frozenset(acc.result)
    acc.take_full(_CORE)
    if acc.needed < 1:
        return frozenset(acc.result)
    for cpu in acc.sorted_cpus():  # takeRemainingCPUs
        acc.take({cpu})
        if acc.needed < 1:
            return frozenset(acc.result)
    raise AllocationError("failed to allocate cpus")


# --- which containers get CPUs: v1qos.GetPodQOS and staticPolicy.guaranteedCPUs -------------------
def _resources(container: dict) -> tuple[dict, dict]:
    """A container's requests and limits of cpu and memory as numbers; an unset request takes its
    limit, as the API server's defaulting (SetDefaults_Pod) stores every pod."""
    resources = container.get("resources") or {}
    limits = {k: quantity(v) for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
    requests = {k: quantity(v) for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
    return {**limits, **requests}, limits


def pod_qos(pod: dict) -> str:
    """GetPodQOS: the status's qosClass, else ComputePodQOS: Guaranteed when every container,
    init containers included, has cpu and memory limits and the pod's summed requests equal its
    summed limits; BestEffort with neither; else Burstable (pod-level resources: their own)."""
    qos = (pod.get("status") or {}).get("qosClass")
    if qos:
        return qos
    spec = pod.get("spec") or {}
    if spec.get("resources") is not None:  # PodLevelResources (beta, on in 1.36): the pod's own decide
        members = [{"resources": spec["resources"]}]
    else:
        members = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for member in members:
        member_requests, member_limits = _resources(member)
        for total, found in ((requests, member_requests), (limits, member_limits)):
            for name, value in found.items():
                if value > 0:
                    total[name] = total.get(name, 0) + value
        if not all(member_limits.get(name, 0) > 0 for name in ("cpu", "memory")):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _pod_level_resources(pod: dict) -> bool:
    """IsPodLevelResourcesSet: the pod's spec.resources names cpu, memory or hugepages."""
    resources = (pod.get("spec") or {}).get("resources") or {}
    names = [*(resources.get("requests") or {}), *(resources.get("limits") or {})]
    return any(n in ("cpu", "memory") or n.startswith("hugepages-") for n in names)


def guaranteed_cpus(pod: dict, container: dict) -> int:
    """staticPolicy.guaranteedCPUs: a container of a Guaranteed pod gets exclusive CPUs when its cpu
    request is a whole number (isIntegralCPUAmount: Value() * 1000 == MilliValue(), both rounded up)."""
    if pod_qos(pod) != "Guaranteed":
        return 0
    request = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
    if request is None:
        request = ((container.get("resources") or {}).get("limits") or {}).get("cpu", "0")
    value = quantity(request)
    if math.ceil(value) * 1000 != math.ceil(value * 1000):
        return 0
    return math.ceil(value)


def _containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


# --- the checkpoint: state/checkpoint.go, state_checkpoint.go, checkpointmanager ------------------
def _fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _spew_map(value, inner) -> str:
    # go-spew's "%#v" with SortKeys (k8s.io/utils/dump.ForHash): a nil map prints <nil>, a map
    # map[k:v ...] with its keys in byte order and no types below the top level
    if value is None:
        return "<nil>"
    return "map[" + " ".join(f"{key}:{inner(value[key])}" for key in sorted(value)) + "]"


def checksum(policy: str, default: str, entries, version: int = 2, name: str = "CPUManagerCheckpoint") -> int:
    """The checkpoint's checksum as kubelet computes it: FNV-1a (32 bit) of go-spew's dump of the
    checkpoint struct with its checksum field 0 (checksum.New, dump.ForHash). kubelet 1.36 writes
    the v2 form and hashes it under the legacy struct name ``CPUManagerCheckpoint``
    (CPUManagerCheckpointV2.MarshalCheckpoint); ``entries`` maps a pod uid to its containers'
    cpusets (v2), or a container id to its cpuset (v1), None for a JSON null."""
    if version == 1:
        kind, shown = "map[string]string", _spew_map(entries, str)
    else:
        kind, shown = "map[string]map[string]string", _spew_map(entries, lambda pod: _spew_map(pod, str))
    text = (
        f"(*state.{name}){{PolicyName:(string){policy} DefaultCPUSet:(string){default} "
        f"Entries:({kind}){shown} Checksum:(checksum.Checksum)0}}"
    )
    return _fnv32a(text.encode())


class _Fraction:
    """A JSON number with a fraction or an exponent, kept as written (Go names it so in its errors)."""

    def __init__(self, text: str):
        self.text = text


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    return {dict: "object", list: "array", str: "string", int: "number", _Fraction: "number"}[type(value)]


def _checkpoint(blob: bytes, version: int) -> tuple[str, str, dict | None, int]:
    """(policyName, defaultCpuSet, entries, checksum) as encoding/json fills the checkpoint struct of
    ``version`` (v2: entries by pod uid, then container; v1: by container id) and its first type
    error, in kubelet's words: a key matches a field exactly or else ignoring case, a JSON null
    leaves a string as it was and makes a map nil (None), a missing ``entries`` is the empty map
    the struct is made with. JSON that does not parse gives Python's words, not Go's."""
    struct = f"CPUManagerCheckpointV{version}"
    doc = json.loads(blob, parse_float=_Fraction)
    if not isinstance(doc, dict):
        raise ValueError(f"json: cannot unmarshal {_json_kind(doc)} into Go value of type state.{struct}")
    maps = ["map[string]map[string]string", "map[string]string"] if version == 2 else ["map[string]string"]
    fields: dict = {"policyName": "", "defaultCpuSet": "", "entries": {}, "checksum": 0}
    errors = []

    def wrong(value, field: str, kind: str, shown: str = "") -> None:
        errors.append(
            f"json: cannot unmarshal {_json_kind(value)}{shown} into Go struct field {struct}.{field} of type {kind}"
        )

    def cpusets(value, depth: int):  # entries (depth 0) and, in v2, each pod's containers (depth 1)
        if value is None:
            return None
        if not isinstance(value, dict):
            return wrong(value, "entries", maps[depth])
        out = {}
        for key, item in value.items():
            if depth + 1 < len(maps):
                out[key] = cpusets(item, depth + 1)
            elif item is None or isinstance(item, str):
                out[key] = item or ""
            else:
                wrong(item, "entries", "string")
        return out

    for key, value in doc.items():
        field = key if key in fields else next((f for f in fields if f.lower() == key.lower()), None)
        if field == "entries":
            fields[field] = cpusets(value, 0)
        elif field is None or value is None:
            continue
        elif field == "checksum":
            if isinstance(value, _Fraction) or (isinstance(value, int) and not 0 <= value < 2**64):
                wrong(value, field, "checksum.Checksum", f" {getattr(value, 'text', value)}")  # a uint64
            elif isinstance(value, bool) or not isinstance(value, int):
                wrong(value, field, "checksum.Checksum")
            else:
                fields[field] = value
        elif isinstance(value, str):
            fields[field] = value
        else:
            wrong(value, field, "string")
    if errors:
        raise ValueError(errors[0])
    return fields["policyName"], fields["defaultCpuSet"], fields["entries"], fields["checksum"]


def read_checkpoint(blob: bytes, policy_name: str) -> tuple[frozenset, dict]:
    """restoreState with 1.36's default gates (loadAndMigrateCheckpointV2): the checkpoint read as
    v2, else as v1; its checksum verified (0 is accepted: the old file backend wrote none); its
    policy must be the configured one. Returns (default set, assignments); ValueError with
    kubelet's message."""
    try:
        policy, default, entries, value = _checkpoint(blob, 2)
        # CPUManagerCheckpointV2.VerifyChecksum: the struct's own name, else the legacy one it is written with
        names = ("CPUManagerCheckpointV2", "CPUManagerCheckpoint")
        if value and all(checksum(policy, default, entries, 2, n) != value for n in names):
            raise ValueError("checkpoint is corrupted")
    except ValueError:
        policy, default, entries, value = _checkpoint(blob, 1)  # the v1 read's error is the one reported
        if value and checksum(policy, default, entries, 1) != value:
            raise ValueError("checkpoint is corrupted") from None
        for container_id in entries or {}:  # migrateV1CheckpointToV2Checkpoint: the lab has no container ids
            raise ValueError(
                f"failed to migrate checkpoint from v1 to v2: containerID '{container_id}' not found in "
                "initial containers list"
            ) from None
        entries = {}
    if policy != policy_name:
        raise ValueError(f'configured policy "{policy_name}" differs from state checkpoint policy "{policy}"')
    try:
        cpus = parse_cpuset(default)
    except ValueError as exc:
        raise ValueError(f'could not parse default cpu set "{default}": {exc}') from None
    assignments: dict[str, dict[str, frozenset]] = {}
    for pod, containers in sorted((entries or {}).items()):
        assignments[pod] = {}
        for container, text in sorted((containers or {}).items()):
            try:
                assignments[pod][container] = parse_cpuset(text)
            except ValueError as exc:
                raise ValueError(
                    f'could not parse cpuset "{text}" for container "{container}" in pod "{pod}": {exc}'
                ) from None
    return cpus, assignments


def checkpoint_bytes(policy: str, default, assignments: dict) -> bytes:
    """What CPUManagerCheckpointV2.MarshalCheckpoint writes: encoding/json of the struct (its fields
    in order, ``entries`` left out when empty, map keys sorted), checksum included."""
    entries = {
        pod: {name: format_cpuset(cpus) for name, cpus in sorted(containers.items())}
        for pod, containers in sorted(assignments.items())
    }
    doc: dict = {"policyName": policy, "defaultCpuSet": format_cpuset(default)}
    if entries:
        doc["entries"] = entries
    doc["checksum"] = checksum(policy, doc["defaultCpuSet"], entries)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


class CheckpointState:
    """stateCheckpoint: the default set and each container's exclusive set, written to the
    checkpoint at every change as kubelet's FileStore writes it (a temporary ``.<random>`` file of
    mode 0600 in the same directory, synced, renamed over the file)."""

    def __init__(self, directory: pathlib.Path, policy_name: str):
        self.path = pathlib.Path(directory) / STATE_FILE
        self.policy_name = policy_name
        self.default: frozenset = frozenset()
        self.assignments: dict[str, dict[str, frozenset]] = {}
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            self.store()  # restoreState: no checkpoint yet, one is made
            return
        try:
            self.default, self.assignments = read_checkpoint(blob, policy_name)
        except ValueError as exc:  # NewCheckpointState
            raise CPUManagerError(
                f"could not restore state from checkpoint: {exc}, please drain this node and delete the CPU "
                f'manager checkpoint file "{self.path}" before restarting Kubelet'
            ) from None

    def store(self) -> None:
        self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".", dir=self.path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(checkpoint_bytes(self.policy_name, self.default, self.assignments))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            pathlib.Path(temp).unlink(missing_ok=True)
            raise

    def get(self, pod: str, container: str) -> frozenset | None:
        return self.assignments.get(pod, {}).get(container)

    def set_default(self, cpus) -> None:
        self.default = frozenset(cpus)
        self.store()

    def set_cpuset(self, pod: str, container: str, cpus) -> None:
        self.assignments.setdefault(pod, {})[container] = frozenset(cpus)
        self.store()

    def delete(self, pod: str, container: str) -> None:
        containers = self.assignments.get(pod, {})
        containers.pop(container, None)
        if pod in self.assignments and not containers:  # a pod's last container takes its entry with it
            del self.assignments[pod]
        self.store()


# --- the policies: policy_none.go, policy_static.go ---------------------------------------------
class NonePolicy:
    """policy_none.go: no exclusive CPUs; the checkpoint still names the policy."""

    name = NONE

    def start(self, state: CheckpointState) -> None:
        pass

    def allocatable_cpus(self) -> frozenset:  # GetAllocatableCPUs
        return frozenset()

    def allocate(self, state: CheckpointState, pod: dict, container: dict) -> None:
        pass

    def remove_container(self, state: CheckpointState, pod: str, container: str) -> None:
        pass


class StaticPolicy:
    """policy_static.go without options: the shared pool is the checkpoint's default set, the
    reserved CPUs are never given away, and a Guaranteed pod's container with a whole cpu request
    gets that many CPUs of the pool to itself."""

    name = STATIC

    def __init__(self, topology: Topology, num_reserved: int, reserved=frozenset()):
        self.topology = topology
        if not reserved:
            # NewStaticPolicy: the reservation's size taken by topology from the lowest cores
            try:
                reserved = take_by_topology(topology, topology.cpus, num_reserved)
            except AllocationError:
                reserved = frozenset()
        if len(reserved) != num_reserved:
            raise CPUManagerError(
                "new static policy error: [cpumanager] unable to reserve the required amount of CPUs "
                f"(size of {format_cpuset(reserved)} did not equal {num_reserved})"
            )
        self.reserved = frozenset(reserved)
        self.cpus_to_reuse: dict[str, frozenset] = {}  # init containers' CPUs the next ones may take

    def start(self, state: CheckpointState) -> None:
        """validateState: a new checkpoint gets every CPU as its default set; a restored one must
        keep the reserved CPUs in it, no assignment may overlap it, and together they must be the
        topology's CPUs."""
        everything = self.topology.cpus
        if not state.default:
            if state.assignments:
                raise CPUManagerError("default cpuset cannot be empty")
            state.set_default(everything)
            return
        if not self.reserved <= state.default:
            raise CPUManagerError(
                f'not all reserved cpus: "{format_cpuset(self.reserved)}" are present in defaultCpuSet: '
                f'"{format_cpuset(state.default)}"'
            )
        known = set(state.default)
        for pod, containers in state.assignments.items():
            for container, cpus in containers.items():
                if cpus & state.default:
                    raise CPUManagerError(
                        f'pod: {pod}, container: {container} cpuset: "{format_cpuset(cpus)}" overlaps with '
                        f'default cpuset "{format_cpuset(state.default)}"'
                    )
                known |= cpus
        if known != everything:
            raise CPUManagerError(
                f'current set of available CPUs "{format_cpuset(everything)}" doesn\'t match with CPUs in state '
                f'"{format_cpuset(known)}"'
            )

    def allocatable_cpus(self) -> frozenset:  # GetAllocatableCPUs
        return self.topology.cpus - self.reserved

    def allocate(self, state: CheckpointState, pod: dict, container: dict) -> None:
        """Allocate: nothing for a container that gets no exclusive CPUs (or a pod with pod-level
        resources, PodLevelResourceManagers being off); a container already in the checkpoint keeps
        its CPUs (a kubelet restart); else allocateCPUs over the free pool and the CPUs its pod's
        init containers may pass on."""
        count = guaranteed_cpus(pod, container)
        if count == 0 or _pod_level_resources(pod):
            return
        uid, name = pod["metadata"]["uid"], container["name"]
        present = state.get(uid, name)
        if present is not None:
            self._update_reuse(pod, container, present)
            return
        # allocateCPUs: GetAvailableCPUs (the default set less the reserved CPUs) and the reusable ones
        allocatable = (state.default - self.reserved) | self.cpus_to_reuse.get(uid, frozenset())
        cpus = take_by_topology(self.topology, allocatable, count)
        state.set_default(state.default - cpus)
        state.set_cpuset(uid, name, cpus)
        self._update_reuse(pod, container, cpus)

    def _update_reuse(self, pod: dict, container: dict, cpus: frozenset) -> None:
        """updateCPUsToReuse: only the pod being admitted keeps reusable CPUs; a (non-sidecar) init
        container's CPUs become reusable, an app container's are no longer."""
        uid = pod["metadata"]["uid"]
        self.cpus_to_reuse = {uid: self.cpus_to_reuse.get(uid, frozenset())}
        inits = (pod.get("spec") or {}).get("initContainers") or []
        init = next((c for c in inits if c["name"] == container["name"]), None)
        if init is not None and init.get("restartPolicy") != "Always":
            self.cpus_to_reuse[uid] |= cpus
        else:
            self.cpus_to_reuse[uid] -= cpus

    def remove_container(self, state: CheckpointState, pod: str, container: str) -> None:
        """RemoveContainer: the container's CPUs go back to the shared pool, less those another
        container of its pod still holds (an app container that reused an init container's)."""
        cpus = state.get(pod, container)
        if cpus is None:
            return
        state.delete(pod, container)
        in_use = frozenset().union(*state.assignments.get(pod, {}).values())
        state.set_default(state.default | (cpus - in_use))


# --- the manager: cpu_manager.go -----------------------------------------------------------------
class CPUManager:
    """manager: its policy and checkpointed state. Start (in the constructor) restores the state
    and starts the policy; ``reconcile`` is removeStaleState; ``admit`` is the topology manager's
    admission of a pod (container scope), Allocate for each container in order."""

    def __init__(self, policy, state_dir: pathlib.Path):
        self.policy = policy
        try:
            self.state = CheckpointState(state_dir, policy.name)
            policy.start(self.state)
        except CPUManagerError as exc:  # containerManagerImpl.Start
            raise CPUManagerError(f"start cpu manager error: {exc}") from None

    def reconcile(self, active_pods) -> list[tuple[str, str]]:
        """removeStaleState: the assignments of containers that are not in an active pod (one not
        gone and not terminal) are removed; returns them as (pod uid, container)."""
        active = {(p["metadata"]["uid"], c["name"]) for p in active_pods for c in _containers(p)}
        stale = [(pod, name) for pod, names in sorted(self.state.assignments.items()) for name in sorted(names)]
        stale = [entry for entry in stale if entry not in active]
        for pod, name in stale:
            self.policy.remove_container(self.state, pod, name)
        return stale

    def admit(self, pod: dict) -> str | None:
        """Allocate for the pod's init containers, then its containers; the first failure is the
        admission's message (GetPodAdmitResult: unexpectedAdmissionError), None when admitted."""
        for container in _containers(pod):
            try:
                self.policy.allocate(self.state, pod, container)
            except (AllocationError, PodError) as exc:
                return f"Allocate failed due to {exc}, which is unexpected"
        return None

    def exclusive(self, uid: str) -> dict[str, frozenset]:
        """The pod's containers that have CPUs of their own (GetExclusiveCPUs)."""
        return dict(self.state.assignments.get(uid, {}))


def from_config(config: dict, sysfs: pathlib.Path, state_dir: pathlib.Path) -> CPUManager:
    """The CPU manager a KubeletConfiguration asks for (cmd/kubelet/app/server.go, NewManager):
    ``cpuManagerPolicy`` (default none); for static, ``reservedSystemCPUs`` (a subset of the online
    CPUs, whose count becomes the reservation), else the ceiling of ``kubeReserved`` +
    ``systemReserved`` cpu taken by topology. What the lab does not model is refused."""
    name = config.get("cpuManagerPolicy") or NONE
    if config.get("cpuManagerPolicyOptions"):
        raise CPUManagerError("the lab's kubelet does not model cpuManagerPolicyOptions")
    if (config.get("topologyManagerPolicy") or NONE) != NONE:
        raise CPUManagerError("the lab's kubelet models the topology manager's policy none only")
    if name == NONE:
        return CPUManager(NonePolicy(), state_dir)
    if name != STATIC:
        raise CPUManagerError(f'unknown policy: "{name}"')
    topology = discover(sysfs)
    text = "" if config.get("reservedSystemCPUs") is None else str(config["reservedSystemCPUs"])
    try:
        reserved = parse_cpuset(text)
    except ValueError as exc:
        raise CPUManagerError(f"unable to parse reserved-cpus list: {exc}") from None
    if not reserved <= topology.cpus:  # getReservedCPUs
        raise CPUManagerError(f"reserved-cpus: {text} is not a subset of online-cpus: {format_cpuset(topology.cpus)}")
    if reserved:
        count = len(reserved)
    else:
        amounts = [(config.get(k) or {}).get("cpu") for k in ("kubeReserved", "systemReserved")]
        if all(a is None for a in amounts):
            raise CPUManagerError("[cpumanager] unable to determine reserved CPU resources for static policy")
        count = math.ceil(sum(quantity(a) for a in amounts if a is not None))
        if count == 0:
            raise CPUManagerError(
                "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
            )
    return CPUManager(StaticPolicy(topology, count, reserved), state_dir)
