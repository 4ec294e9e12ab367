# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.node_tolerations filter; documentation in node_tolerations.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.control_plane import CONTROL_PLANE_TAINT_KEYS
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.control_plane import tolerations as _tolerations


def node_tolerations(extra, on_control_plane, variable, taint_keys=CONTROL_PLANE_TAINT_KEYS, control_plane_first=False):
    """A pod's tolerations: ``extra`` and, when asked, the control-plane taints (``control_plane``)."""
    if not isinstance(variable, str) or not variable:
        raise AnsibleFilterError("node_tolerations: variable must name the role's tolerations variable")
    try:
        wanted = boolean(on_control_plane, strict=True)  # -e passes "false" as a string
    except TypeError:
        raise AnsibleFilterError(
            f"node_tolerations: the on-control-plane switch for {variable} must be a boolean, got "
            f"{on_control_plane!r}; set it to true or false"
        ) from None
    if not isinstance(control_plane_first, bool):
        raise AnsibleFilterError(
            f"node_tolerations: control_plane_first for {variable} must be true or false, got {control_plane_first!r}"
        )
    try:
        return _tolerations(
            list(extra) if isinstance(extra, (list, tuple)) else extra,
            wanted,
            variable,
            keys=list(taint_keys) if isinstance(taint_keys, (list, tuple)) else taint_keys,
            control_plane_first=control_plane_first,
        )
    except ValueError as err:
        raise AnsibleFilterError(f"Nothing was changed: {err}") from None


class FilterModule:
    """Pod tolerations."""

    def filters(self) -> dict[str, Callable]:
        return {"node_tolerations": node_tolerations}
