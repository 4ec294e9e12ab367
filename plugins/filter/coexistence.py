# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.coexistence, scheduler_config_path, scheduler_extender_coexistence, removal_plan and
namespace_removal_plan filters; documentation in the .yml file of each name beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.coexistence import (
    CoexistenceError,
    decide,
    extender_coexistence,
    namespace_queries,
    namespace_removal,
    removal,
    scheduler_config_path,
)


def coexistence(objects, component, choice="fail", expected=None):
    """What a role does about the objects it found that may not be ours (see ``decide``)."""
    try:
        return decide(component, choice, list(objects or []), expected=expected or {})
    except CoexistenceError as exc:
        raise AnsibleFilterError(f"coexistence: {exc}") from None


def _text(value, what):
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AnsibleFilterError(f"{what} must be text")
    return value


def scheduler_config_path_filter(manifest_text):
    """The configuration file a kube-scheduler manifest loads (see ``scheduler_config_path``)."""
    return scheduler_config_path(_text(manifest_text, "scheduler_config_path: the manifest"))


def scheduler_extender_coexistence(
    extenders, choice="fail", manifest_text="", config_text="", config_path="", manifest_path=""
):
    """What to do about extenders kube-scheduler already loads (see ``extender_coexistence``)."""
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
        raise AnsibleFilterError(f"scheduler_extender_coexistence: {exc}") from None


def removal_plan(objects, found=None):
    """What a role's removal reads and removes (see ``removal``)."""
    try:
        return removal(objects, found)
    except CoexistenceError as exc:
        raise AnsibleFilterError(str(exc)) from None


def namespace_removal_plan(namespace, found=None):
    """Whether a role's namespace is deleted (see ``namespace_removal``); without ``found`` the queries."""
    try:
        if found is None:
            return {"queries": namespace_queries(str(namespace))}
        return {"queries": namespace_queries(str(namespace)), **namespace_removal(str(namespace), found)}
    except CoexistenceError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """Decisions about installations the collection did not make."""

    def filters(self) -> dict[str, Callable]:
        return {
            "coexistence": coexistence,
            "scheduler_config_path": scheduler_config_path_filter,
            "scheduler_extender_coexistence": scheduler_extender_coexistence,
            "removal_plan": removal_plan,
            "namespace_removal_plan": namespace_removal_plan,
        }
