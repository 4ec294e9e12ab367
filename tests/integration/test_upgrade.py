"""Upgrade: the last release's converge, then this checkout's, on one fresh lab (issue 49 item 7).

A site that ran the previous release runs this one with the same inventory and variables, as a user
upgrades: the previous release is built from its tag (``git archive``, ``ansible-galaxy collection
build``) and installed offline into a collections path of its own, its ``poweraware.k8s.site``
converges the fresh lab, then this checkout's ``site.yml`` converges it again. The upgrade must work
whole: no task fails, a second run changes nothing, kube-scheduler calls each extender once (no
duplicate registration), every workload of ours is ready, and the uninstall then gives back the lab
as it was before the previous release touched it (test_uninstall.py's comparison), which leaves
nothing the previous release made and this one no longer knows.

The previous release's pods run for real at its own versions (Prometheus v2.53.2, NFD v0.17.3,
kube-state-metrics v2.13.0, the reloader v0.85.0, barometer's collectd: lab/images.py
PREVIOUS_IMAGES, which ``make lifecycle`` builds first), so the upgrade replaces running components.

Not in ``make test`` (its time: a second whole converge and an uninstall); ``make lifecycle`` runs it
first on a lab of its own, then test_uninstall.py.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

import pytest
import yaml
from ansible_run import REPO_ROOT, run_playbook
from site_run import prepare_site_vars, run_site
from test_site import _changed_tasks
from test_uninstall import uninstall_and_compare

pytestmark = [pytest.mark.lifecycle, pytest.mark.slow]

SCHEDULER_CONFIG = "/etc/kubernetes/scheduler-extender.yaml"  # scheduler_extender_config_path's default
WORKLOAD_NAMESPACES = ("node-feature-discovery", "monitoring", "custom-metrics", "telemetry-aware-scheduling")
# What the previous release's user had where this release asks for a choice: collectd's image was
# the release's default then (this release has none: the user builds the collection's).
PREVIOUS_RELEASE_CHOICES = {"collectd_image": "docker.io/opnfv/barometer-collectd"}
# The previous release issued App QoS certificates by default; this one does not. Its user keeps them
# managed by switching them on, as the changelog's upgrade note says (docs/node-power.md): the
# upgrade's converges and the uninstall run with it, so the uninstall removes what 0.1.0 issued.
UPGRADE_CHOICES = {"poweraware_enable_appqos_certs": True}


def previous_release() -> tuple[str, str]:
    """The newest release that is not this checkout's version: (its name, the git revision its
    tarball is built from). Its tag (``vX.Y.Z``) when the checkout has tags; otherwise the commit that
    released it into changelogs/changelog.yaml (the release step, docs/development.md), which every
    clone has: a clone or fetch that leaves tags out still finds it."""
    current = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())["version"]

    def git(*argv):
        return subprocess.run(["git", *argv], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout

    tags = [t for t in git("tag", "--list", "v[0-9]*", "--sort=-v:refname").split() if t != f"v{current}"]
    if tags:
        return tags[0], tags[0]
    changelog = yaml.safe_load((REPO_ROOT / "changelogs" / "changelog.yaml").read_text())
    released = sorted(
        (v for v in (changelog.get("releases") or {}) if v != current),
        key=lambda v: tuple(int(part) for part in v.split(".")),
    )
    assert released, f"no release other than {current} in changelogs/changelog.yaml and no release tag"
    version = released[-1]
    # the oldest commit whose changelog names the release: the one that released it
    commits = git("log", "--format=%H", "--reverse", "-S", f"  {version}:", "--", "changelogs/changelog.yaml").split()
    assert commits, f"no commit released {version} into changelogs/changelog.yaml"
    return f"v{version}", commits[0]


def install_release(revision: str, where: pathlib.Path) -> pathlib.Path:
    """The release built from its git revision and installed as a user installs the tarball; its
    collections path."""
    src, dist, collections = where / "src", where / "dist", where / "collections"
    for path in (src, dist, collections):
        path.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=REPO_ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    galaxy = str(pathlib.Path(sys.executable).parent / "ansible-galaxy")

    def run(argv):
        done = subprocess.run([galaxy, *argv], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"ansible-galaxy {argv}: {done.stdout}{done.stderr}"

    run(["collection", "build", str(src), "--output-path", str(dist)])
    (tarball,) = dist.glob("*.tar.gz")
    # the tarball alone: its dependencies (kubernetes.core, community.crypto) come with ansible
    run(["collection", "install", "--offline", "--no-deps", "-p", str(collections), str(tarball)])
    return collections


def _extenders(lab) -> list[str]:
    config = yaml.safe_load((lab.node_disk(lab.control_plane_node) / SCHEDULER_CONFIG.lstrip("/")).read_text())
    return [e["urlPrefix"] for e in config.get("extenders") or []]


def _unready(lab) -> list[str]:
    from kubernetes import client

    apps = client.AppsV1Api(lab.api_client())
    unready = []
    for namespace in WORKLOAD_NAMESPACES:
        for item in apps.list_namespaced_deployment(namespace).items:
            if (item.status.ready_replicas or 0) < (item.spec.replicas or 0):
                unready.append(f"Deployment {namespace}/{item.metadata.name}")
        for item in apps.list_namespaced_daemon_set(namespace).items:
            if (item.status.number_ready or 0) < item.status.desired_number_scheduled:
                unready.append(f"DaemonSet {namespace}/{item.metadata.name}")
    return unready


@pytest.mark.fresh_lab
def test_the_previous_release_upgrades_in_place_and_uninstalls_whole(lab, fresh, tmp_path, tmp_path_factory):
    from lab import images

    assert images.previous_available(), "the previous release's images are not built: `python -m lab build --previous`"
    from poweraware_testing import wait_until

    site_vars = dict(prepare_site_vars(lab, tmp_path_factory))
    tag, revision = previous_release()
    collections = install_release(revision, tmp_path / tag)

    started = time.monotonic()
    before = run_playbook(
        "poweraware.k8s.site",
        inventory=lab.inventory / "hosts.yml",
        # the previous release's user ran its default collectd image (barometer's, which the lab runs
        # with the previous release's images); this release's converges name the user's build of the
        # collection's Containerfile, as docs/telemetry.md asks before an upgrade (the lab inventory)
        extra_vars={**site_vars, **PREVIOUS_RELEASE_CHOICES},
        # the previous release only: this checkout's collection is not on the path
        env={"ANSIBLE_COLLECTIONS_PATH": str(collections)},
        timeout=1800,
    )
    previous_s = time.monotonic() - started
    assert before.rc == 0 and before.failed == 0, before.stdout[-6000:]
    assert "poweraware.k8s" in before.stdout

    started = time.monotonic()
    upgrade = run_site(lab, extra_vars=UPGRADE_CHOICES)
    upgrade_s = time.monotonic() - started
    assert upgrade.rc == 0 and upgrade.failed == 0, upgrade.stdout[-6000:]
    again = run_site(lab, extra_vars=UPGRADE_CHOICES)
    assert again.rc == 0 and again.changed == 0, again.stdout[-6000:]

    extenders = _extenders(lab)
    assert len(extenders) == len(set(extenders)) and extenders, extenders  # no duplicate registration
    wait_until(lambda: not _unready(lab), 180, "every workload of ours ready")

    outcome = uninstall_and_compare(lab, fresh, extra_vars=UPGRADE_CHOICES)
    assert outcome["problems"] == {}, (outcome["problems"], outcome["removed"].stdout[-3000:])

    changed = sorted({task for task, _host in _changed_tasks(upgrade.stdout)})
    print(
        f"PROOF upgrade from {tag}: its converge {before.changed} changed in {previous_s:.0f} s; this "
        f"release's converge over it {upgrade.changed} changed in {upgrade_s:.0f} s, its second run "
        f"{again.changed}; kube-scheduler's extenders {extenders}; the uninstall then gave back the lab as "
        f"before {tag} ({len(outcome['files'])} node paths, {len(outcome['objects'])} API objects)"
    )
    print("PROOF upgrade, the tasks that changed:\n  " + "\n  ".join(changed))
