"""The site's resolver: the DNS server a site's DHCP or netplan names in every host's resolv.conf.

A kubeadm host resolves through its site's resolver, and kubeadm's CoreDNS forwards every name
outside ``cluster.local`` to the resolvers of its node's ``/etc/resolv.conf`` (``forward .
/etc/resolv.conf``): with no nameserver there, CoreDNS refuses to start ("no nameservers found"),
so a cluster needs one. The lab's network has no way out (lab/components/network.py), so its site
resolver knows the site's own names only - the nodes, by their InternalIPs, forward and reverse -
and answers NXDOMAIN for every other name, as a resolver of an air-gapped site does; the egress
proxy resolves outside names for pip and apt.

It is CoreDNS (the lab's build of the version kubeadm deploys) with the ``hosts`` plugin, listening
at ``ADDRESS``:53 (UDP and TCP) on the site's network, a site address of the control-plane node's
namespace as the image mirror's is.
"""

from __future__ import annotations

import pathlib
import socket
import struct
from collections.abc import Callable

from lab.components import network
from lab.process import LabProcess

ADDRESS = "10.0.1.53"
PORT = 53


def corefile(hosts_file: pathlib.Path) -> str:
    """Every name from ``hosts_file``; the rest NXDOMAIN (``hosts`` without ``fallthrough`` is
    authoritative for its zone, here the root)."""
    return (
        f".:{PORT} {{\n"
        f"    bind {ADDRESS}\n"
        f"    hosts {hosts_file} {{\n"
        "        ttl 60\n"
        "        reload 0\n"
        "    }\n"
        "    errors\n"
        "}\n"
    )


def hosts_text(names: dict[str, str]) -> str:
    return "".join(f"{address} {name}\n" for name, address in sorted(names.items()))


def query(name: str) -> bytes:
    """A recursive A query for ``name`` (ID 0x5a5a)."""
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split("."))
    return struct.pack("!HHHHHH", 0x5A5A, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", 1, 1)


def answers(netns: str, name: str, timeout: float = 1.0) -> bool:
    """Whether the resolver answers ``name`` with NOERROR and at least one record, asked from inside
    the lab's network namespace."""
    sock = network.socket_in(netns, socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.settimeout(timeout)
        sock.sendto(query(name), (ADDRESS, PORT))
        reply = sock.recv(4096)
    except OSError:
        return False
    finally:
        sock.close()
    if len(reply) < 12:
        return False
    ident, flags, _questions, count = struct.unpack("!HHHH", reply[:8])
    return ident == 0x5A5A and flags & 0x000F == 0 and count > 0


def component(
    bin_dir: pathlib.Path, state_dir: pathlib.Path, names: dict[str, str], netns: Callable[[], str], probe: str
) -> LabProcess:
    """The resolver's process; ``names`` are the site's hosts (name -> address), ``netns`` gives the
    lab's network namespace path once the border holds it, ``probe`` a name it must answer."""
    directory = state_dir / "site-dns"
    directory.mkdir(parents=True, exist_ok=True)
    hosts_file = directory / "hosts"
    hosts_file.write_text(hosts_text(names))
    (directory / "Corefile").write_text(corefile(hosts_file))
    return LabProcess(
        "site-dns",
        [str(bin_dir / "coredns"), "-conf", str(directory / "Corefile")],
        health=lambda: answers(netns(), probe),
    )
