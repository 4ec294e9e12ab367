"""Container probes as kubelet runs them: httpGet, tcpSocket, exec and grpc, with their thresholds."""

from __future__ import annotations

import dataclasses
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from .common import PodError
from .grpc_h2 import (
    ACK,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    encode_headers,
    frame,
)


# --- probes ------------------------------------------------------------------------------------
def named_port(container: dict, port) -> int:
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise PodError(f"probe port {port!r} is not a port of the container")


def run_probe(probe: dict, container: dict, pod_ip: str, exec_probe) -> tuple[bool, str]:
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "httpGet" in probe:
            get = probe["httpGet"]
            scheme = str(get.get("scheme", "HTTP")).lower()
            port = named_port(container, get.get("port"))
            url = f"{scheme}://{get.get('host') or pod_ip}:{port}{get.get('path', '/')}"
            request = urllib.request.Request(url)  # noqa: S310 - node-local probe
            for header in get.get("httpHeaders") or []:
                request.add_header(header["name"], header["value"])
            context = ssl.create_default_context()
            context.check_hostname = False  # kubelet does not verify a probed certificate either
            context.verify_mode = ssl.CERT_NONE
            try:
                with urllib.request.urlopen(request, context=context, timeout=timeout) as resp:  # noqa: S310
                    code = resp.status
            except urllib.error.HTTPError as exc:
                code = exc.code
            ok = 200 <= code < 400
            return ok, f"HTTP probe failed with statuscode: {code}" if not ok else ""
        if "tcpSocket" in probe:
            port = named_port(container, probe["tcpSocket"].get("port"))
            with socket.create_connection((probe["tcpSocket"].get("host") or pod_ip, port), timeout=timeout):
                return True, ""
        if "exec" in probe:
            return exec_probe(probe["exec"].get("command") or [], timeout)
        if "grpc" in probe:
            grpc = probe["grpc"]
            return grpc_health_check(pod_ip, int(grpc["port"]), str(grpc.get("service") or ""), timeout)
    except PodError as exc:
        return False, str(exc)
    except (OSError, ValueError) as exc:
        return False, f"probe failed: {exc}"
    return True, ""


# kubelet's gRPC probe: grpc.health.v1.Health/Check over cleartext HTTP/2 (h2c with prior
# knowledge, RFC 9113), written with the standard library because the nodes' kubelet stand-in has
# nothing else; the framing and the literal header block are the PodResources server's
# (grpc_h2.py). The request is one HEADERS frame and one DATA frame; the answer is read frame by
# frame until the stream ends, and only its message is decoded, so the server's HPACK (indexed,
# Huffman-coded) headers need no decoder.
GRPC_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise OSError("connection closed by the server")
        data += chunk
    return data


def grpc_health_check(host: str, port: int, service: str, timeout: float) -> tuple[bool, str]:
    """(ok, message) of grpc.health.v1.Health/Check for ``service`` at host:port, as kubelet judges
    it: SERVING passes; any other status, an error status or no answer fails."""
    body = service.encode()
    request = (bytes([0x0A, len(body)]) + body) if body else b""  # HealthCheckRequest{service}
    message = b"\x00" + len(request).to_bytes(4, "big") + request
    headers = encode_headers(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/grpc.health.v1.Health/Check"),
            (":authority", f"{host}:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    data = b""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(
            PREFACE
            + frame(SETTINGS, 0, 0, b"")
            + frame(HEADERS, END_HEADERS, 1, headers)
            + frame(DATA, END_STREAM, 1, message)
        )
        while True:
            head = _recv_exact(sock, 9)
            length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = _recv_exact(sock, length)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(frame(SETTINGS, ACK, 0, b""))
            elif kind == GOAWAY:
                return False, "gRPC health check failed: the server closed the connection (GOAWAY)"
            elif stream == 1 and kind == RST_STREAM:
                return False, "gRPC health check failed: the server reset the stream"
            elif stream == 1 and kind == DATA:
                if flags & PADDED:
                    payload = payload[1 : len(payload) - payload[0]]
                data += payload
            if stream == 1 and kind in (DATA, HEADERS) and flags & END_STREAM:
                break
    if len(data) < 5:
        return False, "gRPC health check failed: no HealthCheckResponse (an error status)"
    response = data[5 : 5 + int.from_bytes(data[1:5], "big")]
    status = 0
    if len(response) >= 2 and response[0] == 0x08:  # field 1 (status), varint; the values fit one byte
        status = response[1]
    if status == 1:
        return True, ""
    return False, f'service unhealthy (responded with "{GRPC_HEALTH_STATUS.get(status, status)}")'


@dataclasses.dataclass
class ProbeState:
    probe: dict | None
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0
    result: bool = False
    message: str = ""

    def due(self, now: float, started: float) -> bool:
        if self.probe is None:
            return False
        initial = float(self.probe.get("initialDelaySeconds", 0))
        return now >= started + initial and now >= self.next_at

    def record(self, ok: bool, message: str, now: float) -> None:
        probe = self.probe or {}
        self.next_at = now + float(probe.get("periodSeconds", 10))
        if ok:
            self.successes += 1
            self.failures = 0
            if self.successes >= int(probe.get("successThreshold", 1)):
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            self.message = message
            if self.failures >= int(probe.get("failureThreshold", 3)):
                self.result = False
