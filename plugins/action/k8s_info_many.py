# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_info_many: kubernetes.core.k8s_info's action (its kubeconfig handling) for
several queries, with the play's module_defaults for group/kubernetes.core.k8s applied as they are to
kubernetes.core.k8s_info, so user plays written for the roles keep working."""

from __future__ import annotations

try:
    from ansible_collections.kubernetes.core.plugins.action.k8s_info import ActionModule as _K8sAction
except ImportError:  # kubernetes.core is not installed: say so when the action runs
    from ansible.plugins.action import ActionBase as _K8sAction

    _MISSING = (
        "poweraware.k8s.k8s_info_many runs kubernetes.core's client, and the kubernetes.core collection is not "
        "installed: install the ansible package (it includes it) or run "
        "`ansible-galaxy collection install kubernetes.core`."
    )
else:
    _MISSING = ""

try:  # ansible-core 2.19+ (what its own package and service actions use)
    from ansible.executor.module_common import _apply_action_arg_defaults
except ImportError:  # pragma: no cover - older cores
    _apply_action_arg_defaults = None

# whose module_defaults apply (the group kubernetes.core.k8s_info belongs to)
_DEFAULTS_OF = "kubernetes.core.k8s_info"


class ActionModule(_K8sAction):
    def run(self, tmp=None, task_vars=None):
        if _MISSING:
            return {"failed": True, "msg": _MISSING}
        args = self._task.args
        try:
            if _apply_action_arg_defaults is not None:
                self._task.args = _apply_action_arg_defaults(_DEFAULTS_OF, self._task, dict(args), self._templar)
            return super().run(tmp, task_vars)
        finally:
            self._task.args = args
