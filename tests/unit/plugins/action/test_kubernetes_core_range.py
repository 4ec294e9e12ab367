# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""galaxy.yml's kubernetes.core range is the one the unit tiers test.

The actions run kubernetes.core's modules and the dry run reads their answers, so the range is
bounded by what is tested: from the kubernetes.core that requirements-oldest.txt's `ansible` bundles
(`make unit-oldest` runs these tests in .venv-oldest) to below the major after the one
requirements.txt's `ansible` bundles (`make unit`, .venv). Each tier checks its own end against the
kubernetes.core it has installed, and that this kubernetes.core is inside the range, with
ansible-galaxy's own reading of the range.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re

import pytest
import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

ROOT = pathlib.Path(__file__).resolve().parents[4]


def _range() -> str:
    return yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"]["kubernetes.core"]


def _bounds(spec: str) -> tuple[str, str]:
    match = re.fullmatch(r">=(\d+\.\d+\.\d+),<(\d+)\.0\.0", spec)
    assert match, f"galaxy.yml kubernetes.core {spec!r}: expected '>=X.Y.Z,<N.0.0' (tested lower end, next major)"
    return match.group(1), match.group(2)


def _pin(name: str) -> str:
    match = re.search(r"^ansible==(\S+)", (ROOT / name).read_text(), re.MULTILINE)
    assert match, f"{name} pins no ansible release"
    return match.group(1)


def _bundled() -> tuple[str, str]:
    """The installed `ansible` release and the kubernetes.core it bundles (beside ansible-core)."""
    ansible = importlib.metadata.distribution("ansible")
    manifest = pathlib.Path(ansible.locate_file("ansible_collections/kubernetes/core/MANIFEST.json"))
    return ansible.version, json.loads(manifest.read_text())["collection_info"]["version"]


def test_the_installed_kubernetes_core_is_inside_galaxys_range():
    ansible, core = _bundled()
    assert meets_requirements(core, _range()), (
        f"kubernetes.core {core} (from ansible {ansible}) is outside galaxy.yml's range {_range()!r}: "
        "move the range with the pins in requirements.txt / requirements-oldest.txt"
    )


def test_the_range_ends_where_the_pinned_ansible_releases_are():
    ansible, core = _bundled()
    lower, next_major = _bounds(_range())
    if ansible == _pin("requirements-oldest.txt"):
        assert lower == core, (
            f"galaxy.yml's kubernetes.core range starts at {lower}, but the oldest tested ansible ({ansible}, "
            f"requirements-oldest.txt) bundles {core}: make the lower bound >={core}"
        )
    elif ansible == _pin("requirements.txt"):
        major = int(core.split(".")[0])
        assert int(next_major) == major + 1, (
            f"galaxy.yml's kubernetes.core range ends below {next_major}.0.0, but the newest tested ansible "
            f"({ansible}, requirements.txt) bundles {core}: make the upper bound <{major + 1}.0.0"
        )
    else:
        pytest.skip(f"ansible {ansible} is neither requirements.txt's nor requirements-oldest.txt's pin")
    assert meets_requirements(lower, _range()) and not meets_requirements(f"{next_major}.0.0", _range())
