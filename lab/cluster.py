"""The lab: a Kubernetes control plane on 127.0.0.1 and nodes that are hosts (docs/lab.md).

etcd, kube-apiserver, kube-controller-manager and kwok run on this machine (one module each in
lab/components/); every node - the control plane's and the workers' - is a host of its own in a
mount and UTS namespace with its own address, reached over SSH (lab/nodes.py, lab/node_init.py).
kube-scheduler is a static pod of the control-plane node, run inside that node by the lab's kubelet
stand-in (lab/kubelet/static_pods.py) from the node's own /etc/kubernetes/manifests.

State lives in one directory (``.cache/lab`` by default, mode 0700)::

    lab.json                 what runs: pids (with start times, mount namespaces), version, paths
    kubeconfig               the lab's admin kubeconfig (system:masters) for tests and humans, 0600
    pki/                     CA, front-proxy CA, serving certs, service-account keys (keys 0600)
    bin/                     symlinks to the binaries in use
    etcd/                    etcd data
    logs/<component>.log     one log per process (node-<name>.log: the node's init and boot)
    ssh/                     the login key pair, known_hosts, ssh_config
    nodes/<node>/            each node's disk, kernel and init configuration (lab/nodes.py)

Every process is started in its own process group and carries ``POWERAWARE_LAB_STATE=<state dir>``
in its environment, so ``down`` can find and stop each one by pid; a node is stopped with every
process of its mount namespace.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import ssl
import subprocess
import time
import urllib.error
from collections.abc import Callable, Iterator

import yaml

from lab import addons, assets, images, kubeadm, nodes, pki
from lab.api import Api, http_ok, insecure_context, node_ready
from lab.components import (
    etcd,
    kube_apiserver,
    kube_controller_manager,
    kwok,
    network,
    node_power,
    registry,
    site_dns,
    site_switch,
)
from lab.config import PORTS, LabConfig, LabPaths
from lab.process import (
    STATE_ENV,
    LabProcess,
    log_tail,
    port_free,
    process_alive,
    process_start_time,
    reap,
    spawn,
    stop_process_group,
    tagged_processes,
)

# The control-plane ports the controller reaches on 127.0.0.1 (relayed into the lab's network).
RELAYED_PORTS = ("etcd", "apiserver", "controller-manager", "scheduler")
__all__ = ["STATE_ENV", "Lab", "LabError", "node_ready", "process_alive", "tagged_processes"]


class LabError(RuntimeError):
    """The lab could not be brought up or down; the message says what failed and shows its log."""


class Lab:
    def __init__(self, config: LabConfig, log: Callable[[str], None] = print):
        self.config = config
        self.paths = LabPaths(config.state_dir.resolve())
        self.config.state_dir = self.paths.state_dir
        self.log = log
        self.processes: dict[str, dict] = {}
        self.owner = "cli"

    @property
    def hosts(self) -> nodes.NodeHosts:
        return nodes.NodeHosts(
            self.paths.state_dir, self.config.nodes, self.config.sysfs_scenario, int(self.config.cpu), self.log
        )

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
            "nodes": {
                n.name: {"address": n.address, "node_ip": n.node_ip, "control_plane": n.control_plane}
                for n in self.config.nodes
            },
            "processes": self.processes,
            "updated": time.time(),
        }
        pki.atomic_write(self.paths.state_file, json.dumps(data, indent=2) + "\n")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One `up`/`down`/`reboot` at a time per state directory (make lab vs. the pytest fixture)."""
        self.paths.lock.parent.mkdir(parents=True, exist_ok=True)
        with open(self.paths.lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- health -----------------------------------------------------------------------------
    def dead_processes(self) -> list[str]:
        dead = []
        for name, info in self.processes.items():
            if not process_alive(info["pid"], info.get("start_time")):
                dead.append(name)
            kernel = info.get("kernel")  # a node's kernel (lab/nodes.py): without it the node's /sys is gone
            if kernel and not process_alive(kernel["pid"], kernel.get("start_time")):
                dead.append(f"{name} kernel")
        return dead

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
        log_path: pathlib.Path | None = None,
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
        log_path = log_path or self.paths.log(component or "kube-apiserver")
        raise LabError(
            f"timed out after {timeout or self.config.timeout:.0f} s waiting for {what}; last lines of {log_path}:\n"
            f"{log_tail(log_path)}"
        )

    def scheduler_log(self) -> pathlib.Path:
        """kube-scheduler's current log on the control-plane node (kubelet's /var/log/containers link)."""
        containers = self.paths.node_disk(self.config.control_plane) / "var" / "log" / "containers"
        found = sorted(
            containers.glob("kube-scheduler-*_kube-system_kube-scheduler-*.log"), key=lambda p: p.lstat().st_mtime
        )
        if not found:
            return containers / "kube-scheduler.log"
        # The link is absolute inside the node; the file is on the node's disk.
        return self.paths.node_disk(self.config.control_plane) / os.readlink(found[-1]).lstrip("/")

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
            f"127.0.0.1:{self.config.port(name)} ({name})" for name in PORTS if not port_free(self.config.port(name))
        ]
        busy += [
            f"{node.address}:{nodes.SSH_PORT} (sshd of {node.name})"
            for node in self.config.nodes
            if nodes.port_open(node.address, nodes.SSH_PORT, timeout=0.2)
        ]
        if busy:
            raise LabError(
                f"addresses in use: {', '.join(busy)}; another lab or cluster is running here "
                "(stop it with `make lab-down`, or stop what listens there)"
            )

    def _up_unlocked(self, build: bool) -> None:
        binaries = assets.resolve_binaries(build=build, log=self.log)
        try:
            self.config.power_servers()  # the workers' power needs the data set: say so before starting
        except node_power.NoData as exc:
            raise LabError(str(exc)) from exc
        self._check_ports()
        paths, config = self.paths, self.config
        paths.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(paths.state_dir, 0o700)
        paths.logs.mkdir(exist_ok=True)
        bin_dir = assets.link_bin_dir(binaries, paths.bin)
        self._save_state("starting")
        lab_pki = pki.create(
            paths.pki,
            config.api_url,
            {
                paths.kubeconfig: ("kubernetes-admin", "system:masters"),
                paths.pki / "controller-manager.conf": ("system:kube-controller-manager", None),
                paths.pki / "kwok.conf": ("kwok-controller", "system:masters"),
                paths.pki / "kube-proxy.conf": ("system:kube-proxy", None),
            },
            network.ADVERTISE_ADDRESS,
        )
        self._write_client_cert(paths.kubeconfig, "admin")
        self._write_client_cert(paths.pki / "kube-proxy.conf", "kube-proxy")
        hosts = self.hosts
        hosts.create_login_key()
        for node in config.nodes:
            hosts.prepare(node.name, lab_pki, config.api_url)
        manifests = paths.node_disk(config.control_plane) / "etc" / "kubernetes" / "manifests"
        pki.atomic_write(manifests / "kube-scheduler.yaml", kubeadm.scheduler_manifest(config), 0o600)

        # Every other process joins the network namespace this one makes (lab/components/network.py).
        border = network.component(
            paths.state_dir / "network.json",
            paths.state_dir / "network.ready",
            [("127.0.0.1", config.port(name), "127.0.0.1") for name in RELAYED_PORTS]
            + [(node.address, nodes.SSH_PORT, node.node_ip) for node in config.nodes]
            + [("127.0.0.1", registry.PORT, registry.ADDRESS)],
            [registry.ADDRESS, site_dns.ADDRESS],
        )
        self._start(border)
        self.wait_for("the lab's network namespace", border.health, "network")
        self._cable_control_plane()
        resolver = site_dns.component(
            bin_dir,
            paths.state_dir,
            {node.name: node.node_ip for node in config.nodes},
            lambda: network.netns_path(self.processes["network"]["pid"]),
            config.control_plane,
        )
        self._start(resolver)
        self.wait_for("the site's resolver", resolver.health, "site-dns")
        # The site's image mirror, filled as an air-gapped site fills one (lab/components/registry.py).
        registry.prepare(paths.state_dir, bin_dir)
        mirror = registry.component(bin_dir, paths.state_dir)
        self._start(mirror)
        self.wait_for("the image mirror's /v2/", mirror.health, "registry")
        registry.fill(paths.state_dir, images.mirrored_images())
        for node in config.nodes:
            registry.trust_on_node(paths.state_dir, paths.node_disk(node.name))
        etcd_component = etcd.component(
            bin_dir, paths.state_dir / "etcd", config.port("etcd"), config.port("etcd-peer")
        )
        self._start(etcd_component)
        self.wait_for("etcd health", etcd_component.health, "etcd")
        apiserver = kube_apiserver.component(
            bin_dir, config.port("apiserver"), etcd.url(config.port("etcd")), lab_pki, self.apiserver_ready
        )
        self._start(apiserver)
        self.wait_for("kube-apiserver /readyz", apiserver.health, "kube-apiserver")
        self._bind_cluster_admins()
        self._upload_kubeadm_config()
        kcm = kube_controller_manager.component(
            bin_dir, config.port("controller-manager"), paths.pki / "controller-manager.conf", lab_pki
        )
        self._start(kcm)
        kwok_home = paths.state_dir / "kwok"
        kwok_home.mkdir(exist_ok=True)
        self._start(kwok.component(bin_dir, paths.pki / "kwok.conf", kwok_home))
        self._create_nodes()
        self._start(
            node_power.component(
                config.api_url,
                paths.pki,
                paths.state_dir,
                {node.name: (hosts.sysfs(node.name), node.power_server) for node in config.nodes if node.power_server},
            )
        )

        images_dir = images.prepare_images_dir(binaries, paths.images)
        for node in config.nodes:
            info = hosts.start(node.name, images_dir, self._kubelet_args(node), self._spawn_node, self._in_site_switch)
            self.processes[f"node/{node.name}"] = info
            self._save_state("starting")
        hosts.write_ssh_files()

        self.wait_for("all nodes Ready", self._all_nodes_ready, "kwok")
        self.wait_for("kube-controller-manager /healthz", kcm.health, "kube-controller-manager")
        self.wait_for(
            "kube-scheduler /healthz",
            self.scheduler_healthy,
            f"node/{config.control_plane}",
            log_path=self.scheduler_log(),
        )
        # Pods are refused until the service-account controller has made `default` in a namespace.
        self.wait_for("the default service account", self._default_service_account, "kube-controller-manager")
        try:
            addons.apply_all(self)
        except addons.AddonError as exc:
            raise LabError(str(exc)) from exc
        self._save_state("running")

    def found(self, path: str) -> dict | None:
        """The object at ``path``, or None while the API server cannot give it (a health wait's poll)."""
        try:
            return self.api().get(path)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _kubelet_args(self, node: nodes.Node) -> list[str]:
        # Paths as the node sees them: the runner reads the node's own files.
        return [
            "--node-root=/",
            "--bin-dir=/usr/lib/poweraware-lab/images",
            "--log-dir=/var/log",
            "--run-dir=/var/lib/kubelet/lab-static-pods",
            "--status-file=/var/lib/kubelet/lab-static-pods.json",
            "--config=/var/lib/kubelet/config.yaml",  # as kubeadm's kubelet drop-in passes it
            "--poll-interval=1",
            "--kubeconfig=/etc/kubernetes/kubelet.conf",
            "--tls-cert-file=/var/lib/kubelet/pki/kubelet.crt",
            "--tls-private-key-file=/var/lib/kubelet/pki/kubelet.key",
            "--client-ca-file=/etc/kubernetes/pki/ca.crt",
            f"--node-name={node.name}",
            f"--node-ip={node.node_ip}",
            f"--image-map=/usr/lib/poweraware-lab/images/{images.MAP_FILE}",
            f"--pod-cidr={pod_cidr(node)}",
            f"--cluster-dns={network.DNS_IP}",
            f"--cluster-domain={network.CLUSTER_DOMAIN}",
        ]

    def _bind_cluster_admins(self) -> None:
        # kubeadm (>= 1.29) gives admin.conf the group kubeadm:cluster-admins, bound to cluster-admin.
        body = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:cluster-admins"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}],
        }
        self._create(
            self.api(),
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            body,
            "ClusterRoleBinding kubeadm:cluster-admins",
        )

    def _upload_kubeadm_config(self) -> None:
        # kubeadm init's upload-config phase: the ClusterConfiguration every later `kubeadm upgrade`
        # (and `kubeadm join --control-plane`) reads back and renders the static pods from.
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
            "data": {"ClusterConfiguration": kubeadm.cluster_configuration()},
        }
        self._create(self.api(), "/api/v1/namespaces/kube-system/configmaps", body, "ConfigMap kubeadm-config")

    @staticmethod
    def _create(api: Api, path: str, body: dict, what: str) -> None:
        """POST an object the lab needs; one that exists already is fine (a start after a failed one)."""
        try:
            api.request("POST", path, body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise LabError(f"creating {what}: {exc.code} {exc.read()[:500]!r}") from exc

    def _write_client_cert(self, kubeconfig_path: pathlib.Path, stem: str) -> None:
        # The bring-up code, the lab's services and tests talk TLS with files: same identity as the
        # kubeconfig.
        kubeconfig = yaml.safe_load(kubeconfig_path.read_text())
        user = kubeconfig["users"][0]["user"]
        pki.atomic_write(self.paths.pki / f"{stem}.crt", base64.b64decode(user["client-certificate-data"]))
        pki.atomic_write(self.paths.pki / f"{stem}.key", base64.b64decode(user["client-key-data"]), 0o600)

    def _cable_control_plane(self) -> None:
        """The site's switch (lab/components/site_switch.py), and the control-plane node's cable to
        it: its ``eth0`` in the border's namespace, its address, routes and end of the overlay."""
        switch = site_switch.component(self.paths.state_dir / "site-switch.ready")
        self._start(switch)
        self.wait_for("the site's switch", switch.health, "site-switch")
        own = network_host(next(node for node in self.config.nodes if node.control_plane))
        workers = [network_host(node) for node in self.config.nodes if not node.control_plane]
        border = self.processes["network"]["pid"]
        commands = [self._in_site_switch(argv) for argv in network.cable_commands(own, border)]
        commands += [self._in_lab_network(argv) for argv in network.control_plane_commands(own, workers)]
        for argv in commands:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise LabError(f"cabling the control-plane node: {' '.join(argv)}: {done.stderr.strip()}")

    def _in_site_switch(self, argv: list[str]) -> list[str]:
        return network.enter_argv(self.processes["site-switch"]["pid"]) + argv

    def _in_lab_network(self, argv: list[str]) -> list[str]:
        border = self.processes.get("network")
        return network.enter_argv(border["pid"]) + argv if border else argv

    def _spawn_node(self, name: str, argv: list[str]) -> dict:
        info = spawn(self._in_lab_network(argv), self.paths.log(name), self.paths.state_dir, self.paths.state_dir)
        self.processes[name] = info
        return info

    def _start(self, component: LabProcess) -> None:
        argv = component.argv if component.name == "network" else self._in_lab_network(component.argv)
        self.processes[component.name] = spawn(
            argv, self.paths.log(component.name), self.paths.state_dir, self.paths.state_dir, component.env
        )
        self._save_state("starting")

    def _node_object(self, node: nodes.Node) -> dict:
        config = self.config
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "type": "kwok",
        }
        spec: dict = {}
        if node.power_server:
            labels[node_power.SERVER_LABEL] = node.power_server
        if node.control_plane:
            labels[kubeadm.CONTROL_PLANE_LABEL] = ""
            spec["taints"] = [{"key": kubeadm.CONTROL_PLANE_LABEL, "effect": "NoSchedule"}]
        version = assets.kubernetes_version()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": labels,
                "annotations": {kwok.ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
            "status": {
                # The node's own address, where its kubelet and sshd listen (kwok keeps addresses it is given).
                "addresses": [
                    {"type": "InternalIP", "address": node.node_ip},
                    {"type": "Hostname", "address": node.name},
                ],
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
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": version,
                    "kubeProxyVersion": version,
                    "osImage": "Debian GNU/Linux 12 (bookworm) (poweraware lab node)",
                },
            },
        }

    def _create_nodes(self) -> None:
        api = self.api()
        for node in self.config.nodes:
            self._create(api, "/api/v1/nodes", self._node_object(node), f"node {node.name}")

    def _all_nodes_ready(self) -> bool:
        try:
            found = {n["metadata"]["name"]: n for n in self.nodes()}
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return all(node_ready(found.get(name)) for name in self.config.node_names)

    def _default_service_account(self) -> bool:
        return self.found("/api/v1/namespaces/default/serviceaccounts/default") is not None

    # --- reboot -------------------------------------------------------------------------------
    def reboot(self, name: str) -> dict:
        """Power-cycle one node: its processes end, its kernel comes back at power-on values, its
        disk stays; then it boots, running the enabled boot units. Returns the node's cpufreq
        settings at power-on (before the units ran) and after boot, and the boot log."""
        if name not in self.config.node_names:
            raise LabError(f"no lab node {name!r} (nodes: {', '.join(self.config.node_names)})")
        with self.locked():
            key = f"node/{name}"
            info = self.processes.get(key)
            if info is None:
                raise LabError(f"node {name} is not running (start the lab with `make lab`)")
            hosts = self.hosts
            hosts.stop(name, info)
            hosts.power_on_kernel(name)
            before = nodes.cpufreq_snapshot(hosts.sysfs(name))
            log_path = self.paths.log(key)
            offset = log_path.stat().st_size if log_path.exists() else 0
            node = next(n for n in self.config.nodes if n.name == name)
            self.processes[key] = hosts.start(
                name, self.paths.images, self._kubelet_args(node), self._spawn_node, self._in_site_switch
            )
            hosts.write_ssh_files()
            self._save_state("running")
            with open(log_path, errors="replace") as handle:
                handle.seek(offset)
                boot = [line.rstrip("\n") for line in handle if " boot: " in line]
            return {"before_units": before, "after_boot": nodes.cpufreq_snapshot(hosts.sysfs(name)), "boot_log": boot}

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
        hosts = self.hosts
        # Nodes first (their pods talk to the API server), then kwok and the controllers before the
        # API server, etcd last.
        for name in sorted(self.processes, key=lambda n: (not n.startswith("node/"), -list(self.processes).index(n))):
            info = self.processes[name]
            if name.startswith("node/"):
                stopped += hosts.stop(name.split("/", 1)[1], info)
            elif process_alive(info["pid"], info.get("start_time")):
                stop_process_group(info["pid"])
                stopped.append(info["pid"])
            reap(info["pid"])
        for pid in tagged_processes(self.paths.state_dir):
            # Whatever escaped its group (a runner killed with SIGKILL before its pods).
            stop_process_group(pid, group=False)
            stopped.append(pid)
        self.processes = {}
        nodes.unmount_under(self.paths.state_dir)
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


def pod_cidr(node: nodes.Node) -> str:
    """The node's share of the pod CIDR: 10.244.<the node address's last octet>.0/24."""
    return network.pod_cidr(node.address)


def network_host(node: nodes.Node) -> network.Host:
    return network.Host(node.name, node.node_ip, pod_cidr(node))
