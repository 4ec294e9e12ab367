"""The lab's Services and DNS are kubeadm's add-ons; what the lab gives them: kubeadm's init
configuration, and the site's resolver CoreDNS forwards to (pure parts; the lab tests run them)."""

from __future__ import annotations

import ipaddress
import struct

import yaml

from lab import config, kubeadm
from lab.components import network, site_dns


def test_kubeadm_is_given_the_api_servers_address_the_networks_and_conntrack_left_alone():
    text = kubeadm.init_configuration(config.LabConfig())
    documents = {doc["kind"]: doc for doc in yaml.safe_load_all(text)}
    assert set(documents) == {"InitConfiguration", "ClusterConfiguration", "KubeProxyConfiguration"}
    # kube-proxy's kubeconfig names the control-plane endpoint kubeadm derives from these
    assert documents["InitConfiguration"]["localAPIEndpoint"] == {"advertiseAddress": "10.0.0.2", "bindPort": 6443}
    assert documents["InitConfiguration"]["nodeRegistration"]["name"] == "lab-control-plane"
    assert documents["ClusterConfiguration"]["networking"] == {
        "dnsDomain": network.CLUSTER_DOMAIN,
        "podSubnet": network.POD_CIDR,
        "serviceSubnet": network.SERVICE_CIDR,
    }
    # nf_conntrack_max is read-only in a node's own network namespace (kind sets the same)
    assert documents["KubeProxyConfiguration"]["conntrack"] == {"maxPerCore": 0}


def test_the_cluster_dns_address_is_the_tenth_of_the_service_cidr_as_kubeadm_reserves_it():
    assert str(ipaddress.ip_network(network.SERVICE_CIDR)[10]) == network.DNS_IP


def test_the_site_resolver_serves_the_site_hosts_and_nothing_else(tmp_path):
    hosts = tmp_path / "hosts"
    text = site_dns.hosts_text({"lab-worker-1": "10.0.1.11", "lab-control-plane": "10.0.1.1"})
    assert text == "10.0.1.1 lab-control-plane\n10.0.1.11 lab-worker-1\n"
    corefile = site_dns.corefile(hosts)
    assert f"bind {site_dns.ADDRESS}" in corefile and f"hosts {hosts}" in corefile
    # `hosts` is authoritative for its zone without fallthrough: every other name is NXDOMAIN
    assert "fallthrough" not in corefile and "forward" not in corefile


def test_the_health_query_is_a_recursive_a_question():
    packet = site_dns.query("lab-worker-1.")
    ident, flags, questions = struct.unpack("!HHH", packet[:6])
    assert (ident, flags, questions) == (0x5A5A, 0x0100, 1)
    assert packet[12:] == b"\x0clab-worker-1\x00\x00\x01\x00\x01"
