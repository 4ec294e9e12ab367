# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.power_model filter; documentation in power_model.yml beside this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils._power_model import (
    DEFAULT_KIND,
    PowerModelError,
    fit_model,
)


def power_model(samples, kind=DEFAULT_KIND, node=None, knots=None, smoothing=None, robust=True):
    """Fit a node power model to ``[{util, watts}, ...]`` samples (see ``fit_model``)."""
    options = {"robust": robust}
    # Only pass the piecewise options when given, so other kinds reject them by name.
    if knots is not None:
        options["knots"] = knots
    if smoothing is not None:
        options["smoothing"] = smoothing
    try:
        return fit_model(samples, kind=kind, node=node, **options)
    except PowerModelError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    """Power model fitting."""

    def filters(self):
        return {"power_model": power_model}
