# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.prometheus_service_url filter; documentation in prometheus_service_url.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.prometheus import service_url


def prometheus_service_url(services, port_name="http"):
    """The base URL of a Prometheus Service by its ClusterIP (see ``prometheus.service_url``)."""
    if isinstance(services, (str, bytes, Mapping)) or not all(isinstance(s, Mapping) for s in services or []):
        raise AnsibleFilterError("prometheus_service_url: the input must be a list of Service objects")
    if not isinstance(port_name, str) or not port_name:
        raise AnsibleFilterError(f"prometheus_service_url: port_name must be a port name, got {port_name!r}")
    return service_url(list(services or []), port_name)


class FilterModule:
    """Where a node reaches a Prometheus Service."""

    def filters(self) -> dict[str, Callable]:
        return {"prometheus_service_url": prometheus_service_url}
