"""The pod's network, as kubelet, the runtime and the CNI plugin make it: an address from the node's
pod CIDR, network and UTS namespaces held by a process (the pause container's part), a veth pair
routed as Calico routes it, and the pod's resolv.conf.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import ipaddress
import os
import signal
import socket
import subprocess

from . import linux
from .common import DEFAULT_PATH, PodError
from .linux import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUTS, MS_BIND, MS_PRIVATE, MS_REC

POD_GATEWAY = "169.254.1.1"  # Calico's: every pod's next hop, on the node's end of its veth


@dataclasses.dataclass(frozen=True)
class PodNetwork:
    """What kubelet's configuration says of the network: the node's pod CIDR, the cluster DNS."""

    pod_cidr: str
    cluster_dns: str
    cluster_domain: str = "cluster.local"


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


def enter_host_network_pod(resolv: str) -> None:
    """Runs in a host-network static pod's process before exec when kubelet gives it a resolv.conf
    of its own (``ClusterFirstWithHostNet``): a private mount namespace of the node's where only
    /etc/resolv.conf differs."""
    linux.own_namespace(CLONE_NEWNS, "CLONE_NEWNS")
    linux.mount("none", "/", None, MS_REC | MS_PRIVATE)
    linux.mount(resolv, "/etc/resolv.conf", None, MS_BIND)


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
            if linux.libc.setns(fd, flag) != 0:
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
        linux.own_namespace(CLONE_NEWNET | CLONE_NEWUTS, "CLONE_NEWNET|CLONE_NEWUTS", signal.SIGKILL)
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
