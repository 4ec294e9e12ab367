"""The lab's cluster DNS: ``<service>.<namespace>.svc.cluster.local`` answers inside the lab.

What CoreDNS's kubernetes plugin answers for Services, served at the kube-dns ClusterIP that every
kubelet's ``clusterDNS`` names (10.96.0.10, UDP and TCP port 53): an A record with the ClusterIP, or
with the ready endpoint addresses of a headless Service; NODATA for other types of a name that
exists; NXDOMAIN otherwise. Names outside the cluster domain are NXDOMAIN too: the lab has no
upstream resolver, nothing leaves it (the nodes' package managers use the egress proxy, which
resolves outside). Pods with ``dnsPolicy: ClusterFirst`` get a resolv.conf naming this server with
kubelet's search path (lab/kubelet_pods.py); the nodes' own /etc/resolv.conf does not name it, as a
kubeadm host's names the site's resolver, which knows nothing of the cluster.

It reads Services and EndpointSlices every ``SYNC_INTERVAL`` seconds as ``system:kube-proxy``
(list/watch of both is what ``system:node-proxier`` allows).
"""

from __future__ import annotations

import pathlib
import socket
import socketserver
import struct
import threading
import time

from lab.api import Api
from lab.components.service_proxy import api_arguments, ready_endpoints, services_and_slices
from lab.process import LabProcess, python_module

SYNC_INTERVAL = 1.0
TTL = 5
CLUSTER_DOMAIN = "cluster.local"
DNS_IP = "10.96.0.10"
TYPE_A, TYPE_ANY, CLASS_IN = 1, 255, 1
NOERROR, FORMERR, NXDOMAIN, NOTIMP = 0, 1, 3, 4


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} cluster-dns: {message}", flush=True)


def records(services: list[dict], slices: list[dict], domain: str = CLUSTER_DOMAIN) -> dict[str, list[str]]:
    """Fully qualified name (no trailing dot) -> IPv4 addresses."""
    endpoints = ready_endpoints(slices)
    found: dict[str, list[str]] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        fqdn = f"{name}.{ns}.svc.{domain}"
        if spec.get("clusterIP") == "None":
            addresses = {a for (n, s, _p), pairs in endpoints.items() if (n, s) == (ns, name) for a, _port in pairs}
            found[fqdn] = sorted(addresses)
        elif spec.get("clusterIP"):
            found[fqdn] = [ip for ip in spec.get("clusterIPs") or [spec["clusterIP"]] if ":" not in ip]
    return found


def parse_question(packet: bytes) -> tuple[int, int, str, int, int]:
    """(id, flags, name, qtype, end of the question) of a query; ValueError when malformed."""
    if len(packet) < 12:
        raise ValueError("short header")
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1:
        raise ValueError("one question expected")
    labels, offset = [], 12
    while True:
        if offset >= len(packet):
            raise ValueError("truncated name")
        length = packet[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(packet[offset : offset + length].decode("ascii", "replace"))
        offset += length
    if offset + 4 > len(packet):
        raise ValueError("truncated question")
    qtype, _qclass = struct.unpack("!HH", packet[offset : offset + 4])
    return ident, flags, ".".join(labels).lower(), qtype, offset + 4


def answer(packet: bytes, table: dict[str, list[str]], domain: str = CLUSTER_DOMAIN) -> bytes:
    try:
        ident, flags, name, qtype, end = parse_question(packet)
    except ValueError:
        ident = struct.unpack("!H", packet[:2])[0] if len(packet) >= 2 else 0
        return struct.pack("!HHHHHH", ident, 0x8000 | FORMERR, 0, 0, 0, 0)
    opcode = (flags >> 11) & 0xF
    rcode, addresses = NOERROR, []
    if opcode != 0:
        rcode = NOTIMP
    elif name in table:
        addresses = table[name] if qtype in (TYPE_A, TYPE_ANY) else []
    else:
        rcode = NXDOMAIN
    authoritative = 0x0400 if name == domain or name.endswith("." + domain) else 0
    reply_flags = 0x8000 | (opcode << 11) | authoritative | (flags & 0x0100) | 0x0080 | rcode
    out = struct.pack("!HHHHHH", ident, reply_flags, 1, len(addresses), 0, 0) + packet[12:end]
    for address in addresses:
        out += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4) + socket.inet_aton(address)
    return out


class ClusterDns:
    def __init__(self, api: Api, domain: str):
        self.api, self.domain = api, domain
        self.table: dict[str, list[str]] = {}

    def sync_forever(self) -> None:
        while True:
            try:
                services, slices = services_and_slices(self.api)
                self.table = records(services, slices, self.domain)
            except OSError as exc:
                log(f"sync failed: {exc}")
            time.sleep(SYNC_INTERVAL)

    def serve(self, address: str, port: int) -> None:
        dns = self

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                sock.sendto(answer(data, dns.table, dns.domain), self.client_address)

        class Tcp(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while head := self.rfile.read(2):
                    if len(head) < 2:
                        return
                    query = self.rfile.read(struct.unpack("!H", head)[0])
                    reply = answer(query, dns.table, dns.domain)
                    self.wfile.write(struct.pack("!H", len(reply)) + reply)

        socketserver.ThreadingUDPServer.allow_reuse_address = True
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        udp = socketserver.ThreadingUDPServer((address, port), Udp)
        tcp = socketserver.ThreadingTCPServer((address, port), Tcp)
        tcp.daemon_threads = udp.daemon_threads = True
        threading.Thread(target=tcp.serve_forever, daemon=True).start()
        threading.Thread(target=self.sync_forever, daemon=True).start()
        log(f"serving {self.domain} on {address}:{port} (UDP and TCP)")
        udp.serve_forever()


def component(api_url: str, pki_dir: pathlib.Path) -> LabProcess:
    return python_module("cluster-dns", __name__, [f"--api={api_url}", f"--pki={pki_dir}"])


def main() -> None:
    parser = api_arguments(__doc__.splitlines()[0])
    parser.add_argument("--address", default=DNS_IP)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--domain", default=CLUSTER_DOMAIN)
    args = parser.parse_args()
    ClusterDns(Api(args.api, args.pki, args.user), args.domain).serve(args.address, args.port)


if __name__ == "__main__":
    main()
