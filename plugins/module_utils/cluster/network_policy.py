# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the API server is, as NetworkPolicy peers (pure).

The control plane runs on the host network, outside any pod selector, so a NetworkPolicy can only
name it by address. The addresses are the ``default/kubernetes`` Service's EndpointSlices (the API
servers' advertise addresses, kept current by the API servers themselves) and the Service's
ClusterIP. Both are allowed: most CNIs evaluate egress after kube-proxy's DNAT (endpoint address
and port), some before it (ClusterIP and Service port).

Which addresses the control plane *calls* our pods from (the aggregator, kube-scheduler, the
power_models play) is where CNIs differ, and ``CONTROL_PLANE_MODES`` is the choice:

``any`` (the default)
    Rules by port alone: the control plane's ports admit any source, and the API server's ports
    are reached at any address. On an overlay a host's packet to a pod on another node leaves
    through the tunnel and arrives from the tunnel's address, not the node's (Calico IPIP and
    VXLAN: ``tunl0``/``vxlan.calico``; flannel: ``flannel.1``, its Node's podCIDR network
    address), and Cilium's ipBlocks match no node address at all unless
    ``policy-cidr-match-mode: nodes`` (Cilium 1.15+): an address rule then drops the aggregator's
    calls and the custom metrics API never becomes Available. TLS authenticates these callers (the
    aggregator's front-proxy certificate, kube-scheduler's client certificate at TAS), which is why
    kube-prometheus admits all ingress to its adapter too.
``api_servers``
    The API servers' endpoint addresses, and ``extra_sources`` (CIDRs: the control-plane nodes'
    tunnel addresses on an overlay), for CNIs that see node addresses unchanged.
"""

from __future__ import annotations

import ipaddress

CONTROL_PLANE_MODES = ("any", "api_servers")
MODE_VARIABLE = "poweraware_network_policy_control_plane"
SOURCES_VARIABLE = "poweraware_network_policy_control_plane_sources"


def api_server_peers(endpoint_slices, service, mode="any", extra_sources=()):
    """``{"egress": [rules], "ingress": rule, "errors": [...]}`` for the API server.

    ``endpoint_slices`` are the EndpointSlices labelled ``kubernetes.io/service-name=kubernetes`` in
    ``default``; ``service`` is that Service (``None`` when it could not be read). ``mode`` is one
    of ``CONTROL_PLANE_MODES`` and ``extra_sources`` the CIDRs ``api_servers`` admits besides the
    endpoints (a list, or the comma-separated string ``-e`` gives). ``ingress`` is an ingress rule
    without its ports (``{}``: from anywhere), which each role completes with the port it serves.
    """
    sources, errors = _judged(mode, extra_sources)
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
    spec = (service or {}).get("spec") or {}
    cluster_ips = [ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ip != "None"]
    service_ports = [
        {"protocol": p.get("protocol") or "TCP", "port": p["port"]}
        for p in spec.get("ports") or []
        if isinstance(p.get("port"), int)
    ]
    via_service = [{"ipBlock": {"cidr": c}} for c in (_host_cidr(ip) for ip in cluster_ips) if c]
    if mode == "any":
        # the same ports, at any address: the one rule every CNI evaluates alike
        both = ports + [p for p in (service_ports if via_service else []) if p not in ports]
        egress = [{"ports": both}] if peers and ports else []
        return {"egress": egress, "ingress": {}, "errors": errors}
    egress = [{"to": peers, "ports": ports}] if peers and ports else []
    if via_service and service_ports:
        egress.append({"to": via_service, "ports": service_ports})
    admitted = peers + [{"ipBlock": {"cidr": c}} for c in sources if {"ipBlock": {"cidr": c}} not in peers]
    return {"egress": egress, "ingress": {"from": admitted}, "errors": errors}


def control_plane_errors(mode, extra_sources):
    """What is wrong with ``poweraware_network_policy_control_plane`` and its sources, every problem
    named with the value and the fix (checked before anything changes, and again where used)."""
    return _judged(mode, extra_sources)[1]


def _judged(mode, extra_sources):
    """``(sources, errors)``: the CIDRs of the sources, and every problem of the mode and sources."""
    errors = []
    if mode not in CONTROL_PLANE_MODES:
        errors.append(
            f"{MODE_VARIABLE}={mode!r} is not a way to admit the control plane: use 'any' (by port, from any "
            "address: works on every CNI, overlays and Cilium included) or 'api_servers' (from the API servers' "
            f"addresses and {SOURCES_VARIABLE})"
        )
    sources, source_errors = control_plane_sources(extra_sources)
    errors += source_errors
    if mode == "any" and sources:
        errors.append(
            f"{SOURCES_VARIABLE} lists {', '.join(sources)}, but {MODE_VARIABLE} is 'any', which admits the "
            f"control plane from every address: set {MODE_VARIABLE}: api_servers to admit only the API servers "
            "and these, or drop the sources"
        )
    return sources, errors


def control_plane_sources(value):
    """The CIDRs of ``poweraware_network_policy_control_plane_sources``: a list, or the comma-separated
    string ``-e`` gives; a bare address is its host prefix. ``(cidrs, errors)``, every problem named
    with the value and the fix."""
    if value in (None, ""):
        return [], []
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, (list, tuple)):
        return [], [
            f"{SOURCES_VARIABLE}={value!r} is not a list of CIDRs: write a YAML list such as [192.0.2.10/32], "
            "or CIDRs separated by commas"
        ]
    cidrs, errors = [], []
    for item in value:
        try:  # a bare address is its host prefix
            network = ipaddress.ip_network(str(item), strict=False)
        except ValueError:
            errors.append(
                f"{SOURCES_VARIABLE} item {item!r} is not a CIDR or an IP address: write one such as "
                "192.0.2.10/32 or 10.244.0.0/16"
            )
            continue
        if ipaddress.ip_interface(str(item)).ip != network.network_address:
            errors.append(f"{SOURCES_VARIABLE} item {item!r} has host bits set: write {str(network)!r}")
        elif str(network) not in cidrs:
            cidrs.append(str(network))
    return cidrs, errors


def _host_cidr(address):
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        return None
    return f"{ip}/{ip.max_prefixlen}"


def _name(obj):
    return (obj.get("metadata") or {}).get("name", "?")
