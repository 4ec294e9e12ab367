# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_errors filter; documentation in tas_policy_errors.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import (
    normalize_policy,
    validate_policies,
    validate_policy,
)


def tas_policy_errors(policy, known_metrics=None, stripped_prefix="node_"):
    """Everything wrong with a TASPolicy, or with each of a list of them (each problem then names its
    policy), after ``normalize_policy`` (see ``validate_policy``)."""
    if known_metrics is not None and (
        isinstance(known_metrics, (str, bytes)) or not all(isinstance(m, str) for m in known_metrics)
    ):
        raise AnsibleFilterError("tas_policy_errors: known_metrics must be a list of metric names")
    if stripped_prefix is not None and not isinstance(stripped_prefix, str):
        raise AnsibleFilterError("tas_policy_errors: stripped_prefix must be a string")
    if isinstance(policy, list):
        return validate_policies(
            [normalize_policy(p) for p in policy], known_metrics=known_metrics, stripped_prefix=stripped_prefix or ""
        )
    return validate_policy(normalize_policy(policy), known_metrics=known_metrics, stripped_prefix=stripped_prefix or "")


class FilterModule:
    """TAS policy validation."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_errors": tas_policy_errors}
