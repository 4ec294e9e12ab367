# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the pod_power role installs on a node for its agent (docs/pod-power.md): the agent's
configuration, from the kubelet's configuration (reserved CPUs, CPU manager policy) and kubeconfig
(the API server the node already talks to), every problem at once, each with its fix.

Pure logic, no Ansible imports, no I/O, Python 3.8: the input is the parsed documents the role read
on the node and its variables.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_power_plan import expand_cpus

__all__ = ["CONFIG_KEYS", "agent_config", "api_server_of"]

# The agent's configuration file, agent.json: these keys, no others (the agent reads exactly these).
CONFIG_KEYS = (
    "node",
    "api_server",
    "ca_file",
    "token_file",
    "sysfs_root",
    "state_file",
    "kubelet_state",
    "reserved_cpus",
    "tolerance_mhz",
    "interval_s",
    "resync_s",
)


def api_server_of(kubeconfig, path):
    """``(url, problems)``: the server of a kubeconfig's current context (or of its only cluster)."""
    fix = "set pod_power_api_server to the API server's URL, or point pod_power_kubelet_kubeconfig at the kubelet's"
    if kubeconfig is None:
        return None, [f"{path} could not be read on this node (missing, or not the kubelet's); {fix}"]
    if not isinstance(kubeconfig, Mapping):
        return None, [f"{path} is not a kubeconfig (a YAML mapping); {fix}"]
    clusters = {
        c.get("name"): c.get("cluster") or {} for c in kubeconfig.get("clusters") or [] if isinstance(c, Mapping)
    }
    contexts = {
        c.get("name"): c.get("context") or {} for c in kubeconfig.get("contexts") or [] if isinstance(c, Mapping)
    }
    current = contexts.get(kubeconfig.get("current-context"))
    if isinstance(current, Mapping) and current.get("cluster") in clusters:
        cluster = clusters[current["cluster"]]
    elif len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    else:
        return None, [f"{path} names no cluster of its current context ({len(clusters)} clusters); {fix}"]
    server = cluster.get("server") if isinstance(cluster, Mapping) else None
    if not isinstance(server, str) or not server.startswith("https://"):
        return None, [f"{path}: the cluster's server {server!r} is not an https:// URL; {fix}"]
    return server, []


def agent_config(
    node,
    kubelet,
    kubelet_path,
    kubeconfig=None,
    kubeconfig_path="",
    api_server="",
    config_dir="/etc/poweraware/pod-power",
    state_file="/var/lib/poweraware/pod_power_state.json",
    kubelet_state="/var/lib/kubelet/cpu_manager_state",
    interval_s=1,
    resync_s=60,
    tolerance_mhz=100,
):
    """``{config, errors, notes}``: the agent's configuration for ``node``.

    ``kubelet`` is the kubelet's configuration as parsed (None: the file is missing), ``kubeconfig`` the
    kubelet's kubeconfig as parsed (read only when ``api_server`` is not given). The kubelet must run the
    static CPU manager with ``reservedSystemCPUs`` (the Power Manager asks the same): the agent takes
    those CPUs as reserved and never touches them, and gives the CPUs the CPU manager hands to
    Guaranteed pods their profiles.
    """
    errors, notes = [], []
    if kubelet is None:
        errors.append(
            f"the kubelet configuration {kubelet_path} does not exist on this node; point pod_power_kubelet_config at "
            "the file the kubelet's --config names"
        )
        kubelet = {}
    elif not isinstance(kubelet, Mapping):
        errors.append(f"{kubelet_path} is not a kubelet configuration (a YAML mapping)")
        kubelet = {}
    policy = kubelet.get("cpuManagerPolicy") or "none"
    if kubelet and policy != "static":
        errors.append(
            f"the kubelet runs CPU manager policy {policy!r} ({kubelet_path} cpuManagerPolicy): Guaranteed pods get "
            "no CPUs of their own, so no CPU can run a pod's profile; set cpuManagerPolicy: static (and "
            "reservedSystemCPUs), as the Power Manager requires too, then restart the kubelet"
        )
    reserved = []
    if kubelet:
        given = kubelet.get("reservedSystemCPUs")
        cpus, bad = expand_cpus(given)
        if given is None or (isinstance(given, str) and not given.strip()):
            errors.append(
                f"{kubelet_path} has no reservedSystemCPUs: the agent must know which CPUs the kubelet keeps for "
                'the system, never to touch them; set reservedSystemCPUs (for example "0-1"), as the Power Manager '
                "requires too, then restart the kubelet"
            )
        elif bad:
            errors.append(f"{kubelet_path} reservedSystemCPUs {given!r} is not a CPU list (bad part: {', '.join(bad)})")
        else:
            reserved = sorted(cpus)
    server = api_server
    if not server:
        server, problems = api_server_of(kubeconfig, kubeconfig_path)
        errors += problems
    elif not (isinstance(server, str) and server.startswith("https://")):
        errors.append(f"pod_power_api_server {server!r} is not an https:// URL")
    for name, value, least in (
        ("interval_s", interval_s, 1),
        ("resync_s", resync_s, 1),
        ("tolerance_mhz", tolerance_mhz, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            errors.append(f"pod_power_{name} {value!r} must be a whole number of at least {least}")
    config = None
    if not errors:
        config = {
            "node": node,
            "api_server": server,
            "ca_file": f"{config_dir}/ca.crt",
            "token_file": f"{config_dir}/token",
            "sysfs_root": "/sys",
            "state_file": state_file,
            "kubelet_state": kubelet_state,
            "reserved_cpus": reserved,
            "tolerance_mhz": tolerance_mhz,
            "interval_s": interval_s,
            "resync_s": resync_s,
        }
        notes.append(f"reserved CPUs {','.join(map(str, reserved)) or 'none'} from {kubelet_path}; API server {server}")
    return {"config": config, "errors": errors, "notes": notes}
