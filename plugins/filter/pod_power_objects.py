# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.pod_power_objects, pod_power_removal, pod_power_tokens and pod_power_agent_config filters;
documentation in the .yml file of each name beside this file."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import from_yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.pod_power_objects import plan, removal, tokens
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.pod_power_install import agent_config

DEFAULT_NAMESPACE = "poweraware-pod-power"


def _hosts(hosts, name):
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, Mapping) for h in hosts):
        raise AnsibleFilterError(
            f"{name}: the input must be the list of pod power hosts, each {{host, node, labels, cpu_power_pools, "
            f"cpu_power_shared_profile}}, not {type(hosts).__name__}"
        )
    return [dict(h) for h in hosts]


def _found(found, name):
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise AnsibleFilterError(
            f"{name}: found must be the resources of a k8s_info_many result, not {type(found).__name__}"
        )
    return {key: list(value or []) for key, value in found.items()}


def _namespace(namespace, name):
    if not isinstance(namespace, str) or not namespace:
        raise AnsibleFilterError(f"{name}: namespace must be a non-empty string")
    return namespace


def pod_power_objects(hosts, found=None, profiles=None, time_of_day=None, namespace=DEFAULT_NAMESPACE):
    """What the pod_power role applies, and every reason not to (see ``pod_power_objects.plan``)."""
    return plan(
        _hosts(hosts, "pod_power_objects"),
        _found(found, "pod_power_objects"),
        {} if profiles is None else profiles,
        [] if time_of_day is None else time_of_day,
        _namespace(namespace, "pod_power_objects"),
    )


def pod_power_removal(hosts, found=None, namespace=DEFAULT_NAMESPACE):
    """What the pod_power role removes, in order (see ``pod_power_objects.removal``)."""
    return removal(
        _hosts(hosts, "pod_power_removal"),
        _found(found, "pod_power_removal"),
        _namespace(namespace, "pod_power_removal"),
    )


def pod_power_tokens(found):
    """The agents' tokens, decoded, and the nodes still waiting for one (see ``pod_power_objects.tokens``)."""
    if not isinstance(found, Mapping) or not all(isinstance(v, (list, tuple)) for v in found.values()):
        raise AnsibleFilterError(
            "pod_power_tokens: the input must be the resources of the k8s_info_many run of the token_queries "
            "pod_power_objects returns ({node: [Secret]})"
        )
    return tokens({node: list(objs) for node, objs in found.items()})


def _document(text, what, fix):
    """A YAML file's text as the role slurped or read it, parsed; None for a file that does not exist."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise AnsibleFilterError(f"pod_power_agent_config: {what} must be the file's text, not {type(text).__name__}")
    try:
        return from_yaml(text or "{}")
    except Exception as err:  # noqa: BLE001 - any YAML error: the file is not what it should be
        raise AnsibleFilterError(f"pod_power_agent_config: {what} is not YAML ({err}); {fix}") from None


def pod_power_agent_config(
    kubelet_config,
    node,
    kubeconfig=None,
    api_server="",
    kubelet_config_path="/var/lib/kubelet/config.yaml",
    kubeconfig_path="/etc/kubernetes/kubelet.conf",
    **options,
):
    """The agent's configuration on one node: ``pod_power_install.agent_config`` with the two documents
    parsed; ``options`` (config_dir, state_file, kubelet_state, interval_s, resync_s, tolerance_mhz) go to
    it as given, with their defaults there."""
    if not isinstance(kubelet_config, Mapping):
        raise AnsibleFilterError(
            "pod_power_agent_config: expected the kubelet_config result of cpu_power_info, "
            f"got {type(kubelet_config).__name__}"
        )
    if not isinstance(node, str) or not node:
        raise AnsibleFilterError("pod_power_agent_config: node must be the node's name")
    kubelet = None
    if kubelet_config.get("exists", True):
        kubelet = _document(
            kubelet_config.get("content"),
            f"the kubelet configuration {kubelet_config_path}",
            "point pod_power_kubelet_config at the kubelet's configuration file",
        )
    document = None
    if not api_server:
        document = _document(
            kubeconfig,
            f"the kubelet's kubeconfig {kubeconfig_path}",
            "point pod_power_kubelet_kubeconfig at it, or set pod_power_api_server",
        )
    for name in ("interval_s", "resync_s", "tolerance_mhz"):
        value = options.get(name)
        if isinstance(value, str) and value.strip().isdigit():
            options[name] = int(value)  # what -e gives is text: a whole number in it is that number
    return agent_config(
        node,
        kubelet,
        kubelet_config_path,
        kubeconfig=document,
        kubeconfig_path=kubeconfig_path,
        api_server=api_server or "",
        **options,
    )


class FilterModule:
    """The pod_power role's decisions."""

    def filters(self) -> dict[str, Callable]:
        return {
            "pod_power_objects": pod_power_objects,
            "pod_power_removal": pod_power_removal,
            "pod_power_agent_config": pod_power_agent_config,
            "pod_power_tokens": pod_power_tokens,
        }
