"""The lab kubelet's API (lab/kubelet/api.py) by kubelet's rules: the SubjectAccessReview attributes a
path and method are authorised as (pkg/kubelet/server/auth.go), the user a client certificate
names, containerLogs' query, and the server itself over real TLS with a certificate from a CA of
the test's own, the API server's reviews answered by a stub that records what it was asked."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import socketserver
import ssl
import threading
import time

import pytest
from test_kubelet_stats import fake_proc, fake_sys

from lab import pki
from lab.kubelet import api as kubelet_api
from lab.kubelet import stats as kubelet_stats

NODE = "lab-worker-1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/containerLogs/ns/p/c", [("get", "proxy")]),
        ("POST", "/exec/ns/p/c", [("create", "proxy")]),
        ("GET", "/stats/summary", [("get", "stats")]),
        ("GET", "/metrics/resource", [("get", "metrics")]),
        ("GET", "/metrics", [("get", "metrics")]),
        ("GET", "/logs/syslog", [("get", "log")]),
        ("POST", "/checkpoint/ns/p/c", [("create", "checkpoint")]),
        ("GET", "/pods", [("get", "pods"), ("get", "proxy")]),
        ("GET", "/healthz", [("get", "healthz"), ("get", "proxy")]),
        ("GET", "/statsx", [("get", "proxy")]),  # a sub*path*, not a prefix of the name
    ],
)
def test_the_attributes_kubelet_authorises_a_request_as(method, path, expected):
    attributes = kubelet_api.authorization_attributes(method, path, NODE)
    assert [(a["verb"], a["subresource"]) for a in attributes] == expected
    assert all(a["resource"] == "nodes" and a["name"] == NODE and a["version"] == "v1" for a in attributes)


def test_a_certificate_names_its_cn_and_organizations():
    cert = {
        "subject": (
            (("organizationName", "kubeadm:cluster-admins"),),
            (("commonName", "kube-apiserver-kubelet-client"),),
        )
    }
    assert kubelet_api.certificate_user(cert) == ("kube-apiserver-kubelet-client", ["kubeadm:cluster-admins"])
    assert kubelet_api.certificate_user({}) is None  # no certificate: a token, or nobody
    assert kubelet_api.certificate_user({"subject": ((("organizationName", "x"),),)}) is None


def test_tail_lines_then_limit_bytes():
    data = b"one\ntwo\nthree\n"
    assert kubelet_api.tail(data, None, None) == data
    assert kubelet_api.tail(data, 2, None) == b"two\nthree\n"
    assert kubelet_api.tail(data, 0, None) == b""
    assert kubelet_api.tail(data, 10, 5) == b"one\nt"
    assert kubelet_api.tail(b"no newline at the end", 1, None) == b"no newline at the end"


def test_log_query_as_kubelet_checks_it_and_what_the_lab_does_not_serve():
    assert kubelet_api.log_options({}) == {"follow": False, "tail_lines": None, "limit_bytes": None}
    assert kubelet_api.log_options({"follow": ["true"], "tailLines": ["10"], "limitBytes": ["500"]}) == {
        "follow": True,
        "tail_lines": 10,
        "limit_bytes": 500,
    }
    assert kubelet_api.log_options({"tailLines": ["-1"]})["tail_lines"] is None  # kubectl's "all"
    for query, words in (
        ({"tailLines": ["ten"]}, 'tailLines: invalid value "ten": must be an integer'),
        ({"limitBytes": ["-5"]}, "limitBytes: Invalid value: -5: must be greater than or equal to 0"),
        ({"timestamps": ["true"]}, "without per-line timestamps"),
        ({"sinceSeconds": ["60"]}, "without per-line timestamps"),
        ({"previous": ["true"]}, "previous is not served"),
    ):
        with pytest.raises(kubelet_api.RequestError, match=words) as err:
            kubelet_api.log_options(query)
        assert err.value.status == 400


class StubApi:
    """The API server's reviews: tokens in ``tokens`` are valid, users in ``allowed`` may do
    anything; every review asked for is recorded."""

    def __init__(self, tokens, allowed):
        self.tokens, self.allowed, self.asked = tokens, allowed, []

    def request(self, method, path, body):
        self.asked.append((path.rsplit("/", 1)[-1], body["spec"]))
        if path.endswith("tokenreviews"):
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": {"username": user, "groups": ["g"]}}}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


@pytest.fixture
def kubelet(tmp_path):
    ca = pki.make_ca("test-ca")
    ca.write(tmp_path, "ca")
    pki.make_cert(ca, NODE, server_names=("127.0.0.1",), client=False).write(tmp_path, "kubelet")
    pki.make_cert(ca, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins").write(tmp_path, "client")
    pki.make_cert(ca, "stranger").write(tmp_path, "stranger")
    logs = tmp_path / "log"
    container = logs / "pods" / f"ns_web_{'u' * 8}" / "app"
    container.mkdir(parents=True)
    (container / "0.log").write_bytes(b"".join(b"line %d\n" % n for n in range(1, 21)))
    api = StubApi({"good-token": "system:serviceaccount:ns:reader"}, {"kube-apiserver-kubelet-client"})
    runtime = StubRuntime()
    server = kubelet_api.KubeletApi(
        NODE,
        "127.0.0.1",
        tmp_path / "kubelet.crt",
        tmp_path / "kubelet.key",
        tmp_path / "ca.crt",
        api,
        logs,
        StubHost(),
        runtime,
        kubelet_stats.Stats(
            NODE, proc=fake_proc(tmp_path / "proc"), sys=fake_sys(tmp_path / "sys"), agent_cpu=lambda: 0.0
        ),
        port=0,
    )
    server.start()
    server.runtime = runtime  # for the stream tests
    yield server, api, tmp_path, container / "0.log"
    server.stop()
    runtime.backend.shutdown()
    runtime.backend.server_close()


class StubHost:
    """kubelet's HostInterface as the Runner provides it: a running pod and one whose sandbox and
    containers have stopped."""

    def running_pods(self):
        return [{"metadata": {"name": "web", "namespace": "ns"}}]

    def pod_runs(self):
        return [
            kubelet_stats.PodRun(
                "ns",
                "web",
                "u-1",
                1_700_000_000.0,
                [kubelet_stats.ContainerRun("app", 41, 1_700_000_010.0, "img:1")],
                sandbox=40,
            ),
            kubelet_stats.PodRun("ns", "stopped", "u-2", 1_700_000_000.0, [], sandbox=None),
        ]


class _Backend(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Upgrade(socketserver.StreamRequestHandler):
    """The runtime's streaming server as a stub: records the request it was sent, answers the upgrade
    and echoes every byte back upper-cased until the client closes."""

    def handle(self):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += self.rfile.read(1)
        self.server.requests.append(head.decode("latin-1"))
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
        while data := self.request.recv(1024):
            self.wfile.write(data.upper())


class StubRuntime:
    """StreamingRuntime's interface: each URL points at a stub streaming server; every request and
    the error to answer with are recorded and set by the test."""

    def __init__(self):
        self.asked, self.error = [], None
        self.backend = _Backend(("127.0.0.1", 0), _Upgrade)
        self.backend.requests = []
        threading.Thread(target=self.backend.serve_forever, args=(0.05,), daemon=True).start()

    def start(self):
        pass

    def stop(self):
        pass

    def url(self, **request):
        self.asked.append(request)
        if self.error:
            raise kubelet_api.StreamingError(self.error)
        return f"http://127.0.0.1:{self.backend.server_address[1]}/{request['kind']}/t0ken"


def _get(kubelet, path, cert=None, token=None, stream=False):
    server, _api, files, _log = kubelet
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    if cert:
        context.load_cert_chain(str(files / f"{cert}.crt"), str(files / f"{cert}.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.server.server_address[1], context=context, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    response = conn.getresponse()
    return response if stream else (response.status, response.read().decode())


def test_the_api_server_reads_a_log_with_its_kubelet_client_certificate(kubelet):
    _server, api, _files, _log = kubelet
    status, body = _get(kubelet, "/containerLogs/ns/web/app?tailLines=2", cert="client")
    assert (status, body) == (200, "line 19\nline 20\n")
    # authorised as kubelet asks: nodes/proxy of this node, for the certificate's user and groups
    assert api.asked == [
        (
            "subjectaccessreviews",
            {
                "user": "kube-apiserver-kubelet-client",
                "groups": ["kubeadm:cluster-admins"],
                "extra": {},
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "nodes",
                    "name": NODE,
                    "version": "v1",
                    "subresource": "proxy",
                },
            },
        )
    ]
    assert _get(kubelet, "/containerLogs/ns/web/app?limitBytes=7", cert="client") == (200, "line 1\n")
    assert _get(kubelet, "/containerLogs/ns/web/db", cert="client") == (
        404,
        'container "db" in pod "web" is not available',
    )
    assert _get(kubelet, "/containerLogs/ns/gone/app", cert="client") == (
        404,
        f'pod "gone" in namespace "ns" is not running on node "{NODE}"',
    )
    assert _get(kubelet, "/healthz", cert="client") == (200, "ok")
    status, body = _get(kubelet, "/pods", cert="client")
    assert status == 200 and json.loads(body)["items"][0]["metadata"]["name"] == "web"


def test_nobody_without_credentials_and_a_refused_user_gets_kubelets_403(kubelet):
    _server, api, _files, _log = kubelet
    assert _get(kubelet, "/healthz") == (401, "Unauthorized")
    assert _get(kubelet, "/healthz", token="forged") == (401, "Unauthorized")
    assert _get(kubelet, "/containerLogs/ns/web/app", cert="stranger") == (
        403,
        "Forbidden (user=stranger, verb=get, resource=nodes, subresource=proxy)",
    )
    # a reviewed token is a user like any other: authorised by a SubjectAccessReview, refused here
    api.asked.clear()
    assert _get(kubelet, "/pods", token="good-token") == (
        403,
        "Forbidden (user=system:serviceaccount:ns:reader, verb=get, resource=nodes, subresource=proxy)",
    )
    assert [kind for kind, _spec in api.asked] == ["tokenreviews", "subjectaccessreviews", "subjectaccessreviews"]


def test_a_followed_log_streams_what_the_container_writes_next(kubelet):
    _server, _api, _files, log = kubelet
    response = _get(kubelet, "/containerLogs/ns/web/app?follow=true&tailLines=1", cert="client", stream=True)
    assert response.status == 200
    assert response.read1(100) == b"line 20\n"
    received = []
    reader = threading.Thread(target=lambda: received.append(response.read1(100)))
    reader.start()
    time.sleep(0.3)
    with open(log, "ab") as out:
        out.write(b"line 21\n")
    reader.join(5)
    assert received == [b"line 21\n"]
    log.unlink()  # the pod is gone: the stream ends
    assert response.read() == b""


def test_stream_options_as_remotecommand_reads_them():
    assert kubelet_api.stream_options({"output": ["1"], "error": ["1"]}) == {
        "tty": False,
        "stdin": False,
        "stdout": True,
        "stderr": True,
    }
    # a terminal has no separate stderr; "true" is not "1"
    assert kubelet_api.stream_options({"tty": ["1"], "input": ["1"], "error": ["1"], "output": ["true"]}) == {
        "tty": True,
        "stdin": True,
        "stdout": False,
        "stderr": False,
    }
    with pytest.raises(kubelet_api.RequestError, match="you must specify at least 1 of stdin, stdout, stderr") as err:
        kubelet_api.stream_options({"stdout": ["1"]})  # the CRI field's name is not the query's
    assert err.value.status == 400


def _upgrade(kubelet, path, cert="client", upgrade=True):
    """A raw TLS connection that sends an upgrade request as kube-apiserver's SPDY client does;
    returns the socket and the response head."""
    server, _api, files, _log = kubelet
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    context.load_cert_chain(str(files / f"{cert}.crt"), str(files / f"{cert}.key"))
    raw = socket.create_connection(("127.0.0.1", server.server.server_address[1]), timeout=10)
    tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
    headers = ["X-Stream-Protocol-Version: v4.channel.k8s.io", "X-Stream-Protocol-Version: v3.channel.k8s.io"]
    if upgrade:
        headers += ["Connection: Upgrade", "Upgrade: SPDY/3.1"]
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
    tls.sendall((head + "".join(h + "\r\n" for h in headers) + "\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = tls.recv(1)
        if not chunk:
            break
        head += chunk
    return tls, head.decode("latin-1")


def test_exec_is_proxied_to_the_runtimes_stream_both_ways(kubelet):
    server, api, _files, _log = kubelet
    tls, head = _upgrade(kubelet, "/exec/ns/web/app?command=sh&command=-c&command=id&output=1&error=1")
    assert head.startswith("HTTP/1.1 101 Switching Protocols"), head
    # the runtime was asked as kubelet asks it over CRI: the container's ID, the command, the streams
    assert server.runtime.asked == [
        {
            "kind": "exec",
            "container_id": "lab://41",
            "cmd": ["sh", "-c", "id"],
            "tty": False,
            "stdin": False,
            "stdout": True,
            "stderr": True,
        }
    ]
    # the request went on to the runtime's URL with the caller's headers but not its credentials
    sent = server.runtime.backend.requests[0]
    assert sent.startswith("POST /exec/t0ken HTTP/1.1\r\n"), sent
    assert sent.count("X-Stream-Protocol-Version:") == 2 and "Upgrade: SPDY/3.1" in sent
    assert "Authorization" not in sent and "secret" not in sent
    # and the upgraded connection carries bytes both ways, in pieces as they come
    for piece in (b"frame-one", b"x" * 70000):
        tls.sendall(piece)
        echoed = b""
        while len(echoed) < len(piece):
            echoed += tls.recv(len(piece) - len(echoed))
        assert echoed == piece.upper()
    tls.close()
    assert [spec["resourceAttributes"]["subresource"] for _kind, spec in api.asked] == ["proxy"]


def test_attach_and_port_forward_ask_for_the_container_and_the_sandbox(kubelet):
    server, _api, _files, _log = kubelet
    tls, head = _upgrade(kubelet, "/attach/ns/web/u-1/app?output=1&tty=1")
    tls.close()
    assert head.startswith("HTTP/1.1 101"), head
    tls, head = _upgrade(kubelet, "/portForward/ns/web")
    tls.close()
    assert head.startswith("HTTP/1.1 101"), head
    assert server.runtime.asked == [
        {"kind": "attach", "container_id": "lab://41", "tty": True} | {"stdin": False, "stdout": True, "stderr": False},
        {"kind": "portforward", "pod_sandbox_id": "lab://40"},
    ]


@pytest.mark.parametrize(
    ("path", "upgrade", "status", "words"),
    [
        ("/exec/ns/gone/app?command=id&output=1", True, 404, "pod does not exist"),
        ("/exec/ns/web/db?command=id&output=1", True, 500, 'container not found ("db")'),
        ("/exec/ns/web/other-uid/app?command=id&output=1", True, 500, 'container not found ("app")'),
        ("/exec/ns/web/app?command=id", True, 400, "you must specify at least 1 of stdin, stdout, stderr"),
        ("/exec/ns/web/app?output=1", True, 400, "you must specify a command"),
        ("/exec/ns/web/app?command=id&output=1", False, 400, "Upgrade request required"),
        ("/portForward/ns/web/other-uid", True, 404, "pod not found"),
        ("/portForward/ns/stopped", True, 500, 'pod "stopped" has no running sandbox'),
    ],
)
def test_a_stream_kubelet_cannot_give_is_refused_with_its_status(kubelet, path, upgrade, status, words):
    server, _api, _files, _log = kubelet
    tls, head = _upgrade(kubelet, path, upgrade=upgrade)
    body = b""
    with contextlib.suppress(OSError):
        while chunk := tls.recv(4096):
            body += chunk
    tls.close()
    assert head.startswith(f"HTTP/1.1 {status} "), head
    assert words in body.decode(), body
    assert server.runtime.backend.requests == []  # nothing reached the runtime's streams


def test_the_runtimes_refusal_and_a_stranger_never_reach_a_stream(kubelet):
    server, _api, _files, _log = kubelet
    server.runtime.error = "container lab://41 is not running: no such process"
    tls, head = _upgrade(kubelet, "/exec/ns/web/app?command=id&output=1")
    body = tls.recv(4096).decode()
    tls.close()
    assert head.startswith("HTTP/1.1 500 ") and "is not running" in body, (head, body)
    tls, head = _upgrade(kubelet, "/exec/ns/web/app?command=id&output=1", cert="stranger")
    tls.close()
    assert head.startswith("HTTP/1.1 403 "), head
    assert server.runtime.backend.requests == []


def test_the_resource_statistics_are_served_as_kubelet_serves_them(kubelet):
    _server, api, _files, _log = kubelet
    status, body = _get(kubelet, "/stats/summary", cert="client")
    assert status == 200
    summary = json.loads(body)
    assert summary["node"]["nodeName"] == NODE
    assert [p["podRef"]["name"] for p in summary["pods"]] == ["web", "stopped"]
    pod = summary["pods"][0]
    assert pod["podRef"] == {"name": "web", "namespace": "ns", "uid": "u-1"}
    assert pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] == 3_000_000_000  # 300 ticks
    status, text = _get(kubelet, "/metrics/resource", cert="client")
    assert status == 200
    assert 'container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 3 ' in text
    assert "resource_scrape_error 0" in text
    status, text = _get(kubelet, "/metrics/cadvisor", cert="client")
    assert status == 200 and 'container_memory_working_set_bytes{container="",id="/"' in text
    assert 'image="img:1"' in text and "machine_cpu_cores 4" in text
    # authorised as kubelet asks: nodes/stats for the summary, nodes/metrics for the metrics
    assert [spec["resourceAttributes"]["subresource"] for _kind, spec in api.asked] == ["stats", "metrics", "metrics"]
