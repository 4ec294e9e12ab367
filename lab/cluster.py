"""Bring the lab up and down: etcd, kube-apiserver, kube-controller-manager, kwok and the
control-plane node's static pods (kube-scheduler), all on 127.0.0.1, no containers.

State lives in one directory (``.cache/lab`` by default, mode 0700)::

    lab.json                 what runs: pids (with start times), ports, version, paths
    kubeconfig               admin kubeconfig (system:masters), 0600
    pki/                     CA, front-proxy CA, serving certs, service-account keys (keys 0600)
    bin/                     symlinks to the binaries in use
    etcd/                    etcd data
    logs/<component>.log     one log per process; kube-scheduler.log is written by the runner
    nodes/<node>/{sys,etc}   each simulated node's fake root (sysfs tree, /etc/kubernetes ...)

Every process is started in its own process group and carries ``POWERAWARE_LAB_STATE=<state dir>``
in its environment, so ``down`` can find and stop each one by pid, including anything a crashed
runner left behind.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import yaml

from lab import assets, fake_sysfs, pki

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
LAB_DIR = pathlib.Path(__file__).resolve().parent
DEFAULT_STATE_DIR = REPO_ROOT / ".cache" / "lab"
STATE_ENV = "POWERAWARE_LAB_STATE"
STATE_FILE = "lab.json"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# kwok reads one object per config file here (ansible-test's yamllint allows one document per file).
KWOK_STAGES = LAB_DIR / "kwok-stages"
DEFAULT_SYSFS_SCENARIO = "intel_pstate_active"
LOG_TAIL_LINES = 25
# Processes this Python process started (the pytest fixture runs the lab in-process): kept so they
# are reaped when stopped instead of lingering as zombies.
_CHILDREN: dict[int, subprocess.Popen] = {}


class LabError(RuntimeError):
    """The lab could not be brought up or down; the message says what failed and shows its log."""


@dataclasses.dataclass
class LabConfig:
    """What the lab looks like. Every field can be set from ``lab`` command-line options."""

    state_dir: pathlib.Path = DEFAULT_STATE_DIR
    port_offset: int = 0  # added to every port, so a second lab can run beside the first
    workers: int = 3
    control_plane: str = "lab-control-plane"
    worker_prefix: str = "lab-worker-"
    cpu: str = "32"
    memory: str = "128Gi"
    allocatable_memory: str = "127Gi"  # less system-reserved and the eviction threshold, as a kubelet reports
    pods: str = "110"
    sysfs_scenario: str = DEFAULT_SYSFS_SCENARIO
    timeout: float = 120.0  # per health wait

    @property
    def worker_names(self) -> list[str]:
        return [f"{self.worker_prefix}{i}" for i in range(1, self.workers + 1)]

    @property
    def node_names(self) -> list[str]:
        return [self.control_plane, *self.worker_names]

    def port(self, name: str) -> int:
        base = {"etcd": 2379, "etcd-peer": 2380, "apiserver": 6443, "controller-manager": 10257, "scheduler": 10259}
        return base[name] + self.port_offset

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.port('apiserver')}"

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["state_dir"] = str(self.state_dir)
        return data

    @classmethod
    def from_json(cls, data: dict) -> LabConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["state_dir"] = pathlib.Path(values["state_dir"])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class LabPaths:
    state_dir: pathlib.Path

    @property
    def state_file(self) -> pathlib.Path:
        return self.state_dir / STATE_FILE

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.state_dir / "kubeconfig"

    @property
    def pki(self) -> pathlib.Path:
        return self.state_dir / "pki"

    @property
    def logs(self) -> pathlib.Path:
        return self.state_dir / "logs"

    @property
    def bin(self) -> pathlib.Path:
        return self.state_dir / "bin"

    @property
    def lock(self) -> pathlib.Path:
        # Beside the state directory, so it outlives `down` removing that directory.
        return self.state_dir.parent / f".{self.state_dir.name}.lock"

    def node_root(self, node: str) -> pathlib.Path:
        return self.state_dir / "nodes" / node

    def log(self, component: str) -> pathlib.Path:
        return self.logs / f"{component}.log"


# --- processes --------------------------------------------------------------------------------
def process_start_time(pid: int) -> int | None:
    """Clock ticks since boot at which ``pid`` started: tells a live process from a reused pid."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of proc(5), counted after pid and comm


def process_alive(pid: int, start_time: int | None) -> bool:
    current = process_start_time(pid)
    if current is None or (start_time is not None and current != start_time):
        return False
    with contextlib.suppress(OSError):
        state = pathlib.Path(f"/proc/{pid}/stat").read_text()
        if state[state.rindex(")") + 2] == "Z":
            return False
    return True


def tagged_processes(state_dir: pathlib.Path) -> list[int]:
    """Pids of live processes started for the lab in ``state_dir`` (by their environment tag)."""
    tag = f"{STATE_ENV}={state_dir}".encode()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if tag in environ.split(b"\0") and process_alive(int(entry.name), None):
            found.append(int(entry.name))
    return sorted(found)


def log_tail(path: pathlib.Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(f"    {line}" for line in text[-lines:])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --- HTTP -----------------------------------------------------------------------------------------
class Api:
    """Just enough of the Kubernetes REST API for bring-up (the kubernetes client is slow to import)."""

    def __init__(self, url: str, pki_dir: pathlib.Path):
        self.url = url
        self.context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        self.context.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))

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


# --- the lab ------------------------------------------------------------------------------------
@dataclasses.dataclass
class Component:
    name: str
    argv: list[str]
    health: Callable[[], bool] | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)


class Lab:
    def __init__(self, config: LabConfig, log: Callable[[str], None] = print):
        self.config = config
        self.paths = LabPaths(config.state_dir.resolve())
        self.config.state_dir = self.paths.state_dir
        self.log = log
        self.processes: dict[str, dict] = {}
        self.owner = "cli"

    # --- state ------------------------------------------------------------------------------
    @classmethod
    def from_state(cls, state_dir: pathlib.Path, log: Callable[[str], None] = print) -> Lab | None:
        state_file = LabPaths(state_dir.resolve()).state_file
        try:
            data = json.loads(state_file.read_text())
        except (OSError, ValueError):
            return None
        lab = cls(LabConfig.from_json(data["config"]), log)
        lab.processes = data.get("processes", {})
        lab.owner = data.get("owner", "cli")
        return lab

    def _save_state(self, status: str) -> None:
        data = {
            "status": status,
            "owner": self.owner,
            "k8s_version": assets.kubernetes_version(),
            "api_url": self.config.api_url,
            "kubeconfig": str(self.paths.kubeconfig),
            "config": self.config.to_json(),
            "processes": self.processes,
            "updated": time.time(),
        }
        pki.atomic_write(self.paths.state_file, json.dumps(data, indent=2) + "\n")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One `up`/`down` at a time per state directory (make lab vs. the pytest fixture)."""
        self.paths.lock.parent.mkdir(parents=True, exist_ok=True)
        with open(self.paths.lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- health -----------------------------------------------------------------------------
    def dead_processes(self) -> list[str]:
        return [name for name, info in self.processes.items() if not process_alive(info["pid"], info.get("start_time"))]

    def api(self) -> Api:
        return Api(self.config.api_url, self.paths.pki)

    def apiserver_ready(self) -> bool:
        try:
            return self.api().get("/readyz", timeout=3) == "ok"
        except (urllib.error.URLError, OSError, ssl.SSLError, ValueError):
            return False

    def scheduler_healthy(self) -> bool:
        return http_ok(f"https://127.0.0.1:{self.config.port('scheduler')}/healthz", insecure_context())

    def healthy(self) -> bool:
        return bool(self.processes) and not self.dead_processes() and self.apiserver_ready()

    def nodes(self) -> list[dict]:
        return self.api().get("/api/v1/nodes")["items"]

    def wait_for(
        self,
        what: str,
        check: Callable[[], bool],
        component: str | None,
        timeout: float | None = None,
        log_name: str | None = None,
    ):
        """Poll ``check``; fail early when ``component`` exits, showing the tail of its log."""
        deadline = time.monotonic() + (timeout or self.config.timeout)
        while time.monotonic() < deadline:
            if check():
                return
            if component is not None:
                info = self.processes.get(component)
                if info is not None and not process_alive(info["pid"], info.get("start_time")):
                    raise LabError(
                        f"{component} exited while waiting for {what}; last lines of "
                        f"{self.paths.log(component)}:\n{log_tail(self.paths.log(component))}"
                    )
            time.sleep(0.25)
        log_path = self.paths.log(log_name or component or "kube-apiserver")
        raise LabError(
            f"timed out after {timeout or self.config.timeout:.0f} s waiting for {what}; last lines of {log_path}:\n"
            f"{log_tail(log_path)}"
        )

    # --- up -----------------------------------------------------------------------------------
    def up(self, build: bool = True, owner: str = "cli") -> bool:
        """Start the lab; returns False when a healthy lab was already running (nothing done).

        ``owner`` is recorded: a lab started by test sessions (``pytest``) is stopped by the last
        session that uses it (see :meth:`acquire`); one started from the command line never is.
        """
        with self.locked():
            existing = Lab.from_state(self.paths.state_dir, self.log)
            if existing is not None:
                if existing.healthy():
                    self.config, self.processes = existing.config, existing.processes
                    self.paths, self.owner = existing.paths, existing.owner
                    if owner == "cli" and self.owner != "cli":
                        # `make lab` while tests use the lab: the user keeps it after they end.
                        self.owner = "cli"
                        self._save_state("running")
                    self.log(f"the lab is already running (state in {self.paths.state_dir})")
                    return False
                dead = ", ".join(existing.dead_processes()) or "kube-apiserver not ready"
                self.log(f"found a broken lab ({dead}): removing it first")
                existing._down_unlocked()
            elif self.paths.state_dir.exists():
                self._down_unlocked()  # leftovers of an interrupted start
            started = time.monotonic()
            self.owner = owner
            try:
                self._up_unlocked(build)
            except BaseException:
                self.log("start-up failed: stopping what was started")
                self._down_unlocked(remove_logs=False)
                raise
            self.log(f"lab ready in {time.monotonic() - started:.1f} s")
            return True

    def _check_ports(self) -> None:
        busy = [
            f"{name} {self.config.port(name)}"
            for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler")
            if not port_free(self.config.port(name))
        ]
        if busy:
            raise LabError(
                f"ports in use on 127.0.0.1: {', '.join(busy)}; another lab or cluster is running "
                "(stop it, or start this one with --port-offset)"
            )

    def _up_unlocked(self, build: bool) -> None:
        binaries = assets.resolve_binaries(build=build, log=self.log)
        self._check_ports()
        paths, config = self.paths, self.config
        paths.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(paths.state_dir, 0o700)
        paths.logs.mkdir(exist_ok=True)
        bin_dir = assets.link_bin_dir(binaries, paths.bin)
        self._save_state("starting")
        pki_dir = paths.pki
        control_plane_etc = paths.node_root(config.control_plane) / "etc" / "kubernetes"
        kubeconfigs = {
            paths.kubeconfig: ("kubernetes-admin", "system:masters"),
            pki_dir / "controller-manager.conf": ("system:kube-controller-manager", None),
            control_plane_etc / "scheduler.conf": ("system:kube-scheduler", None),
            pki_dir / "kwok.conf": ("kwok-controller", "system:masters"),
        }
        lab_pki = pki.create(pki_dir, config.api_url, kubeconfigs)
        self._write_admin_client_cert(lab_pki)
        self._prepare_node_roots(lab_pki)

        etcd_url = f"http://127.0.0.1:{config.port('etcd')}"
        self._start(
            Component(
                "etcd",
                [
                    str(bin_dir / "etcd"),
                    "--name=lab",
                    f"--data-dir={paths.state_dir / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{config.port('etcd-peer')}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{config.port('etcd-peer')}",
                    f"--initial-cluster=lab=http://127.0.0.1:{config.port('etcd-peer')}",
                    # Throw-away data: skipping fsync makes start-up and every write much faster.
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                ],
            )
        )
        self.wait_for("etcd health", lambda: http_ok(f"{etcd_url}/health"), "etcd")

        p = lab_pki.path
        self._start(
            Component(
                "kube-apiserver",
                [
                    str(bin_dir / "kube-apiserver"),
                    "--advertise-address=127.0.0.1",
                    # Endpoints may not be loopback addresses, and nothing in a pod could reach the
                    # API server anyway: leave the `kubernetes` Service without endpoints.
                    "--endpoint-reconciler-type=none",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={config.port('apiserver')}",
                    f"--etcd-servers={etcd_url}",
                    f"--service-cluster-ip-range={pki.SERVICE_CIDR}",
                    "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction",
                    "--allow-privileged=true",
                    f"--client-ca-file={p('ca.crt')}",
                    f"--tls-cert-file={p('apiserver.crt')}",
                    f"--tls-private-key-file={p('apiserver.key')}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={p('sa.pub')}",
                    f"--service-account-signing-key-file={p('sa.key')}",
                    # Aggregation layer, as kubeadm configures it: APIServices such as
                    # v1beta1.custom.metrics.k8s.io can be registered.
                    f"--requestheader-client-ca-file={p('front-proxy-ca.crt')}",
                    "--requestheader-allowed-names=front-proxy-client",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-username-headers=X-Remote-User",
                    f"--proxy-client-cert-file={p('front-proxy-client.crt')}",
                    f"--proxy-client-key-file={p('front-proxy-client.key')}",
                    # No kube-proxy here: reach aggregated servers at their endpoint addresses.
                    "--enable-aggregator-routing=true",
                    "--profiling=false",
                ],
            )
        )
        self.wait_for("kube-apiserver /readyz", self.apiserver_ready, "kube-apiserver")

        kcm_conf = str(pki_dir / "controller-manager.conf")
        self._start(
            Component(
                "kube-controller-manager",
                [
                    str(bin_dir / "kube-controller-manager"),
                    "--bind-address=127.0.0.1",
                    f"--secure-port={config.port('controller-manager')}",
                    f"--kubeconfig={kcm_conf}",
                    f"--authentication-kubeconfig={kcm_conf}",
                    f"--authorization-kubeconfig={kcm_conf}",
                    f"--client-ca-file={p('ca.crt')}",
                    f"--requestheader-client-ca-file={p('front-proxy-ca.crt')}",
                    f"--root-ca-file={p('ca.crt')}",
                    f"--service-account-private-key-file={p('sa.key')}",
                    f"--cluster-signing-cert-file={p('ca.crt')}",
                    f"--cluster-signing-key-file={p('ca.key')}",
                    "--use-service-account-credentials=true",
                    "--controllers=*,bootstrapsigner,tokencleaner",
                    # One instance: no lease to wait for after a restart.
                    "--leader-elect=false",
                    f"--service-cluster-ip-range={pki.SERVICE_CIDR}",
                    "--profiling=false",
                ],
            )
        )
        kwok_home = paths.state_dir / "kwok"
        kwok_home.mkdir(exist_ok=True)
        self._start(
            Component(
                "kwok",
                [
                    str(bin_dir / "kwok"),
                    f"--kubeconfig={pki_dir / 'kwok.conf'}",
                    *(f"--config={stage}" for stage in sorted(KWOK_STAGES.glob("*.yaml"))),
                    f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                    "--node-ip=127.0.0.1",
                    "--node-lease-duration-seconds=40",
                    "--cidr=10.244.0.0/16",
                ],
                # kwok also reads ~/.kwok/kwok.yaml: keep a user's own kwok set-up out of the lab.
                env={"HOME": str(kwok_home)},
            )
        )
        self._start(
            Component(
                "static-pods",
                [
                    sys.executable,
                    str(LAB_DIR / "static_pods.py"),
                    f"--node-root={paths.node_root(config.control_plane)}",
                    f"--bin-dir={bin_dir}",
                    f"--log-dir={paths.logs}",
                    f"--run-dir={paths.state_dir / 'static-pods'}",
                    f"--status-file={paths.state_dir / 'static-pods.json'}",
                    "--poll-interval=1",
                    f"--kubeconfig={paths.kubeconfig}",
                    f"--node-name={config.control_plane}",
                ],
            )
        )
        self._create_nodes()
        self.wait_for("all nodes Ready", self._all_nodes_ready, "kwok")
        self.wait_for(
            "kube-controller-manager /healthz",
            lambda: http_ok(f"https://127.0.0.1:{config.port('controller-manager')}/healthz", insecure_context()),
            "kube-controller-manager",
        )
        self.wait_for("kube-scheduler /healthz", self.scheduler_healthy, "static-pods", log_name="kube-scheduler")
        # Pods are refused until the service-account controller has made `default` in a namespace.
        self.wait_for("the default service account", self._default_service_account, "kube-controller-manager")
        self._save_state("running")

    def _write_admin_client_cert(self, lab_pki: pki.LabPki) -> None:
        # The bring-up code and tests talk TLS with files; same identity as the admin kubeconfig.
        kubeconfig = yaml.safe_load(self.paths.kubeconfig.read_text())
        user = kubeconfig["users"][0]["user"]
        pki.atomic_write(lab_pki.path("admin.crt"), base64.b64decode(user["client-certificate-data"]))
        pki.atomic_write(lab_pki.path("admin.key"), base64.b64decode(user["client-key-data"]), 0o600)

    def _prepare_node_roots(self, lab_pki: pki.LabPki) -> None:
        config = self.config
        for node in config.node_names:
            root = self.paths.node_root(node)
            (root / "etc" / "kubernetes" / "pki").mkdir(parents=True, exist_ok=True)
            self._build_sysfs(root / "sys")
        # The control-plane node carries what kubeadm leaves in /etc/kubernetes.
        etc = self.paths.node_root(config.control_plane) / "etc" / "kubernetes"
        for name in ("ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.pub", "sa.key"):
            mode = 0o600 if name.endswith(".key") else 0o644
            pki.atomic_write(etc / "pki" / name, lab_pki.path(name).read_bytes(), mode)
        pki.atomic_write(etc / "admin.conf", self.paths.kubeconfig.read_bytes(), 0o600)
        for worker in config.worker_names:
            pki.atomic_write(
                self.paths.node_root(worker) / "etc" / "kubernetes" / "pki" / "ca.crt",
                lab_pki.path("ca.crt").read_bytes(),
            )
        manifests = etc / "manifests"
        manifests.mkdir(parents=True, exist_ok=True)
        pki.atomic_write(manifests / "kube-scheduler.yaml", scheduler_manifest(self.config))

    def _build_sysfs(self, root: pathlib.Path) -> None:
        # One CPU in the tree per CPU the Node reports, so sysfs and the API agree.
        fake_sysfs.build_tree(root, self.config.sysfs_scenario, cpus=int(self.config.cpu))

    def _start(self, component: Component) -> None:
        log_path = self.paths.log(component.name)
        env = dict(os.environ)
        env.update(component.env)
        env[STATE_ENV] = str(self.paths.state_dir)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                component.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.paths.state_dir,
                env=env,
                start_new_session=True,  # own process group: `down` signals the whole group
            )
        _CHILDREN[proc.pid] = proc
        self.processes[component.name] = {
            "pid": proc.pid,
            "start_time": process_start_time(proc.pid),
            "log": str(log_path),
            "argv": component.argv,
        }
        self._save_state("starting")

    def _node_object(self, name: str, control_plane: bool) -> dict:
        config = self.config
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "type": "kwok",
        }
        spec: dict = {}
        if control_plane:
            labels[CONTROL_PLANE_LABEL] = ""
            spec["taints"] = [{"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}]
        version = assets.kubernetes_version()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
            "status": {
                "capacity": {
                    "cpu": config.cpu,
                    "memory": config.memory,
                    "pods": config.pods,
                    "ephemeral-storage": "500Gi",
                },
                "allocatable": {
                    "cpu": config.cpu,
                    "memory": config.allocatable_memory,
                    "pods": config.pods,
                    "ephemeral-storage": "460Gi",
                },
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": version,
                    "kubeProxyVersion": version,
                    "osImage": "poweraware lab (kwok)",
                },
            },
        }

    def _create_nodes(self) -> None:
        api = self.api()
        for name in self.config.node_names:
            try:
                api.request("POST", "/api/v1/nodes", self._node_object(name, name == self.config.control_plane))
            except urllib.error.HTTPError as exc:
                if exc.code != 409:
                    raise LabError(f"creating node {name}: {exc.code} {exc.read()[:500]!r}") from exc

    def _all_nodes_ready(self) -> bool:
        try:
            nodes = {n["metadata"]["name"]: n for n in self.nodes()}
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return all(node_ready(nodes.get(name)) for name in self.config.node_names)

    def _default_service_account(self) -> bool:
        try:
            self.api().get("/api/v1/namespaces/default/serviceaccounts/default")
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return True

    # --- users (test sessions sharing one lab) -----------------------------------------------
    @property
    def _users_dir(self) -> pathlib.Path:
        return self.paths.state_dir / "users"

    def _live_users(self) -> list[pathlib.Path]:
        live = []
        for entry in sorted(self._users_dir.glob("*")) if self._users_dir.is_dir() else []:
            pid, _sep, start_time = entry.name.partition("-")
            if pid.isdigit() and start_time.isdigit() and process_alive(int(pid), int(start_time)):
                live.append(entry)
            else:
                entry.unlink(missing_ok=True)  # a session that died without releasing
        return live

    def acquire(self, build: bool = True) -> None:
        """Start the lab for a test session, or join the running one, and register this process."""
        self.up(build=build, owner="pytest")
        with self.locked():
            self._users_dir.mkdir(exist_ok=True)
            pid = os.getpid()
            pki.atomic_write(self._users_dir / f"{pid}-{process_start_time(pid)}", "")

    def release(self) -> bool:
        """Unregister this process; the last test session stops a lab that test sessions started.
        Returns True when the lab was stopped."""
        with self.locked():
            pid = os.getpid()
            (self._users_dir / f"{pid}-{process_start_time(pid)}").unlink(missing_ok=True)
            current = Lab.from_state(self.paths.state_dir, self.log)
            if current is None or current.owner != "pytest" or current._live_users():
                return False
            current._down_unlocked()
            return True

    # --- down ---------------------------------------------------------------------------------
    def down(self) -> list[int]:
        """Stop every process of this lab and remove its state; returns the pids that were stopped."""
        with self.locked():
            return self._down_unlocked()

    def _down_unlocked(self, remove_logs: bool = True) -> list[int]:
        stopped: list[int] = []
        # Reverse start order: the runner stops the scheduler, kwok and the controllers go before
        # the API server, etcd last.
        for name in reversed(list(self.processes)):
            info = self.processes[name]
            if process_alive(info["pid"], info.get("start_time")):
                stop_process_group(info["pid"])
                stopped.append(info["pid"])
        for pid in tagged_processes(self.paths.state_dir):
            # Whatever escaped its group (a runner killed with SIGKILL before its pods).
            stop_process_group(pid, group=False)
            stopped.append(pid)
        self.processes = {}
        if self.paths.state_dir.exists():
            if remove_logs:
                shutil.rmtree(self.paths.state_dir)
            else:
                # Keep the logs of a failed start for the error report; remove everything else.
                for child in self.paths.state_dir.iterdir():
                    if child.name == "logs":
                        continue
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        return stopped


def stop_process_group(pid: int, group: bool = True, grace: float = 10.0) -> None:
    """SIGTERM the process (group), wait ``grace`` seconds, then SIGKILL what is left."""
    start_time = process_start_time(pid)

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not process_alive(pid, start_time) and (not group or not _group_alive(pid)):
            break
        time.sleep(0.1)
    else:
        send(signal.SIGKILL)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); a group of only zombies is gone for our purposes.
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def node_ready(node: dict | None) -> bool:
    if not node:
        return False
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def scheduler_manifest(config: LabConfig) -> str:
    """kube-scheduler's static-pod manifest as kubeadm v1.36 writes it (cmd/kubeadm/app/phases/controlplane)."""
    version = assets.kubernetes_version()
    command = [
        "kube-scheduler",
        "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--bind-address=127.0.0.1",
        "--kubeconfig=/etc/kubernetes/scheduler.conf",
        "--leader-elect=true",
    ]
    port = config.port("scheduler")
    if port != 10259:
        command.append(f"--secure-port={port}")

    def probe(path: str, initial: int, period: int, failures: int) -> dict:
        return {
            "failureThreshold": failures,
            "httpGet": {"host": "127.0.0.1", "path": path, "port": "probe-port", "scheme": "HTTPS"},
            **({"initialDelaySeconds": initial} if initial else {}),
            "periodSeconds": period,
            "timeoutSeconds": 15,
        }

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"component": "kube-scheduler", "tier": "control-plane"},
            "name": "kube-scheduler",
            "namespace": "kube-system",
        },
        "spec": {
            "containers": [
                {
                    "command": command,
                    "image": f"registry.k8s.io/kube-scheduler:{version}",
                    "imagePullPolicy": "IfNotPresent",
                    "livenessProbe": probe("/livez", 10, 10, 8),
                    "name": "kube-scheduler",
                    "ports": [{"containerPort": port, "name": "probe-port", "protocol": "TCP"}],
                    "readinessProbe": probe("/readyz", 0, 1, 3),
                    "resources": {"requests": {"cpu": "100m"}},
                    "startupProbe": probe("/livez", 10, 10, 24),
                    "volumeMounts": [
                        {"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True}
                    ],
                }
            ],
            "hostNetwork": True,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [
                {"hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"}, "name": "kubeconfig"}
            ],
        },
        "status": {},
    }
    return yaml.safe_dump(pod, sort_keys=False)
