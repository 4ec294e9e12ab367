# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.k8s_client_choice filter; documented in k8s_client_choice.yml."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_client import client_choice


def k8s_client_choice(probes, packages=None):
    """Which interpreter has the Kubernetes client, or what to install for the host's Python."""
    if not isinstance(probes, dict) or not isinstance(probes.get("results"), list):
        raise AnsibleFilterError(
            "k8s_client_choice: the input must be the registered result of the probe loop in"
            f" k8s_client.yml (a mapping with results), got {type(probes).__name__}"
        )
    return client_choice(probes, packages)


class FilterModule:
    """Kubernetes client choice by the host's Python."""

    def filters(self) -> dict[str, Callable]:
        return {"k8s_client_choice": k8s_client_choice}
