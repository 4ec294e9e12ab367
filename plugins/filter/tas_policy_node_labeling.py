# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_node_labeling filter; documented in tas_policy_node_labeling.yml."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import node_labeling_strategies


def tas_policy_node_labeling(policy):
    """The strategies of the TASPolicy that make TAS patch nodes (see ``node_labeling_strategies``)."""
    return node_labeling_strategies(policy)


class FilterModule:
    """Which TAS policy strategies label nodes."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_node_labeling": tas_policy_node_labeling}
