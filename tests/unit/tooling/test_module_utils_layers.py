"""The module_utils packages import one way (docs/development.md, "Map"): each family imports its own
package, the shared modules and the families this table allows, so the graph has no cycle and the code
a role ships off the controller (node_power with node_files, placement with the shared grammar) does
not drag a controller-side family along. Third-party imports are the few listed, each for a reason."""

from __future__ import annotations

import ast
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]
MODULE_UTILS = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections.poweraware.k8s.plugins.module_utils"

# family (a package, or a shared top-level module) -> the families it may import
ALLOWED = {
    "node_files": set(),
    "node_power": {"node_files"},
    "k8s_names": set(),
    "quantity": set(),
    "cluster": {"k8s_names", "quantity"},
    "placement": {"k8s_names", "quantity"},
    "scheduler": {"cluster", "placement", "k8s_names", "quantity", "node_files"},
}
# (file, top-level module): what runs where it is known to be installed
THIRD_PARTY = {
    ("scheduler/yaml_edit.py", "yaml"),  # optional (guarded): the host's PyYAML, when it has one
    ("scheduler/coexistence.py", "ansible"),  # ansible-core's YAML loader (a filter's, on the controller)
    ("cluster/cert_files.py", "cryptography"),  # community.crypto's requirement on the host
    ("cluster/cert_check.py", "cryptography"),  # controller side, as community.crypto's modules
}


def family(relative: str) -> str:
    return relative.split("/")[0].removesuffix(".py")


def imports():
    for path in sorted(MODULE_UTILS.rglob("*.py")):
        relative = str(path.relative_to(MODULE_UTILS))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{relative}: relative import (use the collection's full name)"
                names = [(node.module, [alias.name for alias in node.names])]
            else:
                continue
            for name, taken in names:
                yield relative, name, taken


def test_every_family_is_in_the_table():
    assert {family(str(p.relative_to(MODULE_UTILS))) for p in MODULE_UTILS.rglob("*.py")} == set(ALLOWED)


def test_families_import_one_way():
    wrong = []
    for relative, name, taken in imports():
        if name == PREFIX:
            targets = [family(item) for item in taken]
        elif name.startswith(PREFIX + "."):
            targets = [family(name[len(PREFIX) + 1 :].replace(".", "/"))]
        else:
            continue
        source = family(relative)
        wrong += [f"{relative} -> {t}" for t in targets if t != source and t not in ALLOWED[source]]
    assert wrong == []


def test_the_table_has_no_cycle():
    def reach(start, seen):
        for nxt in ALLOWED[start]:
            assert nxt != start and nxt not in seen, f"cycle through {start} -> {nxt}"
            reach(nxt, seen | {start})

    for name in ALLOWED:
        reach(name, frozenset())


def test_only_the_standard_library_besides_the_listed_third_party_imports():
    found = set()
    for relative, name, _taken in imports():
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top != "ansible_collections":
            found.add((relative, top))
    assert found == THIRD_PARTY


def test_no_private_name_is_imported_from_another_module():
    """A name with a leading underscore is its module's own: another module, a plugin or a test that
    needs it means it is public (a family's shared helper) or the caller should use what is."""
    wrong = []
    for path in sorted(REPO.joinpath("plugins").rglob("*.py")) + sorted(REPO.joinpath("tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections.poweraware"):
                package = REPO.joinpath(*node.module.split(".")[3:])
                # a module whose file name starts with "_" (plugin_utils/_k8s_action.py) is imported whole
                private = [
                    alias.name
                    for alias in node.names
                    if alias.name.startswith("_") and not package.joinpath(alias.name + ".py").is_file()
                ]
                wrong += [f"{path.relative_to(REPO)}: {node.module}.{name}" for name in private]
    assert wrong == []


def test_tests_reach_the_collection_through_public_names():
    """A test that reads ``module._helper`` pins an internal that only tests read: it checks the
    behaviour through the public function that uses the helper instead."""
    wrong = []
    for path in sorted(REPO.joinpath("tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections.poweraware"):
                package = REPO.joinpath(*node.module.split(".")[3:])
                modules |= {a.asname or a.name for a in node.names if package.joinpath(a.name + ".py").is_file()}
            elif isinstance(node, ast.Import):
                ours = [a for a in node.names if a.name.startswith("ansible_collections.poweraware")]
                modules |= {a.asname for a in ours if a.asname}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert wrong == []
