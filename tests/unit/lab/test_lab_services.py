"""The lab's kube-proxy and cluster DNS: which endpoints a Service gets, what DNS answers (pure parts)."""

from __future__ import annotations

import socket
import struct

from lab.components import cluster_dns, service_proxy

SERVICES = [
    {
        "metadata": {"namespace": "monitoring", "name": "prometheus"},
        "spec": {"clusterIP": "10.96.4.5", "clusterIPs": ["10.96.4.5"], "ports": [{"name": "web", "port": 9090}]},
    },
    {
        "metadata": {"namespace": "monitoring", "name": "collectd"},
        "spec": {"clusterIP": "None", "ports": [{"name": "metrics", "port": 9103}]},
    },
    {
        "metadata": {"namespace": "kube-system", "name": "kube-dns"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]},
    },
    {
        "metadata": {"namespace": "default", "name": "udp-only"},
        "spec": {"clusterIP": "10.96.7.7", "ports": [{"name": "x", "port": 99, "protocol": "UDP"}]},
    },
]
SLICES = [
    {
        "metadata": {"namespace": "monitoring", "labels": {"kubernetes.io/service-name": "prometheus"}},
        "addressType": "IPv4",
        "ports": [{"name": "web", "port": 9091, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["10.244.11.7"], "conditions": {"ready": True}},
            {"addresses": ["10.244.12.9"], "conditions": {"ready": False}},
            {"addresses": ["10.244.13.3"]},  # no conditions: ready (the field's nil means ready)
        ],
    },
    {
        "metadata": {"namespace": "monitoring", "labels": {"kubernetes.io/service-name": "collectd"}},
        "addressType": "IPv4",
        "ports": [{"name": "metrics", "port": 9103, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.244.11.4"]}, {"addresses": ["10.244.12.4"]}],
    },
]


def test_service_ports_skip_headless_udp_and_the_dns_the_lab_serves_itself():
    assert service_proxy.service_ports(SERVICES) == {("10.96.4.5", 9090): ("monitoring", "prometheus", "web")}


def test_ready_endpoints_by_port_name_leave_out_unready_ones():
    found = service_proxy.ready_endpoints(SLICES)
    assert found[("monitoring", "prometheus", "web")] == [("10.244.11.7", 9091), ("10.244.13.3", 9091)]
    assert found[("monitoring", "collectd", "metrics")] == [("10.244.11.4", 9103), ("10.244.12.4", 9103)]


def _query(name: str, qtype: int = cluster_dns.TYPE_A, ident: int = 0x1234) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


def _decode(reply: bytes) -> tuple[int, int, list[str]]:
    ident, flags, _qd, ancount = struct.unpack("!HHHH", reply[:8])
    offset = 12
    while reply[offset]:
        offset += reply[offset] + 1
    offset += 5
    addresses = []
    for _record in range(ancount):
        _ptr, rtype, _cls, _ttl, length = struct.unpack("!HHHIH", reply[offset : offset + 12])
        assert rtype == cluster_dns.TYPE_A and length == 4
        addresses.append(socket.inet_ntoa(reply[offset + 12 : offset + 16]))
        offset += 16
    return ident, flags, addresses


def test_dns_answers_cluster_ips_headless_endpoints_nodata_and_nxdomain():
    table = cluster_dns.records(SERVICES, SLICES)
    ident, flags, addresses = _decode(cluster_dns.answer(_query("prometheus.monitoring.svc.cluster.local"), table))
    assert ident == 0x1234 and flags & 0x8000 and flags & 0x0400 and flags & 0xF == cluster_dns.NOERROR
    assert addresses == ["10.96.4.5"]
    # Case does not matter; a headless Service answers with its ready endpoints.
    _i, _f, addresses = _decode(cluster_dns.answer(_query("Collectd.monitoring.svc.cluster.local"), table))
    assert addresses == ["10.244.11.4", "10.244.12.4"]
    # AAAA of a name that exists: NODATA (NOERROR, no answer), which resolvers need to stop asking.
    _i, flags, addresses = _decode(cluster_dns.answer(_query("prometheus.monitoring.svc.cluster.local", 28), table))
    assert flags & 0xF == cluster_dns.NOERROR and addresses == []
    for missing in ("nothere.monitoring.svc.cluster.local", "prometheus.monitoring.svc", "pypi.org"):
        _i, flags, addresses = _decode(cluster_dns.answer(_query(missing), table))
        assert flags & 0xF == cluster_dns.NXDOMAIN and addresses == [], missing


def test_dns_answers_a_malformed_query_with_formerr():
    reply = cluster_dns.answer(b"\x12\x34\x01", {})
    assert struct.unpack("!HH", reply[:4]) == (0x1234, 0x8000 | cluster_dns.FORMERR)
