"""The repository's shape as markdown: lines per area, the largest Python files and functions, and the
module_utils import graph by family, for the working tree or any revision (`make structure-report`).

    scripts/structure_report.py [--rev REV] [--top N]

A report, not a ledger: run it on two revisions to compare them (the figures of a structure change
belong in its commit message, not in docs).
"""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
PREFIX = "ansible_collections.poweraware.k8s.plugins.module_utils"
# area -> path prefixes (the first match counts); the product is what the collection artifact ships
AREAS = [
    ("product (plugins, roles, playbooks, meta)", ("plugins/", "roles/", "playbooks/", "meta/", "site.yml")),
    ("tests", ("tests/",)),
    ("lab", ("lab/",)),
    ("benchmarks", ("benchmarks/",)),
    ("scripts and make", ("scripts/", "mk/", "Makefile", ".ci/")),
    ("docs", ("docs/", "README.md")),
]
TEXT = (".py", ".yml", ".yaml", ".j2", ".md", ".cfg", ".toml", ".txt", ".sh", ".mk", "Makefile", "run", "site.yml")


class Tree:
    """The files of the working tree (``rev`` None) or of a revision."""

    def __init__(self, rev: str | None):
        self.rev = rev
        args = (
            ["git", "-C", str(REPO), "ls-files"]
            if rev is None
            else ["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev]
        )
        self.paths = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
        if rev is None:
            self.paths = [p for p in self.paths if (REPO / p).is_file()]

    def read(self, path: str) -> str:
        if self.rev is None:
            return (REPO / path).read_text(encoding="utf-8", errors="replace")
        show = subprocess.run(["git", "-C", str(REPO), "show", f"{self.rev}:{path}"], capture_output=True, check=True)
        return show.stdout.decode("utf-8", errors="replace")


def areas(tree: Tree) -> list[tuple[str, int, int]]:
    lines = collections.Counter()
    files = collections.Counter()
    for path in tree.paths:
        if not path.endswith(TEXT):
            continue
        for name, prefixes in AREAS:
            if path.startswith(prefixes):
                lines[name] += tree.read(path).count("\n")
                files[name] += 1
                break
    return [(name, files[name], lines[name]) for name, _prefixes in AREAS]


def python_sizes(tree: Tree):
    file_sizes, function_sizes = [], []
    for path in tree.paths:
        if not path.endswith(".py"):
            continue
        text = tree.read(path)
        file_sizes.append((text.count("\n"), path))
        try:
            parsed = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(parsed):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                function_sizes.append((node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
    return sorted(file_sizes, reverse=True), sorted(function_sizes, reverse=True)


def import_graph(tree: Tree) -> dict[str, set[str]]:
    """module_utils family -> the families it imports (a family is a package, or a top-level module)."""
    base = "plugins/module_utils/"

    def family(relative: str) -> str:
        return relative.split("/")[0].removesuffix(".py")

    edges = collections.defaultdict(set)
    for path in tree.paths:
        if not (path.startswith(base) and path.endswith(".py")):
            continue
        source = family(path[len(base) :])
        edges[source]
        for node in ast.walk(ast.parse(tree.read(path))):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module == PREFIX:
                targets = [alias.name for alias in node.names]
            elif node.module.startswith(PREFIX + "."):
                targets = [node.module[len(PREFIX) + 1 :].split(".")[0]]
            else:
                continue
            edges[source].update(t for t in targets if t != source)
    return edges


def report(tree: Tree, top: int) -> str:
    out = [f"# Structure of {tree.rev or 'the working tree'}", "", "| area | files | lines |", "|---|---:|---:|"]
    rows = areas(tree)
    out += [f"| {name} | {files} | {lines} |" for name, files, lines in rows]
    product = rows[0][2]
    other = sum(lines for name, _files, lines in rows[1:] if name != "docs")
    fragments = sum(1 for p in tree.paths if p.startswith("changelogs/fragments/"))
    out += ["", f"Non-product code (tests, lab, benchmarks, scripts) per product line: {other / max(product, 1):.2f}."]
    out += [f"Changelog fragments: {fragments}.", ""]
    files, functions = python_sizes(tree)
    out += [f"## The {top} largest Python files", "", "| lines | file |", "|---:|---|"]
    out += [f"| {n} | {p} |" for n, p in files[:top]]
    out += ["", f"## The {top} largest functions", "", "| lines | function |", "|---:|---|"]
    out += [f"| {n} | {p} |" for n, p in functions[:top]]
    graph = import_graph(tree)
    out += ["", f"## module_utils imports by family ({len(graph)} families)", ""]
    out += [f"- {name} -> {', '.join(sorted(graph[name])) or '(nothing)'}" for name in sorted(graph)]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision (default: the working tree's tracked files)")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    sys.stdout.write(report(Tree(args.rev), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
