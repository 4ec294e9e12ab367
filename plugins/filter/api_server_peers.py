# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.api_server_peers filter; documentation in api_server_peers.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.network_policy import api_server_peers as _peers
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.network_policy import control_plane_errors


def api_server_peers(endpoint_slices, service=None, mode="any", extra_sources=None):
    """The API server as NetworkPolicy peers (see ``network_policy.api_server_peers``)."""
    if isinstance(endpoint_slices, (str, bytes, Mapping)) or not all(
        isinstance(e, Mapping) for e in endpoint_slices or []
    ):
        raise AnsibleFilterError("api_server_peers: the input must be a list of EndpointSlice objects")
    if service is not None and not isinstance(service, Mapping):
        raise AnsibleFilterError("api_server_peers: service must be the Service object or null")
    return _peers(list(endpoint_slices or []), service or None, mode, extra_sources)


def network_policy_control_plane_errors(mode, extra_sources=None):
    """What is wrong with how NetworkPolicies name the control plane (see ``network_policy.control_plane_errors``)."""
    return control_plane_errors(mode, extra_sources)


class FilterModule:
    """NetworkPolicy peers for the control plane."""

    def filters(self) -> dict[str, Callable]:
        return {
            "api_server_peers": api_server_peers,
            "network_policy_control_plane_errors": network_policy_control_plane_errors,
        }
