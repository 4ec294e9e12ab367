# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_objects filter; documentation in tas_policy_objects.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import policy_objects


def tas_policy_objects(power, policies, default_namespace, variable="tas_policy_policies"):
    """The TASPolicy objects of one run (see ``tas_policy.policy_objects``)."""
    if not isinstance(default_namespace, str) or not default_namespace:
        raise AnsibleFilterError("tas_policy_objects: default_namespace must be a non-empty string")
    objects, problems = policy_objects(power or None, policies, default_namespace, variable)
    if problems:
        raise AnsibleFilterError("Nothing was changed: " + "; ".join(problems))
    return objects


class FilterModule:
    """The TAS policies of a run."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_objects": tas_policy_objects}
