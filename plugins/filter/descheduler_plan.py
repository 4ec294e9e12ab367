# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.descheduler_plan filter; documentation in descheduler_plan.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.descheduler import plan


def descheduler_plan(policy, kubernetes_version, image_tag="", namespaces=None, interval="5m", image_digest=""):
    """The descheduler's policy, image tag and digest, and problems (see ``descheduler.plan``)."""
    if policy is not None and not isinstance(policy, dict):
        raise AnsibleFilterError(
            "descheduler_plan: descheduler_policy must be a DeschedulerPolicy mapping or empty, "
            f"not {type(policy).__name__}"
        )
    return plan(policy or {}, kubernetes_version, image_tag or "", namespaces or None, interval, image_digest or "")


class FilterModule:
    """The descheduler role's decisions."""

    def filters(self) -> dict[str, Callable]:
        return {"descheduler_plan": descheduler_plan}
