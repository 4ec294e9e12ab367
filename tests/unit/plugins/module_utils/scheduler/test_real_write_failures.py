"""A manifest replace that really fails (issue 45 item 11), not a mocked write: the manifest is a
read-only bind mount in a mount namespace of the test's own, so the module's real write path
(ansible-core's atomic_move: rename, then its copy fallback) fails the way it does on a node, and
raises a bare Exception, which used to slip past the rollback: the new configuration and a backup
stayed behind while the result said changed=false."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from test_kube_scheduler_extender_module import BACKUPS, CONFIG, MANIFEST, args, run  # noqa: E402

CAN_UNSHARE = hasattr(os, "unshare") and os.geteuid() == 0


def _in_a_mount_namespace(read_only, action):
    """Run ``action()`` in a forked child with ``read_only`` bind-mounted read-only onto itself in a
    mount namespace of its own (the host sees nothing of it); returns what the action returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        status = 0
        try:
            os.unshare(os.CLONE_NEWNS)
            for command in (
                ["mount", "--make-rprivate", "/"],
                ["mount", "--bind", str(read_only), str(read_only)],
                ["mount", "-o", "remount,ro,bind", str(read_only)],
            ):
                subprocess.run(command, check=True, capture_output=True)
            result = action()
            os.write(write, json.dumps(result).encode())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            os.write(write, json.dumps({"child_error": repr(exc)}).encode())
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


@pytest.mark.skipif(not CAN_UNSHARE, reason="needs root and os.unshare for a mount namespace")
def test_a_read_only_manifest_rolls_back_the_new_config(node):
    manifest = node / MANIFEST.lstrip("/")
    before = manifest.read_bytes()
    result = _in_a_mount_namespace(manifest, lambda: run(args(node)))
    assert "child_error" not in result, result["child_error"]
    assert result["failed"] is True and result["changed"] is False
    print(result["msg"])
    assert result["msg"].startswith(f"writing {MANIFEST} failed: Unable to make ")
    assert "Read-only file system" in result["msg"] or "Device or resource busy" in result["msg"], result["msg"]
    assert result["msg"].endswith("; nothing was changed and everything this run had written was put back")
    assert manifest.read_bytes() == before
    assert not (node / CONFIG.lstrip("/")).exists()  # the configuration written first was removed
    assert list((node / BACKUPS.lstrip("/")).iterdir()) == []  # and this run's backups
    assert not [p for p in manifest.parent.iterdir() if p.name != manifest.name]  # no temporary file
