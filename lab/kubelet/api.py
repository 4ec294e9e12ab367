"""The kubelet API of a lab node: port 10250 on the node's address, as pkg/kubelet/server serves it.

kube-apiserver reaches it for ``kubectl logs`` (``pods/log``) by the node's InternalIP, as kubeadm
configures it (``--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname``), with its kubelet
client certificate. What the lab's kubelet serves, with kubelet's own rules:

- TLS with a serving certificate from the cluster CA (``/var/lib/kubelet/pki/kubelet.crt``), naming
  the node's address and name;
- authentication as kubelet's ``authentication`` configures it on a kubeadm node: a client
  certificate signed by ``x509.clientCAFile`` (the user is its CN, the groups its O), else a bearer
  token reviewed by the API server (``webhook``: a TokenReview); anonymous requests get 401;
- authorisation delegated to the API server (``authorization.mode: Webhook``): a SubjectAccessReview
  for ``nodes/<subresource>`` of this node, the verb from the HTTP method and the subresource from
  the path (pkg/kubelet/server/auth.go: ``stats``, ``metrics``, ``log`` for ``/logs``, ``checkpoint``,
  ``pods`` and ``healthz`` with the fine-grained authorisation of Kubernetes 1.33 and later, which
  falls back to ``proxy``, and ``proxy`` for everything else); a refusal is kubelet's 403 text;
- ``/healthz``; ``/pods`` (the pods this kubelet runs: the mapped API pods and the static pods'
  mirror pods); ``/containerLogs/<namespace>/<pod>/<container>`` with ``follow``, ``tailLines`` and
  ``limitBytes`` (kubelet's query parameters), from the container's log under ``/var/log/pods``;
- ``/exec``, ``/attach`` and ``/portForward`` as kubelet serves them (getExec, getAttach,
  getPortForward in pkg/kubelet/server/server.go): the stream options checked as
  remotecommand.NewOptions checks them, the pod and container found, the runtime asked for a
  streaming URL (CRI's Exec, Attach, PortForward) and the caller's upgraded connection proxied to it
  (UpgradeAwareHandler, upgrade required). The runtime's streaming server is k8s.io/cri-streaming,
  as containerd serves it (lab/go/cri-streaming); it speaks SPDY, and so does this kubelet to
  kube-apiserver: the node does not declare ExtendWebSocketsToKubelet, so kube-apiserver translates
  kubectl's WebSockets to SPDY, as it does for every kubelet before 1.36.

Not served here, and answered with a 400 or 404 that says so: ``timestamps`` and ``sinceSeconds``/
``sinceTime`` (the lab keeps a container's output as it was written, without kubelet's per-line
CRI timestamps) and ``previous`` (one log per container, restarts appended).
``/stats/summary``, ``/metrics/resource`` and ``/metrics/cadvisor`` serve the node's and its
containers' CPU and memory (stats.py). Standard library only: the node's system Python
runs it.
"""

from __future__ import annotations

import contextlib
import glob
import http.server
import json
import pathlib
import re
import select
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import urllib.parse

from .stats import cadvisor_metrics, resource_metrics

PORT = 10250
FOLLOW_POLL = 0.2  # how often a followed log is read for new output (seconds)
# The paths kubelet authorises as a subresource of its node other than proxy (pkg/kubelet/server/auth.go)
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/checkpoint", "checkpoint"))
# KubeletFineGrainedAuthz (beta and on by default since 1.33): these are asked for first, then proxy
_FINE_GRAINED = (("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"))
_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_LOG_PATH = re.compile(r"^/containerLogs/(?P<namespace>[^/]+)/(?P<pod>[^/]+)/(?P<container>[^/]+)/?$")
# kubelet's routes: /{exec,attach}/{podNamespace}/{podID}[/{uid}]/{containerName} and
# /portForward/{podNamespace}/{podID}[/{uid}]
_STREAM_PATH = re.compile(
    r"^/(?P<kind>exec|attach)/(?P<namespace>[^/]+)/(?P<pod>[^/]+)(?:/(?P<uid>[^/]+))?/(?P<container>[^/]+)/?$"
)
_PORT_FORWARD_PATH = re.compile(r"^/portForward/(?P<namespace>[^/]+)/(?P<pod>[^/]+)(?:/(?P<uid>[^/]+))?/?$")
# headers a proxied stream does not pass on: the caller's credentials are for this kubelet, not its runtime
_NOT_PROXIED = frozenset({"host", "authorization"})
STREAM_CHUNK = 1 << 16
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def authorization_attributes(method: str, path: str, node: str) -> list[dict]:
    """The SubjectAccessReview resource attributes kubelet asks for, in order: the first allowed wins.
    Fine-grained subresources come with the ``proxy`` fallback older API servers know."""
    verb = _VERBS.get(method, method.lower())
    base = {"verb": verb, "resource": "nodes", "name": node, "version": "v1"}
    for prefix, subresource in _SUBRESOURCES:
        if _is_subpath(path, prefix):
            return [{**base, "subresource": subresource}]
    for prefix, subresource in _FINE_GRAINED:
        if _is_subpath(path, prefix):
            return [{**base, "subresource": subresource}, {**base, "subresource": "proxy"}]
    return [{**base, "subresource": "proxy"}]


def certificate_user(cert: dict | None) -> tuple[str, list[str]] | None:
    """(user, groups) of a verified client certificate, as kube's x509 authenticator reads it: the
    subject's CN and O attributes (``ssl.SSLSocket.getpeercert()``'s form)."""
    if not cert:
        return None
    names = [(key, value) for rdn in cert.get("subject", ()) for key, value in rdn]
    user = next((value for key, value in names if key == "commonName"), "")
    return (user, [value for key, value in names if key == "organizationName"]) if user else None


def tail(data: bytes, lines: int | None, limit: int | None) -> bytes:
    """kubelet's tailLines then limitBytes over a container's output (limitBytes keeps the start)."""
    if lines is not None:
        if lines <= 0:
            data = b""
        else:
            parts = data.splitlines(keepends=True)
            data = b"".join(parts[-lines:])
    if limit is not None:
        data = data[:limit]
    return data


def stream_options(query: dict[str, list[str]]) -> dict:
    """remotecommand.NewOptions (k8s.io/cri-streaming): ``"1"`` turns a stream on (the query names
    are core/v1's ExecStdinParam ``input``, ``output``, ``error`` and ``tty``); a TTY has no separate
    stderr; at least one stream, else a 400 with its words."""

    def on(name: str) -> bool:
        return (query.get(name) or [""])[0] == "1"

    options = {"tty": on("tty"), "stdin": on("input"), "stdout": on("output"), "stderr": on("error")}
    if options["tty"]:
        options["stderr"] = False
    if not (options["stdin"] or options["stdout"] or options["stderr"]):
        raise RequestError(400, "you must specify at least 1 of stdin, stdout, stderr")
    return options


def is_upgrade_request(headers) -> bool:
    """httpstream.IsUpgradeRequest: a Connection header naming ``upgrade``."""
    values = headers.get_all("Connection") or []
    return any(token.strip().lower() == "upgrade" for value in values for token in value.split(","))


class StreamingError(RuntimeError):
    """The runtime refused a stream or could not be asked."""


class StreamingRuntime:
    """The container runtime's streaming server (lab/go/cri-streaming), asked for a stream's URL as
    kubelet asks its runtime over CRI: one JSON request per line on its stdin, one answer per line
    on its stdout. Started with the kubelet API; started again if it exited."""

    def __init__(self, executable: str | pathlib.Path):
        self.executable = str(executable)
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            # its stderr is the kubelet's log; it ends when its stdin closes (the kubelet is gone)
            self.process = subprocess.Popen(
                [self.executable], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
            )
        return self.process

    def url(self, **request) -> str:
        with self.lock:
            try:
                process = self._ensure()
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
                line = process.stdout.readline()
            except OSError as exc:
                raise StreamingError(f"the runtime's streaming server ({self.executable}): {exc}") from exc
        if not line:
            raise StreamingError(f"the runtime's streaming server ({self.executable}) exited; see the kubelet's log")
        answer = json.loads(line)
        if answer.get("error"):
            raise StreamingError(answer["error"])
        return answer["url"]

    def stop(self) -> None:
        with self.lock:
            if self.process is not None and self.process.poll() is None:
                assert self.process.stdin is not None
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()


class RequestError(ValueError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def log_options(query: dict[str, list[str]]) -> dict:
    """kubelet's containerLogs query (pkg/kubelet/server/server.go getContainerLogs), checked as it is:
    a non-integer or negative number is a 400; what the lab cannot serve is a 400 that says why."""

    def flag(name: str) -> bool:
        return (query.get(name) or ["false"])[0].lower() in ("1", "true", "t")

    def number(name: str) -> int | None:
        if name not in query:
            return None
        text = query[name][0]
        if not re.fullmatch(r"-?\d+", text):
            raise RequestError(400, f'{name}: invalid value "{text}": must be an integer')
        value = int(text)
        if value < 0 and name != "tailLines":
            raise RequestError(400, f"{name}: Invalid value: {value}: must be greater than or equal to 0")
        return value

    if flag("timestamps") or "sinceSeconds" in query or "sinceTime" in query:
        raise RequestError(
            400,
            "the lab's kubelet keeps container output as written, without per-line timestamps: "
            "timestamps, sinceSeconds and sinceTime are not served",
        )
    if flag("previous"):
        raise RequestError(
            400, "the lab's kubelet keeps one log per container, restarts appended: previous is not served"
        )
    lines = number("tailLines")
    return {
        "follow": flag("follow"),
        "tail_lines": None if lines is None or lines < 0 else lines,
        "limit_bytes": number("limitBytes"),
    }


class KubeletApi:
    """The HTTPS server; ``api`` is the node's KubeApi (its kubelet credentials); ``host`` what the
    kubelet knows (kubelet's HostInterface): ``running_pods()`` the pod objects it runs now and
    ``pod_runs()`` what its runtime runs (stats.PodRun: uid, sandbox, running containers);
    ``streaming`` the runtime's streaming server (a StreamingRuntime); ``stats`` the node's
    stats.Stats."""

    def __init__(self, node, address, cert, key, client_ca, api, log_dir, host, streaming, stats, port=PORT):
        self.node = node
        self.api = api
        self.log_dir = pathlib.Path(log_dir)
        self.host = host
        self.streaming = streaming
        self.stats = stats
        self.stats_lock = threading.Lock()  # one sample at a time: usageNanoCores is a rate between two
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert), str(key))
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL  # a certificate, else a bearer token
        handler = type("Handler", (_Handler,), {"kubelet": self})
        self.server = _Server((address, port), handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="kubelet-api", daemon=True)

    def start(self) -> None:
        self.streaming.start()
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.streaming.stop()

    # --- authentication and authorisation, delegated -------------------------------------------
    def authenticate(self, cert: dict | None, authorization: str) -> tuple[str, list[str], dict] | None:
        user = certificate_user(cert)
        if user is not None:
            return user[0], user[1], {}
        scheme, _sep, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        review = self.api.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token.strip()}},
        )
        status = (review or {}).get("status") or {}
        if not status.get("authenticated"):
            return None
        info = status.get("user") or {}
        return info.get("username", ""), list(info.get("groups") or []), dict(info.get("extra") or {})

    def authorize(self, user: str, groups: list[str], extra: dict, method: str, path: str) -> tuple[bool, dict]:
        attributes = authorization_attributes(method, path, self.node)
        for attrs in attributes:
            review = self.api.request(
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {"user": user, "groups": groups, "extra": extra, "resourceAttributes": attrs},
                },
            )
            if ((review or {}).get("status") or {}).get("allowed"):
                return True, attrs
        return False, attributes[-1]

    # --- what it serves ---------------------------------------------------------------------
    def container_log(self, namespace: str, pod: str, container: str) -> pathlib.Path:
        """The newest ``/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log`` (a pod made anew under the
        same name has another uid; names hold no ``_``); a RequestError 404 when there is none."""
        pods_dir = self.log_dir / "pods"
        found = [d for d in pods_dir.glob(f"{glob.escape(namespace)}_{glob.escape(pod)}_*") if d.is_dir()]
        if not found:
            raise RequestError(404, f'pod "{pod}" in namespace "{namespace}" is not running on node "{self.node}"')
        newest = max(found, key=lambda d: d.stat().st_mtime)
        log = newest / container / "0.log"
        if not log.is_file():
            raise RequestError(404, f'container "{container}" in pod "{pod}" is not available')
        return log

    def stream_url(self, kind: str, namespace: str, pod: str, uid: str | None, container: str | None, query) -> str:
        """The runtime's URL for an exec, attach or port-forward (kubelet's GetExec, GetAttach,
        GetPortForward); a RequestError with kubelet's status and words when there is none."""
        options = stream_options(query) if kind != "portforward" else {}
        found = next((r for r in self.host.pod_runs() if (r.namespace, r.name) == (namespace, pod)), None)
        if found is None:
            raise RequestError(404, "pod does not exist")
        if uid and uid != found.uid:
            if kind == "portforward":
                raise RequestError(404, "pod not found")
            raise RequestError(500, f'container not found ("{container}")')
        try:
            if kind == "portforward":
                if not found.sandbox:
                    raise RequestError(500, f'pod "{pod}" has no running sandbox')
                return self.streaming.url(kind=kind, pod_sandbox_id=f"lab://{found.sandbox}")
            run = next((c for c in found.containers if c.name == container), None)
            if run is None:
                raise RequestError(500, f'container not found ("{container}")')
            container_id = f"lab://{run.pid}"
            if kind == "attach":
                return self.streaming.url(kind=kind, container_id=container_id, **options)
            if not query.get("command"):
                raise RequestError(400, "you must specify a command to run (the command query parameter)")
            return self.streaming.url(kind=kind, container_id=container_id, cmd=query["command"], **options)
        except StreamingError as exc:
            raise RequestError(500, str(exc)) from exc


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):  # a client that went away mid-stream: not news
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    kubelet: KubeletApi
    protocol_version = "HTTP/1.1"
    server_version = "kubelet"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        try:
            identity = self.kubelet.authenticate(self.connection.getpeercert(), self.headers.get("Authorization", ""))
        except (OSError, RuntimeError, ValueError) as exc:
            self._reply(500, f"Authentication failed: {exc}".encode())
            return
        if identity is None:
            self._reply(401, b"Unauthorized")
            return
        user, groups, extra = identity
        try:
            allowed, attrs = self.kubelet.authorize(user, groups, extra, self.command, url.path)
        except (OSError, RuntimeError, ValueError) as exc:
            self._reply(500, f"Authorization error (user={user}, verb={self.command.lower()}): {exc}".encode())
            return
        if not allowed:
            # kubelet's words (pkg/kubelet/server/auth.go)
            verb, subresource = attrs["verb"], attrs["subresource"]
            denied = f"Forbidden (user={user}, verb={verb}, resource=nodes, subresource={subresource})"
            self._reply(403, denied.encode())
            return
        path = url.path
        if path == "/healthz":
            self._reply(200, b"ok")
        elif path in ("/pods", "/pods/"):
            items = list(self.kubelet.host.running_pods())
            body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
            self._reply(200, json.dumps(body).encode(), "application/json")
        elif path in ("/stats/summary", "/metrics/resource", "/metrics/cadvisor") and self.command in ("GET", "HEAD"):
            self._stats(path)
        elif (match := _LOG_PATH.match(path)) and self.command in ("GET", "HEAD"):
            self._logs(match, urllib.parse.parse_qs(url.query))
        elif (match := _STREAM_PATH.match(path) or _PORT_FORWARD_PATH.match(path)) and self.command in ("GET", "POST"):
            self._stream(match, urllib.parse.parse_qs(url.query))
        else:
            self._reply(404, b"404 page not found")

    def do_GET(self):  # noqa: N802 - http.server's names
        self._handle()

    def do_HEAD(self):  # noqa: N802
        self._handle()

    def do_POST(self):  # noqa: N802
        self._handle()

    def do_PUT(self):  # noqa: N802
        self._handle()

    def do_DELETE(self):  # noqa: N802
        self._handle()

    def _logs(self, match: re.Match, query: dict) -> None:
        try:
            options = log_options(query)
            log = self.kubelet.container_log(match["namespace"], match["pod"], match["container"])
            # one open file for what is there and, when followed, what the container writes next:
            # nothing written between the two can fall in a gap
            handle = open(log, "rb")  # noqa: SIM115 - closed below, after the stream
        except RequestError as exc:
            self._reply(exc.status, str(exc).encode())
            return
        except OSError as exc:
            self._reply(500, f"reading the container's log: {exc}".encode())
            return
        with handle:
            data = tail(handle.read(), options["tail_lines"], options["limit_bytes"])
            if not options["follow"]:
                self._reply(200, data)
                return
            self._follow(log, handle, data, options["limit_bytes"])
        self.close_connection = True

    def _follow(self, log: pathlib.Path, handle, data: bytes, limit: int | None) -> None:
        """Chunked: the output so far, then what the container writes, until the client goes, the
        limit is reached or the log is removed (the pod is gone)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        with contextlib.suppress(OSError):
            while True:
                if limit is not None:
                    data = data[: max(0, limit - sent)]
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    sent += len(data)
                if (limit is not None and sent >= limit) or not log.exists() or self._client_gone():
                    break
                time.sleep(FOLLOW_POLL)
                data = handle.read()
            self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        """A followed log's client sends nothing after its request: readable means it closed."""
        if not select.select([self.connection], [], [], 0)[0]:
            return False
        try:
            return not self.connection.recv(1)
        except (OSError, ValueError):
            return True

    # --- resource statistics ---------------------------------------------------------------
    def _stats(self, path: str) -> None:
        kubelet = self.kubelet
        try:
            runs = kubelet.host.pod_runs()
            with kubelet.stats_lock:
                now = time.time()
                summary = kubelet.stats.summary(runs, now)
        except (OSError, ValueError, KeyError) as exc:
            if path == "/metrics/resource":  # kubelet's collector says so in the metrics
                self._reply(200, resource_metrics(None).encode(), PROMETHEUS_TEXT)
            else:
                self._reply(500, f"failed to get node stats: {exc}".encode())
            return
        if path == "/stats/summary":
            self._reply(200, json.dumps(summary, indent=2).encode(), "application/json")
        elif path == "/metrics/resource":
            self._reply(200, resource_metrics(summary, now).encode(), PROMETHEUS_TEXT)
        else:
            machine = kubelet.stats.machine()
            text = cadvisor_metrics(summary, runs, *machine, now)
            self._reply(200, text.encode(), PROMETHEUS_TEXT)

    # --- exec, attach, port-forward ----------------------------------------------------------
    def _stream(self, match: re.Match, query: dict) -> None:
        groups = match.groupdict()
        kind = groups.get("kind") or "portforward"
        self.close_connection = True  # an upgraded connection is the stream's, not HTTP's
        try:
            target = self.kubelet.stream_url(
                kind, groups["namespace"], groups["pod"], groups.get("uid"), groups.get("container"), query
            )
        except RequestError as exc:
            self._reply(exc.status, str(exc).encode())
            return
        if not is_upgrade_request(self.headers):
            # UpgradeAwareHandler with upgradeRequired, as kubelet proxies streams
            self._reply(400, b"Upgrade request required")
            return
        self._proxy(target)

    def _proxy(self, target: str) -> None:
        """The request as it came, to the runtime's URL, then the bytes of both directions as they
        come until one side ends (UpgradeAwareHandler: the runtime answers the upgrade itself)."""
        location = urllib.parse.urlsplit(target)
        try:
            backend = socket.create_connection((location.hostname, location.port), timeout=10)
        except OSError as exc:
            self._reply(500, f"error dialing backend: {exc}".encode())
            return
        with backend:
            backend.settimeout(None)
            request = [f"{self.command} {location.path}{'?' + location.query if location.query else ''} HTTP/1.1"]
            request.append(f"Host: {location.netloc}")
            request += [f"{name}: {value}" for name, value in self.headers.items() if name.lower() not in _NOT_PROXIED]
            backend.sendall(("\r\n".join(request) + "\r\n\r\n").encode("latin-1"))
            self._splice(backend)

    def _splice(self, backend: socket.socket) -> None:
        # One thread for both directions: an SSL socket must not be read and written from two
        # threads at once. The client's buffered reader is empty here (a client sends nothing
        # before the upgrade is answered) and read1 of a full chunk keeps it so.
        client = self.connection
        with contextlib.suppress(OSError, ValueError):
            while True:
                pending = client.pending() if isinstance(client, ssl.SSLSocket) else 0
                readable = [client] if pending else select.select([client, backend], [], [])[0]
                if client in readable:
                    data = self.rfile.read1(STREAM_CHUNK)
                    if not data:
                        return
                    backend.sendall(data)
                if backend in readable:
                    data = backend.recv(STREAM_CHUNK)
                    if not data:
                        return
                    self.wfile.write(data)
