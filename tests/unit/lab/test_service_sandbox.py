"""The lab's service manager sandboxes a service as systemd does (lab/node_systemctl.py).

A unit's ``ProtectSystem=strict`` makes every mount read-only but the API file systems, so a unit
that writes outside its ``ReadWritePaths=`` fails in the lab as it fails on a host; this is what
makes the boot unit's sandbox (roles/cpu_power) a tested claim. Needs root (mount namespaces)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from lab import node_systemctl

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture
def outside_tmp():
    """A directory outside /tmp (PrivateTmp hides pytest's tmp_path from the sandboxed child)."""
    base = REPO_ROOT / ".cache"
    base.mkdir(exist_ok=True)
    path = pathlib.Path(tempfile.mkdtemp(prefix="sandbox-probe-", dir=base))
    yield path
    shutil.rmtree(path)


def _in_sandbox(service, probe, before=None):
    """Run ``probe()`` (-> list of results) in a forked child inside ``service``'s sandbox (``before``
    runs first in the child, in a mount namespace of its own)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            if before is not None:
                before()
            node_systemctl.enter_sandbox(service)
            results = probe()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            results = [f"sandbox failed: {exc!r}"]
        os.write(write, repr(results).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        out = handle.read()
    os.waitpid(pid, 0)
    return eval(out)  # noqa: S307 - our own child's repr of a list of strings and ints


def _try_write(path):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return "written"
    except OSError as exc:
        return errno.errorcode[exc.errno]


def test_strict_leaves_only_the_api_file_systems_and_the_writable_paths(outside_tmp):
    state, elsewhere = outside_tmp / "state", outside_tmp / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    service = {
        "ProtectSystem": ["strict"],
        "ReadWritePaths": [f"{state} -/nonexistent/poweraware"],
        "PrivateTmp": ["yes"],
        "ProtectHome": ["yes"],
        "NoNewPrivileges": ["yes"],
    }
    marker = "/tmp/poweraware-sandbox-probe"  # noqa: S108 - written in the child's private /tmp only
    results = _in_sandbox(
        service,
        lambda: [
            _try_write(state / "journal.json"),
            _try_write(elsewhere / "x"),
            _try_write(marker),
            sorted(os.listdir("/root")),
            open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0],  # noqa: SIM115
            os.access("/sys/kernel", os.W_OK) or os.path.ismount("/sys"),
        ],
    )
    assert results[:3] == ["written", "EROFS", "written"], results
    assert results[3] == [] and results[4] == "1", results
    assert (state / "journal.json").read_text() == "x"
    assert not (elsewhere / "x").exists()
    assert not os.path.exists(marker)  # PrivateTmp: the host's /tmp never saw it


def test_mounts_hidden_below_another_mount_are_skipped(outside_tmp):
    """A lab node hides the controller's checkout under an empty tmpfs, with the lab's own mounts (the
    cluster nodes' FUSE kernels) still listed below it in mountinfo: they cannot be reached by path
    (ENOENT) and must not fail the service's namespace (they did: status 226 at the node's boot)."""
    hidden = outside_tmp / "checkout"
    (hidden / "kernel").mkdir(parents=True)
    (hidden / "plain").mkdir()
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def hide():
        assert libc.unshare(node_systemctl.CLONE_NEWNS) == 0
        node_systemctl._mount(libc, "none", "/", None, node_systemctl.MS_REC | node_systemctl.MS_PRIVATE)
        node_systemctl._mount(libc, "tmpfs", str(hidden / "kernel"), "tmpfs", 0, "mode=0755")
        node_systemctl._mount(libc, "tmpfs", str(hidden / "plain"), "tmpfs", 0, "mode=0755")
        node_systemctl._mount(libc, "tmpfs", str(hidden), "tmpfs", 0, "mode=0755")  # covers both
        os.mkdir(hidden / "plain")  # the path exists again above, but is no mount point there (EINVAL)

    results = _in_sandbox({"ProtectSystem": ["strict"]}, lambda: [_try_write(hidden / "plain" / "x")], hide)
    assert results == ["EROFS"], results


def test_a_missing_writable_path_fails_the_unit_with_226(tmp_path, capsys):
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    (unit_dir / "probe.service").write_text(
        "[Service]\nType=oneshot\nProtectSystem=strict\nReadWritePaths=/nonexistent/poweraware\n"
        f"ExecStart={sys.executable} -c pass\n"
    )
    original = node_systemctl.UNIT_DIRS
    node_systemctl.UNIT_DIRS = (str(unit_dir),)
    try:
        state = {"loaded": {}, "active": {}}
        assert node_systemctl.run_unit(state, "probe.service") == 1
    finally:
        node_systemctl.UNIT_DIRS = original
    assert state["active"]["probe.service"] == "failed"
    err = capsys.readouterr().err
    assert "Failed to set up mount namespacing: /nonexistent/poweraware: No such file or directory" in err
    assert "status=226/NAMESPACE" in err


def test_a_unit_without_sandboxing_runs_as_before(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", "print('ok')"], check=True, capture_output=True, text=True,
        preexec_fn=lambda: node_systemctl.enter_sandbox({}),  # noqa: PLW1509
    )  # fmt: skip
    assert out.stdout == "ok\n"
