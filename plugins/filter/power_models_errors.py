# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.power_models_errors filter; documented in power_models_errors.yml."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import config_errors


def power_models_errors(values):
    """Problems with the power_models role's variables (see ``power_model.config_errors``)."""
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("power_models_errors: the input must map the role's variable names to their values")
    return config_errors(dict(values))


class FilterModule:
    """Checks of the power_models role's variables."""

    def filters(self) -> dict[str, Callable]:
        return {"power_models_errors": power_models_errors}
