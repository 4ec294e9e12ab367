"""Just enough HTTP for bring-up and health checks (the kubernetes client is slow to import)."""

from __future__ import annotations

import json
import pathlib
import ssl
import urllib.error
import urllib.request


class Api:
    """Just enough of the Kubernetes REST API for bring-up (the kubernetes client is slow to import)."""

    def __init__(self, url: str, pki_dir: pathlib.Path, user: str = "admin"):
        self.url = url
        self.context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        self.context.load_cert_chain(str(pki_dir / f"{user}.crt"), str(pki_dir / f"{user}.key"))

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310 - https only
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:  # noqa: S310
            payload = resp.read()
        return json.loads(payload) if payload[:1] in (b"{", b"[") else payload.decode()

    def get(self, path: str, timeout: float = 10.0):
        return self.request("GET", path, timeout=timeout)


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return resp.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def insecure_context() -> ssl.SSLContext:
    # kube-scheduler and kube-controller-manager serve with self-signed certificates, as on kubeadm.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def node_ready(node: dict | None) -> bool:
    if not node:
        return False
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
