"""The site's image mirror: the CNCF Distribution registry (v3.1.2, the ``registry:3`` image's
binary, built from its Go module), as an air-gapped site runs one.

- It listens at ``MIRROR`` (10.0.1.5:5000) on the cluster's network, and this machine reaches it at
  127.0.0.1:5000 through the border (lab/components/network.py), as a site's admin reaches the
  mirror from a workstation.
- TLS comes from the mirror's own CA (the site's, not the cluster's). Each node's runtime trusts it
  the way containerd does, through ``/etc/containerd/certs.d/10.0.1.5:5000/ca.crt``.
- It authenticates with htpasswd basic auth (user ``lab-mirror``, a random password kept 0600 in the
  state dir). A pod pulls from it only with an ``imagePullSecret`` that holds those credentials.
- Storage is the registry's filesystem driver, under the lab's state dir.

The lab fills it at start as a site mirrors the public images (``crane copy``, ``skopeo sync``):
each image the lab runs (lab/images.py) is pushed under the same path, without its registry host
(``quay.io/prometheus/prometheus`` -> ``10.0.1.5:5000/prometheus/prometheus``), at the same tag.
Such an image is an OCI image whose config carries the image's entrypoint and user and whose one
layer names the public reference the lab has the executable for. A mirror cannot keep the public
digests of images it rebuilds, so ``mirror.json`` in the state dir lists the digests it serves.
The lab's kubelet pulls from it for real: basic auth from the pod's pull secrets, the manifest by
tag or digest, digests verified (lab/kubelet/pull.py ``pull_image``).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import pathlib
import secrets
import ssl
import subprocess
import tarfile
import urllib.error
import urllib.request

from lab import pki
from lab.process import LabProcess

ADDRESS = "10.0.1.5"
PORT = 5000
MIRROR = f"{ADDRESS}:{PORT}"
LOCAL = f"127.0.0.1:{PORT}"  # this machine's way in (the border relays it to MIRROR)
USER = "lab-mirror"
CERTS_D = pathlib.PurePosixPath("etc/containerd/certs.d")  # containerd's hosts directory, on each node
LABEL = "io.poweraware.lab.image"  # the config label naming the public reference (lab/kubelet/pull.py reads it)
LAYER_FILE = "etc/poweraware-lab/image"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class RegistryError(RuntimeError):
    """The mirror could not be prepared or filled: the message names the step and the answer."""


def directory(state_dir: pathlib.Path) -> pathlib.Path:
    return state_dir / "registry"


def mirrored(repository: str) -> str:
    """The mirror's repository for a public one: its path without the registry host, as
    ``crane copy`` and ``skopeo sync`` lay a mirror out."""
    first, _slash, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return rest
    return repository


def prepare(state_dir: pathlib.Path, bin_dir: pathlib.Path) -> None:
    """The mirror's CA, serving certificate, htpasswd file, password and configuration (made once)."""
    home = directory(state_dir)
    config = home / "config.yml"
    if config.exists():
        return
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = pki.make_ca("poweraware-lab site mirror CA")
    ca.write(home, "ca")
    pki.make_cert(ca, "lab mirror", server_names=(ADDRESS, "127.0.0.1"), client=False).write(home, "tls")
    password = secrets.token_urlsafe(24)
    pki.atomic_write(home / "password", password + "\n", 0o600)
    done = subprocess.run(
        [str(bin_dir / "labhtpasswd"), USER], input=password + "\n", capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RegistryError(f"labhtpasswd failed: {done.stderr.strip()}")
    pki.atomic_write(home / "htpasswd", done.stdout, 0o600)
    pki.atomic_write(
        config,
        json.dumps(  # JSON is YAML: the registry's configuration
            {
                "version": 0.1,
                "log": {"level": "info", "formatter": "text"},
                "storage": {"filesystem": {"rootdirectory": str(home / "data")}, "delete": {"enabled": False}},
                "http": {
                    "addr": MIRROR,
                    "tls": {"certificate": str(home / "tls.crt"), "key": str(home / "tls.key")},
                    "headers": {"X-Content-Type-Options": ["nosniff"]},
                },
                "auth": {"htpasswd": {"realm": "poweraware-lab mirror", "path": str(home / "htpasswd")}},
            },
            indent=2,
        )
        + "\n",
        0o600,
    )


def _context(state_dir: pathlib.Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(directory(state_dir) / "ca.crt"))


def credentials(state_dir: pathlib.Path) -> tuple[str, str]:
    return USER, (directory(state_dir) / "password").read_text().strip()


def _request(state_dir: pathlib.Path, method: str, path: str, body: bytes | None = None, headers=None, auth=True):
    user, password = credentials(state_dir)
    request = urllib.request.Request(f"https://{LOCAL}{path}", data=body, method=method, headers=dict(headers or {}))
    if auth:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return urllib.request.urlopen(request, context=_context(state_dir), timeout=30)  # noqa: S310 - the lab's mirror


def healthy(state_dir: pathlib.Path) -> bool:
    """The registry answers its API base: 401 without credentials (it authenticates), 200 with."""
    try:
        with _request(state_dir, "GET", "/v2/") as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def component(bin_dir: pathlib.Path, state_dir: pathlib.Path) -> LabProcess:
    return LabProcess(
        "registry",
        [str(bin_dir / "registry"), "serve", str(directory(state_dir) / "config.yml")],
        health=lambda: healthy(state_dir),
        # its OpenTelemetry exporter would look for a collector that is not there
        env={"OTEL_TRACES_EXPORTER": "none"},
    )


def image_blobs(reference: str, entrypoint: list[str], user: str) -> tuple[bytes, bytes]:
    """The config and the one gzip layer of the mirror's image of ``reference``: byte-identical for
    the same image on every lab start (no timestamps), so its digests are stable."""
    content = (reference + "\n").encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(LAYER_FILE)
        info.size, info.mode, info.mtime = len(content), 0o644, 0
        tar.addfile(info, io.BytesIO(content))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Labels": {LABEL: reference}, **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()]},
    }
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode(), layer


def _push_blob(state_dir: pathlib.Path, name: str, blob: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    try:
        with _request(state_dir, "HEAD", f"/v2/{name}/blobs/{digest}"):
            return digest  # already there
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise
    with _request(state_dir, "POST", f"/v2/{name}/blobs/uploads/") as answer:
        location = answer.headers["Location"]
    location = location.split(LOCAL, 1)[-1] if location.startswith("https://") else location
    sep = "&" if "?" in location else "?"
    headers = {"Content-Type": "application/octet-stream"}
    with _request(state_dir, "PUT", f"{location}{sep}digest={digest}", blob, headers) as answer:
        if answer.status != 201:
            raise RegistryError(f"pushing {digest} to {name}: HTTP {answer.status}")
    return digest


def push(state_dir: pathlib.Path, repository: str, tag: str, entrypoint: list[str], user: str) -> str:
    """Mirror one image (the public ``repository:tag``) and return the digest the mirror serves it at."""
    name = mirrored(repository)
    config, layer = image_blobs(f"{repository}:{tag}", entrypoint, user)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": _push_blob(state_dir, name, config), "size": len(config)},
        "layers": [{"mediaType": LAYER, "digest": _push_blob(state_dir, name, layer), "size": len(layer)}],
    }
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    with _request(state_dir, "PUT", f"/v2/{name}/manifests/{tag}", body, {"Content-Type": MANIFEST}) as answer:
        if answer.status != 201:
            raise RegistryError(f"pushing the manifest of {name}:{tag}: HTTP {answer.status}")
        served = answer.headers.get("Docker-Content-Digest", "")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if served != digest:
        raise RegistryError(f"the mirror stored {name}:{tag} as {served!r}, not {digest}")
    return digest


def fill(state_dir: pathlib.Path, images: list[tuple[str, str, list[str], str]]) -> dict[str, str]:
    """Mirror every ``(repository, tag, entrypoint, user)`` and write ``mirror.json``: the mirror's
    reference of each (``10.0.1.5:5000/path:tag``) and the digest it serves."""
    served = {
        f"{MIRROR}/{mirrored(repo)}:{tag}": push(state_dir, repo, tag, entry, user) for repo, tag, entry, user in images
    }
    pki.atomic_write(directory(state_dir) / "mirror.json", json.dumps(served, indent=2, sort_keys=True) + "\n", 0o644)
    return served


def trust_on_node(state_dir: pathlib.Path, disk: pathlib.Path) -> None:
    """The node's runtime trusts the mirror's CA for that host only (containerd's hosts directory)."""
    target = disk / CERTS_D / MIRROR / "ca.crt"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)  # noqa: S103 - a public CA certificate's directory, as containerd's
    pki.atomic_write(target, (directory(state_dir) / "ca.crt").read_bytes(), 0o644)
