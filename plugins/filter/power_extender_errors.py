# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.power_extender_errors filter; documented in power_extender_errors.yml."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.extender import config_errors


def power_extender_errors(values):
    """Problems with the power_extender role's variables (see ``extender.config_errors``)."""
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("power_extender_errors: the input must map the role's variable names to their values")
    return config_errors(dict(values))


class FilterModule:
    """Our scheduler extender's input."""

    def filters(self) -> dict[str, Callable]:
        return {"power_extender_errors": power_extender_errors}
