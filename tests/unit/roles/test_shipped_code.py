"""The collection code that runs off the controller ships whole: for each script a role installs on a
host or in a pod (the cpu_power boot runner, the pod power agent, the power extender's service, collectd's
RAPL plugin), the files the roles install with it (the module_utils_closure filter, which the roles call) must
hold every module_utils module the script reaches - a missing one would stop the service at start on every
cluster.

Two checks that do not share code with the filter: the import closure computed here from the sources
(every ``import``, function bodies included) is covered by the shipped files, and the script, installed
with only those files in a fresh directory, imports in an interpreter that sees nothing but the standard
library and that directory (``-I -S``, as on a node without the collection).
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.filter.module_utils_closure import module_utils_closure

REPO = pathlib.Path(__file__).resolve().parents[3]
MODULE_UTILS = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections.poweraware.k8s.plugins.module_utils"
TREE = "ansible_collections/poweraware/k8s/plugins/module_utils/"

# (script, a module it must reach: the test would pass vacuously on a script that imported nothing)
ENTRY_POINTS = [
    ("roles/cpu_power/files/cpu_power_apply.py", "node_power/power_apply.py"),
    ("roles/power_extender/files/poweraware_extender.py", "placement/extender.py"),
    ("roles/collectd/files/rapl_power.py", "node_power/power_zones.py"),
    ("roles/pod_power/files/pod_power_agent.py", "node_power/pod_power.py"),
]
IDS = [pathlib.Path(entry[0]).stem for entry in ENTRY_POINTS]
# Roles that install the closure of each script (the filter call, with the script's own name).
CALLERS = {
    "roles/cpu_power/files/cpu_power_apply.py": "roles/cpu_power/tasks/present.yml",
    "roles/power_extender/files/poweraware_extender.py": "roles/power_extender/vars/main.yml",
    "roles/collectd/files/rapl_power.py": "roles/collectd/tasks/deploy.yml",
    "roles/pod_power/files/pod_power_agent.py": "roles/pod_power/tasks/node_install.yml",
}


def imported_files(source: str) -> set[str]:
    """module_utils files (relative paths) one source names in its imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith(PREFIX + "."):
                relative = name[len(PREFIX) + 1 :].replace(".", "/") + ".py"
                if (MODULE_UTILS / relative).is_file():
                    found.add(relative)
    return found


def closure(script: pathlib.Path) -> set[str]:
    seen, todo = set(), list(imported_files(script.read_text()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported_files((MODULE_UTILS / name).read_text()))
    return seen


@pytest.mark.parametrize(("script", "reached"), ENTRY_POINTS, ids=IDS)
def test_the_shipped_files_cover_the_scripts_import_closure(script, reached):
    path = REPO / script
    shipped = {entry["path"] for entry in module_utils_closure(path.read_text(), path.name)}
    needed = {TREE + name for name in closure(path)}
    assert TREE + reached in needed
    assert needed <= shipped, f"not shipped: {sorted(needed - shipped)}"
    assert shipped <= {TREE + str(p.relative_to(MODULE_UTILS)) for p in MODULE_UTILS.rglob("*.py")}
    # the role installs what the filter computes for this very script
    assert f"module_utils_closure('{path.name}'" in (REPO / CALLERS[script]).read_text()


@pytest.mark.parametrize(("script", "reached"), ENTRY_POINTS, ids=IDS)
def test_the_script_imports_with_only_the_shipped_files(tmp_path, script, reached):
    path = REPO / script
    for entry in module_utils_closure(path.read_text(), path.name, str(tmp_path)):
        target = pathlib.Path(entry["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(entry["content"])
    (tmp_path / path.name).write_text(path.read_text())
    check = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        f"spec = importlib.util.spec_from_file_location('entry', {str(tmp_path / path.name)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"print(sys.modules[{PREFIX + '.' + reached[:-3].replace('/', '.')!r}].__file__)\n"
    )
    run = subprocess.run([sys.executable, "-I", "-S", "-c", check], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(tmp_path / TREE / reached)
