"""One kube_scheduler_extender run at a time per static pod directory: a run waits for another's lock
(flock on the manifest's directory) and gives up, changing nothing, when it is held too long (two
runs of the same microsecond keep both backups: test_module_safety.py)."""

from __future__ import annotations

import os
import sys

from ansible_collections.poweraware.k8s.plugins.module_utils.node_files import files
from test_kube_scheduler_extender_module import CONFIG, MANIFEST, args, run  # noqa: E402


def test_a_run_waits_for_the_lock_and_then_gives_up_changing_nothing(node, monkeypatch):
    directory = node / MANIFEST.lstrip("/")
    before = directory.read_bytes()
    monkeypatch.setattr(files, "LOCK_WAIT_S", 0.0)
    monkeypatch.setattr(sys.modules["ansible_collections.poweraware.k8s.plugins.modules.kube_scheduler_extender"],
                        "LOCK_WAIT_S", 0.0)  # fmt: skip
    holder = files.lock_directory(str(directory.parent))
    try:
        result = run(args(node))
    finally:
        os.close(holder)
    assert result["failed"] and result["changed"] is False
    assert result["msg"] == (
        f"another kube_scheduler_extender run has held the lock on {directory.parent} for more than 0 s; nothing "
        "was changed: let it finish, then run again"
    )
    assert directory.read_bytes() == before and not (node / CONFIG.lstrip("/")).exists()
