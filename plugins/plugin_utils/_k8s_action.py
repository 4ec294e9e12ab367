# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's actions over kubernetes.core share (k8s_apply, k8s_info_many): the message
when kubernetes.core is missing, and the play's module_defaults for group/kubernetes.core.k8s applied
to them as to kubernetes.core's own modules, so user plays written for the roles keep working."""

from __future__ import annotations

try:  # ansible-core 2.19+ (what its own package and service actions use)
    from ansible.executor.module_common import _apply_action_arg_defaults
except ImportError:  # pragma: no cover - older cores
    _apply_action_arg_defaults = None


def missing_kubernetes_core(plugin):
    return (
        f"poweraware.k8s.{plugin} runs kubernetes.core's client, and the kubernetes.core collection is not "
        "installed: install the ansible package (it includes it) or run "
        "`ansible-galaxy collection install kubernetes.core`."
    )


def with_group_defaults(defaults_of, task, args, templar):
    """``args`` with the module_defaults that apply to the kubernetes.core module ``defaults_of``."""
    if _apply_action_arg_defaults is None:
        return args
    return _apply_action_arg_defaults(defaults_of, task, dict(args), templar)
