# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.peaks_plan filter; documentation in peaks_plan.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.peaks import plan


def peaks_plan(
    configmaps,
    key,
    scheduler_name,
    watcher_address,
    nodes=None,
    where="ConfigMap",
    image_tag=None,
    server_version=None,
    allow_skew=False,
):
    """The Peaks scheduler's configuration from the published models (see ``peaks.plan``)."""
    if not isinstance(configmaps, list):
        raise AnsibleFilterError(
            f"peaks_plan: expected the resources list of a ConfigMap lookup (k8s_info), not {type(configmaps).__name__}"
        )
    names = [n.get("metadata", {}).get("name") if isinstance(n, dict) else n for n in (nodes or [])]
    try:
        allow = boolean(allow_skew, strict=True)
    except TypeError:
        raise AnsibleFilterError(f"peaks_plan: allow_skew must be a boolean, not {allow_skew!r}") from None
    return plan(
        configmaps[0] if configmaps else None,
        str(key),
        scheduler_name,
        watcher_address,
        names,
        where,
        image_tag=None if image_tag is None else str(image_tag),
        server_version=server_version,
        allow_skew=allow,
    )


class FilterModule:
    """The peaks role's decisions."""

    def filters(self) -> dict[str, Callable]:
        return {"peaks_plan": peaks_plan}
