# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.pod_security_labels filter; documentation in pod_security_labels.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.pod_security import pod_security_labels as _labels


def pod_security_labels(existing, namespace, level, component, reason, variable):
    """Pod Security labels for ``namespace`` (see ``pod_security.pod_security_labels``)."""
    if existing in ("", None) or existing == {}:
        existing = None
    elif not isinstance(existing, Mapping):
        raise AnsibleFilterError("pod_security_labels: the input must be the Namespace object or null")
    # the reason is prose for the messages: a missing one would read "None" there
    for name, value in (
        ("namespace", namespace),
        ("level", level),
        ("component", component),
        ("reason", reason),
        ("variable", variable),
    ):
        if not isinstance(value, str) or not value:
            raise AnsibleFilterError(f"pod_security_labels: {name} must be a non-empty string")
    return _labels(namespace, existing, level, component, reason, variable)


class FilterModule:
    """Pod Security Admission labels."""

    def filters(self) -> dict[str, Callable]:
        return {"pod_security_labels": pod_security_labels}
