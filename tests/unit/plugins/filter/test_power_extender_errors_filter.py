"""The power_extender_errors filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import types

import ansible_collections.poweraware.k8s.plugins.filter.power_extender_errors as f_ext
import pytest
from poweraware_testing import raises


@pytest.mark.parametrize("bad", [None, [], "power_extender_port=1"])
def test_power_extender_errors_wants_a_mapping(bad):
    raises(
        lambda: f_ext.power_extender_errors(bad),
        "power_extender_errors: the input must map the role's variable names to their values",
    )


def test_power_extender_errors_passes_a_dict_on(stub):
    errors = stub(f_ext, "config_errors", result=[])
    values = types.MappingProxyType({"power_extender_port": 9443})
    assert f_ext.power_extender_errors(values) == []
    assert errors.calls == [(({"power_extender_port": 9443},), {})]
    assert errors.calls[0][0][0].__class__ is dict  # exactly a dict, not the mapping type given
