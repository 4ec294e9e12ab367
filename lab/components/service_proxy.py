"""The lab's kube-proxy: every Service's ClusterIP:port answers inside the lab's network namespace.

A real cluster programs iptables/IPVS from Services and EndpointSlices; the lab has one network
namespace (lab/components/network.py) whose service CIDR is routed to ``lo``, so a user-space proxy
does the same job: for each TCP port of each Service with a ClusterIP it listens on
``clusterIP:port`` and relays each connection to a ready endpoint of the port's EndpointSlices
(round robin), as kube-proxy's user-space mode did. A Service without ready endpoints refuses
connections (the listener is closed), as kube-proxy's REJECT rule does. UDP ports are left out (the
lab's cluster DNS serves its own ClusterIP: lab/components/cluster_dns.py).

It reads Services and EndpointSlices every ``SYNC_INTERVAL`` seconds with kube-proxy's own identity
(``system:kube-proxy``, bound to ``system:node-proxier`` by the API server's bootstrap policy).
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import socket
import threading
import time

from lab.api import Api
from lab.components.network import relay
from lab.process import LabProcess, python_module

SYNC_INTERVAL = 1.0
CONNECT_TIMEOUT = 5.0
# Served by the lab's cluster DNS itself, not relayed.
SELF_SERVED = {("kube-system", "kube-dns")}


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} service-proxy: {message}", flush=True)


def service_ports(services: list[dict]) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(clusterIP, port) -> (namespace, service, port name) for every TCP port of a ClusterIP Service."""
    found = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if key in SELF_SERVED or spec.get("type") == "ExternalName":
            continue
        for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
            if not ip or ip == "None":
                continue
            for port in spec.get("ports") or []:
                if port.get("protocol", "TCP") == "TCP":
                    found[(ip, int(port["port"]))] = (key[0], key[1], port.get("name", ""))
    return found


def ready_endpoints(slices: list[dict]) -> dict[tuple[str, str, str], list[tuple[str, int]]]:
    """(namespace, service, port name) -> ready (address, port) pairs, from EndpointSlices."""
    found: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for eps in slices:
        meta = eps.get("metadata") or {}
        service = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not service or eps.get("addressType") != "IPv4":
            continue
        for port in eps.get("ports") or []:
            if port.get("protocol", "TCP") != "TCP" or port.get("port") is None:
                continue
            key = (meta.get("namespace", ""), service, port.get("name") or "")
            for endpoint in eps.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    found.setdefault(key, []).append((address, int(port["port"])))
    return {key: sorted(set(value)) for key, value in found.items()}


class Listener:
    def __init__(self, address: tuple[str, int], backends: list[tuple[str, int]]):
        self.address = address
        self.backends = backends
        self._cycle = itertools.cycle(range(1 << 30))
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(address)
        self.sock.listen(128)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _peer = self.sock.accept()
            except OSError:
                return  # closed: the Service or its endpoints are gone
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        backends = list(self.backends)
        start = next(self._cycle)
        for offset in range(len(backends)):
            backend = backends[(start + offset) % len(backends)]
            try:
                upstream = socket.create_connection(backend, timeout=CONNECT_TIMEOUT)
            except OSError:
                continue
            upstream.settimeout(None)
            relay(client, upstream)
            return
        client.close()

    def close(self) -> None:
        self.sock.close()


class ServiceProxy:
    def __init__(self, api: Api):
        self.api = api
        self.listeners: dict[tuple[str, int], Listener] = {}

    def sync(self) -> None:
        services, slices = services_and_slices(self.api)
        ports, endpoints = service_ports(services), ready_endpoints(slices)
        wanted = {address: endpoints.get(key, []) for address, key in ports.items()}
        for address in list(self.listeners):
            if not wanted.get(address):
                self.listeners.pop(address).close()
        for address, backends in wanted.items():
            if not backends:
                continue
            if address in self.listeners:
                self.listeners[address].backends = backends
                continue
            try:
                self.listeners[address] = Listener(address, backends)
                log(f"{address[0]}:{address[1]} -> {', '.join(f'{a}:{p}' for a, p in backends)}")
            except OSError as exc:
                log(f"cannot listen on {address[0]}:{address[1]}: {exc}")

    def run(self) -> None:
        while True:
            try:
                self.sync()
            except OSError as exc:  # the API server restarting: keep what is there, try again
                log(f"sync failed: {exc}")
            time.sleep(SYNC_INTERVAL)


def component(api_url: str, pki_dir: pathlib.Path) -> LabProcess:
    return python_module("service-proxy", __name__, [f"--api={api_url}", f"--pki={pki_dir}"])


def api_arguments(description: str) -> argparse.ArgumentParser:
    """The command line of the lab's API readers (this proxy and the cluster DNS)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--api", required=True)
    parser.add_argument("--pki", type=pathlib.Path, required=True)
    parser.add_argument("--user", default="kube-proxy")
    return parser


def services_and_slices(api: Api) -> tuple[list[dict], list[dict]]:
    return (
        api.get("/api/v1/services")["items"],
        api.get("/apis/discovery.k8s.io/v1/endpointslices")["items"],
    )


def main() -> None:
    args = api_arguments(__doc__.splitlines()[0]).parse_args()
    ServiceProxy(Api(args.api, args.pki, args.user)).run()


if __name__ == "__main__":
    main()
