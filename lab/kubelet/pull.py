"""Images as the node's runtime knows them: a reference's parts (the image map's keys are references,
lab/images.py) and a pull from a registry, what the runtime does for kubelet's PullImage.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import pathlib
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request

from .common import PodError


# --- pure decisions (unit-tested on the controller) -------------------------------------------
def reference_of(image: str) -> str:
    """``registry/path/name:tag`` of an image reference: without ``@digest``, ``:latest`` when it
    names no tag (a colon in the registry part is a port, not a tag). The image map's keys are
    such references (lab/images.py)."""
    name = image.split("@", 1)[0]
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def image_host(image: str) -> str:
    """The registry host of an image reference (``docker.io`` when it names none), as the
    runtimes split ``host/path``: the first component is a host when it has a '.' or a ':' or is
    ``localhost``."""
    first, _slash, rest = image.split("@", 1)[0].partition("/")
    return first if rest and ("." in first or ":" in first or first == "localhost") else "docker.io"


def image_tag(image: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


# --- pulling an image from a registry --------------------------------------------------------
# What the lab's runtime does for kubelet's PullImage: the OCI distribution API over TLS verified
# with the node's trust for that host (containerd's hosts directory), basic auth from the pod's pull
# secrets, the manifest by digest when the reference pins one (else by tag), every digest checked.
CERTS_D = pathlib.Path("/etc/containerd/certs.d")
MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
MIRROR_LABEL = "io.poweraware.lab.image"  # lab/components/registry.py LABEL: the public image the mirror's is
PULL_BACKOFF_INITIAL, PULL_BACKOFF_MAX = 10.0, 300.0  # kubelet's image back-off


def docker_credentials(pull_secrets: list[dict[str, bytes]], host: str) -> list[tuple[str, str]]:
    """The (user, password) pairs the pod's pull secrets hold for ``host``, in the secrets' order:
    a ``kubernetes.io/dockerconfigjson`` secret's ``auths`` (or a ``.dockercfg`` one's map), whose
    keys may carry a scheme and a path (``https://host/v1/``), with ``auth`` (base64 user:password)
    or ``username``/``password``, as kubelet's credential keyring reads them."""
    found = []
    for data in pull_secrets:
        raw = data.get(".dockerconfigjson") or data.get(".dockercfg")
        if not raw:
            continue
        try:
            config = json.loads(raw)
        except ValueError:
            continue
        auths = config.get("auths", config) if isinstance(config, dict) else {}
        for key, entry in auths.items():
            if not isinstance(entry, dict):
                continue
            key_host = re.sub(r"^[a-z]+://", "", str(key)).split("/", 1)[0]
            if key_host != host:
                continue
            user, password = entry.get("username"), entry.get("password")
            if entry.get("auth"):
                with contextlib.suppress(ValueError):
                    user, _colon, password = base64.b64decode(entry["auth"]).decode().partition(":")
            if user:
                found.append((str(user), str(password or "")))
    return found


def open_registry(url: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    """One GET of a registry's API: (status, body, headers), TLS verified with the node's trust for
    the host (``/etc/containerd/certs.d/<host>/ca.crt``, else the system's)."""
    host = urllib.parse.urlsplit(url).netloc
    ca = CERTS_D / host / "ca.crt"
    context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None)
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - https only
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https only
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise PodError(f'failed to do request: Get "{url}": {reason}') from None


def _sha256(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def pull_image(image: str, credentials: list[tuple[str, str]], fetch) -> str:
    """Pull ``image`` (``host/path:tag[@digest]``) through the registry API and return its image ID
    (``host/path@<manifest digest>``); PodError with containerd's words when it cannot: the status
    a registry answers (401 without or with wrong credentials), a reference it does not have, a
    digest that does not match. ``fetch(url, headers)`` is :func:`open_registry` on a node."""
    host = image_host(image)
    name, _at, digest = image.partition("@")
    path = name.split("/", 1)[1] if host != "docker.io" or name.startswith("docker.io/") else name
    tag = image_tag(image)
    path = path.rsplit(":", 1)[0] if ":" in path.rsplit("/", 1)[-1] else path
    where = f"https://{host}/v2/{path}"
    prefix = f'failed to pull and unpack image "{image}": failed to resolve reference "{image}"'
    status, body, _headers = 0, b"", {}
    for credential in credentials or [None]:  # kubelet tries each matching credential in turn
        headers = {"Accept": MANIFEST_TYPES}
        if credential:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(credential).encode()).decode()
        status, body, _headers = fetch(f"{where}/manifests/{digest or tag}", headers)
        if status != 401:
            break
    if status == 401:
        raise PodError(
            f"{prefix}: unexpected status from GET request to {where}/manifests/{digest or tag}: 401 Unauthorized"
        )
    if status == 404:
        raise PodError(f"{prefix}: {image}: not found")
    if status != 200:
        raise PodError(f"{prefix}: unexpected status from GET request to {where}/manifests/{digest or tag}: {status}")
    manifest_digest = _sha256(body)
    if digest and manifest_digest != digest:
        raise PodError(f"{prefix}: manifest digest {manifest_digest} does not match {digest}")
    try:
        manifest = json.loads(body)
        config_digest = manifest["config"]["digest"]
    except (ValueError, KeyError, TypeError):
        raise PodError(f'failed to pull and unpack image "{image}": the manifest is not an image manifest') from None
    auth = headers.get("Authorization")
    status, config_body, _headers = fetch(f"{where}/blobs/{config_digest}", {"Authorization": auth} if auth else {})
    if status != 200 or _sha256(config_body) != config_digest:
        raise PodError(
            f'failed to pull and unpack image "{image}": config {config_digest}: status {status} or digest mismatch'
        )
    return f"{host}/{path}@{manifest_digest}"
