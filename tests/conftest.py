"""Test-suite wide set-up: import path for the collection and the shared data sets."""

import os
import pathlib
import sys

import pytest
from hypothesis import settings

# No per-example deadline: it is a timing assertion, and the unit tiers run beside the lab tests at
# the lowest CPU priority (make test), where one example of a property test took 274 ms against
# hypothesis' default 200 ms. Slowness is measured in benchmarks, not failed in tests.
settings.register_profile("poweraware", deadline=None)
settings.load_profile("poweraware")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS_DIR = REPO_ROOT / ".cache" / "collections"

# `make collection` links the repository at .cache/collections/ansible_collections/poweraware/k8s,
# so tests import plugins by their real names: ansible_collections.poweraware.k8s.plugins....
if str(COLLECTIONS_DIR) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS_DIR))
# Shared test helpers (poweraware_testing.py) live beside this file.
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
# The lab package (``import lab``) from the repository root, also where pytest runs from elsewhere
# (mutmut runs the suite from its staging directory, .cache/mutation/mutants).
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))


def shared_data_dir() -> pathlib.Path:
    """The shared data sets (SPECpower, Alibaba trace); never copied into the project."""
    return pathlib.Path(os.environ.get("SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    path = shared_data_dir()
    if not path.is_dir():
        message = f"shared data not found at {path} (set SHARED_DATA to the folder with specpower/ and the traces)"
        if os.environ.get("CI", "").lower() == "true":
            # In CI a missing data set is a broken checkout, not a reason to pass with fewer tests.
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path
