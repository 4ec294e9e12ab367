"""What the pod_power role installs on a node (module_utils/node_power/pod_power_install.py): the agent's
configuration from the kubelet's configuration and kubeconfig, and every reason the node cannot run the agent,
at once, each with its fix."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.pod_power_install import (
    CONFIG_KEYS,
    agent_config,
    api_server_of,
)

KUBELET = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1,8"}
KUBECONFIG = {
    "clusters": [
        {"name": "other", "cluster": {"server": "https://other:6443"}},
        {"name": "kubernetes", "cluster": {"server": "https://10.0.0.10:6443"}},
    ],
    "contexts": [{"name": "node", "context": {"cluster": "kubernetes", "user": "system:node:w3"}}],
    "current-context": "node",
}


def test_the_configuration_has_exactly_the_keys_the_agent_reads():
    out = agent_config("w3", KUBELET, "/k/config.yaml", kubeconfig=KUBECONFIG, kubeconfig_path="/k/kubelet.conf")
    assert out["errors"] == []
    assert tuple(out["config"]) == CONFIG_KEYS
    assert out["config"]["reserved_cpus"] == [0, 1, 8]
    assert out["config"]["api_server"] == "https://10.0.0.10:6443"
    assert out["notes"] == ["reserved CPUs 0,1,8 from /k/config.yaml; API server https://10.0.0.10:6443"]


def test_a_given_api_server_wins_and_the_kubeconfig_is_not_needed():
    out = agent_config("w3", {**KUBELET, "reservedSystemCPUs": 0}, "/k", api_server="https://api.example:6443")
    assert out["errors"] == [] and out["config"]["api_server"] == "https://api.example:6443"
    assert out["config"]["reserved_cpus"] == [0]  # reservedSystemCPUs: 0, a YAML integer
    out = agent_config("w3", KUBELET, "/k", api_server="http://api:8080")
    assert out["errors"] == ["pod_power_api_server 'http://api:8080' is not an https:// URL"]


def test_every_problem_of_the_node_at_once():
    out = agent_config("w3", {"cpuManagerPolicy": "none"}, "/k/config.yaml", kubeconfig=None, kubeconfig_path="/k/kc",
                       interval_s=0, resync_s="60", tolerance_mhz=True)  # fmt: skip
    assert out["config"] is None
    assert out["errors"][0].startswith("the kubelet runs CPU manager policy 'none' (/k/config.yaml cpuManagerPolicy)")
    assert out["errors"][1].startswith("/k/config.yaml has no reservedSystemCPUs: the agent must know which CPUs")
    assert out["errors"][2].startswith("/k/kc could not be read on this node")
    assert out["errors"][3:] == [
        "pod_power_interval_s 0 must be a whole number of at least 1",
        "pod_power_resync_s '60' must be a whole number of at least 1",
        "pod_power_tolerance_mhz True must be a whole number of at least 0",
    ]


@pytest.mark.parametrize(
    ("kubelet", "expected"),
    [
        (None, "the kubelet configuration /k does not exist on this node"),
        (["x"], "/k is not a kubelet configuration (a YAML mapping)"),
        ({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-x"}, "/k reservedSystemCPUs '0-x' is not a CPU list"),
        ({"cpuManagerPolicy": "static", "reservedSystemCPUs": " "}, "/k has no reservedSystemCPUs"),
        ({"reservedSystemCPUs": "0"}, "the kubelet runs CPU manager policy 'none'"),
    ],
)
def test_the_kubelet_must_run_the_static_cpu_manager_with_reserved_cpus(kubelet, expected):
    out = agent_config("w3", kubelet, "/k", api_server="https://api:6443")
    assert len(out["errors"]) == 1 and out["errors"][0].startswith(expected), out["errors"]


def test_the_api_server_of_a_kubeconfig():
    assert api_server_of(KUBECONFIG, "/kc") == ("https://10.0.0.10:6443", [])
    single = {"clusters": [{"name": "c", "cluster": {"server": "https://one:6443"}}]}
    assert api_server_of(single, "/kc") == ("https://one:6443", [])
    two = {"clusters": KUBECONFIG["clusters"], "current-context": "none"}
    assert api_server_of(two, "/kc")[1][0].startswith("/kc names no cluster of its current context (2 clusters)")
    plain = {"clusters": [{"name": "c", "cluster": {"server": "http://one:8080"}}]}
    assert api_server_of(plain, "/kc")[1][0].startswith("/kc: the cluster's server 'http://one:8080' is not an https")
    assert api_server_of("text", "/kc")[1][0].startswith("/kc is not a kubeconfig (a YAML mapping)")
