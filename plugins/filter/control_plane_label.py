# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.control_plane_label filter; documentation in control_plane_label.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.control_plane import control_plane_label as _label
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_version import server_release


def control_plane_label(cluster_info, given, variable):
    """The label of control-plane nodes: ``given``, else by the API server's release (``control_plane``)."""
    if not isinstance(variable, str) or not variable:
        raise AnsibleFilterError("control_plane_label: variable must name the role's label variable")
    try:
        return _label(server_release(cluster_info), given, variable)
    except ValueError as err:
        raise AnsibleFilterError(f"Nothing was changed: {err}") from None


class FilterModule:
    """The control-plane node label."""

    def filters(self) -> dict[str, Callable]:
        return {"control_plane_label": control_plane_label}
