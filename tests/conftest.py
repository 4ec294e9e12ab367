"""Test-suite wide set-up: import path for the collection and the shared data sets."""

import os
import pathlib
import re
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


# --- make unit-oldest: the tests whose outcome can depend on ansible-core's version ----------------
# The second unit tier (.venv-oldest) differs from the first only in ansible-core and the `ansible`
# bundle (kubernetes.core, community.crypto): the same Python, the same other pins. A test that never
# reaches their code runs the same bytes twice, so `--ansible-core-only` keeps the test modules that
# import them (directly, or through our plugins and test helpers: a filter raises AnsibleFilterError, a
# module runs AnsibleModule), or run ansible's programs or a module file (plugins/modules/...).
# Transitive through our own modules only: the standard library and third-party packages do not import
# ansible-core.
ANSIBLE_CODE = re.compile(r"^(ansible|ansible_collections\.(?!poweraware\.)\w+\.\w+)(\.|$)")
OURS = re.compile(r"^ansible_collections\.poweraware\.")
RUNS_ANSIBLE = re.compile(r"\bansible-(?:playbook|doc|test|galaxy|inventory|lint)\b|plugins/modules\b|\bansible\.cfg\b")


def pytest_addoption(parser):
    parser.addoption(
        "--ansible-core-only",
        action="store_true",
        help="only the test modules that reach ansible-core or the ansible bundle's collections (make unit-oldest)",
    )


def _module_names(module) -> set[str]:
    """The names of the modules ``module``'s globals are or come from."""
    names = set()
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
        if isinstance(name, str):
            names.add(name)
    return names


def _is_test_helper(module, helpers: pathlib.Path) -> bool:
    path = getattr(module, "__file__", None)
    return bool(path) and pathlib.Path(path).resolve().is_relative_to(helpers)


def reaches_ansible(module, helpers: pathlib.Path = REPO_ROOT / "tests", seen=None) -> bool:
    """Whether the test module ``module`` reaches ansible-core's code (see ANSIBLE_CODE, RUNS_ANSIBLE),
    following our collection's modules and the test helpers under ``helpers``."""
    seen = set() if seen is None else seen
    if module is None or module.__name__ in seen:
        return False
    seen.add(module.__name__)
    if _is_test_helper(module, helpers) and RUNS_ANSIBLE.search(pathlib.Path(module.__file__).read_text("utf-8")):
        return True
    for name in _module_names(module):
        if ANSIBLE_CODE.match(name):
            return True
        other = sys.modules.get(name)
        ours = other is not None and (OURS.match(name) or _is_test_helper(other, helpers))
        if ours and reaches_ansible(other, helpers, seen):
            return True
    return False


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--ansible-core-only"):
        return
    verdicts = {}
    kept, dropped = [], []
    for item in items:
        module = item.module
        if module.__name__ not in verdicts:
            verdicts[module.__name__] = reaches_ansible(module)
        (kept if verdicts[module.__name__] else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
