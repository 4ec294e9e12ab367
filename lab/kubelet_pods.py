"""The lab kubelet's API pods: pods bound to this node whose image the lab knows run for real.

lab/kubelet.py runs the node's static pods; this module adds what kubelet does for the pods the
scheduler binds to the node, for every pod with a container whose image repository is in the lab's
image map (``image-map.json``, written from lab/images.py). kwok's pod stages skip exactly those
pods, so each pod's status has one owner. For such a pod it gives each container what kubelet gives
one:

- a mount namespace of its own whose root is the node's file system with the pod's volumes at their
  ``mountPath``: ConfigMap, Secret, ``emptyDir``, ``hostPath``, persistent volume claims bound to a
  ``local`` or ``hostPath`` PersistentVolume, and projected volumes (service-account
  token from the TokenRequest API bound to the pod, refreshed at 80 % of its life, ``ca.crt`` from a
  ConfigMap, the namespace from the downward API), materialised under
  ``/var/lib/kubelet/pods/<uid>/volumes`` as kubelet does; nothing is created on the node's own
  paths (a missing mount point is made in a private overlay or tmpfs of the container);
- the image's entrypoint (or the container's ``command``) and ``args`` with ``$(VAR)`` expanded,
  the environment (``env`` with ``valueFrom``, ``envFrom``, ``KUBERNETES_SERVICE_HOST/PORT`` naming
  the ``default/kubernetes`` Service, 10.96.0.1:443), ``workingDir``, and the user and groups of its
  ``securityContext``;
- a network: ``hostNetwork`` pods use the node's; every other pod gets a network namespace of its
  own, held by a process as the pause container holds it, joined to the node's by a veth pair as
  Calico does it (``cali<hash>`` on the node with a /32 route to the pod, ``eth0`` in the pod with
  the pod's address from the node's pod CIDR, ``--pod-cidr`` 10.244.<node>.0/24, and a default
  route via 169.254.1.1, which the node's end answers for); a process binds what it likes there,
  as in a container;
- DNS as kubelet sets it: a pod with ``dnsPolicy: ClusterFirst`` (or ``ClusterFirstWithHostNet``
  on the host network) gets a resolv.conf naming the cluster DNS with the
  ``<ns>.svc.<domain> svc.<domain> <domain>`` search path and ``ndots:5``, merged with its
  ``dnsConfig``; ``Default`` keeps the node's, ``None`` uses ``dnsConfig`` alone;
- readiness, liveness and startup probes (httpGet, tcpSocket, exec, grpc) on the pod's address, restarts
  with kubelet's back-off (10 s doubling to 5 min, here 1 s to 20 s), ``restartPolicy``;
- the pod's status (phase, podIP, conditions, container states with ``CrashLoopBackOff`` and the
  last termination, restart counts), patched through the API with the node's own credentials;
- init containers (``spec.initContainers``) as kubelet runs them: one at a time, in order, each to a
  successful end before the next and before any container (``PodInitializing``); a failed one is
  retried with the back-off, or fails the pod under ``restartPolicy: Never``; the pod is
  ``Pending`` and ``Initialized`` false until the last one ends, and ``initContainerStatuses`` show
  them (``Init:0/1`` in ``kubectl get pods``); sidecars (an init container with ``restartPolicy:
  Always``) are not run and say so;
- output in ``/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log``, linked from ``/var/log/containers``;
- deletion: a pod marked for deletion is stopped within its grace period, then removed from the
  API (``gracePeriodSeconds: 0``), and its directory with it.

An image that is mapped but whose container cannot start (no executable, a volume that cannot be
made, a refused token) shows the reason in the container's ``waiting`` state, as kubelet's
``CreateContainerError``/``CrashLoopBackOff`` do. Standard library only: the node's system Python
runs it.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import ctypes.util
import dataclasses
import hashlib
import ipaddress
import json
import math
import os
import pathlib
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from fractions import Fraction

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 20.0
BACKOFF_RESET_AFTER = 60.0
MAX_GRACE = 10.0
LIST_INTERVAL = 2.0
STATUS_RESYNC = 30.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOKEN_REFRESH_AT = 0.8  # kubelet renews a projected token after 80 % of its life
# kubelet's syncFrequency (default 1m, kubeadm sets none): how often a running pod's ConfigMap,
# Secret and downwardAPI volumes are brought up to date with the API
VOLUME_SYNC = 60.0
# volume types whose files come from the API, and the plugin directory kubelet keeps them in
API_VOLUMES = {"configMap": "configmap", "secret": "secret", "projected": "projected", "downwardAPI": "downward-api"}
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CREATE_FAILED = "lab kubelet: cannot create the container: "  # a preexec's last word, in the log

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
POD_GATEWAY = "169.254.1.1"  # Calico's: every pod's next hop, on the node's end of its veth
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1


class PodError(RuntimeError):
    """A container of a mapped pod cannot be created; the message goes into its status."""


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pods: {message}", flush=True)


def now_rfc3339(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at if at is not None else time.time()))


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


def claims(pod: dict, image_map: dict) -> bool:
    """This runner owns the pod: not a mirror pod, and some container's image is mapped at its tag
    (kwok's NotIn skips a pod when any container's image reference is in the map)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return False
    containers = (pod.get("spec") or {}).get("containers") or []
    return any(reference_of(str(c.get("image", ""))) in image_map for c in containers)


def pod_address(uid: str, pod_cidr: str, taken: set[str]) -> str:
    """A stable address of the pod's own in the node's /24 pod CIDR: .2 to .254, from the uid
    (.1 is the gateway's on a real node)."""
    network = ipaddress.ip_network(pod_cidr)
    if network.version != 4 or network.prefixlen != 24:
        raise PodError(f"the lab kubelet's --pod-cidr must be an IPv4 /24, not {pod_cidr}")
    start = int(hashlib.sha256(uid.encode()).hexdigest(), 16) % 253
    for offset in range(253):
        address = str(network.network_address + 2 + (start + offset) % 253)
        if address not in taken:
            return address
    raise PodError(f"no free pod address left in {pod_cidr}")


MAX_DNS_SEARCH = 32  # kubelet's limit (validation.MaxDNSSearchPaths)


def resolv_conf(pod: dict, cluster_dns: str, domain: str) -> str | None:
    """The pod's /etc/resolv.conf as kubelet writes it (pkg/kubelet/network/dns), or None when the
    pod keeps the node's (``dnsPolicy: Default``, or ``ClusterFirst`` on the host network)."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    config = spec.get("dnsConfig") or {}
    host_network = bool(spec.get("hostNetwork"))
    if policy == "Default" or (policy == "ClusterFirst" and host_network):
        return None
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet"):
        namespace = pod["metadata"]["namespace"]
        servers = [cluster_dns]
        searches = [f"{namespace}.svc.{domain}", f"svc.{domain}", domain]
        options = {"ndots": "5"}
    elif policy == "None":
        servers, searches, options = [], [], {}
    else:
        raise PodError(f"dnsPolicy {policy!r} is not one of ClusterFirst, ClusterFirstWithHostNet, Default, None")
    servers += [s for s in config.get("nameservers") or [] if s not in servers]
    searches += [s for s in config.get("searches") or [] if s not in searches]
    for option in config.get("options") or []:
        options[option["name"]] = option.get("value")
    lines = [f"nameserver {server}" for server in servers[:3]]
    if searches:
        lines.append("search " + " ".join(searches[:MAX_DNS_SEARCH]))
    if options:
        lines.append("options " + " ".join(k if v is None else f"{k}:{v}" for k, v in options.items()))
    return "\n".join(lines) + "\n"


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (third_party/forked/golang/expansion): a defined variable is
    replaced, an undefined reference stays as written, $$ is a literal $."""

    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _VAR_REF.sub(replace, value)


def field_value(pod: dict, path: str, pod_ip: str, node_ip: str) -> str:
    """The downward API's fieldRef paths kubelet resolves."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": node_ip,
        "status.hostIPs": node_ip,
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise PodError(f"fieldRef {path!r} is not supported by the downward API")


def stress_arguments(container: dict, image: dict | None, env: dict[str, str]) -> list[str] | None:
    """The stress-ng arguments of a container of a stress image (lab/images.py ``cpu_use``) whose
    command is the image's stress-ng, else None: the load the lab simulates for it, as the power
    meter reads it (lab/components/node_power.py container_cpu)."""
    if not image or image.get("cpu_use") != "stress-ng":
        return None
    argv = resolve_command(container, image, env)
    if not argv or pathlib.PurePosixPath(argv[0]).name != image["entrypoint"][0]:
        return None
    return argv[1:]


def resolve_command(container: dict, image: dict, env: dict[str, str]) -> list[str]:
    """ENTRYPOINT/CMD semantics: ``command`` replaces the image's entrypoint (and its default args),
    ``args`` replace the default args; both are $(VAR)-expanded."""
    entry = list(image.get("entrypoint") or [])
    if container.get("command"):
        argv = [str(w) for w in container["command"]] + [str(w) for w in container.get("args") or []]
    elif container.get("args") is not None and entry:
        argv = entry[:1] + [str(w) for w in container.get("args") or []]
    else:
        argv = entry
    if not argv:
        raise PodError("the image map gives no entrypoint and the container no command")
    return [expand(word, env) for word in argv]


def key_to_path_items(data: dict[str, bytes], items: list | None, default_mode: int) -> dict[str, tuple[bytes, int]]:
    """The files a ConfigMap/Secret volume (or projection) shows: every key, or the listed items."""
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    out = {}
    for item in items:
        key = item.get("key")
        if key not in data:
            raise PodError(f"key {key!r} is not in the referenced object")
        out[item.get("path", key)] = (data[key], int(item.get("mode", default_mode)))
    return out


# --- the node's API access --------------------------------------------------------------------
class NodeApi:
    """The calls kubelet makes, with the node's credentials (the Node authorizer limits them to
    pods bound to this node and the objects those pods reference)."""

    def __init__(self, api):
        self.api = api  # lab/kubelet.py KubeApi

    def pods(self, node: str) -> list[dict]:
        selector = urllib.parse.quote(f"spec.nodeName={node}")
        return self.api.request("GET", f"/api/v1/pods?fieldSelector={selector}")["items"]

    def object_data(self, kind: str, namespace: str, name: str, optional: bool) -> dict[str, bytes] | None:
        plural = {"ConfigMap": "configmaps", "Secret": "secrets"}[kind]
        obj = self.api.request("GET", f"/api/v1/namespaces/{namespace}/{plural}/{name}", missing_ok=True)
        if obj is None:
            if optional:
                return None
            raise PodError(f'{kind.lower()} "{name}" not found')
        if kind == "Secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return data

    def claimed_volume(self, namespace: str, claim: str) -> dict:
        """The PersistentVolume a pod's claim is bound to (kubelet's volume manager: the claim must
        be Bound and its volume must name it back), with kubelet's messages when it is not."""
        pvc = self.api.request("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}", missing_ok=True)
        if pvc is None:
            raise PodError(f'persistentvolumeclaim "{claim}" not found')
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if (pvc.get("status") or {}).get("phase") != "Bound" or not volume_name:
            phase = (pvc.get("status") or {}).get("phase", "")
            raise PodError(f'PVC {namespace}/{claim} has non-bound phase ("{phase}")')
        pv = self.api.request("GET", f"/api/v1/persistentvolumes/{volume_name}", missing_ok=True)
        if pv is None:
            raise PodError(f'persistentvolume "{volume_name}" not found')
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != pvc["metadata"]["uid"]:
            raise PodError(f"the PV {volume_name} is not bound to the PVC {namespace}/{claim}")
        return pv

    def token(self, pod: dict, audience: str | None, seconds: int) -> tuple[str, float]:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        account = spec.get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        if audience:
            body["spec"]["audiences"] = [audience]
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        result = self.api.request("POST", path, body)
        status = result.get("status") or {}
        expires = time.time() + seconds
        with contextlib.suppress(KeyError, ValueError):
            expires = time.mktime(time.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        return status["token"], expires

    def kubernetes_service(self) -> tuple[str, str]:
        """The ``default/kubernetes`` Service's cluster IP and https port: what kubelet puts in every
        container's ``KUBERNETES_SERVICE_HOST/PORT``."""
        service = self.api.request("GET", "/api/v1/namespaces/default/services/kubernetes", missing_ok=True)
        spec = (service or {}).get("spec") or {}
        ports = [p for p in spec.get("ports") or [] if p.get("name") == "https"] or spec.get("ports") or []
        if not spec.get("clusterIP") or not ports:
            raise PodError("the default/kubernetes Service has no cluster IP and port yet: the API server makes it")
        return spec["clusterIP"], str(ports[0]["port"])

    def patch_status(self, pod: dict, status: dict) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        self.api.request("PATCH", path, {"status": status}, patch=True)

    def delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        self.api.request("DELETE", path, body, missing_ok=True)


# --- volumes ---------------------------------------------------------------------------------
def _write_files(directory: pathlib.Path, files: dict[str, tuple[bytes, int]], owner_gid: int | None) -> None:
    """Atomically (re)write a volume's files: a new timestamped directory, then ``..data`` swapped,
    as kubelet's AtomicWriter does, so a reader never sees half an update."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{os.getpid()}{time.monotonic_ns() % 100000}"
    stamp.mkdir(mode=0o755)
    for rel, (content, mode) in files.items():
        target = stamp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        os.chmod(target, mode)
        if owner_gid is not None:
            os.chown(target, -1, owner_gid)
    tmp_link = directory / "..data_tmp"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(stamp.name)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    os.replace(tmp_link, directory / "..data")
    tops = {r.split("/", 1)[0] for r in files}
    for rel in tops:
        link = directory / rel
        if not link.is_symlink():
            link.symlink_to(f"..data/{rel}")
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old and old != stamp.name:
        shutil.rmtree(directory / old, ignore_errors=True)


@dataclasses.dataclass
class Volume:
    name: str
    source: pathlib.Path  # the directory (or file) bound at every mountPath of this volume
    token_expires: float = 0.0
    token_issued: float = 0.0
    spec: dict = dataclasses.field(default_factory=dict)
    payload: str = ""  # digest of the files written last (AtomicWriter writes only a changed payload)


def payload_digest(files: dict[str, tuple[bytes, int]]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        content, mode = files[rel]
        digest.update(f"{rel}\0{mode}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


class PodVolumes:
    """Materialises a pod's volumes under /var/lib/kubelet/pods/<uid>/volumes."""

    def __init__(self, api: NodeApi, pod: dict, pod_dir: pathlib.Path, fs_group: int | None):
        self.api = api
        self.pod = pod
        self.pod_dir = pod_dir
        self.fs_group = fs_group
        self.volumes: dict[str, Volume] = {}

    def _dir(self, plugin: str, name: str) -> pathlib.Path:
        return self.pod_dir / "volumes" / f"kubernetes.io~{plugin}" / name

    def _projection_files(self, spec: dict, now: float, volume: Volume) -> dict[str, tuple[bytes, int]]:
        namespace = self.pod["metadata"]["namespace"]
        default_mode = int(spec.get("defaultMode", 0o644))
        files: dict[str, tuple[bytes, int]] = {}
        for source in spec.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                seconds = int(sat.get("expirationSeconds", 3600))
                token, expires = self.api.token(self.pod, sat.get("audience"), seconds)
                volume.token_issued, volume.token_expires = now, expires
                files[sat["path"]] = (token.encode(), int(sat.get("mode", default_mode)))
            elif "configMap" in source or "secret" in source:
                kind = "ConfigMap" if "configMap" in source else "Secret"
                ref = source.get("configMap") or source.get("secret")
                data = self.api.object_data(kind, namespace, ref["name"], bool(ref.get("optional")))
                if data is not None:
                    files.update(key_to_path_items(data, ref.get("items"), default_mode))
            elif "downwardAPI" in source:
                files.update(self._downward(source["downwardAPI"].get("items") or [], default_mode))
            else:
                raise PodError(f"projected source {sorted(source)} is not supported by the lab's kubelet")
        return files

    def _downward(self, items: list, default_mode: int) -> dict[str, tuple[bytes, int]]:
        files = {}
        for item in items:
            if "fieldRef" not in item:
                raise PodError(f"downwardAPI item {item.get('path')!r}: only fieldRef is supported")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"], "", "")
            files[item["path"]] = (value.encode(), int(item.get("mode", default_mode)))
        return files

    def _api_files(self, spec: dict, now: float, volume: Volume) -> dict[str, tuple[bytes, int]]:
        """The files of a volume whose content comes from the API (ConfigMap, Secret, projected,
        downwardAPI)."""
        if "configMap" in spec or "secret" in spec:
            kind = "ConfigMap" if "configMap" in spec else "Secret"
            ref = spec.get("configMap") or spec.get("secret")
            ref_name = ref.get("name") or ref.get("secretName")
            data = self.api.object_data(kind, self.pod["metadata"]["namespace"], ref_name, bool(ref.get("optional")))
            return key_to_path_items(data or {}, ref.get("items"), int(ref.get("defaultMode", 0o644)))
        if "projected" in spec:
            return self._projection_files(spec["projected"], now, volume)
        items = spec["downwardAPI"].get("items") or []
        return self._downward(items, int(spec["downwardAPI"].get("defaultMode", 0o644)))

    def _write(self, volume: Volume, files: dict[str, tuple[bytes, int]]) -> bool:
        digest = payload_digest(files)
        if digest == volume.payload:
            return False
        _write_files(volume.source, files, self.fs_group)
        volume.payload = digest
        return True

    def prepare(self) -> None:
        now = time.time()
        for spec in (self.pod.get("spec") or {}).get("volumes") or []:
            name = spec["name"]
            volume = Volume(name, pathlib.Path("/"), spec=spec)
            if "hostPath" in spec:
                volume.source = prepare_host_path(spec["hostPath"])
            elif "persistentVolumeClaim" in spec:
                volume.source = self._claimed(spec["persistentVolumeClaim"])
            elif "emptyDir" in spec:
                volume.source = self._dir("empty-dir", name)
                volume.source.mkdir(parents=True, exist_ok=True)
                os.chmod(volume.source, 0o777)  # noqa: S103 - as kubelet makes it: writable by any container user
            elif any(kind in spec for kind in API_VOLUMES):
                plugin = next(API_VOLUMES[kind] for kind in API_VOLUMES if kind in spec)
                volume.source = self._dir(plugin, name)
                self._write(volume, self._api_files(spec, now, volume))
            else:
                kinds = sorted(k for k in spec if k != "name")
                raise PodError(f"volume {name!r}: type {kinds} is not supported by the lab's kubelet")
            self.volumes[name] = volume

    def _claimed(self, source: dict) -> pathlib.Path:
        """A claim's volume on this node: a ``local`` PersistentVolume's path (which must exist: the
        local plugin creates nothing) or a ``hostPath`` one's. kubelet's local plugin gives a writable
        volume to the pod's fsGroup on its first mount (SetVolumeOwnership); hostPath volumes get no
        ownership change, as kubelet's hostPath plugin gives none."""
        pv = self.api.claimed_volume(self.pod["metadata"]["namespace"], source["claimName"])
        spec = pv["spec"]
        read_only = bool(source.get("readOnly"))
        if "hostPath" in spec:
            return prepare_host_path(spec["hostPath"])
        if "local" not in spec:
            kinds = sorted(k for k in ("csi", "nfs", "iscsi", "fc", "rbd", "cephfs") if k in spec) or ["?"]
            name = pv["metadata"]["name"]
            raise PodError(f"persistentvolume {name!r}: type {kinds} is not supported by the lab's kubelet")
        path = pathlib.Path(spec["local"]["path"])
        if not path.exists():
            raise PodError(f"MountVolume.NewMounter initialization failed: path {str(path)!r} does not exist")
        if self.fs_group is not None and not read_only:
            policy = ((self.pod.get("spec") or {}).get("securityContext") or {}).get("fsGroupChangePolicy")
            set_volume_ownership(path, self.fs_group, policy)
        return path

    def sync(self) -> list[str]:
        """kubelet's periodic pod sync for the volumes the API fills: a ConfigMap, Secret or
        downwardAPI volume, or a projected one without a token, is written again when its content
        changed (AtomicWriter: a new directory and the ``..data`` swap, only for a changed payload;
        a ``subPath`` mount keeps the file it was given). Projected tokens follow refresh_tokens.
        Returns the names of the volumes written."""
        now = time.time()
        written = []
        for volume in self.volumes.values():
            spec = volume.spec
            if not any(kind in spec for kind in API_VOLUMES) or volume.token_expires:
                continue
            if self._write(volume, self._api_files(spec, now, volume)):
                written.append(volume.name)
        return written

    def refresh_tokens(self) -> None:
        """Re-issue projected tokens at 80 % of their life (kubelet's token manager)."""
        now = time.time()
        for volume in self.volumes.values():
            if volume.token_expires and now >= volume.token_issued + TOKEN_REFRESH_AT * (
                volume.token_expires - volume.token_issued
            ):
                files = self._projection_files(volume.spec["projected"], now, volume)
                _write_files(volume.source, files, self.fs_group)
                meta = self.pod["metadata"]
                log(f"{meta['namespace']}/{meta['name']}: token of {volume.name} renewed")


_RW_MASK, _EXEC_MASK = 0o660, 0o110  # pkg/volume/volume_linux.go rwMask, execMask


def set_volume_ownership(root: pathlib.Path, fs_group: int, policy: str | None) -> None:
    """kubelet's SetVolumeOwnership for a writable volume: every file's group becomes ``fs_group``
    and gains group read-write (directories also execute and setgid, so new files inherit the
    group); ``OnRootMismatch`` skips the walk when the root already has the group and the mode.
    Symbolic links get the group but no chmod (it would change their target)."""
    if policy == "OnRootMismatch":
        info = root.stat()
        wanted = _RW_MASK | _EXEC_MASK
        has_mode = info.st_mode & wanted == wanted and info.st_mode & stat.S_ISGID
        if info.st_gid == fs_group and root.is_dir() and has_mode:
            return
    # walkDeep: the children first, the root last
    paths = [os.path.join(d, n) for d, dirs, files in os.walk(root, topdown=False) for n in (*files, *dirs)]
    for path in [*paths, str(root)]:
        info = os.lstat(path)
        os.lchown(path, -1, fs_group)
        if stat.S_ISLNK(info.st_mode):
            continue
        mask = _RW_MASK | (_EXEC_MASK | stat.S_ISGID if stat.S_ISDIR(info.st_mode) else 0)
        os.chmod(path, stat.S_IMODE(info.st_mode) | mask)


def prepare_host_path(host_path: dict) -> pathlib.Path:
    path = pathlib.Path(host_path["path"])
    kind = host_path.get("type") or ""
    if kind == "DirectoryOrCreate" or (kind == "" and not os.path.lexists(path)):
        # unset type: kubelet checks nothing, and the runtime creates a missing source as a directory
        # (containerd's CRI, as Docker did): NFD's features.d on a node that never had one
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
    elif kind == "FileOrCreate":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o644, exist_ok=True)
    elif kind == "Directory" and not path.is_dir():
        raise PodError(f"hostPath type check failed: {path} is not a directory")
    elif kind == "File" and not path.is_file():
        raise PodError(f"hostPath type check failed: {path} is not a file")
    elif kind == "Socket" and not path.is_socket():
        raise PodError(f"hostPath type check failed: {path} is not a socket file")
    return path


# --- the container's file system view --------------------------------------------------------
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def _own_namespace(flag: int, name: str, death_signal: int = signal.SIGTERM) -> None:
    """A preexec's first step: end with the kubelet (as a pod's processes do here), then
    unshare(2) the namespace ``flag``."""
    with contextlib.suppress(OSError, AttributeError):
        _libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    if _libc.unshare(flag) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({name})")


def _mount(source, target, fstype=None, flags=0, data=None) -> None:
    def enc(value):
        return None if value is None else str(value).encode()

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


@dataclasses.dataclass(frozen=True)
class Mount:
    source: str
    target: str  # the container's mountPath
    read_only: bool


def resolve_in_root(root: str, path: str, max_links: int = 40) -> str:
    """``path`` as the container sees it, resolved inside ``root``: a symlink (``/var/run`` -> ``/run``)
    is followed within the root, never out of it (what runc's securejoin does)."""
    parts = [p for p in path.split("/") if p and p != "."]
    resolved: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            links += 1
            if links > max_links:
                raise OSError(f"too many levels of symbolic links in {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def _make_mount_point(root: str, target: str, is_dir: bool, scratch: str, overlays: list[str]) -> str:
    """The path of ``target`` inside ``root``, created without writing to the node: a missing path
    is made in a private overlay over its deepest existing ancestor (a tmpfs upper layer), unless
    that ancestor is already in one made for this container (``overlays``: an overlay over a
    directory of another overlay is refused with EINVAL, and it is writable anyway)."""
    inside = resolve_in_root(root, target)
    if os.path.lexists(inside):
        return inside
    ancestor = os.path.dirname(inside.rstrip("/"))
    while not os.path.isdir(ancestor):
        ancestor = os.path.dirname(ancestor)
    writable = any(ancestor == made or ancestor.startswith(made + "/") for made in overlays)
    if not writable and os.path.realpath(ancestor) != os.path.realpath(root):
        overlays.append(ancestor)
        upper, work = f"{scratch}/upper{len(overlays)}", f"{scratch}/work{len(overlays)}"
        os.makedirs(upper)
        os.makedirs(work)
        _mount("overlay", ancestor, "overlay", 0, f"lowerdir={ancestor},upperdir={upper},workdir={work}")
    if is_dir:
        os.makedirs(inside, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        open(inside, "a").close()  # noqa: SIM115 - a mount point
    return inside


def enter_host_network_pod(resolv: str) -> None:
    """Runs in a host-network static pod's process before exec when kubelet gives it a resolv.conf
    of its own (``ClusterFirstWithHostNet``): a private mount namespace of the node's where only
    /etc/resolv.conf differs."""
    _own_namespace(CLONE_NEWNS, "CLONE_NEWNS")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount(resolv, "/etc/resolv.conf", None, MS_BIND)


# Linux capability numbers (include/uapi/linux/capability.h), by the names Kubernetes uses.
CAPABILITIES = {
    name: number
    for number, name in enumerate(
        [
            "CHOWN",
            "DAC_OVERRIDE",
            "DAC_READ_SEARCH",
            "FOWNER",
            "FSETID",
            "KILL",
            "SETGID",
            "SETUID",
            "SETPCAP",
            "LINUX_IMMUTABLE",
            "NET_BIND_SERVICE",
            "NET_BROADCAST",
            "NET_ADMIN",
            "NET_RAW",
            "IPC_LOCK",
            "IPC_OWNER",
            "SYS_MODULE",
            "SYS_RAWIO",
            "SYS_CHROOT",
            "SYS_PTRACE",
            "SYS_PACCT",
            "SYS_ADMIN",
            "SYS_BOOT",
            "SYS_NICE",
            "SYS_RESOURCE",
            "SYS_TIME",
            "SYS_TTY_CONFIG",
            "MKNOD",
            "LEASE",
            "AUDIT_WRITE",
            "AUDIT_CONTROL",
            "SETFCAP",
            "MAC_OVERRIDE",
            "MAC_ADMIN",
            "SYSLOG",
            "WAKE_ALARM",
            "BLOCK_SUSPEND",
            "AUDIT_READ",
            "PERFMON",
            "BPF",
            "CHECKPOINT_RESTORE",
        ]
    )
}
# containerd's default set (its oci.DefaultSpec), what a container gets unless it adds or drops.
RUNTIME_DEFAULT_CAPABILITIES = frozenset(
    CAPABILITIES[name]
    for name in (
        [
            "CHOWN",
            "DAC_OVERRIDE",
            "FSETID",
            "FOWNER",
            "MKNOD",
            "NET_RAW",
            "SETGID",
            "SETUID",
            "SETFCAP",
            "SETPCAP",
            "NET_BIND_SERVICE",
            "SYS_CHROOT",
            "KILL",
            "AUDIT_WRITE",
        ]
    )
)
_PR_CAPBSET_DROP = 24


def kept_capabilities(container: dict) -> frozenset[int] | None:
    """The capabilities a container keeps, by containerd's rule for ``securityContext.capabilities``:
    ``add: [ALL]`` starts from every capability, ``drop: [ALL]`` from none, otherwise the runtime's
    default set; then the named ones are added and the named drops removed. None when the container
    names no capabilities: the lab then leaves the process the set it starts with (a difference from
    containerd, which would give its default set; every pod the roles deploy names its own)."""
    given = (container.get("securityContext") or {}).get("capabilities")
    if not given:
        return None

    def names(field: str) -> set[str]:
        found = set()
        for name in given.get(field) or []:
            key = str(name).upper().removeprefix("CAP_")
            if key != "ALL" and key not in CAPABILITIES:
                raise PodError(f"unknown capability {name!r} in securityContext.capabilities.{field}")
            found.add(key)
        return found

    add, drop = names("add"), names("drop")
    if "ALL" in add:
        kept = set(CAPABILITIES.values())
    elif "ALL" in drop:
        kept = set()
    else:
        kept = set(RUNTIME_DEFAULT_CAPABILITIES)
    kept |= {CAPABILITIES[n] for n in add - {"ALL"}}
    kept -= {CAPABILITIES[n] for n in drop - {"ALL"}}
    return frozenset(kept)


def limit_capabilities(kept: frozenset[int]) -> None:
    """Drop every other capability from the bounding set (before the uid changes: it needs
    CAP_SETPCAP). A process that stays uid 0 gets exactly the bounding set at exec; one that
    becomes non-root loses them all at setuid, as in a container without ambient capabilities."""
    for number in range(64):
        if number in kept:
            continue
        if _libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            if code == 22:  # EINVAL: past the kernel's last capability
                break
            raise OSError(code, f"prctl(PR_CAPBSET_DROP, {number}): {os.strerror(code)}")


def run_as(pod: dict, container: dict, image: dict | None = None) -> tuple | None:
    """``(uid, gid, groups)`` a container's process runs as, by kubelet's and the runtime's rules:
    the container's ``securityContext`` over the pod's, else the image's USER; None for the runtime's
    default (root). ``runAsNonRoot`` refuses uid 0 and an image that would run as root, with
    kubelet's own words (pkg/kubelet/kuberuntime/security_context_others.go)."""
    pod_ctx = (pod.get("spec") or {}).get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
    gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup"))
    non_root = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
    if uid is None and (image or {}).get("user"):
        # the image's USER (uid[:gid], numeric), as the runtime applies it when the pod names none
        image_uid, _colon, image_gid = str(image["user"]).partition(":")
        uid = int(image_uid)
        gid = gid if gid is not None else (int(image_gid) if image_gid else None)
    if uid is None:
        if non_root:
            # kubelet: an image whose user is root (an image without USER) cannot run as non-root.
            raise PodError("container has runAsNonRoot and image will run as root")
        return None
    if non_root and int(uid) == 0:
        raise PodError("container's runAsUser breaks non-root policy")
    groups = {int(g) for g in pod_ctx.get("supplementalGroups") or []}
    if pod_ctx.get("fsGroup") is not None:
        groups.add(int(pod_ctx["fsGroup"]))
    return int(uid), int(gid if gid is not None else uid), tuple(sorted(groups))


def container_preexec(*container):
    """``enter_container(*container)`` as a preexec function that says on stderr (the container's
    log) why it failed: subprocess only reports "Exception occurred in preexec_fn"."""

    def run() -> None:
        try:
            enter_container(*container)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(2, f"{CREATE_FAILED}{exc!r}\n".encode())
            raise

    return run


def enter_container(
    pod_ns: str | None,
    rootfs: str,
    mounts: list[Mount],
    working_dir: str | None,
    user: tuple | None,
    capabilities: frozenset[int] | None = None,
) -> None:
    """Runs in the container's first process before exec: the pod's network and UTS namespaces
    (none for a host-network pod), a private mount namespace whose root is a tmpfs holding the node's top-level
    directories (recursive binds) and the volumes."""
    if pod_ns is not None:
        join_pod(pod_ns)
    _own_namespace(CLONE_NEWNS, "CLONE_NEWNS")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", rootfs, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    scratch = os.path.join(rootfs, ".lab-scratch")
    os.makedirs(scratch)
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
    for entry in os.scandir("/"):
        target = os.path.join(rootfs, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            os.mkdir(target)
            _mount(entry.path, target, None, MS_BIND | MS_REC)
    overlays: list[str] = []
    for mount in mounts:
        is_dir = os.path.isdir(mount.source)
        inside = _make_mount_point(rootfs, mount.target, is_dir, scratch, overlays)
        _mount(mount.source, inside, None, MS_BIND | MS_REC)
        if mount.read_only:
            _mount("none", inside, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    os.chroot(rootfs)
    os.chdir(working_dir or "/")
    if capabilities is not None:
        limit_capabilities(capabilities)
    if user is not None:
        uid, gid, groups = user
        os.setgroups(list(groups))
        os.setgid(gid)
        os.setuid(uid)


# --- the pod's network -----------------------------------------------------------------------
def host_interface(uid: str) -> str:
    """The node's end of the pod's veth: ``cali`` and 11 hex digits of the pod's uid, as Calico
    names it (15 characters, the kernel's limit)."""
    return "cali" + hashlib.sha256(uid.encode()).hexdigest()[:11]


def sandbox_plan(interface: str, pod_ip: str, holder_pid: int) -> list[tuple[str, list[str]]]:
    """The ``ip`` commands that wire a pod's namespace (held by ``holder_pid``) to the node's, each
    with where it runs (``node`` or ``pod``): a veth pair, the pod's address on ``eth0``, a /32
    route to it on the node, and the pod's default route via ``POD_GATEWAY``, an address of the
    node's end (Calico answers for it by proxy ARP instead; the routes are the same); and the
    sandbox sysctls containerd 2 sets by default (``enable_unprivileged_ports``,
    ``enable_unprivileged_icmp``): a non-root container binds ports below 1024 in its pod's own
    namespace (CoreDNS, USER 65532, on :53) and pings."""
    return [
        ("node", ["ip", "link", "add", interface, "type", "veth", "peer", "name", "eth0", "netns", str(holder_pid)]),
        ("node", ["ip", "link", "set", interface, "up"]),
        ("node", ["ip", "address", "add", f"{POD_GATEWAY}/32", "dev", interface]),
        ("node", ["ip", "route", "add", f"{pod_ip}/32", "dev", interface]),
        ("pod", ["ip", "link", "set", "lo", "up"]),
        ("pod", ["ip", "link", "set", "eth0", "up"]),
        ("pod", ["ip", "address", "add", f"{pod_ip}/32", "dev", "eth0"]),
        ("pod", ["ip", "route", "add", POD_GATEWAY, "dev", "eth0", "scope", "link"]),
        ("pod", ["ip", "route", "add", "default", "via", POD_GATEWAY, "dev", "eth0"]),
        ("pod", ["sysctl", "-q", "-w", "net.ipv4.ip_unprivileged_port_start=0"]),
        ("pod", ["sysctl", "-q", "-w", "net.ipv4.ping_group_range=0 2147483647"]),
    ]


def join_pod(pod_ns: str) -> None:
    """setns(2) into the pod's network and UTS namespaces (its address, its host name), those of the
    holder whose ``/proc/<pid>/ns`` is ``pod_ns``, as a container joins its sandbox's (the node's
    Python has no os.setns)."""
    for name, flag in (("net", CLONE_NEWNET), ("uts", CLONE_NEWUTS)):
        path = os.path.join(pod_ns, name)
        fd = os.open(path, os.O_RDONLY)
        try:
            if _libc.setns(fd, flag) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"setns {path}: {os.strerror(errno)}")
        finally:
            os.close(fd)


def pod_hostname(pod: dict) -> str:
    """kubelet's GeneratePodHostNameAndDomain: ``spec.hostname``, else the pod's name cut to 63
    characters without a trailing ``-`` or ``.``."""
    name = (pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"]
    return name[:63].rstrip("-.")


def _sandbox_preexec(hostname: str):
    def run() -> None:
        _own_namespace(CLONE_NEWNET | CLONE_NEWUTS, "CLONE_NEWNET|CLONE_NEWUTS", signal.SIGKILL)
        socket.sethostname(hostname)

    return run


class PodSandbox:
    """The pod's network and UTS namespaces (its address, its host name), held by a sleeping
    process as the pause container holds them; they go (and the veth with them) when the holder does."""

    def __init__(self, uid: str, pod_ip: str, hostname: str):
        self.interface = host_interface(uid)
        self.pod_ip = pod_ip
        self.hostname = hostname
        self.holder: subprocess.Popen | None = None

    @property
    def namespaces(self) -> str:
        """The holder's ``/proc/<pid>/ns``: the pod's namespaces, which its containers join."""
        assert self.holder is not None
        return f"/proc/{self.holder.pid}/ns"

    def alive(self) -> bool:
        return self.holder is not None and self.holder.poll() is None

    def create(self) -> None:
        env = {"PATH": DEFAULT_PATH}
        # A kubelet killed hard leaves its holders to PR_SET_PDEATHSIG; a veth left anyway goes here.
        subprocess.run(["ip", "link", "delete", self.interface], env=env, capture_output=True, check=False)
        self.holder = subprocess.Popen(
            ["sleep", "infinity"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_sandbox_preexec(self.hostname),  # noqa: PLW1509
        )
        pod_ns = self.namespaces
        try:
            for where, argv in sandbox_plan(self.interface, self.pod_ip, self.holder.pid):
                done = subprocess.run(
                    argv,
                    env=env,
                    capture_output=True,
                    check=False,
                    preexec_fn=(lambda: join_pod(pod_ns)) if where == "pod" else None,  # noqa: PLW1509
                )
                if done.returncode != 0:
                    raise PodError(f"pod network: {' '.join(argv)}: {done.stderr.decode(errors='replace').strip()}")
        except (OSError, subprocess.SubprocessError) as exc:
            self.remove()
            raise PodError(f"pod network: {exc}") from exc
        except PodError:
            self.remove()
            raise

    def remove(self) -> None:
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
            self.holder = None


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
# nothing else. The request is one HEADERS frame (HPACK literals, never Huffman) and one DATA frame;
# the answer is read frame by frame until the stream ends, and only its message is decoded, so the
# server's HPACK (indexed, Huffman-coded) headers need no decoder.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_HEADERS, H2_RST_STREAM, H2_SETTINGS, H2_GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x7
H2_END_STREAM, H2_ACK, H2_END_HEADERS, H2_PADDED = 0x1, 0x1, 0x4, 0x8
GRPC_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_literal(name: str, value: str) -> bytes:
    """A literal header field without indexing, new name, raw octets (RFC 7541 6.2.2)."""
    out = b"\x00"
    for text in (name.encode(), value.encode()):
        if len(text) >= 127:
            raise ValueError(f"header {name!r} too long for a one-byte HPACK length")
        out += bytes([len(text)]) + text
    return out


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
    headers = b"".join(
        _hpack_literal(name, value)
        for name, value in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/grpc.health.v1.Health/Check"),
            (":authority", f"{host}:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    data = b""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(
            H2_PREFACE
            + h2_frame(H2_SETTINGS, 0, 0, b"")
            + h2_frame(H2_HEADERS, H2_END_HEADERS, 1, headers)
            + h2_frame(H2_DATA, H2_END_STREAM, 1, message)
        )
        while True:
            head = _recv_exact(sock, 9)
            length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = _recv_exact(sock, length)
            if kind == H2_SETTINGS and not flags & H2_ACK:
                sock.sendall(h2_frame(H2_SETTINGS, H2_ACK, 0, b""))
            elif kind == H2_GOAWAY:
                return False, "gRPC health check failed: the server closed the connection (GOAWAY)"
            elif stream == 1 and kind == H2_RST_STREAM:
                return False, "gRPC health check failed: the server reset the stream"
            elif stream == 1 and kind == H2_DATA:
                if flags & H2_PADDED:
                    payload = payload[1 : len(payload) - payload[0]]
                data += payload
            if stream == 1 and kind in (H2_DATA, H2_HEADERS) and flags & H2_END_STREAM:
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


# --- containers and pods ----------------------------------------------------------------------
@dataclasses.dataclass
class Container:
    spec: dict
    image: dict | None
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    started_wall: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_INITIAL
    next_start: float = 0.0
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    last_terminated: dict | None = None
    finished: dict | None = None  # restartPolicy allowed it to stay terminated
    readiness: ProbeState = dataclasses.field(default_factory=lambda: ProbeState(None))
    liveness: ProbeState = dataclasses.field(default_factory=lambda: ProbeState(None))
    startup: ProbeState = dataclasses.field(default_factory=lambda: ProbeState(None))
    started: bool = False
    # What an exec probe runs with: the container's environment and file system view.
    exec_env: dict = dataclasses.field(default_factory=dict)
    exec_mounts: tuple = ()
    image_id: str = ""  # host/path@digest of a pulled image
    pull_backoff: float = 0.0  # kubelet's image pull back-off (10 s doubling to 300 s)
    next_pull: float = 0.0

    @property
    def name(self) -> str:
        return self.spec.get("name", "container")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def succeeded(self) -> bool:
        """Ended with exit code 0 and not restarted (an init container that is done)."""
        return self.finished is not None and self.finished["exitCode"] == 0

    def ready(self) -> bool:
        if not self.running() or not self.started:
            return False
        return self.readiness.result if self.readiness.probe is not None else True


@dataclasses.dataclass(frozen=True)
class PodNetwork:
    """What kubelet's configuration says of the network: the node's pod CIDR, the cluster DNS."""

    pod_cidr: str
    cluster_dns: str
    cluster_domain: str = "cluster.local"


class ApiPod:
    def __init__(
        self, pod: dict, node: str, node_ip: str, pod_ip: str, image_map: dict, log_dir: pathlib.Path, dns: str | None
    ):
        self.pod = pod
        self.dns = dns  # the pod's resolv.conf, or None for the node's
        self.uid = pod["metadata"]["uid"]
        self.node = node
        self.node_ip = node_ip
        self.host_network = bool((pod.get("spec") or {}).get("hostNetwork"))
        self.pod_ip = node_ip if self.host_network else pod_ip
        self.pod_dir = pathlib.Path("/var/lib/kubelet/pods") / self.uid
        self.log_dir = log_dir
        spec = pod.get("spec") or {}

        def made(field: str) -> list[Container]:
            return [Container(c, image_map.get(reference_of(str(c.get("image", ""))))) for c in spec.get(field) or []]

        self.containers, self.init_containers = made("containers"), made("initContainers")
        for container in self.containers:
            container.readiness = ProbeState(container.spec.get("readinessProbe"))
            container.liveness = ProbeState(container.spec.get("livenessProbe"))
            container.startup = ProbeState(container.spec.get("startupProbe"))
        self.volumes: PodVolumes | None = None
        self.sandbox: PodSandbox | None = None
        self.setup_error: str | None = None
        self.network_error: str | None = None  # no address or resolv.conf could be given
        self.start_wall = time.time()
        self.reported: str | None = None
        self.next_report = 0.0
        self.deleting_since: float | None = None
        self.next_volume_sync = time.monotonic() + VOLUME_SYNC

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    @property
    def restart_policy(self) -> str:
        return (self.pod.get("spec") or {}).get("restartPolicy") or "Always"

    # --- what runs ---------------------------------------------------------------------------
    def environment(self, container: dict, api: NodeApi, kubernetes: tuple[str, str]) -> dict[str, str]:
        api_host, api_port = kubernetes
        namespace = self.pod["metadata"]["namespace"]
        env = {
            "PATH": DEFAULT_PATH,
            "HOSTNAME": self.node if self.host_network else self.pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": api_host,
            "KUBERNETES_SERVICE_PORT": api_port,
            "KUBERNETES_SERVICE_PORT_HTTPS": api_port,
            "KUBERNETES_PORT": f"tcp://{api_host}:{api_port}",
        }
        for source in container.get("envFrom") or []:
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            ref = source.get("configMapRef") or source.get("secretRef") or {}
            data = api.object_data(kind, namespace, ref.get("name"), bool(ref.get("optional"))) or {}
            prefix = source.get("prefix", "")
            env.update({prefix + k: v.decode(errors="replace") for k, v in data.items()})
        for item in container.get("env") or []:
            name = item["name"]
            if "valueFrom" not in item:
                env[name] = expand(str(item.get("value", "")), env)
                continue
            value_from = item["valueFrom"]
            if "fieldRef" in value_from:
                env[name] = field_value(self.pod, value_from["fieldRef"]["fieldPath"], self.pod_ip, self.node_ip)
            elif "configMapKeyRef" in value_from or "secretKeyRef" in value_from:
                kind = "ConfigMap" if "configMapKeyRef" in value_from else "Secret"
                ref = value_from.get("configMapKeyRef") or value_from.get("secretKeyRef")
                data = api.object_data(kind, namespace, ref["name"], bool(ref.get("optional"))) or {}
                if ref["key"] in data:
                    env[name] = data[ref["key"]].decode(errors="replace")
                elif not ref.get("optional"):
                    raise PodError(f"couldn't find key {ref['key']} in {kind} {namespace}/{ref['name']}")
            elif "resourceFieldRef" in value_from:
                env[name] = resource_value(container, value_from["resourceFieldRef"])
            else:
                raise PodError(f"env {name}: valueFrom {sorted(value_from)} is not supported")
        return env

    def mounts(self, container: dict) -> list[Mount]:
        assert self.volumes is not None
        out = []
        for mount in container.get("volumeMounts") or []:
            volume = self.volumes.volumes.get(mount.get("name"))
            if volume is None:
                raise PodError(f"volumeMount {mount.get('name')!r} names no volume of the pod")
            source = volume.source
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if not source.exists():
                    source.mkdir(parents=True)
            out.append(Mount(str(source), mount["mountPath"], bool(mount.get("readOnly"))))
        if self.dns is not None:
            resolv = self.pod_dir / "resolv.conf"
            if not resolv.exists():
                # kubelet makes the pod's directory whatever its volumes: a pod with none (no
                # service account token either) still gets its resolv.conf there.
                self.pod_dir.mkdir(parents=True, exist_ok=True)
                resolv.write_text(self.dns)
            out.append(Mount(str(resolv), "/etc/resolv.conf", True))
        return out


_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_QUANTITY_SUFFIX = {
    **{s: Fraction(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}  # fmt: skip


def quantity(text) -> Fraction:
    """A Kubernetes resource quantity ("512Mi", "250m", "1e3") as an exact number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise PodError(f"{text!r} is not a resource quantity")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _QUANTITY_SUFFIX[suffix]


def resource_value(container: dict, ref: dict) -> str:
    """The downward API's resourceFieldRef as kubelet writes it: the quantity divided by the divisor
    (default 1), rounded up to a whole number ("512Mi" -> "536870912"; cpu "250m" -> "1")."""
    resource = ref.get("resource", "")
    kind, _dot, name = resource.partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        # kubelet: unset limits default to the node's allocatable; the lab reports 0 (unbounded).
        return "0"
    # the API server stores an unset divisor as "0", which kubelet reads as 1
    divisor = quantity(ref.get("divisor") or "0") or Fraction(1)
    if divisor < 0:
        raise PodError(f"resourceFieldRef {resource}: divisor {ref.get('divisor')!r} must be positive")
    return str(math.ceil(quantity(value) / divisor))


class ApiPods:
    """Every mapped pod bound to this node, kept in step with the API each poll."""

    def __init__(
        self,
        kube_api,
        node: str,
        node_ip: str,
        image_map_file: pathlib.Path,
        log_dir: pathlib.Path,
        network: PodNetwork,
    ):
        self.api = NodeApi(kube_api)
        self.network = network
        self.node = node
        self.node_ip = node_ip
        self.image_map_file = image_map_file
        self.log_dir = log_dir
        # The node's pulled images: reference -> (image ID, the credentials that pulled it: hashes, "" for
        # none). Images the node was given (the image map's public references) are preloaded.
        self.pulled: dict[str, tuple[str, set[str]]] = {}
        self.pods: dict[str, ApiPod] = {}
        self.next_list = 0.0
        self.kubernetes: tuple[str, str] | None = None  # the kubernetes Service's address, once read

    def image_map(self) -> dict:
        try:
            return json.loads(self.image_map_file.read_text())
        except (OSError, ValueError):
            return {}

    # --- reconcile --------------------------------------------------------------------------
    def sync(self) -> None:
        now = time.monotonic()
        if now >= self.next_list:
            self.next_list = now + LIST_INTERVAL
            self._reconcile_list()
        for pod in list(self.pods.values()):
            self._supervise(pod, now)
            self._report(pod, now)

    def _reconcile_list(self) -> None:
        image_map = self.image_map()
        listed = {p["metadata"]["uid"]: p for p in self.api.pods(self.node) if claims(p, image_map)}
        for uid in list(self.pods):
            if uid not in listed:
                log(f"{self.pods[uid].key} is gone from the API: stopping it")
                self._teardown(self.pods.pop(uid))
        taken = {p.pod_ip for p in self.pods.values()}
        for uid, obj in listed.items():
            pod = self.pods.get(uid)
            if pod is None:
                network = self.network
                try:
                    dns = resolv_conf(obj, network.cluster_dns, network.cluster_domain)
                    host_network = (obj.get("spec") or {}).get("hostNetwork")
                    pod_ip = "" if host_network else pod_address(uid, network.pod_cidr, taken)
                    setup_error = None
                except PodError as exc:
                    dns, pod_ip, setup_error = None, "", str(exc)
                pod = ApiPod(obj, self.node, self.node_ip, pod_ip, image_map, self.log_dir, dns)
                pod.network_error = setup_error
                taken.add(pod.pod_ip)
                self.pods[uid] = pod
                log(f"{pod.key}: bound here, address {pod.pod_ip}")
            pod.pod = obj
            if obj["metadata"].get("deletionTimestamp") and pod.deleting_since is None:
                pod.deleting_since = time.monotonic()
                log(f"{pod.key}: marked for deletion")

    def _stop_pod(self, pod: ApiPod, grace: float) -> None:
        """Every container within ``grace``, then the pod's network namespace."""
        for container in [*pod.init_containers, *pod.containers]:
            self._stop(pod, container, grace)
        if pod.sandbox is not None:
            pod.sandbox.remove()

    def _teardown(self, pod: ApiPod) -> None:
        self._stop_pod(pod, MAX_GRACE)
        shutil.rmtree(pod.pod_dir, ignore_errors=True)

    def _supervise(self, pod: ApiPod, now: float) -> None:
        if pod.deleting_since is not None:
            grace = min(float(pod.pod["metadata"].get("deletionGracePeriodSeconds") or 0), MAX_GRACE)
            self._stop_pod(pod, grace)
            try:
                self.api.delete(pod.pod)
            except RuntimeError as exc:
                log(f"{pod.key}: delete failed: {exc}")
                return
            self.pods.pop(pod.uid, None)
            shutil.rmtree(pod.pod_dir, ignore_errors=True)
            log(f"{pod.key}: deleted")
            return
        if pod.network_error:
            pod.setup_error = pod.network_error
            for container in pod.containers:
                container.waiting_reason, container.waiting_message = "ContainerCreating", pod.network_error
            return
        if not pod.host_network and not (pod.sandbox is not None and pod.sandbox.alive()):
            if pod.sandbox is not None:
                # kubelet: a dead sandbox is made anew and the pod's containers restarted in it.
                log(f"{pod.key}: its network namespace is gone: making it anew")
                for container in [*pod.init_containers, *pod.containers]:
                    self._stop(pod, container, 0)
                for container in pod.init_containers:  # kubelet runs them again in a new sandbox
                    container.finished = None
            sandbox = PodSandbox(pod.uid, pod.pod_ip, pod_hostname(pod.pod))
            try:
                sandbox.create()
            except PodError as exc:
                pod.sandbox, pod.setup_error = None, str(exc)
                for container in pod.containers:
                    container.waiting_reason, container.waiting_message = "ContainerCreating", str(exc)
                return
            pod.sandbox = sandbox
            log(f"{pod.key}: network namespace held by pid {sandbox.holder.pid}, {sandbox.interface} -> {pod.pod_ip}")
        if pod.volumes is None:
            try:
                volumes = PodVolumes(self.api, pod.pod, pod.pod_dir, self._fs_group(pod))
                volumes.prepare()
                pod.volumes = volumes
                pod.setup_error = None
            except (PodError, RuntimeError, OSError, KeyError) as exc:
                pod.setup_error = str(exc)
                for container in pod.containers:
                    container.waiting_reason, container.waiting_message = "ContainerCreating", f"volumes: {exc}"
                return
        else:
            with contextlib.suppress(PodError, RuntimeError, OSError):
                pod.volumes.refresh_tokens()
            if now >= pod.next_volume_sync:
                pod.next_volume_sync = now + VOLUME_SYNC
                with contextlib.suppress(PodError, RuntimeError, OSError):
                    for name in pod.volumes.sync():
                        log(f"{pod.key}: volume {name} updated from the API")
        if not self._initialized(pod, now):
            for container in pod.containers:
                container.waiting_reason, container.waiting_message = "PodInitializing", ""
            return
        for container in pod.containers:
            self._supervise_container(pod, container, now)

    def _initialized(self, pod: ApiPod, now: float) -> bool:
        """Init containers one at a time, in order, each to a successful end before the next
        (kubelet's computeInitContainerActions); False while one runs, waits or has failed for good."""
        for container in pod.init_containers:
            if container.spec.get("restartPolicy") == "Always":
                container.waiting_reason = "CreateContainerConfigError"
                container.waiting_message = (
                    "the lab's kubelet does not run sidecar containers (init containers with restartPolicy: Always)"
                )
                return False
            if container.finished is None:
                self._supervise_container(pod, container, now, init=True)
            if not container.succeeded():
                return False
        return True

    def _pulled(self, pod: ApiPod, container: Container, now: float) -> bool:
        """kubelet's EnsureImageExists for an image the node pulls from a registry. A present image is
        used without a pull (policy IfNotPresent) only by a pod that may: 1.36's kubelet verifies
        pull credentials (KubeletEnsureSecretPulledImages, on by default since 1.35, policy
        NeverVerifyPreloadedImages), so an image pulled with credentials serves a pod that holds the
        same credentials, or one the registry accepts when kubelet pulls again with the pod's own; an
        image pulled without credentials serves every pod. A failed pull is ErrImagePull, then
        ImagePullBackOff until the back-off (10 s doubling to 300 s) ends."""
        image = str(container.spec.get("image", ""))
        if now < container.next_pull:  # after a failed pull
            container.waiting_reason, container.waiting_message = (
                "ImagePullBackOff",
                f'Back-off pulling image "{image}"',
            )
            return False
        policy = container.spec.get("imagePullPolicy") or ("Always" if image_tag(image) == "latest" else "IfNotPresent")
        credentials = docker_credentials(self._pull_secrets(pod), image_host(image))
        held = {hashlib.sha256(":".join(c).encode()).hexdigest() for c in credentials}
        present = self.pulled.get(image)
        if policy != "Always" and present and ("" in present[1] or held & present[1]):
            container.image_id = present[0]
            return True
        if policy == "Never":
            container.waiting_reason = "ErrImageNeverPull"
            container.waiting_message = f'Container image "{image}" is not present with pull policy of Never'
            return False
        try:
            container.image_id = pull_image(image, credentials, open_registry)
        except PodError as exc:
            container.pull_backoff = min(container.pull_backoff * 2, PULL_BACKOFF_MAX) or PULL_BACKOFF_INITIAL
            container.next_pull = now + container.pull_backoff
            container.waiting_reason, container.waiting_message = "ErrImagePull", str(exc)
            log(f'{pod.key}/{container.name}: Failed to pull image "{image}": {exc}')
            return False
        _old_id, pulled_with = self.pulled.get(image, ("", set()))
        self.pulled[image] = (container.image_id, pulled_with | (held or {""}))
        log(f"{pod.key}/{container.name}: pulled {image} ({container.image_id})")
        return True

    def _pull_secrets(self, pod: ApiPod) -> list[dict[str, bytes]]:
        """The data of the pod's imagePullSecrets kubelet can read (a missing one is warned about and
        the pull goes on with the others, as kubelet's does)."""
        found = []
        namespace = pod.pod["metadata"]["namespace"]
        for ref in (pod.pod.get("spec") or {}).get("imagePullSecrets") or []:
            try:
                data = self.api.object_data("Secret", namespace, ref.get("name", ""), True)
            except (PodError, RuntimeError):
                data = None
            if data is None:
                missing = ref.get("name")
                log(
                    f"{pod.key}: Unable to retrieve some image pull secrets ({missing}); "
                    "attempting to pull the image may not succeed."
                )
                continue
            found.append(data)
        return found

    def _fs_group(self, pod: ApiPod) -> int | None:
        group = ((pod.pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        return int(group) if group is not None else None

    def _supervise_container(self, pod: ApiPod, container: Container, now: float, init: bool = False) -> None:
        if container.image is None:
            container.waiting_reason = "ErrImagePull"
            container.waiting_message = (
                f"image {container.spec.get('image')!r} is not in the lab's image map (lab/images.py): "
                "only pods whose every image is mapped can run"
            )
            return
        if container.finished is not None:
            return
        if container.image.get("pull") and not container.image_id and not self._pulled(pod, container, now):
            return
        if container.process is not None:
            code = container.process.poll()
            if code is None:
                self._probe(pod, container, now)
                if now - container.started_at > BACKOFF_RESET_AFTER:
                    container.backoff = BACKOFF_INITIAL
                return
            self._exited(pod, container, code, now, init)
            return
        if now >= container.next_start:
            self._start(pod, container, now)

    def _exited(self, pod: ApiPod, container: Container, code: int, now: float, init: bool = False) -> None:
        if code < 0:
            code = 128 - code  # killed by a signal: the shell's and the runtime's 128 + signal
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": now_rfc3339(container.started_wall),
            "finishedAt": now_rfc3339(),
        }
        container.process = None
        container.started = False
        policy = pod.restart_policy
        # An init container that succeeded is done whatever the policy; a failed one is retried
        # unless the pod's policy is Never (then the pod fails).
        if policy == "Never" or (policy == "OnFailure" or init) and code == 0:
            container.finished = terminated
            log(f"{pod.key}/{container.name} exited with {code}; restartPolicy {policy}: not restarted")
            return
        container.last_terminated = terminated
        container.restarts += 1
        container.next_start = now + container.backoff
        container.waiting_reason = "CrashLoopBackOff"
        container.waiting_message = (
            f"back-off {container.backoff:.0f}s restarting failed container={container.name} pod={pod.key}"
        )
        log(f"{pod.key}/{container.name} exited with {code}; restart in {container.backoff:.0f} s")
        container.backoff = min(container.backoff * 2, BACKOFF_MAX)

    def _log_path(self, pod: ApiPod, container: Container) -> pathlib.Path:
        meta = pod.pod["metadata"]
        path = self.log_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{pod.uid}" / container.name / "0.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        link = self.log_dir / "containers" / f"{meta['name']}_{meta['namespace']}_{container.name}-{pod.uid}.log"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(path)
        return path

    def _start(self, pod: ApiPod, container: Container, now: float) -> None:
        try:
            if self.kubernetes is None:
                self.kubernetes = self.api.kubernetes_service()
            env = pod.environment(container.spec, self.api, self.kubernetes)
            argv = resolve_command(container.spec, container.image, env)
            name = pathlib.PurePosixPath(argv[0]).name
            name = (container.image.get("executables") or {}).get(name, name)  # lab/images.py Image.executables
            executable = pathlib.Path("/usr/lib/poweraware-lab/images") / name
            if not os.access(executable, os.X_OK):
                raise PodError(f'exec: "{argv[0]}": executable file not found in the lab image {executable.parent}')
            mounts = pod.mounts(container.spec)
            user = run_as(pod.pod, container.spec, container.image)
            capabilities = kept_capabilities(container.spec)
            rootfs = pod.pod_dir / "containers" / container.name / "rootfs"
            rootfs.mkdir(parents=True, exist_ok=True)
            working_dir = container.spec.get("workingDir")
            pod_ns = pod.sandbox.namespaces if pod.sandbox is not None else None
        except (PodError, RuntimeError, OSError, KeyError) as exc:
            container.waiting_reason, container.waiting_message = "CreateContainerConfigError", str(exc)
            container.next_start = now + container.backoff
            container.backoff = min(container.backoff * 2, BACKOFF_MAX)
            return
        log_path = self._log_path(pod, container)
        # the container's output only, as kubelet keeps it (kubectl logs shows this file)
        with open(log_path, "ab", buffering=0) as out:
            written = out.tell()
            try:
                container.process = subprocess.Popen(
                    [str(executable), *argv[1:]],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=container_preexec(pod_ns, str(rootfs), mounts, working_dir, user, capabilities),  # noqa: PLW1509
                )
            except (OSError, subprocess.SubprocessError) as exc:
                container.process = None
                with open(log_path, "rb") as log_file:
                    log_file.seek(written)
                    why = log_file.read().decode(errors="replace").strip()
                container.waiting_reason = "RunContainerError"
                container.waiting_message = why if why.startswith(CREATE_FAILED) else str(exc)
                container.next_start = now + container.backoff
                container.backoff = min(container.backoff * 2, BACKOFF_MAX)
                return
        container.exec_env = env  # exec probes run with the container's environment
        container.exec_mounts = (pod_ns, str(rootfs), mounts, working_dir, user, capabilities)
        container.started_at, container.started_wall = now, time.time()
        container.started = container.startup.probe is None
        container.readiness = ProbeState(container.spec.get("readinessProbe"))
        container.liveness = ProbeState(container.spec.get("livenessProbe"))
        container.startup = ProbeState(container.spec.get("startupProbe"))
        container.waiting_reason = container.waiting_message = ""
        log(f"{pod.key}/{container.name}: pid {container.process.pid}: {' '.join(argv)}")

    def _exec_probe(self, container: Container):
        def run(command: list[str], timeout: float) -> tuple[bool, str]:
            pod_ns, rootfs, mounts, working_dir, user, capabilities = container.exec_mounts
            try:
                done = subprocess.run(
                    [str(w) for w in command],
                    env=container.exec_env,
                    capture_output=True,
                    timeout=timeout,
                    check=False,
                    preexec_fn=container_preexec(pod_ns, rootfs, mounts, working_dir, user, capabilities),  # noqa: PLW1509
                )
            except (OSError, subprocess.SubprocessError) as exc:
                return False, f"exec probe failed: {exc}"
            return done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")[-300:]

        return run

    def _probe(self, pod: ApiPod, container: Container, now: float) -> None:
        spec, started = container.spec, container.started_at
        if not container.started:
            if container.startup.due(now, started):
                ok, message = run_probe(container.startup.probe, spec, pod.pod_ip, self._exec_probe(container))
                container.startup.record(ok, message, now)
                if container.startup.result:
                    container.started = True
                elif container.startup.failures >= int(container.startup.probe.get("failureThreshold", 3)):
                    self._kill_for_probe(pod, container, "Startup", message, now)
            return
        if container.liveness.due(now, started):
            ok, message = run_probe(container.liveness.probe, spec, pod.pod_ip, self._exec_probe(container))
            container.liveness.record(ok, message, now)
            if not ok and container.liveness.failures >= int(container.liveness.probe.get("failureThreshold", 3)):
                self._kill_for_probe(pod, container, "Liveness", message, now)
                return
        if container.readiness.due(now, started):
            ok, message = run_probe(container.readiness.probe, spec, pod.pod_ip, self._exec_probe(container))
            container.readiness.record(ok, message, now)

    def _kill_for_probe(self, pod: ApiPod, container: Container, kind: str, message: str, now: float) -> None:
        log(f"{pod.key}/{container.name}: {kind} probe failed ({message}): restarting it")
        grace = float((pod.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        process = container.process
        self._stop(pod, container, min(grace, MAX_GRACE))
        self._exited(pod, container, process.returncode if process else 137, now)

    def _stop(self, pod: ApiPod, container: Container, grace: float) -> None:
        process = container.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=max(grace, 0.5))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log(f"{pod.key}/{container.name}: stopped")

    # --- status ------------------------------------------------------------------------------
    @staticmethod
    def _container_status(container: Container, init: bool = False) -> dict:
        state: dict
        if container.running():
            state = {"running": {"startedAt": now_rfc3339(container.started_wall)}}
        elif container.finished is not None:
            state = {"terminated": container.finished}
        else:
            reason = container.waiting_reason or ("PodInitializing" if init else "ContainerCreating")
            waiting = {"reason": reason}
            if container.waiting_message:
                waiting["message"] = container.waiting_message
            state = {"waiting": waiting}
        entry = {
            "name": container.name,
            "image": container.spec.get("image", ""),
            "imageID": container.image_id,
            "containerID": f"lab://{container.process.pid}" if container.running() else "",
            # kubelet: an init container is ready once it has ended successfully
            "ready": container.succeeded() if init else container.ready(),
            "started": container.running() and (container.started or init),
            "restartCount": container.restarts,
            "state": state,
        }
        if container.last_terminated:
            entry["lastState"] = {"terminated": container.last_terminated}
        return entry

    def status(self, pod: ApiPod) -> dict:
        statuses = [self._container_status(c) for c in pod.containers]
        init_statuses = [self._container_status(c, init=True) for c in pod.init_containers]
        initialized = all(s["ready"] for s in init_statuses)
        ready = initialized and bool(statuses) and all(s["ready"] for s in statuses)
        finished = [c.finished for c in pod.containers]
        if any(c.finished is not None and not c.succeeded() for c in pod.init_containers):
            phase = "Failed"  # restartPolicy Never: a failed init container fails the pod
        elif not initialized:
            phase = "Pending"
        elif finished and all(f is not None for f in finished):
            phase = "Succeeded" if all(f["exitCode"] == 0 for f in finished) else "Failed"
        elif any(c.running() or c.finished is not None for c in pod.containers):
            phase = "Running"
        else:
            phase = "Pending"
        transition = now_rfc3339(pod.start_wall)

        def condition(kind: str, value: bool) -> dict:
            return {"type": kind, "status": "True" if value else "False", "lastTransitionTime": transition}

        status = {
            "phase": phase,
            "conditions": [
                condition("PodReadyToStartContainers", pod.volumes is not None),
                condition("Initialized", initialized),
                condition("Ready", ready),
                condition("ContainersReady", ready),
                condition("PodScheduled", True),
            ],
            "hostIP": self.node_ip,
            "hostIPs": [{"ip": self.node_ip}],
            "podIP": pod.pod_ip,
            "podIPs": [{"ip": pod.pod_ip}],
            "startTime": now_rfc3339(pod.start_wall),
            "containerStatuses": statuses,
        }
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        if pod.setup_error:
            status["message"] = pod.setup_error
        return status

    def _report(self, pod: ApiPod, now: float) -> None:
        if pod.uid not in self.pods:
            return
        status = self.status(pod)
        # lastTransitionTime aside, report what changed at once and everything every STATUS_RESYNC.
        fingerprint = json.dumps(status, sort_keys=True)
        if fingerprint == pod.reported and now < pod.next_report:
            return
        try:
            self.api.patch_status(pod.pod, status)
        except RuntimeError as exc:
            log(f"{pod.key}: status not updated: {exc}")
            return
        pod.reported = fingerprint
        pod.next_report = now + STATUS_RESYNC

    def stop_all(self) -> None:
        for pod in self.pods.values():
            self._stop_pod(pod, MAX_GRACE)

    def summary(self) -> dict:
        return {
            pod.key: {
                "uid": pod.uid,
                "podIP": pod.pod_ip,
                "containers": {
                    c.name: {
                        "pid": c.process.pid if c.running() else None,
                        "ready": c.ready(),
                        "restarts": c.restarts,
                        "waiting": c.waiting_reason if not c.running() else None,
                        "message": c.waiting_message or None,
                    }
                    for c in pod.containers
                },
            }
            for pod in self.pods.values()
        }
