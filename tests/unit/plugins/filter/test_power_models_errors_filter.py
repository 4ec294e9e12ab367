"""power_models_errors: the power_models role's annotation prefix, checked in Python by the same
function as the power extender's (both roles must name the same prefix)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.power_models_errors import FilterModule, power_models_errors
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.extender import config_errors as extender_errors
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import annotation_prefix_problems
from poweraware_testing import EXTENDER_SETTINGS

PREFIXES = [
    ("poweraware.io", True),
    ("power-aware.example.com", True),
    ("a" * 253, True),  # a DNS subdomain may be 253 characters long
    ("a" * 254, False),
    ("x", True),
    ("Power_Models", False),
    ("poweraware..io", False),
    ("power-.io", False),
    (".poweraware.io", False),
    ("poweraware.io\n", False),
    ("poweraware.io/models", False),
    ("", False),
    (None, False),
    (7, False),
]


def test_the_filter_is_registered_under_its_name():
    assert FilterModule().filters() == {"power_models_errors": power_models_errors}


@pytest.mark.parametrize(("prefix", "ok"), PREFIXES)
def test_both_roles_take_the_same_prefixes(prefix, ok):
    models = power_models_errors({"power_models_annotation_prefix": prefix})
    settings = {**EXTENDER_SETTINGS, "power_extender_annotation_prefix": prefix}
    extender = [p for p in extender_errors(settings) if "prefix" in p]
    assert (models == [], extender == []) == (ok, ok), (models, extender)


def test_a_bad_prefix_is_named_with_its_value_the_reason_and_the_fix():
    assert power_models_errors({"power_models_annotation_prefix": "Power_Models"}) == [
        "power_models_annotation_prefix='Power_Models': must be a DNS subdomain, lower-case letters, digits, '-' "
        "and '.', each dot-separated part starting and ending with a letter or digit, at most 253 characters, "
        "such as poweraware.io; the power_extender role's power_extender_annotation_prefix must be the same"
    ]
    assert power_models_errors({}) == [
        "power_models_annotation_prefix=None: must be a DNS subdomain, lower-case letters, digits, '-' and '.', "
        "each dot-separated part starting and ending with a letter or digit, at most 253 characters, such as "
        "poweraware.io; the power_extender role's power_extender_annotation_prefix must be the same"
    ]
    assert annotation_prefix_problems("v", "ok.io", "fix") == []
    assert annotation_prefix_problems("v", "-", "fix") == ["v='-': must be a DNS subdomain, fix"]


@pytest.mark.parametrize("bad", [None, "poweraware.io", ["power_models_annotation_prefix"]])
def test_the_filter_wants_a_mapping(bad):
    with pytest.raises(AnsibleFilterError) as exc:
        power_models_errors(bad)
    assert str(exc.value) == "power_models_errors: the input must map the role's variable names to their values"
