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

import importlib.abc
import importlib.util
import json
import os
import sys

# The collection's module utilities this runner needs, installed by the role next to it as one
# JSON file (file name -> source): one file to compare and copy per node instead of one per module,
# which is most of what re-running the role on a large fleet costs.
LIBRARY_FILE = "cpu_power_lib.json"
PACKAGE = "ansible_collections.poweraware.k8s.plugins.module_utils"


class Library(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``PACKAGE.<name>`` from the sources of the library file (and its parent packages)."""

    def __init__(self, path: str, sources: dict):
        self.path = path
        self.sources = sources

    def find_spec(self, fullname, path=None, target=None):
        if fullname == PACKAGE or PACKAGE.startswith(fullname + "."):
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        prefix, _dot, name = fullname.rpartition(".")
        if prefix == PACKAGE and name + ".py" in self.sources:
            return importlib.util.spec_from_loader(fullname, self, origin=f"{self.path}:{name}.py")
        return None

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        prefix, _dot, name = module.__name__.rpartition(".")
        if prefix == PACKAGE:
            code = compile(self.sources[name + ".py"], module.__spec__.origin, "exec", dont_inherit=True)
            exec(code, module.__dict__)  # noqa: S102 - the collection's own code, installed by the role


def install_library(directory: str) -> None:
    path = os.path.join(directory, LIBRARY_FILE)
    try:
        with open(path) as handle:
            sources = json.load(handle)
    except (OSError, ValueError) as exc:
        sys.stderr.write(
            f"cannot read the runner's library {path} ({exc}): re-run the cpu_power role to reinstall it\n"
        )
        sys.exit(2)
    sys.meta_path.insert(0, Library(path, sources))


install_library(os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.poweraware.k8s.plugins.module_utils._power_apply import (  # noqa: E402
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
