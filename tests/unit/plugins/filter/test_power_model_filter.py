"""The power_model and power_score filters: direct calls, AnsibleFilterError, Ansible's filter loading.

The power_model, power_model_fits, power_model_promql filter plugin(s) checked directly, without Ansible
subprocesses: input checks, arguments passed on to the library (a recorder stands in for it), errors turned
into AnsibleFilterError.
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import ansible_collections.poweraware.k8s.plugins.filter.power_model as f_model
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.power_model import FilterModule as ModelFilters
from ansible_collections.poweraware.k8s.plugins.filter.power_score import FilterModule as ScoreFilters
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    DEFAULT_KIND,
    PowerModelError,
    fit_model,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import score_nodes
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError
from poweraware_testing import raises

COLLECTIONS_DIR = pathlib.Path(__file__).resolve().parents[4] / ".cache" / "collections"

power_model = ModelFilters().filters()["power_model"]
power_score = ScoreFilters().filters()["power_score"]

SAMPLES = [
    {"util": 0, "watts": 55.0},
    {"util": 10, "watts": 90.0},
    {"util": 50, "watts": 140.0},
    {"util": 100, "watts": 230.0},
]


def test_filters_are_registered_under_their_names():
    assert set(ModelFilters().filters()) == {
        "power_model",
        "power_model_fits",
        "power_model_promql",
        "power_model_annotations",
        "power_model_peaks",
    }
    assert set(ScoreFilters().filters()) == {"power_score"}


def test_filters_return_what_the_library_returns():
    assert power_model(SAMPLES) == fit_model(SAMPLES)
    assert power_model(SAMPLES, kind="peaks", node="w1") == fit_model(SAMPLES, kind="peaks")
    assert power_model(SAMPLES, knots=[0, 10, 100], smoothing=0) == fit_model(SAMPLES, knots=[0, 10, 100], smoothing=0)
    assert power_model(SAMPLES, robust=False) == fit_model(SAMPLES, robust=False)
    nodes = [
        {"name": "w1", "util": 30.0, "cpu_capacity": "16", "model": power_model(SAMPLES)},
        {"name": "w2", "util": None, "cpu_capacity": 8000, "model": None},
    ]
    assert power_score(nodes, "1", neutral_score=20) == score_nodes(nodes, "1", neutral_score=20)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: power_model([{"util": -5, "watts": 50}], node="w4"), "node 'w4': samples[0].util"),
        (lambda: power_model([{"util": 140, "watts": 50}], node="w4"), "node 'w4': samples[0].util"),
        (lambda: power_model([{"util": 10, "watts": math.nan}], node="w4"), "node 'w4': samples[0].watts"),
        (lambda: power_model([], node="w4"), "node 'w4': samples: no samples"),
        (lambda: power_model(SAMPLES, kind="quadratic", node="w4"), "node 'w4': kind: unknown kind"),
        (lambda: power_model(SAMPLES, kind="linear", knots=[0, 100], node="w4"), "node 'w4': knots:"),
        (
            lambda: power_score([{"name": "w4", "util": 10.0, "cpu_capacity": "eight"}], "1"),
            "node 'w4': cpu_capacity",
        ),
        (lambda: power_score([{"name": "w4", "util": 101.0, "cpu_capacity": 1000}], "1"), "node 'w4': util"),
        (lambda: power_score([{"name": "w4", "util": 1.0, "cpu_capacity": 1000}], "2 cpus"), "pod_cpu_request"),
    ],
)
def test_bad_input_raises_ansible_filter_error_naming_node_and_field(call, expected):
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert expected in str(err.value)


# Ansible's own filter loading: a fresh interpreter, because the collection loader must be installed
# before anything imports ansible_collections (this test session imports it through sys.path).
_RENDER = """
import json, sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([sys.argv[1]])
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
request = json.loads(sys.stdin.read())
templar = Templar(loader=DataLoader(), variables=request["variables"])
try:
    print(json.dumps({"value": templar.template(trust_as_template(request["template"]))}))
except AnsibleError as err:
    print(json.dumps({"error": str(err)}))
"""


def render(template, **variables):
    completed = subprocess.run(
        [sys.executable, "-c", _RENDER, str(COLLECTIONS_DIR)],
        input=json.dumps({"template": template, "variables": variables}),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_filters_load_and_run_through_ansible_templating():
    template = (
        "{% set m = samples | poweraware.k8s.power_model(node='w1') %}"
        "{% set p = samples | poweraware.k8s.power_model(kind='peaks') %}"
        "{{ {'model': m, 'peaks': p, 'ranking': [{'name': 'w1', 'util': 20.0, 'cpu_capacity': '8', 'model': m},"
        " {'name': 'w2', 'util': 20.0, 'cpu_capacity': 8000, 'model': None}] | poweraware.k8s.power_score('500m')} }}"
    )
    value = render(template, samples=SAMPLES)["value"]
    assert value["model"] == fit_model(SAMPLES)  # floats survive JSON exactly
    assert set(value["peaks"]["params"]) == {"k0", "k1", "k2"}
    assert [(r["name"], r["score"], r["status"]) for r in value["ranking"]] == [
        ("w1", 100, "scored"),
        ("w2", 50, "neutral"),
    ]


def test_filter_errors_surface_through_ansible_with_node_and_field():
    result = render("{{ samples | poweraware.k8s.power_model(node='w7') }}", samples=[{"util": 130, "watts": 1}])
    assert "power model for node 'w7': samples[0].util" in result["error"]
    result = render("{{ [{'name': 'w8', 'util': 5.0, 'cpu_capacity': '4'}] | poweraware.k8s.power_score('a lot') }}")
    assert "pod_cpu_request" in result["error"]


def test_power_model_passes_piecewise_options_only_when_given(stub):
    fit = stub(f_model, "fit_model")
    samples = [{"util": 10, "watts": 100}]
    assert f_model.power_model(samples) == "result"
    assert f_model.power_model(samples, "linear", "node-1", robust=False) == "result"
    assert f_model.power_model(samples, "piecewise", "node-2", [30, 60], 0.5) == "result"
    assert f_model.power_model(samples, "piecewise", knots=0, smoothing=0) == "result"
    assert fit.calls == [
        ((samples,), {"kind": DEFAULT_KIND, "node": None, "robust": True}),
        ((samples,), {"kind": "linear", "node": "node-1", "robust": False}),
        ((samples,), {"kind": "piecewise", "node": "node-2", "robust": True, "knots": [30, 60], "smoothing": 0.5}),
        ((samples,), {"kind": "piecewise", "node": None, "robust": True, "knots": 0, "smoothing": 0}),
    ]


def test_power_model_fits_defaults_and_arguments(stub):
    fits = stub(f_model, "fit_nodes")
    by_node = {"n1": []}
    assert f_model.power_model_fits(by_node) == "result"
    assert f_model.power_model_fits(by_node, ["n1"], "linear", 5, 40.0, 2.5) == "result"
    assert fits.calls == [
        ((by_node, None, DEFAULT_KIND, 30, 20.0, 10.0), {}),
        ((by_node, ["n1"], "linear", 5, 40.0, 2.5), {}),
    ]


def test_power_model_promql_passes_its_arguments_on(stub):
    promql = stub(f_model, "power_jump_promql")
    model = {"kind": "linear"}
    assert f_model.power_model_promql(model, "util", "500m", "4", "node-1") == "result"
    assert f_model.power_model_promql(model, "util", 0.5, 4) == "result"
    assert promql.calls == [
        ((model, "util", "500m", "4"), {"node": "node-1"}),
        ((model, "util", 0.5, 4), {"node": None}),
    ]


@pytest.mark.parametrize(
    ("name", "call", "error"),
    [
        ("fit_model", lambda: f_model.power_model([]), PowerModelError("node n1: no samples")),
        ("fit_nodes", lambda: f_model.power_model_fits({}), PowerModelError("node n1: no samples")),
        (
            "power_jump_promql",
            lambda: f_model.power_model_promql({}, "u", 1, 1),
            PowerModelError("node n1: no samples"),
        ),
        (
            "power_jump_promql",
            lambda: f_model.power_model_promql({}, "u", "x", 1),
            QuantityError("node n1: no samples"),
        ),
    ],
)
def test_power_model_errors_keep_their_message(stub, name, call, error):
    stub(f_model, name, error=error)
    raises(call, "node n1: no samples")
