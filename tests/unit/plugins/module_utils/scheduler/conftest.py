"""The node tree the module tests run on: kubeadm 1.29's kube-scheduler manifest and the TAS client
files, under a temporary root (shared by test_module.py and test_module_safety.py)."""

from __future__ import annotations

import pathlib

import pytest

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


@pytest.fixture
def node(tmp_path):
    root = tmp_path / "node"
    manifest = root / MANIFEST.lstrip("/")
    manifest.parent.mkdir(parents=True)
    manifest.write_text((GOLDEN / "input/kubeadm-1.29.yaml").read_text())
    manifest.chmod(0o600)
    tls = root / "etc/kubernetes/pki/tas"
    tls.mkdir(parents=True)
    (tls / "client.crt").write_text("cert")
    (tls / "client.key").write_text("key")
    (tls / "ca.crt").write_text("ca")
    return root
