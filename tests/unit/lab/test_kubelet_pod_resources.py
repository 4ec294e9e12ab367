"""The lab kubelet's PodResources API (lab/kubelet/pod_resources.py, grpc_h2.py) read as a node agent
reads kubelet's: a real gRPC client (grpcio) built from kubelet's own api.proto
(lab/kubelet/pod_resources_v1.proto, k8s.io/kubelet v0.36.3) over the unix socket, with the CPU
manager (lab/kubelet/cpu_manager.py) holding the CPUs. No lab is needed."""

from __future__ import annotations

import itertools
import os
import socket
import stat

import grpc
import pytest

from lab.kubelet import cpu_manager, grpc_h2, pod_resources

# kubelet's messages and stub, generated from the proto at import time (nothing generated is kept)
pb, services = grpc.protos_and_services("lab/kubelet/pod_resources_v1.proto")

# two sockets of four cores each, one thread a core: cpu -> (NUMA node, socket, core)
TOPOLOGY = cpu_manager.Topology({cpu: (cpu // 4, cpu // 4, cpu) for cpu in range(8)})
FIXED = {"cpu": "2", "memory": "64Mi"}


def pod(name: str, uid: str, containers: list, init: list | None = None, phase: str = "Running", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": "power", "uid": uid, **meta},
        "spec": {"containers": containers, "initContainers": init or []},
        "status": {"phase": phase},
    }


def container(name: str, resources: dict | None = None, **extra) -> dict:
    return {"name": name, "resources": resources or {}, **extra}


GUARANTEED = pod(
    "dpdk",
    "uid-dpdk",
    [
        container("main", {"requests": FIXED, "limits": FIXED}),
        container("helper", {"limits": {"cpu": "500m", "memory": "8Mi"}}),
    ],
    init=[
        container("setup", {"limits": FIXED}),  # a plain init container: never listed
        container("proxy", {"limits": {"cpu": "1", "memory": "8Mi"}}, restartPolicy="Always"),  # a sidecar
    ],
)
BURSTABLE = pod("web", "uid-web", [container("nginx", {"requests": {"cpu": "2"}})])
ENDED = pod("batch", "uid-batch", [container("job", {"limits": FIXED})], phase="Succeeded")
MIRROR = pod("etcd-worker", "uid-mirror", [container("etcd")], annotations={"kubernetes.io/config.mirror": "abc"})


class Node:
    """The kubelet's side: its CPU manager, the pods it knows, the server on a socket in tmp_path."""

    def __init__(self, tmp_path, policy=None, clock=None):
        policy = policy or cpu_manager.StaticPolicy(TOPOLOGY, 2, frozenset({0, 1}))
        self.cpus = cpu_manager.CPUManager(policy, tmp_path)
        self.pods = [GUARANTEED, BURSTABLE, MIRROR]
        for known in self.pods:
            assert self.cpus.admit(known) is None
        self.pods.append(ENDED)
        # a clock that moves 1 s a call: the rate limit never bites unless a test brings its own
        ticks = itertools.count()
        self.server = pod_resources.PodResourcesServer(
            tmp_path / "kubelet", lambda: self.pods, self.cpus, clock=clock or (lambda: float(next(ticks)))
        )
        self.server.start()
        self.channel = grpc.insecure_channel(f"unix://{self.server.path}")
        self.stub = services.PodResourcesListerStub(self.channel)

    def close(self):
        self.channel.close()
        self.server.stop()


@pytest.fixture
def node(tmp_path):
    made = Node(tmp_path)
    yield made
    made.close()


def as_dict(resources) -> dict:
    return {c.name: list(c.cpu_ids) for c in resources.containers}


def test_the_socket_is_where_kubelet_makes_it(node, tmp_path):
    directory = tmp_path / "kubelet" / "pod-resources"
    assert node.server.path == directory / "kubelet.sock"
    assert stat.S_ISSOCK(node.server.path.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o750 & ~umask
    assert sorted(p.name for p in directory.iterdir()) == ["kubelet.sock"]  # the temporary name was renamed


def test_a_stale_socket_file_is_replaced_at_start(tmp_path):
    stale = tmp_path / "kubelet" / "pod-resources" / "kubelet.sock"
    stale.parent.mkdir(parents=True)
    stale.write_text("left by a kubelet that died")
    node = Node(tmp_path)
    try:
        assert stat.S_ISSOCK(stale.stat().st_mode)
        assert node.stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5).cpu_ids
    finally:
        node.close()


def test_list_gives_each_active_pods_containers_and_the_cpus_the_cpu_manager_gave_them(node):
    response = node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
    listed = {(p.namespace, p.name): p for p in response.pod_resources}
    # the terminal pod and the mirror pod are not listed
    assert sorted(listed) == [("power", "dpdk"), ("power", "web")]
    dpdk = listed[("power", "dpdk")]
    # the sidecar first, then the containers; the plain init container not at all
    assert [c.name for c in dpdk.containers] == ["proxy", "main", "helper"]
    held = node.cpus.exclusive("uid-dpdk")
    assert as_dict(dpdk) == {"proxy": sorted(held["proxy"]), "main": sorted(held["main"]), "helper": []}
    assert len(held["main"]) == 2 and not held["main"] & {0, 1}
    assert as_dict(listed[("power", "web")]) == {"nginx": []}
    for resources in response.pod_resources:  # a node without device plugins, memory manager or claims
        for c in resources.containers:
            assert not c.devices and not c.memory and not c.dynamic_resources


def test_the_bytes_are_protobufs_own_encoding(node):
    """What the server writes is what protobuf itself serialises for the same message: fields in
    order, cpu_ids packed, nothing for empty fields, so a Go client reads kubelet's bytes."""
    raw = node.server.list(b"")
    assert pb.ListPodResourcesResponse.FromString(raw).SerializeToString(deterministic=True) == raw
    raw = node.server.get(pb.GetPodResourcesRequest(pod_name="dpdk", pod_namespace="power").SerializeToString())
    assert pb.GetPodResourcesResponse.FromString(raw).SerializeToString(deterministic=True) == raw
    raw = node.server.get_allocatable_resources(b"")
    assert pb.AllocatableResourcesResponse.FromString(raw).SerializeToString(deterministic=True) == raw


def test_get_allocatable_resources_is_every_cpu_but_the_reserved(node):
    response = node.stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5)
    assert list(response.cpu_ids) == [2, 3, 4, 5, 6, 7]
    assert not response.devices and not response.memory


def test_policy_none_gives_no_cpus(tmp_path):
    node = Node(tmp_path, policy=cpu_manager.NonePolicy())
    try:
        assert not node.stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5).cpu_ids
        response = node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
        assert all(not c.cpu_ids for p in response.pod_resources for c in p.containers)
        assert len(response.pod_resources) == 2
    finally:
        node.close()


def test_get_names_one_pod_terminal_ones_included_and_refuses_an_unknown_one_as_kubelet(node):
    got = node.stub.Get(pb.GetPodResourcesRequest(pod_name="dpdk", pod_namespace="power"), timeout=5)
    assert (got.pod_resources.name, got.pod_resources.namespace) == ("dpdk", "power")
    assert as_dict(got.pod_resources)["main"] == sorted(node.cpus.exclusive("uid-dpdk")["main"])
    # GetPodByName knows a pod whatever its phase (List leaves the ended one out)
    ended = node.stub.Get(pb.GetPodResourcesRequest(pod_name="batch", pod_namespace="power"), timeout=5)
    assert as_dict(ended.pod_resources) == {"job": []}
    with pytest.raises(grpc.RpcError) as unknown:
        node.stub.Get(pb.GetPodResourcesRequest(pod_name="dpdk", pod_namespace="default"), timeout=5)
    assert unknown.value.code() == grpc.StatusCode.UNKNOWN
    assert unknown.value.details() == "pod dpdk in namespace default not found"
    with pytest.raises(grpc.RpcError) as mirror:  # mirror pods are not the pod manager's pods
        node.stub.Get(pb.GetPodResourcesRequest(pod_name="etcd-worker", pod_namespace="power"), timeout=5)
    assert mirror.value.code() == grpc.StatusCode.UNKNOWN


def test_a_pod_that_leaves_is_gone_and_its_cpus_with_it(node):
    main = node.cpus.exclusive("uid-dpdk")["main"]
    node.pods = [p for p in node.pods if p is not GUARANTEED]
    node.cpus.reconcile([BURSTABLE])  # removeStaleState, as the kubelet's loop runs it
    assert main <= node.cpus.state.default
    before = node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
    assert "dpdk" in [p.name for p in before.pod_resources]  # served from the last refresh until the next
    node.server.refresh()
    after = node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
    assert [p.name for p in after.pod_resources] == ["web"]
    with pytest.raises(grpc.RpcError) as gone:
        node.stub.Get(pb.GetPodResourcesRequest(pod_name="dpdk", pod_namespace="power"), timeout=5)
    assert gone.value.details() == "pod dpdk in namespace power not found"


def test_the_rate_limit_is_kubelets_token_bucket(tmp_path):
    now = [100.0]
    node = Node(tmp_path, clock=lambda: now[0])
    try:
        for _call in range(10):  # the burst
            node.stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.details() == "rejected by rate limit"
        # an unknown method is answered before the interceptor, so not refused for the rate
        with pytest.raises(grpc.RpcError) as unknown:
            node.channel.unary_unary("/v1alpha1.PodResourcesLister/List")(b"", timeout=5)
        assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert unknown.value.details() == "unknown service v1alpha1.PodResourcesLister"
        now[0] += 0.01  # 100 a second: one more token
        node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError):
            node.stub.List(pb.ListPodResourcesRequest(), timeout=5)
    finally:
        node.close()


def test_errors_grpc_go_answers_itself(node):
    with pytest.raises(grpc.RpcError) as method:
        node.channel.unary_unary("/v1.PodResourcesLister/Watch")(b"", timeout=5)
    assert (method.value.code(), method.value.details()) == (
        grpc.StatusCode.UNIMPLEMENTED,
        "unknown method Watch for service v1.PodResourcesLister",
    )
    with pytest.raises(grpc.RpcError) as garbage:  # a truncated varint is not a GetPodResourcesRequest
        node.channel.unary_unary("/v1.PodResourcesLister/Get")(b"\x0a\xff", timeout=5)
    assert garbage.value.code() == grpc.StatusCode.INTERNAL
    assert garbage.value.details().startswith("grpc: error unmarshalling request:")


def _huffman_literal(index: int, value: str) -> bytes:
    """A literal with incremental indexing, indexed name, Huffman-coded value: what grpc-go sends."""
    coded = grpc_h2.huffman_encode(value.encode())
    return grpc_h2.encode_int(index, 6, 0x40) + grpc_h2.encode_int(len(coded), 7, 0x80) + coded


class RawClient:
    """An HTTP/2 client by hand with the protocol's default windows and frame size (grpcio's own
    client asks for 4 MiB of both, so it never makes the server wait)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.sock.sendall(grpc_h2.PREFACE + grpc_h2.frame(grpc_h2.SETTINGS, 0, 0))
        self.buffer = b""

    def read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def frame(self) -> tuple[int, int, int, bytes]:
        header = self.read(9)
        length = int.from_bytes(header[:3], "big")
        return header[3], header[4], int.from_bytes(header[5:], "big"), self.read(length)

    def call(self, stream: int, block: bytes) -> None:
        self.sock.sendall(
            grpc_h2.frame(grpc_h2.HEADERS, grpc_h2.END_HEADERS, stream, block)
            + grpc_h2.frame(grpc_h2.DATA, grpc_h2.END_STREAM, stream, b"\x00\x00\x00\x00\x00")
        )


def test_a_response_over_the_default_windows_waits_for_window_update(node):
    """Over the 64 KiB flow-control window in 16 KiB frames: the server stops at the window, goes
    on when the client hands bytes back, and a second call on the connection reads its headers
    from the HPACK dynamic table the first one filled."""
    many = [pod(f"pod-{i:04d}-" + "x" * 40, f"uid-{i}", [container(f"c{j}") for j in range(4)]) for i in range(1000)]
    node.pods = many
    node.server.refresh()
    expected = node.server.list(b"")
    assert len(expected) > 65535
    client = RawClient(node.server.path)
    first = (
        b"\x83\x86"  # :method POST, :scheme http (static table)
        + _huffman_literal(4, "/v1.PodResourcesLister/List")  # :path, added to the table (62 then)
        + _huffman_literal(31, "application/grpc")  # content-type, added (62; :path moves to 63)
    )
    client.call(1, first)
    body, ended, stalled = b"", False, False
    while not ended:
        try:
            kind, flags, stream, payload = client.frame()
        except TimeoutError:
            pytest.fail(f"no frame after {len(body)} bytes of DATA")
        assert len(payload) <= 16384
        if kind == grpc_h2.DATA:
            body += payload
            if len(body) == 65535:  # the window is spent: nothing more until it is handed back
                client.sock.settimeout(0.3)
                with pytest.raises(TimeoutError):
                    client.frame()
                stalled = True
                client.sock.settimeout(5)
                update = (1 << 20).to_bytes(4, "big")
                client.sock.sendall(
                    grpc_h2.frame(grpc_h2.WINDOW_UPDATE, 0, 0, update)
                    + grpc_h2.frame(grpc_h2.WINDOW_UPDATE, 0, 1, update)
                )
        elif kind == grpc_h2.HEADERS and stream == 1:
            ended = bool(flags & grpc_h2.END_STREAM)
            if ended:
                assert grpc_h2.HpackDecoder().decode(payload) == [("grpc-status", "0")]
    assert stalled and body == b"\x00" + len(expected).to_bytes(4, "big") + expected
    client.call(3, b"\x83\x86\xbf\xbe")  # the same request by index: :path 63, content-type 62
    while True:
        kind, flags, stream, payload = client.frame()
        if kind == grpc_h2.DATA and stream == 3:
            break
    assert len(payload) == min(16384, 5 + len(expected))  # the answer starts: the headers were understood
    client.sock.close()


# --- HPACK (RFC 7541's own examples) ---------------------------------------------------------------
def test_the_huffman_code_rebuilt_from_its_lengths_is_rfc_7541s():
    assert grpc_h2.HUFFMAN_CODES[0] == (0x1FF8, 13)  # Appendix B's first and some later rows
    assert grpc_h2.HUFFMAN_CODES[ord("a")] == (0x3, 5)
    assert grpc_h2.HUFFMAN_CODES[ord("/")] == (0x18, 6)
    assert grpc_h2.HUFFMAN_CODES[255] == (0x3FFFFEE, 26)
    assert grpc_h2.HUFFMAN_CODES[grpc_h2.EOS] == (0x3FFFFFFF, 30)
    # C.4.1's Huffman-coded "www.example.com", C.4.2's "no-cache"
    assert grpc_h2.huffman_encode(b"www.example.com") == bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff")
    assert grpc_h2.huffman_decode(bytes.fromhex("a8eb10649cbf")) == b"no-cache"
    path = b"/v1.PodResourcesLister/GetAllocatableResources"
    assert grpc_h2.huffman_decode(grpc_h2.huffman_encode(path)) == path
    with pytest.raises(grpc_h2.ProtocolError):  # padding that is not all ones
        grpc_h2.huffman_decode(bytes.fromhex("f1e3c2e5f23a6ba0ab90f4fe"))


def test_the_decoder_reads_rfc_7541s_requests_with_its_dynamic_table():
    """C.4: three requests on one connection, the later ones indexing what the first added."""
    decoder = grpc_h2.HpackDecoder()
    first = decoder.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"))
    assert first == [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]
    assert decoder.size == 57
    second = decoder.decode(bytes.fromhex("828684be5886a8eb10649cbf"))
    assert second[-2:] == [(":authority", "www.example.com"), ("cache-control", "no-cache")]
    third = decoder.decode(bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))
    assert third == [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ]
    assert decoder.size == 164
    with pytest.raises(grpc_h2.ProtocolError):
        decoder.decode(b"\xff\x00")  # an index past both tables


def test_grpc_message_is_percent_encoded():
    assert grpc_h2.percent_encode("pod é in 100%") == "pod %C3%A9 in 100%25"
