"""Mutation testing of plugins/module_utils and plugins/filter with mutmut (`make mutation`).

mutmut names a mutant after the module path of the file it mutated and only activates it when the
running function's ``__module__`` matches. Our tests import the collection by its real name
(``ansible_collections.poweraware.k8s.plugins...``), so mutmut has to see the code at that path:
``run`` stages the repository as ``.cache/mutation/ansible_collections/poweraware/k8s`` (symbolic
links to the real tree, which mutmut copies from and never writes to) and runs mutmut there with
the ``[tool.mutmut]`` settings of pyproject.toml. mutmut writes its mutated copies and results
under ``.cache/mutation/mutants``; the repository itself is never modified.

    scripts/mutation.py run [NAME ...] [--max-children N] [--fresh | --retest-survivors]
                            [--baseline TEST_FILE ... [--rev REV]]
        NAME: a file stem (``cpulist``; ``power_model`` is the filter and the module_utils file) or the
        end of its path (``placement/power_model``, ``filter/power_model``); default all files
        selected by ``only_mutate``. ``--fresh`` forgets earlier results for the named files,
        ``--retest-survivors`` tests again only the mutants that were not killed;
        ``--baseline`` scores the tests with the given test files as committed in REV (default HEAD),
        for a before/after comparison of test changes; ``--tests 'PATH ... [--ignore=PATH]'`` narrows
        the test selection (faster; the score then counts only what those tests kill).
    scripts/mutation.py report [NAME ...] [--survivors]
        mutation score per file from mutmut's results; ``--survivors`` lists surviving mutants
        (show one with ``cd .cache/mutation && ../../.venv/bin/mutmut show <name>``).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib

REPO = pathlib.Path(__file__).resolve().parent.parent
STAGE = REPO / ".cache" / "mutation"
PREFIX = pathlib.Path("ansible_collections/poweraware/k8s")
MUTANTS = STAGE / "mutants"
# Never staged: the virtual environment, caches (which hold the collection link back to the repository),
# version control and mutmut's own output.
SKIP = {
    ".venv",
    ".venv-oldest",
    ".cache",
    ".git",
    "mutants",
    ".hypothesis",
    ".pytest_cache",
    ".ruff_cache",
    "__pycache__",
}

KILLED = {1, 3, 36, 24, -24, 152, 255, 37}  # a failing test, pytest internal error, timeout, type check
NOT_RUN = {None, 2, 34}  # not checked yet, interrupted, skipped


def load_settings() -> dict:
    data = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    return {
        "mutmut": data["tool"]["mutmut"],
        "pytest": data["tool"].get("pytest", {}).get("ini_options", {}),
    }


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"unsupported setting {value!r}")


def baseline_tests(rev: str, paths: list[str]) -> pathlib.Path:
    """The work tree's tests/, except ``paths`` as committed in ``rev`` (absent there: left out).

    For a before/after score of test changes: ``git show`` reads the old versions; the work tree is
    not touched, and other test changes in progress stay as they are.
    """
    target = STAGE / "tests-baseline" / "tests"
    shutil.rmtree(target.parent, ignore_errors=True)
    shutil.copytree(REPO / "tests", target, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    for path in paths:
        rel = pathlib.Path(path)
        if rel.parts[0] != "tests":
            sys.exit(f"mutation: --baseline takes paths under tests/, got {path}")
        shown = subprocess.run(["git", "show", f"{rev}:{rel.as_posix()}"], cwd=REPO, capture_output=True, check=False)
        dest = target.parent / rel
        if shown.returncode == 0:
            dest.write_bytes(shown.stdout)
        else:
            dest.unlink(missing_ok=True)
    return target


def stage(settings: dict, baseline: tuple[str, list[str]] | None = None, tests: list[str] | None = None) -> None:
    """The staging tree: links to every top-level entry of the repository, and mutmut's pyproject."""
    root = STAGE / PREFIX
    root.mkdir(parents=True, exist_ok=True)
    entries = sorted(p.name for p in REPO.iterdir() if p.name not in SKIP)
    sources = {name: REPO / name for name in entries}
    if baseline:
        sources["tests"] = baseline_tests(*baseline)
    for name in entries:
        link = root / name
        if link.is_symlink() or link.exists():
            if link.is_symlink() and os.readlink(link) == str(sources[name]):
                continue
            link.unlink()
        link.symlink_to(sources[name])
    for stale in root.iterdir():
        if stale.name not in entries:
            stale.unlink()

    mutmut = dict(settings["mutmut"])
    if tests:
        # A narrower test selection (faster; the score then counts only what these tests kill).
        mutmut["pytest_add_cli_args_test_selection"] = [
            f"{t.partition('=')[0]}={PREFIX / t.partition('=')[2]}" if t.startswith("--") else str(PREFIX / t)
            for t in tests
        ]
    # mutmut copies these into mutants/ on every run; plugins/ is its source path, copied separately.
    mutmut["also_copy"] = [str(PREFIX / name) for name in entries if name != "plugins"]
    lines = ["# Generated by scripts/mutation.py from the repository's pyproject.toml; do not edit.", "[tool.mutmut]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in mutmut.items()]
    lines += ["", "[tool.pytest.ini_options]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings["pytest"].items()]
    (STAGE / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    # The copy of the tests must not keep files deleted from the repository.
    shutil.rmtree(MUTANTS / PREFIX / "tests", ignore_errors=True)
    # Ansible (filter plugin tests, ansible.cfg) finds the collection through .cache/collections, as in
    # the repository: link it to the mutated copy.
    link = MUTANTS / PREFIX / ".cache" / "collections" / PREFIX
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to("../../../..")


def source_files(settings: dict) -> list[pathlib.Path]:
    """Files mutmut mutates, relative to the staging directory."""
    mutmut = settings["mutmut"]
    found = []
    for source in mutmut["source_paths"]:
        base = REPO / pathlib.Path(source).relative_to(PREFIX)
        for path in sorted(base.rglob("*.py")):
            rel = str(PREFIX / path.relative_to(REPO))
            if mutmut.get("only_mutate") and not any(fnmatch.fnmatch(rel, p) for p in mutmut["only_mutate"]):
                continue
            if any(fnmatch.fnmatch(rel, p) for p in mutmut.get("do_not_mutate", [])):
                continue
            found.append(pathlib.Path(rel))
    return found


def select(files: list[pathlib.Path], names: list[str]) -> list[pathlib.Path]:
    if not names:
        return files
    chosen = []
    for name in names:
        # a file stem (``cpulist``: every file of that name) or the end of its path (``node_power/cpulist``)
        wanted = name.removesuffix(".py")
        match = [f for f in files if f.stem == wanted or str(f.with_suffix("")).endswith("/" + wanted)]
        if not match:
            sys.exit(f"mutation: {name} is not a file mutmut mutates (see [tool.mutmut] only_mutate)")
        chosen += match
    return chosen


def module_name(path: pathlib.Path) -> str:
    return str(path.with_suffix("")).replace(os.sep, ".")


def run(args: argparse.Namespace, settings: dict) -> int:
    stage(settings, (args.rev, args.baseline) if args.baseline else None, args.tests.split() if args.tests else None)
    files = select(source_files(settings), args.names)
    if args.fresh:
        for path in files:
            for stale in (MUTANTS / path, MUTANTS / f"{path}.meta"):
                stale.unlink(missing_ok=True)
    elif args.retest_survivors:
        # New tests only add kills: test again what was not killed, keep the other verdicts.
        for path in files:
            meta = MUTANTS / f"{path}.meta"
            if meta.is_file():
                data = json.loads(meta.read_text("utf-8"))
                codes = data["exit_code_by_key"]
                data["exit_code_by_key"] = {k: (c if c in KILLED else None) for k, c in codes.items()}
                meta.write_text(json.dumps(data, indent=4), encoding="utf-8")
    mutmut = [str(REPO / ".venv" / "bin" / "mutmut"), "run", "--max-children", str(args.max_children)]
    # mutmut's run argument selects mutants by name: one glob per file.
    patterns = [f"{module_name(path)}.*" for path in files] if args.names else []
    env = dict(os.environ)
    env.setdefault("SHARED_DATA", str(REPO.parent / "shared" / "data"))  # as the Makefile does
    return subprocess.call(mutmut + patterns, cwd=STAGE, env=env)


def results(path: pathlib.Path) -> dict[str, int | None]:
    meta = MUTANTS / f"{path}.meta"
    if not meta.is_file():
        return {}
    return json.loads(meta.read_text("utf-8"))["exit_code_by_key"]


def report(args: argparse.Namespace, settings: dict) -> int:
    files = select(source_files(settings), args.names)
    rows = []
    total_killed = total_run = 0
    survivors: list[str] = []
    for path in files:
        codes = results(path)
        run_codes = {k: c for k, c in codes.items() if c not in NOT_RUN}
        killed = sum(1 for c in run_codes.values() if c in KILLED)
        alive = sorted(k for k, c in run_codes.items() if c not in KILLED)
        survivors += alive
        pending = len(codes) - len(run_codes)
        score = f"{100.0 * killed / len(run_codes):.1f} %" if run_codes else "-"
        rows.append((str(path.relative_to(PREFIX)), len(codes), killed, len(alive), pending, score))
        total_killed += killed
        total_run += len(run_codes)
    print("| file | mutants | killed | survived | not run | score |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| {} | {} | {} | {} | {} | {} |".format(*row))
    if total_run:
        score = 100.0 * total_killed / total_run
        print(f"| **total** | | {total_killed} | {total_run - total_killed} | | {score:.1f} % |")
    if args.survivors and survivors:
        print()
        print("surviving mutants (show with: cd .cache/mutation && ../../.venv/bin/mutmut show NAME):")
        for name in survivors:
            print(f"  {name}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="stage the collection and run mutmut")
    p_run.add_argument("names", nargs="*")
    p_run.add_argument("--max-children", type=int, default=1)
    p_run.add_argument("--fresh", action="store_true", help="forget earlier results for these files")
    p_run.add_argument("--retest-survivors", action="store_true", help="test again the mutants not killed")
    p_run.add_argument("--baseline", nargs="+", metavar="TEST_FILE", help="take these test files from --rev")
    p_run.add_argument("--rev", default="HEAD", help="revision for --baseline (default HEAD)")
    p_run.add_argument("--tests", metavar="'PATH ... [--ignore=PATH]'", help="tests instead of [tool.mutmut]'s")
    p_report = sub.add_parser("report", help="mutation score per file")
    p_report.add_argument("names", nargs="*")
    p_report.add_argument("--survivors", action="store_true")
    args = parser.parse_args()
    settings = load_settings()
    return run(args, settings) if args.command == "run" else report(args, settings)


if __name__ == "__main__":
    sys.exit(main())
