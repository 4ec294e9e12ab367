"""Copy the collection's files into DEST/ansible_collections/poweraware/k8s.

ansible-test must run from inside an ``ansible_collections/<ns>/<name>`` tree; the repository
root is the collection, so we stage a clean copy of what git tracks (plus new, non-ignored
files) instead of asking developers to clone into a special path.
"""

import pathlib
import shutil
import subprocess
import sys


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
    print(f"staged {copied} files in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
