# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the API server is, as NetworkPolicy peers (pure).

The control plane runs on the host network, outside any pod selector, so a NetworkPolicy can only
name it by address. The addresses are the ``default/kubernetes`` Service's EndpointSlices (the API
servers' advertise addresses, kept current by the API servers themselves) and the Service's
ClusterIP. Both are allowed: most CNIs evaluate egress after kube-proxy's DNAT (endpoint address
and port), some before it (ClusterIP and Service port). kube-scheduler and the API server's
aggregator call our pods from the same control-plane hosts, so the endpoint addresses are also the
peers our ingress rules admit them from.
"""

from __future__ import annotations

import ipaddress


def api_server_peers(endpoint_slices, service):
    """``{"egress": [rules], "ingress_from": [peers], "errors": [...]}`` for the API server.

    ``endpoint_slices`` are the EndpointSlices labelled ``kubernetes.io/service-name=kubernetes`` in
    ``default``; ``service`` is that Service (``None`` when it could not be read).
    """
    errors = []
    addresses, ports = [], []
    for eps in endpoint_slices or []:
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                cidr = _host_cidr(address)
                if cidr is None:
                    errors.append(f"EndpointSlice default/{_name(eps)}: {address!r} is not an IP address")
                elif cidr not in addresses:
                    addresses.append(cidr)
        for port in eps.get("ports") or []:
            entry = {"protocol": port.get("protocol") or "TCP", "port": port.get("port")}
            if isinstance(entry["port"], int) and entry not in ports:
                ports.append(entry)
    if not addresses or not ports:
        errors.append(
            "the API server's addresses: the EndpointSlices of Service default/kubernetes list no ready "
            "address and port, so no NetworkPolicy can admit the control plane. Check that the API server "
            "runs and can read EndpointSlices, or turn the role's network policy off (<role>_network_policy: false)."
        )
    peers = [{"ipBlock": {"cidr": cidr}} for cidr in addresses]
    egress = [{"to": peers, "ports": ports}] if peers and ports else []
    spec = (service or {}).get("spec") or {}
    cluster_ips = [ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ip != "None"]
    service_ports = [
        {"protocol": p.get("protocol") or "TCP", "port": p["port"]}
        for p in spec.get("ports") or []
        if isinstance(p.get("port"), int)
    ]
    via_service = [{"ipBlock": {"cidr": c}} for c in (_host_cidr(ip) for ip in cluster_ips) if c]
    if via_service and service_ports:
        egress.append({"to": via_service, "ports": service_ports})
    return {"egress": egress, "ingress_from": peers, "errors": errors}


def _host_cidr(address):
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        return None
    return f"{ip}/{ip.max_prefixlen}"


def _name(obj):
    return (obj.get("metadata") or {}).get("name", "?")
