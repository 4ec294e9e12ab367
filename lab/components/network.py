"""The lab's network: the control-plane node's network namespace, the site's network beneath every
node, the pod overlay between them, and the lab's border.

Why namespaces of its own: kube-apiserver refuses loopback addresses in Endpoints and
EndpointSlices (``ValidateEndpointIP``), so pods with 127.x addresses could never be reached through
a Service, Prometheus' endpointslice discovery or the aggregator's endpoint routing. The lab
therefore runs etcd, the control plane and the nodes in network namespaces whose only way out is
this process: no packet can leave. Inside:

- the lab's own namespace is the control-plane node's: etcd, kube-apiserver, the controller
  manager, kwok and the control-plane node's processes run there, its ``eth0`` holding the node's
  InternalIP (10.0.1.1);
- the site's network (``NODE_NETWORK``) is a bridge ``br0`` in a namespace of its own, the site's
  switch (lab/components/site_switch.py, ``switch_commands``), so no node's firewall sees what it
  carries between the others; every node is cabled to it by a veth pair (``cable_commands``), as
  servers are to a switch;
- every worker has a network namespace of its own (made when the node boots, gone when it stops):
  ``eth0`` with its InternalIP (lab/nodes.py ``node_ip``), a default route to the control-plane
  node, which carries the site's services (below), and its kubelet's pods;
- the pods' network is an overlay, as flannel's VXLAN backend and Calico's VXLAN mode build it
  (``overlay_commands``): each node has a VXLAN device ``flannel.1`` whose address is the network
  address of the node's pod CIDR, and every other node's pod CIDR is routed through it. So a
  node's connection to a pod on another node leaves through the tunnel and arrives from the
  tunnel's address (10.244.N.0), not from the node's InternalIP: the source a NetworkPolicy sees
  on Calico IPIP/VXLAN and flannel clusters. Pod to pod, the pods' own addresses arrive;
- Services are kube-proxy's (kubeadm's add-on, on every node: lab/cluster.py): a ClusterIP is
  DNATed to an endpoint on the node where the connection starts, so the endpoint sees the client's
  own address. kube-proxy's rules act after the first route lookup, so a ClusterIP needs a route
  on every node, as a server's default route gives it: a worker's default route to the
  control-plane node, and the control-plane node's route for the service CIDR to the site's router
  ``SITE_GATEWAY`` (nothing answers there: nothing leaves the lab, and no other route leads out);
- the API server has a site address of its own, ``ADVERTISE_ADDRESS`` (a real control-plane node's
  address), that pods reach it at through 10.96.0.1:443;
- each pod the lab's kubelet runs has a network namespace of its own joined by a veth pair
  (lab/kubelet/sandbox.py), its address in the node's share of ``POD_CIDR`` routed to its veth; the
  node forwards between them (``ip_forward``), as a node does.

This process is the border (run with the controller's Python, standard library only):

- it binds, in the machine's own namespace, the addresses the controller uses - the control plane's
  ports on 127.0.0.1 and each node's sshd at 127.0.1.N:22 - and relays every connection inside the
  lab (to 127.0.0.1 and to the node's own address, 10.0.1.N:22), so Ansible, kubectl and the tests
  see what they see on a real cluster whose nodes the controller reaches by management addresses;
- it is the site's egress proxy for the nodes (an HTTP proxy at ``EGRESS_PROXY``, CONNECT and
  absolute-URI requests), which connects out from the machine's namespace as a bare-metal site's
  proxy does: the nodes' pip and apt reach the package registries through it, nothing else does.

It creates the namespace (``unshare(CLONE_NEWNET)`` after binding the outside listeners) with the
site's addresses on ``lo``, writes its ready file, and holds the namespace for the other processes,
which join it with ``nsenter --net``; the lab then cables it to the switch and configures its
``eth0`` and end of the overlay (``control_plane_commands``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import urllib.parse

from lab.process import LabProcess, python_module

POD_CIDR = "10.244.0.0/16"  # the lab kubelet's pods: 10.244.<node's last octet>.0/24
KWOK_POD_CIDR = "10.245.0.0/16"  # pods kwok only pretends to run: addresses nothing answers on
EGRESS_PROXY = ("10.0.0.1", 3128)
ADVERTISE_ADDRESS = "10.0.0.2"  # kube-apiserver's --advertise-address: the kubernetes Service's endpoint
# The cluster's DNS domain and the kube-dns Service's ClusterIP: the tenth address of the service CIDR,
# which kubeadm's DNS add-on reserves and every kubelet's clusterDNS names.
SERVICE_CIDR = "10.96.0.0/12"
CLUSTER_DOMAIN = "cluster.local"
DNS_IP = "10.96.0.10"
# The site's network beneath the nodes: the bridge in the control-plane node's namespace, the
# control-plane node's InternalIP its address (lab/nodes.py NODE_IP_PREFIX).
NODE_NETWORK = "10.0.1.0/24"
# The site's router, absent here (nothing leaves the lab): the control-plane node routes the service
# CIDR to it, as a node's default route carries ClusterIPs before kube-proxy's DNAT picks an endpoint.
SITE_GATEWAY = "10.0.1.254"
BRIDGE = "br0"
NODE_INTERFACE = "eth0"
# Jumbo frames beneath, as bare-metal clusters run them, so the overlay keeps the pods' 1500 bytes
# (VXLAN over IPv4 costs 50 bytes: flannel's MTU rule).
UNDERLAY_MTU = 9000
OVERLAY_MTU = UNDERLAY_MTU - 50
# flannel's VXLAN backend: its device name, VNI 1 and the Linux VXLAN port it uses (8472).
OVERLAY_DEVICE = "flannel.1"
OVERLAY_VNI = 1
OVERLAY_PORT = 8472
# What a worker sets at boot (Debian's systemd-sysctl: loose reverse-path filtering; a node routes
# its pods' packets).
NODE_SYSCTLS = {"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "2", "net/ipv4/conf/default/rp_filter": "2"}
RELAY_BUFFER = 65536
CONNECT_TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True)
class Host:
    """A node on the site's network: its InternalIP and its share of ``POD_CIDR``."""

    name: str
    node_ip: str
    pod_cidr: str

    @property
    def vtep(self) -> str:
        """The address of its VXLAN device: its pod CIDR's network address (flannel's choice)."""
        return str(ipaddress.ip_network(self.pod_cidr).network_address)

    @property
    def vtep_mac(self) -> str:
        """Its VXLAN device's MAC: fixed, so every peer's forwarding entries are known before it boots
        (flannel publishes each node's in a Node annotation; the lab's nodes are known up front)."""
        return "0e:00:" + ":".join(f"{int(octet):02x}" for octet in self.node_ip.split("."))


def pod_cidr(address: str) -> str:
    """A node's share of the pod CIDR: 10.244.<the last octet of its address>.0/24."""
    prefix = POD_CIDR.split(".")[:2]
    return ".".join([*prefix, address.rsplit(".", 1)[-1], "0"]) + "/24"


def overlay_commands(own: Host, underlay: str, peers: list[Host]) -> list[list[str]]:
    """The node's end of the pod overlay, as flannel's VXLAN backend programs it: the device (no
    learning: every peer is written), its address, and per peer a permanent neighbour entry for its
    VXLAN address, a forwarding entry to its InternalIP and the route to its pod CIDR."""
    device = OVERLAY_DEVICE
    commands = [
        ["ip", "link", "add", device, "address", own.vtep_mac, "mtu", str(OVERLAY_MTU), "type", "vxlan",
         "id", str(OVERLAY_VNI), "local", own.node_ip, "dev", underlay, "dstport", str(OVERLAY_PORT), "nolearning"],
        ["ip", "address", "add", f"{own.vtep}/32", "dev", device],
        ["ip", "link", "set", device, "up"],
    ]  # fmt: skip
    for peer in peers:
        if peer.name == own.name:
            continue
        commands += [
            ["ip", "neigh", "replace", peer.vtep, "lladdr", peer.vtep_mac, "dev", device, "nud", "permanent"],
            ["bridge", "fdb", "replace", peer.vtep_mac, "dev", device, "dst", peer.node_ip, "self", "permanent"],
            ["ip", "route", "replace", peer.pod_cidr, "via", peer.vtep, "dev", device, "onlink"],
        ]
    return commands


def node_commands(own: Host, gateway: str, peers: list[Host]) -> list[list[str]]:
    """What a worker configures at boot in its own namespace, once its cable is in: its address on
    the site's network, the default route (the site's services), and the overlay."""
    prefix = ipaddress.ip_network(NODE_NETWORK).prefixlen
    return [
        ["ip", "link", "set", "lo", "up"],
        ["ip", "link", "set", NODE_INTERFACE, "up"],
        ["ip", "address", "add", f"{own.node_ip}/{prefix}", "dev", NODE_INTERFACE],
        ["ip", "route", "add", "default", "via", gateway, "dev", NODE_INTERFACE],
        *overlay_commands(own, NODE_INTERFACE, peers),
    ]


def cable_name(host: Host) -> str:
    """The switch's end of a node's cable (an interface name has at most 15 characters)."""
    return f"veth{host.node_ip.replace('.', '')[-8:]}"


def switch_commands() -> list[list[str]]:
    """The site's switch (lab/components/site_switch.py), in its own namespace: the bridge alone."""
    return [
        ["ip", "link", "set", "lo", "up"],
        ["ip", "link", "add", BRIDGE, "mtu", str(UNDERLAY_MTU), "type", "bridge"],
        ["ip", "link", "set", BRIDGE, "up"],
    ]


def cable_commands(host: Host, node_pid: int) -> list[list[str]]:
    """Run in the switch's namespace: a veth pair whose far end is ``eth0`` in the namespace of the
    node's first process (the border's, for the control-plane node), and whose near end is a port
    of the bridge."""
    near = cable_name(host)
    return [
        ["ip", "link", "add", near, "mtu", str(UNDERLAY_MTU), "type", "veth",
         "peer", "name", NODE_INTERFACE, "mtu", str(UNDERLAY_MTU), "netns", str(node_pid)],
        ["ip", "link", "set", near, "master", BRIDGE, "up"],
    ]  # fmt: skip


def control_plane_commands(own: Host, workers: list[Host]) -> list[list[str]]:
    """The control-plane node's side, once its cable is in: its InternalIP on ``eth0``, the route
    that carries ClusterIPs to kube-proxy's DNAT (the site's router; nothing else leads out), and
    its end of the overlay."""
    prefix = ipaddress.ip_network(NODE_NETWORK).prefixlen
    return [
        ["ip", "link", "set", NODE_INTERFACE, "up"],
        ["ip", "address", "add", f"{own.node_ip}/{prefix}", "dev", NODE_INTERFACE],
        ["ip", "route", "add", SERVICE_CIDR, "via", SITE_GATEWAY, "dev", NODE_INTERFACE],
        *overlay_commands(own, NODE_INTERFACE, [own, *workers]),
    ]


def netns_path(pid: int) -> str:
    return f"/proc/{pid}/ns/net"


def enter_argv(pid: int) -> list[str]:
    """The prefix that starts a command inside the lab's network namespace (held by ``pid``)."""
    return ["nsenter", f"--net={netns_path(pid)}", "--"]


def socket_in(netns: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket of the network namespace at ``netns``, made from outside it (a test's server that
    the cluster must reach): the calling thread enters the namespace for the socket's creation,
    which fixes the socket's namespace, and comes back."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        os.setns(target, os.CLONE_NEWNET)
        try:
            return socket.socket(family, kind)
        finally:
            os.setns(own, os.CLONE_NEWNET)
    finally:
        os.close(own)
        os.close(target)


def http_get(netns: str, url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """``(status, body)`` of an HTTP/1.0 GET of ``url`` from inside the network namespace at
    ``netns``: how this machine reaches a pod's address (Prometheus, for tests and the live replay)."""
    parts = urllib.parse.urlsplit(url)
    sock = socket_in(netns)
    try:
        sock.settimeout(timeout)
        sock.connect((parts.hostname, parts.port or 80))
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {parts.netloc}\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    head, _sep, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def proxy_url() -> str:
    return f"http://{EGRESS_PROXY[0]}:{EGRESS_PROXY[1]}"


def log(message: str) -> None:
    print(f"network: {message}", flush=True)


def component(
    config_path: pathlib.Path,
    ready_file: pathlib.Path,
    forward: list[tuple[str, int, str]],
    addresses: list[str],
) -> LabProcess:
    """The border process; ``forward`` are the outside addresses relayed in (address, port, the
    address inside), ``addresses`` the site's own addresses inside (the mirror's, the
    resolver's). The namespace it makes is the control-plane node's; the lab cables it to the
    site's switch (lab/components/site_switch.py) once it is ready."""
    config = {
        "forward": forward,
        "addresses": addresses,
        "ready_file": str(ready_file),
    }
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    return python_module("network", __name__, [str(config_path)], health=ready_file.exists)


def relay(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides are done, then close both."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(RELAY_BUFFER):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


class Border:
    def __init__(self, config: dict):
        self.config = config
        self.outside_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.lab_fd: int | None = None

    def outside_socket(self, host: str, port: int) -> socket.socket:
        """A connection from the machine's own namespace (this thread enters it for the lookup and
        the socket, whose namespace is fixed when it is made, then comes back)."""
        os.setns(self.outside_fd, os.CLONE_NEWNET)
        try:
            family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
        finally:
            os.setns(self.lab_fd, os.CLONE_NEWNET)
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(address)
        sock.settimeout(None)
        return sock

    # --- into the lab ---------------------------------------------------------------------------
    def serve_inward(self, listener: socket.socket, target: tuple[str, int]) -> None:
        while True:
            client, _peer = listener.accept()
            threading.Thread(target=self._inward, args=(client, target), daemon=True).start()

    @staticmethod
    def _inward(client: socket.socket, target: tuple[str, int]) -> None:
        try:
            inner = socket.create_connection(target, timeout=CONNECT_TIMEOUT)  # made in the lab's namespace
            inner.settimeout(None)
        except OSError:
            client.close()  # nothing listens there (yet): the client sees the connection closed
            return
        relay(client, inner)

    # --- out of the lab -------------------------------------------------------------------------
    def serve_egress(self, listener: socket.socket) -> None:
        while True:
            client, _peer = listener.accept()
            threading.Thread(target=self._egress, args=(client,), daemon=True).start()

    def _egress(self, client: socket.socket) -> None:
        head = b""
        try:
            client.settimeout(30)
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = client.recv(4096)
                if not chunk:
                    client.close()
                    return
                head += chunk
            client.settimeout(None)
            method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                host, _sep, port = target.rpartition(":")
                upstream = self.outside_socket(host.strip("[]"), int(port))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
            elif target.startswith("http://"):
                # Absolute-form requests go to the origin as they are (RFC 9112 3.2.2: a server
                # must accept the absolute form).
                authority = target[len("http://") :].split("/", 1)[0]
                host, _sep, port = authority.partition(":")
                upstream = self.outside_socket(host, int(port or 80))
                rest = head
            else:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\nnot a proxy request\n")
                client.close()
                return
        except (OSError, ValueError) as exc:
            log(f"egress: {exc}")
            with contextlib.suppress(OSError):
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
            client.close()
            return
        if rest:
            upstream.sendall(rest)
        relay(client, upstream)

    # --- start ----------------------------------------------------------------------------------
    def run(self) -> None:
        inward = []
        for address, port, inside in self.config["forward"]:
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(128)
            inward.append((listener, (inside, port)))
        os.unshare(os.CLONE_NEWNET)
        self.lab_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        commands = [["ip", "link", "set", "lo", "up"]]
        own = [EGRESS_PROXY[0], ADVERTISE_ADDRESS, *self.config["addresses"]]
        commands += [["ip", "address", "add", f"{address}/32", "dev", "lo"] for address in own]
        for argv in commands:
            subprocess.run(argv, check=True)
        # Between the pods' veths and to the control plane, as a node routes for its pods.
        pathlib.Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        egress = socket.socket()
        egress.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        egress.bind(EGRESS_PROXY)
        egress.listen(128)
        for listener, target in inward:
            threading.Thread(target=self.serve_inward, args=(listener, target), daemon=True).start()
        threading.Thread(target=self.serve_egress, args=(egress,), daemon=True).start()
        ready = pathlib.Path(self.config["ready_file"])
        ready.write_text(f"{os.getpid()}\n")
        log(f"namespace ready; relaying {len(inward)} addresses in, egress proxy at {proxy_url()}")
        threading.Event().wait()


def main() -> None:
    config = json.loads(pathlib.Path(sys.argv[1]).read_text())
    Border(config).run()


if __name__ == "__main__":
    main()
