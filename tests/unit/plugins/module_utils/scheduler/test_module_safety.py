"""Issue 11, items 7, 8 and 10-12 through the module: nothing written on refusal, rollback when the
manifest cannot be replaced, leftovers found by absent, symlinks, unreadable files, `changed`."""

from __future__ import annotations

import datetime
import os
import pathlib
import sys
import time

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files import files as _node_files
from ansible_collections.poweraware.k8s.plugins.modules import kube_scheduler_extender

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import GOLDEN, TAS_EXTENDER  # noqa: E402
from test_kube_scheduler_extender_module import BACKUPS, CONFIG, MANIFEST, args, run, snapshot  # noqa: E402

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
    assert present["config_created"] and present["registration_restored"]
    assert any("registered again now" in w for w in warnings(present))


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


# --- _node_files on its own (plugins/module_utils/node_files/files.py) ---------------------------------------
def test_inside_is_lexical_and_stops_at_a_path_component():
    assert _node_files.inside("/a/b", "/a") and _node_files.inside("/a", "/a/") and _node_files.inside("/a/", "/a")
    assert _node_files.inside("/etc/x", "/") and _node_files.inside("a//b/", "a")
    assert not _node_files.inside("/ab", "/a")
    assert not _node_files.inside("/srv/x", "/srvX")
    assert not _node_files.inside("/a/b/../../c", "/a")


def copying_move(calls):
    """A move like Ansible's atomic_move: an existing target keeps its mode (its inode is written)."""

    def move(tmp, path):
        calls.append((tmp, path))
        with open(tmp, "rb") as source, open(path, "wb") as target:
            target.write(source.read())
        os.unlink(tmp)

    return move


@pytest.fixture
def no_umask():
    """Modes as the code gives them (the umask of a real run only takes bits away)."""
    mask = os.umask(0)
    yield
    os.umask(mask)


def test_atomic_write_creates_the_directory_and_a_new_file_with_the_mode(tmp_path, no_umask):
    calls = []
    target = tmp_path / "new" / "dir" / "conf.yaml"
    _node_files.atomic_write(str(target), "é\n", move=copying_move(calls))
    assert target.read_bytes() == "é\n".encode()
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert oct(target.parent.stat().st_mode & 0o777) == oct(0o755)
    ((tmp, path),) = calls
    assert path == str(target)
    assert os.path.dirname(tmp) == str(target.parent)
    assert os.path.basename(tmp).startswith(".conf.yaml.") and tmp.endswith(".tmp")
    assert os.listdir(target.parent) == ["conf.yaml"]


def test_atomic_write_keeps_the_mode_of_an_existing_file_when_the_move_does(tmp_path):
    target = tmp_path / "conf.yaml"
    target.write_text("old")
    target.chmod(0o640)
    _node_files.atomic_write(str(target), b"new", mode=0o600, prefix=".x.", move=copying_move([]))
    assert target.read_bytes() == b"new"
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)


def test_atomic_write_default_move_gives_the_mode_and_a_relative_path_lands_in_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").write_text("old")
    (tmp_path / "plain").chmod(0o600)
    _node_files.atomic_write("plain", "text", mode=0o644)
    assert (tmp_path / "plain").read_text() == "text"
    assert oct((tmp_path / "plain").stat().st_mode & 0o777) == oct(0o644)
    assert os.listdir(tmp_path) == ["plain"]


def test_atomic_write_removes_its_temporary_file_when_the_move_fails(tmp_path):
    def failing_move(tmp, path):
        raise OSError(28, "No space left on device")

    target = tmp_path / "conf.yaml"
    target.write_text("old")
    try:
        _node_files.atomic_write(str(target), "new", move=failing_move)
    except OSError as exc:
        assert exc.strerror == "No space left on device"
    else:
        raise AssertionError("the failed move was not reported")
    assert os.listdir(tmp_path) == ["conf.yaml"] and target.read_text() == "old"


def test_atomic_write_syncs_only_when_asked(tmp_path, monkeypatch):
    synced = []  # the size of the file behind the descriptor synced: the data must be flushed by then
    monkeypatch.setattr(_node_files.os, "fsync", lambda fd: synced.append(os.fstat(fd).st_size))
    _node_files.atomic_write(str(tmp_path / "a"), "x")
    assert synced == []
    _node_files.atomic_write(str(tmp_path / "b"), "xyz", fsync=True)
    assert synced == [3] and (tmp_path / "b").read_text() == "xyz"


def test_node_paths_are_under_the_root():
    assert _node_files.NodeFiles("/", "/b").host("/etc/x") == "/etc/x"
    assert _node_files.NodeFiles("", "/b").host("/etc/x") == "/etc/x"
    assert _node_files.NodeFiles("/srv/node", "/b").host("/etc/x") == "/srv/node/etc/x"
    assert _node_files.NodeFiles("/srv/node", "/b").host("/X11/xorg.conf") == "/srv/node/X11/xorg.conf"


def test_the_backup_stamp_is_the_utc_time_in_microseconds(monkeypatch):
    monkeypatch.setenv("TZ", "JST-9")  # local time 9 hours ahead of UTC (POSIX form: no tzdata needed)
    time.tzset()
    try:
        stamp = _node_files.NodeFiles("/", "/b").stamp
    finally:
        monkeypatch.undo()
        time.tzset()
    taken = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=datetime.timezone.utc)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - taken).total_seconds()) < 60


def test_writes_go_through_the_given_move_with_the_given_mode(tmp_path):
    calls = []
    files = _node_files.NodeFiles(str(tmp_path), "/b", move=copying_move(calls))
    files.write("/conf.yaml", "a: 1\n", mode=0o644)
    assert [path for _tmp, path in calls] == [str(tmp_path / "conf.yaml")]
    assert (tmp_path / "conf.yaml").read_text() == "a: 1\n"
    assert oct((tmp_path / "conf.yaml").stat().st_mode & 0o777) == oct(0o644)
    files.write("/private.yaml", "b: 2\n")
    assert oct((tmp_path / "private.yaml").stat().st_mode & 0o777) == oct(0o600)


def test_five_backups_are_kept_by_default(tmp_path):
    files = _node_files.NodeFiles(str(tmp_path), "/b")
    for n in range(7):
        files.stamp = f"2026010{n}"
        files.backup("/x", str(n))
    assert sorted(os.listdir(tmp_path / "b")) == [f"x.2026010{n}.bak" for n in range(2, 7)]


def test_a_link_out_of_the_root_is_refused_with_where_it_points(tmp_path, monkeypatch):
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "etc" / "link.yaml").symlink_to("../../elsewhere/x.yaml")
    (root / "etc" / "dir").symlink_to(tmp_path / "elsewhere")
    files = _node_files.NodeFiles(str(root), "/var/backups")
    fix = (
        f"which is outside the node root {root}; the module reads and writes only inside root; fix: point the link "
        f"at a file inside the node's file system (a relative link, or an absolute one under {root})"
    )
    with pytest.raises(_node_files.NodeFileError) as err:
        files.resolve("/etc/link.yaml")
    assert str(err.value) == f"/etc/link.yaml is a symbolic link to ../../elsewhere/x.yaml, {fix}"
    # a file below a linked directory: the real path is named
    with pytest.raises(_node_files.NodeFileError) as err:
        files.resolve("/etc/dir/x.yaml")
    assert str(err.value) == f"/etc/dir/x.yaml is a symbolic link to {tmp_path / 'elsewhere' / 'x.yaml'}, {fix}"
    (root / "etc" / "inner.yaml").symlink_to("link-target.yaml")
    assert files.resolve("/etc/inner.yaml") == str(root / "etc" / "link-target.yaml")
    # on the node itself (root / or none) every path is the node's own, wherever the working directory is
    monkeypatch.chdir(root)
    for node_root in ("/", ""):
        assert _node_files.NodeFiles(node_root, "/b").resolve(str(root / "etc" / "link.yaml")) == str(
            tmp_path / "elsewhere" / "x.yaml"
        )


def test_read_says_what_is_wrong_with_the_file(tmp_path):
    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    (tmp_path / "d").mkdir()
    (tmp_path / "latin1.yaml").write_bytes(b"kind: Pod\n# caf\xe9\n")  # 0xe9: byte 10 + 5
    assert files.read("/missing.yaml") is None
    with pytest.raises(_node_files.NodeFileError) as err:
        files.read("/d")
    assert str(err.value) == (
        "/d is a directory, but a file is expected there; fix: point the path at the file, or remove the directory"
    )
    with pytest.raises(_node_files.NodeFileError) as err:
        files.read("/latin1.yaml")
    assert str(err.value) == (
        "/latin1.yaml is not UTF-8 text (byte 0xe9 at offset 15); Kubernetes manifests and scheduler "
        "configurations are UTF-8 YAML; fix: convert the file to UTF-8 (for example with iconv -t utf-8) or point "
        "the path at the right file"
    )


def test_read_without_permission_says_to_become_root(tmp_path, monkeypatch):
    def refuse(path, mode="r"):
        raise PermissionError(13, "Permission denied", path)

    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(_node_files.NodeFileError) as err:
        files.read("/etc/x.yaml")
    assert str(err.value) == "cannot read /etc/x.yaml: Permission denied; fix: run the module as root (become: true)"


def test_backups_are_private_pruned_to_the_newest_and_named_by_node_path(tmp_path, no_umask):
    files = _node_files.NodeFiles(str(tmp_path), "/var/backups", backup_keep=2)
    stamps = iter(["20260101T000000000001Z", "20260101T000000000002Z", "20260101T000000000003Z"])
    for text in ("one", "two", "three"):
        files.stamp = next(stamps)
        node_path = files.backup("/etc/kubernetes/conf.yaml", text)
    assert node_path == "/var/backups/conf.yaml.20260101T000000000003Z.bak"
    directory = tmp_path / "var" / "backups"
    (directory / "conf.yaml.other").write_text("not a backup")
    (directory / "other.yaml.20260101T000000000009Z.bak").write_text("another file's")
    assert sorted(os.listdir(directory)) == [
        "conf.yaml.20260101T000000000002Z.bak",
        "conf.yaml.20260101T000000000003Z.bak",
        "conf.yaml.other",
        "other.yaml.20260101T000000000009Z.bak",
    ]
    assert oct(directory.stat().st_mode & 0o777) == oct(0o700)
    assert oct((directory / "conf.yaml.20260101T000000000003Z.bak").stat().st_mode & 0o777) == oct(0o600)
    assert files.original_text("/etc/kubernetes/conf.yaml", lambda text: True) == "three"
    assert files.original_text("/etc/kubernetes/conf.yaml", lambda text: text == "two") == "two"
    assert files.original_text("/etc/kubernetes/conf.yaml", lambda text: False) is None
    (directory / "conf.yaml.20260101T000000000004Z.bak").write_bytes(b"\xff")  # newest, not text: skipped
    assert files.original_text("/etc/kubernetes/conf.yaml", lambda text: True) == "three"
    assert _node_files.NodeFiles(str(tmp_path), "/none").original_text("/x", lambda text: True) is None


def test_a_backup_is_never_overwritten(tmp_path):
    """Two runs of the same microsecond (the second waited for the first's lock): both backups stay,
    the later one sorting as the newer."""
    first, second = _node_files.NodeFiles(str(tmp_path), "/b"), _node_files.NodeFiles(str(tmp_path), "/b")
    second.stamp = first.stamp
    one, two = first.backup("/x", "first"), second.backup("/x", "second")
    assert one != two and sorted([one, two]) == [one, two]
    assert [(tmp_path / p.lstrip("/")).read_text() for p in (one, two)] == ["first", "second"]


def test_apply_writes_in_order_and_puts_everything_back_when_a_step_fails(tmp_path):
    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    (tmp_path / "a").write_text("a0")
    (tmp_path / "gone").write_text("g0")
    (tmp_path / "dir").mkdir()
    steps = [("/a", "a0", "a1"), ("/new", None, "n1"), ("/gone", "g0", None), ("/dir", None, "x")]
    backups, failure = files.apply(steps)
    assert sorted(backups) == ["/a", "/gone"]
    assert failure["reason"].startswith("writing /dir failed: ")
    assert failure["problems"] == [] and failure["undone"] is True
    assert (tmp_path / "a").read_text() == "a0" and (tmp_path / "gone").read_text() == "g0"
    assert not (tmp_path / "new").exists()
    assert os.listdir(tmp_path / "backups") == []  # nothing changed: the backups are gone again
    backups, failure = files.apply(steps[:3])
    assert failure is None
    assert (tmp_path / "a").read_text() == "a1" and (tmp_path / "new").read_text() == "n1"
    assert not (tmp_path / "gone").exists()
    assert [(tmp_path / b.lstrip("/")).read_text() for b in (backups["/a"], backups["/gone"])] == ["a0", "g0"]


def test_apply_reports_what_it_could_not_put_back_and_keeps_the_backups(tmp_path, monkeypatch):
    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    (tmp_path / "a").write_text("a0")
    real_write = _node_files.NodeFiles.write
    calls = []

    def write(self, path, text, mode=0o600):
        calls.append(path)
        if len(calls) > 1:
            raise OSError(30, "Read-only file system")
        real_write(self, path, text, mode)

    monkeypatch.setattr(_node_files.NodeFiles, "write", write)
    backups, failure = files.apply([("/a", "a0", "a1"), ("/b", None, "b1")])
    assert failure == {
        "reason": "writing /b failed: Read-only file system",
        "problems": ["putting back /a failed too: [Errno 30] Read-only file system"],
        "undone": True,
    }
    assert (tmp_path / backups["/a"].lstrip("/")).read_text() == "a0"
    # every write fails from now on: a failure at the first step has nothing to put back
    _backups, failure = files.apply([("/c", None, "c1")])
    assert failure == {"reason": "writing /c failed: Read-only file system", "problems": [], "undone": False}


def test_apply_names_the_backups_when_they_fail(tmp_path):
    (tmp_path / "backups").write_text("a file where the backup directory should be")
    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    backups, failure = files.apply([("/a", "a0", "a1")])
    assert backups == {}
    assert failure == {"reason": "writing the backups failed: File exists", "problems": [], "undone": False}
    assert not (tmp_path / "a").exists()


def test_apply_ignores_a_backup_it_cannot_remove_after_putting_everything_back(tmp_path, monkeypatch):
    files = _node_files.NodeFiles(str(tmp_path), "/backups")
    (tmp_path / "a").write_text("a0")
    (tmp_path / "dir").mkdir()
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if "/backups/" in str(path):
            raise PermissionError(13, "Permission denied", path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(_node_files.os, "unlink", unlink)
    backups, failure = files.apply([("/a", "a0", "a1"), ("/dir", None, "x")])
    assert failure["problems"] == [] and failure["undone"] is True
    assert (tmp_path / "a").read_text() == "a0"
    assert (tmp_path / backups["/a"].lstrip("/")).read_text() == "a0"  # left behind, harmless


def test_apply_names_a_refused_step_with_the_refusal(tmp_path):
    root = tmp_path / "node"
    root.mkdir()
    (root / "out.yaml").symlink_to(tmp_path / "x.yaml")
    files = _node_files.NodeFiles(str(root), "/backups")
    _backups, failure = files.apply([("/out.yaml", None, "x")])
    assert failure["reason"] == f"writing /out.yaml failed: {files_error(files, '/out.yaml')}"


def files_error(files, path):
    with pytest.raises(_node_files.NodeFileError) as err:
        files.resolve(path)
    return str(err.value)


def test_a_backup_dir_linked_into_the_static_pod_directory_is_refused(node):
    """Issue 45 item 13: the lexical check passed a backup_dir whose parent is a symbolic link to
    /etc/kubernetes/manifests, and the backups landed where kubelet runs every file as a pod."""
    link = node / "var/lib/poweraware"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../etc/kubernetes/manifests")
    before = snapshot(node)
    result = run(args(node, backup_dir="/var/lib/poweraware/backups"))
    assert result["failed"] and result["changed"] is False
    assert (
        f"backup_dir /var/lib/poweraware/backups leads through a symbolic link into the static pod directory "
        f"({node / 'etc/kubernetes/manifests/backups'}); kubelet would run the backups as pods. Use a directory "
        "that is not linked there, such as /var/lib/poweraware/backups/kube-scheduler"
    ) in result["msg"]
    assert snapshot(node) == before


# --- issue 45 item 13: command lines the module cannot read or extend -----------------------------


def _with_command(node: pathlib.Path, command: list[str], args: list[str] | None = None) -> None:
    manifest = node / MANIFEST.lstrip("/")
    doc = yaml.safe_load(manifest.read_text())
    container = doc["spec"]["containers"][0]
    container["command"] = command
    if args is not None:
        container["args"] = args
    manifest.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        (
            ["/bin/sh", "-c", "exec kube-scheduler --kubeconfig=/etc/kubernetes/scheduler.conf --v=2"],
            None,
            "the kube-scheduler container runs a shell (/bin/sh -c ...): its flags are words of a script, which this "
            "module cannot read or extend (a flag appended to the list would reach the shell, not kube-scheduler); "
            "fix: give kube-scheduler and its flags as separate items of command/args, as kubeadm writes them, or "
            "add the extender to the scheduler's configuration by hand",
        ),
        (
            ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--config"],
            None,
            "command[2] is --config with no value after it (kube-scheduler refuses to start: flag needs an "
            "argument); fix: write --config=<value>, or remove it",
        ),
        (
            ["kube-scheduler", "--config", "--kubeconfig=/etc/kubernetes/scheduler.conf"],
            None,
            "command[1] is --config followed by '--kubeconfig=/etc/kubernetes/scheduler.conf', which kube-scheduler "
            "would take as its value; fix: write --config=<value> before the other flags, or remove it",
        ),
        (
            ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf --v=2"],
            None,
            "command[1] '--kubeconfig=/etc/kubernetes/scheduler.conf --v=2' holds several words; kubelet passes it "
            "as one argument, so kube-scheduler does not see the flags inside it; fix: one flag per item",
        ),
    ],
    ids=["shell-wrapped", "dangling-config", "config-swallows-a-flag", "two-flags-in-one-item"],
)
def test_command_lines_the_module_cannot_extend_are_refused(node, command, extra, message):
    """Before, the shell-wrapped manifest got --config appended after the script (the shell's $0:
    kube-scheduler never saw it, changed=true) and the dangling --config a second --config."""
    _with_command(node, command, extra)
    before = snapshot(node)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False, result
    assert result["errors"] == [message]
    assert snapshot(node) == before


def test_a_flag_ending_command_takes_its_value_from_args(node):
    # kubelet runs command + args as one argv: --config's value may be the first item of args
    (node / "etc/kubernetes/sched-user.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "clientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\n"
    )
    _with_command(node, ["kube-scheduler", "--config"], ["/etc/kubernetes/sched-user.yaml", "--v=2"])
    result = run(args(node))
    assert not result.get("failed"), result
    doc = yaml.safe_load((node / MANIFEST.lstrip("/")).read_text())
    argv = doc["spec"]["containers"][0]["command"] + doc["spec"]["containers"][0]["args"]
    assert [a for a in argv if a.startswith("--config")] == ["--config"]  # not a second one
    assert "extenders" in yaml.safe_load((node / "etc/kubernetes/sched-user.yaml").read_text())


FLOW_CONFIG = (
    "{apiVersion: kubescheduler.config.k8s.io/v1, kind: KubeSchedulerConfiguration,\n"
    " clientConnection: {kubeconfig: /etc/kubernetes/scheduler.conf}}\n"
)


def test_a_flow_style_config_with_comments_is_refused_not_rewritten(node):
    """The editor cannot change flow-style YAML in place; the file was written out again and its
    comments dropped without a word (issue 45 item 13). Now refused, naming the comment lines."""
    with_user_config(node, "# tuned by the platform team: keep\n" + FLOW_CONFIG + "# end\n")
    before = snapshot(node)
    result = run(args(node))
    assert result["failed"] and result["changed"] is False, result
    assert result["errors"] == [
        "/etc/kubernetes/scheduler-config.yaml cannot be changed in place (flow-style YAML such as {...} or [...] "
        "where the change goes), and writing it out again would drop its comments (lines 1, 4); fix: write that "
        "part in block style (one key per line, '- ' items), or remove the comments you do not need, and run again"
    ]
    assert snapshot(node) == before


def test_a_flow_style_config_without_comments_is_rewritten_with_a_warning(node):
    with_user_config(node, FLOW_CONFIG)
    result = run(args(node))
    assert result["changed"] and not result.get("failed"), result
    assert (
        "/etc/kubernetes/scheduler-config.yaml could not be changed in place (flow-style YAML) and is written out "
        "again in block style: the same content in another layout; the backup holds the original"
    ) in warnings(result)
    written = yaml.safe_load((node / USER_CONFIG).read_text())
    assert written["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert [e["urlPrefix"] for e in written["extenders"]] == [TAS_EXTENDER["url_prefix"]]
