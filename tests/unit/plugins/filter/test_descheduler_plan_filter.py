"""The descheduler_plan filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.descheduler_plan as f_desched
import pytest
from poweraware_testing import raises


def test_descheduler_plan_defaults_and_empty_values(stub):
    plan = stub(f_desched, "plan")
    assert f_desched.descheduler_plan(None, "1.30") == "result"
    assert f_desched.descheduler_plan({}, "1.31", None, [], "10m") == "result"
    policy = {"kind": "DeschedulerPolicy"}
    assert f_desched.descheduler_plan(policy, "1.29", "v0.30.1", ["default"], "1h") == "result"
    assert f_desched.descheduler_plan(policy, "1.29", "", None, "1h", None) == "result"
    assert f_desched.descheduler_plan(policy, "1.29", "", None, "1h", "sha256:x") == "result"
    assert plan.calls == [
        (({}, "1.30", "", None, "5m", ""), {}),
        (({}, "1.31", "", None, "10m", ""), {}),
        ((policy, "1.29", "v0.30.1", ["default"], "1h", ""), {}),
        ((policy, "1.29", "", None, "1h", ""), {}),
        ((policy, "1.29", "", None, "1h", "sha256:x"), {}),
    ]


@pytest.mark.parametrize(("bad", "kind"), [([], "list"), ("policy", "str"), (0, "int")])
def test_descheduler_plan_wants_a_mapping(bad, kind):
    raises(
        lambda: f_desched.descheduler_plan(bad, "1.30"),
        f"descheduler_plan: descheduler_policy must be a DeschedulerPolicy mapping or empty, not {kind}",
    )
