"""The role's recording rules compute P(u + d) - P(u) from each published model: render the template
with Ansible, then let the real promtool evaluate the rules on test series."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import fit_model, predict_power

REPO_ROOT = pathlib.Path(__file__).resolve().parents[5]
ROLE = REPO_ROOT / "roles" / "power_models"
CURVE = (60.0, 95.0, 108.0, 119.0, 130.0, 142.0, 155.0, 170.0, 188.0, 210.0, 236.0)


def true_power(util):
    seg = min(int(util // 10), 9)
    return CURVE[seg] + (CURVE[seg + 1] - CURVE[seg]) * (util - 10 * seg) / 10


def samples():
    return [{"util": u / 2, "watts": true_power(u / 2)} for u in range(0, 201)]


def extended(model, util):
    """The rule's semantics: the model on 0..100, its last slope continued above 100."""
    if model["kind"] == "peaks":
        p = model["params"]
        import math

        return p["k0"] + p["k1"] * math.exp(p["k2"] * util)
    if util <= 100.0:
        return predict_power(model, util)
    knots = model["params"]["knot_util"] if model["kind"] == "piecewise_linear" else [0.0, 100.0]
    slope = (predict_power(model, 100.0) - predict_power(model, knots[-2])) / (100.0 - knots[-2])
    return predict_power(model, 100.0) + slope * (util - 100.0)


def render(tmp_path, results, capacity, **overrides):
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(overrides)
    variables["_power_models_results"] = results
    variables["_power_models_capacity_m"] = capacity
    variables["ansible_python_interpreter"] = sys.executable
    out = tmp_path / "rules.yml"
    playbook = tmp_path / "render.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "connection": "local",
                    "tasks": [
                        {
                            "ansible.builtin.template": {
                                "src": str(ROLE / "templates" / "power_models.rules.yml.j2"),
                                "dest": str(out),
                                "mode": "0600",
                            }
                        }
                    ],
                }
            ]
        )
    )
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook), "-e",
         f"@{extra}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if not path:
        # a failure, not a skip: `make unit` installs it, and a skipped rules check passes silently
        pytest.fail(
            "promtool is not installed: install the Debian package prometheus (`make system-deps` does)", pytrace=False
        )
    return path


@pytest.mark.parametrize("kind", ["piecewise_linear", "linear", "peaks"])
def test_rules_evaluate_to_the_models_power_jump(kind, tmp_path, promtool):
    model = fit_model(samples(), kind=kind, node="n1")
    published = {"kind": model["kind"], "params": model["params"]}
    results = {
        "n1": {"status": "ok", "model": published},
        "n2": {"status": "too_few_samples", "model": None},
    }
    # The rules record the util query (here the test series); capacity "8000m" is 8 CPUs.
    rules = render(
        tmp_path,
        results,
        {"n1": "8000m", "n2": "4"},
        power_models_reference_pod_cpu="2",
        power_models_util_query="util",
    )
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    doc = yaml.safe_load(rules.read_text())
    records = [r["record"] for r in doc["groups"][0]["rules"]]
    assert records == ["poweraware:node_cpu_utilisation:percent", "node_power_model_jump_watts"]  # n2: none

    d = 100.0 * 2000 / 8000  # a 2-CPU pod on an 8-CPU node: 25 points
    cases = [0.0, 7.5, 40.0, 74.0, 90.0]  # 90 + 25 overfills: the last slope continues
    series = [{"series": f'util{{node="n1",case="{i}"}}', "values": f"{u}x3"} for i, u in enumerate(cases)]
    series.append({"series": 'util{node="n2",case="x"}', "values": "50x3"})
    tests = []
    for i, u in enumerate(cases):
        want = extended(published, u + d) - extended(published, u)
        labels = f'{{node="n1",case="{i}",reference_cpu="2"}}'
        tests.append(
            {
                "expr": f"abs(node_power_model_jump_watts{labels} - {want:.9f}) < bool 1e-6",
                "eval_time": "1m",
                "exp_samples": [{"labels": labels, "value": 1}],
            }
        )
    tests.append({"expr": 'node_power_model_jump_watts{node="n2"}', "eval_time": "1m", "exp_samples": []})
    spec = tmp_path / "test.yml"
    spec.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(rules)],
                "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}],
            }
        )
    )
    result = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    if kind == "piecewise_linear":  # the jump is positive and grows at high load on this convex top
        assert extended(published, 90 + d) - extended(published, 90) > extended(published, 40 + d) - extended(
            published, 40
        )


def test_no_modelled_node_gives_only_the_utilisation_rule(tmp_path, promtool):
    rules = render(tmp_path, {"n1": {"status": "poor_fit", "model": None}}, {"n1": "8"})
    doc = yaml.safe_load(rules.read_text())
    assert [r["record"] for r in doc["groups"][0]["rules"]] == ["poweraware:node_cpu_utilisation:percent"]
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
