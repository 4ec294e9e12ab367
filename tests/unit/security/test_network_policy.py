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
