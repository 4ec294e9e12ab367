"""A re-issued CA restarts kube-scheduler; a renewed client pair and an upgrade do not.

kube-scheduler reads an extender's caFile once, at start (client-go reloads only the client
certificate and key from their files). The module records a digest of each trusted CA file in its
manifest annotation, so a new CA changes the manifest and kubelet restarts the static pod.
"""

from __future__ import annotations

import json
import pathlib
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import TAS_EXTENDER  # noqa: E402
from test_kube_scheduler_extender_module import CONFIG, MANIFEST, run  # noqa: E402

CA = "/etc/kubernetes/pki/tas/ca.crt"
EXTENDER = {**TAS_EXTENDER, "tls": {**TAS_EXTENDER["tls"], "ca_file": CA}}
ANNOTATION = "poweraware.k8s/scheduler-extender"


def args(root, **kw):
    return {"root": str(root), "extenders": [EXTENDER], **kw}


def record(root):
    doc = yaml.safe_load((root / MANIFEST.lstrip("/")).read_text())
    return json.loads(doc["metadata"]["annotations"][ANNOTATION])


def test_a_new_ca_restarts_kube_scheduler_and_a_new_client_pair_does_not(node):
    (node / CA.lstrip("/")).write_text("CA one\n")
    first = run(args(node))
    assert first["changed"] and first["manifest_changed"]
    digest = record(node)["trust"][CA]
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 16
    assert not run(args(node))["changed"]

    # client-go reloads these itself: nothing to restart
    (node / "etc/kubernetes/pki/tas/client.crt").write_text("renewed cert")
    (node / "etc/kubernetes/pki/tas/client.key").write_text("renewed key")
    assert not run(args(node))["changed"]

    config = (node / CONFIG.lstrip("/")).read_bytes()
    (node / CA.lstrip("/")).write_text("CA two\n")
    rotated = run(args(node))
    assert rotated["changed"] and rotated["manifest_changed"] and not rotated["config_changed"]
    assert record(node)["trust"][CA] != digest
    assert (node / CONFIG.lstrip("/")).read_bytes() == config
    assert not run(args(node))["changed"]


def as_an_earlier_version_wrote_it(node):
    """The manifest's annotation without digests, as versions before them wrote it."""
    manifest = node / MANIFEST.lstrip("/")
    old = {k: v for k, v in record(node).items() if k != "trust"}
    current = json.dumps(record(node), sort_keys=True, separators=(",", ":"))
    manifest.write_text(manifest.read_text().replace(current, json.dumps(old, sort_keys=True, separators=(",", ":"))))
    assert "trust" not in record(node)


def test_an_upgrade_alone_restarts_nothing(node):
    (node / CA.lstrip("/")).write_text("CA one\n")
    run(args(node))
    as_an_earlier_version_wrote_it(node)

    again = run(args(node))
    assert not again["changed"]
    warnings = json.dumps(again.get("warnings", []))  # strings, or event records on newer ansible-core
    assert "written by an earlier version" in warnings and "set trust_changed" in warnings

    # the role installed a new CA: the digests are recorded now, which restarts kube-scheduler
    (node / CA.lstrip("/")).write_text("CA two\n")
    rotated = run(args(node, trust_changed=True))
    assert rotated["changed"] and rotated["manifest_changed"]
    assert set(record(node)["trust"]) == {CA}
    assert not run(args(node))["changed"]


def test_an_earlier_record_gets_the_digests_with_the_next_manifest_change(node):
    (node / CA.lstrip("/")).write_text("CA one\n")
    run(args(node))
    as_an_earlier_version_wrote_it(node)
    # another extender URL changes the record, so the manifest changes (and restarts) anyway
    moved = {**EXTENDER, "url_prefix": "https://tas-service.telemetry-aware-scheduling.svc.cluster.local:9443"}
    result = run({"root": str(node), "extenders": [moved]})
    assert result["changed"] and result["manifest_changed"]
    assert set(record(node)["trust"]) == {CA}


def test_check_mode_predicts_the_restart(node):
    (node / CA.lstrip("/")).write_text("CA one\n")
    run(args(node))
    (node / CA.lstrip("/")).write_text("CA two\n")
    before = (node / MANIFEST.lstrip("/")).read_bytes()
    checked = run(args(node), check=True, diff=True)
    assert checked["changed"] and checked["manifest_changed"]
    assert (node / MANIFEST.lstrip("/")).read_bytes() == before
