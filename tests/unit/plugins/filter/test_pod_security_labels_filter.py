"""The pod_security_labels filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.pod_security_labels as f_psa
import pytest
from poweraware_testing import raises

PSA = ("monitoring", "privileged", "collectd", "reads host files", "collectd_namespace")


def test_pod_security_labels_passes_its_arguments_on(stub):
    labels = stub(f_psa, "_labels")
    namespace = {"kind": "Namespace", "metadata": {"name": "monitoring"}}
    for existing in ("", None, {}, namespace):
        assert f_psa.pod_security_labels(existing, *PSA) == "result"
    assert f_psa.pod_security_labels(None, "ns", "baseline", "tas", "why", "tas_namespace") == "result"
    expected = [
        (("monitoring", None, "privileged", "collectd", "reads host files", "collectd_namespace"), {}),
    ] * 3
    expected += [
        (("monitoring", namespace, "privileged", "collectd", "reads host files", "collectd_namespace"), {}),
        (("ns", None, "baseline", "tas", "why", "tas_namespace"), {}),
    ]
    assert labels.calls == expected


@pytest.mark.parametrize("bad", [["ns"], "ns", 5])
def test_pod_security_labels_wants_a_namespace_object(bad):
    raises(
        lambda: f_psa.pod_security_labels(bad, *PSA),
        "pod_security_labels: the input must be the Namespace object or null",
    )


@pytest.mark.parametrize(
    ("index", "name"), [(0, "namespace"), (1, "level"), (2, "component"), (3, "reason"), (4, "variable")]
)
@pytest.mark.parametrize("bad", ["", None, 5])
def test_pod_security_labels_wants_non_empty_strings(index, name, bad):
    args = list(PSA)
    args[index] = bad
    raises(lambda: f_psa.pod_security_labels(None, *args), f"pod_security_labels: {name} must be a non-empty string")
