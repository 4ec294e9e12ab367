# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_info_many: kubernetes.core.k8s_info's action (its kubeconfig handling) for
several queries, with the play's module_defaults for group/kubernetes.core.k8s applied as they are to
kubernetes.core.k8s_info."""

from __future__ import annotations

from ansible_collections.poweraware.k8s.plugins.plugin_utils._k8s_action import (
    missing_kubernetes_core,
    with_group_defaults,
)

try:
    from ansible_collections.kubernetes.core.plugins.action.k8s_info import ActionModule as _K8sAction
except ImportError:  # kubernetes.core is not installed: say so when the action runs
    from ansible.plugins.action import ActionBase as _K8sAction

    _MISSING = missing_kubernetes_core("k8s_info_many")
else:
    _MISSING = ""

# whose module_defaults apply (the group kubernetes.core.k8s_info belongs to)
_DEFAULTS_OF = "kubernetes.core.k8s_info"


class ActionModule(_K8sAction):
    def run(self, tmp=None, task_vars=None):
        if _MISSING:
            return {"failed": True, "msg": _MISSING}
        args = self._task.args
        try:
            self._task.args = with_group_defaults(_DEFAULTS_OF, self._task, args, self._templar)
            return super().run(tmp, task_vars)
        finally:
            self._task.args = args
