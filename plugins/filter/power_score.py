# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.power_score filter; documentation in power_score.yml beside this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import PowerScoreError, score_nodes


def power_score(nodes, pod_cpu_request, neutral_score=50):
    """Rank ``nodes`` by the predicted power jump of a pod requesting ``pod_cpu_request`` (see ``score_nodes``)."""
    try:
        return score_nodes(nodes, pod_cpu_request, neutral_score=neutral_score)
    except PowerScoreError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    """PEAKS-style power scores."""

    def filters(self):
        return {"power_score": power_score}
