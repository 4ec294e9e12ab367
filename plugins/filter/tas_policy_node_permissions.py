# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_node_permissions filter; documented in tas_policy_node_permissions.yml."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import (
    named_policies,
    node_permissions,
)

STATES = ("present", "absent")


def tas_policy_node_permissions(policies, state="present"):
    """TAS's node permission per policy: to grant, and to withdraw (see ``tas_policy.node_permissions``)."""
    if not named_policies(policies):
        raise AnsibleFilterError(
            "tas_policy_node_permissions: the input must be the list of TASPolicy objects (each with metadata.name "
            "and metadata.namespace) that poweraware.k8s.tas_policy_objects returns"
        )
    if state not in STATES:
        raise AnsibleFilterError(f"tas_policy_node_permissions: state={state!r}: must be present or absent")
    return node_permissions(policies, state)


class FilterModule:
    """TAS's permission to label nodes, per policy."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_node_permissions": tas_policy_node_permissions}
