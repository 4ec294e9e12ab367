"""The image_reference filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.image_reference as f_image
import pytest
from poweraware_testing import raises


@pytest.mark.parametrize("bad", ["", None, 5])
def test_image_reference_wants_the_variable_name(bad):
    raises(
        lambda: f_image.image_reference("repo", "v1", "sha256:x", bad),
        "image_reference: variable must name the role's image variable, such as collectd_image",
    )


def test_image_reference_passes_whole_number_tags_as_text(stub):
    reference = stub(f_image, "_reference")
    for tag in ("v1.2", 3, 1.5, True, None):
        assert f_image.image_reference("repo", tag, "sha256:x", "collectd_image") == "result"
    assert reference.calls == [
        (("repo", "v1.2", "sha256:x", "collectd_image"), {}),
        (("repo", "3", "sha256:x", "collectd_image"), {}),
        (("repo", 1.5, "sha256:x", "collectd_image"), {}),  # refused there: YAML's 1.10 is 1.1
        (("repo", True, "sha256:x", "collectd_image"), {}),
        (("repo", None, "sha256:x", "collectd_image"), {}),
    ]


def test_image_reference_refuses_a_tag_yaml_read_as_a_float():
    # tag: 1.10 unquoted is the float 1.1; its text would pull another image. Quoted, it is the tag.
    assert f_image.image_reference("registry.k8s.io/x", "1.10", "", "x_image") == "registry.k8s.io/x:1.10"
    assert f_image.image_reference("registry.k8s.io/x", 2, "", "x_image") == "registry.k8s.io/x:2"
    for tag in (1.1, True):
        raises(
            lambda tag=tag: f_image.image_reference("registry.k8s.io/x", tag, "", "x_image"),
            f"Nothing was changed: x_image_tag={tag!r} is not an image tag: up to 128 letters, digits, '_', '.' "
            "or '-', not starting with '.' or '-' (quote a tag YAML would read as a number, such as \"0.7.0\")",
        )


def test_image_reference_errors_say_nothing_changed(stub):
    stub(f_image, "_reference", error=ValueError("collectd_image has no tag"))
    raises(
        lambda: f_image.image_reference("repo", "", "", "collectd_image"),
        "Nothing was changed: collectd_image has no tag",
    )
