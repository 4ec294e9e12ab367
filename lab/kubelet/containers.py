"""A pod and its containers as the lab's kubelet keeps them: each container's state (its process,
restarts and probes) and what it starts with: its command, its environment, its mounts.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
import subprocess
import time
from fractions import Fraction

from .client import NodeApi
from .common import BACKOFF_INITIAL, DEFAULT_PATH, PodError
from .probes import ProbeState
from .pull import reference_of
from .runtime import Mount
from .sandbox import PodSandbox
from .volumes import VOLUME_SYNC, PodVolumes, field_value

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
        self.rejected: str | None = None  # kubelet's admission refused it (cpu_manager.py): it never runs
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
