"""make unit-oldest runs the test modules that reach ansible-core (tests/conftest.py, reaches_ansible):
the second tier differs from the first only in ansible-core and the ansible bundle's collections."""

from __future__ import annotations

import pathlib
import sys
import types

import pytest
from poweraware_testing import load_module

# tests/conftest.py by its path: a bare "conftest" import is whichever directory's conftest came last
suite = load_module("poweraware_tests_conftest", pathlib.Path(__file__).resolve().parents[2] / "conftest.py")


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A factory of modules as the import system holds them: named, in sys.modules, from a file."""

    def make(name, path=None, source="", **names):
        module = types.ModuleType(name)
        module.__file__ = str(path or tmp_path / f"{name}.py")
        pathlib.Path(module.__file__).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(module.__file__).write_text(source)
        vars(module).update(names)
        monkeypatch.setitem(sys.modules, name, module)
        return module

    return make


@pytest.fixture
def reaches(tmp_path):
    """reaches_ansible with tmp_path/tests as the test helpers' folder."""
    return lambda module: suite.reaches_ansible(module, tmp_path / "tests")


def test_a_module_that_imports_ansible_core_or_a_bundled_collection_is_kept(modules, reaches, tmp_path):
    import ansible.errors

    assert reaches(modules("test_a", tmp_path / "tests" / "test_a.py", errors=ansible.errors))

    def from_kubernetes_core():
        pass

    from_kubernetes_core.__module__ = "ansible_collections.kubernetes.core.plugins.action.k8s"
    assert reaches(modules("test_b", tmp_path / "tests" / "test_b.py", action=from_kubernetes_core))


def test_one_that_reaches_ansible_through_our_plugins_or_a_test_helper_is_kept(modules, reaches, tmp_path):
    from ansible.errors import AnsibleFilterError

    filter_module = modules("ansible_collections.poweraware.k8s.plugins.filter.f", error=AnsibleFilterError)

    def a_filter():
        pass

    a_filter.__module__ = filter_module.__name__
    assert reaches(modules("test_c", tmp_path / "tests" / "test_c.py", a_filter=a_filter))
    helper = modules("helper_d", tmp_path / "tests" / "helper_d.py", source="run('ansible-playbook', 'site.yml')")
    assert reaches(modules("test_d", tmp_path / "tests" / "test_d.py", helper=helper))
    runs_a_module = "load_module('m', REPO / 'plugins/modules/cpu_power_profile.py')"
    assert reaches(modules("test_e", tmp_path / "tests" / "test_e.py", source=runs_a_module))


def test_pure_code_third_party_packages_and_our_own_namespace_are_left_out(modules, reaches, tmp_path):
    import yaml

    pure = modules(
        "ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist", json=__import__("json")
    )

    def parse():
        pass

    parse.__module__ = pure.__name__
    # a third-party package is not followed (its own imports are its business), nor a file outside tests/
    # that names ansible-playbook
    outside = modules("lab_runner", tmp_path / "lab" / "runner.py", source="subprocess.run(['ansible-playbook'])")
    test = modules("test_f", tmp_path / "tests" / "test_f.py", parse=parse, yaml=yaml, runner=outside)
    assert not reaches(test)
    # a name that only starts like ansible's is not ansible's
    assert not suite.ANSIBLE_CODE.match("ansible_collections.poweraware.k8s.plugins.module_utils.quantity")
    assert not suite.ANSIBLE_CODE.match("ansiblelike")


def test_a_cycle_of_our_modules_ends(modules, reaches, tmp_path):
    first = modules("ansible_collections.poweraware.k8s.plugins.module_utils.a")
    second = modules("ansible_collections.poweraware.k8s.plugins.module_utils.b", first=first)
    first.second = second
    assert not reaches(first)
