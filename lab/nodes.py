"""The lab's nodes as hosts: each one a mount and UTS namespace of this machine (a worker's with a
network namespace of its own: lab/components/network.py), reached over SSH.

A node is what Ansible sees on a bare-metal cluster: a host with its own address in 127.0.0.0/8
(127.0.1.1 for the control plane, 127.0.1.1N for worker N), its own hostname, an sshd on that
address, a non-root login user with passwordless sudo, the system Python of a fresh Debian server,
kubeadm's files at their real paths with kubeadm's owners and modes, and a fake kernel (cpufreq,
powercap) at the real ``/sys`` paths. The controller is not a node: nothing of the checkout or the
lab state is visible inside one (lab/node_init.py hides it).

On the controller, under ``<state>/nodes/<node>/``::

    node.json     what lab/node_init.py reads (addresses, paths, services)
    disk/         the node's persistent disk: upper layers of /etc /usr /var /opt, and /root, /home
    overlay-work/ overlayfs work directories
    sys/          the node's kernel's attributes, rebuilt at power-on (lab/fake_sysfs.py)
    kernel/       the same tree served through FUSE by the kernel model while the node runs
                  (lab/components/node_kernel.py): what the node sees at its /sys paths
    proc/stat     its CPU times, advanced with its simulated load (lab/fake_procfs.py)

``<state>/ssh/`` holds the lab's login key pair (0600), ``known_hosts`` with each node's host key and
an ``ssh_config`` naming every node. A node runs as long as its init process; stopping it ends every
process in its mount namespace and every descendant of one (the node's services in their sandboxes'
namespaces, its pods), and with the last one the namespace and all its mounts are gone.
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import io
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

import yaml

from lab import fake_procfs, fake_sysfs, node_systemctl, pki, process
from lab.components import network, site_dns

LAB_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = LAB_DIR.parent
LOGIN_USER = "ansible"
LOGIN_UID = 2000  # not used by the Debian base system or this machine's accounts
SSH_PORT = 22
NODE_PYTHON = "/usr/bin/python3"
ADDRESS_PREFIX = "127.0.1."  # where the controller reaches a node (its sshd, relayed in by the border)
# The node's own address on the cluster's network, inside the lab's namespace: its InternalIP, where
# its kubelet API and sshd listen and what pods and the API server reach it at (a node's address is
# not loopback: kube-apiserver refuses to proxy to one and a pod could never reach it).
NODE_IP_PREFIX = "10.0.1."
# kubeadm's kubelet configuration (the fields that matter here); reservedSystemCPUs on workers,
# as a cluster with CPU pools sets it (the cpu_power role reads it).
WORKER_RESERVED_CPUS = "0-1"


class NodeError(RuntimeError):
    """A node could not be prepared, started or stopped; the message says why."""


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    address: str
    control_plane: bool
    # The node's kernel (lab/fake_sysfs.py scenario and shape); None: the lab's default.
    scenario: str | None = None
    cpus: int | None = None
    # A worker is a SPECpower server (lab/components/node_power.py): its id, and the TDP its RAPL
    # packages report.
    power_server: str = ""
    tdp_w: float | None = None
    # Its own address on the cluster's network when that is not ``address`` (a lab node inside the
    # lab's network namespace: lab_node_ip); a host of its own in this machine's namespace has one.
    internal_address: str = ""

    @property
    def node_ip(self) -> str:
        """The node's InternalIP (kubelet's --node-ip), where its sshd listens."""
        return self.internal_address or self.address


def lab_node_ip(address: str) -> str:
    """A lab node's address on the cluster's network: the same last octet as the controller's."""
    return NODE_IP_PREFIX + address.rsplit(".", 1)[1]


def node_address(index: int, control_plane: bool) -> str:
    return f"{ADDRESS_PREFIX}{1 if control_plane else 10 + index}"


def _cmdline(pid: int) -> list[str]:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _mnt_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def pids_in_namespace(ns: str) -> list[int]:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and _mnt_ns(int(entry.name)) == ns:
            found.append(int(entry.name))
    return sorted(found)


def node_processes(ns: str) -> list[int]:
    """Every process of the node whose mount namespace is ``ns``: those in it and all their
    descendants, which includes the processes in mount namespaces of their own below the node's
    (a service in its sandbox, lab/node_systemctl.py; a pod, lab/kubelet)."""
    members = pids_in_namespace(ns)
    return sorted({*members, *node_systemctl.below(members)})


def power_off(ns: str, rounds: int = 50) -> list[int]:
    """What a power cut does to a node's processes: every one of them ends. Each is stopped
    (SIGSTOP) until no new one appears - a stopped process cannot fork, and one whose parent is
    stopped is not orphaned, so none escapes by being reparented away from the node - and then
    killed. Returns the pids it found."""
    if ns == _mnt_ns(os.getpid()):
        raise NodeError(f"refusing to power off {ns}: it is the controller's own mount namespace")
    stopped: set[int] = set()
    for _round in range(rounds):
        new = set(node_processes(ns)) - stopped
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sorted(stopped)


def port_open(address: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def sshd_answers(address: str, port: int = 22, timeout: float = 2.0) -> bool:
    """sshd itself answered (its version banner), not only the lab's border relaying the port."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


class NodeHosts:
    """Prepare, start, stop and reboot the lab's node hosts."""

    def __init__(self, state_dir: pathlib.Path, nodes: list[Node], scenario: str, cpus: int | None, log=print):
        self.state_dir = state_dir
        self.nodes = {n.name: n for n in nodes}
        self.scenario = scenario
        self.cpus = cpus
        self.log = log

    # --- paths --------------------------------------------------------------------------------
    def root(self, name: str) -> pathlib.Path:
        return self.state_dir / "nodes" / name

    def disk(self, name: str) -> pathlib.Path:
        return self.root(name) / "disk"

    def sysfs(self, name: str) -> pathlib.Path:
        """The node's kernel tree on this machine (its bookkeeping; the node sees ``kernel_mount``)."""
        return self.root(name) / "sys"

    def kernel_mount(self, name: str) -> pathlib.Path:
        return self.root(name) / "kernel"

    @property
    def ssh_dir(self) -> pathlib.Path:
        return self.state_dir / "ssh"

    @property
    def ssh_key(self) -> pathlib.Path:
        return self.ssh_dir / "id_ed25519"

    # --- preparation (before the first boot) ---------------------------------------------------
    def create_login_key(self) -> None:
        self.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.ssh_key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "poweraware-lab", "-f", str(self.ssh_key)],
                check=True,
            )
        os.chmod(self.ssh_key, 0o600)

    def prepare(self, name: str, cluster_pki: pki.LabPki, api_url: str) -> None:
        """Write the node's disk as kubeadm leaves it, and its kernel at power-on."""
        node = self.nodes[name]
        disk = self.disk(name)
        for sub in ("etc", "usr", "var", "opt", "root", "home"):
            (disk / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(disk / "root", 0o700)
        etc = disk / "etc" / "kubernetes"
        (etc / "pki").mkdir(parents=True, exist_ok=True)
        (etc / "manifests").mkdir(parents=True, exist_ok=True)
        pki.atomic_write(etc / "pki" / "ca.crt", cluster_pki.path("ca.crt").read_bytes(), 0o644)
        # Every kubeadm node has a kubelet identity (system:node:<name>); mirror pods use it.
        kubeconfigs: dict[pathlib.Path, tuple[str, str | None]] = {
            etc / "kubelet.conf": (f"system:node:{name}", "system:nodes")
        }
        if node.control_plane:
            for stem in ("ca", "front-proxy-ca", "apiserver", "apiserver-kubelet-client", "front-proxy-client"):
                for suffix, mode in ((".crt", 0o644), (".key", 0o600)):
                    pki.atomic_write(
                        etc / "pki" / f"{stem}{suffix}", cluster_pki.path(stem + suffix).read_bytes(), mode
                    )
            pki.atomic_write(etc / "pki" / "sa.key", cluster_pki.path("sa.key").read_bytes(), 0o600)
            pki.atomic_write(etc / "pki" / "sa.pub", cluster_pki.path("sa.pub").read_bytes(), 0o644)
            kubeconfigs.update(
                {
                    etc / "admin.conf": ("kubernetes-admin", "kubeadm:cluster-admins"),
                    etc / "super-admin.conf": ("kubernetes-super-admin", "system:masters"),
                    etc / "scheduler.conf": ("system:kube-scheduler", None),
                    etc / "controller-manager.conf": ("system:kube-controller-manager", None),
                }
            )
        # A worker reaches the API server at its advertise address, as `kubeadm join` writes its
        # kubelet.conf; 127.0.0.1 is the control-plane node's own (kubeadm's single-node kubeconfigs).
        port = urllib.parse.urlsplit(api_url).port
        server = api_url if node.control_plane else f"https://{network.ADVERTISE_ADDRESS}:{port}"
        pki.write_kubeconfigs(cluster_pki, server, kubeconfigs)
        kubelet_dir = disk / "var" / "lib" / "kubelet"
        kubelet_dir.mkdir(parents=True, exist_ok=True)
        # The kubelet API's serving certificate (lab/kubelet/api.py), from the cluster CA.
        pki.write_kubelet_serving(cluster_pki, kubelet_dir / "pki", name, node.node_ip)
        kubelet_config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # kubeadm's: no anonymous access, tokens reviewed and every request authorised by the API server
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": "/var/lib/kubelet/pki/kubelet.crt",
            "tlsPrivateKeyFile": "/var/lib/kubelet/pki/kubelet.key",
            "cgroupDriver": "systemd",
            "clusterDNS": ["10.96.0.10"],
            "clusterDomain": "cluster.local",
            "staticPodPath": "/etc/kubernetes/manifests",
        }
        if not node.control_plane:
            kubelet_config.update({"cpuManagerPolicy": "static", "reservedSystemCPUs": WORKER_RESERVED_CPUS})
        pki.atomic_write(kubelet_dir / "config.yaml", yaml.safe_dump(kubelet_config, sort_keys=False), 0o644)
        self._install_lab_files(name)
        self._write_site_network_files(disk)
        self.power_on_kernel(name)

    @staticmethod
    def _write_site_network_files(disk: pathlib.Path) -> None:
        """What a site configures on its hosts: the resolver, and the egress proxy for packages.

        The site's resolver (lab/components/site_dns.py) knows the site's hosts and nothing outside
        (nothing can be reached outside the lab's network); pip and apt reach the package registries
        through the lab's egress proxy, which resolves outside - as on a site whose hosts reach the
        internet only through a proxy. Cluster names do not resolve on a node, as on kubeadm hosts
        whose resolver is the site's: only pods whose ``dnsPolicy`` gives them the cluster DNS
        resolve ``*.svc.cluster.local`` (lab/kubelet/sandbox.py); kubeadm's CoreDNS forwards the rest
        to this resolver, as it forwards to a node's resolv.conf."""
        etc = disk / "etc"
        pki.atomic_write(
            etc / "resolv.conf",
            f"# The site's resolver: the site's hosts; pip and apt go through the site's proxy.\n"
            f"nameserver {site_dns.ADDRESS}\n"
            "options timeout:1 attempts:1\n",
            0o644,
        )
        pip = configparser.ConfigParser()
        pip.read("/etc/pip.conf")  # the machine's own settings (a CA bundle, say) stay
        if not pip.has_section("global"):
            pip.add_section("global")
        pip.set("global", "proxy", network.proxy_url())
        text = io.StringIO()
        pip.write(text)
        pki.atomic_write(etc / "pip.conf", text.getvalue(), 0o644)
        apt = etc / "apt" / "apt.conf.d"
        apt.mkdir(parents=True, exist_ok=True)
        pki.atomic_write(
            apt / "90site-proxy",
            f'Acquire::http::Proxy "{network.proxy_url()}";\nAcquire::https::Proxy "{network.proxy_url()}";\n',
            0o644,
        )

    def _install_lab_files(self, name: str) -> None:
        # The kubelet stand-in and the service manager, as a package would install them.
        disk = self.disk(name)
        lib = disk / "usr" / "lib" / "poweraware-lab"
        lib.mkdir(parents=True, exist_ok=True)
        for source in ("node_init.py", "stress_ng.py"):
            shutil.copyfile(LAB_DIR / source, lib / source)
        # The kubelet as a package directory (lab/kubelet: its modules import one another
        # relatively), every module of it and nothing a previous copy left.
        kubelet = lib / "kubelet"
        shutil.rmtree(kubelet, ignore_errors=True)
        kubelet.mkdir(exist_ok=True)
        for module in sorted((LAB_DIR / "kubelet").glob("*.py")):
            shutil.copyfile(module, kubelet / module.name)
        sbin = disk / "usr" / "local" / "sbin"
        sbin.mkdir(parents=True, exist_ok=True)
        # Installed as an executable for the node's own interpreter (the source has no shebang).
        (sbin / "systemctl").write_text("#!/usr/bin/python3\n" + (LAB_DIR / "node_systemctl.py").read_text())
        os.chmod(sbin / "systemctl", 0o755)  # noqa: S103 - an executable in /usr/local/sbin
        # and `journalctl -u UNIT`, which it answers from its services' journal files
        journalctl = disk / "usr" / "local" / "bin" / "journalctl"
        journalctl.parent.mkdir(parents=True, exist_ok=True)
        journalctl.unlink(missing_ok=True)
        journalctl.symlink_to("../sbin/systemctl")

    def power_on_kernel(self, name: str, **firmware) -> None:
        """The node's kernel as at power-on: cpufreq and powercap at their boot values. ``firmware``:
        shape keys of lab/fake_sysfs.py the machine's firmware changed (``powercap="locked"``)."""
        node = self.nodes[name]
        shape: dict = {"cpus": node.cpus or self.cpus} if (node.cpus or self.cpus) else {}
        if node.tdp_w:
            shape["tdp_w"] = node.tdp_w
        shape.update(firmware)
        fake_sysfs.build_tree(self.sysfs(name), node.scenario or self.scenario, rebuild=True, **shape)
        stat = fake_procfs.stat_path(self.sysfs(name))
        if node.power_server:  # its CPU time follows the load the power meter simulates
            fake_procfs.power_on(stat, self.sysfs(name))
        else:  # nothing would advance it: the node sees this machine's
            stat.unlink(missing_ok=True)

    # --- run ----------------------------------------------------------------------------------
    def network_host(self, name: str) -> network.Host:
        node = self.nodes[name]
        return network.Host(name, node.node_ip, network.pod_cidr(node.address))

    def _network(self, name: str) -> dict:
        """How a worker configures its network at boot (lab/components/network.py): none for the
        control-plane node, whose namespace is the lab's, nor for a host of its own in this
        machine's namespace (no ``internal_address``)."""
        node = self.nodes[name]
        if node.control_plane or not node.internal_address:
            return {}
        gateway = next(n for n in self.nodes.values() if n.control_plane)
        peers = [self.network_host(n) for n in self.nodes]
        return {
            "interface": network.NODE_INTERFACE,
            "sysctls": network.NODE_SYSCTLS,
            "commands": network.node_commands(self.network_host(name), gateway.node_ip, peers),
        }

    def _config(self, name: str, images: pathlib.Path, kubelet_args: list[str] | None) -> pathlib.Path:
        node = self.nodes[name]
        hide = [str(REPO_ROOT), str(self.state_dir)]
        config = {
            "name": name,
            "address": node.node_ip,
            "ssh_port": SSH_PORT,
            "disk": str(self.disk(name)),
            "overlay_work": str(self.root(name) / "overlay-work"),
            "sysfs": str(self.kernel_mount(name)),
            "proc_stat": str(fake_procfs.stat_path(self.sysfs(name))),
            "images": str(images),
            "hide": hide,
            "user": LOGIN_USER,
            "uid": LOGIN_UID,
            "authorized_key": (self.ssh_dir / "id_ed25519.pub").read_text(),
            "cluster_hosts": {n.name: n.node_ip for n in self.nodes.values()},
            "kubelet": kubelet_args or [],
            "network": self._network(name),
        }
        path = self.root(name) / "node.json"
        pki.atomic_write(path, json.dumps(config, indent=2) + "\n", 0o600)
        return path

    def start(
        self,
        name: str,
        images: pathlib.Path,
        kubelet_args: list[str] | None,
        spawn,
        in_site_switch=None,
        timeout: float = 30.0,
    ) -> dict:
        """Boot the node; ``spawn(name, argv)`` starts a process in the lab's network and returns its
        record, ``in_site_switch(argv)`` is the command line that runs ``argv`` in the site's switch
        (lab/components/site_switch.py), where its cable plugs in (a host of its own in this
        machine's namespace, whose address is its own, has no cable: None)."""
        config = self._config(name, images, kubelet_args)
        kernel = self._start_kernel(name)
        # The node's own copy of its init: the node's Python runs it, nothing of the checkout.
        init = self.disk(name) / "usr" / "lib" / "poweraware-lab" / "node_init.py"
        node = self.nodes[name]
        # A worker is a host of its own on the site's network: a network namespace made at its boot,
        # gone with its last process (the control-plane node's is the lab's: lab/components/network.py).
        own_network = ["--net"] if self._network(name) else []
        argv = ["unshare", "--mount", "--uts", *own_network, "--propagation", "private"]
        argv += [NODE_PYTHON, str(init), str(config)]
        try:
            info = spawn(f"node/{name}", argv)
            if own_network:  # its cable to the site's network; its init waits for it
                self._cable(name, info["pid"], in_site_switch, timeout)
        except BaseException:
            self._stop_kernel(name, kernel)
            raise
        info["kernel"] = kernel
        node = self.nodes[name]
        deadline = time.monotonic() + timeout
        host_key = self.disk(name) / "etc" / "ssh" / "ssh_host_ed25519_key.pub"
        while time.monotonic() < deadline:
            if not _alive(info["pid"]):
                raise NodeError(f"node {name} did not boot; see {info['log']}")
            if host_key.exists() and sshd_answers(node.address, SSH_PORT):
                info["mnt_ns"] = _mnt_ns(info["pid"])
                return info
            time.sleep(0.1)
        raise NodeError(f"node {name}: sshd did not answer on {node.address}:{SSH_PORT} within {timeout:.0f} s")

    def _cable(self, name: str, pid: int, in_site_switch, timeout: float) -> None:
        """Plug the worker into the site's network once its first process has its own namespace
        (``unshare`` has made it when it has run the node's Python)."""
        deadline = time.monotonic() + timeout
        while _cmdline(pid)[:1] != [NODE_PYTHON]:
            if not _alive(pid) or time.monotonic() > deadline:
                raise NodeError(f"node {name} did not start its init; see its log")
            time.sleep(0.01)
        host = self.network_host(name)
        # The near end of the last boot's cable goes with that boot's namespace, which the kernel
        # frees in the background: a quick reboot can still find it.
        subprocess.run(
            in_site_switch(["ip", "link", "delete", network.cable_name(host)]), capture_output=True, check=False
        )
        for command in network.cable_commands(host, pid):
            done = subprocess.run(in_site_switch(command), capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise NodeError(f"node {name}: cabling it failed: {' '.join(command)}: {done.stderr.strip()}")

    def _start_kernel(self, name: str, timeout: float = 15.0) -> dict:
        """Serve the node's tree through the kernel model (lab/components/node_kernel.py) at
        ``kernel_mount``, before the node's mount namespace copies this machine's mounts."""
        mountpoint = self.kernel_mount(name)
        unmount(mountpoint)  # a kernel that died with SIGKILL leaves its mount behind
        mountpoint.mkdir(mode=0o755, parents=True, exist_ok=True)
        logs = self.state_dir / "logs"
        logs.mkdir(exist_ok=True)
        log_path = logs / f"kernel-{name}.log"
        argv = [sys.executable, "-m", "lab.components.node_kernel", str(self.sysfs(name)), str(mountpoint)]
        kernel = process.spawn(argv, log_path, self.state_dir, self.state_dir, {"PYTHONPATH": str(REPO_ROOT)})
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mountpoint):
            if not _alive(kernel["pid"]) or time.monotonic() > deadline:
                self._stop_kernel(name, kernel)
                raise NodeError(
                    f"node {name}: its kernel (FUSE at {mountpoint}) did not mount within {timeout:.0f} s; it needs "
                    f"root, /dev/fuse, libfuse3 (Debian fuse3) and mfusepy: see {log_path}\n"
                    f"{process.log_tail(log_path)}"
                )
            time.sleep(0.05)
        return kernel

    def _stop_kernel(self, name: str, kernel: dict) -> list[int]:
        pid = kernel["pid"]
        running = _alive(pid, kernel.get("start_time"))
        if running:
            process.stop_process_group(pid)  # libfuse unmounts on SIGTERM
        _reap(pid)
        unmount(self.kernel_mount(name))
        return [pid] if running else []

    def write_ssh_files(self) -> None:
        """known_hosts with each node's own host key, and an ssh_config naming every node."""
        known, config = [], []
        for node in self.nodes.values():
            public = self.disk(node.name) / "etc" / "ssh" / "ssh_host_ed25519_key.pub"
            if not public.exists():
                continue  # not booted yet: it has no host key
            key = public.read_text().split()
            known.append(f"{node.address},{node.name} {key[0]} {key[1]}")
            config += [
                f"Host {node.name} {node.address}",
                f"  HostName {node.address}",
                f"  User {LOGIN_USER}",
                f"  IdentityFile {self.ssh_key}",
                f"  UserKnownHostsFile {self.ssh_dir / 'known_hosts'}",
                "  IdentitiesOnly yes",
                "",
            ]
        pki.atomic_write(self.ssh_dir / "known_hosts", "\n".join(known) + "\n", 0o644)
        pki.atomic_write(self.ssh_dir / "ssh_config", "\n".join(config), 0o644)

    def stop(self, name: str, info: dict, grace: float = 15.0) -> list[int]:
        """Stop the node: its init stops its services (the units its service manager runs, then
        sshd and the kubelet); whatever else is left of it (SSH sessions, commands started over
        SSH, a service's processes in their sandbox's namespace) is killed as by a power cut
        (``power_off``). Returns the pids that were running."""
        pid, ns = info["pid"], info.get("mnt_ns")
        members = node_processes(ns) if ns and _mnt_ns(pid) == ns else []
        if _alive(pid, info.get("start_time")):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _alive(pid, info.get("start_time")):
                time.sleep(0.1)
        if ns:
            for _round in range(3):
                left = power_off(ns)
                if not left:
                    break
                members += left
                time.sleep(0.2)
        _reap(pid)
        kernel = self._stop_kernel(name, info["kernel"]) if info.get("kernel") else []
        return sorted(set(members) | {pid} | set(kernel))

    def boot_log(self, name: str) -> str:
        path = self.disk(name) / "var" / "log" / "lab" / "boot.log"
        return path.read_text() if path.exists() else ""


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4]
            # mountinfo escapes space, tab, newline and backslash as octal
            points.append(point.encode().decode("unicode_escape") if "\\" in point else point)
    return points


def _detach(point: str) -> None:
    subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


def unmount(path: pathlib.Path) -> None:
    """Detach ``path`` if something is mounted there (a node's kernel whose process is gone)."""
    if str(path) in _mount_points():
        _detach(str(path))


def unmount_under(directory: pathlib.Path) -> None:
    """Detach every mount below ``directory`` (before the lab's state is removed: a FUSE mount
    left by a killed kernel would otherwise stop the removal with ENOTCONN)."""
    prefix = str(directory).rstrip("/") + "/"
    for point in sorted(_mount_points(), reverse=True):
        if point.startswith(prefix):
            _detach(point)


def cpufreq_snapshot(sysfs: pathlib.Path) -> dict[str, str]:
    """The settings a CPU power profile changes, per cpufreq policy: what a boot unit must restore."""
    found = {}
    for policy in sorted((sysfs / "devices/system/cpu/cpufreq").glob("policy*")):
        for attr in ("scaling_min_freq", "scaling_max_freq", "scaling_governor", "energy_performance_preference"):
            path = policy / attr
            if path.exists():
                found[f"{policy.name}/{attr}"] = path.read_text().strip()
    return found


def _alive(pid: int, start_time: int | None = None) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return False
    return start_time is None or int(fields[19]) == start_time


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
