"""Two kube_scheduler_extender runs at once on one control-plane node (AWX and a person, two plays):
40 trials of two registrations started together in forked processes, at staggered offsets, on the
kubeadm manifest and on a user's own --config (BMRA's TAS registration beside ours). After each
trial nothing is lost: both runs succeeded and exactly one changed something (the other planned on
the first one's files: the module holds the static pod directory's lock from plan to write), the
manifest loads one configuration once, the user's extender and ours are each there once, one backup
holds each original, and state=absent gives the original bytes back."""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import yaml
from poweraware_testing import race

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import GOLDEN, TAS_EXTENDER  # noqa: E402
from test_kube_scheduler_extender_module import BACKUPS, MANIFEST, args, run  # noqa: E402

TRIALS = 40
USER_CONFIG = "/etc/kubernetes/scheduler-config.yaml"
# a user's configuration with an extender of their own (not a managed resource of ours)
USER_TEXT = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
# the user's comment stays where it is
extenders:
- urlPrefix: http://127.0.0.1:8888
  filterVerb: filter
  weight: 1
"""


def _registrations(node: pathlib.Path, results: pathlib.Path):
    """The two sides: each run writes its result where the check reads it."""

    def side(index):
        def runs():
            def one():
                (results / f"{index}.json").write_text(json.dumps(run(args(node))))

            return lambda: one

        return runs

    return side(0), side(1)


def _check(node: pathlib.Path, results: pathlib.Path, originals: dict[str, bytes], config_path: str):
    def check():
        problems = []
        outcome = [json.loads((results / f"{i}.json").read_text()) for i in (0, 1)]
        failed = [r.get("msg") for r in outcome if r.get("failed")]
        if failed:
            problems.append(f"a run failed: {failed}")
        if [bool(r.get("changed")) for r in outcome].count(True) != 1:
            problems.append(f"changed by both or neither: {[r.get('changed') for r in outcome]}")
        command = yaml.safe_load((node / MANIFEST.lstrip("/")).read_text())["spec"]["containers"][0]["command"]
        if [word for word in command if word.startswith("--config")] != [f"--config={config_path}"]:
            problems.append(f"the manifest does not load {config_path} once: {command}")
        urls = [e["urlPrefix"] for e in yaml.safe_load((node / config_path.lstrip("/")).read_text())["extenders"]]
        wanted = [TAS_EXTENDER["url_prefix"]] + (["http://127.0.0.1:8888"] if config_path == USER_CONFIG else [])
        if sorted(urls) != sorted(wanted):
            problems.append(f"extenders {urls}, not {wanted}")
        backups = sorted(p.name for p in (node / BACKUPS.lstrip("/")).iterdir())
        originals_backed_up = {name.split(".yaml.")[0] + ".yaml" for name in backups}
        if len(backups) != len(originals_backed_up):
            problems.append(f"an original backed up twice: {backups}")
        gone = run({"root": str(node), "state": "absent"})
        if gone.get("failed"):
            problems.append(f"absent failed: {gone.get('msg')}")
        for path, original in originals.items():
            if (node / path.lstrip("/")).read_bytes() != original:
                problems.append(f"absent did not give {path} back as it was")
        shutil.rmtree(node / BACKUPS.lstrip("/"))
        for path in results.iterdir():
            path.unlink()
        return problems

    return check


def test_two_registrations_at_once_on_kubeadms_manifest_lose_nothing(node, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    originals = {MANIFEST: (node / MANIFEST.lstrip("/")).read_bytes()}
    first, second = _registrations(node, results)
    problems = race(
        TRIALS,
        _check(node, results, originals, "/etc/kubernetes/scheduler-extender.yaml"),
        (first, 0.002),
        (second, 0),
    )
    assert problems == []


def test_two_registrations_at_once_in_a_users_config_lose_nothing(node, tmp_path):
    (node / MANIFEST.lstrip("/")).write_text((GOLDEN / "merge/kubeadm-config-1.29.yaml").read_text())
    (node / USER_CONFIG.lstrip("/")).write_text(USER_TEXT)
    results = tmp_path / "results"
    results.mkdir()
    originals = {path: (node / path.lstrip("/")).read_bytes() for path in (MANIFEST, USER_CONFIG)}
    first, second = _registrations(node, results)
    problems = race(TRIALS, _check(node, results, originals, USER_CONFIG), (first, 0.002), (second, 0))
    assert problems == []
