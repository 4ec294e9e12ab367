# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.certificate_reissue_reasons filter; documented in certificate_reissue_reasons.yml."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_check import reissue_reasons

_WANT_KEYS = {
    "is_ca",
    "subject",
    "sans",
    "key_usage",
    "extended_key_usage",
    "key_type",
    "key_size",
    "key_curve",
    "owner",
    "group",
    "renew_before",
    "force",
}


def certificate_reissue_reasons(files, want):
    """Why community.crypto's path must run for these files; an empty list when they are kept."""
    problems = []
    if not isinstance(files, dict):
        problems.append(f"the input must be certificate_files_info's result (a mapping), got {type(files).__name__}")
    if not isinstance(want, dict):
        problems.append(f"the argument must be a mapping of what the flow issues, got {type(want).__name__}")
    elif set(want) - _WANT_KEYS:
        problems.append(f"unknown keys {sorted(set(want) - _WANT_KEYS)} in the argument; known: {sorted(_WANT_KEYS)}")
    if problems:
        raise AnsibleFilterError("certificate_reissue_reasons: " + "; ".join(problems))
    want = dict(want)
    for flag in ("is_ca", "force"):  # "-e" gives strings: read them as YAML booleans
        want[flag] = boolean(want.get(flag, False), strict=False)
    return reissue_reasons(files, want)


class FilterModule:
    """Certificate keep-or-issue decision."""

    def filters(self) -> dict[str, Callable]:
        return {"certificate_reissue_reasons": certificate_reissue_reasons}
