"""The module end to end on a node tree in tmp_path: check mode, diff, backups, idempotence, absent, refusals."""

from __future__ import annotations

import io
import json
import os
import pathlib
import stat
import sys
from contextlib import redirect_stdout

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files import files
from ansible_collections.poweraware.k8s.plugins.modules import kube_scheduler_extender
from poweraware_testing import as_target_process

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import GOLDEN, TAS_EXTENDER  # noqa: E402

MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG = "/etc/kubernetes/scheduler-extender.yaml"
BACKUPS = "/var/lib/poweraware/backups/kube-scheduler"


def run(args: dict, check=False, diff=False) -> dict:
    full = dict(args)
    full["_ansible_check_mode"] = check
    full["_ansible_diff"] = diff
    out = io.StringIO()
    with as_target_process(), patch_module_args(full), redirect_stdout(out), pytest.raises(SystemExit):
        kube_scheduler_extender.main()
    return json.loads(out.getvalue())


def snapshot(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def args(root, **kw):
    base = {"root": str(root), "extenders": [TAS_EXTENDER]}
    base.update(kw)
    return base


def test_check_mode_writes_nothing_and_predicts_change(node):
    before = snapshot(node)
    result = run(args(node), check=True, diff=True)
    assert result["changed"] and result["manifest_changed"] and result["config_changed"]
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert result["backup_manifest"] is None
    assert snapshot(node) == before
    assert not (node / BACKUPS.lstrip("/")).exists()
    headers = [d["after_header"] for d in result["diff"]]
    assert headers == [MANIFEST, CONFIG]
    flag = "- --config=/etc/kubernetes/scheduler-extender.yaml\n"
    assert flag in result["diff"][0]["after"] and flag not in result["diff"][0]["before"]
    assert result["diff"][1]["before"] == "" and "kind: KubeSchedulerConfiguration" in result["diff"][1]["after"]


def test_present_then_idempotent_then_absent(node):
    original = (node / MANIFEST.lstrip("/")).read_bytes()
    first = run(args(node))
    assert first["changed"] and first["config_created"] and not first["config_existed"]
    manifest = node / MANIFEST.lstrip("/")
    config = node / CONFIG.lstrip("/")
    assert "--config=/etc/kubernetes/scheduler-extender.yaml" in manifest.read_text()
    assert yaml.safe_load(config.read_text())["extenders"][0]["urlPrefix"] == TAS_EXTENDER["url_prefix"]
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600  # the manifest keeps its mode
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    backup = node / first["backup_manifest"].lstrip("/")
    assert backup.read_bytes() == original and stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert not backup.is_relative_to(manifest.parent)
    assert not [p for p in manifest.parent.iterdir() if p.name != "kube-scheduler.yaml"], "temp files left behind"

    second = run(args(node), diff=True)
    assert not second["changed"] and second["diff"] == [] and second["backup_manifest"] is None

    gone = run({"root": str(node), "state": "absent"})
    assert gone["changed"] and gone["config_created"]
    assert manifest.read_bytes() == original
    assert not config.exists()
    again = run({"root": str(node), "state": "absent"})
    assert not again["changed"]


def test_backup_retention(node):
    for weight in range(1, 5):
        ext = dict(TAS_EXTENDER, weight=weight)
        run(args(node, extenders=[ext], backup_keep=2))
    backups = sorted(p.name for p in (node / BACKUPS.lstrip("/")).iterdir())
    assert len([b for b in backups if b.startswith("scheduler-extender.yaml.")]) == 2
    assert len([b for b in backups if b.startswith("kube-scheduler.yaml.")]) == 1  # manifest changed once only


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"backup_dir": "/etc/kubernetes/manifests/backup"}, "backup_dir .* static pod directory"),
        ({"backup_dir": "/etc/kubernetes/manifests"}, "backup_dir .* static pod directory"),
        ({"config_path": "/etc/kubernetes/manifests/sched.yaml"}, "inside the static pod directory"),
        ({"kubernetes_version": "1.17"}, r"Kubernetes 1\.17 is not supported"),
        ({"kubernetes_version": "banana"}, "cannot read a Kubernetes version"),
        ({"legacy_policy": True}, "removed the scheduler Policy API"),
        ({"extenders": [dict(TAS_EXTENDER, weight=0)]}, "weight must be a positive integer"),
        (
            {
                "extenders": [
                    dict(
                        TAS_EXTENDER, tls={"cert_file": "/nope/c.crt", "key_file": "/nope/c.key", "ca_file": "/nope/ca"}
                    )
                ]
            },
            "does not exist",
        ),
        ({"backup_keep": 0}, "backup_keep must be at least 1"),
        # types and allowed keys belong to the argument spec (AnsibleModule's own messages)
        ({"extenders": [dict(TAS_EXTENDER, colour="red")]}, r"Unsupported parameters .*extenders\.colour\."),
        ({"extenders": [dict(TAS_EXTENDER, tls={"bogus": 1})]}, r"Unsupported parameters .*extenders\.tls\.bogus\."),
        (
            {"extenders": [dict(TAS_EXTENDER, managed_resources=[{"name": "telemetry/scheduling", "extra": 1}])]},
            r"Unsupported parameters .*extenders\.managed_resources\.extra\.",
        ),
        ({"extenders": [dict(TAS_EXTENDER, weight="heavy")]}, r"argument 'weight' .*unable to convert to int"),
        ({"extenders": []}, "extenders must be a non-empty list"),
    ],
)
def test_refusals_change_nothing(node, extra, message):
    before = snapshot(node)
    result = run(args(node, **extra))
    assert result["failed"]
    assert pytest.importorskip("re").search(message, result["msg"]), result["msg"]
    assert snapshot(node) == before


def test_unparsable_manifest_refused(node):
    (node / MANIFEST.lstrip("/")).write_text("kind: Pod\nspec: [\n")
    before = snapshot(node)
    result = run(args(node))
    assert result["failed"] and "not valid YAML" in result["msg"]
    assert snapshot(node) == before


def test_missing_manifest(node):
    (node / MANIFEST.lstrip("/")).unlink()
    result = run(args(node))
    assert result["failed"] and "not found" in result["msg"]


def test_digest_only_image_needs_version(node):
    manifest = node / MANIFEST.lstrip("/")
    manifest.write_text((GOLDEN / "other/digest-only-1.31.yaml").read_text())
    result = run(args(node))
    assert result["failed"] and "set kubernetes_version" in result["msg"]
    result = run(args(node, kubernetes_version="v1.31.4"))
    assert result["changed"] and result["kubernetes_version"] == "1.31.4"


def test_merge_into_user_config_and_restore_bytes(node):
    manifest = node / MANIFEST.lstrip("/")
    manifest.write_text((GOLDEN / "merge/kubeadm-config-1.29.yaml").read_text())
    user = node / "etc/kubernetes/scheduler-config.yaml"
    original = (GOLDEN / "merge/scheduler-config-v1.yaml").read_text()
    user.write_text(original)
    result = run(args(node))
    assert result["changed"] and not result["config_created"] and result["config_existed"]
    assert result["config_path"] == "/etc/kubernetes/scheduler-config.yaml"
    assert user.read_text().startswith(original)  # appended, comments kept
    assert result["backup_config"]
    gone = run({"root": str(node), "state": "absent"})
    assert gone["changed"]
    assert user.read_text() == original


def test_legacy_policy_on_1_21(node):
    manifest = node / MANIFEST.lstrip("/")
    manifest.write_text((GOLDEN / "input/kubeadm-1.21.yaml").read_text())
    result = run(args(node, legacy_policy=True))
    assert result["api_version"] == "v1" and result["mode"] == "policy"
    policy = json.loads((node / "etc/kubernetes/scheduler-extender-policy.json").read_text())
    assert policy["kind"] == "Policy" and policy["extenders"][0]["httpTimeout"] == 5_000_000_000


def test_kubernetes_1_18_through_the_policy_file(node):
    """The TAS power demo's release: the Policy file without asking, and absent puts all back."""
    manifest = node / MANIFEST.lstrip("/")
    original = (GOLDEN / "input/kubeadm-1.18.yaml").read_bytes()
    manifest.write_bytes(original)
    result = run(args(node))
    assert result["changed"] and result["api_version"] == "v1" and result["mode"] == "policy"
    assert "--policy-config-file=/etc/kubernetes/scheduler-extender-policy.json" in manifest.read_text()
    policy = json.loads((node / "etc/kubernetes/scheduler-extender-policy.json").read_text())
    assert policy["kind"] == "Policy" and policy["extenders"][0]["enableHttps"] is True
    assert not (node / CONFIG.lstrip("/")).exists()
    assert not run(args(node))["changed"]
    assert run({"root": str(node), "state": "absent"})["changed"]
    assert manifest.read_bytes() == original
    assert not (node / "etc/kubernetes/scheduler-extender-policy.json").exists()


def test_temp_file_never_visible_to_kubelet(node, monkeypatch):
    """The temporary file in the static pod directory is a dot file (kubelet skips those)."""
    seen = []
    real = files.tempfile.mkstemp

    def spy(*a, **kw):
        fd, path = real(*a, **kw)
        seen.append(os.path.basename(path))
        return fd, path

    monkeypatch.setattr(files.tempfile, "mkstemp", spy)
    run(args(node))
    assert seen and all(name.startswith(".") for name in seen)


def test_strings_from_extra_vars_behave_like_yaml_values(node):
    """-e values arrive as strings; the argument spec converts them as YAML would."""
    ext = dict(TAS_EXTENDER, weight="3", ignorable="yes", node_cache_capable="false")
    ext["managed_resources"] = [{"name": "telemetry/scheduling", "ignored_by_scheduler": "true"}]
    result = run(args(node, extenders=[ext], backup_keep="2", legacy_policy="no"))
    assert result["changed"], result.get("msg")
    (entry,) = yaml.safe_load((node / CONFIG.lstrip("/")).read_text())["extenders"]
    assert entry["weight"] == 3 and entry["ignorable"] is True and "nodeCacheCapable" not in entry
    assert entry["managedResources"] == [{"name": "telemetry/scheduling", "ignoredByScheduler": True}]


def test_annotation_is_the_string_the_manifest_carries(node):
    result = run(args(node))
    manifest = yaml.safe_load((node / MANIFEST.lstrip("/")).read_text())
    assert result["annotation"] == manifest["metadata"]["annotations"]["poweraware.k8s/scheduler-extender"]
    assert json.loads(result["annotation"]) == result["record"]
    assert run(args(node))["annotation"] == result["annotation"]
    assert run({"root": str(node), "state": "absent"})["annotation"] == ""
