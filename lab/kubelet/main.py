"""A small kubelet-like static-pod runner for one simulated node of the lab.

It watches ``<node-root>/etc/kubernetes/manifests`` the way kubelet's file source does
(pkg/kubelet/config/file.go): every regular file whose name does not start with ``.`` is a pod
manifest, whatever its extension. So a backup such as ``kube-scheduler.yaml.bak`` left there is
run too, exactly the mistake a real node punishes. Each container of each pod runs as a process
(static_pods.py: how a manifest becomes one, and the mirror pods):

- the file is polled every ``--poll-interval`` seconds (1 s): when its content hash changes the old
  process is stopped (SIGTERM, SIGKILL after the grace period) and the new one started at once;
  content that does not parse must stay broken for two polls before the pod is stopped, so a
  non-atomic writer is not punished for a half-written file; a removed manifest stops its pod;
- a process that exits is restarted with a back-off (1 s doubling to 20 s, reset after 60 s up);
- output goes to ``<log-dir>/pods/<ns>_<pod>_<uid>/<container>/0.log``, appended, the container's output only
  (each start is in the runner's own log);
- ``--status-file`` (JSON, written atomically) tells which pid runs which manifest hash.

With ``--image-map`` it also runs the pods bound to the node whose image the lab knows (pods.py), and
with the TLS flags it serves the kubelet API (api.py). With ``--config`` (the node's
KubeletConfiguration, as kubeadm's drop-in passes it) it keeps kubelet's CPU manager
(cpu_manager.py): ``cpuManagerPolicy`` and ``reservedSystemCPUs`` decide the exclusive CPUs of every
pod bound to the node, kept in ``<root-dir>/cpu_manager_state``; a checkpoint kubelet would refuse
stops it at start with kubelet's message, as kubelet exits. It always serves kubelet's PodResources
API (pod_resources.py) on ``<root-dir>/pod-resources/kubelet.sock``: the pods bound to the node and
the CPUs the CPU manager gave their containers.

It only needs the standard library and PyYAML; lab/node_init.py starts it on every node
(``/usr/bin/python3 /usr/lib/poweraware-lab/kubelet``: __main__.py), in its own process group with the
pods' processes.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import time

import yaml

from . import cpu_manager
from .api import PORT, KubeletApi, StreamingRuntime
from .containers import stress_arguments
from .pod_resources import PodResourcesServer
from .pods import ApiPods
from .runtime import limit_capabilities
from .sandbox import PodNetwork, enter_host_network_pod, resolv_conf
from .static_pods import (
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    BACKOFF_RESET_AFTER,
    MAX_GRACE,
    ContainerSpec,
    MirrorPods,
    PodSpec,
    RunningPod,
    StaticPodError,
    atomic_write,
    die_with_parent,
    log,
    parse_manifest,
    probe_ready,
)
from .stats import ContainerRun, PodRun, Stats


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
        # kubelet's CPU manager from the node's configuration: CPUManagerError when kubelet would not start.
        self.cpus: cpu_manager.CPUManager | None = None
        if args.config is not None:
            config = yaml.safe_load(args.config.read_text()) or {}
            self.cpus = cpu_manager.from_config(config, pathlib.Path("/sys"), args.root_dir)
            log(f"cpu manager: policy {self.cpus.policy.name}, checkpoint {self.cpus.state.path}")
        # Pods the scheduler binds here whose image the lab knows (pods.py).
        self.api_pods: ApiPods | None = None
        self.network = PodNetwork(args.pod_cidr, args.cluster_dns, args.cluster_domain)
        if self.mirrors is not None and args.image_map:
            self.api_pods = ApiPods(
                self.mirrors.api, args.node_name, args.node_ip, args.image_map, self.log_dir, self.network, self.cpus
            )
        self.pods: dict[pathlib.Path, RunningPod] = {}
        self.stopping = False
        # kubelet's PodResources API on <root-dir>/pod-resources/kubelet.sock (pod_resources.py): kubelet
        # always serves it, whatever its CPU manager's policy; started by run()
        self.pod_resources = PodResourcesServer(args.root_dir, self.known_pods, self.cpus)
        # The kubelet API on the node's address (kubectl logs through kube-apiserver).
        self.kubelet_api: KubeletApi | None = None
        if self.mirrors is not None and args.tls_cert_file and args.tls_private_key_file and args.client_ca_file:
            self.kubelet_api = KubeletApi(
                args.node_name,
                args.node_ip,
                args.tls_cert_file,
                args.tls_private_key_file,
                args.client_ca_file,
                self.mirrors.api,
                self.log_dir,
                self,
                StreamingRuntime(args.streaming_server or self.bin_dir / "cri-streaming"),
                Stats(args.node_name),
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

    def known_pods(self) -> list[dict]:
        """The pods kubelet's pod manager knows: every pod bound to the node in the API (any phase,
        kwok's too; the PodResources API leaves the mirror pods out) and each static pod as its own
        object, under its mirror's name (the file source names it so) with its manifest's hash as uid."""
        pods = list(self.api_pods.bound) if self.api_pods is not None else []
        for running in list(self.pods.values()):
            if running.spec is not None:
                manifest = running.spec.manifest
                pods.append(
                    {
                        "metadata": {
                            "name": self.mirror_name(running.spec),
                            "namespace": running.spec.namespace,
                            "uid": running.content_hash[:32],
                        },
                        "spec": manifest.get("spec") or {},
                        "status": {"phase": "Running"},
                    }
                )
        return pods

    def mirror_name(self, spec: PodSpec) -> str:
        """A static pod's name in the API: its manifest's name and the node's, as kubelet names it."""
        return f"{spec.name}-{self.node_name}" if self.node_name else spec.name

    def pod_runs(self) -> list[PodRun]:
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
                    ContainerRun(
                        c.name,
                        c.process.pid,
                        c.started_wall,
                        str(c.spec.get("image", "")),
                        stress_arguments(c.spec, c.image, c.exec_env),
                    )
                    for c in list(pod.containers)
                    if c.process is not None and c.process.returncode is None
                ]
                runs.append(PodRun(meta["namespace"], meta["name"], pod.uid, pod.start_wall, containers, sandbox))
        for running in list(self.pods.values()):
            spec = running.spec
            if spec is None:
                continue
            containers = [
                ContainerRun(c.name, p.pid, running.started_wall, str(m.get("image", "")))
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
                PodRun(spec.namespace, self.mirror_name(spec), uid, running.started_wall, containers, os.getpid())
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
        text = resolv_conf(manifest, self.network.cluster_dns, self.network.cluster_domain)
        resolv = None
        if text is not None:
            resolv = self.run_dir / f"{pod.spec.namespace}_{pod.spec.name}.resolv.conf"
            resolv.parent.mkdir(parents=True, exist_ok=True)
            resolv.write_text(text)

        def run() -> None:
            if resolv is not None:
                enter_host_network_pod(str(resolv))
            if container.capabilities is not None:
                limit_capabilities(container.capabilities)
            if container.user is not None:
                uid, gid, groups = container.user
                os.setgroups(list(groups))
                os.setgid(gid)
                os.setuid(uid)
            die_with_parent()

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
        # what the PodResources API answers from now on: the pods and CPUs this sync admitted or released
        self.pod_resources.refresh()

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
            log(f"kubelet API on https://{self.kubelet_api.server.server_address[0]}:{PORT}")
        try:
            self.pod_resources.start()
        except OSError as exc:
            # ListenAndServePodResources: kubelet exits when it cannot listen
            log(f'"Failed to create listener for podResources endpoint" err={json.dumps(str(exc))}')
            if self.kubelet_api is not None:
                self.kubelet_api.stop()
            return 1
        log(f"podresources API on unix://{self.pod_resources.path}")
        while not self.stopping:
            self.sync()
            self.write_status()
            time.sleep(self.poll_interval)
        if self.kubelet_api is not None:
            self.kubelet_api.stop()
        self.pod_resources.stop()
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
    parser.add_argument("--config", type=pathlib.Path, help="the KubeletConfiguration (its CPU manager settings)")
    parser.add_argument(
        "--root-dir", type=pathlib.Path, default=pathlib.Path("/var/lib/kubelet"), help="kubelet's state directory"
    )
    try:
        runner = Runner(parser.parse_args(argv))
    except cpu_manager.CPUManagerError as exc:
        # kubelet.initializeRuntimeDependentModules: the container manager did not start, kubelet exits
        log(f'"Failed to start ContainerManager" err={json.dumps(str(exc))}')
        return 1
    return runner.run()
