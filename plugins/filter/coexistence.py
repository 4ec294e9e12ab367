# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The coexistence filters (an installation the collection did not make, for example BMRA's).

Documentation in coexistence.yml, scheduler_config_path.yml and scheduler_extender_coexistence.yml
beside this file; the decisions live in plugins/module_utils/_coexistence.py.
"""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils._coexistence import (
    CoexistenceError,
    decide,
    extender_coexistence,
    scheduler_config_path,
)


def coexistence(objects, component, choice="fail", expected=None):
    try:
        return decide(component, choice, list(objects or []), expected=expected or {})
    except CoexistenceError as exc:
        raise AnsibleFilterError("coexistence: %s" % exc) from None


def _text(value, what):
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AnsibleFilterError("%s must be text" % what)
    return value


def scheduler_config_path_filter(manifest_text):
    return scheduler_config_path(_text(manifest_text, "scheduler_config_path: the manifest"))


def scheduler_extender_coexistence(
    extenders, choice="fail", manifest_text="", config_text="", config_path="", manifest_path=""
):
    try:
        return extender_coexistence(
            choice,
            _text(manifest_text, "scheduler_extender_coexistence: manifest_text"),
            _text(config_text, "scheduler_extender_coexistence: config_text"),
            _text(config_path, "scheduler_extender_coexistence: config_path"),
            extenders,
            manifest_path=_text(manifest_path, "scheduler_extender_coexistence: manifest_path"),
        )
    except CoexistenceError as exc:
        raise AnsibleFilterError("scheduler_extender_coexistence: %s" % exc) from None


class FilterModule:
    """Decisions about installations the collection did not make."""

    def filters(self) -> dict[str, Callable]:
        return {
            "coexistence": coexistence,
            "scheduler_config_path": scheduler_config_path_filter,
            "scheduler_extender_coexistence": scheduler_extender_coexistence,
        }
