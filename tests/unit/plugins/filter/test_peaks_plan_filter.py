"""The peaks_plan filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.peaks_plan as f_peaks
import pytest
from poweraware_testing import raises


@pytest.mark.parametrize(("bad", "kind"), [({}, "dict"), (None, "NoneType"), ("cm", "str")])
def test_peaks_plan_wants_the_lookup_list(bad, kind):
    raises(
        lambda: f_peaks.peaks_plan(bad, "models", "peaks", "http://w"),
        f"peaks_plan: expected the resources list of a ConfigMap lookup (k8s_info), not {kind}",
    )


def test_peaks_plan_passes_the_first_configmap_and_node_names(stub):
    plan = stub(f_peaks, "plan")
    first, second = {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}
    nodes = [{"metadata": {"name": "n1"}}, "n2", {"kind": "Node"}]
    assert f_peaks.peaks_plan([first, second], 7, "peaks", "http://w:8080", nodes, "ConfigMap x/y") == "result"
    assert f_peaks.peaks_plan([], "models", "peaks", "http://w") == "result"
    # a tag Ansible read as a number is a tag; "yes" from -e is the boolean it says
    assert f_peaks.peaks_plan([], "m", "p", "http://w", None, "C", 0.33, "v1.36.3", "yes") == "result"
    unchecked = {"image_tag": None, "server_version": None, "allow_skew": False}
    assert plan.calls == [
        ((first, "7", "peaks", "http://w:8080", ["n1", "n2", None], "ConfigMap x/y"), unchecked),
        ((None, "models", "peaks", "http://w", [], "ConfigMap"), unchecked),
        ((None, "m", "p", "http://w", [], "C"), {"image_tag": "0.33", "server_version": "v1.36.3", "allow_skew": True}),
    ]


def test_peaks_plan_refuses_an_allow_skew_that_is_no_boolean():
    raises(
        lambda: f_peaks.peaks_plan([], "m", "p", "http://w", allow_skew="maybe"),
        "peaks_plan: allow_skew must be a boolean, not 'maybe'",
    )
