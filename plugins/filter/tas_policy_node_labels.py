# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_node_labels filter; documentation in tas_policy_node_labels.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import policy_node_labels


def tas_policy_node_labels(nodes, policies):
    """The node labels TAS set for ``policies`` (see ``tas_policy.policy_node_labels``)."""
    if not isinstance(nodes, list) or not isinstance(policies, list):
        raise AnsibleFilterError("tas_policy_node_labels: the input must be a list of Nodes and policies a list")
    return policy_node_labels(nodes, policies)


class FilterModule:
    """Node labels of TAS policies."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_node_labels": tas_policy_node_labels}
