"""Helpers shared by unit and integration tests (tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import hashlib
import os
import pathlib


def tree_digest(root: pathlib.Path, mtimes: bool = False) -> str:
    """Hash a tree: paths, modes, contents, symlink targets and, with ``mtimes``, modification times.

    Tests use it to prove that a failed or check-mode run changed nothing (mtimes=True also proves
    that nothing was rewritten with the same content).
    """
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(root).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} -> {os.readlink(path)}\n".encode())
        elif path.is_file():
            stat = path.stat()
            digest.update(f"F {rel} {stat.st_mode:o} {stat.st_mtime_ns if mtimes else ''}\n".encode())
            digest.update(path.read_bytes())
        else:
            digest.update(f"D {rel} {path.stat().st_mode:o}\n".encode())
    return digest.hexdigest()
