"""Documentation and metadata point only at things that exist (issue: docs that disagree with code).

Source headers, docs and comments cited a ``DESIGN.md`` and a ``LICENSES/`` folder the repository
does not have, and galaxy.yml had placeholder ``example.invalid`` links.
"""

from __future__ import annotations

import os
import pathlib

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
SKIP_DIRS = {
    ".git",
    ".venv",
    ".venv-oldest",
    ".cache",
    ".pytest_cache",
    ".hypothesis",
    ".ruff_cache",
    ".ansible",
    "output",
}
SUFFIXES = {".py", ".md", ".yml", ".yaml", ".j2", ".cfg", ".toml", ".txt", ".rst"}
THIS = pathlib.Path(__file__).resolve()


def _files():
    for top, dirs, names in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = pathlib.Path(top) / name
            if path.resolve() != THIS and (path.suffix in SUFFIXES or name == "Makefile"):
                yield path.relative_to(REPO), path


@pytest.mark.parametrize(("needle", "target"), [("DESIGN.md", "DESIGN.md"), ("LICENSES/", "LICENSES")])
def test_no_reference_to_a_missing_file(needle, target):
    if (REPO / target).exists():
        pytest.skip(f"{target} exists")
    found = [
        f"{rel}:{number}"
        for rel, path in _files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if needle in line
    ]
    assert not found, f"references to {needle}, which the repository does not have: {found}"


def test_galaxy_metadata_has_no_placeholder_links():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    for key in ("repository", "documentation", "homepage", "issues"):
        assert "example.invalid" not in str(galaxy.get(key) or ""), key
