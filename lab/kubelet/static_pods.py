"""The node's static pods: how a manifest of ``<node-root>/etc/kubernetes/manifests`` becomes
processes, and the mirror pods kubelet keeps for them in the API (main.py's Runner watches the
directory, starts, restarts and stops the processes). Each container of each pod runs as a process:

- the command's first word is looked up in ``--bin-dir`` (there are no images here);
- every hostPath volume is the same path under the node root, created for ``*OrCreate`` types and
  required otherwise; a flag value (``--flag=VALUE`` or a bare argument) that is an absolute path
  at or under a container ``mountPath`` is rewritten to the node-root path;
- a YAML file named by such a flag (``--config``, a kubeconfig) that itself holds paths under a
  mountPath is translated into a copy under ``--run-dir`` with those paths rewritten, because a
  process here cannot see the container's view of the file system;
- the process runs with the user, groups and capabilities of the container's ``securityContext``,
  by the rules the API pods follow (runtime.run_as, kept_capabilities): kubeadm's pods set none
  and run as root, our scheduler extender's runs as its uid with no capability;
- with ``--kubeconfig`` and ``--node-name`` it keeps a mirror pod per static pod in the API, as
  kubelet does (``kube-system/kube-scheduler-<node>``, annotation ``kubernetes.io/config.mirror``),
  Running while the process runs and Ready while the manifest's readinessProbe answers.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import dataclasses
import json
import os
import pathlib
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import yaml

from .common import PodError
from .runtime import kept_capabilities, run_as

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 20.0
BACKOFF_RESET_AFTER = 60.0
MAX_GRACE = 10.0  # cap on terminationGracePeriodSeconds (default 30) so a restart stays quick
TRANSLATE_MAX_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} static-pods: {message}", flush=True)


def atomic_write(path: pathlib.Path, data: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


class StaticPodError(ValueError):
    """The manifest cannot be run as it is; the message says why."""


@dataclasses.dataclass
class ContainerSpec:
    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: pathlib.Path | None
    # (uid, gid, groups) of its securityContext (runtime.run_as), None: root, as kubeadm's pods run
    user: tuple | None = None
    # the capabilities it keeps (runtime.kept_capabilities), None: the runner's own
    capabilities: frozenset[int] | None = None


@dataclasses.dataclass
class PodSpec:
    name: str
    namespace: str
    containers: list[ContainerSpec]
    grace: float
    manifest: dict = dataclasses.field(default_factory=dict)


class PathMapper:
    """Maps container paths to node-root paths through the pod's hostPath volume mounts."""

    def __init__(self, node_root: pathlib.Path, mounts: list[tuple[str, str]]):
        self.node_root = node_root
        # Longest mount path first, so /etc/kubernetes/pki wins over /etc/kubernetes.
        self.mounts = sorted(mounts, key=lambda m: len(m[0]), reverse=True)

    def host_path(self, host_path: str) -> pathlib.Path:
        return self.node_root / host_path.lstrip("/")

    def map(self, value: str) -> str | None:
        """The node-root path for a container path under a mount, else None."""
        if not value.startswith("/"):
            return None
        for mount_path, host_path in self.mounts:
            if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
                rest = value[len(mount_path.rstrip("/")) :].lstrip("/")
                target = self.host_path(host_path)
                return str(target / rest) if rest else str(target)
        return None


def _translate_tree(node, mapper: PathMapper) -> tuple[object, bool]:
    if isinstance(node, dict):
        changed = False
        out = {}
        for key, value in node.items():
            out[key], sub = _translate_tree(value, mapper)
            changed |= sub
        return out, changed
    if isinstance(node, list):
        items = [_translate_tree(v, mapper) for v in node]
        return [value for value, _changed in items], any(changed for _value, changed in items)
    if isinstance(node, str):
        mapped = mapper.map(node)
        if mapped is not None and mapped != node:
            return mapped, True
    return node, False


def translate_file(path: pathlib.Path, mapper: PathMapper, run_dir: pathlib.Path) -> pathlib.Path:
    """A copy of a YAML config file with its container paths rewritten, or the file itself."""
    try:
        if not path.is_file() or path.stat().st_size > TRANSLATE_MAX_BYTES:
            return path
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return path  # not a YAML document (a certificate, a binary): used as it is
    if not isinstance(data, dict):
        return path
    translated, changed = _translate_tree(data, mapper)
    if not changed:
        return path
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = run_dir / path.name
    # Copies of kubeconfigs may hold keys: keep them private.
    atomic_write(target, yaml.safe_dump(translated, sort_keys=False), 0o600)
    return target


def parse_manifest(content: bytes, node_root: pathlib.Path, bin_dir: pathlib.Path, run_dir: pathlib.Path) -> PodSpec:
    try:
        pod = yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise StaticPodError(f"not YAML: {exc}") from exc
    if not isinstance(pod, dict) or pod.get("kind") != "Pod" or pod.get("apiVersion") != "v1":
        raise StaticPodError("not a v1 Pod")
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = meta.get("name")
    if not name or not spec.get("containers"):
        raise StaticPodError("a Pod needs metadata.name and spec.containers")
    volumes = {}
    for volume in spec.get("volumes") or []:
        host_path = volume.get("hostPath")
        if host_path is None:
            raise StaticPodError(f"volume {volume.get('name')!r}: only hostPath volumes can be run here")
        volumes[volume.get("name")] = host_path
    containers = []
    for container in spec["containers"]:
        mounts = []
        for mount in container.get("volumeMounts") or []:
            host_path = volumes.get(mount.get("name"))
            if host_path is None:
                raise StaticPodError(f"volumeMount {mount.get('name')!r} has no volume")
            mounts.append((mount["mountPath"], host_path["path"]))
            _prepare_host_path(node_root, host_path)
        mapper = PathMapper(node_root, mounts)
        command = [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]
        if not command:
            raise StaticPodError(f"container {container.get('name')!r}: no command (images cannot run here)")
        executable = bin_dir / pathlib.PurePosixPath(command[0]).name
        if not os.access(executable, os.X_OK):
            raise StaticPodError(f"container {container.get('name')!r}: no {executable.name} in {bin_dir}")
        pod_run_dir = run_dir / name / container.get("name", "container")
        argv = [str(executable)] + [_map_argument(arg, mapper, pod_run_dir) for arg in command[1:]]
        env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "name" in e}
        working_dir = container.get("workingDir")
        cwd = pathlib.Path(mapper.map(working_dir) or working_dir) if working_dir else None
        try:
            # the user and capabilities kubelet and containerd give the container (no image USER:
            # the images static pods run here, kubeadm's and a stock Python, have none)
            user = run_as(pod, container)
            capabilities = kept_capabilities(container)
        except PodError as exc:
            raise StaticPodError(f"container {container.get('name')!r}: {exc}") from exc
        containers.append(ContainerSpec(container.get("name", "container"), argv, env, cwd, user, capabilities))
    grace = float(spec.get("terminationGracePeriodSeconds", 30))
    return PodSpec(name, meta.get("namespace", "default"), containers, min(grace, MAX_GRACE), pod)


def _prepare_host_path(node_root: pathlib.Path, host_path: dict) -> None:
    path = node_root / str(host_path["path"]).lstrip("/")
    kind = host_path.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    elif kind == "Directory" and not path.is_dir():
        raise StaticPodError(f"hostPath {host_path['path']} (type Directory) does not exist under the node root")
    elif kind == "File" and not path.is_file():
        raise StaticPodError(f"hostPath {host_path['path']} (type File) does not exist under the node root")


def _map_argument(arg: str, mapper: PathMapper, run_dir: pathlib.Path) -> str:
    prefix, value = "", arg
    if arg.startswith("-") and "=" in arg:
        prefix, value = arg.split("=", 1)
        prefix += "="
    mapped = mapper.map(value)
    if mapped is None:
        return arg
    return prefix + str(translate_file(pathlib.Path(mapped), mapper, run_dir))


def die_with_parent() -> None:
    # The runner may be killed with SIGKILL; its pods must not outlive it.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def probe_ready(manifest: dict, timeout: float = 1.0) -> bool:
    """The first container's readinessProbe (httpGet), as kubelet would run it; no probe: ready."""
    container = (manifest.get("spec", {}).get("containers") or [{}])[0]
    http_get = (container.get("readinessProbe") or {}).get("httpGet")
    if not http_get:
        return True
    port = http_get.get("port")
    if isinstance(port, str) and not port.isdigit():
        named = [p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == port]
        if not named:
            return False
        port = named[0]
    scheme = str(http_get.get("scheme", "HTTP")).lower()
    url = f"{scheme}://{http_get.get('host', '127.0.0.1')}:{port}{http_get.get('path', '/')}"
    context = ssl.create_default_context()
    # kubelet does not verify a probed server's certificate either.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:  # noqa: S310 - node-local probe
            return 200 <= resp.status < 400
    except (OSError, ValueError):
        return False


class KubeApi:
    """Just enough of the Kubernetes REST API for mirror pods, with the node's kubelet credentials
    (the kubeconfig kubeadm writes: ``/etc/kubernetes/kubelet.conf``). Only the standard library:
    the runner uses the node's system Python, which has no Kubernetes client."""

    def __init__(self, kubeconfig: pathlib.Path):
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        self.context = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            self.context.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif "certificate-authority" in cluster:
            self.context.load_verify_locations(cafile=cluster["certificate-authority"])
        cert, key = user.get("client-certificate"), user.get("client-key")
        if "client-certificate-data" in user:
            # ssl wants files: keep the decoded pair in a private directory of the runner.
            private = pathlib.Path(tempfile.mkdtemp(prefix="kubelet-client-"))
            cert, key = private / "client.crt", private / "client.key"
            atomic_write(cert, base64.b64decode(user["client-certificate-data"]).decode(), 0o600)
            atomic_write(key, base64.b64decode(user["client-key-data"]).decode(), 0o600)
        self.context.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: dict | None = None, missing_ok: bool = False, patch: bool = False):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)  # noqa: S310 - https only
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/merge-patch+json" if patch else "application/json")
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=10) as resp:  # noqa: S310
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and missing_ok:
                return None
            raise RuntimeError(f"{method} {path}: {exc.code} {exc.read()[:300]!r}") from exc


class MirrorPods:
    """Mirror pods in the API for the node's static pods, as kubelet keeps them: named
    ``<pod>-<node>``, annotated ``kubernetes.io/config.mirror``, owned by the Node, status from the
    process and the readiness probe. kwok leaves them alone (lab/kwok-stages/pod-ready.yaml)."""

    RESYNC = 10.0

    def __init__(self, kubeconfig: pathlib.Path, node_name: str, node_ip: str):
        self.api = KubeApi(kubeconfig)
        self.node = node_name
        self.node_ip = node_ip
        self.reported: dict[tuple[str, str], tuple] = {}
        self.next_resync = 0.0

    def _node_uid(self) -> str:
        return self.api.request("GET", f"/api/v1/nodes/{self.node}")["metadata"]["uid"]

    def _body(self, pod: RunningPod) -> dict:
        manifest = pod.spec.manifest
        meta = dict(manifest.get("metadata") or {})
        annotations = dict(meta.get("annotations") or {})
        annotations.update(
            {
                "kubernetes.io/config.hash": pod.content_hash[:32],
                "kubernetes.io/config.mirror": pod.content_hash[:32],
                "kubernetes.io/config.seen": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()),
                "kubernetes.io/config.source": "file",
            }
        )
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self._node_uid(), "controller": True}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{pod.spec.name}-{self.node}",
                "namespace": pod.spec.namespace,
                "labels": meta.get("labels") or {},
                "annotations": annotations,
                "ownerReferences": [owner],
            },
            "spec": {**(manifest.get("spec") or {}), "nodeName": self.node},
        }

    def _status(self, pod: RunningPod, ready: bool) -> dict:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        running = bool(pod.processes) and all(p.poll() is None for p in pod.processes)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pod.started_wall or time.time()))

        def condition(kind: str, value: bool) -> dict:
            return {"type": kind, "status": "True" if value else "False", "lastTransitionTime": now}

        containers = (pod.spec.manifest.get("spec") or {}).get("containers") or []
        return {
            "status": {
                "phase": "Running" if running else "Pending",
                "conditions": [
                    condition("PodReadyToStartContainers", running),
                    condition("Initialized", True),
                    condition("Ready", running and ready),
                    condition("ContainersReady", running and ready),
                    condition("PodScheduled", True),
                ],
                # Static pods here use the host network: their address is the node's.
                "hostIP": self.node_ip,
                "hostIPs": [{"ip": self.node_ip}],
                "podIP": self.node_ip,
                "podIPs": [{"ip": self.node_ip}],
                "startTime": started,
                "containerStatuses": [
                    {
                        "name": c.get("name", "container"),
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": running and ready,
                        "started": running,
                        "restartCount": pod.restarts,
                        "state": {"running": {"startedAt": started}}
                        if running
                        else {"waiting": {"reason": "CrashLoopBackOff" if pod.restarts else "ContainerCreating"}},
                    }
                    for c in containers
                ],
            }
        }

    def _apply(self, pod: RunningPod, ready: bool) -> None:
        name = f"{pod.spec.name}-{self.node}"
        path = f"/api/v1/namespaces/{pod.spec.namespace}/pods"
        # As kubelet does: list the pods bound to this node (the Node authorizer lets a node read
        # only pods bound to it, so a GET of a mirror pod not created yet is forbidden, not 404).
        bound = self.api.request("GET", f"{path}?fieldSelector=spec.nodeName%3D{self.node}")["items"]
        current = next((p for p in bound if p["metadata"]["name"] == name), None)
        mirror_hash = pod.content_hash[:32]
        if (
            current is not None
            and (current["metadata"].get("annotations") or {}).get("kubernetes.io/config.mirror") != mirror_hash
        ):
            # Like kubelet: a changed static pod gets a new mirror pod.
            self.api.request("DELETE", f"{path}/{name}", {"gracePeriodSeconds": 0}, missing_ok=True)
            current = None
        if current is None:
            self.api.request("POST", path, self._body(pod))
        self.api.request("PATCH", f"{path}/{name}/status", self._status(pod, ready), patch=True)

    def _delete(self, key: tuple[str, str]) -> None:
        self.api.request(
            "DELETE", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}", {"gracePeriodSeconds": 0}, missing_ok=True
        )

    def sync(self, pods: list[RunningPod]) -> None:
        now = time.monotonic()
        resync = now >= self.next_resync
        desired = {}
        for pod in pods:
            if pod.spec is None or pod.error:
                continue
            key = (pod.spec.namespace, f"{pod.spec.name}-{self.node}")
            state = (pod.content_hash, tuple(p.pid for p in pod.processes if p.poll() is None), pod.ready)
            desired[key] = state
            if resync or self.reported.get(key) != state:
                self._apply(pod, pod.ready)
                self.reported[key] = state
        for key in list(self.reported):
            if key not in desired:
                self._delete(key)
                del self.reported[key]
        if resync:
            self.next_resync = now + self.RESYNC


@dataclasses.dataclass
class RunningPod:
    manifest: pathlib.Path
    content_hash: str
    spec: PodSpec | None = None
    processes: list[subprocess.Popen] = dataclasses.field(default_factory=list)
    started_at: float = 0.0
    started_wall: float = 0.0
    ready: bool = False
    restarts: int = 0
    next_start: float = 0.0
    backoff: float = BACKOFF_INITIAL
    error: str | None = None
    last_exit: int | None = None
    invalid_polls: int = 0
