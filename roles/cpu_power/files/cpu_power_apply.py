#!/usr/bin/env python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Re-apply the poweraware.k8s CPU power profiles at boot (installed by the cpu_power role).

Usage: cpu_power_apply.py CONFIG_JSON

The configuration is written by the role: sysfs_root, state_file, tolerance_mhz, reserved_cpus
and the assignments ({pool, profile, cpus, min_mhz, max_mhz, governor, epp, and optionally
cstates, uncore, power_cap - the dicts of the cpu_power_profile module}). The same library
as the Ansible modules does the work, so the same validation, ordering, read-back and rollback
apply. Exit status 1 if any assignment failed (each failure is printed).
"""

from __future__ import annotations

import json
import os
import sys

# The collection's node power code, installed by the role beside this file as the package tree
# ansible_collections/poweraware/k8s/plugins/module_utils/... (the files this runner's imports reach):
# first on sys.path, so the role's copy is what runs even where the node's Python has the collection too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_apply import (  # noqa: E402
    PowerError,
    Request,
    SysfsAccessor,
    apply_controls,
)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: cpu_power_apply.py CONFIG_JSON\n")
        return 2
    with open(argv[1]) as handle:
        config = json.load(handle)
    acc = SysfsAccessor(config["sysfs_root"])
    status = 0
    for item in config.get("assignments", []):
        try:
            request = Request(
                cpus=item["cpus"],
                reserved_cpus=config.get("reserved_cpus", []),
                min_mhz=item.get("min_mhz"),
                max_mhz=item.get("max_mhz"),
                governor=item.get("governor"),
                epp=item.get("epp"),
            )
            result = apply_controls(
                acc,
                request,
                cstates=item.get("cstates"),
                uncore=item.get("uncore"),
                power_cap=item.get("power_cap"),
                state_file=config["state_file"],
                tolerance_mhz=int(config.get("tolerance_mhz", 100)),
            )
        except (PowerError, OSError) as exc:
            sys.stderr.write(f"{item.get('pool')}: {exc}\n")
            status = 1
            continue
        skipped = f", offline skipped: {result['skipped_offline']}" if result["skipped_offline"] else ""
        state = "changed" if result["changed"] else "unchanged"
        label = item.get("pool") if item.get("profile") is None else f"{item.get('pool')} ({item.get('profile')})"
        sys.stdout.write(f"{label}: CPUs {result['cpus']} {state}{skipped}\n")
        for message in result["messages"]:
            sys.stdout.write(f"{item.get('pool')}: {message}\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
