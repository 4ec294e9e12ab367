"""lab/assets.py build_all: what `make integration` builds before any test starts."""

from __future__ import annotations

from lab import assets


def test_build_all_builds_the_labs_binaries_then_every_older_scheduler(monkeypatch):
    calls = []
    monkeypatch.delenv("POWERAWARE_K8S_ASSETS", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setattr(assets, "resolve_binaries", lambda build, log: calls.append(("lab", build)))
    monkeypatch.setattr(assets, "ensure_built", lambda component, log: calls.append(("release", component.name)))
    assets.build_all(log=lambda _m: None)
    assert calls == [
        ("lab", True),
        ("release", "kube-scheduler-v1.21"),
        ("release", "kube-scheduler-v1.22"),
        ("release", "kube-scheduler-v1.24"),
    ]


def test_build_all_leaves_the_older_schedulers_out_when_told(monkeypatch):
    calls = []
    monkeypatch.setattr(assets, "resolve_binaries", lambda build, log: calls.append(("lab", build)))
    monkeypatch.setattr(assets, "ensure_built", lambda component, log: calls.append(("release", component.name)))
    assets.build_all(log=lambda _m: None, older_schedulers=False)
    assert calls == [("lab", True)]
