"""A small kubelet-like static-pod runner for one simulated node of the lab.

It watches ``<node-root>/etc/kubernetes/manifests`` the way kubelet's file source does
(pkg/kubelet/config/file.go): every regular file whose name does not start with ``.`` is a pod
manifest, whatever its extension. So a backup such as ``kube-scheduler.yaml.bak`` left there is
run too, exactly the mistake a real node punishes. Each container of each pod runs as a process:

- the command's first word is looked up in ``--bin-dir`` (there are no images here);
- every hostPath volume is the same path under the node root, created for ``*OrCreate`` types and
  required otherwise; a flag value (``--flag=VALUE`` or a bare argument) that is an absolute path
  at or under a container ``mountPath`` is rewritten to the node-root path;
- a YAML file named by such a flag (``--config``, a kubeconfig) that itself holds paths under a
  mountPath is translated into a copy under ``--run-dir`` with those paths rewritten, because a
  process here cannot see the container's view of the file system;
- the process runs with the user, groups and capabilities of the container's ``securityContext``,
  by the rules the API pods follow (kubelet_pods.run_as, kept_capabilities): kubeadm's pods set none
  and run as root, our scheduler extender's runs as its uid with no capability;
- the file is polled every ``--poll-interval`` seconds (1 s): when its content hash changes the old
  process is stopped (SIGTERM, SIGKILL after the grace period) and the new one started at once;
  content that does not parse must stay broken for two polls before the pod is stopped, so a
  non-atomic writer is not punished for a half-written file; a removed manifest stops its pod;
- a process that exits is restarted with a back-off (1 s doubling to 20 s, reset after 60 s up);
- output goes to ``<log-dir>/pods/<ns>_<pod>_<uid>/<container>/0.log``, appended, the container's output only
  (each start is in the runner's own log);
- ``--status-file`` (JSON, written atomically) tells which pid runs which manifest hash;
- with ``--kubeconfig`` and ``--node-name`` it keeps a mirror pod per static pod in the API, as
  kubelet does (``kube-system/kube-scheduler-<node>``, annotation ``kubernetes.io/config.mirror``),
  Running while the process runs and Ready while the manifest's readinessProbe answers.

It only needs the standard library and PyYAML; ``lab/cluster.py`` starts it, one per node that has
static pods (the control-plane node), in its own process group with the pods' processes.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import ctypes
import dataclasses
import hashlib
import json
import os
import pathlib
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

try:  # on a node the runner is a script next to kubelet_pods.py; on the controller, lab.kubelet
    import kubelet_api
    import kubelet_pods
    import kubelet_stats
except ImportError:  # pragma: no cover - depends on how it is started
    from lab import kubelet_api, kubelet_pods, kubelet_stats

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
    # (uid, gid, groups) of its securityContext (kubelet_pods.run_as), None: root, as kubeadm's pods run
    user: tuple | None = None
    # the capabilities it keeps (kubelet_pods.kept_capabilities), None: the runner's own
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
            user = kubelet_pods.run_as(pod, container)
            capabilities = kubelet_pods.kept_capabilities(container)
        except kubelet_pods.PodError as exc:
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


def _die_with_parent() -> None:
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


class Runner:
    def __init__(self, args: argparse.Namespace):
        self.node_root: pathlib.Path = args.node_root.resolve()
        self.manifests: pathlib.Path = (args.manifests or self.node_root / "etc/kubernetes/manifests").resolve()
        self.bin_dir: pathlib.Path = args.bin_dir.resolve()
        self.log_dir: pathlib.Path = args.log_dir.resolve()
        self.run_dir: pathlib.Path = args.run_dir.resolve()
        self.status_file: pathlib.Path | None = args.status_file
        self.poll_interval: float = args.poll_interval
        self.mirrors: MirrorPods | None = None
        self.node_name: str | None = args.node_name
        if args.kubeconfig and args.node_name:
            self.mirrors = MirrorPods(args.kubeconfig, args.node_name, args.node_ip)
        # Pods the scheduler binds here whose image the lab knows (lab/kubelet_pods.py).
        self.api_pods: kubelet_pods.ApiPods | None = None
        self.network = kubelet_pods.PodNetwork(args.pod_cidr, args.cluster_dns, args.cluster_domain)
        if self.mirrors is not None and args.image_map:
            self.api_pods = kubelet_pods.ApiPods(
                self.mirrors.api, args.node_name, args.node_ip, args.image_map, self.log_dir, self.network
            )
        self.pods: dict[pathlib.Path, RunningPod] = {}
        self.stopping = False
        # The kubelet API on the node's address (kubectl logs through kube-apiserver).
        self.kubelet_api: kubelet_api.KubeletApi | None = None
        if self.mirrors is not None and args.tls_cert_file and args.tls_private_key_file and args.client_ca_file:
            self.kubelet_api = kubelet_api.KubeletApi(
                args.node_name,
                args.node_ip,
                args.tls_cert_file,
                args.tls_private_key_file,
                args.client_ca_file,
                self.mirrors.api,
                self.log_dir,
                self,
                kubelet_api.StreamingRuntime(args.streaming_server or self.bin_dir / "cri-streaming"),
                kubelet_stats.Stats(args.node_name),
            )

    def running_pods(self) -> list[dict]:
        """The pods this kubelet runs, as its /pods lists them: the mapped API pods as the API has
        them, and each static pod's manifest under its mirror pod's name."""
        pods = [pod.pod for pod in list(self.api_pods.pods.values())] if self.api_pods is not None else []
        for running in list(self.pods.values()):
            if running.spec is not None:
                manifest = copy.deepcopy(running.spec.manifest)
                meta = manifest.setdefault("metadata", {})
                meta["name"] = self.mirror_name(running.spec)
                meta["namespace"] = running.spec.namespace
                manifest.setdefault("spec", {})["nodeName"] = self.node_name
                pods.append(manifest)
        return pods

    def mirror_name(self, spec: PodSpec) -> str:
        """A static pod's name in the API: its manifest's name and the node's, as kubelet names it."""
        return f"{spec.name}-{self.node_name}" if self.node_name else spec.name

    def pod_runs(self) -> list[kubelet_stats.PodRun]:
        """What the runtime runs, for exec, attach, port-forward and the resource statistics: each
        pod's uid, its sandbox (the node's own network namespace for host-network and static pods)
        and its running containers' processes (``lab://<pid>``, as the pod status reports them).
        Called from the API's threads: it reads ``returncode`` and leaves reaping (poll) to the
        runner's loop."""
        runs = []
        if self.api_pods is not None:
            for pod in list(self.api_pods.pods.values()):
                meta = pod.pod["metadata"]
                if pod.host_network:
                    sandbox = os.getpid()
                else:
                    holder = pod.sandbox.holder if pod.sandbox is not None else None
                    sandbox = holder.pid if holder is not None and holder.returncode is None else None
                containers = [
                    kubelet_stats.ContainerRun(
                        c.name,
                        c.process.pid,
                        c.started_wall,
                        str(c.spec.get("image", "")),
                        kubelet_pods.stress_arguments(c.spec, c.image, c.exec_env),
                    )
                    for c in list(pod.containers)
                    if c.process is not None and c.process.returncode is None
                ]
                runs.append(
                    kubelet_stats.PodRun(meta["namespace"], meta["name"], pod.uid, pod.start_wall, containers, sandbox)
                )
        for running in list(self.pods.values()):
            spec = running.spec
            if spec is None:
                continue
            containers = [
                kubelet_stats.ContainerRun(c.name, p.pid, running.started_wall, str(m.get("image", "")))
                for c, p, m in zip(
                    spec.containers,
                    running.processes,
                    (spec.manifest.get("spec") or {}).get("containers") or [{}] * len(spec.containers),
                    strict=False,
                )
                if p.returncode is None
            ]
            uid = running.content_hash[:32]
            runs.append(
                kubelet_stats.PodRun(
                    spec.namespace, self.mirror_name(spec), uid, running.started_wall, containers, os.getpid()
                )
            )
        return runs

    # --- process control --------------------------------------------------------------------
    def _container_log(self, pod: RunningPod, container: str) -> pathlib.Path:
        """Where kubelet keeps a container's output: /var/log/pods/<ns>_<pod>_<uid>/<container>/0.log,
        linked from /var/log/containers/<pod>_<ns>_<container>-<id>.log (what log shippers and the
        extender role's rollback read)."""
        assert pod.spec is not None
        name = self.mirror_name(pod.spec)
        uid = pod.content_hash[:32]
        log_path = self.log_dir / "pods" / f"{pod.spec.namespace}_{name}_{uid}" / container / "0.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        link = self.log_dir / "containers" / f"{name}_{pod.spec.namespace}_{container}-{pod.content_hash[:64]}.log"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            for stale in link.parent.glob(f"{name}_{pod.spec.namespace}_{container}-*.log"):
                stale.unlink()
            link.symlink_to(log_path)
        return log_path

    def _start(self, pod: RunningPod) -> None:
        assert pod.spec is not None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        pod.processes = []
        for container in pod.spec.containers:
            log_path = self._container_log(pod, container.name)
            # The container's output only, as kubelet keeps it (kubectl logs shows this file); the
            # start is in the runner's own log.
            with open(log_path, "ab", buffering=0) as out:
                env = dict(os.environ)
                env.update(container.env)
                proc = subprocess.Popen(
                    container.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=container.cwd,
                    env=env,
                    preexec_fn=self._preexec(pod, container),  # noqa: PLW1509 - single-threaded runner
                )
            pod.processes.append(proc)
            log(
                f"started {pod.spec.name}/{container.name} pid {proc.pid} from {pod.manifest.name} "
                f"sha256:{pod.content_hash[:12]}: {' '.join(container.argv)}"
            )
        pod.started_at = time.monotonic()
        pod.started_wall = time.time()
        pod.ready = False

    def _preexec(self, pod: RunningPod, container: ContainerSpec):
        """What runs in the container's process before exec, in the order it must: kubelet's DNS for
        a static pod (``ClusterFirstWithHostNet`` gets the cluster DNS in a resolv.conf of its own,
        as kube-scheduler reaching an extender by its Service name needs; every other policy of a
        host-network pod keeps the node's file: both need root), then the capabilities it keeps
        (dropping them needs CAP_SETPCAP), then its user and groups, then the parent-death signal
        (a change of uid clears it, prctl(2))."""
        assert pod.spec is not None
        manifest = dict(pod.spec.manifest)
        manifest.setdefault("metadata", {}).setdefault("namespace", pod.spec.namespace)
        text = kubelet_pods.resolv_conf(manifest, self.network.cluster_dns, self.network.cluster_domain)
        resolv = None
        if text is not None:
            resolv = self.run_dir / f"{pod.spec.namespace}_{pod.spec.name}.resolv.conf"
            resolv.parent.mkdir(parents=True, exist_ok=True)
            resolv.write_text(text)

        def run() -> None:
            if resolv is not None:
                kubelet_pods.enter_host_network_pod(str(resolv))
            if container.capabilities is not None:
                kubelet_pods.limit_capabilities(container.capabilities)
            if container.user is not None:
                uid, gid, groups = container.user
                os.setgroups(list(groups))
                os.setgid(gid)
                os.setuid(uid)
            _die_with_parent()

        return run

    def _stop(self, pod: RunningPod) -> None:
        if not pod.processes:
            return
        grace = pod.spec.grace if pod.spec else MAX_GRACE
        for proc in pod.processes:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + grace
        for proc in pod.processes:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"pid {proc.pid} ignored SIGTERM for {grace:.0f} s: killing it")
                proc.kill()
                proc.wait()
        log(f"stopped {pod.spec.name if pod.spec else pod.manifest.name}")
        pod.processes = []
        pod.ready = False

    # --- manifest handling ------------------------------------------------------------------
    def _manifest_files(self) -> list[pathlib.Path]:
        if not self.manifests.is_dir():
            return []
        # kubelet: every regular, non-hidden file is a manifest, in name order.
        return sorted(p for p in self.manifests.iterdir() if not p.name.startswith(".") and p.is_file())

    def _load(self, path: pathlib.Path, content: bytes, content_hash: str) -> RunningPod:
        pod = RunningPod(path, content_hash)
        try:
            pod.spec = parse_manifest(content, self.node_root, self.bin_dir, self.run_dir)
        except StaticPodError as exc:
            pod.error = str(exc)
        except (KeyError, TypeError, AttributeError, OSError) as exc:
            pod.error = f"malformed manifest: {exc!r}"
        return pod

    def sync(self) -> None:
        seen: set[pathlib.Path] = set()
        names: dict[tuple[str, str], pathlib.Path] = {}
        for path in self._manifest_files():
            try:
                content = path.read_bytes()
            except OSError:
                continue  # removed between listing and reading
            seen.add(path)
            content_hash = hashlib.sha256(content).hexdigest()
            current = self.pods.get(path)
            if current is not None and current.content_hash == content_hash:
                continue
            candidate = self._load(path, content, content_hash)
            if candidate.error and current is not None and current.spec is not None and current.invalid_polls < 1:
                # Possibly a half-written file: give the writer one more poll before acting.
                current.invalid_polls += 1
                continue
            if current is not None:
                log(f"{path.name} changed (sha256:{content_hash[:12]}): restarting")
                self._stop(current)
            if candidate.error:
                log(f"{path.name}: {candidate.error}")
            self.pods[path] = candidate
        for path in list(self.pods):
            if path not in seen:
                log(f"{path.name} removed: stopping its pod")
                self._stop(self.pods.pop(path))
        now = time.monotonic()
        for path, pod in sorted(self.pods.items()):
            if pod.spec is None:
                continue
            key = (pod.spec.namespace, pod.spec.name)
            if key in names and names[key] != path:
                pod.error = f"duplicate pod {key[0]}/{key[1]}: already defined by {names[key].name}"
                self._stop(pod)
                continue
            names[key] = path
            pod.error = None
            self._supervise(pod, now)
            pod.ready = bool(pod.processes) and probe_ready(pod.spec.manifest)
        if self.mirrors is not None:
            try:
                self.mirrors.sync(list(self.pods.values()))
            except Exception as exc:  # noqa: BLE001 - the API may be away; the pods must keep running
                log(f"mirror pods not updated: {exc!r}")
                self.mirrors.reported.clear()
        if self.api_pods is not None:
            try:
                self.api_pods.sync()
            except Exception as exc:  # noqa: BLE001 - the API may be away; running pods keep running
                log(f"pods bound here not synced: {exc!r}")

    def _supervise(self, pod: RunningPod, now: float) -> None:
        if pod.processes:
            exited = [p for p in pod.processes if p.poll() is not None]
            if not exited:
                if now - pod.started_at > BACKOFF_RESET_AFTER:
                    pod.backoff = BACKOFF_INITIAL
                return
            pod.last_exit = exited[0].returncode
            log(f"{pod.spec.name}: pid {exited[0].pid} exited with {pod.last_exit}; restart in {pod.backoff:.0f} s")
            self._stop(pod)
            pod.next_start = now + pod.backoff
            pod.backoff = min(pod.backoff * 2, BACKOFF_MAX)
            pod.restarts += 1
            return
        if now >= pod.next_start:
            try:
                self._start(pod)
            except OSError as exc:
                pod.error = f"cannot start: {exc}"
                pod.next_start = now + pod.backoff
                pod.backoff = min(pod.backoff * 2, BACKOFF_MAX)

    def write_status(self) -> None:
        if self.status_file is None:
            return
        pods = {}
        for path, pod in sorted(self.pods.items()):
            running = [p.pid for p in pod.processes if p.poll() is None]
            pods[path.name] = {
                "pod": f"{pod.spec.namespace}/{pod.spec.name}" if pod.spec else None,
                "sha256": pod.content_hash,
                "pids": running,
                "state": "running" if running else ("error" if pod.error else "waiting"),
                "ready": bool(running) and pod.ready,
                "error": pod.error,
                "restarts": pod.restarts,
                "last_exit": pod.last_exit,
                "argv": pod.spec.containers[0].argv if pod.spec else None,
            }
        status = {"runner_pid": os.getpid(), "manifests": str(self.manifests), "updated": time.time(), "pods": pods}
        if self.api_pods is not None:
            status["api_pods"] = self.api_pods.summary()
        atomic_write(self.status_file, json.dumps(status, indent=2) + "\n")

    def run(self) -> int:
        log(f"watching {self.manifests} every {self.poll_interval:g} s (node root {self.node_root})")

        def request_stop(signum, _frame):
            self.stopping = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        if self.kubelet_api is not None:
            self.kubelet_api.start()
            log(f"kubelet API on https://{self.kubelet_api.server.server_address[0]}:{kubelet_api.PORT}")
        while not self.stopping:
            self.sync()
            self.write_status()
            time.sleep(self.poll_interval)
        if self.kubelet_api is not None:
            self.kubelet_api.stop()
        for pod in self.pods.values():
            self._stop(pod)
        self.pods.clear()
        if self.api_pods is not None:
            self.api_pods.stop_all()
        self.write_status()
        log("stopped")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-root", type=pathlib.Path, required=True)
    parser.add_argument("--manifests", type=pathlib.Path, help="default: NODE_ROOT/etc/kubernetes/manifests")
    parser.add_argument("--bin-dir", type=pathlib.Path, required=True)
    parser.add_argument("--log-dir", type=pathlib.Path, required=True)
    parser.add_argument("--run-dir", type=pathlib.Path, required=True, help="translated config copies")
    parser.add_argument("--status-file", type=pathlib.Path)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--kubeconfig", type=pathlib.Path, help="keep mirror pods in this cluster (with --node-name)")
    parser.add_argument("--node-name", help="the node the mirror pods are bound to")
    parser.add_argument(
        "--node-ip", default="127.0.0.1", help="the node's address (hostIP, and podIP of host-network pods)"
    )
    parser.add_argument(
        "--image-map", type=pathlib.Path, help="run the pods bound to --node-name whose image this map knows"
    )
    parser.add_argument("--pod-cidr", default="10.244.0.0/24", help="the node's pod addresses (an IPv4 /24)")
    parser.add_argument("--cluster-dns", default="10.96.0.10", help="kubelet's clusterDNS")
    parser.add_argument("--cluster-domain", default="cluster.local", help="kubelet's clusterDomain")
    parser.add_argument("--tls-cert-file", type=pathlib.Path, help="the kubelet API's serving certificate")
    parser.add_argument("--tls-private-key-file", type=pathlib.Path, help="its key")
    parser.add_argument("--client-ca-file", type=pathlib.Path, help="the CA of the client certificates it accepts")
    parser.add_argument(
        "--streaming-server",
        type=pathlib.Path,
        help="the runtime's streaming server for exec, attach and port-forward (default: BIN_DIR/cri-streaming)",
    )
    return Runner(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
