# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's actions over kubernetes.core share (k8s_apply, k8s_info_many).

Both run a module through ActionBase._execute_module, the documented way for an action to run a
module, instead of inheriting kubernetes.core's action plugins (whose classes are not an interface
kubernetes.core promises). What those plugins did before running the module, and what the roles
and users' plays rely on, is done here with public ansible-core interfaces only:

- the play's module_defaults for kubernetes.core. ansible-core gives an action the defaults of the
  groups that list it; this collection's group `poweraware.k8s.k8s` lists both actions (and extends
  kubernetes.core's group), but kubernetes.core's own group `kubernetes.core.k8s` cannot list them:
  `extend_group` adds other groups' actions to one's own group, never one's actions to another
  collection's. Plays written for the roles set `group/kubernetes.core.k8s`, so the actions read
  those defaults from the task's `module_defaults` keyword themselves (`with_module_defaults`);
- a kubeconfig or `src` on the controller: when the module runs there (a local connection), a
  relative path is looked up in the role's and play's `files/`, and a vault-encrypted kubeconfig is
  decrypted, as kubernetes.core's actions do (`controller_kubeconfig`, `controller_src`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail, AnsibleError

# The module_defaults keys that reach kubernetes.core's modules as ansible-core spells them once the
# play is loaded (fully qualified): kubernetes.core's group, and ansible-core's legacy short name
# `group/k8s` (the group ansible.builtin.k8s, which extends kubernetes.core's).
KUBERNETES_CORE_GROUPS = ("group/kubernetes.core.k8s", "group/ansible.builtin.k8s")

# kubernetes.core's separator of several kubeconfig paths on a POSIX controller (the only kind of
# controller ansible-core runs on).
_KUBECONFIG_SEPARATOR = ":"
_URL_SCHEMES = ("http://", "https://", "ftp://")


def kubernetes_core_missing(plugin: str) -> str:
    """The message when the kubernetes.core collection is not installed; empty when it is."""
    try:
        found = importlib.util.find_spec("ansible_collections.kubernetes.core") is not None
    except ImportError:  # not even the namespace ansible_collections.kubernetes
        found = False
    if found:
        return ""
    return (
        f"poweraware.k8s.{plugin} runs kubernetes.core's modules, and the kubernetes.core collection is not "
        "installed: install the ansible package (it includes it) or run "
        "`ansible-galaxy collection install kubernetes.core`."
    )


def with_module_defaults(task, templar, module: str) -> dict:
    """The task's arguments over the play's module_defaults for kubernetes.core's ``module``.

    The defaults are those ansible-core gives ``module`` itself: its group's (KUBERNETES_CORE_GROUPS)
    and its own entry (``kubernetes.core.k8s: {...}``), the latter winning, merged over the play's,
    blocks' and task's `module_defaults` (the innermost winning), and rendered only where the task
    does not set the option (a default the task overrides is never templated), as ansible-core
    renders them. The defaults of `group/poweraware.k8s.k8s` are already in the task's arguments:
    ansible-core puts them there, the actions being members of that group.
    """
    args = dict(task.args)
    layers = {}
    for layer in task.module_defaults or []:
        layers.update(layer)
    defaults = {}
    for key in (*KUBERNETES_CORE_GROUPS, module):
        if key not in layers:
            continue
        value = layers[key]
        if isinstance(value, str):  # the whole mapping given as one template
            value = templar.template(value)
        if not isinstance(value, Mapping):
            raise AnsibleActionFail(
                f"module_defaults {key}: must be a mapping of option names to values, got "
                f"{type(value).__name__}; fix: give it as, for example, {{kubeconfig: /etc/kubernetes/admin.conf}}."
            )
        defaults.update(value)
    pending = {key: value for key, value in defaults.items() if key not in args}
    if pending:
        args = {**templar.template(pending), **args}
    return args


def runs_on_controller(action) -> bool:
    """Whether the module runs where the action does: a local connection (kubernetes.core's test)."""
    return action._connection.transport == "local"


def controller_file(action, option: str, path: str) -> str:
    """``path`` of option ``option`` found on the controller as kubernetes.core finds it: as given
    when absolute, else in the role's and play's ``files/``."""
    try:
        return action._find_needle("files", path)
    except AnsibleError:
        # ansible-core's own message speaks of remote_src, which no option here has
        raise AnsibleActionFail(
            f"{option} {path}: cannot be found or read on the controller, where this task's module runs "
            "(a local connection); fix: give the path of an existing file, absolute or relative to the "
            "role's or the playbook's files/ directory."
        ) from None


def controller_kubeconfig(action, kubeconfig):
    """``kubeconfig`` as the module should get it.

    A mapping (an inline kubeconfig) is passed on as it is. A path, or several joined by ``:``, is
    read by the module where it runs: on a remote host as given; on the controller (a local
    connection) each path is found as kubernetes.core finds it (controller_file) and, when
    vault-encrypted, decrypted to a temporary file that ansible-core removes when the run ends.
    """
    if isinstance(kubeconfig, Mapping):
        return kubeconfig
    if not isinstance(kubeconfig, str):
        raise AnsibleActionFail(
            f"kubeconfig must be the path of a kubeconfig file (or several joined by ':') or a kubeconfig "
            f"mapping, got {type(kubeconfig).__name__}; fix: give a path such as /etc/kubernetes/admin.conf."
        )
    if not runs_on_controller(action):
        return kubeconfig
    found = [controller_file(action, "kubeconfig", path) for path in kubeconfig.split(_KUBECONFIG_SEPARATOR)]
    return _KUBECONFIG_SEPARATOR.join(action._loader.get_real_file(path, decrypt=True) for path in found)


def controller_src(action, src):
    """``src`` as the module should get it: a URL, or a path on a remote host, as given; a path on
    the controller found as kubernetes.core finds it (controller_file)."""
    if not isinstance(src, str) or src.startswith(_URL_SCHEMES) or not runs_on_controller(action):
        return src
    return controller_file(action, "src", src)
