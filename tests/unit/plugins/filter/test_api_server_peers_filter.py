"""api_server_peers: the API server and the control plane as NetworkPolicy peers.

The api_server_peers filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.api_server_peers as f_peers
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.api_server_peers import api_server_peers
from poweraware_testing import raises


def addressed(slices, service=None, sources=None):
    """The rules of poweraware_network_policy_control_plane: api_servers (by the API servers' addresses)."""
    return api_server_peers(slices, service, "api_servers", sources)


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
    got = addressed([eps("192.0.2.10", "192.0.2.11")], SVC)
    assert got["errors"] == []
    hosts = [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}]
    assert got["ingress"]["from"] == hosts
    assert got["egress"] == [
        {"to": hosts, "ports": [{"protocol": "TCP", "port": 6443}]},
        {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 443}]},
    ]


def test_ipv6_gets_a_host_prefix_and_duplicates_across_slices_are_one_peer():
    got = addressed([eps("2001:db8::1"), eps("2001:db8::1", name="kubernetes-2")], None)
    assert got["ingress"]["from"] == [{"ipBlock": {"cidr": "2001:db8::1/128"}}]
    assert len(got["egress"]) == 1  # no Service read: the endpoints only


def test_not_ready_endpoints_are_left_out():
    got = addressed([eps("192.0.2.10"), eps("192.0.2.99", ready=False, name="b")], SVC)
    assert got["ingress"]["from"] == [{"ipBlock": {"cidr": "192.0.2.10/32"}}]


@pytest.mark.parametrize("slices", [[], [eps("192.0.2.9", ready=False)]])
def test_no_address_is_an_error_that_names_the_way_out(slices):
    got = addressed(slices, SVC)
    assert got["ingress"]["from"] == [] and "list no ready address" in got["errors"][0]
    assert "_network_policy: false" in got["errors"][0]


def test_an_address_that_is_no_ip_is_named():
    got = addressed([eps("api.example.com", "192.0.2.10")], SVC)
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
    got = addressed(slices, SVC)
    assert got == {"egress": [VIA_SERVICE], "ingress": {"from": []}, "errors": [NO_ADDRESS]}


def test_an_address_without_a_port_is_an_error_and_no_rule():
    slice_ = eps("192.0.2.10")
    slice_["ports"] = [{"name": "https", "port": None, "protocol": "TCP"}]  # no numeric port: nothing to allow
    got = addressed([slice_], None)
    assert got == {"egress": [], "ingress": {"from": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]}, "errors": [NO_ADDRESS]}


def test_a_not_ready_endpoint_does_not_hide_the_ready_ones_after_it_in_the_slice():
    slice_ = eps("192.0.2.10")
    slice_["endpoints"] = [
        {"addresses": ["192.0.2.99"], "conditions": {"ready": False}},
        {"addresses": ["192.0.2.10"], "conditions": {"ready": True}},
        {"addresses": ["192.0.2.11"]},  # no conditions: ready unless said otherwise (EndpointSlice API)
    ]
    got = addressed([slice_], None)
    assert got["ingress"]["from"] == [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}]


def test_ports_default_to_tcp_keep_their_protocol_skip_names_and_repeat_once():
    first, second = eps("192.0.2.10"), eps("192.0.2.11", name="kubernetes-2")
    first["ports"] = [{"port": 6443}, {"port": 8132, "protocol": "UDP"}, {"name": "https", "port": "https"}]
    second["ports"] = [{"port": 6443, "protocol": "TCP"}, {"port": 8132, "protocol": "UDP"}]
    got = addressed([first, second], None)
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
    got = addressed([eps("192.0.2.10")], {"spec": spec})
    endpoints = {"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]}
    assert got["egress"] == [endpoints] + ([rule] if rule else [])


def test_an_address_in_a_slice_without_a_name_is_still_reported():
    slice_ = eps("api.example.com", "192.0.2.10")
    del slice_["metadata"]
    got = addressed([slice_], SVC)
    assert got["errors"] == ["EndpointSlice default/?: 'api.example.com' is not an IP address"]


# --- poweraware_network_policy_control_plane ------------------------------------------------------


def test_by_default_the_control_plane_is_named_by_port_alone_on_every_cni():
    """'any': on an overlay the control plane's calls to a pod on another node come from a tunnel
    address, and Cilium's ipBlocks match no node: the rules name ports, never addresses."""
    got = api_server_peers([eps("192.0.2.10", "192.0.2.11")], SVC)
    assert got == {
        "egress": [{"ports": [{"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 443}]}],
        "ingress": {},
        "errors": [],
    }


def test_by_port_a_service_port_equal_to_the_endpoints_is_listed_once_and_a_headless_service_adds_none():
    service = {"spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 6443, "protocol": "TCP"}, {"port": 8443}]}}
    got = api_server_peers([eps("192.0.2.10")], service, "any")
    assert got["egress"] == [{"ports": [{"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 8443}]}]
    headless = {"spec": {"clusterIP": "None", "ports": [{"port": 443}]}}
    assert api_server_peers([eps("192.0.2.10")], headless)["egress"] == [{"ports": [{"protocol": "TCP", "port": 6443}]}]


@pytest.mark.parametrize("mode", ["any", "api_servers"])
def test_without_a_ready_api_server_no_mode_makes_an_egress_rule_from_nothing(mode):
    got = api_server_peers([eps("192.0.2.9", ready=False)], None, mode)
    assert got["egress"] == [] and got["errors"] == [NO_ADDRESS]


@pytest.mark.parametrize(
    ("sources", "cidrs"),
    [
        (["10.233.64.1/32", "10.233.64.1"], ["10.233.64.1/32"]),  # a bare address is its host prefix, once
        ("10.233.64.1/32, 10.244.0.0/16", ["10.233.64.1/32", "10.244.0.0/16"]),  # -e gives a string
        (["2001:db8::7"], ["2001:db8::7/128"]),
        (["192.0.2.10/32"], []),  # already an API server
        ("", []),
        (None, []),
    ],
)
def test_by_address_the_sources_are_admitted_after_the_api_servers(sources, cidrs):
    got = addressed([eps("192.0.2.10")], SVC, sources)
    assert got["errors"] == []
    assert got["ingress"] == {"from": [{"ipBlock": {"cidr": c}} for c in ["192.0.2.10/32", *cidrs]]}
    # the sources are callers, not API servers: egress still reaches only the API server
    assert [peer for rule in got["egress"] for peer in rule["to"]] == [
        {"ipBlock": {"cidr": "192.0.2.10/32"}},
        {"ipBlock": {"cidr": "10.96.0.1/32"}},
    ]


def test_every_bad_source_and_mode_is_named_at_once_with_its_fix():
    got = api_server_peers([eps("192.0.2.10")], SVC, "nodes", ["10.0.0.1/8", "tunnel", "10.1.0.0/16"])
    assert got["errors"] == [
        "poweraware_network_policy_control_plane='nodes' is not a way to admit the control plane: use 'any' (by "
        "port, from any address: works on every CNI, overlays and Cilium included) or 'api_servers' (from the API "
        "servers' addresses and poweraware_network_policy_control_plane_sources)",
        "poweraware_network_policy_control_plane_sources item '10.0.0.1/8' has host bits set: write '10.0.0.0/8'",
        "poweraware_network_policy_control_plane_sources item 'tunnel' is not a CIDR or an IP address: write one "
        "such as 192.0.2.10/32 or 10.244.0.0/16",
    ]


def test_sources_with_the_by_port_mode_are_an_error_not_a_silent_no_op():
    got = api_server_peers([eps("192.0.2.10")], SVC, "any", ["10.233.64.1"])
    assert got["errors"] == [
        "poweraware_network_policy_control_plane_sources lists 10.233.64.1/32, but "
        "poweraware_network_policy_control_plane is 'any', which admits the control plane from every address: set "
        "poweraware_network_policy_control_plane: api_servers to admit only the API servers and these, or drop the "
        "sources"
    ]


@pytest.mark.parametrize("bad", [{"cidr": "10.0.0.0/8"}, 7])
def test_sources_that_are_no_list_are_named(bad):
    got = addressed([eps("192.0.2.10")], SVC, bad)
    assert got["errors"] == [
        f"poweraware_network_policy_control_plane_sources={bad!r} is not a list of CIDRs: write a YAML list such "
        "as [192.0.2.10/32], or CIDRs separated by commas"
    ]


def test_the_plays_check_is_the_same_judgement_before_anything_changes():
    from ansible_collections.poweraware.k8s.plugins.filter.api_server_peers import (
        network_policy_control_plane_errors,
    )

    assert network_policy_control_plane_errors("any") == []
    assert network_policy_control_plane_errors("api_servers", "10.233.64.1,10.233.65.0/24") == []
    wrong = ("api_servers", ["10.0.0.1/8", "tunnel"])
    assert network_policy_control_plane_errors(*wrong) == addressed([eps("192.0.2.10")], SVC, wrong[1])["errors"]
    assert len(network_policy_control_plane_errors(*wrong)) == 2


SLICE = {"kind": "EndpointSlice", "endpoints": []}
SERVICE = {"kind": "Service", "metadata": {"name": "kubernetes"}}


@pytest.mark.parametrize("bad", ["slices", b"slices", SLICE, [SLICE, "x"], [5]])
def test_api_server_peers_wants_a_list_of_slices(bad):
    raises(lambda: f_peers.api_server_peers(bad), "api_server_peers: the input must be a list of EndpointSlice objects")


@pytest.mark.parametrize("bad", ["kubernetes", ["x"], 5])
def test_api_server_peers_wants_a_service_object_or_null(bad):
    raises(
        lambda: f_peers.api_server_peers([SLICE], bad), "api_server_peers: service must be the Service object or null"
    )


def test_api_server_peers_passes_a_list_and_the_service_on(stub):
    peers = stub(f_peers, "_peers")
    assert f_peers.api_server_peers((SLICE,), SERVICE) == "result"
    assert f_peers.api_server_peers(None) == "result"
    assert f_peers.api_server_peers([SLICE], {}) == "result"
    assert f_peers.api_server_peers([SLICE], SERVICE, "api_servers", "10.0.0.1") == "result"
    assert peers.calls == [
        (([SLICE], SERVICE, "any", None), {}),
        (([], None, "any", None), {}),
        (([SLICE], None, "any", None), {}),
        (([SLICE], SERVICE, "api_servers", "10.0.0.1"), {}),
    ]
    assert isinstance(peers.calls[0][0][0], list)
