# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.prometheus_storage_errors filter; documentation in the .yml file beside this one."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.prometheus import storage_errors
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError, parse_byte_quantity


def _size(value):
    try:
        return parse_byte_quantity(value)
    except QuantityError as err:
        raise ValueError(str(err)) from None


def prometheus_storage_errors(storage, size, retention, retention_size=""):
    """Every problem with the managed Prometheus' storage variables (see ``prometheus.storage_errors``)."""
    # -e gives strings and YAML may give an integer size: both are read as the quantity they spell
    return storage_errors(storage, size, retention, retention_size, _size)


class FilterModule:
    """Checks of the managed Prometheus' storage variables."""

    def filters(self) -> dict[str, Callable]:
        return {"prometheus_storage_errors": prometheus_storage_errors}
