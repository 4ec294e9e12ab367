# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The sysfs mount point, an option of every module that reads or writes sysfs."""

    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. Tests and the lab point this at a fake tree.
    type: path
    default: /sys
"""
