# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_moved filter; documented in tas_policy_moved.yml."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import moved_policies, named_policies


def tas_policy_moved(found, desired):
    """The policies of ours that this run's policies left behind (see ``tas_policy.moved_policies``)."""
    if not named_policies(found):
        raise AnsibleFilterError(
            "tas_policy_moved: the input must be the TASPolicy objects read from the cluster (k8s_info's resources)"
        )
    if not named_policies(desired):
        raise AnsibleFilterError(
            "tas_policy_moved: desired must be the list of TASPolicy objects that poweraware.k8s.tas_policy_objects "
            "returns"
        )
    return moved_policies(found, desired)


class FilterModule:
    """The TAS policies of ours left in a namespace their policy moved from."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_moved": tas_policy_moved}
