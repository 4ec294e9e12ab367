"""The Peaks model file, one writer (_power_model.peaks_models_text, the power_models role's filter) and
one reader (_peaks.parse_models, the peaks role): what one writes the other reads back unchanged."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.power_model import power_model_peaks
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import peaks_models_text
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.peaks import parse_models

RESULTS = {
    "w2": {"status": "ok", "peaks": {"k0": 50.5, "k1": 3.25, "k2": 0.02}},
    "w1": {"status": "ok", "peaks": {"k0": 61.0, "k1": 1.5, "k2": 0.031}},
    "w3": {"status": "ok", "peaks": None},  # its Peaks fit missed the error bound
    "w4": {"status": "poor_fit", "peaks": None},
}


def test_only_nodes_with_a_peaks_fit_sorted_as_json_with_sorted_keys():
    text = peaks_models_text(RESULTS)
    # the text the role's template built before, byte for byte (Jinja's to_json(sort_keys=true))
    assert text == ('{"w1": {"k0": 61.0, "k1": 1.5, "k2": 0.031}, "w2": {"k0": 50.5, "k1": 3.25, "k2": 0.02}}')
    assert peaks_models_text({}) == "{}"


def test_the_peaks_role_reads_back_what_the_power_models_role_writes():
    parsed, errors = parse_models(peaks_models_text(RESULTS), "kube-system/peaks-node-power-model")
    assert errors == []
    assert parsed == {n: r["peaks"] for n, r in RESULTS.items() if r["peaks"]}


def test_the_filter_refuses_what_is_not_fit_results():
    with pytest.raises(AnsibleFilterError, match="mapping of node to result, got list"):
        power_model_peaks([])
    assert json.loads(power_model_peaks(RESULTS)) == json.loads(peaks_models_text(RESULTS))
