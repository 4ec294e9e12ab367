"""The power_extender role ships its service with the module_utils it imports (vars/main.yml,
``_power_extender_files``): the import closure of ``poweraware_extender.py`` over the collection's
module_utils, computed from the sources, must be exactly the shipped set - a module the service
imports and the list lacks would stop the extender's pod at start on every cluster."""

from __future__ import annotations

import ast
import pathlib

import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "power_extender"
PREFIX = "ansible_collections.poweraware.k8s.plugins.module_utils."


def module_utils_imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            names.add(node.module[len(PREFIX) :])
        elif isinstance(node, ast.ImportFrom) and node.module == PREFIX.rstrip("."):
            names.update(alias.name for alias in node.names)
    return names


def closure(entry: pathlib.Path) -> set[str]:
    seen, todo = set(), list(module_utils_imports(entry))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(module_utils_imports(REPO / "plugins" / "module_utils" / f"{name}.py"))
    return seen


def test_the_shipped_module_utils_are_the_services_import_closure():
    files = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_power_extender_files"]
    shipped = {
        pathlib.PurePosixPath(f["dest"]).stem
        for f in files
        if f["dest"].startswith("ansible_collections/poweraware/k8s/plugins/module_utils/")
    }
    needed = closure(ROLE / "files" / "poweraware_extender.py")
    assert "_extender" in needed and "_k8s_names" in needed
    assert shipped == needed, f"ship {sorted(needed - shipped)}, drop {sorted(shipped - needed)}"
