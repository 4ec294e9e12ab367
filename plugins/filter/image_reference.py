# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.image_reference filter; documentation in image_reference.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.image import image_reference as _reference
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.image import pull_secret_names


def image_reference(repository, tag, digest, variable):
    """``repository:tag@digest`` for a pod (see ``image.image_reference``)."""
    if not isinstance(variable, str) or not variable:
        raise AnsibleFilterError(
            "image_reference: variable must name the role's image variable, such as collectd_image"
        )
    # A whole number is its digits (-e gives "2", YAML 2). A float is not: YAML reads 1.10 as 1.1, so
    # its text is not the tag that was written; it is refused, asking for quotes.
    if isinstance(tag, int) and not isinstance(tag, bool):
        tag = str(tag)
    try:
        return _reference(repository, tag, digest, variable)
    except ValueError as err:
        raise AnsibleFilterError(f"Nothing was changed: {err}") from None


def image_pull_secrets(value, variable):
    """The Secret names a pod's ``imagePullSecrets`` lists (see ``image.pull_secret_names``)."""
    if not isinstance(variable, str) or not variable:
        raise AnsibleFilterError(
            "image_pull_secrets: variable must name the role's variable, such as collectd_image_pull_secrets"
        )
    try:
        return pull_secret_names(value, variable)
    except ValueError as err:
        raise AnsibleFilterError(f"Nothing was changed: {err}") from None


class FilterModule:
    """Container image references and the Secrets that pull them."""

    def filters(self) -> dict[str, Callable]:
        return {"image_reference": image_reference, "image_pull_secrets": image_pull_secrets}
