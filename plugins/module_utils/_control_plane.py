# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control-plane nodes as kubeadm marks them: the taints a pod must tolerate to run there.

Pure logic, no Ansible import; Python 3.9 compatible.

kubeadm taints control-plane nodes ``node-role.kubernetes.io/control-plane:NoSchedule`` from 1.24
and ``node-role.kubernetes.io/master:NoSchedule`` before (1.20-1.23 set both; clusters upgraded
from those may still carry the old one), so a DaemonSet meant for every node tolerates both.
"""

from __future__ import annotations

CONTROL_PLANE_TAINT_KEYS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def control_plane_tolerations():
    """The tolerations that let a pod run on a kubeadm control-plane node of any release."""
    return [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in CONTROL_PLANE_TAINT_KEYS]


def tolerations(extra, on_control_plane, variable):
    """``extra`` (the user's tolerations, kept first and as given) plus, with ``on_control_plane``,
    the control-plane ones it does not hold already. Raises ValueError naming ``variable``."""
    if not isinstance(extra, list) or not all(isinstance(item, dict) for item in extra):
        raise ValueError(
            f"{variable} must be a list of tolerations (mappings with key, operator, value, effect), got "
            f"{extra!r}; fix {variable} in the inventory"
        )
    merged = list(extra)
    if on_control_plane:
        merged += [t for t in control_plane_tolerations() if t not in extra]
    return merged
