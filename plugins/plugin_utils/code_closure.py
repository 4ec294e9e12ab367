# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's module_utils a script imports, for roles that run collection code off the controller.

The cpu_power role's boot runner, the power extender's service and collectd's RAPL plugin import the
collection's module_utils by their real names (``ansible_collections.poweraware.k8s.plugins.module_utils
.node_power.power_zones``). Each role installs the script's import closure as the package tree under one
directory and puts that directory on ``sys.path``: the same layout ansible-core's AnsiballZ gives
modules, computed from the sources at run time, so no role keeps a list of files that can fall behind
the imports. Pure: the sources are read through ``read`` (module path -> text, or None when there is
no such file), so tests run it on any tree.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable

PACKAGE = "ansible_collections.poweraware.k8s.plugins.module_utils"


class ClosureError(ValueError):
    pass


def _imports(source: str, module: str, is_package: bool, where: str) -> list[tuple[str, tuple[str, ...]]]:
    """(imported name, names taken from it) for every import in ``source``, function bodies included
    (an import inside a function runs too, only later)."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as err:
        raise ClosureError(f"{where}: not Python ({err.msg}, line {err.lineno})") from None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level:  # relative: resolved from the importing module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                if node.level - 1 > len(base):
                    raise ClosureError(f"{where}: relative import beyond the top-level package")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([name] if name else []))
            found.append((name, tuple(alias.name for alias in node.names)))
    return found


def closure(entry_source: str, read: Callable[[str], str | None], where: str = "<entry>") -> list[str]:
    """The module_utils files (paths relative to the collection's ``plugins/module_utils``, sorted)
    that ``entry_source`` imports, directly or through each other."""
    prefix = PACKAGE + "."
    files: set[str] = set()
    todo = [(entry_source, "__main__", False, where)]
    problems = []
    while todo:
        source, module, is_package, origin = todo.pop()
        for name, taken in _imports(source, module, is_package, origin):
            if name != PACKAGE and not name.startswith(prefix):
                continue
            relative = name[len(prefix) :].replace(".", "/") if name != PACKAGE else ""
            # ``from package import module`` names modules; ``from module import name`` names attributes
            candidates = [posixpath.join(relative, item) for item in taken if item != "*"] or []
            targets = [c for c in candidates if read(c + ".py") is not None]
            if relative and read(relative + ".py") is not None:
                targets.append(relative)
            elif not targets:
                statement = f"from {name} import {', '.join(taken)}" if taken else f"import {name}"
                problems.append(
                    f"{origin}: '{statement}' names no module of the collection (is the collection installed "
                    "whole, and is the name spelled as in plugins/module_utils?)"
                )
            for target in targets:
                path = target + ".py"
                if path not in files:
                    files.add(path)
                    dotted = PACKAGE + "." + target.replace("/", ".")
                    todo.append((read(path), dotted, False, "plugins/module_utils/" + path))
    if problems:
        raise ClosureError("; ".join(sorted(set(problems))))
    return sorted(files)


def shipped_files(entry_source: str, read: Callable[[str], str | None], where: str = "<entry>") -> list[dict]:
    """The closure as files to install under a directory on ``sys.path``: ``path`` (relative to that
    directory) and ``content``."""
    shipped = []
    for relative in closure(entry_source, read, where):
        path = "/".join(PACKAGE.split(".")) + "/" + relative
        shipped.append({"path": path, "content": read(relative)})
    return shipped
