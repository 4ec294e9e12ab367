"""A small scheduler extender for tests: HTTPS with client-certificate checking, on loopback.

It speaks k8s.io/kube-scheduler/extender/v1 (docs/scheduler-extender.md): POST <prefix>/filter and
<prefix>/prioritize with an ``ExtenderArgs`` body (``Pod``, ``Nodes`` or ``NodeNames``; either
key case). Filter refuses only the excluded node (it is the one ``FailedNodes`` entry) and keeps
the others, so the scheduler still has a choice and must call prioritize; prioritize gives the
preferred node 10 and the others 0. A pod that lands on the preferred node was therefore placed
by the extender's priorities, and one that never lands on the excluded node by its filter. Every
request is recorded (verb, pod namespace/name, candidate nodes, client certificate subject) so a
test can prove which pods were sent, with which candidates, and which were not.

Also: ``make_ca``, ``issue_server`` and ``issue_client`` build a throw-away CA and certificates with
``cryptography`` (the extender tests and benchmarks/extender_latency.py use them).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import pathlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# --- certificates ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Pem:
    cert: pathlib.Path
    key: pathlib.Path


def _write_key(key, path: pathlib.Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def make_ca(directory: pathlib.Path, name: str = "extender-test-ca") -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = Pem(directory / f"{name}.crt", directory / f"{name}.key")
    pem.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pem.key)
    return pem


def _issue(ca: Pem, path: pathlib.Path, name: str, usage, sans=()) -> Pem:
    """A leaf certificate for common name ``name`` with one extended key usage, signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    pem = Pem(path.with_suffix(".crt"), path.with_suffix(".key"))
    pem.cert.write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    _write_key(key, pem.key)
    return pem


def issue_server(ca: Pem, directory: pathlib.Path, ip: str = "127.0.0.1") -> Pem:
    """A serving certificate for ``ip`` (``server.crt``, ``server.key``)."""
    sans = [x509.IPAddress(ipaddress.ip_address(ip))]
    return _issue(ca, directory / "server", "test-extender", ExtendedKeyUsageOID.SERVER_AUTH, sans)


def issue_client(ca: Pem, directory: pathlib.Path, name: str) -> Pem:
    """A client certificate (clientAuth) for common name ``name`` (``<name>.crt``, ``<name>.key``)."""
    return _issue(ca, directory / name, name, ExtendedKeyUsageOID.CLIENT_AUTH)


# --- the extender ----------------------------------------------------------------------------------


def _get(obj: dict, name: str, default=None):
    """Field by Go name or JSON name (``Pod`` / ``pod``)."""
    if not isinstance(obj, dict):
        return default
    for key in (name, name[:1].lower() + name[1:]):
        if key in obj:
            return obj[key]
    return default


@dataclasses.dataclass
class Call:
    verb: str
    pod: str
    nodes: list[str]
    client: str | None


class ExtenderServer:
    """Serve the extender on 127.0.0.1:<free port> until ``stop()``; ``calls`` lists the requests.
    ``listen_socket`` (``lab.lab_socket()``) puts it in the lab's network, where kube-scheduler is."""

    def __init__(
        self,
        server_pem: Pem,
        client_ca: pathlib.Path,
        preferred_node: str,
        excluded_node: str,
        prefix: str = "/scheduler",
        listen_socket: socket.socket | None = None,
    ):
        if preferred_node == excluded_node:
            raise ValueError("the preferred node cannot be the excluded one")
        self.preferred = preferred_node
        self.excluded = excluded_node
        self.prefix = prefix.rstrip("/")
        self.calls: list[Call] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(server_pem.cert, server_pem.key)
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_REQUIRED  # mutual TLS, as TAS does
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):  # quiet
                return

            def do_POST(self):  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    args = json.loads(self.rfile.read(length) or b"{}")
                    verb = self.path[len(outer.prefix) :].strip("/") if self.path.startswith(outer.prefix) else None
                    body = outer.handle(verb, args, self.connection.getpeercert())
                    code = 200 if body is not None else 404
                except (ValueError, KeyError, TypeError) as exc:
                    outer.errors.append(f"{self.path}: {exc!r}")
                    body, code = {"Error": str(exc)}, 400
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        # A socket made elsewhere (in the lab's network, where kube-scheduler runs) or this machine's.
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        if listen_socket is not None:
            self.httpd.socket.close()
            self.httpd.socket = listen_socket
        self.httpd.server_bind()
        self.httpd.server_activate()
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}{self.prefix}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> ExtenderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, verb, args, peer_cert):
        pod = _get(args, "Pod") or {}
        meta = _get(pod, "Metadata") or pod.get("metadata") or {}
        pod_name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        node_list = _get(args, "Nodes")
        names = _get(args, "NodeNames")
        items = (_get(node_list, "Items") or []) if node_list else []
        candidates = list(names) if names is not None else [n["metadata"]["name"] for n in items]
        subject = None
        if peer_cert:
            subject = ",".join(f"{k}={v}" for rdn in peer_cert.get("subject", ()) for k, v in rdn)
        with self._lock:
            self.calls.append(Call(verb or "?", pod_name, candidates, subject))
        if verb == "filter":
            failed = {n: "excluded by the test extender" for n in candidates if n == self.excluded}
            keep = [n for n in candidates if n != self.excluded]
            result = {"FailedNodes": failed, "Error": ""}
            if names is not None:
                result["NodeNames"] = keep
            else:
                result["Nodes"] = {"metadata": {}, "items": [n for n in items if n["metadata"]["name"] in keep]}
            return result
        if verb == "prioritize":
            return [{"Host": n, "Score": 10 if n == self.preferred else 0} for n in candidates]
        return None

    def calls_for(self, pod: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.pod == pod]
