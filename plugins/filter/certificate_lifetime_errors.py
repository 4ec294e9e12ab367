# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.certificate_lifetime_errors filter; documented in certificate_lifetime_errors.yml."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_lifetime import lifetime_errors


def certificate_lifetime_errors(values):
    """Problems with a CA's and its leaves' lifetimes (see ``cert_lifetime.lifetime_errors``)."""
    if not isinstance(values, Mapping) or len(values) not in (3, 4):
        raise AnsibleFilterError(
            "certificate_lifetime_errors: the input must map the variable names of the CA lifetime, the leaf "
            "lifetime, the leaf renewal window and optionally the CA renewal window to their values"
        )
    return lifetime_errors(dict(values))


class FilterModule:
    """Certificate lifetimes."""

    def filters(self) -> dict[str, Callable]:
        return {"certificate_lifetime_errors": certificate_lifetime_errors}
