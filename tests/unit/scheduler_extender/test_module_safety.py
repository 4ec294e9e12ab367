"""Issue 11, items 7, 8 and 10-12 through the module: nothing written on refusal, rollback when the
manifest cannot be replaced, leftovers found by absent, symlinks, unreadable files, `changed`."""

from __future__ import annotations

import os
import pathlib
import sys

import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils import _node_files
from ansible_collections.poweraware.k8s.plugins.modules import kube_scheduler_extender

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import GOLDEN, TAS_EXTENDER  # noqa: E402
from test_module import BACKUPS, CONFIG, MANIFEST, args, run, snapshot  # noqa: E402

USER_CONFIG = "etc/kubernetes/scheduler-config.yaml"
BMRA_TAS = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: https://tas-service.telemetry-aware-scheduling.svc:9001
  filterVerb: scheduler/filter
  prioritizeVerb: scheduler/prioritize
  weight: 1
  enableHTTPS: true
  managedResources:
  - name: telemetry/scheduling
    ignoredByScheduler: true
"""


def warnings(result: dict) -> list[str]:
    """Warning texts (ansible-core 2.19 wraps each in a summary object)."""
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]


def with_user_config(root: pathlib.Path, text: str, manifest: str = "merge/kubeadm-config-1.29.yaml") -> None:
    (root / MANIFEST.lstrip("/")).write_text((GOLDEN / manifest).read_text())
    (root / USER_CONFIG).write_text(text)


# --- item 7 -----------------------------------------------------------------------------------------


def test_duplicate_managed_resource_refused_nothing_written(node):
    with_user_config(node, BMRA_TAS)
    before = snapshot(node)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("nothing was changed: kube-scheduler would refuse /etc/kubernetes/scheduler-config")
    assert "duplicate extender managed resource name" in result["msg"]
    assert len(result["errors"]) == 1 and "already in /etc/kubernetes/scheduler-config.yaml" in result["errors"][0]
    assert snapshot(node) == before  # no backup either


# --- item 8 -----------------------------------------------------------------------------------------


def test_v1beta3_on_1_27_converted_with_warning_and_backup(node):
    original = BMRA_TAS.replace("/v1\n", "/v1beta3\n").replace("telemetry/scheduling", "example.com/gpu")
    with_user_config(node, original)
    manifest = node / MANIFEST.lstrip("/")
    manifest.write_text(manifest.read_text().replace("v1.29.0", "v1.27.3"))
    result = run(args(node))
    assert result["changed"] and result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert any("converted from kubescheduler.config.k8s.io/v1beta3" in w for w in warnings(result)), result.get(
        "warnings"
    )
    text = (node / USER_CONFIG).read_text()
    assert text.startswith(original.replace("/v1beta3\n", "/v1\n"))
    assert (node / result["backup_config"].lstrip("/")).read_text() == original
    assert not run(args(node))["changed"]


# --- item 10: the new config must not outlive a manifest that could not be replaced -------------------


def fail_on(monkeypatch, node_path: str):
    real = _node_files.NodeFiles.write

    def write(self, path, text, mode=0o600):
        if path == node_path:
            raise PermissionError(13, "Permission denied", path)
        return real(self, path, text, mode)

    monkeypatch.setattr(_node_files.NodeFiles, "write", write)


def test_manifest_write_failure_rolls_back_new_config(node, monkeypatch):
    before = snapshot(node)
    fail_on(monkeypatch, MANIFEST)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert result["msg"] == (
        "writing /etc/kubernetes/manifests/kube-scheduler.yaml failed: Permission denied; nothing was changed and "
        "everything this run had written was put back"
    )
    assert result["backup_manifest"] is None and result["config_changed"] is False
    assert not (node / CONFIG.lstrip("/")).exists()
    assert {k: v for k, v in snapshot(node).items() if not k.startswith(BACKUPS.lstrip("/"))} == before
    assert not list((node / BACKUPS.lstrip("/")).iterdir())  # this run's backups are gone too
    # and the next run creates (and owns) the file as if nothing had happened
    monkeypatch.undo()
    again = run(args(node))
    assert again["changed"] and again["config_created"]


def test_manifest_write_failure_restores_merged_user_config(node, monkeypatch):
    original = (GOLDEN / "merge/scheduler-config-v1.yaml").read_text()
    with_user_config(node, original)
    fail_on(monkeypatch, MANIFEST)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert (node / USER_CONFIG).read_text() == original


def test_rollback_failure_reports_changed(node, monkeypatch):
    fail_on(monkeypatch, MANIFEST)
    real_unlink = os.unlink

    def unlink(path, *a, **kw):
        if str(path).endswith("scheduler-extender.yaml"):
            raise PermissionError(13, "Permission denied", path)
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(_node_files.os, "unlink", unlink)
    result = run(args(node))
    assert result["failed"] and result["changed"] is True
    assert "putting back /etc/kubernetes/scheduler-extender.yaml failed too" in result["msg"]


def test_absent_removes_a_leftover_config_of_an_interrupted_run(node):
    """A run killed between the two writes (or an older version of the module) left our file."""
    result = run(args(node), check=True, diff=True)
    leftover = node / CONFIG.lstrip("/")
    leftover.write_text(result["diff"][1]["after"])
    original_manifest = (node / MANIFEST.lstrip("/")).read_bytes()
    gone = run({"root": str(node), "state": "absent"})
    assert gone["changed"] and gone["config_changed"] and not leftover.exists()
    assert (node / MANIFEST.lstrip("/")).read_bytes() == original_manifest
    # and present takes it over as its own (absent would then delete it), not as the user's file
    leftover.write_text(result["diff"][1]["after"])
    present = run(args(node))
    assert present["config_created"] and any("taken over" in w for w in warnings(present))


def test_absent_keeps_a_user_file_at_config_path(node):
    user = node / CONFIG.lstrip("/")
    user.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert not run({"root": str(node), "state": "absent"})["changed"]
    assert user.exists()


# --- item 11: symlinked manifests -------------------------------------------------------------------


def test_symlinked_manifest_written_through_and_kept(node):
    manifest = node / MANIFEST.lstrip("/")
    real = node / "srv/k8s/kube-scheduler.yaml"
    real.parent.mkdir(parents=True)
    manifest.rename(real)
    manifest.symlink_to("../../../srv/k8s/kube-scheduler.yaml")
    original = real.read_bytes()
    result = run(args(node))
    assert result["changed"]
    assert manifest.is_symlink() and os.readlink(manifest) == "../../../srv/k8s/kube-scheduler.yaml"
    assert "--config=/etc/kubernetes/scheduler-extender.yaml" in real.read_text()
    assert not [p for p in real.parent.iterdir() if p.name != "kube-scheduler.yaml"], "temporary file left"
    assert not run(args(node))["changed"]
    run({"root": str(node), "state": "absent"})
    assert manifest.is_symlink() and real.read_bytes() == original


def test_symlink_outside_root_refused(node, tmp_path):
    outside = tmp_path / "host-etc/kube-scheduler.yaml"
    outside.parent.mkdir()
    manifest = node / MANIFEST.lstrip("/")
    outside.write_bytes(manifest.read_bytes())
    manifest.unlink()
    manifest.symlink_to(outside)  # absolute: on the real node this would be another file
    before = outside.read_bytes()
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert result["msg"] == (
        f"nothing was changed: /etc/kubernetes/manifests/kube-scheduler.yaml is a symbolic link to {outside}, which "
        f"is outside the node root {node}; the module reads and writes only inside root; fix: point the link at a "
        f"file inside the node's file system (a relative link, or an absolute one under {node})"
    )
    assert outside.read_bytes() == before


# --- item 12: unreadable files, directories, changed ------------------------------------------------


def test_non_utf8_manifest(node):
    manifest = node / MANIFEST.lstrip("/")
    manifest.write_bytes(manifest.read_bytes().replace(b"name: kube-scheduler\n", b"name: kube-scheduler \xe9\n", 1))
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert "/etc/kubernetes/manifests/kube-scheduler.yaml is not UTF-8 text (byte 0xe9 at offset" in result["msg"]
    assert "Traceback" not in result["msg"] and "exception" not in result


def test_non_utf8_user_config(node):
    with_user_config(node, "")
    (node / USER_CONFIG).write_bytes(b"apiVersion: kubescheduler.config.k8s.io/v1\n# caf\xe9\n")
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert "nothing was changed: /etc/kubernetes/scheduler-config.yaml is not UTF-8 text (byte 0xe9" in result["msg"]


def test_manifest_path_is_a_directory(node):
    result = run(args(node, manifest_path="/etc/kubernetes/manifests"))
    assert result["failed"] and result["changed"] is False
    assert result["msg"] == (
        "nothing was changed: /etc/kubernetes/manifests is a directory, but a file is expected there; fix: point "
        "the path at the file, or remove the directory"
    )


def test_config_path_is_a_directory(node):
    (node / CONFIG.lstrip("/")).mkdir()
    before = snapshot(node)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert "/etc/kubernetes/scheduler-extender.yaml is a directory, but a file is expected there" in result["msg"]
    assert snapshot(node) == before


def test_tls_file_is_a_directory_and_backup_dir_is_a_file(node):
    (node / "etc/kubernetes/pki/tas/client.key").unlink()
    (node / "etc/kubernetes/pki/tas/client.key").mkdir()
    backups = node / BACKUPS.lstrip("/")
    backups.parent.mkdir(parents=True)
    backups.write_text("")
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert "TLS file /etc/kubernetes/pki/tas/client.key (key_file of" in result["msg"]
    assert "is a directory, but a PEM file is expected" in result["msg"]
    assert "backup_dir /var/lib/poweraware/backups/kube-scheduler exists and is not a directory" in result["msg"]


def test_two_kube_scheduler_containers(node):
    manifest = node / MANIFEST.lstrip("/")
    doc = yaml.safe_load(manifest.read_text())
    doc["spec"]["containers"].append(dict(doc["spec"]["containers"][0]))
    manifest.write_text(yaml.safe_dump(doc))
    result = run(args(node))
    assert result["failed"] and result["changed"] is False
    assert "has 2 containers named kube-scheduler" in result["msg"]
    assert "none is named" not in result["msg"]


def test_crlf_manifest_keeps_crlf_end_to_end(node):
    manifest = node / MANIFEST.lstrip("/")
    original = manifest.read_bytes().replace(b"\n", b"\r\n")
    manifest.write_bytes(original)
    run(args(node))
    after = manifest.read_bytes()
    assert after.count(b"\n") == after.count(b"\r\n") and b"--config=" in after
    assert not run(args(node))["changed"]
    run({"root": str(node), "state": "absent"})
    assert manifest.read_bytes() == original


def test_docs_example_shows_ca_file_and_no_invalid_links():
    assert "ca_file: /etc/kubernetes/pki/tas/ca.crt" in kube_scheduler_extender.EXAMPLES
    assert "example.invalid" not in kube_scheduler_extender.DOCUMENTATION
    doc = yaml.safe_load(kube_scheduler_extender.DOCUMENTATION)
    assert all(s["link"].startswith("https://kubernetes.io/docs/") for s in doc["seealso"])
    tas = yaml.safe_load(kube_scheduler_extender.EXAMPLES)[0]["poweraware.k8s.kube_scheduler_extender"]
    assert set(tas["extenders"][0]["tls"]) == {"cert_file", "key_file", "ca_file"}
    assert TAS_EXTENDER["url_prefix"] == tas["extenders"][0]["url_prefix"]
