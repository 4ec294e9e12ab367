"""kubelet's PodResources API (v1) as Kubernetes v1.36 serves it, for the lab's kubelet: the gRPC
service ``v1.PodResourcesLister`` (List, GetAllocatableResources, Get) on
``<root-dir>/pod-resources/kubelet.sock``, which a node agent (the Kubernetes Power Manager's, a
device plugin's monitor) reads to learn the CPUs each container holds. The messages are kubelet's
``api.proto`` (pod_resources_v1.proto beside this file, copied from k8s.io/kubelet v0.36.3), encoded
here by hand on the wire format because the node's Python has no protobuf; the transport is
grpc_h2.py. Each rule cites where kubelet has it:

- the server (pkg/kubelet/server/server.go ListenAndServePodResources): a gRPC server whose unary
  interceptor is a token bucket of 100 requests a second, burst 10
  (podresources.DefaultQPS, DefaultBurstTokens; apis/grpc/ratelimit.go), which refuses a call
  over it with RESOURCE_EXHAUSTED "rejected by rate limit"; the socket as util.CreateListener
  makes it, in ``getPodResourcesDir()`` (``pod-resources``, made 0750 by setupDataDirs);
- List (server_v1.go): the active pods (``useActivePods`` is always true in 1.36, the
  KubeletPodResourcesListUseActivePods gate being deprecated): not the terminal ones (phase
  Succeeded or Failed: filterOutInactivePods), static pods by their own object, mirror pods never;
  for each, its restartable init containers (sidecars) and then its containers;
- Get (KubeletPodResourcesGet, beta and on since 1.34): any pod the pod manager knows by namespace
  and name (GetPodByName: terminal ones too, while the API has them); an unknown pod is the plain
  error "pod <name> in namespace <namespace> not found", which grpc-go sends as UNKNOWN;
- a container's resources (getContainerResources): ``cpu_ids`` are the CPU manager's exclusive CPUs
  for it (GetCPUs over GetExclusiveCPUs: empty for a container without, and under policy none);
  ``devices``, ``memory`` and ``dynamic_resources`` are empty, as kubelet's are on a node without
  device plugins, with the memory manager's policy None and no resource claims (the
  KubeletPodResourcesDynamicResources gate is on, but a pod without claims has none); an empty
  repeated field is not on the wire, so the bytes are kubelet's;
- GetAllocatableResources: ``cpu_ids`` the CPU manager's allocatable CPUs (the static policy's
  GetAllocatableCPUs: every CPU of the topology less the reserved ones; none for policy none),
  nothing else.

kubelet registers ``v1alpha1.PodResourcesLister`` on the same socket too; it is not served here (an
UNIMPLEMENTED "unknown service" answers it), v1 being what node agents read.

kubelet lists CPU ids in its set's map order (CPUSet.UnsortedList); these are ascending, one of
those orders. The pods and the CPU manager's state are read on the kubelet's loop (``refresh``,
after each sync) and served from that copy, so a call never sees the loop's state half-changed.
"""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Callable

from . import grpc_h2
from .grpc_h2 import INTERNAL, RESOURCE_EXHAUSTED, UNKNOWN, GrpcError

SOCKET_DIR = "pod-resources"  # kubelet.go getPodResourcesDir: config.DefaultKubeletPodResourcesDirName
SOCKET = "kubelet.sock"  # podresources.Socket ("kubelet") as util.LocalEndpoint names it
DEFAULT_QPS = 100
DEFAULT_BURST_TOKENS = 10
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


# --- the protobuf wire format (what api.proto's messages use of it) -------------------------------
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # an int64 below zero is its two's complement, ten bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _string(field: int, text: str) -> bytes:
    return _length_delimited(field, text.encode()) if text else b""  # proto3: the default is not sent


def _packed(field: int, numbers) -> bytes:
    """A repeated scalar field, packed as proto3 sends it (nothing when empty)."""
    return _length_delimited(field, b"".join(_varint(n) for n in numbers)) if numbers else b""


def _messages(field: int, messages) -> bytes:
    return b"".join(_length_delimited(field, message) for message in messages)


def parse_fields(data: bytes) -> dict[int, list]:
    """A message's fields: number -> values (ints for varints and fixed, bytes for the
    length-delimited); ValueError for what proto.Unmarshal refuses."""
    fields: dict[int, list] = {}
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            if at >= len(data) or shift > 63:
                raise ValueError("unexpected EOF" if at >= len(data) else "variable length integer overflow")
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("invalid field number")
        if wire == 0:
            value = varint()
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if at + size > len(data):
                raise ValueError("unexpected EOF")
            value = int.from_bytes(data[at : at + size], "little")
            at += size
        elif wire == 2:
            size = varint()
            if at + size > len(data):
                raise ValueError("unexpected EOF")
            value = data[at : at + size]
            at += size
        else:
            raise ValueError(f"cannot parse wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _text(fields: dict, number: int) -> str:
    """A proto3 string field (its last value wins); invalid UTF-8 is refused, as Go's protobuf does."""
    values = fields.get(number)
    if not values:
        return ""
    if not isinstance(values[-1], bytes):
        raise ValueError(f"field {number} has the wrong wire type for a string")
    try:
        return values[-1].decode()
    except UnicodeDecodeError:
        raise ValueError("string field contains invalid UTF-8") from None


# --- the pods and their containers ----------------------------------------------------------------
def terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def listed_containers(pod: dict) -> list[str]:
    """The containers List and Get report, in kubelet's order: restartable init containers
    (podutil.IsRestartableInitContainer: restartPolicy Always), then the containers."""
    spec = pod.get("spec") or {}
    sidecars = [c["name"] for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return sidecars + [c["name"] for c in spec.get("containers") or []]


class _Snapshot:
    def __init__(self, pods: list[dict], assignments: dict[str, dict[str, frozenset]], allocatable: frozenset):
        self.pods = pods
        self.assignments = assignments
        self.allocatable = allocatable


class TokenBucket:
    """golang.org/x/time/rate's Limiter.Allow: ``burst`` tokens to start with, ``qps`` more a
    second up to ``burst``; a call takes one, or is refused when less than one is left."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.last = clock()
        self.lock = threading.Lock()

    def allow(self) -> bool:
        with self.lock:
            now = self.clock()
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class PodResourcesServer:
    """The API on ``<root_dir>/pod-resources/kubelet.sock``. ``pods`` gives the pods the kubelet
    knows (every pod bound to the node from the API, static pods as their own objects; any phase),
    ``cpus`` is the kubelet's CPU manager (cpu_manager.CPUManager; None: no exclusive CPUs). Both
    are read by ``refresh`` only, which the kubelet's loop calls."""

    def __init__(
        self,
        root_dir: pathlib.Path,
        pods: Callable[[], list[dict]],
        cpus=None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST_TOKENS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = pathlib.Path(root_dir) / SOCKET_DIR / SOCKET
        self.pods = pods
        self.cpus = cpus
        self.limiter = TokenBucket(qps, burst, clock)
        self.snapshot = _Snapshot([], {}, frozenset())
        self.server = grpc_h2.UnaryServer(
            self.path,
            {
                "v1.PodResourcesLister": {
                    "List": self.list,
                    "GetAllocatableResources": self.get_allocatable_resources,
                    "Get": self.get,
                },
            },
            self._limit,
        )

    def refresh(self) -> None:
        """Copy what the calls answer from: the pods (mirror pods left out: the pod manager keeps
        them apart) and the CPU manager's assignments and allocatable CPUs."""
        pods = [p for p in self.pods() if MIRROR_ANNOTATION not in ((p.get("metadata") or {}).get("annotations") or {})]
        assignments: dict[str, dict[str, frozenset]] = {}
        allocatable: frozenset = frozenset()
        if self.cpus is not None:
            assignments = {uid: dict(containers) for uid, containers in self.cpus.state.assignments.items()}
            allocatable = frozenset(self.cpus.policy.allocatable_cpus())
        self.snapshot = _Snapshot(pods, assignments, allocatable)

    def start(self) -> None:
        self.refresh()
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def _limit(self) -> None:
        if not self.limiter.allow():
            raise GrpcError(RESOURCE_EXHAUSTED, "rejected by rate limit")

    # --- the messages -----------------------------------------------------------------------------
    @staticmethod
    def _pod_resources(snapshot: _Snapshot, pod: dict) -> bytes:
        """PodResources{name, namespace, containers: ContainerResources{name, cpu_ids}}."""
        meta = pod.get("metadata") or {}
        held = snapshot.assignments.get(meta.get("uid", ""), {})
        containers = [_string(1, name) + _packed(3, sorted(held.get(name, ()))) for name in listed_containers(pod)]
        return _string(1, meta.get("name", "")) + _string(2, meta.get("namespace", "")) + _messages(3, containers)

    def list(self, request: bytes) -> bytes:
        """ListPodResourcesResponse{pod_resources} of the active pods."""
        _request(request)
        snapshot = self.snapshot
        return _messages(1, [self._pod_resources(snapshot, p) for p in snapshot.pods if not terminal(p)])

    def get_allocatable_resources(self, request: bytes) -> bytes:
        """AllocatableResourcesResponse{cpu_ids}."""
        _request(request)
        return _packed(2, sorted(self.snapshot.allocatable))

    def get(self, request: bytes) -> bytes:
        """GetPodResourcesResponse{pod_resources} of the pod the request names."""
        fields = _request(request)
        try:
            name, namespace = _text(fields, 1), _text(fields, 2)
        except ValueError as exc:
            raise GrpcError(INTERNAL, f"grpc: error unmarshalling request: {exc}") from None
        snapshot = self.snapshot
        for pod in snapshot.pods:
            meta = pod.get("metadata") or {}
            if (meta.get("namespace"), meta.get("name")) == (namespace, name):
                return _length_delimited(1, self._pod_resources(snapshot, pod))
        raise GrpcError(UNKNOWN, f"pod {name} in namespace {namespace} not found")


def _request(data: bytes) -> dict[int, list]:
    try:
        return parse_fields(data)
    except ValueError as exc:
        raise GrpcError(INTERNAL, f"grpc: error unmarshalling request: {exc}") from None
