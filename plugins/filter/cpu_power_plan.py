# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.cpu_power_plan filter; documentation in cpu_power_plan.yml beside this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import from_yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_power_plan import plan_node, reserved_choice


def _kubelet_document(kubelet_config, path):
    """The kubelet configuration ``cpu_power_info`` read (its ``kubelet_config``), parsed; {} when not read."""
    if kubelet_config is None:
        return {}
    if not hasattr(kubelet_config, "get"):
        raise AnsibleFilterError(
            f"cpu_power_plan: expected the kubelet_config result of cpu_power_info, got {type(kubelet_config).__name__}"
        )
    try:
        return from_yaml(kubelet_config.get("content") or "{}")
    except Exception as err:  # noqa: BLE001 - any YAML error: the file is not a kubelet configuration
        raise AnsibleFilterError(
            f"cpu_power_plan: the kubelet configuration {path} is not YAML ({err}); point cpu_power_kubelet_config "
            "at the kubelet's configuration file, or give cpu_power_kubelet_reserved_cpus"
        ) from None


def cpu_power_plan(info, pools=None, profiles=None, reserved=None, kubelet_reserved=None, kubelet_config=None,
                   kubelet_config_path="", shared_profile=None, fallback_governor=None, host="", uncore=None,
                   power_cap=None):  # fmt: skip
    """Plan one node's CPU power profiles from its ``cpu_power_info`` facts: the reserved CPUs are
    chosen from the raw inputs (``reserved_choice``), then planned (``plan_node``)."""
    if not hasattr(info, "get"):
        raise AnsibleFilterError(
            f"cpu_power_plan: expected the cpu_power fact of cpu_power_info, got {type(info).__name__}"
        )
    choice = reserved_choice(
        reserved, kubelet_reserved, _kubelet_document(kubelet_config, kubelet_config_path), kubelet_config_path
    )
    return plan_node(
        info,
        pools,
        profiles,
        reserved=choice["reserved"],
        reserved_given=choice["reserved_given"],
        kubelet_reserved=choice["kubelet_reserved"],
        kubelet_source=choice["kubelet_source"],
        shared_profile=shared_profile,
        fallback_governor=fallback_governor,
        host=host,
        uncore=uncore,
        power_cap=power_cap,
    )


class FilterModule:
    """CPU power planning."""

    def filters(self):
        return {"cpu_power_plan": cpu_power_plan}
