"""api_server_peers: the API server and the control plane as NetworkPolicy peers."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.api_server_peers import api_server_peers


def eps(*addresses, port=6443, ready=True, name="kubernetes"):
    return {
        "metadata": {"name": name},
        "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a in addresses],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }


SVC = {
    "spec": {
        "clusterIP": "10.96.0.1",
        "clusterIPs": ["10.96.0.1"],
        "ports": [{"name": "https", "port": 443, "protocol": "TCP"}],
    }
}


def test_endpoints_and_cluster_ip_become_two_egress_rules_and_the_endpoints_the_ingress_peers():
    got = api_server_peers([eps("192.0.2.10", "192.0.2.11")], SVC)
    assert got["errors"] == []
    hosts = [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}]
    assert got["ingress_from"] == hosts
    assert got["egress"] == [
        {"to": hosts, "ports": [{"protocol": "TCP", "port": 6443}]},
        {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 443}]},
    ]


def test_ipv6_gets_a_host_prefix_and_duplicates_across_slices_are_one_peer():
    got = api_server_peers([eps("2001:db8::1"), eps("2001:db8::1", name="kubernetes-2")], None)
    assert got["ingress_from"] == [{"ipBlock": {"cidr": "2001:db8::1/128"}}]
    assert len(got["egress"]) == 1  # no Service read: the endpoints only


def test_not_ready_endpoints_are_left_out():
    got = api_server_peers([eps("192.0.2.10"), eps("192.0.2.99", ready=False, name="b")], SVC)
    assert got["ingress_from"] == [{"ipBlock": {"cidr": "192.0.2.10/32"}}]


@pytest.mark.parametrize("slices", [[], [eps("192.0.2.9", ready=False)]])
def test_no_address_is_an_error_that_names_the_way_out(slices):
    got = api_server_peers(slices, SVC)
    assert got["ingress_from"] == [] and "list no ready address" in got["errors"][0]
    assert "_network_policy: false" in got["errors"][0]


def test_an_address_that_is_no_ip_is_named():
    got = api_server_peers([eps("api.example.com", "192.0.2.10")], SVC)
    assert got["errors"] == ["EndpointSlice default/kubernetes: 'api.example.com' is not an IP address"]


@pytest.mark.parametrize("bad", ["x", {"a": 1}, [1]])
def test_input_that_is_no_list_of_slices_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match="list of EndpointSlice"):
        api_server_peers(bad)


NO_ADDRESS = (
    "the API server's addresses: the EndpointSlices of Service default/kubernetes list no ready address and "
    "port, so no NetworkPolicy can admit the control plane. Check that the API server runs and can read "
    "EndpointSlices, or turn the role's network policy off (<role>_network_policy: false)."
)
VIA_SERVICE = {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}


@pytest.mark.parametrize("slices", [[], [eps("192.0.2.9", ready=False)]])
def test_no_address_is_the_whole_message_and_only_the_service_rule_is_left(slices):
    """Without a ready endpoint there is no endpoint rule, not even one with no peers (which would allow nothing)."""
    got = api_server_peers(slices, SVC)
    assert got == {"egress": [VIA_SERVICE], "ingress_from": [], "errors": [NO_ADDRESS]}


def test_an_address_without_a_port_is_an_error_and_no_rule():
    slice_ = eps("192.0.2.10")
    slice_["ports"] = [{"name": "https", "port": None, "protocol": "TCP"}]  # no numeric port: nothing to allow
    got = api_server_peers([slice_], None)
    assert got == {"egress": [], "ingress_from": [{"ipBlock": {"cidr": "192.0.2.10/32"}}], "errors": [NO_ADDRESS]}


def test_a_not_ready_endpoint_does_not_hide_the_ready_ones_after_it_in_the_slice():
    slice_ = eps("192.0.2.10")
    slice_["endpoints"] = [
        {"addresses": ["192.0.2.99"], "conditions": {"ready": False}},
        {"addresses": ["192.0.2.10"], "conditions": {"ready": True}},
        {"addresses": ["192.0.2.11"]},  # no conditions: ready unless said otherwise (EndpointSlice API)
    ]
    got = api_server_peers([slice_], None)
    assert got["ingress_from"] == [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}]


def test_ports_default_to_tcp_keep_their_protocol_skip_names_and_repeat_once():
    first, second = eps("192.0.2.10"), eps("192.0.2.11", name="kubernetes-2")
    first["ports"] = [{"port": 6443}, {"port": 8132, "protocol": "UDP"}, {"name": "https", "port": "https"}]
    second["ports"] = [{"port": 6443, "protocol": "TCP"}, {"port": 8132, "protocol": "UDP"}]
    got = api_server_peers([first, second], None)
    assert got["egress"] == [
        {
            "to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}],
            "ports": [{"protocol": "TCP", "port": 6443}, {"protocol": "UDP", "port": 8132}],
        }
    ]


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        # dual stack: every ClusterIP, and clusterIPs wins over clusterIP
        (
            {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00:10:96::1"], "ports": [{"port": 443}]},
            {
                "to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}, {"ipBlock": {"cidr": "fd00:10:96::1/128"}}],
                "ports": [{"protocol": "TCP", "port": 443}],
            },
        ),
        # an API server that does not fill clusterIPs (before 1.20)
        ({"clusterIP": "10.96.0.1", "ports": [{"port": 443, "protocol": "TCP"}]}, VIA_SERVICE),
        (
            {"clusterIPs": ["10.96.0.1"], "ports": [{"port": 443, "protocol": "SCTP"}, {"port": "https"}]},
            {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": [{"protocol": "SCTP", "port": 443}]},
        ),
        # headless, or no numeric port: no rule through the Service
        ({"clusterIP": "None", "clusterIPs": ["None"], "ports": [{"port": 443}]}, None),
        ({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "ports": [{"port": "https"}]}, None),
        ({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"]}, None),
    ],
)
def test_the_service_rule_takes_every_cluster_ip_and_numeric_port(spec, rule):
    got = api_server_peers([eps("192.0.2.10")], {"spec": spec})
    endpoints = {"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]}
    assert got["egress"] == [endpoints] + ([rule] if rule else [])


def test_an_address_in_a_slice_without_a_name_is_still_reported():
    slice_ = eps("api.example.com", "192.0.2.10")
    del slice_["metadata"]
    got = api_server_peers([slice_], SVC)
    assert got["errors"] == ["EndpointSlice default/?: 'api.example.com' is not an IP address"]
