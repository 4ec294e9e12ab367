"""The built collection: only the collection is packed, and it works installed from the tarball.

A Galaxy user gets what ``ansible-galaxy collection build`` packs, so this builds from a copy of
the checkout salted with what a used checkout holds (test caches, the lab, benchmarks, tool
state), checks the members, installs the tarball into a temporary path and, with only that path
as the collections path (kubernetes.core and community.crypto still come from the ``ansible``
package), runs a module, a filter and the syntax check of the collection playbook
``poweraware.k8s.site``. No lab needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent

pytestmark = [pytest.mark.slow, pytest.mark.standalone, pytest.mark.timeout(600)]

# What a used checkout holds and the artifact must not: (path in the checkout, salted file in it).
EXCLUDED = [
    ".pytest_cache",
    ".hypothesis",
    ".ansible",
    ".coverage",
    ".cache",
    ".venv",
    ".venv-oldest",
    ".ruff_cache",
    ".ci",
    "lab",
    "benchmarks",
    "tests",
    "extensions",
    "inventory/lab",
    "mk",
    "scripts",
    "Makefile",
    "ansible.cfg",
    "pyproject.toml",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-oldest.txt",
    "system-packages.txt",
    "site.yml",
]
SALT = [
    ".pytest_cache/v/cache/lastfailed",
    ".hypothesis/examples/0/1",
    ".ansible/tmp/x",
    ".coverage",
    ".cache/collections/x",
    ".venv/bin/python",
    ".venv-oldest/bin/python",
    ".ruff_cache/CACHEDIR.TAG",
    "tests/output/site_timings.json",
    "roles/nfd/__pycache__/x.cpython-312.pyc",
    "plugins/filter/__pycache__/power_model.cpython-312.pyc",
    "poweraware-k8s-0.0.9.tar.gz",
    # what an editor or a developer leaves inside the collection's own directories
    "roles/nfd/tasks/.main.yml.swp",
    "roles/nfd/tasks/main.yml~",
    "docs/.notes.md",
    "plugins/modules/scratch.txt",
    ".ansible-lint-ignore",
    ".envrc",
]
# The collection's own trees and files (galaxy.yml's manifest allow-list): every tracked file in them
# ships, nothing else does.
SHIPPED = (
    "plugins", "roles", "playbooks", "docs", "changelogs", "inventory/sample", "meta",
    "README.md", "LICENSE", "CHANGELOG.rst",
)  # fmt: skip
REQUIRED = [
    "MANIFEST.json",
    "FILES.json",
    "README.md",
    "LICENSE",
    "meta/runtime.yml",
    "playbooks/site.yml",
    "playbooks/node_power.yml",
    "playbooks/cluster_stack.yml",
    "playbooks/scheduler_extender.yml",
    "playbooks/power_models.yml",
    "playbooks/peaks.yml",
    "plugins/modules/cpu_power_info.py",
    "plugins/filter/power_model.py",
    "roles/tas_policy/meta/argument_specs.yml",
    "inventory/sample/hosts.yml",
    "docs/site.md",
]
TINY_INVENTORY = """\
all:
  children:
    k8s_cluster:
      children:
        kube_control_plane:
          hosts:
            cp1: {}
        kube_node:
          hosts:
            worker1: {}
"""


def _fake_sysfs():
    spec = importlib.util.spec_from_file_location("_poweraware_fake_sysfs", REPO / "lab" / "fake_sysfs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(argv, env, cwd):
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{' '.join(map(str, argv))}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build from a salted copy of the checkout, install the tarball; return (tarball, env, work dir)."""
    tmp = tmp_path_factory.mktemp("collection")
    source = tmp / "src"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "__pycache__", "*.pyc", "*.tar.gz", "output"),
    )
    for rel in SALT:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text("salt\n")
    work = tmp / "work"
    work.mkdir()
    (work / "ansible.cfg").write_text("[defaults]\ninterpreter_python = auto_silent\n")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_")) and key not in ("KUBECONFIG",)
    }
    env.update(
        {
            "ANSIBLE_CONFIG": str(work / "ansible.cfg"),
            "ANSIBLE_HOME": str(tmp / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
            "ANSIBLE_COLLECTIONS_PATH": str(tmp / "collections"),
            "ANSIBLE_NOCOLOR": "1",
        }
    )
    dist = tmp / "dist"
    _run([BIN / "ansible-galaxy", "collection", "build", "--output-path", dist, source], env, work)
    (tarball,) = dist.glob("poweraware-k8s-*.tar.gz")
    _run([BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", tmp / "collections", tarball], env, work)
    return tarball, env, work, tmp / "collections" / "ansible_collections" / "poweraware" / "k8s"


def test_artifact_holds_only_the_collection(installed):
    tarball, _env, _work, _path = installed
    with tarfile.open(tarball) as tar:
        members = [m.name.removeprefix("./") for m in tar.getmembers()]
    leaked = sorted(
        m
        for m in members
        if any(m == ex or m.startswith(ex + "/") for ex in EXCLUDED)
        or "__pycache__" in m.split("/")
        or m.endswith((".pyc", ".tar.gz"))
    )
    assert not leaked, f"development files in the artifact: {leaked}"
    missing = [r for r in REQUIRED if r not in members]
    assert not missing, f"missing from the artifact: {missing}"
    # by allow-list: the tracked files of the collection's trees, and nothing else but Galaxy's own
    tracked = subprocess.run(
        ["git", "ls-files", *SHIPPED], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    # dotfiles are tool state (antsibull-changelog's plugin cache, the fragments directory's keeper)
    tracked = [t for t in tracked if not any(part.startswith(".") for part in t.split("/"))]
    files = {m for m in members if not m.endswith("/") and not tar_is_dir(tarball, m)}
    assert files - set(tracked) - {"MANIFEST.json", "FILES.json"} == set(), "files beyond the allow-list"
    assert set(tracked) - files == set(), "collection files left out of the artifact"
    print(f"PROOF artifact: {len(files)} files, version {manifest_version(tarball)}")
    manifest = json.loads(tar_member(tarball, "MANIFEST.json"))
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"]) == ("poweraware", "k8s")
    assert not any("example.invalid" in str(info.get(key) or "") for key in ("repository", "documentation", "issues"))


def tar_is_dir(tarball, name):
    with tarfile.open(tarball) as tar:
        return tar.getmember(name).isdir()


def manifest_version(tarball):
    return json.loads(tar_member(tarball, "MANIFEST.json"))["collection_info"]["version"]


def tar_member(tarball, name):
    with tarfile.open(tarball) as tar:
        return tar.extractfile(name).read().decode()


def test_installed_collection_is_the_one_used(installed):
    _tarball, env, work, path = installed
    result = _run([BIN / "ansible-galaxy", "collection", "list", "--format", "json"], env, work)
    listing = json.loads(result.stdout)
    where = {coll: base for base, colls in listing.items() for coll in colls}
    assert where["poweraware.k8s"] == str(path.parent.parent), where
    # The dependencies come from the ansible package, as on a user's controller with `pip install ansible`.
    assert "kubernetes.core" in where and "community.crypto" in where, where


def test_module_runs_from_the_installed_collection(installed, tmp_path):
    _tarball, env, work, _path = installed
    sysfs = _fake_sysfs().build_tree(tmp_path / "sys", "intel_pstate_active")
    result = _run(
        [
            BIN / "ansible",
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "poweraware.k8s.cpu_power_info",
            "-a",
            f"sysfs_root={sysfs}",
        ],
        {**env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"},
        work,
    )
    host = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not host.get("failed") and host["changed"] is False, host
    assert host["ansible_facts"]["poweraware_cpu_power"] == host["cpu_power"]
    assert "intel_pstate" in json.dumps(host["cpu_power"]), host["cpu_power"]


def test_filter_runs_from_the_installed_collection(installed):
    _tarball, env, work, _path = installed
    samples = [{"util": 0, "watts": 50.0}, {"util": 50, "watts": 100.0}, {"util": 100, "watts": 150.0}]
    expression = f"{json.dumps(samples)} | poweraware.k8s.power_model(kind='linear', node='w1')"
    result = _run(
        [BIN / "ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", "ansible.builtin.debug"]
        + ["-a", f"msg={{{{ {expression} }}}}"],
        {**env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"},
        work,
    )
    model = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert model["kind"] == "linear", model
    assert model["params"]["idle_w"] == pytest.approx(50.0, abs=0.5), model
    assert model["params"]["max_w"] == pytest.approx(150.0, abs=0.5), model


def test_site_playbook_syntax_from_the_installed_collection(installed, tmp_path):
    _tarball, env, work, path = installed
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(TINY_INVENTORY)
    result = _run(
        [BIN / "ansible-playbook", "-i", inventory, "poweraware.k8s.site", "--syntax-check"],
        env,
        work,
    )
    assert f"playbook: {path / 'playbooks' / 'site.yml'}" in result.stdout, result.stdout
    listed = _run([BIN / "ansible-playbook", "-i", inventory, "poweraware.k8s.site", "--list-tasks"], env, work)
    for play in ("node_power", "cluster_stack", "scheduler_extender", "power_models"):
        assert f"TAGS: [{play}]" in listed.stdout, listed.stdout
    assert "poweraware.k8s.tas_policy : Build the TAS policies from their parameters" in listed.stdout
