"""Copy the collection's files into DEST/ansible_collections/poweraware/k8s.

ansible-test must run from inside an ``ansible_collections/<ns>/<name>`` tree; the repository
root is the collection, so we stage a clean copy of what git tracks (plus new, non-ignored
files) instead of asking developers to clone into a special path.

The collections galaxy.yml depends on are staged beside it from this Python's ``ansible`` package
(the versions this venv tests against): a module that takes kubernetes.core's connection options
documents them with kubernetes.core's own doc fragment, which ansible-test resolves only from the
same collection root.
"""

import importlib.util
import pathlib
import shutil
import subprocess
import sys

# galaxy.yml's dependencies whose plugins our documentation or modules use
DEPENDENCIES = ("kubernetes.core",)


def stage_dependencies(root: pathlib.Path) -> None:
    for name in DEPENDENCIES:
        spec = importlib.util.find_spec(f"ansible_collections.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"{name} is not installed in {sys.executable}'s ansible package: run `make venv`")
        source = pathlib.Path(list(spec.submodule_search_locations)[0])
        namespace, collection = name.split(".")
        target = root / "ansible_collections" / namespace / collection
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "tests"))


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    dest = pathlib.Path(sys.argv[1]).resolve() / "ansible_collections" / "poweraware" / "k8s"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    if dest.exists():
        shutil.rmtree(dest)
    copied = 0
    for raw in files:
        if not raw:
            continue
        rel = pathlib.Path(raw.decode())
        src = root / rel
        if not src.is_file() or rel.parts[0] in {".ci", "mk"}:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        copied += 1
    # ansible-test wants a git work tree to list files; an empty repository is enough.
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    stage_dependencies(pathlib.Path(sys.argv[1]).resolve())
    print(f"staged {copied} files in {dest}, and {', '.join(DEPENDENCIES)} beside them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
