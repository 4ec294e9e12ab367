# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_info_many: the module of the same name, with the connection options
kubernetes.core.k8s_info gets from its action and the play.

The module reads several queries as kubernetes.core.k8s_info reads one. Before running it, this
action does what kubernetes.core's k8s_info action does for that module's connection options: the
play's module_defaults for group/kubernetes.core.k8s (and for kubernetes.core.k8s_info itself) apply
as they do to kubernetes.core.k8s_info, and a kubeconfig on the controller is found there
(plugin_utils/_k8s_action.py).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.poweraware.k8s.plugins.plugin_utils._k8s_action import (
    controller_kubeconfig,
    kubernetes_core_missing,
    with_module_defaults,
)

_MODULE = "poweraware.k8s.k8s_info_many"
# whose module_defaults apply (the module whose queries this one runs)
_DEFAULTS_OF = "kubernetes.core.k8s_info"


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        missing = kubernetes_core_missing("k8s_info_many")
        if missing:
            result.update(failed=True, msg=missing)
            return result
        module_args = with_module_defaults(self._task, self._templar, _DEFAULTS_OF)
        if module_args.get("kubeconfig"):
            module_args["kubeconfig"] = controller_kubeconfig(self, module_args["kubeconfig"])
        result.update(self._execute_module(module_name=_MODULE, module_args=module_args, task_vars=task_vars))
        return result
