"""Prioritize latency over real TLS: our scheduler extender and the real TAS side by side, in one run.

For each candidate-node count (default 100, 1,000 and 5,000) the benchmark starts, on loopback:

- a stub Kubernetes API server (HTTPS, a throw-away CA, client certificates required) holding N nodes
  (realistic Node objects of about 3 KB: labels, capacity and allocatable, conditions, images, addresses,
  and the ``poweraware.io/power-model`` annotation), three bound pods per node with CPU and memory
  requests, one TASPolicy (``scheduleonmetric`` on ``node_power_jump``, ``LessThan``) and the custom
  metrics API (``custom.metrics.k8s.io/v1beta2``, one value per node) with the discovery documents
  client-go needs. It is a stub because only the extenders' request latency is measured: their views
  are fed once at start (lists; the watches stay open with no events), so the API's own speed does not
  enter the figures;
- our extender (roles/power_extender/files/poweraware_extender.py, with ``sys.executable``), listing and
  watching nodes and pods from the stub;
- Telemetry Aware Scheduling v0.7.0, the real binary the lab builds (``lab/assets.py``, component
  ``tas``, cached under ~/.cache/poweraware-k8s), with ``--syncPeriod=1s`` and a kubeconfig for the stub.

Then it sends ``--requests`` prioritize requests (after ``--warmup`` unmeasured ones) for one pod
(500m CPU, label ``telemetry-policy`` so TAS applies its policy) with every node a candidate, each
extender over its own keep-alive HTTPS connection with a client certificate, as kube-scheduler does,
alternating request by request so every row sees the same machine conditions. Each time is wall clock
from sending the request to having read the whole answer. Rows:

- ours (NodeNames): the body kube-scheduler sends us, registered ``nodeCacheCapable`` by our role;
- ours (Nodes): the same pod with the full NodeList, the body TAS gets, for a same-body comparison;
- TAS (Nodes): TAS is not nodeCacheCapable, so kube-scheduler sends it the full NodeList.

Every node is sent, as with ``percentageOfNodesToScore: 100``; by default kube-scheduler stops looking
for feasible nodes earlier in large clusters (about 10 % of 5,000 nodes, at least 100), so the 5,000
row is a worst case. Before measuring, both extenders must rank the nodes: TAS must score every node
(its metric cache fills after a sync period) and both replies must hold differing scores, or the run
fails. The goal (issue 15): our p99 at 1,000 nodes under 50 ms and no worse than TAS's.

Usage: python benchmarks/extender_latency.py [--nodes 100,1000,5000] [--requests 200] [--warmup 20]
       [--json out.json] [--no-tas] [--tas-binary PATH] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import json
import math
import os
import pathlib
import random
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import extender_server  # noqa: E402 - the extender tests' throw-away PKI

OURS = ROOT / "roles" / "power_extender" / "files" / "poweraware_extender.py"
GOAL_NODES, GOAL_P99_MS = 1000, 50.0
CLIENT_CN = "kube-scheduler"
NAMESPACE, POLICY, METRIC = "default", "power-policy", "node_power_jump"
PODS_PER_NODE = 3
RESOURCE_VERSION = "1000"
READY_TIMEOUT = 120.0


class BenchmarkError(RuntimeError):
    """The run cannot measure what it claims: the message says why."""


# --- certificates ------------------------------------------------------------------------------------


def make_pki(directory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate (CN kube-scheduler): paths.

    The extender tests' throw-away PKI (tests/integration/extender_server.py), one place for both."""
    ca = extender_server.make_ca(directory, "latency-benchmark-ca")
    server = extender_server.issue_server(ca, directory)
    client = extender_server.issue_client(ca, directory, CLIENT_CN)
    return {
        "ca": str(ca.cert),
        "server": (str(server.cert), str(server.key)),
        "client": (str(client.cert), str(client.key)),
    }


# --- the cluster -------------------------------------------------------------------------------------


def node_name(index):
    return f"worker-{index:05d}"


def make_node(index, rng):
    """A Node as the API serves it (managedFields stripped, as kube-scheduler's informer does)."""
    name = node_name(index)
    idle = rng.uniform(45.0, 110.0)
    span = rng.uniform(120.0, 320.0)
    shape = (0.0, 0.38, 0.62, 0.82, 1.0)
    model = {
        "kind": "piecewise_linear",
        "params": {
            "knot_util": [0.0, 25.0, 50.0, 75.0, 100.0],
            "knot_watts": [round(idle + span * s, 3) for s in shape],
        },
    }
    zone = f"zone-{index % 3}"
    images = [
        {"names": [f"registry.k8s.io/{image}@sha256:{rng.getrandbits(256):064x}", f"registry.k8s.io/{image}:v1.{n}"],
         "sizeBytes": rng.randint(10_000_000, 400_000_000)}
        for n, image in enumerate(("kube-proxy", "pause", "coredns/coredns", "etcd"))
    ]  # fmt: skip
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": f"kubelet has {message}",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for kind, reason, message in (
            ("MemoryPressure", "SufficientMemory", "sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "no disk pressure"),
            ("PIDPressure", "SufficientPID", "sufficient PID available"),
        )
    ]  # fmt: skip
    conditions.append(
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    )  # fmt: skip
    return {
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{index:012d}",
            "resourceVersion": RESOURCE_VERSION,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.8xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
                "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "poweraware.io/power-model": json.dumps(model),
            },
        },
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24", "providerID": f"kwok://{name}"},
        "status": {
            "capacity": {"cpu": "32", "memory": "131900796Ki", "pods": "110", "ephemeral-storage": "102350Mi"},
            "allocatable": {"cpu": "31800m", "memory": "129701244Ki", "pods": "110", "ephemeral-storage": "96589Mi"},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.200.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{rng.getrandbits(128):032x}",
                "systemUUID": f"{rng.getrandbits(128):032x}",
                "bootID": f"{rng.getrandbits(128):032x}",
                "kernelVersion": "6.8.0-45-generic",
                "osImage": "Ubuntu 24.04.1 LTS",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "v1.36.3",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def make_pod(node_index, slot, rng):
    node = node_name(node_index)
    name = f"app-{node_index:05d}-{slot}"
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"00000000-0000-4000-9000-{node_index * PODS_PER_NODE + slot:012d}",
            "resourceVersion": RESOURCE_VERSION,
            "labels": {"app": f"app-{slot}"},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1.0",
                    "resources": {
                        "requests": {"cpu": f"{rng.randrange(250, 8000, 250)}m", "memory": f"{rng.randint(1, 16)}Gi"}
                    },
                }
            ],
        },
        "status": {"phase": "Running", "podIP": f"10.{node_index // 256 % 256}.{node_index % 256}.{slot + 2}"},
    }


def scheduling_pod():
    """The pod both extenders are asked about: TAS's policy label and resource, a CPU request."""
    return {
        "metadata": {
            "name": "bench-pod",
            "namespace": NAMESPACE,
            "uid": "00000000-0000-4000-a000-000000000001",
            "labels": {"app": "bench", "telemetry-policy": POLICY},
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1.0",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi", "telemetry/scheduling": "1"},
                        "limits": {"telemetry/scheduling": "1"},
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def tas_policy():
    return {
        "apiVersion": "telemetry.intel.com/v1alpha1",
        "kind": "TASPolicy",
        "metadata": {"name": POLICY, "namespace": NAMESPACE, "uid": "tas-policy-uid", "resourceVersion": "1"},
        "spec": {
            "strategies": {"scheduleonmetric": {"rules": [{"metricname": METRIC, "operator": "LessThan", "target": 0}]}}
        },
    }


def discovery(port):
    """The discovery documents client-go's discovery client and REST mapper read (legacy, not aggregated)."""

    def group(name, versions):
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}

    def resources(group_version, items):
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": items}

    read = ["get", "list", "watch"]
    metric = [{"name": f"nodes/{METRIC}", "singularName": "", "namespaced": False, "kind": "MetricValueList",
               "verbs": ["get"]}]  # fmt: skip
    return {
        "/api": {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}],
        },
        "/apis": {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                group("telemetry.intel.com", ["v1alpha1"]),
                group("custom.metrics.k8s.io", ["v1beta2", "v1beta1"]),
            ],
        },
        "/api/v1": resources(
            "v1",
            [
                {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": read},
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": read},
            ],
        ),
        "/apis/telemetry.intel.com/v1alpha1": resources(
            "telemetry.intel.com/v1alpha1",
            [
                {
                    "name": "taspolicies",
                    "singularName": "taspolicy",
                    "namespaced": True,
                    "kind": "TASPolicy",
                    "verbs": read,
                }
            ],
        ),
        "/apis/custom.metrics.k8s.io/v1beta2": resources("custom.metrics.k8s.io/v1beta2", metric),
        "/apis/custom.metrics.k8s.io/v1beta1": resources("custom.metrics.k8s.io/v1beta1", metric),
    }


class Cluster:
    """The objects the stub serves, pre-encoded where they are served whole."""

    def __init__(self, count, seed=15):
        rng = random.Random(seed)
        self.nodes = [make_node(i, rng) for i in range(count)]
        self.pods = [make_pod(i, s, rng) for i in range(count) for s in range(PODS_PER_NODE)]
        self.policy = tas_policy()
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.metrics = json.dumps(
            {
                "kind": "MetricValueList",
                "apiVersion": "custom.metrics.k8s.io/v1beta2",
                "metadata": {},
                "items": [
                    {
                        "describedObject": {"kind": "Node", "name": node_name(i), "apiVersion": "/v1"},
                        "metric": {"name": METRIC, "selector": None},
                        "timestamp": stamp,
                        "windowSeconds": 60,
                        "value": str(rng.randint(80, 450)),
                    }
                    for i in range(count)
                ],
            }
        ).encode()


class StubAPI:
    """HTTPS stub of the API paths the two extenders read; watches stay open, silent, until they time out."""

    def __init__(self, cluster, pki):
        self.cluster = cluster
        self.stopping = threading.Event()
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args):
                return

            def _json(self, code, body):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's name
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                path = urllib.parse.unquote(url.path).rstrip("/")
                outer.requests.append(path)
                if query.get("watch", [""])[0] in ("1", "true"):
                    return self._watch(int(query.get("timeoutSeconds", ["300"])[0]))
                docs = outer.discovery
                if path in docs:
                    return self._json(200, docs[path])
                if path == "/api/v1/nodes":
                    return self._json(200, outer.page("NodeList", outer.cluster.nodes, query))
                if path == "/api/v1/pods":
                    return self._json(200, outer.page("PodList", outer.cluster.pods, query))
                if path in (
                    "/apis/telemetry.intel.com/v1alpha1/taspolicies",
                    f"/apis/telemetry.intel.com/v1alpha1/namespaces/{NAMESPACE}/taspolicies",
                ):
                    body = {"apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicyList",
                            "metadata": {"resourceVersion": "1"}, "items": [outer.cluster.policy]}  # fmt: skip
                    return self._json(200, body)
                if path == f"/apis/custom.metrics.k8s.io/v1beta2/nodes/*/{METRIC}":
                    return self._json(200, outer.cluster.metrics)
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                          "code": 404, "message": f"the stub API does not serve {path}"}  # fmt: skip
                return self._json(404, status)

            def _watch(self, seconds):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                outer.stopping.wait(min(seconds, 600))
                with contextlib.suppress(OSError):
                    self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*pki["server"])
        context.load_verify_locations(cafile=pki["ca"])
        context.verify_mode = ssl.CERT_REQUIRED
        context.set_alpn_protocols(["http/1.1"])
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        self.discovery = discovery(self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def page(self, kind, items, query):
        limit = int(query.get("limit", ["0"])[0] or 0)
        start = int(query.get("continue", ["0"])[0] or 0)
        end = len(items) if limit <= 0 else min(len(items), start + limit)
        metadata = {"resourceVersion": RESOURCE_VERSION}
        if end < len(items):
            metadata["continue"] = str(end)
        return {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items[start:end]}

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# --- the extenders -----------------------------------------------------------------------------------


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_tas(explicit):
    """The TAS binary: --tas-binary, else the lab's cached build (built on first use, needs Go)."""
    if explicit:
        return pathlib.Path(explicit)
    sys.path.insert(0, str(ROOT))
    from lab import assets

    component = next(c for c in assets.COMPONENTS if c.name == "tas")
    return assets.ensure_built(component, log=lambda m: print(m, file=sys.stderr)) / "extender"


class Processes:
    """Children started by this run; every one is ended on exit, on failure and on Ctrl-C."""

    def __init__(self):
        self.children = []

    def start(self, name, argv, log_path, env=None):
        log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.children.append((name, proc, log, log_path))
        return proc

    def check(self):
        for name, proc, _log, log_path in self.children:
            if proc.poll() is not None:
                tail = pathlib.Path(log_path).read_text(errors="replace")[-2000:]
                raise BenchmarkError(f"{name} exited with {proc.returncode}; its log ends:\n{tail}")

    def stop(self):
        for _name, proc, _log, _path in self.children:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for _name, proc, log, _path in self.children:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
        self.children = []


def client_context(pki):
    context = ssl.create_default_context(cafile=pki["ca"])
    context.load_cert_chain(*pki["client"])
    return context


class Endpoint:
    """One keep-alive HTTPS connection to an extender's verb, with the client certificate."""

    def __init__(self, port, path, context):
        self.port, self.path, self.context = port, path, context
        self.conn = None

    def post(self, body, timeout=60):
        """``(status, reply bytes, seconds)``: from sending the request to having read the whole reply."""
        if self.conn is None:
            self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=timeout)
            self.conn.connect()  # the handshake is not part of a request's time (keep-alive, as kube-scheduler)
            # Go's net package sets TCP_NODELAY on every connection; without it http.client's separate
            # header and body writes meet the server's delayed ACK (40 ms stalls that are the client's).
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        try:
            self.conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        elapsed = time.perf_counter() - started
        if resp.will_close:
            self.close()
        return resp.status, data, elapsed

    def get(self, path):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def ranking(status, data, count):
    """Why a prioritize reply does not rank ``count`` nodes, or '' when it does."""
    if status != 200:
        return f"HTTP {status}: {data[:200]!r}"
    try:
        scores = json.loads(data) or []
        hosts = {entry["Host"] for entry in scores}
        values = {entry["Score"] for entry in scores}
    except (ValueError, KeyError, TypeError) as err:
        return f"not a HostPriorityList ({err}): {data[:200]!r}"
    if len(hosts) != count:
        return f"{len(hosts)} of {count} nodes scored"
    if count > 1 and len(values) < 2:
        return f"every node scored {values}: nothing is ranked"
    return ""


def wait_ranking(name, endpoint, body, count, processes, timeout=READY_TIMEOUT):
    deadline, why = time.monotonic() + timeout, "no answer yet"
    while time.monotonic() < deadline:
        processes.check()
        try:
            status, data, _seconds = endpoint.post(body)
            why = ranking(status, data, count)
            if not why:
                return
        except (OSError, http.client.HTTPException) as err:
            why = str(err)
        time.sleep(0.5)
    raise BenchmarkError(f"{name} does not rank the {count} nodes after {timeout:g} s: {why}")


def start_ours(processes, pki, api_port, workdir):
    # The service imports the collection as ansible_collections.poweraware.k8s: give it this checkout.
    collections = workdir / "collections"
    link = collections / "ansible_collections" / "poweraware" / "k8s"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    env = dict(os.environ, PYTHONPATH=str(collections))
    port = free_port()
    argv = [
        sys.executable, str(OURS), f"--port={port}", f"--tls-cert={pki['server'][0]}",
        f"--tls-key={pki['server'][1]}", f"--client-ca={pki['ca']}", f"--allowed-client={CLIENT_CN}",
        f"--api-server=https://127.0.0.1:{api_port}", f"--api-ca={pki['ca']}", f"--api-cert={pki['client'][0]}",
        f"--api-key={pki['client'][1]}", "--annotation-prefix=poweraware.io",
    ]  # fmt: skip
    processes.start("our extender", argv, workdir / "ours.log", env)
    return port


def start_tas(processes, binary, pki, api_port, workdir):
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "stub",
                        "cluster": {"server": f"https://127.0.0.1:{api_port}", "certificate-authority": pki["ca"]},
                    }
                ],  # fmt: skip
                "users": [
                    {"name": "tas", "user": {"client-certificate": pki["client"][0], "client-key": pki["client"][1]}}
                ],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "tas"}}],
                "current-context": "stub",
            }
        )
    )
    port = free_port()
    # Outside a pod: no in-cluster configuration, so TAS reads --kubeConfig.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    argv = [
        str(binary), f"--kubeConfig={kubeconfig}", f"--port={port}", f"--cert={pki['server'][0]}",
        f"--key={pki['server'][1]}", f"--cacert={pki['ca']}", "--syncPeriod=1s",
    ]  # fmt: skip
    processes.start("TAS", argv, workdir / "tas.log", env)
    return port


def wait_ready(endpoint, processes, timeout=READY_TIMEOUT):
    deadline, why = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        processes.check()
        try:
            status, data = endpoint.get("/readyz")
            if status == 200:
                return
            why = f"/readyz {status}: {data[:200]!r}"
        except (OSError, http.client.HTTPException) as err:
            why = str(err)
        time.sleep(0.2)
    raise BenchmarkError(f"our extender is not ready after {timeout:g} s: {why}")


# --- measuring ---------------------------------------------------------------------------------------


def percentile(values, fraction):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def measure(count, args, pki, workdir, tas_binary):
    print(f"-- {count} nodes: building the cluster", file=sys.stderr)
    cluster = Cluster(count)
    pod = scheduling_pod()
    names_body = json.dumps(
        {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in cluster.nodes]}
    ).encode()
    nodes_body = json.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": cluster.nodes}, "NodeNames": None}).encode()
    api = StubAPI(cluster, pki).start()
    processes = Processes()
    endpoints = []
    try:
        context = client_context(pki)
        ours_port = start_ours(processes, pki, api.port, workdir)
        rows = []
        if tas_binary is not None:
            tas_port = start_tas(processes, tas_binary, pki, api.port, workdir)
        ours_names = Endpoint(ours_port, "/prioritize", context)
        ours_nodes = Endpoint(ours_port, "/prioritize", context)
        endpoints += [ours_names, ours_nodes]
        wait_ready(ours_names, processes)
        rows.append(("ours", "NodeNames", ours_names, names_body))
        rows.append(("ours", "Nodes", ours_nodes, nodes_body))
        if tas_binary is not None:
            tas = Endpoint(tas_port, "/scheduler/prioritize", context)
            endpoints.append(tas)
            rows.append(("TAS", "Nodes", tas, nodes_body))
        for name, body_kind, endpoint, body in rows:
            wait_ranking(f"{name} ({body_kind})", endpoint, body, count, processes)
        print(f"-- {count} nodes: both extenders rank every node; measuring", file=sys.stderr)
        times = {index: [] for index in range(len(rows))}
        for round_index in range(args.warmup + args.requests):
            order = range(len(rows)) if round_index % 2 == 0 else reversed(range(len(rows)))
            for index in order:
                _name, _kind, endpoint, body = rows[index]
                status, data, seconds = endpoint.post(body)
                if status != 200:
                    raise BenchmarkError(f"{rows[index][0]} ({rows[index][1]}): HTTP {status}: {data[:200]!r}")
                if round_index >= args.warmup:
                    times[index].append(seconds * 1000.0)
            processes.check()
        results = []
        for index, (name, body_kind, _endpoint, body) in enumerate(rows):
            values = times[index]
            results.append(
                {
                    "nodes": count,
                    "extender": name,
                    "body": body_kind,
                    "requests": len(values),
                    "p50_ms": statistics.median(values),
                    "p99_ms": percentile(values, 0.99),
                    "mean_ms": statistics.fmean(values),
                    "max_ms": max(values),
                    "request_kb": len(body) / 1024.0,
                }
            )
        return results
    finally:
        for endpoint in endpoints:
            endpoint.close()
        processes.stop()
        api.stop()


def table(results):
    tas = {r["nodes"]: r for r in results if r["extender"] == "TAS"}
    lines = [
        "| nodes | extender (body) | p50 ms | p99 ms | mean ms | request KB | p50 / TAS | p99 / TAS |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ref = tas.get(r["nodes"])
        ratio50 = f"{r['p50_ms'] / ref['p50_ms']:.2f}" if ref and r is not ref else "-"
        ratio99 = f"{r['p99_ms'] / ref['p99_ms']:.2f}" if ref and r is not ref else "-"
        lines.append(
            f"| {r['nodes']:,} | {r['extender']} ({r['body']}) | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
            f"{r['mean_ms']:.2f} | {r['request_kb']:,.1f} | {ratio50} | {ratio99} |"
        )
    return "\n".join(lines)


def goal(results):
    """``(verdict line, met or None when not measured)`` for issue 15's goal at GOAL_NODES."""
    ours = next((r for r in results if r["nodes"] == GOAL_NODES and r["extender"] == "ours"
                 and r["body"] == "NodeNames"), None)  # fmt: skip
    tas = next((r for r in results if r["nodes"] == GOAL_NODES and r["extender"] == "TAS"), None)
    if ours is None or tas is None:
        return (
            f"goal (ours p99 at {GOAL_NODES:,} nodes < {GOAL_P99_MS:g} ms and <= TAS): not measured in this run",
            None,
        )
    fast, better = ours["p99_ms"] < GOAL_P99_MS, ours["p99_ms"] <= tas["p99_ms"]
    met = fast and better
    return (
        f"goal {'MET' if met else 'NOT MET'}: ours (NodeNames) p99 at {GOAL_NODES:,} nodes {ours['p99_ms']:.2f} ms "
        f"({'<' if fast else '>='} {GOAL_P99_MS:g} ms), TAS p99 {tas['p99_ms']:.2f} ms "
        f"(ratio {ours['p99_ms'] / tas['p99_ms']:.2f})",
        met,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", default="100,1000,5000", help="candidate-node counts, comma-separated")
    parser.add_argument("--requests", type=int, default=200, help="measured requests per extender and count")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured requests first")
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    parser.add_argument("--no-tas", action="store_true", help="measure our extender only (TAS needs a Go build)")
    parser.add_argument("--tas-binary", help="TAS extender binary (default: the lab's cached build)")
    parser.add_argument("--workdir", type=pathlib.Path, help="for certificates and logs (default: a temporary one)")
    parser.add_argument("--data", help=argparse.SUPPRESS)  # `make bench` passes it to every benchmark
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.nodes.split(",") if n.strip()]
    if not counts or min(counts) < 2 or args.requests < 1 or args.warmup < 0:
        parser.error("--nodes needs counts >= 2, --requests >= 1 and --warmup >= 0")
    tas_binary = None if args.no_tas else find_tas(args.tas_binary)
    if tas_binary is not None and not os.access(tas_binary, os.X_OK):
        parser.error(f"TAS binary {tas_binary} is not executable")
    own_workdir = args.workdir is None
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="extender-latency-")) if own_workdir else args.workdir
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    results = []

    def interrupted(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)  # stop the children on `kill` as on Ctrl-C
    try:
        pki = make_pki(workdir)
        for count in counts:
            results += measure(count, args, pki, workdir, tas_binary)
    except BenchmarkError as err:
        print(f"extender_latency: {err}\n(logs in {workdir})", file=sys.stderr)
        own_workdir = False
        return 1
    except KeyboardInterrupt:
        print("extender_latency: interrupted; every child was stopped", file=sys.stderr)
        return 130
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    verdict, met = goal(results)
    print(f"Prioritize latency over TLS, keep-alive, {args.requests} requests per row after {args.warmup} warm-up, "
          "rows alternated request by request; ratios are to TAS at the same node count.\n")  # fmt: skip
    print(table(results))
    print(f"\n{verdict}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "goal": verdict, "goal_met": met}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
