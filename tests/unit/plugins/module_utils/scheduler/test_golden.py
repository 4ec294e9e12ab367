"""Golden tests: every release 1.18 .. 1.36, merges, other installers, legacy Policy, absent, idempotence."""

from __future__ import annotations

import difflib
import json
import os
import pathlib
import sys

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kubeadm_manifests  # noqa: E402
from cases import CASES, CONFIG_PATH, GOLDEN, MANIFEST_PATH, POLICY_PATH, Case  # noqa: E402

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _plan(case: Case, manifest_text: str, files: dict):
    extenders, errors = sc.normalize_extenders(case.extenders)
    assert not errors
    return ms.plan_present(
        manifest_text,
        MANIFEST_PATH,
        files.get,
        extenders,
        CONFIG_PATH,
        POLICY_PATH,
        kubernetes_version=case.kubernetes_version,
        legacy_policy=case.legacy_policy,
    )


def _inputs(case: Case):
    manifest = (GOLDEN / case.manifest).read_text()
    files = {node: (GOLDEN / rel).read_text() for node, rel in case.files.items()}
    return manifest, files


def _expected(case: Case, name: str, actual: str | None) -> str | None:
    path = case.expected_dir / name
    if UPDATE:
        case.expected_dir.mkdir(parents=True, exist_ok=True)
        if actual is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(actual)
    return path.read_text() if path.exists() else None


@pytest.mark.parametrize("minor", range(kubeadm_manifests.FIRST, kubeadm_manifests.LAST + 1))
def test_kubeadm_inputs_match_generator(minor):
    """The committed kubeadm inputs are what kubeadm_manifests.py (the documented reconstruction) makes."""
    committed = (GOLDEN / "input" / f"kubeadm-1.{minor}.yaml").read_text()
    assert committed == kubeadm_manifests.kubeadm_scheduler_manifest(minor)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_golden(case: Case):
    manifest, files = _inputs(case)
    plan = _plan(case, manifest, files)
    manifest_name = pathlib.Path(case.manifest).name
    assert plan.manifest_after == _expected(case, manifest_name, plan.manifest_after)
    config_name = pathlib.Path(plan.file_path).name
    assert plan.file_after == _expected(case, config_name, plan.file_after)
    assert plan.api_version == case.api_version
    assert plan.reemitted == case.reemitted
    assert plan.changed


@pytest.mark.parametrize("case", [c for c in CASES if not c.reemitted], ids=lambda c: c.name)
def test_golden_manifest_diff_only_adds_our_lines(case: Case):
    """Review aid that cannot drift with the goldens: the manifest diff is additions only, and each
    added line is one of the things the module is allowed to add."""
    manifest, files = _inputs(case)
    after = _plan(case, manifest, files).manifest_after
    diff = [
        line
        for line in difflib.unified_diff(manifest.splitlines(), after.splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++", "@@"))
    ]
    assert diff, "nothing added"
    assert not [line for line in diff if line.startswith("-")], "existing lines changed"
    allowed = (
        "--config=",
        "--policy-config-file=",
        "mountPath: ",
        "name: poweraware-",
        "readOnly: true",
        "hostPath:",
        "path: ",
        "type: FileOrCreate",
        "type: DirectoryOrCreate",
        "dnsPolicy: ClusterFirstWithHostNet",
        "annotations:",
        ms.ANNOTATION + ": ",
    )
    for line in diff:
        body = line[1:].strip()
        body = body[2:] if body.startswith("- ") else body
        assert body.startswith(allowed), line


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_golden_structure(case: Case):
    """Independent of the golden bytes: parse the result and check each required element."""
    manifest, files = _inputs(case)
    plan = _plan(case, manifest, files)
    before, after = yaml.safe_load(manifest), yaml.safe_load(plan.manifest_after)
    container = next(c for c in after["spec"]["containers"] if c["name"] == "kube-scheduler")
    flags = (container.get("command") or []) + (container.get("args") or [])
    flag = "--policy-config-file" if case.policy else "--config"
    assert sum(1 for f in flags if f.startswith(flag + "=")) == 1
    path = next(f.split("=", 1)[1] for f in flags if f.startswith(flag + "="))
    assert path == plan.file_path
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in after["spec"]["volumes"]}
    assert mounts[path]["readOnly"] is True
    assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path
    tls = any(e.get("tls") for e in case.extenders)
    if tls:
        assert mounts["/etc/kubernetes/pki/tas"]["readOnly"] is True
        assert after["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    else:
        assert "dnsPolicy" not in after["spec"]
    # nothing else changed
    record = json.loads(after["metadata"]["annotations"].pop(ms.ANNOTATION))
    assert record["mode"] == ("policy" if case.policy else "config")
    if not after["metadata"]["annotations"]:
        del after["metadata"]["annotations"]
    after_container = next(c for c in after["spec"]["containers"] if c["name"] == "kube-scheduler")
    if not case.files:  # the flag is ours (in merge cases it was the user's already)
        for key in ("command", "args"):
            if f"{flag}={path}" in after_container.get(key, []):
                after_container[key].remove(f"{flag}={path}")
    after_container["volumeMounts"] = [
        m for m in after_container["volumeMounts"] if not m["name"].startswith("poweraware-")
    ]
    after["spec"]["volumes"] = [v for v in after["spec"]["volumes"] if not v["name"].startswith("poweraware-")]
    if "dnsPolicy" not in before["spec"]:
        after["spec"].pop("dnsPolicy", None)
    assert before == after
    # the config file
    doc = yaml.safe_load(plan.file_after)
    assert doc["apiVersion"] == case.api_version
    tas = next(e for e in doc["extenders"] if e["urlPrefix"] == case.extenders[0]["url_prefix"])
    if case.policy:
        assert doc["kind"] == "Policy"
        assert tas["enableHttps"] is True and tas["httpTimeout"] == 5_000_000_000
    else:
        assert doc["kind"] == "KubeSchedulerConfiguration"
        if tls:
            assert tas["enableHTTPS"] is True and tas["httpTimeout"] == "5s"
            assert tas["managedResources"] == [{"name": "telemetry/scheduling", "ignoredByScheduler": True}]
            assert tas["tlsConfig"] == {
                "certFile": "/etc/kubernetes/pki/tas/client.crt",
                "keyFile": "/etc/kubernetes/pki/tas/client.key",
                "caFile": "/etc/kubernetes/pki/tas/ca.crt",
            }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_idempotent(case: Case):
    manifest, files = _inputs(case)
    first = _plan(case, manifest, files)
    files[first.file_path] = first.file_after
    second = _plan(case, first.manifest_after, files)
    assert not second.changed
    assert second.manifest_after == first.manifest_after


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_absent_restores_original(case: Case):
    manifest, files = _inputs(case)
    original_files = dict(files)
    first = _plan(case, manifest, files)
    files[first.file_path] = first.file_after

    def original_text(path, doc):  # what the module finds among its backups
        text = original_files.get(path)
        return text if text is not None and sc.same_content(yaml.safe_load(text), doc) else None

    absent = ms.plan_absent(first.manifest_after, MANIFEST_PATH, files.get, original_text)
    if case.reemitted:
        assert yaml.safe_load(absent.manifest_after) == yaml.safe_load(manifest)
    else:
        assert absent.manifest_after == manifest  # byte for byte
    if first.file_path in original_files:
        assert not absent.file_delete
        assert absent.file_after == original_files[first.file_path]
    else:
        assert absent.file_delete
    # and absent again is a no-op
    again = ms.plan_absent(absent.manifest_after, MANIFEST_PATH, {}.get)
    assert not again.changed


def test_merge_keeps_profiles_and_other_extender():
    case = next(c for c in CASES if c.name == "merge-profiles-1.29")
    manifest, files = _inputs(case)
    plan = _plan(case, manifest, files)
    before = yaml.safe_load(files["/etc/kubernetes/scheduler-config.yaml"])
    after = yaml.safe_load(plan.file_after)
    assert plan.file_path == "/etc/kubernetes/scheduler-config.yaml"
    assert after["profiles"] == before["profiles"]
    assert after["percentageOfNodesToScore"] == 50
    assert [e["urlPrefix"] for e in after["extenders"]] == [
        "http://127.0.0.1:8888/gpu",
        case.extenders[0]["url_prefix"],
    ]
    assert after["extenders"][0] == before["extenders"][0]
    # the user's config is already mounted: only the TLS directory is added
    assert json.loads(yaml.safe_load(plan.manifest_after)["metadata"]["annotations"][ms.ANNOTATION])["volumes"] == [
        "poweraware-extender-tls"
    ]


def test_merge_replaced_entry_is_restored_by_absent():
    case = next(c for c in CASES if c.name == "merge-replace-stale-1.29")
    manifest, files = _inputs(case)
    plan = _plan(case, manifest, files)
    assert plan.record["replaced"][case.extenders[0]["url_prefix"]]["filterVerb"] == "scheduler/filter"
    files[plan.file_path] = plan.file_after
    absent = ms.plan_absent(plan.manifest_after, MANIFEST_PATH, files.get)  # no backup: re-emitted
    original = yaml.safe_load((GOLDEN / case.files[plan.file_path]).read_text())
    assert sc.same_content(yaml.safe_load(absent.file_after), original)


def test_existing_config_in_unserved_version_is_refused():
    manifest = (GOLDEN / "merge/kubeadm-config-1.29.yaml").read_text()
    files = {"/etc/kubernetes/scheduler-config.yaml": (GOLDEN / "merge/scheduler-config-v1beta3.yaml").read_text()}
    extenders, _errors = sc.normalize_extenders([{"url_prefix": "http://127.0.0.1:1/x", "filter_verb": "f"}])
    with pytest.raises(
        ms.ManifestError, match=r"v1beta3.*does not serve.*migrate the file to kubescheduler.config.k8s.io/v1"
    ):
        ms.plan_present(manifest, MANIFEST_PATH, files.get, extenders, CONFIG_PATH, POLICY_PATH)


@pytest.mark.parametrize("minor", [23, 29, 36])
def test_legacy_policy_refused_from_1_23(minor):
    manifest = (GOLDEN / f"input/kubeadm-1.{minor}.yaml").read_text()
    extenders, _errors = sc.normalize_extenders([{"url_prefix": "http://127.0.0.1:1/x", "filter_verb": "f"}])
    with pytest.raises(sv.ConfigError, match=r"removed the scheduler Policy API"):
        ms.plan_present(manifest, MANIFEST_PATH, {}.get, extenders, CONFIG_PATH, POLICY_PATH, legacy_policy=True)


def test_1_18_writes_the_policy_file_whether_or_not_asked():
    """1.18 serves only alpha configuration APIs: legacy_policy changes nothing there."""
    manifest = (GOLDEN / "input/kubeadm-1.18.yaml").read_text()
    extenders, _errors = sc.normalize_extenders([{"url_prefix": "http://127.0.0.1:1/x", "filter_verb": "f"}])
    plans = [
        ms.plan_present(manifest, MANIFEST_PATH, {}.get, extenders, CONFIG_PATH, POLICY_PATH, legacy_policy=legacy)
        for legacy in (False, True)
    ]
    assert plans[0].mode == plans[1].mode == "policy"
    assert plans[0].file_path == POLICY_PATH
    assert plans[0].manifest_after == plans[1].manifest_after
    assert plans[0].file_after == plans[1].file_after
    assert f"- --policy-config-file={POLICY_PATH}" in plans[0].manifest_after


def test_1_18_with_a_config_flag_is_refused():
    """1.18 reads --policy-config-file only without --config (1.19 added ApplyAlgorithmSourceTo)."""
    manifest = (GOLDEN / "input/kubeadm-1.18.yaml").read_text()
    manifest = manifest.replace("    - --port=0\n", "    - --port=0\n    - --config=/etc/kubernetes/sched.yaml\n")
    extenders, _errors = sc.normalize_extenders([{"url_prefix": "http://127.0.0.1:1/x", "filter_verb": "f"}])
    refusal = (
        r"passes --config.*1\.18's kube-scheduler ignores --policy-config-file.*upgrade the control plane to 1\.19"
    )
    with pytest.raises(ms.ManifestError, match=refusal):
        ms.plan_present(manifest, MANIFEST_PATH, {}.get, extenders, CONFIG_PATH, POLICY_PATH)
    # 1.19 applies the Policy flags next to --config: the same manifest there is fine
    newer = manifest.replace("v1.18.20", "v1.19.0")
    plan = ms.plan_present(newer, MANIFEST_PATH, {}.get, extenders, CONFIG_PATH, POLICY_PATH, legacy_policy=True)
    assert plan.changed and plan.mode == "policy"


def test_version_matrix(capsys):
    """Print the version matrix for the report (release, API version written, result)."""
    rows = []
    for case in CASES:
        if not case.name.startswith("kubeadm-"):
            continue
        manifest, files = _inputs(case)
        plan = _plan(case, manifest, files)
        ok = plan.manifest_after == (case.expected_dir / pathlib.Path(case.manifest).name).read_text()
        rows.append((case.name, plan.kubernetes_version, plan.api_version, "pass" if ok else "FAIL"))
    with capsys.disabled():
        print("\n| case | release | apiVersion written | golden |\n|---|---|---|---|")
        for row in rows:
            print("| %s | %s | %s | %s |" % row)
    assert all(r[3] == "pass" for r in rows)
