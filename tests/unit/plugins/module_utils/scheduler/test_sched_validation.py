"""Issue 11, items 7-9 and 12 (pure logic): refuse what kube-scheduler refuses, convert deprecated
config versions, check the volumes behind existing mounts, CRLF files, duplicate container names."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils import k8s_names
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import CONFIG_PATH, GOLDEN, MANIFEST_PATH, POLICY_PATH, TAS_EXTENDER, TAS_URL, USER_CONFIG_PATH  # noqa: E402
from poweraware_testing import tas_extender_config  # noqa: E402

MERGE_MANIFEST = (GOLDEN / "merge/kubeadm-config-1.29.yaml").read_text()
LOOPBACK = {"url_prefix": "http://127.0.0.1:9001/scheduler", "filter_verb": "filter"}


def plan(extenders, files=None, manifest=MERGE_MANIFEST, version=None, **kw):
    normalized, errors = sc.normalize_extenders(extenders)
    assert not errors
    return ms.plan_present(
        manifest,
        MANIFEST_PATH,
        (files or {}).get,
        normalized,
        CONFIG_PATH,
        POLICY_PATH,
        kubernetes_version=version,
        **kw,
    )


def manifest_for(minor: int) -> str:
    return MERGE_MANIFEST.replace("kube-scheduler:v1.29.0", f"kube-scheduler:v1.{minor}.0")


def user_config(extenders: str, version: str = "v1") -> dict:
    head = f"apiVersion: kubescheduler.config.k8s.io/{version}\nkind: KubeSchedulerConfiguration\n"
    return {USER_CONFIG_PATH: head + "extenders:\n" + extenders}


# --- item 7: kube-scheduler's validateExtenders, ported ----------------------------------------------

# The cases of kubernetes' own validation_test.go (extender-negative-weight, -duplicate-managed-resources,
# -duplicate-bind) plus what the rules do NOT refuse, so the port is neither laxer nor stricter.
UPSTREAM = [
    ([{"urlPrefix": "u1", "prioritizeVerb": "p", "weight": -2}], ["must have a positive weight"]),
    ([{"urlPrefix": "u1", "prioritizeVerb": "p", "weight": 0}], ["must have a positive weight"]),
    ([{"urlPrefix": "u1", "prioritizeVerb": "p"}], ["must have a positive weight"]),  # weight omitted = 0
    ([{"urlPrefix": "u1", "filterVerb": "f", "weight": 0}], []),  # weight only matters with prioritizeVerb
    ([{"urlPrefix": "u1", "preemptVerb": "p"}], []),
    ([{"filterVerb": "f"}], []),  # kube-scheduler does not require urlPrefix
    ([{"urlPrefix": "u1", "prioritizeVerb": "p", "weight": 10**12}], []),  # no upper bound but int64
    (
        [{"urlPrefix": "u1", "bindVerb": "b"}, {"urlPrefix": "u2", "bindVerb": "b"}],
        [
            "found 2 extenders implementing bind (extenders[0] (urlPrefix u1); extenders[1] (urlPrefix u2)): "
            "kube-scheduler allows only one extender with a bindVerb"
        ],
    ),
    (
        [
            {"urlPrefix": "u1", "managedResources": [{"name": "foo.com/bar"}]},
            {"urlPrefix": "u2", "bindVerb": "b", "managedResources": [{"name": "foo.com/bar"}]},
        ],
        ["duplicate extender managed resource name"],
    ),
    (
        [{"urlPrefix": "u1", "managedResources": [{"name": "foo.com/bar"}, {"name": "foo.com/bar"}]}],
        ["duplicate extender managed resource name"],
    ),
    ([{"urlPrefix": "u1", "managedResources": [{"name": "kubernetes.io/foo"}]}], ["not an extended resource"]),
]


@pytest.mark.parametrize(("extenders", "messages"), UPSTREAM)
def test_validate_extenders_matches_upstream_rules(extenders, messages):
    errors = sc.validate_extenders(extenders)
    assert len(errors) == len(messages) and all(m in e for m, e in zip(messages, errors, strict=True)), errors


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("telemetry/scheduling", True),
        ("foo.com/bar", True),
        ("example.com/GPU_1", True),
        ("cpu", False),  # native (no domain)
        ("kubernetes.io/foo", False),
        ("node.kubernetes.io/foo", False),
        ("requests.foo/bar", False),
        ("a/b/c", False),
        ("Foo.com/bar", False),  # the prefix is a lower-case DNS subdomain
        ("foo.com/-bar", False),
        ("foo.com/" + "x" * 64, False),
        ("/bar", False),
        ("a" * 245 + "/x", False),  # fine alone, too long once prefixed with 'requests.'
    ],
)
def test_extended_resource_names(name, valid):
    assert (k8s_names.extended_resource_name_problems(name) == []) is valid


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"urlPrefix": "u", "filterverb": "f"}, "filterverb .*unknown field.*rename it to filterVerb"),
        ({"urlPrefix": "u", "enableHttps": True}, "enableHttps .*unknown field.*rename it to enableHTTPS"),
        ({"urlPrefix": "u", "colour": "red"}, "colour .*unknown field.*remove it"),
        ({"urlPrefix": "u", "httpTimeout": 5000000000}, "httpTimeout.*must be a Go duration string"),
        ({"urlPrefix": "u", "httpTimeout": "5 s"}, "httpTimeout.*is not a Go duration"),
        ({"urlPrefix": "u", "weight": "1"}, "weight.*must be an integer"),
        ({"urlPrefix": "u", "weight": 2**63}, "weight.*does not fit in a 64-bit integer"),
        ({"urlPrefix": "u", "ignorable": "yes"}, "ignorable.*must be true or false"),
        ({"urlPrefix": "u", "tlsConfig": {"certfile": "/c"}}, r"tlsConfig\.certfile .*unknown field.*certFile"),
        ({"urlPrefix": "u", "managedResources": [{"name": "a.b/c", "ignored": True}]}, "ignored .*unknown field"),
    ],
)
def test_strict_decoding_refusals(entry, message):
    errors = sc.validate_extenders([entry])
    assert any(re.search(message, e) for e in errors), errors
    assert sc.validate_extenders([entry], strict=False) == []  # the legacy Policy decoder is not strict


def test_go_duration_forms_accepted():
    for value in ("5s", "0", "1m30s", "750ms", "-1s", "1.5h"):
        assert sc.validate_extenders([{"urlPrefix": "u", "httpTimeout": value}]) == [], value


def test_our_two_extenders_managing_one_resource_refused():
    a = dict(LOOPBACK, managed_resources=[{"name": "telemetry/scheduling"}])
    b = dict(a, url_prefix="http://127.0.0.1:9002/scheduler")
    with pytest.raises(ms.ManifestError) as info:
        plan([a, b], manifest=(GOLDEN / "input/kubeadm-1.29.yaml").read_text())
    message = str(info.value)
    assert "kube-scheduler would refuse /etc/kubernetes/scheduler-extender.yaml" in message
    assert (
        "extenders[1].managedResources[0].name (urlPrefix http://127.0.0.1:9002/scheduler, from the module" in message
    )
    assert "'telemetry/scheduling' is already managed by extenders[0].managedResources[0]" in message
    assert "fix: keep the resource in one extender only" in message


def test_merged_with_bmra_tas_extender_refused_naming_both():
    """Item 6/7: BMRA's TAS extender already manages telemetry/scheduling at another urlPrefix."""
    files = {USER_CONFIG_PATH: tas_extender_config("v1")}
    with pytest.raises(ms.ManifestError) as info:
        plan([TAS_EXTENDER], files)
    assert info.value.errors == [
        f"extenders[1].managedResources[0].name (urlPrefix {TAS_URL}, from the module's extenders): "
        "'telemetry/scheduling' is already managed by extenders[0].managedResources[0] (urlPrefix "
        "https://tas-service.telemetry-aware-scheduling.svc:9001, already in /etc/kubernetes/scheduler-config.yaml): "
        "kube-scheduler refuses a duplicate extender managed resource name; fix: keep the resource in one extender "
        "only (if the other is an existing TAS extender, remove it from the scheduler configuration first, or do "
        "not register a second one)"
    ]


def test_second_binder_and_bad_weight_in_users_file_all_reported():
    files = user_config(
        "  - urlPrefix: http://127.0.0.1:8888/bind\n    bindVerb: bind\n"
        "  - urlPrefix: http://127.0.0.1:8889/score\n    prioritizeVerb: prioritize\n    weight: 0\n"
        "  - urlPrefix: http://127.0.0.1:8890/typo\n    filterverb: filter\n"
    )
    with pytest.raises(ms.ManifestError) as info:
        plan([dict(LOOPBACK, bind_verb="bind")], files)
    errors = info.value.errors
    assert len(errors) == 3, errors
    assert errors[0].startswith("extenders[1].weight (urlPrefix http://127.0.0.1:8889/score, already in")
    assert "must have a positive weight applied to it; fix: set weight to 1 or more" in errors[0]
    assert "extenders[2].filterverb" in errors[1] and "rename it to filterVerb" in errors[1]
    assert errors[2].startswith("extenders: found 2 extenders implementing bind (extenders[0] (urlPrefix")
    assert "extenders[3] (urlPrefix http://127.0.0.1:9001/scheduler, from the module's extenders)" in errors[2]


def test_replaced_entry_is_not_counted_twice():
    """Our urlPrefix already in the file (an older version of our entry) is replaced, not duplicated."""
    files = {USER_CONFIG_PATH: tas_extender_config("v1").replace(".svc:9001", ".svc.cluster.local:9001")}
    result = plan([TAS_EXTENDER], files)
    assert [e["urlPrefix"] for e in yaml.safe_load(result.file_after)["extenders"]] == [TAS_URL]


def test_valid_merge_still_passes():
    files = user_config("  - urlPrefix: http://127.0.0.1:8888/gpu\n    filterVerb: filter\n")
    result = plan([TAS_EXTENDER], files)
    assert result.changed and not result.warnings


# --- item 8: deprecated-but-served versions are converted, or kept with the reason ---------------------


@pytest.mark.parametrize(
    ("source", "minor", "target"),
    [
        ("v1beta3", 25, "v1"),
        ("v1beta3", 28, "v1"),
        ("v1beta2", 27, "v1"),
        ("v1beta2", 23, "v1beta3"),
        ("v1beta1", 22, "v1beta2"),
    ],
)
def test_served_older_version_is_converted(source, minor, target):
    original = tas_extender_config(source).replace("telemetry/scheduling", "example.com/gpu")
    files = {USER_CONFIG_PATH: original}
    result = plan([TAS_EXTENDER], files, manifest=manifest_for(minor))
    assert result.api_version == f"kubescheduler.config.k8s.io/{target}"
    # only the apiVersion line changes; our entry is appended; every other byte stays
    expected_head = original.replace(f"config.k8s.io/{source}", f"config.k8s.io/{target}")
    assert result.file_after.startswith(expected_head)
    assert yaml.safe_load(result.file_after)["extenders"][1]["urlPrefix"] == TAS_URL
    (warning,) = result.warnings
    assert f"converted from kubescheduler.config.k8s.io/{source} " in warning
    assert ("default score weights" in warning) is (source in ("v1beta1", "v1beta2"))
    # a second run is a no-op, and absent leaves the converted file without our entry
    files[USER_CONFIG_PATH] = result.file_after
    again = plan([TAS_EXTENDER], files, manifest=result.manifest_after)
    assert not again.changed and not again.warnings
    absent = ms.plan_absent(result.manifest_after, MANIFEST_PATH, files.get)
    assert absent.file_after == expected_head


def test_newest_version_is_not_touched():
    files = {USER_CONFIG_PATH: tas_extender_config("v1beta3").replace("telemetry/scheduling", "a.b/c")}
    result = plan([TAS_EXTENDER], files, manifest=manifest_for(24))
    assert result.api_version.endswith("/v1beta3") and not result.warnings


@pytest.mark.parametrize(
    ("extra", "blocker"),
    [
        (
            "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n"
            "      disabled:\n      - name: ImageLocality\n",
            "profiles[0].plugins: plugin names",
        ),
        ("profiles:\n- schedulerName: x\n  pluginConfig:\n  - name: NodeResourcesFit\n", "profiles[0].pluginConfig"),
        ("healthzBindAddress: 0.0.0.0:10251\n", "healthzBindAddress: v1 has no healthzBindAddress"),
        ("leaderElection:\n  resourceLock: endpointsleases\n", "leaderElection.resourceLock: 'endpointsleases'"),
        ("futureField: 1\n", "futureField: not known to mean the same in v1 as in v1beta3"),
    ],
)
def test_unsafe_conversion_keeps_file_and_warns(extra, blocker):
    original = tas_extender_config("v1beta3").replace("telemetry/scheduling", "a.b/c") + extra
    result = plan([LOOPBACK], {USER_CONFIG_PATH: original}, manifest=manifest_for(26))
    assert result.api_version.endswith("/v1beta3")
    assert result.file_after.startswith(original.split("extenders:")[0])  # apiVersion kept
    merged = yaml.safe_load(result.file_after)
    merged["extenders"].pop()
    assert merged == yaml.safe_load(original)
    (warning,) = result.warnings
    assert "stays in kubescheduler.config.k8s.io/v1beta3" in warning and "cannot be converted to v1 safely" in warning
    assert blocker in warning and "convert it by hand" in warning


def test_golden_v1beta1_merge_with_removed_plugins_is_kept():
    manifest = (GOLDEN / "merge/kubeadm-config-1.22.yaml").read_text()
    files = {USER_CONFIG_PATH: (GOLDEN / "merge/scheduler-config-v1beta1.yaml").read_text()}
    result = plan([LOOPBACK], files, manifest=manifest)
    assert result.api_version.endswith("/v1beta1")
    assert "profiles[0].plugins" in result.warnings[0]


def test_conversion_table_is_consistent_with_served_table():
    for minor in range(19, 37):
        newest = sv.served_versions(minor)[0]
        for version in sv.served_versions(minor):
            target = sv.conversion_target(version, minor)
            assert target == (None if version == newest else newest)
            assert target is None or sv.VERSION_ORDER.index(target) > sv.VERSION_ORDER.index(version)


# --- item 9: a mount that covers the path must be a hostPath of that path ------------------------------


def _with_volume(volume_yaml: str) -> str:
    return MERGE_MANIFEST.replace(
        "  - hostPath:\n      path: /etc/kubernetes/scheduler-config.yaml\n      type: File\n"
        "    name: scheduler-config\n",
        volume_yaml,
    )


@pytest.mark.parametrize(
    ("volume", "backing"),
    [
        ("  - emptyDir: {}\n    name: scheduler-config\n", "an emptyDir volume, not a hostPath"),
        (
            "  - hostPath:\n      path: /srv/other/scheduler-config.yaml\n    name: scheduler-config\n",
            "hostPath /srv/other/scheduler-config.yaml, so the scheduler would read node path "
            "/srv/other/scheduler-config.yaml",
        ),
        ("  - configMap:\n      name: sched\n    name: scheduler-config\n", "a configMap volume"),
        ("", "no volume of that name"),
    ],
)
def test_config_mount_backed_by_something_else_is_refused(volume, backing):
    files = user_config("  - urlPrefix: http://127.0.0.1:8888/gpu\n    filterVerb: filter\n")
    with pytest.raises(ms.ManifestError) as info:
        plan([LOOPBACK], files, manifest=_with_volume(volume))
    message = str(info.value)
    assert message.startswith(
        "the scheduler configuration /etc/kubernetes/scheduler-config.yaml is inside the existing mount "
        "/etc/kubernetes/scheduler-config.yaml (volumeMounts[1], volume scheduler-config: "
    )
    assert backing in message
    assert "fix: make volume scheduler-config a hostPath of /etc/kubernetes/scheduler-config.yaml" in message


def test_directory_mount_with_matching_hostpath_is_accepted():
    manifest = MERGE_MANIFEST.replace(
        "    - mountPath: /etc/kubernetes/scheduler-config.yaml\n", "    - mountPath: /etc/kubernetes\n"
    ).replace("      path: /etc/kubernetes/scheduler-config.yaml\n      type: File\n", "      path: /etc/kubernetes\n")
    files = user_config("  - urlPrefix: http://127.0.0.1:8888/gpu\n    filterVerb: filter\n")
    result = plan([TAS_EXTENDER], files, manifest=manifest)
    # /etc/kubernetes (a hostPath of itself) covers the config and the TLS directory: no new volume
    assert result.record["volumes"] == []


def test_tls_directory_under_an_emptydir_is_refused():
    manifest = MERGE_MANIFEST.replace(
        "    - mountPath: /etc/kubernetes/scheduler.conf\n",
        "    - mountPath: /etc/kubernetes/pki\n      name: scratch\n    - mountPath: /etc/kubernetes/scheduler.conf\n",
    ).replace("  volumes:\n", "  volumes:\n  - emptyDir: {}\n    name: scratch\n")
    files = user_config("  - urlPrefix: http://127.0.0.1:8888/gpu\n    filterVerb: filter\n")
    with pytest.raises(
        ms.ManifestError,
        match=r"the extenders' TLS directory /etc/kubernetes/pki/tas is inside the "
        r"existing mount /etc/kubernetes/pki \(volumeMounts\[0\], volume scratch: an emptyDir volume",
    ):
        plan([TAS_EXTENDER], files, manifest=manifest)


def test_mount_with_subpath_is_resolved():
    manifest = MERGE_MANIFEST.replace(
        "      name: scheduler-config\n      readOnly: true\n",
        "      name: scheduler-config\n      readOnly: true\n      subPath: scheduler-config.yaml\n",
    ).replace("      path: /etc/kubernetes/scheduler-config.yaml\n      type: File\n", "      path: /etc/kubernetes\n")
    files = user_config("  - urlPrefix: http://127.0.0.1:8888/gpu\n    filterVerb: filter\n")
    assert plan([LOOPBACK], files, manifest=manifest).changed  # hostPath /etc/kubernetes + subPath = the file


# --- item 12 (pure parts): two kube-scheduler containers, CRLF -----------------------------------------


def test_two_containers_named_kube_scheduler():
    manifest = MERGE_MANIFEST.replace(
        "  hostNetwork: true\n", "  - name: kube-scheduler\n    image: x:v1.29.0\n  hostNetwork: true\n"
    )
    with pytest.raises(
        ms.ManifestError,
        match=r"has 2 containers named kube-scheduler \(spec.containers\[0\], "
        r"spec.containers\[1\]\); container names must be unique in a pod",
    ):
        plan([LOOPBACK], {}, manifest=manifest)


@pytest.mark.parametrize("source", ["input/kubeadm-1.29.yaml", "merge/kubeadm-config-1.29.yaml"])
def test_crlf_files_keep_crlf(source):
    manifest = (GOLDEN / source).read_text().replace("\n", "\r\n")
    files = {USER_CONFIG_PATH: (GOLDEN / "merge/scheduler-config-v1.yaml").read_text().replace("\n", "\r\n")}
    result = plan([TAS_EXTENDER], files, manifest=manifest)
    assert not result.reemitted
    for text in (result.manifest_after, result.file_after if "merge" in source else ""):
        assert text.count("\n") == text.count("\r\n"), "mixed line endings"
    lf = plan(
        [TAS_EXTENDER], {k: v.replace("\r\n", "\n") for k, v in files.items()}, manifest=manifest.replace("\r\n", "\n")
    )
    assert result.manifest_after == lf.manifest_after.replace("\n", "\r\n")  # the same edit, CRLF
    files[result.file_path] = result.file_after
    absent = ms.plan_absent(result.manifest_after, MANIFEST_PATH, files.get)
    assert absent.manifest_after == manifest  # byte for byte
