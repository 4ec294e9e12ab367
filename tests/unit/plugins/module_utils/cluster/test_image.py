"""Images pinned by digest (module_utils/cluster/image.py, filter image_reference, docs/security.md "Images").

Every role that deploys an image has the three variables, builds its pods' reference with the
filter, and either pins the default tag by a digest whose source the docs name, or the docs say why
there is none. The lab's site test checks the containers that actually run against the same table.
"""

import pathlib
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.image_reference import FilterModule
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.image import image_reference, reference_errors
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.descheduler import DIGESTS as DESCHEDULER_DIGESTS
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.descheduler import RELEASES
from poweraware_testing import documented_images, role_defaults

REPO = pathlib.Path(__file__).resolve().parents[5]
reference = FilterModule().filters()["image_reference"]
DIGEST = "sha256:" + "0123456789abcdef" * 4
# Roles whose main image is the user's build (no maintained image is published): no default repository.
USER_BUILT = {"collectd"}


def role_images() -> dict[str, dict]:
    images = {}
    for defaults in sorted(REPO.glob("roles/*/defaults/main.yml")):
        role = defaults.parts[-3]
        values = role_defaults(defaults)
        if f"{role}_image" in values:
            images[role] = {
                k[len(role) + 1 :]: v
                for k, v in values.items()
                if k.startswith(f"{role}_image") and not k.endswith("_pull_secrets")
            }
    return images


def test_every_role_image_has_tag_and_digest_variables():
    images = role_images()
    assert set(images) == {
        "collectd", "descheduler", "kube_state_metrics", "nfd", "peaks", "power_demo", "power_extender", "prometheus",
        "prometheus_adapter", "tas",
    }  # fmt: skip
    for role, values in images.items():
        assert {"image", "image_tag", "image_digest"} <= set(values), role
        # the descheduler's tag follows the cluster's Kubernetes minor (empty: chosen by descheduler_plan)
        tag = str(values["image_tag"]) or (role == "descheduler" and max(RELEASES.items())[1])
        # collectd's image is the user's build (no default repository): its tag must still be valid
        image = values["image"] or (role in USER_BUILT and "registry.example:5000/poweraware/collectd")
        assert reference_errors(image, tag, values["image_digest"], role) == [], role


def test_every_default_image_is_pinned_or_documented_why_not():
    rows = documented_images()
    problems = []
    for role, values in role_images().items():
        if role in USER_BUILT:
            continue  # no default image (test_an_image_users_build_has_the_three_variables_and_no_default)
        row = rows.get(values["image"])
        if role == "descheduler":
            # the digest goes with the release the role chooses per cluster: the newest's is cited
            values = {**values, "image_digest": DESCHEDULER_DIGESTS[max(RELEASES.items())[1]]}
        if row is None:
            problems.append(f"{role}: {values['image']} has no row in docs/security.md's Images table")
        elif values["image_digest"] and row[0] != values["image_digest"]:
            problems.append(f"{role}: the digest in defaults is not the one docs/security.md cites ({row[0]})")
        elif not values["image_digest"] and (row[0] != "none" or len(row[1]) < 20):
            problems.append(f"{role}: {values['image']} has no digest and docs/security.md gives no reason")
    assert problems == []
    pinned = {r: v["image"] for r, v in role_images().items() if v["image_digest"]}
    assert pinned == {
        "kube_state_metrics": "registry.k8s.io/kube-state-metrics/kube-state-metrics",
        "nfd": "registry.k8s.io/nfd/node-feature-discovery",
        "peaks": "registry.k8s.io/scheduler-plugins/kube-scheduler",
        "power_extender": "docker.io/library/python",
    }


def test_an_image_users_build_has_the_three_variables_and_no_default():
    """load-watcher publishes no image, and no maintained collectd image is published: the roles name
    the user's build, required, and take its digest from the user (docs/peaks.md, docs/telemetry.md),
    so no default image lacks a source."""
    values = yaml.safe_load((REPO / "roles/peaks/defaults/main.yml").read_text())
    assert values["peaks_load_watcher_image"] == "" and values["peaks_load_watcher_image_digest"] == ""
    assert values["peaks_load_watcher_image_tag"] == "v0.2.4"
    security = (REPO / "docs/security.md").read_text()
    assert "peaks_load_watcher_image" in security
    values = yaml.safe_load((REPO / "roles/collectd/defaults/main.yml").read_text())
    assert values["collectd_image"] == "" and values["collectd_image_digest"] == ""
    assert values["collectd_image_tag"] == "5.12.0-14"
    assert "your build of `roles/collectd/files/Containerfile` (5.12.0-14)" in security
    assert (REPO / "roles/collectd/files/Containerfile").is_file()


def test_templates_take_the_reference_from_the_filter():
    """No template writes repository:tag itself (which would drop the digest)."""
    lines = []
    for template in sorted(REPO.glob("roles/*/templates/*.j2")):
        role = template.parts[-3]
        for line in template.read_text().splitlines():
            if re.match(r"^\s*image:", line):
                lines.append((role, line.strip()))
    assert lines, "no image lines found"
    # a role with a second image names it _<role>_<component>_image_reference
    wrong = [
        (role, line)
        for role, line in lines
        if not re.fullmatch(r'image: "\{\{ _%s(_\w+)?_image_reference \}\}"' % role, line)
    ]
    assert not wrong, wrong


@pytest.mark.parametrize(
    ("repository", "tag", "digest", "expected"),
    [
        ("registry.k8s.io/nfd/nfd", "v0.17.3", DIGEST, f"registry.k8s.io/nfd/nfd:v0.17.3@{DIGEST}"),
        ("docker.io/intel/telemetry-aware-scheduling", "0.7.0", "", "docker.io/intel/telemetry-aware-scheduling:0.7.0"),
        ("localhost:5000/mirror/prometheus", "v3.16.0", None, "localhost:5000/mirror/prometheus:v3.16.0"),
        ("busybox", "1.36", "", "busybox:1.36"),
    ],
)  # fmt: skip
def test_reference(repository, tag, digest, expected):
    assert image_reference(repository, tag, digest, "x_image") == expected
    assert reference(repository, tag, digest, "x_image") == expected


def test_a_number_for_a_tag_is_taken_as_written():
    assert reference("busybox", 1, "", "x_image") == "busybox:1"


def test_every_problem_named_at_once_and_nothing_built():
    with pytest.raises(AnsibleFilterError) as err:
        reference("Registry.k8s.io/NFD:v0.17.3", "-rc1", "sha256:ABC", "nfd_image")
    message = str(err.value)
    assert message.startswith("Nothing was changed: ")
    assert "nfd_image='Registry.k8s.io/NFD:v0.17.3' is not an image repository" in message
    assert "put the tag in nfd_image_tag and the digest in nfd_image_digest" in message
    assert "nfd_image_tag='-rc1' is not an image tag" in message
    assert "nfd_image_digest='sha256:ABC' is not a digest: write 'sha256:' and the 64 lowercase hex digits" in message


@pytest.mark.parametrize(
    "repository",
    ["", "nfd@sha256:" + "0" * 64, "UPPER/case", "a//b", "-lead/x", "x/", "host:port/x", "a" * 256],
)
def test_bad_repositories(repository):
    assert reference_errors(repository, "v1", "", "x_image")


@pytest.mark.parametrize("digest", ["sha512:" + "0" * 128, "sha256:" + "0" * 63, DIGEST.upper(), "0" * 64, 5])
def test_bad_digests(digest):
    (error,) = reference_errors("busybox", "v1", digest, "x_image")
    assert error.startswith("x_image_digest=")


def test_variable_is_required():
    with pytest.raises(AnsibleFilterError, match="variable must name"):
        reference("busybox", "v1", "", "")


NOT_A_REPOSITORY = (
    "x_image={!r} is not an image repository (lowercase path components, an optional registry host first, "
    "no tag or digest)"
)
TAG_HINT = "; put the tag in x_image_tag and the digest in x_image_digest"


@pytest.mark.parametrize(
    "repository",
    [
        "localhost",  # one component: a name, not a registry host
        "my_org/app",  # '_' joins path components, while no host may have one
        "GHCR.io/org/app",  # registry host names are not case-sensitive, paths are
        "localhost/mirror/busybox",
        "a" * 255,  # the longest name the grammar allows
    ],
)
def test_good_repositories(repository):
    assert reference_errors(repository, "v1", "", "x_image") == []


@pytest.mark.parametrize(
    ("repository", "hint"),
    [
        ("busybox:1.36", TAG_HINT),
        ("nfd@latest", TAG_HINT),
        ("registry.k8s.io/nfd/nfd:v0.17.3", TAG_HINT),
        # a registry port, or a colon before the last path component, is no tag to move elsewhere
        ("localhost:5000/Mirror/prometheus", ""),
        ("reg/team:v1/app", ""),
        (None, ""),
        (5, ""),
    ],
)
def test_a_bad_repository_message_says_what_a_repository_is_and_hints_at_tags_only_for_tags(repository, hint):
    assert reference_errors(repository, "v1", "", "x_image") == [NOT_A_REPOSITORY.format(repository) + hint]


def test_the_messages_in_full_joined_in_order():
    with pytest.raises(ValueError) as err:
        image_reference("busybox", None, "sha256:abc", "x_image")
    assert str(err.value) == (
        "x_image_tag=None is not an image tag: up to 128 letters, digits, '_', '.' or '-', not starting with "
        "'.' or '-' (quote a tag YAML would read as a number, such as \"0.7.0\"); "
        "x_image_digest='sha256:abc' is not a digest: write 'sha256:' and the 64 lowercase hex digits the registry "
        "reports for the tag (the image index for multi-architecture images), or leave it empty to run the tag alone"
    )


pull_secrets = FilterModule().filters()["image_pull_secrets"]


def test_pull_secrets_from_yaml_and_from_e_are_the_same_names():
    """A YAML list, the comma-separated string -e gives and the pod spec's {name: ...} form give the
    same imagePullSecrets; empty or null gives none; a repeat is dropped."""
    assert pull_secrets(["mirror", "backup"], "x") == ["mirror", "backup"]
    assert pull_secrets("mirror, backup,mirror", "x") == ["mirror", "backup"]
    assert pull_secrets([{"name": "mirror"}], "x") == ["mirror"]
    assert pull_secrets("", "x") == pull_secrets(None, "x") == pull_secrets([], "x") == []


def test_bad_pull_secret_names_are_all_named_before_anything_changes():
    with pytest.raises(AnsibleFilterError) as err:
        pull_secrets(["Mirror", "ok", "-bad"], "collectd_image_pull_secrets")
    message = str(err.value)
    assert message.startswith("Nothing was changed: collectd_image_pull_secrets item 'Mirror' is not a Secret name")
    assert "item '-bad'" in message and "'ok'" not in message
    with pytest.raises(AnsibleFilterError, match="is not a list of Secret names"):
        pull_secrets({"mirror": 1}, "tas_image_pull_secrets")


def test_every_role_that_deploys_pods_lists_its_pull_secrets_and_the_site_default_reaches_them():
    """Each pod template writes imagePullSecrets from its role's variable, which follows the
    site-wide poweraware_image_pull_secrets; a registry override moves every default image."""
    for role, values in role_images().items():
        defaults = role_defaults(
            REPO / "roles" / role / "defaults" / "main.yml", poweraware_image_registry="mirror:5000"
        )
        if role in USER_BUILT:
            # the user's build is named whole, wherever it was pushed: the override leaves it alone
            assert defaults[f"{role}_image"] == "", role
        else:
            assert defaults[f"{role}_image"].startswith("mirror:5000/"), role
            assert defaults[f"{role}_image"].split("/", 1)[1] == values["image"].split("/", 1)[1], role
        if role == "power_extender":
            continue  # a static pod cannot reference a Secret: the node's runtime holds the credentials
        site = role_defaults(REPO / "roles" / role / "defaults" / "main.yml", poweraware_image_pull_secrets=["m"])
        assert site[f"{role}_image_pull_secrets"] == ["m"], role
        for template in (REPO / "roles" / role / "templates").glob("*.j2"):
            text = template.read_text()
            if "\n      containers:" in text:
                assert f"{{% for name in _{role}_image_pull_secrets %}}" in text, template
