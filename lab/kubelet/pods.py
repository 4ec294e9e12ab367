"""The API pods' loop (the package's docstring says what such a pod gets): the pods it claims, each
pod's sandbox, volumes, image pulls, init containers and containers started, probed and restarted,
its status reported, and its deletion.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import time

from . import cpu_manager
from .client import NodeApi
from .common import BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET_AFTER, MAX_GRACE, PodError, log
from .containers import ApiPod, Container, resolve_command
from .probes import ProbeState, run_probe
from .pull import (
    PULL_BACKOFF_INITIAL,
    PULL_BACKOFF_MAX,
    docker_credentials,
    image_host,
    image_tag,
    open_registry,
    pull_image,
    reference_of,
)
from .runtime import CREATE_FAILED, container_preexec, kept_capabilities, run_as
from .sandbox import PodNetwork, PodSandbox, pod_address, pod_hostname, resolv_conf
from .volumes import VOLUME_SYNC, PodVolumes

LIST_INTERVAL = 2.0
STATUS_RESYNC = 30.0
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def now_rfc3339(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at if at is not None else time.time()))


def terminal(pod: dict) -> bool:
    """The pod's phase is Succeeded or Failed: kubelet never runs it again (isAdmittedPodTerminal)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def claims(pod: dict, image_map: dict) -> bool:
    """This runner owns the pod: not a mirror pod, and some container's image is mapped at its tag
    (kwok's NotIn skips a pod when any container's image reference is in the map)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return False
    containers = (pod.get("spec") or {}).get("containers") or []
    return any(reference_of(str(c.get("image", ""))) in image_map for c in containers)


def _key(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _rejected_before(pod: dict) -> str | None:
    """The message of a pod kubelet refused at admission (before a restart of this kubelet): it stays so."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed" and status.get("reason") == cpu_manager.ADMISSION_REASON:
        return status.get("message") or cpu_manager.ADMISSION_REASON
    return None


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
        cpus: cpu_manager.CPUManager | None = None,
    ):
        self.api = NodeApi(kube_api)
        self.cpus = cpus  # kubelet's CPU manager (cpu_manager.py), None: none modelled
        self.admitted: set[str] = set()  # the pods it admitted (or refused), by uid
        self.network = network
        self.node = node
        self.node_ip = node_ip
        self.image_map_file = image_map_file
        self.log_dir = log_dir
        # The node's pulled images: reference -> (image ID, the credentials that pulled it: hashes, "" for
        # none). Images the node was given (the image map's public references) are preloaded.
        self.pulled: dict[str, tuple[str, set[str]]] = {}
        self.pods: dict[str, ApiPod] = {}
        # Every pod bound to this node at the last list, kwok's and terminal ones too: what kubelet's
        # pod manager knows (the PodResources API's pods, pod_resources.py)
        self.bound: list[dict] = []
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
        bound = self.api.pods(self.node)
        self.bound = bound
        refused = self._admit(bound) if self.cpus is not None else {}
        listed = {p["metadata"]["uid"]: p for p in bound if claims(p, image_map)}
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
                pod.rejected = refused.get(uid) or _rejected_before(obj)
                taken.add(pod.pod_ip)
                self.pods[uid] = pod
                log(f"{pod.key}: bound here, address {pod.pod_ip}")
            pod.pod = obj
            if obj["metadata"].get("deletionTimestamp") and pod.deleting_since is None:
                pod.deleting_since = time.monotonic()
                log(f"{pod.key}: marked for deletion")

    def _admit(self, bound: list[dict]) -> dict[str, str]:
        """kubelet's CPU manager over every pod bound here, kwok's too (kubelet admits each pod of its
        node): the CPUs of containers whose pod is gone or terminal go back to the shared pool
        (removeStaleState), then each pod not seen before is admitted, oldest first
        (HandlePodAdditions). Static pods' mirrors are left out (kubelet admits the static pod, by
        its own uid). Returns the pods whose admission failed, with kubelet's status message (for a
        pod kwok runs the failure is only logged)."""
        assert self.cpus is not None

        def active(pod: dict) -> bool:
            meta = pod["metadata"]
            rejected = meta["uid"] in self.pods and self.pods[meta["uid"]].rejected
            return not terminal(pod) and not rejected and MIRROR_ANNOTATION not in (meta.get("annotations") or {})

        pods = [p for p in bound if active(p)]
        for uid, container in self.cpus.reconcile(pods):
            log(f"cpu manager: pod {uid} gone or ended: the CPUs of its container {container} are back in the pool")
        self.admitted &= {p["metadata"]["uid"] for p in pods}
        refused = {}
        new = [p for p in pods if p["metadata"]["uid"] not in self.admitted]
        for obj in sorted(new, key=lambda p: (p["metadata"].get("creationTimestamp") or "", _key(p))):
            uid = obj["metadata"]["uid"]
            self.admitted.add(uid)
            message = self.cpus.admit(obj)
            if message is not None:
                refused[uid] = f"Pod was rejected: {message}"  # kubelet's rejectPod
                log(f"{_key(obj)}: {cpu_manager.ADMISSION_REASON}: {message}")
            for container, cpus in sorted(self.cpus.exclusive(uid).items()):
                log(f"{_key(obj)}/{container}: exclusive CPUs {cpu_manager.format_cpuset(cpus)}")
        return refused

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
        if pod.rejected:
            return  # refused at admission: nothing of it runs
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
        if pod.rejected:
            # kubelet's rejectPod: Failed with the admission's reason and message, nothing started
            return {
                "phase": "Failed",
                "reason": cpu_manager.ADMISSION_REASON,
                "message": pod.rejected,
                "startTime": now_rfc3339(pod.start_wall),
            }
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
