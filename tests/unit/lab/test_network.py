"""The lab's site network and pod overlay (lab/components/network.py), built for real in network
namespaces from the same commands the lab runs: the site's switch in a namespace of its own, and a
control-plane node and three workers cabled to it. What a NetworkPolicy engine sees depends on it: a
node's connection to a pod on another node must arrive from the node's tunnel address (flannel's and
Calico's VXLAN), a pod's from the pod's own address, and a node's connection to another node from its
InternalIP."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading

import pytest

from lab.components import network
from lab.kubelet import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

CONTROL = network.Host("cp", "10.0.1.1", network.pod_cidr("127.0.1.1"))
WORKERS = [network.Host(f"w{i}", f"10.0.1.1{i}", network.pod_cidr(f"127.0.1.1{i}")) for i in (1, 2, 3)]


def wait_unshared(holder: subprocess.Popen) -> None:
    """unshare has made the namespace once it runs sleep."""
    while os.readlink(f"/proc/{holder.pid}/exe").endswith("unshare"):
        threading.Event().wait(0.005)


def run(pid: int, argv: list[str]) -> None:
    subprocess.run(network.enter_argv(pid) + argv, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def site():
    """{host name: pid of a process holding its namespace}, wired as the lab wires its nodes."""
    holders = {}
    pods: list[subprocess.Popen] = []
    try:
        for name in ["switch", *(host.name for host in [CONTROL, *WORKERS])]:
            holders[name] = subprocess.Popen(["unshare", "--net", "sleep", "600"])
        for holder in holders.values():
            wait_unshared(holder)
        switch, control = holders["switch"].pid, holders[CONTROL.name].pid
        for argv in network.switch_commands():
            run(switch, argv)
        run(control, ["ip", "link", "set", "lo", "up"])
        run(control, ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
        for argv in network.cable_commands(CONTROL, control):
            run(switch, argv)
        for argv in network.control_plane_commands(CONTROL, WORKERS):
            run(control, argv)
        for host in WORKERS:
            pid = holders[host.name].pid
            for argv in network.cable_commands(host, pid):
                run(switch, argv)
            for key, value in network.NODE_SYSCTLS.items():
                run(pid, ["sh", "-c", f"echo {value} > /proc/sys/{key}"])
            for argv in network.node_commands(host, CONTROL.node_ip, [CONTROL, *WORKERS]):
                run(pid, argv)
        yield {"pods": pods} | {name: holder.pid for name, holder in holders.items()}
    finally:
        for holder in [*holders.values(), *pods]:
            holder.kill()
            holder.wait()


def pod_address(host: network.Host) -> str:
    return host.pod_cidr.rsplit(".", 1)[0] + ".2"


@contextlib.contextmanager
def server(pid: int, address: str):
    """A TCP server in the namespace held by ``pid`` on ``address``; yields the peers it accepted."""
    listener = network.socket_in(network.netns_path(pid))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, 8080))
    listener.listen(8)
    peers: list[str] = []

    def accept():
        with contextlib.suppress(OSError):
            while True:
                conn, peer = listener.accept()
                peers.append(peer[0])
                conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield peers
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept, which holds the port until it returns
        listener.close()


def connect(pid: int, address: str) -> None:
    client = network.socket_in(network.netns_path(pid))
    try:
        client.settimeout(5)
        client.connect((address, 8080))
    finally:
        client.close()


def add_pod(site, host: network.Host, address: str = "") -> int:
    """A pod on the node, wired by the lab kubelet's own commands (lab/kubelet/sandbox.py): the pid
    holding its namespace (the node's holders end it: see ``site``)."""
    holder = subprocess.Popen(["unshare", "--net", "sleep", "600"])
    site["pods"].append(holder)
    wait_unshared(holder)
    interface = sandbox.host_interface(f"{host.name}-{len(site['pods'])}")
    for where, argv in sandbox.sandbox_plan(interface, address or pod_address(host), holder.pid):
        run(site[host.name] if where == "node" else holder.pid, argv)
    return holder.pid


def wait_for(peers: list[str]) -> str:
    for _attempt in range(200):
        if peers:
            return peers[0]
        threading.Event().wait(0.01)
    raise AssertionError("the server accepted nothing")


def test_a_node_reaches_a_pod_on_another_node_from_its_tunnel_address(site):
    worker = WORKERS[1]
    pod = add_pod(site, worker)
    with server(pod, pod_address(worker)) as peers:
        connect(site[CONTROL.name], pod_address(worker))  # kube-apiserver's aggregator, kube-scheduler
        assert wait_for(peers) == CONTROL.vtep == "10.244.1.0"
    with server(pod, pod_address(worker)) as peers:
        connect(site[WORKERS[0].name], pod_address(worker))  # another worker's host network (collectd)
        assert wait_for(peers) == WORKERS[0].vtep == "10.244.11.0"


def test_a_pod_reaches_a_pod_on_another_node_from_its_own_address(site):
    source, target = WORKERS[0], WORKERS[2]
    source_pod, target_pod = add_pod(site, source), add_pod(site, target)
    with server(target_pod, pod_address(target)) as peers:
        connect(source_pod, pod_address(target))
        assert wait_for(peers) == pod_address(source)
    with server(source_pod, pod_address(source)) as peers:
        connect(site[CONTROL.name], pod_address(source))
        assert wait_for(peers) == CONTROL.vtep


def test_nodes_reach_each_other_by_their_internal_addresses(site):
    worker = WORKERS[2]
    with server(site[worker.name], worker.node_ip) as peers:
        connect(site[CONTROL.name], worker.node_ip)  # kube-apiserver to a kubelet, the lab's sshd relay
        assert wait_for(peers) == CONTROL.node_ip
    with server(site[CONTROL.name], CONTROL.node_ip) as peers:
        connect(site[worker.name], CONTROL.node_ip)
        assert wait_for(peers) == worker.node_ip


def test_no_nodes_firewall_sees_the_site_switchs_traffic(site):
    """A pod's call to another node's InternalIP (metrics-server scraping a kubelet) leaves over the
    site's network and its replies come back over the overlay. A node that bridged the site's
    network would see only the first half, and kube-proxy's ``KUBE-FORWARD`` rule there (conntrack
    INVALID: drop) would drop the call after its handshake: the switch has a namespace of its own."""
    control = site[CONTROL.name]
    rule = ["FORWARD", "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"]
    run(control, ["iptables", "-A", *rule])  # as kube-proxy has it on every node
    try:
        source, target = WORKERS[1], WORKERS[0]
        pod = add_pod(site, source, source.pod_cidr.rsplit(".", 1)[0] + ".3")  # beside the other tests' pods
        listener = network.socket_in(network.netns_path(site[target.name]))
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((target.node_ip, 8081))
        listener.listen(1)
        received = []

        def serve():
            conn, _peer = listener.accept()
            with conn:
                data = b""
                while len(data) < 200_000 and (chunk := conn.recv(65536)):
                    data += chunk
                received.append(len(data))
                conn.sendall(b"done")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        client = network.socket_in(network.netns_path(pod))
        try:
            client.settimeout(5)
            client.connect((target.node_ip, 8081))
            client.sendall(b"x" * 200_000)
            assert client.recv(4) == b"done"
        finally:
            client.close()
            listener.close()
        assert received == [200_000]
    finally:
        run(control, ["iptables", "-D", *rule])


def test_the_overlay_is_flannels_and_every_name_fits():
    assert network.OVERLAY_MTU == network.UNDERLAY_MTU - 50  # VXLAN over IPv4
    macs = {host.vtep_mac for host in [CONTROL, *WORKERS]}
    assert len(macs) == 4 and all(mac.startswith("0e:00:") for mac in macs)
    assert all(len(network.cable_name(host)) <= 15 for host in WORKERS)  # IFNAMSIZ - 1
    assert network.pod_cidr("127.0.1.12") == "10.244.12.0/24"
    commands = network.node_commands(WORKERS[0], CONTROL.node_ip, [CONTROL, *WORKERS])
    routes = [c for c in commands if c[:3] == ["ip", "route", "replace"]]
    # every other node's pod CIDR, through the tunnel; none for its own
    assert sorted(r[3] for r in routes) == sorted(h.pod_cidr for h in [CONTROL, *WORKERS[1:]])


def test_a_socket_in_a_namespace_is_made_there(site):
    sock = network.socket_in(network.netns_path(site[CONTROL.name]))
    try:
        sock.bind((CONTROL.node_ip, 0))  # only the control-plane node's namespace has this address
    finally:
        sock.close()
    outside = socket.socket()
    try:
        with pytest.raises(OSError):
            outside.bind((CONTROL.node_ip, 0))
    finally:
        outside.close()
