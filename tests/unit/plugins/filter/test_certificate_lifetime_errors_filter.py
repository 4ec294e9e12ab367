"""The certificate_lifetime_errors filter plugin(s) checked directly, without Ansible subprocesses: input
checks, arguments passed on to the library (a recorder stands in for it), errors turned into
AnsibleFilterError.
"""

from __future__ import annotations

import types

import ansible_collections.poweraware.k8s.plugins.filter.certificate_lifetime_errors as f_lifetime
import pytest
from poweraware_testing import raises

LIFETIME_MESSAGE = (
    "certificate_lifetime_errors: the input must map the variable names of the CA lifetime, the leaf "
    "lifetime, the leaf renewal window and optionally the CA renewal window to their values"
)


@pytest.mark.parametrize(
    "bad",
    [None, ["a", "b", "c"], ("a", "b", "c", "d"), {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}],
)
def test_certificate_lifetime_errors_wants_three_or_four_values(bad):
    raises(lambda: f_lifetime.certificate_lifetime_errors(bad), LIFETIME_MESSAGE)


def test_certificate_lifetime_errors_passes_a_dict_on(stub):
    errors = stub(f_lifetime, "lifetime_errors", result=[])
    three = types.MappingProxyType({"ca": "10y", "leaf": "1y", "renew": "30d"})
    four = {"ca": "10y", "leaf": "1y", "renew": "30d", "ca_renew": "1y"}
    assert f_lifetime.certificate_lifetime_errors(three) == []
    assert f_lifetime.certificate_lifetime_errors(four) == []
    assert errors.calls == [((dict(three),), {}), ((four,), {})]
    assert errors.calls[0][0][0].__class__ is dict  # exactly a dict, not the mapping type given
