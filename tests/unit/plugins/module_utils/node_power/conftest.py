"""Fixtures for the node power tests: fake sysfs trees with the kernel model on top."""

from __future__ import annotations

import hashlib
import pathlib
import sys

import pytest
from poweraware_testing import load_module, tree_digest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[5]
HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


fake_sysfs = load_module("poweraware_lab_fake_sysfs", REPO_ROOT / "lab" / "fake_sysfs.py")
fake_kernel = load_module("poweraware_lab_fake_kernel", REPO_ROOT / "lab" / "fake_kernel.py")


class Node:
    """A fake machine: sysfs tree, kernel model, state file path."""

    def __init__(self, base: pathlib.Path, scenario: str, clamp=True, **shape):
        self.sys = fake_sysfs.build_tree(base / "sys", scenario, **shape)
        self.kernel = fake_kernel.FakeKernel(self.sys, clamp=clamp)
        self.state_file = base / "var" / "lib" / "poweraware" / "cpu_power_state.json"
        self.base = base

    def digest(self):
        """The whole sysfs tree plus the state file (content, or its absence)."""
        state = self.state_file.read_text() if self.state_file.exists() else "<no state file>"
        return tree_digest(self.sys) + ":" + hashlib.sha256(state.encode()).hexdigest()

    def read(self, rel):
        return (self.sys / rel).read_text().strip()

    def policy(self, name, attr):
        return self.read(f"devices/system/cpu/cpufreq/{name}/{attr}")


@pytest.fixture
def make_node(tmp_path):
    counter = {"n": 0}

    def factory(scenario, clamp=True, **shape):
        counter["n"] += 1
        return Node(tmp_path / f"node{counter['n']}", scenario, clamp=clamp, **shape)

    return factory
