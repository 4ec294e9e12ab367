"""The power_score filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.power_score as f_score
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import PowerScoreError
from poweraware_testing import raises


def test_power_score_passes_its_arguments_on(stub):
    score = stub(f_score, "score_nodes")
    assert f_score.power_score(["n"], "500m") == "result"
    assert f_score.power_score(["n"], 250, 10) == "result"
    assert score.calls == [((["n"], "500m"), {"neutral_score": 50}), ((["n"], 250), {"neutral_score": 10})]


def test_power_score_errors_keep_their_message(stub):
    stub(f_score, "score_nodes", error=PowerScoreError("node a: no model"))
    raises(lambda: f_score.power_score([], 1), "node a: no model")
