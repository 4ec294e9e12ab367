"""Version parsing from image references and the served-API-version table."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import k8s_version as kv
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("registry.k8s.io/kube-scheduler:v1.29.3", (1, 29, 3)),
        ("k8s.gcr.io/kube-scheduler:v1.19.16", (1, 19, 16)),
        ("my.reg:5000/k8s/kube-scheduler:v1.28.0-rke2r1", (1, 28, 0)),
        ("my.reg:5000/rancher/hardened-kubernetes:v1.28.10-rke2r1-build20240514", (1, 28, 10)),
        (f"registry.example.com:5000/k8s/kube-scheduler:v1.30.2@{DIGEST}", (1, 30, 2)),
        ("localhost:5000/kube-scheduler:1.31.0", (1, 31, 0)),
        ("kube-scheduler:v1.32.1-k3s1", (1, 32, 1)),
        ("[::1]:5000/a/b/c/kube-scheduler:v1.33.0-alpha.1", (1, 33, 0)),
        ("docker.io/library/kube-scheduler:v1.22", (1, 22, None)),
    ],
)
def test_version_from_image(image, version):
    assert kv.version_from_image(image) == version


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (f"registry.k8s.io/kube-scheduler@{DIGEST}", "only a digest"),
        ("my.reg:5000/kube-scheduler", "no tag"),
        ("registry.k8s.io/kube-scheduler:latest", "is not a Kubernetes version"),
        ("registry.k8s.io/kube-scheduler:v1", "is not a Kubernetes version"),
        ("registry.k8s.io/kube-scheduler@sha256:xyz", "malformed digest"),
        ("", "not a container image reference"),
        ("with space:v1.2.3", "not a container image reference"),
        ("kube-scheduler:v1.32.1+k3s1", "malformed tag"),  # "+" is not allowed in image tags
    ],
)
def test_version_from_image_refuses(image, message):
    with pytest.raises(kv.VersionError, match=message):
        kv.version_from_image(image)


@pytest.mark.parametrize("text", ["1.29", "v1.29.3", "1.28.0-rke2r1", " v1.36.3 "])
def test_parse_version(text):
    assert kv.parse_version(text)[:2] in {(1, 29), (1, 28), (1, 36)}


@pytest.mark.parametrize("text", ["", "garbage", "1", "v1.x", "1.29.3.4", "01.29", None, 129])
def test_parse_version_refuses_garbage(text):
    with pytest.raises(kv.VersionError, match=r"Kubernetes version"):
        kv.parse_version(text)


# The project design notes (section 2), checked against the kube-scheduler config API registrations per release.
DESIGN_TABLE = {
    18: {"v1alpha1", "v1alpha2"},
    19: {"v1beta1"},
    20: {"v1beta1"},
    21: {"v1beta1"},
    22: {"v1beta1", "v1beta2"},
    23: {"v1beta2", "v1beta3"},
    24: {"v1beta2", "v1beta3"},
    25: {"v1", "v1beta2", "v1beta3"},
    26: {"v1", "v1beta2", "v1beta3"},
    27: {"v1", "v1beta2", "v1beta3"},
    28: {"v1", "v1beta3"},
    **{m: {"v1"} for m in range(29, 37)},
}
ORDER = ["v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1beta3", "v1"]


@pytest.mark.parametrize("minor", sorted(DESIGN_TABLE))
def test_served_table_matches_design(minor):
    assert set(sv.served_versions(minor)) == DESIGN_TABLE[minor]
    newest = max(DESIGN_TABLE[minor], key=ORDER.index)
    assert sv.served_versions(minor)[0] == newest


@pytest.mark.parametrize("minor", range(19, 37))
def test_select_newest(minor):
    api_version, warnings = sv.select_api_version((1, minor, 0))
    assert api_version == "kubescheduler.config.k8s.io/" + max(DESIGN_TABLE[minor], key=ORDER.index)
    assert warnings == []


@pytest.mark.parametrize("minor", [17, 10, 0])
def test_old_releases_refused(minor):
    with pytest.raises(sv.ConfigError, match=rf"Kubernetes 1\.{minor} is not supported.*oldest release .* is 1\.18"):
        sv.select_api_version((1, minor, 0))


@pytest.mark.parametrize("legacy", [False, True])
def test_1_18_gets_the_policy_file(legacy):
    """1.18 serves v1alpha1/v1alpha2 only: the Policy file is the way, asked for or not."""
    api_version, warnings = sv.select_api_version((1, 18, 20), legacy_policy=legacy)
    assert (api_version, warnings) == ("v1", [])
    assert sv.is_policy(api_version) and not sv.is_policy("kubescheduler.config.k8s.io/v1")


def test_major_other_than_1_refused():
    with pytest.raises(sv.ConfigError, match=r"Kubernetes 2\.0 is not a release"):
        sv.select_api_version((2, 0, 0))


def test_newer_than_known_assumes_v1_with_warning():
    api_version, warnings = sv.select_api_version((1, 40, 0))
    assert api_version == "kubescheduler.config.k8s.io/v1"
    assert "newer than the newest release" in warnings[0]


@pytest.mark.parametrize("minor", [19, 20, 21, 22])
def test_legacy_policy_allowed_until_1_22(minor):
    assert sv.select_api_version((1, minor, 0), legacy_policy=True) == ("v1", [])


def test_duration_parsing():
    assert sc.duration_to_ns("5s") == 5 * 10**9
    assert sc.duration_to_ns("1m30s") == 90 * 10**9
    assert sc.duration_to_ns("750ms") == 750 * 10**6
    assert sc.duration_to_ns("1.5h") == 5400 * 10**9
    for bad in ("5", "s", "5 s", "-5s", "5sec", ""):
        with pytest.raises(ValueError):
            sc.duration_to_ns(bad)


def test_unquoted_yaml_float_gets_a_hint():
    # kubernetes_version: 1.30 (unquoted) reaches the module as "1.3"
    with pytest.raises(sv.ConfigError, match=r"Kubernetes 1\.3 is not supported \(an unquoted 1\.30 in YAML"):
        sv.select_api_version((1, 3, None))


# kube-scheduler 1.19 - 1.22 ignores kubeadm's --port=0 once --config is given and opens its
# plain-HTTP port on 0.0.0.0:10251 from the file's defaults (kubernetes/kubernetes#109900): a file
# the module creates for such a manifest binds that port to loopback. The real schedulers' view of
# the same files is tests/integration/test_scheduler_config_versions.py.
@pytest.mark.parametrize(
    ("minor", "port_flag", "bound"),
    [
        (19, "--port=0", True),
        (21, "--port=0", True),
        (22, "--port=0", True),
        (21, None, False),  # the user kept the plain-HTTP port open: kube-scheduler's default stays
        (21, "--port=10251", False),
        (23, "--port=0", False),  # 1.23 serves nothing over plain HTTP and refuses any port but 0 there
        (36, None, False),
    ],
)
def test_created_config_binds_the_plain_http_port_to_loopback_where_the_manifest_turned_it_off(minor, port_flag, bound):
    import re

    import kubeadm_manifests
    import yaml
    from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms
    from cases import CONFIG_PATH, MANIFEST_PATH, POLICY_PATH, TAS_EXTENDER, typed

    # kubeadm's own manifest of that release, with the port flag it passes replaced by the case's
    kubeconfig = "    - --kubeconfig=/etc/kubernetes/scheduler.conf\n"
    manifest = re.sub(r"    - --port=\S+\n", "", kubeadm_manifests.kubeadm_scheduler_manifest(minor))
    assert kubeconfig in manifest
    manifest = manifest.replace(kubeconfig, kubeconfig + (f"    - {port_flag}\n" if port_flag else ""))
    extenders, errors = typed([TAS_EXTENDER])
    assert not errors
    result = ms.plan_present(manifest, MANIFEST_PATH, {}.get, extenders, CONFIG_PATH, POLICY_PATH)
    written = yaml.safe_load(result.file_after)
    held = {field: written.get(field) for field in ("healthzBindAddress", "metricsBindAddress")}
    expected = sc.LOOPBACK_INSECURE_ADDRESS if bound else None
    assert held == {"healthzBindAddress": expected, "metricsBindAddress": expected}, result.file_after


NO_VERSION = "so the Kubernetes version cannot be read from it; set kubernetes_version explicitly"


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (
            f"registry.k8s.io/kube-scheduler@{DIGEST}",
            f"image 'registry.k8s.io/kube-scheduler@{DIGEST}' has only a digest, {NO_VERSION}",
        ),
        ("kube-scheduler", f"image 'kube-scheduler' has no tag, {NO_VERSION}"),
        # a ':' before the last '/' is no tag separator, wherever it is
        ("reg.io/team:x/kube-scheduler", f"image 'reg.io/team:x/kube-scheduler' has no tag, {NO_VERSION}"),
        (
            "registry.k8s.io/kube-scheduler:latest",
            "the tag 'latest' of image 'registry.k8s.io/kube-scheduler:latest' is not a Kubernetes version; "
            "set kubernetes_version explicitly",
        ),
        (":v1.29.0", "image ':v1.29.0' has no repository name"),
        ("registry.k8s.io/:v1.29.0", "image 'registry.k8s.io/:v1.29.0' has no repository name"),
        (f"a@{DIGEST}@{DIGEST}", f"image 'a@{DIGEST}@{DIGEST}' has a malformed digest '{DIGEST}@{DIGEST}'"),
        (None, "not a container image reference: None"),
    ],
)
def test_version_from_image_refuses_with_the_exact_message(image, message):
    with pytest.raises(kv.VersionError) as err:
        kv.version_from_image(image)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "garbage",
            "cannot read a Kubernetes version from 'garbage': expected MAJOR.MINOR[.PATCH] with an optional leading "
            "'v' and build suffix, for example '1.29', 'v1.29.3' or 'v1.28.0-rke2r1'",
        ),
        (None, "Kubernetes version must be a string such as '1.29' or 'v1.29.3', got None"),
    ],
)
def test_parse_version_refuses_with_the_exact_message(text, message):
    with pytest.raises(kv.VersionError) as err:
        kv.parse_version(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "version"),
    [("1.29", (1, 29, None)), ("v1.29.3", (1, 29, 3)), ("v1.28.0-rke2r1", (1, 28, 0)), ("0.1", (0, 1, None))],
)
def test_parse_version_exact(text, version):
    assert kv.parse_version(text) == version


def test_format_version():
    assert kv.format_version((1, 29, None)) == "1.29"
    assert kv.format_version((1, 29, 3)) == "1.29.3"
    assert kv.format_version((1, 29, 0)) == "1.29.0"


IMAGE_1_30 = "registry.k8s.io/kube-scheduler:v1.30.1"


@pytest.mark.parametrize(
    ("explicit", "image", "expected"),
    [
        ("", IMAGE_1_30, ((1, 30, 1), [])),
        (None, IMAGE_1_30, ((1, 30, 1), [])),
        ("1.29", None, ((1, 29, None), [])),
        ("1.29", "registry.k8s.io/kube-scheduler:latest", ((1, 29, None), [])),
        ("1.30.4", IMAGE_1_30, ((1, 30, 4), [])),  # another patch of the same minor: no warning
        (
            "1.29",
            IMAGE_1_30,
            (
                (1, 29, None),
                [f"kubernetes_version 1.29 differs from the manifest image tag ({IMAGE_1_30}); using 1.29"],
            ),
        ),
        (
            "2.30",
            IMAGE_1_30,
            (
                (2, 30, None),
                [f"kubernetes_version 2.30 differs from the manifest image tag ({IMAGE_1_30}); using 2.30"],
            ),
        ),
    ],
)
def test_resolve_version_prefers_the_explicit_release_and_warns_on_another_minor(explicit, image, expected):
    assert kv.resolve_version(explicit, image) == expected


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (None, "the kube-scheduler container has no image; set kubernetes_version explicitly"),
        (
            "x:latest",
            "the tag 'latest' of image 'x:latest' is not a Kubernetes version; set kubernetes_version explicitly",
        ),
    ],
)
def test_resolve_version_without_a_release_says_what_to_set(image, message):
    with pytest.raises(kv.VersionError) as err:
        kv.resolve_version("", image)
    assert str(err.value) == message


def test_the_table_as_built_is_the_design_newest_first():
    """SERVED is built once at import; building it again checks the builder itself, release by release."""
    table = sv.served_table()
    assert {minor: set(versions) for minor, versions in table.items()} == DESIGN_TABLE
    assert all(list(versions) == sorted(versions, key=ORDER.index, reverse=True) for versions in table.values())


NOT_SUPPORTED = (
    ": the oldest release this module configures is 1.18 (through the legacy scheduler Policy file; a "
    "KubeSchedulerConfiguration from 1.19), the newest 1.36. Upgrade the control plane first, or configure the "
    "extender by hand with a Policy file."
)


@pytest.mark.parametrize(
    ("version", "legacy", "message"),
    [
        (
            (2, 0, 0),
            False,
            "Kubernetes 2.0 is not a release this module knows; it supports 1.18 to 1.36 (pass kubernetes_version if "
            "the detected version is wrong)",
        ),
        ((1, 17, 0), False, "Kubernetes 1.17 is not supported" + NOT_SUPPORTED),
        ((1, 10, 0), False, "Kubernetes 1.10 is not supported" + NOT_SUPPORTED),  # 1.10 is no YAML accident
        (
            (1, 9, 0),
            False,
            "Kubernetes 1.9 is not supported (an unquoted 1.30 in YAML is the number 1.3: quote kubernetes_version)"
            + NOT_SUPPORTED,
        ),
        (
            (1, 23, 0),
            True,
            "legacy_policy was requested but Kubernetes 1.23 removed the scheduler Policy API (last release with it: "
            "1.22); drop legacy_policy to write a KubeSchedulerConfiguration kubescheduler.config.k8s.io/v1beta3",
        ),
    ],
)
def test_select_api_version_refuses_with_the_exact_message(version, legacy, message):
    with pytest.raises(sv.ConfigError) as err:
        sv.select_api_version(version, legacy_policy=legacy)
    assert str(err.value) == message


def test_newer_than_known_says_what_it_assumes():
    assert sv.select_api_version((1, 40, 0)) == (
        "kubescheduler.config.k8s.io/v1",
        [
            "Kubernetes 1.40 is newer than the newest release this module was verified against (1.36); assuming it "
            "serves kubescheduler.config.k8s.io/v1"
        ],
    )
    assert sv.served_versions(40) == ("v1",) and sv.served_versions(17) == ()


@pytest.mark.parametrize(
    ("doc", "version"),
    [
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "v1beta3"),
        ({"apiVersion": "v1", "kind": "Policy"}, None),  # the legacy Policy: not of our group
        ({"apiVersion": "other.k8s.io/v1beta3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_config_version(doc, version):
    assert sv.config_version(doc) == version


@pytest.mark.parametrize(
    ("version", "minor", "target"),
    [
        ("v1beta2", 23, "v1beta3"),
        ("v1beta2", 25, "v1"),
        ("v1", 25, None),  # already the newest
        ("v1beta1", 25, None),  # not served there: nothing to convert to safely
        ("v1beta3", 17, None),  # a release that serves none
    ],
)
def test_conversion_target(version, minor, target):
    assert sv.conversion_target(version, minor) == target


PLUGINS = sv.NOT_CONVERTIBLE["plugins"]


def test_conversion_blockers_name_every_field_in_order():
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta2",
        "kind": "KubeSchedulerConfiguration",
        "plugins": {},
        "metricsBindAddress": "0.0.0.0:10251",
        "futureField": 1,
        "leaderElection": {"resourceLock": "endpoints"},
        "profiles": [{"schedulerName": "a", "plugins": {}, "futureKey": 2}, "p", {"pluginConfig": []}],
    }
    assert sv.conversion_blockers(doc, "v1beta2", "v1") == [
        f"plugins: {PLUGINS}",
        "metricsBindAddress: v1 has no metricsBindAddress (kube-scheduler serves /metrics on --secure-port)",
        "futureField: not known to mean the same in v1 as in v1beta2",
        "leaderElection.resourceLock: 'endpoints'; newer releases accept only 'leases'",
        f"profiles[0].plugins: {PLUGINS}",
        "profiles[0].futureKey: not known to mean the same in v1",
        "profiles[1]: not a mapping",
        "profiles[2].pluginConfig: plugin arguments are versioned with the plugins (see plugins)",
    ]


@pytest.mark.parametrize(
    ("doc", "reasons"),
    [
        ({"leaderElection": {"resourceLock": "leases"}, "profiles": [{"schedulerName": "s"}]}, []),
        ({"leaderElection": {}, "profiles": None}, []),
        ({"leaderElection": "leases"}, []),  # not a mapping: kube-scheduler's own validation reports it
        ({"profiles": {"schedulerName": "s"}}, ["profiles: not a list"]),
    ],
)
def test_conversion_blockers_of_the_convertible_shapes(doc, reasons):
    assert sv.conversion_blockers(doc, "v1beta3", "v1") == reasons
