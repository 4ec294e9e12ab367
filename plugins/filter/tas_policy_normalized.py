# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.tas_policy_normalized filter; documentation in tas_policy_normalized.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.tas_policy import normalize_policy


def tas_policy_normalized(policy):
    """The TASPolicy with whole-number string targets as integers (see ``normalize_policy``)."""
    return normalize_policy(policy)


class FilterModule:
    """TAS policy normalization."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_normalized": tas_policy_normalized}
