"""Integration-test fixtures: one local Kubernetes lab for the whole session (docs/lab.md)."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from lab import testing  # noqa: E402 - needs the repository root on sys.path
from lab.testing import LabHandle  # noqa: E402


@pytest.fixture(scope="session")
def lab() -> LabHandle:
    """The local lab (lab.testing.session): started once, or a running healthy one reused; the last
    test session to finish stops a lab that test sessions started."""
    try:
        with testing.session() as handle:
            yield handle
    except testing.LabUnavailable as exc:
        pytest.fail(f"the lab did not start: {exc}", pytrace=False)


# Modules that run right after the fresh-lab tests, in this order: BMRA's coexistence needs a
# cluster without the collection's objects; then the site converge, and the modules that check
# their components on it (before other modules change the cluster under it).
EARLY_MODULES = ("test_bmra_coexistence", "test_site", "test_cluster_stack", "test_telemetry_roles")
# Modules that run after every other lab test but the teardown: they leave the cluster in a state
# the others do not expect (the stack pulled from the site mirror, then uninstalled), which saves
# converging it back.
LATE_MODULES = ("test_air_gapped", "test_uninstall")


def _module_name(item) -> str:
    """The test module's own name (``test_site``), as EARLY_MODULES lists it."""
    return item.module.__name__.rsplit(".", 1)[-1] if item.module else ""


def pytest_collection_modifyitems(items):
    # Tests that need the lab as `make lab` starts it run first; tests that take it down run last.
    def module_rank(item):
        name = _module_name(item)
        if name in LATE_MODULES:
            return len(EARLY_MODULES) + 1 + LATE_MODULES.index(name)
        return EARLY_MODULES.index(name) if name in EARLY_MODULES else len(EARLY_MODULES)

    items.sort(
        key=lambda item: (
            item.get_closest_marker("lab_teardown") is not None,
            item.get_closest_marker("fresh_lab") is None,
            module_rank(item),
        )
    )


def release_standalone_tests() -> None:
    """Let scripts/integration.py start the standalone group: the CPU-bound start of the lab group
    (the fresh dry run, the site converge) is over. Nothing when pytest runs on its own."""
    path = os.environ.get("POWERAWARE_STANDALONE_RELEASE")
    if path:
        pathlib.Path(path).touch()


def pytest_runtest_setup(item):
    # A test after the early modules (the site converge did not run, -k): nothing CPU-bound is left.
    if item.get_closest_marker("fresh_lab") is None and _module_name(item) not in EARLY_MODULES:
        release_standalone_tests()


@pytest.fixture(scope="session")
def fresh(lab) -> dict:
    """The lab as nothing of the collection touched it: every node's files and writable sysfs, every
    API object (cluster_snapshot.py) and kube-scheduler's manifest. Taken by the first test that asks,
    the fresh dry run or the site converge, which both ask before they run anything; the uninstall
    (test_uninstall.py) is compared with it."""
    from cluster_snapshot import api_objects, node_files

    return {"files": node_files(lab), "objects": api_objects(lab), "manifest": lab.scheduler_manifest.read_bytes()}


@pytest.fixture(scope="session")
def site(lab, fresh, tmp_path_factory):
    """site.yml converged, re-run and checked once per session (site_run.py): test_site.py checks the
    runs, test_cluster_stack.py and test_telemetry_roles.py their components on the same converge."""
    from site_run import converge_site

    try:
        return converge_site(lab, tmp_path_factory)
    finally:
        release_standalone_tests()


@pytest.fixture(scope="session")
def api(lab):
    """Typed Kubernetes API clients for the lab (LabHandle.apis)."""
    return lab.apis()
