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
  ``limitBytes`` (kubelet's query parameters), from the container's log under ``/var/log/pods``.

Not served here, and answered with a 400 or 404 that says so: ``timestamps`` and ``sinceSeconds``/
``sinceTime`` (the lab keeps a container's output as it was written, without kubelet's per-line
CRI timestamps), ``previous`` (one log per container, restarts appended), exec, attach,
port-forward and the metrics endpoints. Standard library only: the node's system Python runs it.
"""

from __future__ import annotations

import contextlib
import glob
import http.server
import json
import pathlib
import re
import select
import socketserver
import ssl
import threading
import time
import urllib.parse

PORT = 10250
FOLLOW_POLL = 0.2  # how often a followed log is read for new output (seconds)
# The paths kubelet authorises as a subresource of its node other than proxy (pkg/kubelet/server/auth.go)
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/checkpoint", "checkpoint"))
# KubeletFineGrainedAuthz (beta and on by default since 1.33): these are asked for first, then proxy
_FINE_GRAINED = (("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"))
_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_LOG_PATH = re.compile(r"^/containerLogs/(?P<namespace>[^/]+)/(?P<pod>[^/]+)/(?P<container>[^/]+)/?$")


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


class LogRequestError(ValueError):
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
            raise LogRequestError(400, f'{name}: invalid value "{text}": must be an integer')
        value = int(text)
        if value < 0 and name != "tailLines":
            raise LogRequestError(400, f"{name}: Invalid value: {value}: must be greater than or equal to 0")
        return value

    if flag("timestamps") or "sinceSeconds" in query or "sinceTime" in query:
        raise LogRequestError(
            400,
            "the lab's kubelet keeps container output as written, without per-line timestamps: "
            "timestamps, sinceSeconds and sinceTime are not served",
        )
    if flag("previous"):
        raise LogRequestError(
            400, "the lab's kubelet keeps one log per container, restarts appended: previous is not served"
        )
    lines = number("tailLines")
    return {
        "follow": flag("follow"),
        "tail_lines": None if lines is None or lines < 0 else lines,
        "limit_bytes": number("limitBytes"),
    }


class KubeletApi:
    """The HTTPS server; ``api`` is the node's KubeApi (its kubelet credentials), ``pods()`` the pod
    objects this kubelet runs now."""

    def __init__(self, node, address, cert, key, client_ca, api, log_dir, pods, port=PORT):
        self.node = node
        self.api = api
        self.log_dir = pathlib.Path(log_dir)
        self.pods = pods
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
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

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
        same name has another uid; names hold no ``_``); a LogRequestError 404 when there is none."""
        pods_dir = self.log_dir / "pods"
        found = [d for d in pods_dir.glob(f"{glob.escape(namespace)}_{glob.escape(pod)}_*") if d.is_dir()]
        if not found:
            raise LogRequestError(404, f'pod "{pod}" in namespace "{namespace}" is not running on node "{self.node}"')
        newest = max(found, key=lambda d: d.stat().st_mtime)
        log = newest / container / "0.log"
        if not log.is_file():
            raise LogRequestError(404, f'container "{container}" in pod "{pod}" is not available')
        return log


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
            body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": list(self.kubelet.pods())}
            self._reply(200, json.dumps(body).encode(), "application/json")
        elif (match := _LOG_PATH.match(path)) and self.command in ("GET", "HEAD"):
            self._logs(match, urllib.parse.parse_qs(url.query))
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
        except LogRequestError as exc:
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
