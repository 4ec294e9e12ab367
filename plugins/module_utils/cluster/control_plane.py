# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control-plane nodes as kubeadm marks them: the taints a pod must tolerate to run there, and the
label that selects them in each Kubernetes release.

Pure logic, no Ansible import; Python 3.9 compatible.

kubeadm taints control-plane nodes ``node-role.kubernetes.io/control-plane:NoSchedule`` from 1.24
and ``node-role.kubernetes.io/master:NoSchedule`` before (1.20-1.23 set both; clusters upgraded
from those may still carry the old one), so a DaemonSet meant for every node tolerates both.
"""

from __future__ import annotations

CONTROL_PLANE_TAINT_KEYS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

# The node label that selects control-plane nodes, by the Kubernetes release (major, minor) from which
# it is chosen, newest first: kubeadm has labelled them node-role.kubernetes.io/control-plane since 1.20
# and stopped setting node-role.kubernetes.io/master in 1.24.
CONTROL_PLANE_LABELS = (
    ((1, 24), "node-role.kubernetes.io/control-plane"),
    ((0, 0), "node-role.kubernetes.io/master"),
)


def control_plane_label(release, given="", variable="the control-plane label"):
    """``given`` (the user's label) when it is not empty, else the label of control-plane nodes in
    ``release`` (``(major, minor)``) from CONTROL_PLANE_LABELS. Raises ValueError naming ``variable``."""
    if not isinstance(given, str):
        raise ValueError(
            f"{variable} must be a node label key such as {CONTROL_PLANE_LABELS[0][1]}, or empty to choose it by "
            f"the cluster's version, got {given!r}; fix {variable} in the inventory"
        )
    if given:
        return given
    release = tuple(release)[:2]
    for since, label in CONTROL_PLANE_LABELS:
        if release >= since:
            return label
    return CONTROL_PLANE_LABELS[-1][1]


def control_plane_tolerations(keys=CONTROL_PLANE_TAINT_KEYS):
    """The tolerations that let a pod run on a control-plane node tainted with ``keys`` (by default
    kubeadm's of any release)."""
    return [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in keys]


def tolerations(extra, on_control_plane, variable, keys=CONTROL_PLANE_TAINT_KEYS, control_plane_first=False):
    """``extra`` (the user's tolerations, as given) plus, with ``on_control_plane``, the control-plane
    ones (for the taints ``keys``) it does not hold already: after the user's, or before them with
    ``control_plane_first``. Raises ValueError naming ``variable``."""
    if not isinstance(extra, list) or not all(isinstance(item, dict) for item in extra):
        raise ValueError(
            f"{variable} must be a list of tolerations (mappings with key, operator, value, effect), got "
            f"{extra!r}; fix {variable} in the inventory"
        )
    if isinstance(keys, str) or not keys or not all(isinstance(key, str) and key for key in keys):
        raise ValueError(
            f"the control-plane taint keys for {variable} must be a list of taint keys such as "
            f"{CONTROL_PLANE_TAINT_KEYS[0]}, got {keys!r}"
        )
    merged = list(extra)
    if not on_control_plane:
        return merged
    own = [t for t in control_plane_tolerations(keys) if t not in extra]
    return own + merged if control_plane_first else merged + own
