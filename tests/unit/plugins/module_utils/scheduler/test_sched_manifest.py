"""sched_manifest's pieces checked one by one: exact messages, boundaries, independent oracles.

Each test
pins a behaviour the golden and module tests pass through without looking at it.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
import sys

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import CONFIG_PATH, GOLDEN, MANIFEST_PATH, POLICY_PATH, TAS_EXTENDER, USER_CONFIG_PATH  # noqa: E402
from poweraware_testing import tas_extender_config  # noqa: E402

MERGE_MANIFEST = (GOLDEN / "merge/kubeadm-config-1.29.yaml").read_text()
PLAIN_MANIFEST = (GOLDEN / "input/kubeadm-1.29.yaml").read_text()
LOOPBACK = {"url_prefix": "http://127.0.0.1:9001/scheduler", "filter_verb": "filter"}
OTHER = {"url_prefix": "http://127.0.0.1:9002/other", "filter_verb": "filter"}


def plan(extenders, files=None, manifest=MERGE_MANIFEST, **kw):
    normalized, errors = sc.normalize_extenders(extenders)
    assert not errors
    return ms.plan_present(manifest, MANIFEST_PATH, (files or {}).get, normalized, CONFIG_PATH, POLICY_PATH, **kw)


def pod(containers, **spec):
    return {"kind": "Pod", "metadata": {"name": "s"}, "spec": {"containers": containers, **spec}}


def user_files(version="v1beta3"):
    return {USER_CONFIG_PATH: tas_extender_config(version).replace("telemetry/scheduling", "a.b/c")}


# --- ManifestError -------------------------------------------------------------------------------------


def test_manifest_error_of_joins_every_error_and_keeps_the_list():
    error = ms.ManifestError.of(["first", "second"])
    assert str(error) == "first; second"
    assert error.errors == ["first", "second"]
    assert ms.ManifestError("alone").errors == ["alone"]


# --- check_pod -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        None,
        {"kind": "Deployment", "spec": {}},
        {"kind": "Pod"},
        {"kind": "Pod", "spec": []},
    ],
)
def test_check_pod_refuses_what_is_not_a_pod(doc):
    with pytest.raises(ms.ManifestError) as info:
        ms.check_pod(doc, "/m.yaml")
    assert str(info.value) == (
        "/m.yaml is not a Pod manifest (kind: Pod with a spec); point manifest_path at the kube-scheduler static pod"
    )


@pytest.mark.parametrize("containers", [None, [], [{"name": "a"}, "b"], {"name": "kube-scheduler"}])
def test_check_pod_refuses_a_pod_without_containers(containers):
    with pytest.raises(ms.ManifestError) as info:
        ms.check_pod(pod(containers), "/m.yaml")
    assert str(info.value) == "/m.yaml has no containers"


def test_check_pod_finds_the_container_by_name_or_takes_the_only_one():
    assert ms.check_pod(pod([{"name": "sidecar"}, {"name": "kube-scheduler"}]), "/m") == 1
    assert ms.check_pod(pod([{"name": "anything"}]), "/m") == 0
    with pytest.raises(ms.ManifestError) as info:
        ms.check_pod(pod([{"name": "a"}, {"name": "b"}]), "/m.yaml")
    assert str(info.value) == "/m.yaml has several containers and none is named kube-scheduler"


def test_check_pod_names_every_duplicate_container():
    doc = pod([{"name": "kube-scheduler"}, {"name": "x"}, {"name": "kube-scheduler"}])
    with pytest.raises(ms.ManifestError) as info:
        ms.check_pod(doc, "/m.yaml")
    assert str(info.value) == (
        "/m.yaml has 2 containers named kube-scheduler (spec.containers[0], spec.containers[2]); container names "
        "must be unique in a pod, so kubelet refuses this manifest and the module cannot tell which one to "
        "configure; fix: rename or remove the extra container"
    )


# --- flags ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "key"),
    [({"command": "kube-scheduler --config=x"}, "command"), ({"command": ["a"], "args": ["--v", 2]}, "args")],
)
def test_flag_lists_must_be_lists_of_strings(container, key):
    with pytest.raises(ms.ManifestError) as info:
        ms.find_flag(container, "--config")
    assert str(info.value) == f"container {key} must be a list of strings"


def test_find_flag_forms_and_boundaries():
    container = {"command": ["kube-scheduler", "--configx=/no", "--config", "/a.yaml"], "args": ["--port=0"]}
    assert ms.find_flag(container, "--config") == ("/a.yaml", "command", "--config")
    assert ms.find_flag(container, "--port") == ("0", "args", "--port=0")
    # a flag without a following value, and a longer flag that starts with the name, are not it
    assert ms.find_flag({"command": ["kube-scheduler", "--config"]}, "--config") is None
    assert ms.find_flag({"command": ["--configx=/no"]}, "--config") is None
    assert ms.find_flag({"args": ["--config=", "x"]}, "--config") == ("", "args", "--config=")
    assert ms.find_flag({}, "--config") is None


@pytest.mark.parametrize(
    ("container", "key"),
    [
        ({"command": ["kube-scheduler"], "args": ["--v=2"]}, "args"),
        ({"command": ["kube-scheduler"], "args": []}, "command"),
        ({"args": []}, "args"),
        ({"command": [], "args": None}, "args"),
        ({}, "command"),
        ({"command": ["kube-scheduler"]}, "command"),
    ],
)
def test_flags_list_key(container, key):
    assert ms.flags_list_key(container) == key


# --- the record ----------------------------------------------------------------------------------------


def test_read_record_without_annotation_is_none():
    assert ms.read_record({}) is None
    assert ms.read_record({"metadata": None}) is None
    assert ms.read_record({"metadata": {"annotations": None}}) is None


@pytest.mark.parametrize("raw", ["{not json", 5])
def test_read_record_refuses_what_is_not_json(raw):
    with pytest.raises(ms.ManifestError) as info:
        ms.read_record({"metadata": {"annotations": {ms.ANNOTATION: raw}}})
    assert str(info.value) == (
        "annotation poweraware.k8s/scheduler-extender on the manifest is not valid JSON; remove it by hand (it only "
        "records what this module added)"
    )


@pytest.mark.parametrize("raw", ['{"v": 2}', "[1]", "{}"])
def test_read_record_refuses_an_unknown_format(raw):
    with pytest.raises(ms.ManifestError) as info:
        ms.read_record({"metadata": {"annotations": {ms.ANNOTATION: raw}}})
    assert str(info.value) == "annotation poweraware.k8s/scheduler-extender has an unknown format; remove it by hand"


def test_read_record_returns_the_record():
    assert ms.read_record({"metadata": {"annotations": {ms.ANNOTATION: '{"v":1,"a":2}'}}}) == {"v": 1, "a": 2}


def test_encode_record_is_compact_and_sorted():
    assert ms.encode_record({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


# --- mounts --------------------------------------------------------------------------------------------


def serving_mount(path, mounts):
    """``(index, volume name, mountPath)`` of the mount mount_check says the scheduler sees ``path``
    through, or None: every volume is an emptyDir, so a covered path always comes with the problem
    that names its mount."""
    volumes = [{"name": m["name"], "emptyDir": {}} for m in mounts if isinstance(m, dict) and "name" in m]
    covered, problem = ms.mount_check(path, mounts, volumes)
    if not covered:
        return None
    found = re.search(r"inside the existing mount (\S+) \(volumeMounts\[(\d+)\], volume (\S+): an emptyDir", problem)
    return int(found[2]), found[3], found[1]


def test_the_deepest_mount_serves_a_path_and_mounts_stop_at_path_components():
    mounts = [
        {"mountPath": "/", "name": "root"},
        {"mountPath": "/etc/kubernetes/", "name": "k8s"},
        {"mountPath": "/etc/kubernetes/pki", "name": "pki"},
        {"mountPath": "", "name": "empty"},
        "not a mount",
        {"name": "no path"},
    ]
    assert serving_mount("/etc/kubernetes/pki/tas", mounts) == (2, "pki", "/etc/kubernetes/pki")
    assert serving_mount("/etc/kubernetes/pki", mounts) == (2, "pki", "/etc/kubernetes/pki")
    assert serving_mount("/etc/kubernetes/pkix", mounts) == (1, "k8s", "/etc/kubernetes")
    assert serving_mount("/var/x", mounts) == (0, "root", "/")
    assert serving_mount("/etc/kubernetes-x", mounts[1:]) is None
    # the first of two equally deep mounts serves the path
    twice = [{"mountPath": "/a", "name": "one"}, {"mountPath": "/a/", "name": "two"}]
    assert serving_mount("/a/b", twice) == (0, "one", "/a")
    assert serving_mount("/srv/x", [{"mountPath": "/srvX", "name": "n"}]) is None  # a prefix is not a parent
    # a mountPath that is not text is no mount (the API server would have refused the manifest)
    assert serving_mount("/a/b", [{"mountPath": 5, "name": "n"}, {"mountPath": ["/a"], "name": "l"}]) is None


def test_mount_check_accepts_a_hostpath_of_the_same_place():
    mounts = [{"mountPath": "/etc/kubernetes", "name": "k"}]
    volumes = [{"name": "other"}, {"name": "k", "hostPath": {"path": "/etc/kubernetes/"}}]
    assert ms.mount_check("/etc/kubernetes/x.yaml", mounts, volumes) == (True, None)
    assert ms.mount_check("/etc/kubernetes/XX/X.yaml", mounts, volumes) == (True, None)  # only the "/" goes
    assert ms.mount_check("/etc/kubernetes", mounts, volumes) == (True, None)
    assert ms.mount_check("/srv/x", mounts, volumes) == (False, None)
    sub = [{"mountPath": "/etc/kubernetes/x.yaml", "name": "k", "subPath": "x.yaml"}]
    assert ms.mount_check("/etc/kubernetes/x.yaml", sub, volumes) == (True, None)


@pytest.mark.parametrize(
    ("volume", "backing"),
    [
        ({"name": "v", "emptyDir": {}}, "an emptyDir volume, not a hostPath"),
        ({"name": "v", "configMap": {"name": "c"}}, "a configMap volume, not a hostPath"),
        ({"name": "v", "secret": {}, "projected": {}}, "a projected volume, not a hostPath"),
        ({"name": "v"}, "a typeless volume, not a hostPath"),
        ({"name": "v", "XVolume": {}}, "a XVolume volume, not a hostPath"),  # "an" only before a, e, i, o, u
        ({"name": "v", "hostPath": {"path": "relative"}}, "a hostPath volume, not a hostPath"),
        ({"name": "w"}, "no volume of that name"),
    ],
)
def test_mount_check_says_what_backs_a_wrong_mount(volume, backing):
    mounts = [{"mountPath": "/srv", "name": "other"}, {"mountPath": "/etc/kubernetes", "name": "v"}]
    covered, problem = ms.mount_check("/etc/kubernetes/c.yaml", mounts, ["junk", volume])
    assert covered
    assert problem == (
        f"/etc/kubernetes/c.yaml is inside the existing mount /etc/kubernetes (volumeMounts[1], volume v: {backing}) "
        "instead of the file the module writes on the node; fix: make volume v a hostPath of /etc/kubernetes, or "
        "remove that mount"
    )


def test_mount_check_names_the_node_path_a_subpath_shows():
    mounts = [{"mountPath": "/etc/kubernetes/c.yaml", "name": "v", "subPath": "sub/c.yaml"}]
    volumes = [{"name": "v", "hostPath": {"path": "/srv"}}]
    assert ms.mount_check("/etc/kubernetes/c.yaml", mounts, volumes) == (
        True,
        "/etc/kubernetes/c.yaml is inside the existing mount /etc/kubernetes/c.yaml (volumeMounts[0], volume v: "
        "hostPath /srv with subPath sub/c.yaml, so the scheduler would read node path /srv/sub/c.yaml) instead of "
        "the file the module writes on the node; fix: make volume v a hostPath of /etc/kubernetes/c.yaml without "
        "subPath, or remove that mount",
    )
    # a hostPath of the mount itself shows the node's directory: the file below it is the one read
    mounts = [{"mountPath": "/etc", "name": "v"}]
    problem = ms.mount_check("/etc/kubernetes/c.yaml", mounts, volumes)[1]
    seen = "hostPath /srv, so the scheduler would read node path /srv/kubernetes/c.yaml"
    assert f"(volumeMounts[0], volume v: {seen})" in problem


# --- conflicting flags ---------------------------------------------------------------------------------


def base_with(flags):
    return pod([{"name": "kube-scheduler", "command": ["kube-scheduler", *flags]}])


def test_policy_on_1_18_with_config_flag_is_refused_with_the_exact_message():
    assert ms.conflicting_flags(base_with(["--config=/c"]), 0, "policy", 18) == [
        "the manifest passes --config, and Kubernetes 1.18's kube-scheduler ignores --policy-config-file when "
        "--config is given (its v1alpha2 configuration is an alpha API this module does not write): add the "
        "extender to that file by hand, remove --config from the manifest so the module can write the Policy file, "
        "or upgrade the control plane to 1.19 or newer"
    ]
    # from 1.19 on kube-scheduler reads both
    assert ms.conflicting_flags(base_with(["--config=/c"]), 0, "policy", 19) == []
    assert ms.conflicting_flags(base_with(["--v=2"]), 0, "policy", 18) == []


def test_config_mode_refuses_each_legacy_flag():
    flags = ["--policy-config-file=/p.json", "--policy-configmap=cm"]
    assert ms.conflicting_flags(base_with(flags), 0, "config", 25) == [
        f"the manifest already passes {flag} (a legacy scheduler Policy); set legacy_policy: true to add the "
        "extender to that Policy, or remove the flag first"
        for flag in ("--policy-config-file", "--policy-configmap")
    ]
    assert ms.conflicting_flags(base_with(["--config=/c"]), 0, "config", 25) == []


def test_policy_mode_refuses_the_policy_configmap():
    expected = ["the manifest passes --policy-configmap; this module manages a Policy file, remove the flag first"]
    assert ms.conflicting_flags(base_with(["--policy-configmap=cm"]), 0, "policy", 20) == expected
    assert ms.conflicting_flags(base_with(["--policy-config-file=/p"]), 0, "policy", 20) == []


# --- present_ops ---------------------------------------------------------------------------------------


def test_present_ops_sorts_the_flag_after_the_binary_and_numbers_tls_volumes():
    base = pod(
        [{"name": "kube-scheduler", "command": ["kube-scheduler", "--v=2"]}],
    )
    base["metadata"]["annotations"] = {"keep": "me"}
    ops, record = ms.present_ops(base, 0, "config", "/etc/c.yaml", False, ["/a", "/b", "/c"], True, {"x": 1})
    doc = ms.apply_ops_to_doc(base, ops)
    container = doc["spec"]["containers"][0]
    assert container["command"] == ["kube-scheduler", "--config=/etc/c.yaml", "--v=2"]
    names = ["poweraware-scheduler-config", "poweraware-extender-tls", "poweraware-extender-tls-2"]
    names.append("poweraware-extender-tls-3")
    assert [m["name"] for m in container["volumeMounts"]] == names
    assert [v["hostPath"]["type"] for v in doc["spec"]["volumes"]] == ["FileOrCreate"] + ["DirectoryOrCreate"] * 3
    assert container["volumeMounts"][1] == {"mountPath": "/a", "name": "poweraware-extender-tls", "readOnly": True}
    assert doc["spec"]["volumes"][1] == {
        "hostPath": {"path": "/a", "type": "DirectoryOrCreate"},
        "name": "poweraware-extender-tls",
    }
    assert doc["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert record == {
        "v": 1,
        "mode": "config",
        "file": "/etc/c.yaml",
        "flag": "--config=/etc/c.yaml",
        "flag_key": "command",
        "volumes": names,
        "created_keys": ["volumeMounts", "volumes"],
        "dns_policy_added": True,
        "dns_policy_previous": None,
        "x": 1,
    }
    assert doc["metadata"]["annotations"] == {"keep": "me", ms.ANNOTATION: ms.encode_record(record)}


@pytest.mark.parametrize(
    ("container", "spec", "created"),
    [
        ({"volumeMounts": []}, {}, ["volumes"]),
        ({}, {"volumes": []}, ["volumeMounts"]),
        ({"volumeMounts": []}, {"volumes": []}, []),
    ],
)
@pytest.mark.parametrize("annotations", [{}, None])
def test_present_ops_records_only_the_lists_it_creates(container, spec, created, annotations):
    base = pod([dict(container, name="kube-scheduler")], **spec)
    if annotations is not None:
        base["metadata"]["annotations"] = annotations
    else:  # created too, and the record's list is sorted: "annotations" comes first
        created = ["annotations", *created]
    _ops, record = ms.present_ops(base, 0, "config", "/etc/c.yaml", True, ["/a", "/b"], False, {})
    assert record == {
        "v": 1,
        "mode": "config",
        "file": "/etc/c.yaml",
        "volumes": ["poweraware-scheduler-config", "poweraware-extender-tls", "poweraware-extender-tls-2"],
        "created_keys": created,
    }


def test_present_ops_keeps_flags_that_start_with_a_dash_in_order():
    base = pod([{"name": "kube-scheduler", "command": ["--v=2"], "volumeMounts": [], "dnsPolicy": "x"}], volumes=[])
    base["spec"]["dnsPolicy"] = "ClusterFirstWithHostNet"
    ops, record = ms.present_ops(base, 0, "policy", "/p.json", False, [], True, {})
    doc = ms.apply_ops_to_doc(base, ops)
    assert doc["spec"]["containers"][0]["command"] == ["--policy-config-file=/p.json", "--v=2"]
    assert "dns_policy_added" not in record
    assert record["created_keys"] == ["annotations"]
    assert json.loads(doc["metadata"]["annotations"][ms.ANNOTATION]) == record


@pytest.mark.parametrize("where", ["mount", "volume"])
def test_present_ops_refuses_a_name_the_module_did_not_add(where):
    taken = {"name": "poweraware-extender-tls"}
    if where == "mount":
        base = pod([{"name": "kube-scheduler", "volumeMounts": [dict(taken, mountPath="/m")]}])
    else:  # a volume no container mounts
        base = pod([{"name": "kube-scheduler"}], volumes=[dict(taken, emptyDir={})])
    with pytest.raises(ms.ManifestError) as info:
        ms.present_ops(base, 0, "config", "/c", True, ["/t"], False, {})
    assert str(info.value) == (
        "the manifest already has a volume or mount named poweraware-extender-tls that this module did not add; "
        "rename it"
    )


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (None, "the manifest has no metadata mapping"),
        ({"annotations": ["a"]}, "metadata.annotations of the manifest is not a mapping"),
    ],
)
def test_present_ops_needs_mappings_for_the_annotation(metadata, message):
    base = pod([{"name": "kube-scheduler"}])
    base["metadata"] = metadata
    with pytest.raises(ms.ManifestError) as info:
        ms.present_ops(base, 0, "config", "/c", True, [], False, {})
    assert str(info.value) == message


def test_present_ops_reports_every_mount_problem_at_once():
    base = pod(
        [{"name": "kube-scheduler", "volumeMounts": [{"name": "e", "mountPath": "/etc"}]}],
        volumes=[{"name": "e", "emptyDir": {}}],
    )
    with pytest.raises(ms.ManifestError) as info:
        ms.present_ops(base, 0, "config", "/etc/c.yaml", True, ["/etc/pki"], False, {})
    assert [e.split(" is inside")[0] for e in info.value.errors] == [
        "the scheduler configuration /etc/c.yaml",
        "the extenders' TLS directory /etc/pki",
    ]


# --- strip_ops -----------------------------------------------------------------------------------------


def test_strip_ops_puts_back_the_previous_dns_policy_and_drops_created_keys():
    base = pod([{"name": "kube-scheduler", "command": ["kube-scheduler"]}], dnsPolicy="Default")
    ops, record = ms.present_ops(base, 0, "config", "/c.yaml", False, ["/t"], True, {})
    doc = ms.apply_ops_to_doc(base, ops)
    assert ms.apply_ops_to_doc(doc, ms.strip_ops(record, 0)) == base
    bare = pod([{"name": "kube-scheduler", "args": ["--v=2"]}])
    ops, record = ms.present_ops(bare, 0, "config", "/c.yaml", False, [], True, {})
    doc = ms.apply_ops_to_doc(bare, ops)
    assert doc["spec"]["containers"][0]["args"] == ["--config=/c.yaml", "--v=2"]
    assert ms.apply_ops_to_doc(doc, ms.strip_ops(record, 0)) == bare


# --- the configuration file ----------------------------------------------------------------------------


def test_an_entry_already_equal_in_the_users_file_is_left_alone():
    first = plan([LOOPBACK], user_files("v1"))
    files = {USER_CONFIG_PATH: first.file_after}
    # the same file without our record: the equal entry is the user's own, and the second is new
    again = plan([LOOPBACK, OTHER], files)
    assert again.record["replaced"] == {}
    added = yaml.safe_load(again.file_after)["extenders"]
    assert [e["urlPrefix"] for e in added][-2:] == [LOOPBACK["url_prefix"], OTHER["url_prefix"]]
    assert again.file_after.startswith(first.file_after)


def test_replacing_the_only_entry_keeps_the_users_comments():
    # the old entry goes with its key, and the key comes back with ours: a line edit, not a re-emission
    text = (
        "# keep me\napiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n"
        "- urlPrefix: http://127.0.0.1:9001/scheduler\n  filterVerb: old\n# tail comment\n"
    )
    result = plan([LOOPBACK], {USER_CONFIG_PATH: text})
    assert result.record["replaced"] == {
        LOOPBACK["url_prefix"]: {"urlPrefix": LOOPBACK["url_prefix"], "filterVerb": "old"}
    }
    assert result.file_after == (
        "# keep me\napiVersion: kubescheduler.config.k8s.io/v1\nextenders:\n- urlPrefix: "
        "http://127.0.0.1:9001/scheduler\n  filterVerb: filter\n  weight: 1\n  enableHTTPS: false\n"
        "  ignorable: false\nkind: KubeSchedulerConfiguration\n# tail comment\n"
    )


def test_config_strip_ops_puts_back_replaced_entries():
    doc = {"extenders": [{"urlPrefix": "u1"}, {"urlPrefix": "mine"}]}
    record = {"extenders": ["mine"], "replaced": {"mine": {"urlPrefix": "mine", "weight": 3}}}
    assert ms.apply_ops_to_doc(doc, ms.config_strip_ops(record)) == {
        "extenders": [{"urlPrefix": "u1"}, {"urlPrefix": "mine", "weight": 3}]
    }
    ours_only = {"extenders": [{"urlPrefix": "mine"}]}
    assert ms.apply_ops_to_doc(ours_only, ms.config_strip_ops({"extenders": ["mine"]})) == {}


def test_edit_file_keeps_the_text_when_nothing_changes_and_renders_policies_as_json():
    text = "# mine\nextenders: []\n"
    doc = {"extenders": []}
    assert ms.edit_file(text, doc, [], "config") == (text, doc, False)
    new_text, new_doc, reemitted = ms.edit_file(
        '{"kind": "Policy"}', {"kind": "Policy"}, [ms.KeySet([], "a", 1)], "policy"
    )
    assert reemitted is False  # JSON is rendered, not a fallback
    assert new_doc == {"kind": "Policy", "a": 1}
    assert new_text == '{\n  "kind": "Policy",\n  "a": 1\n}\n'
    # a Policy file in YAML block style would take a line edit: it is rendered as JSON all the same
    block = "kind: Policy\nextenders:\n- urlPrefix: a\n"
    doc = {"kind": "Policy", "extenders": [{"urlPrefix": "a"}]}
    new_text, new_doc, _reemitted = ms.edit_file(
        block, doc, [ms.SeqAppend([], "extenders", {"urlPrefix": "b"})], "policy"
    )
    assert json.loads(new_text) == new_doc == {"kind": "Policy", "extenders": [{"urlPrefix": "a"}, {"urlPrefix": "b"}]}
    assert new_text == ms.render_file(new_doc, "policy", False)
    # a flow-style YAML configuration: written out again, and said so
    flow = "{kind: KubeSchedulerConfiguration, extenders: []}\n"
    doc = {"kind": "KubeSchedulerConfiguration", "extenders": []}
    new_text, new_doc, reemitted = ms.edit_file(
        flow, doc, [ms.SeqAppend([], "extenders", {"urlPrefix": "b"})], "config"
    )
    assert reemitted is True and yaml.safe_load(new_text) == new_doc


def test_render_file_header_only_on_created_config_files():
    assert ms.render_file({"a": 1}, "config", True) == ms.CONFIG_HEADER + "a: 1\n"
    assert ms.render_file({"a": 1}, "config", False) == "a: 1\n"
    assert ms.render_file({"a": 1}, "policy", True) == '{\n  "a": 1\n}\n'


def test_written_by_module_looks_at_the_first_header_line():
    assert ms.written_by_module(ms.CONFIG_HEADER.split("\n", maxsplit=1)[0] + "\nanything")
    assert not ms.written_by_module("# Managed by someone else\n")
    assert not ms.written_by_module(None)


def test_a_manifest_that_is_not_yaml_is_named():
    normalized, _errors = sc.normalize_extenders([LOOPBACK])
    with pytest.raises(ms.ManifestError, match=r"^/x\.yaml is not valid YAML: "):
        ms.plan_present("a: [", "/x.yaml", {}.get, normalized, CONFIG_PATH, POLICY_PATH)


@pytest.mark.parametrize(
    ("path", "directory"),
    [
        ("/etc/kubernetes/manifests/k.yaml", "/etc/kubernetes/manifests"),
        ("/k.yaml", "/"),
        ("/a/b/", "/a"),
        ("/srv/X", "/srv"),
    ],
)
def test_the_static_pod_directory_is_the_manifests_own(path, directory):
    normalized, _errors = sc.normalize_extenders([LOOPBACK])
    inside = directory.rstrip("/") + "/c.yaml"
    with pytest.raises(ms.ManifestError) as info:
        ms.plan_present(PLAIN_MANIFEST, path, {}.get, normalized, inside, "/elsewhere/p.json")
    assert info.value.errors == [
        f"config_path {inside} is inside the static pod directory {directory}, where kubelet would try to run it "
        "as a pod; choose another directory (for example /etc/kubernetes)"
    ]


def test_trust_digests_are_the_first_16_hex_of_sha256_once_per_file_sorted():
    files = {"/z/ca.crt": "Z", "/a/ca.crt": "A\n"}
    extenders = [
        {"tls": {"ca_file": "/z/ca.crt"}},
        {"tls": None},
        {},
        {"tls": {"ca_file": "/missing"}},
        {"tls": {"ca_file": "/a/ca.crt"}},
        {"tls": {"ca_file": "/z/ca.crt"}},
    ]
    reads = []

    def read(path):
        reads.append(path)
        return files.get(path)

    digests = ms.trust_digests(extenders, read)
    assert list(digests.items()) == [
        ("/a/ca.crt", "sha256:" + hashlib.sha256(b"A\n").hexdigest()[:16]),
        ("/z/ca.crt", "sha256:" + hashlib.sha256(b"Z").hexdigest()[:16]),
    ]
    assert sorted(reads) == ["/a/ca.crt", "/missing", "/z/ca.crt"]


# --- plan_present --------------------------------------------------------------------------------------


def test_conversion_warnings_word_for_word():
    unsafe = user_files()
    unsafe[USER_CONFIG_PATH] += "healthzBindAddress: 0.0.0.0:10251\nfutureField: 1\n"
    result = plan([LOOPBACK], unsafe, manifest=MERGE_MANIFEST.replace("v1.29.0", "v1.26.0"))
    assert result.warnings == [
        "/etc/kubernetes/scheduler-config.yaml stays in kubescheduler.config.k8s.io/v1beta3, which Kubernetes 1.26 "
        "still serves but a later release removes: it cannot be converted to v1 safely (healthzBindAddress: v1 has "
        "no healthzBindAddress (kube-scheduler serves /healthz on --secure-port); futureField: not known to mean the "
        "same in v1 as in v1beta3); convert it by hand (https://kubernetes.io/docs/reference/scheduling/config/) "
        "before upgrading"
    ]
    result = plan([LOOPBACK], user_files("v1beta2"), manifest=MERGE_MANIFEST.replace("v1.29.0", "v1.23.0"))
    assert result.warnings == [
        "/etc/kubernetes/scheduler-config.yaml was converted from kubescheduler.config.k8s.io/v1beta2 (deprecated or "
        "older than the newest version Kubernetes 1.23 serves) to kubescheduler.config.k8s.io/v1beta3: only "
        "apiVersion changes, every other field means the same in both; from v1beta3 on the default score weights of "
        "InterPodAffinity and NodeAffinity are 2 and of TaintToleration 3 (the release applies them anyway once "
        "v1beta2 is removed)"
    ]
    result = plan([LOOPBACK], user_files(), manifest=MERGE_MANIFEST.replace("v1.29.0", "v1.26.0"))
    assert result.warnings == [
        "/etc/kubernetes/scheduler-config.yaml was converted from kubescheduler.config.k8s.io/v1beta3 (deprecated or "
        "older than the newest version Kubernetes 1.26 serves) to kubescheduler.config.k8s.io/v1: only apiVersion "
        "changes, every other field means the same in both"
    ]


def test_config_and_policy_paths_inside_the_manifest_directory_are_refused():
    normalized, _errors = sc.normalize_extenders([LOOPBACK])
    with pytest.raises(ms.ManifestError) as info:
        ms.plan_present(
            PLAIN_MANIFEST,
            MANIFEST_PATH,
            {}.get,
            normalized,
            "/etc/kubernetes/manifests/c.yaml",
            "/etc/kubernetes/manifests/p.json",
        )
    assert info.value.errors == [
        f"{what} /etc/kubernetes/manifests/{name} is inside the static pod directory /etc/kubernetes/manifests, "
        "where kubelet would try to run it as a pod; choose another directory (for example /etc/kubernetes)"
        for what, name in (("config_path", "c.yaml"), ("policy_path", "p.json"))
    ]


def test_a_relative_config_flag_is_refused():
    manifest = MERGE_MANIFEST.replace("--config=/etc/kubernetes/scheduler-config.yaml", "--config=sched.yaml")
    with pytest.raises(ms.ManifestError) as info:
        plan([LOOPBACK], {}, manifest=manifest)
    assert str(info.value) == "the manifest's --config flag names a relative path 'sched.yaml'; make it absolute"


def test_a_registration_the_manifest_lost_is_restored_with_a_warning():
    """kubeadm upgrade (or a run cut short) left our file that the manifest no longer loads."""
    first = plan([LOOPBACK], {}, manifest=PLAIN_MANIFEST)
    assert first.file_created and first.file_after.startswith(ms.CONFIG_HEADER)
    assert not first.restored
    result = plan([LOOPBACK, OTHER], {CONFIG_PATH: first.file_after}, manifest=PLAIN_MANIFEST)
    assert result.warnings == [
        "/etc/kubernetes/manifests/kube-scheduler.yaml does not load /etc/kubernetes/scheduler-extender.yaml, which "
        "this module wrote: the manifest was written anew since the extenders were registered (kubeadm upgrade "
        "apply/node and installer re-runs regenerate it from their templates) or an earlier run stopped between its "
        "two writes, and kube-scheduler has scheduled without the extenders since. They are registered again now. "
        "Run this role again after every kubeadm upgrade on each control-plane node (docs/scheduler-extender.md, "
        "'Upgrades')"
    ]
    assert result.restored
    assert result.file_created and result.record["file_created"] is True
    # the same extenders on kubeadm's regenerated manifest: the first registration's bytes again
    again = plan([LOOPBACK], {CONFIG_PATH: first.file_after}, manifest=PLAIN_MANIFEST)
    assert again.restored and again.manifest_after == first.manifest_after
    assert again.file_after == first.file_after and again.record == first.record
    assert [e["urlPrefix"] for e in yaml.safe_load(result.file_after)["extenders"]] == [
        LOOPBACK["url_prefix"],
        OTHER["url_prefix"],
    ]


def test_a_users_file_without_the_header_is_merged_not_taken_over():
    result = plan([LOOPBACK], {CONFIG_PATH: "# mine\n" + tas_extender_config("v1")}, manifest=PLAIN_MANIFEST)
    assert not result.warnings and not result.file_created
    assert result.file_after.startswith("# mine\n")


def test_an_invalid_merge_names_the_file_and_both_origins():
    files = {USER_CONFIG_PATH: tas_extender_config("v1").replace("    ignorable: true\n", "    bindVerb: bind\n")}
    binder = {"url_prefix": "http://127.0.0.1:9001/x", "filter_verb": "f", "bind_verb": "b"}
    with pytest.raises(ms.ManifestError) as info:
        plan([binder], files)
    message = str(info.value)
    assert message == (
        "kube-scheduler would refuse /etc/kubernetes/scheduler-config.yaml as it would be written (merged with the "
        "existing entries): " + "; ".join(info.value.errors)
    )
    assert "already in /etc/kubernetes/scheduler-config.yaml" in message
    assert "from the module's extenders" in message
    # every problem, joined with "; "
    files = {USER_CONFIG_PATH: files[USER_CONFIG_PATH].replace("weight: 1", "weight: 0")}
    with pytest.raises(ms.ManifestError) as info:
        plan([binder], files)
    assert len(info.value.errors) == 2
    assert str(info.value) == (
        "kube-scheduler would refuse /etc/kubernetes/scheduler-config.yaml as it would be written (merged with the "
        f"existing entries): {info.value.errors[0]}; {info.value.errors[1]}"
    )


@pytest.mark.parametrize(
    "text",
    ['{"kind": "Policy", "apiVersion": "v1", "extenders": []}\n', "kind: Policy\napiVersion: v1\nextenders: []\n"],
)
def test_a_users_policy_file_is_merged_and_written_as_json(text):
    files = {POLICY_PATH: text}
    result = plan([LOOPBACK], files, manifest=PLAIN_MANIFEST, kubernetes_version="1.22.3", legacy_policy=True)
    assert (result.mode, result.file_path, result.file_created) == ("policy", POLICY_PATH, False)
    assert result.file_after == (
        '{\n  "kind": "Policy",\n  "apiVersion": "v1",\n  "extenders": [\n    {\n'
        '      "urlPrefix": "http://127.0.0.1:9001/scheduler",\n      "filterVerb": "filter",\n      "weight": 1,\n'
        '      "enableHttps": false,\n      "ignorable": false\n    }\n  ]\n}\n'
    )


def test_a_new_configuration_names_a_kubeconfig_only_when_the_manifest_passes_one():
    without = PLAIN_MANIFEST.replace("    - --kubeconfig=/etc/kubernetes/scheduler.conf\n", "")
    assert without != PLAIN_MANIFEST
    for manifest, client in ((PLAIN_MANIFEST, {"kubeconfig": "/etc/kubernetes/scheduler.conf"}), (without, None)):
        doc = yaml.safe_load(plan([LOOPBACK], {}, manifest=manifest).file_after)
        assert doc.get("clientConnection") == client


def test_a_merged_file_that_already_holds_the_extenders_is_kept_byte_for_byte():
    first = plan([LOOPBACK], {USER_CONFIG_PATH: tas_extender_config("v1")})
    assert first.file_created is False and first.file_after != tas_extender_config("v1")
    again = plan([LOOPBACK], {USER_CONFIG_PATH: first.file_after}, manifest=first.manifest_after)
    assert again.file_after == first.file_after and not again.file_changed and not again.changed


# --- plan_absent and Plan ------------------------------------------------------------------------------


def test_absent_without_a_record_deletes_only_an_unloaded_file_with_our_header():
    leftover = ms.CONFIG_HEADER + "kind: KubeSchedulerConfiguration\n"
    files = {CONFIG_PATH: leftover}
    result = ms.plan_absent(PLAIN_MANIFEST, MANIFEST_PATH, files.get, config_path=CONFIG_PATH)
    assert (result.mode, result.file_path, result.file_before) == ("config", CONFIG_PATH, leftover)
    assert result.file_delete and result.file_after is None and result.changed and not result.manifest_changed
    assert result.record is None
    # not without config_path, not a file without the header, not the file the manifest loads
    assert not ms.plan_absent(PLAIN_MANIFEST, MANIFEST_PATH, files.get).changed
    mine = {CONFIG_PATH: "# mine\n"}
    assert not ms.plan_absent(PLAIN_MANIFEST, MANIFEST_PATH, mine.get, config_path=CONFIG_PATH).changed
    loads = MERGE_MANIFEST.replace("scheduler-config.yaml", "scheduler-extender.yaml")
    kept = ms.plan_absent(loads, MANIFEST_PATH, files.get, config_path=CONFIG_PATH)
    assert not kept.changed and kept.file_path is None and kept.mode is None


def test_absent_deletes_a_created_file_and_restores_a_merged_one():
    created = plan([LOOPBACK], {}, manifest=PLAIN_MANIFEST)
    files = {CONFIG_PATH: created.file_after}
    absent = ms.plan_absent(created.manifest_after, MANIFEST_PATH, files.get)
    assert absent.file_delete and absent.file_path == CONFIG_PATH and absent.mode == "config"
    assert absent.record == created.record and absent.manifest_after == PLAIN_MANIFEST
    # the file is gone already: nothing to delete, the manifest still goes back
    gone = ms.plan_absent(created.manifest_after, MANIFEST_PATH, {}.get)
    assert not gone.file_delete and gone.file_before is None and gone.manifest_after == PLAIN_MANIFEST

    original = "# comment\n" + tas_extender_config("v1")
    merged = plan([LOOPBACK], {USER_CONFIG_PATH: original})
    files = {USER_CONFIG_PATH: merged.file_after}
    calls = []

    def backup(path, doc):
        calls.append((path, doc))
        return "BACKUP"

    restored = ms.plan_absent(merged.manifest_after, MANIFEST_PATH, files.get, backup)
    assert not restored.file_delete and restored.file_after == "BACKUP"
    # the backup is asked for the document the file goes back to, to match it against its bytes
    assert calls == [(USER_CONFIG_PATH, yaml.safe_load(original))]
    assert restored.reemitted is False and absent.reemitted is False  # the module returns it as a bool
    without = ms.plan_absent(merged.manifest_after, MANIFEST_PATH, files.get, lambda path, doc: None)
    assert without.file_after == original
    assert ms.plan_absent(merged.manifest_after, MANIFEST_PATH, files.get).file_after == original


def test_absent_names_a_merged_file_that_is_no_longer_yaml():
    merged = plan([LOOPBACK], {USER_CONFIG_PATH: tas_extender_config("v1")})
    files = {USER_CONFIG_PATH: "kind: ["}
    with pytest.raises(ms.ManifestError, match=f"^{USER_CONFIG_PATH} is not valid YAML: "):
        ms.plan_absent(merged.manifest_after, MANIFEST_PATH, files.get)


def test_absent_removes_the_flag_from_command_when_the_record_does_not_say_where():
    # records of early releases have no flag_key: the flag was always added to `command`
    doc = yaml.safe_load(PLAIN_MANIFEST)
    container = doc["spec"]["containers"][0]
    container["command"].append("--config=/etc/kubernetes/x.yaml")
    container["args"] = ["--config=/etc/kubernetes/x.yaml"]
    record = {"v": 1, "mode": "config", "flag": "--config=/etc/kubernetes/x.yaml"}
    doc["metadata"]["annotations"] = {ms.ANNOTATION: ms.encode_record(record)}
    result = ms.plan_absent(yaml.safe_dump(doc), MANIFEST_PATH, {}.get)
    after = yaml.safe_load(result.manifest_after)["spec"]["containers"][0]
    assert after["command"] == yaml.safe_load(PLAIN_MANIFEST)["spec"]["containers"][0]["command"]
    assert after["args"] == ["--config=/etc/kubernetes/x.yaml"]


def test_plan_starts_empty_and_unchanged():
    # the module returns reemitted as manifest_reemitted, a bool
    assert vars(ms.Plan()) == {
        "manifest_before": None,
        "manifest_after": None,
        "file_path": None,
        "file_before": None,
        "file_after": None,
        "file_delete": False,
        "file_created": False,
        "mode": None,
        "api_version": None,
        "kubernetes_version": None,
        "warnings": [],
        "reemitted": False,
        "record": None,
        "annotation": "",
        "restored": False,
    }
    assert ms.plan_absent(PLAIN_MANIFEST, MANIFEST_PATH, {}.get).reemitted is False


def test_plan_change_properties():
    result = ms.Plan()
    assert not result.changed
    result.file_after = "x"
    assert result.file_changed and result.changed
    result.file_before = "x"
    assert not result.file_changed
    result.file_delete = True
    assert result.file_changed
    result.file_before = None
    assert not result.file_changed
    result.manifest_after = "m"
    assert result.manifest_changed and result.changed


def test_absent_reads_no_file_it_has_no_path_for():
    reads = []

    def read(path):
        reads.append(path)

    assert not ms.plan_absent(PLAIN_MANIFEST, MANIFEST_PATH, read).changed
    doc = yaml.safe_load(PLAIN_MANIFEST)
    doc["metadata"]["annotations"] = {ms.ANNOTATION: '{"v":1}'}
    result = ms.plan_absent(yaml.safe_dump(doc), MANIFEST_PATH, read)
    assert result.file_path is None and not result.file_delete and result.file_after is None
    assert yaml.safe_load(result.manifest_after)["metadata"]["annotations"] == {}
    assert reads == []


@pytest.mark.parametrize("function", ["present", "absent"])
def test_manifest_problems_name_the_manifest_path(function):
    def run(text):
        if function == "absent":
            return ms.plan_absent(text, MANIFEST_PATH, {}.get)
        return plan([LOOPBACK], {}, manifest=text)

    with pytest.raises(ms.ManifestError, match="^/etc/kubernetes/manifests/kube-scheduler.yaml is not valid YAML: "):
        run("kind: [")
    with pytest.raises(ms.ManifestError, match="^/etc/kubernetes/manifests/kube-scheduler.yaml is not a Pod manifest"):
        run("kind: Deployment\n")


def test_a_users_file_is_checked_as_the_mode_reads_it_and_problems_name_it():
    with pytest.raises(ms.ManifestError) as info:
        plan([LOOPBACK], {USER_CONFIG_PATH: "kind: Policy\napiVersion: v1\n"})
    assert info.value.errors == [
        f"{USER_CONFIG_PATH} has kind 'Policy', expected KubeSchedulerConfiguration",
        f"{USER_CONFIG_PATH} uses apiVersion 'v1', which kube-scheduler 1.29 does not serve (it serves "
        "kubescheduler.config.k8s.io/v1); migrate the file to kubescheduler.config.k8s.io/v1 first",
    ]
    assert str(info.value) == "; ".join(info.value.errors)
    with pytest.raises(ms.ManifestError, match=f"^{USER_CONFIG_PATH} is not valid YAML: "):
        plan([LOOPBACK], {USER_CONFIG_PATH: "kind: ["})


def test_a_leftover_that_is_no_longer_yaml_is_named():
    with pytest.raises(ms.ManifestError, match=f"^{CONFIG_PATH} is not valid YAML: "):
        plan([LOOPBACK], {CONFIG_PATH: ms.CONFIG_HEADER + "kind: ["}, manifest=PLAIN_MANIFEST)


def earlier_record(manifest=PLAIN_MANIFEST, path=CONFIG_PATH, files=None):
    """A run with a CA file, then its manifest as versions before the CA digests wrote the record:
    ``(extender, files, first plan, that manifest)``."""
    ca = "/etc/kubernetes/pki/tas/ca.crt"
    extender = dict(TAS_EXTENDER, tls=dict(TAS_EXTENDER["tls"], ca_file=ca))
    files = {ca: "CA one\n", **(files or {})}
    first = plan([extender], files, manifest=manifest)
    files[path] = first.file_after
    old = {k: v for k, v in first.record.items() if k != "trust"}
    earlier = first.manifest_after.replace(ms.encode_record(first.record), ms.encode_record(old))
    assert earlier != first.manifest_after
    return extender, files, first, earlier


def test_an_earlier_record_without_digests_is_kept_unless_told_the_ca_changed():
    extender, files, first, earlier = earlier_record()
    kept = plan([extender], files, manifest=earlier)  # trust_changed defaults to False
    assert kept.manifest_after == earlier and "trust" not in kept.record
    assert kept.warnings == [
        "the manifest's record was written by an earlier version and does not hold the digests of the CA files "
        "kube-scheduler trusts; they are recorded at the next change of the manifest (set trust_changed when "
        "a CA file has been replaced, so that kube-scheduler restarts and loads it)"
    ]
    told = plan([extender], files, manifest=earlier, trust_changed=True)
    assert told.record["trust"] == first.record["trust"] and told.manifest_after != earlier
    # a current record: nothing to change, nothing to warn about
    current = plan([extender], files, manifest=first.manifest_after)
    assert current.manifest_after == first.manifest_after and current.warnings == []


@pytest.mark.parametrize("manifest", ["plain", "merge"])
def test_an_earlier_record_gets_the_digests_with_the_next_change_of_the_manifest(manifest):
    # merge: the user's --config stays the only one
    extender, files, first, earlier = (
        earlier_record() if manifest == "plain" else earlier_record(MERGE_MANIFEST, USER_CONFIG_PATH, user_files("v1"))
    )
    moved = dict(extender, url_prefix="https://power.kube-system.svc:9443")
    result = plan([moved], files, manifest=earlier)
    assert result.warnings == []
    assert result.record == dict(first.record, extenders=["https://power.kube-system.svc:9443"])
    container = yaml.safe_load(result.manifest_after)["spec"]
    assert container["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert len([flag for flag in container["containers"][0]["command"] if flag.startswith("--config=")]) == 1


def test_plan_keeps_the_warnings_of_both_version_steps_and_says_what_it_chose():
    result = plan([LOOPBACK], {}, manifest=PLAIN_MANIFEST, kubernetes_version="1.90.1")
    assert result.reemitted is False  # the module returns it as manifest_reemitted, a bool
    assert len(result.warnings) == 2
    assert result.warnings[0] == (
        "kubernetes_version 1.90.1 differs from the manifest image tag (registry.k8s.io/kube-scheduler:v1.29.0); "
        "using 1.90.1"
    )
    assert result.warnings[1].startswith("Kubernetes 1.90 is newer than")
    assert (result.kubernetes_version, result.mode, result.api_version) == (
        "1.90.1",
        "config",
        "kubescheduler.config.k8s.io/v1",
    )
    assert (result.file_path, result.file_before, result.manifest_before) == (CONFIG_PATH, None, PLAIN_MANIFEST)
    assert result.annotation == yaml.safe_load(result.manifest_after)["metadata"]["annotations"][ms.ANNOTATION]


def test_absent_renders_a_policy_file_as_json_like_present_does():
    doc = yaml.safe_load(PLAIN_MANIFEST)
    record = {"v": 1, "mode": "policy", "file": POLICY_PATH, "extenders": ["http://b"]}
    doc["metadata"]["annotations"] = {ms.ANNOTATION: ms.encode_record(record)}
    block = "kind: Policy\napiVersion: v1\nextenders:\n- urlPrefix: http://a\n- urlPrefix: http://b\n"
    result = ms.plan_absent(yaml.safe_dump(doc), MANIFEST_PATH, {POLICY_PATH: block}.get)
    assert result.mode == "policy"
    assert result.file_after == '{\n  "kind": "Policy",\n  "apiVersion": "v1",\n  "extenders": [\n    {\n      ' + (
        '"urlPrefix": "http://a"\n    }\n  ]\n}\n'
    )


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - edit_file 14, 18, render_file(new_doc, "policy", True/None): a Policy file has no header, `created` is ignored.
# - written_by_module 6, 9: CONFIG_HEADER.split("\n")[0] and split("\n", 2)[0] are the same first line as
#   split("\n", 1)[0].
# - plan_present 269, 273, 274, "new file" in the refusal of a written file: unreachable, a new file holds only
#   the module's extenders, which normalize_extenders has already checked by the same rules.
# - inspect 22, copy.copy instead of copy.deepcopy of a manifest without a record: nothing changes `base` in
#   place (present_ops and _apply_doc build new objects), so the shallow copy is never written through.
# - plan_present 28, result.warnings = warnings instead of +=: Plan starts with an empty list and
#   resolve_version returns a new one.
# - plan_present 183, check_existing_document(..., None, ...) for `policy`: False and None read the same.
# - plan_present 320, 321 ("trust" in record misspelt) and 345, 346 ("trust" not in record_extra misspelt):
#   a current record then first gets ops without the digests, whose manifest differs from the one on disk,
#   and present_ops runs again with them: the same result, one computation more.
# Removed with the code they mutated, as equivalent: strip_ops' unread manifest argument (inspect 15,
# plan_absent 104, plan_present 403), _covering_mount's special case for "/" (13, 16), mount_check's
# condition around one join (49), present_ops' copies of container and spec (187-194), check_pod's
# len(named) > 1 after the single one returned (39), and _cstates' .get(cpu, []) default.
