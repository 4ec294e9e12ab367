# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.cpu_power_plan filter; documentation in cpu_power_plan.yml beside this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils._cpu_power_plan import plan_node


def cpu_power_plan(info, pools=None, profiles=None, reserved=None, reserved_given=False, kubelet_reserved=None,
                   kubelet_source="", shared_profile=None, fallback_governor=None, host="", uncore=None,
                   power_cap=None):  # fmt: skip
    """Plan one node's CPU power profiles from its ``cpu_power_info`` facts (see ``plan_node``)."""
    if not hasattr(info, "get"):
        raise AnsibleFilterError(
            f"cpu_power_plan: expected the cpu_power fact of cpu_power_info, got {type(info).__name__}"
        )
    return plan_node(
        info,
        pools,
        profiles,
        reserved=reserved,
        reserved_given=reserved_given,
        kubelet_reserved=kubelet_reserved,
        kubelet_source=kubelet_source,
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
