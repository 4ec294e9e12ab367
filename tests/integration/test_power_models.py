"""Role power_models against the lab and a real Prometheus (Debian's package) on loopback.

The Prometheus is started by this module on a free loopback port with a temporary data directory
that promtool backfills (``tsdb create-blocks-from openmetrics``) with synthetic per-node series:
utilisation sweeping the range and power from a known, noisy curve per node. The playbook reads
them with range queries, fits, and publishes; the published recording rules are then evaluated
by ``promtool test rules`` against values computed from the published models.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import random
import shutil
import socket
import subprocess
import time

import pytest
import yaml
from ansible_run import REPO_ROOT, run_playbook
from kubernetes import client
from poweraware_testing import stop_process

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PLAYBOOK = REPO_ROOT / "playbooks" / "power_models.yml"
PREFIX = "poweraware.io"
STEP = 60
POINTS = 240  # four hours at one minute
OTHER_MANAGER = "someone-else"

# Synthetic true curves (watts at 0, 10, ... 100 % utilisation): concave then convex, like real servers.
CURVES = [
    (60.0, 95.0, 108.0, 119.0, 130.0, 142.0, 155.0, 170.0, 188.0, 210.0, 236.0),
    (110.0, 170.0, 190.0, 207.0, 224.0, 242.0, 262.0, 286.0, 315.0, 350.0, 392.0),
]


def curve(watts, util):
    seg = min(int(util // 10), 9)
    return watts[seg] + (watts[seg + 1] - watts[seg]) * (util - 10 * seg) / 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(lab, url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            if lab.lab_http_get(url + "/-/ready", timeout=2)[0] == 200:
                return
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"prometheus at {url} not ready within {timeout:.0f} s")


@pytest.fixture(scope="module")
def telemetry(lab, tmp_path_factory):
    """A real Prometheus holding backfilled samples for the lab's workers; yields its settings."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not (prometheus and promtool):
        pytest.fail("prometheus/promtool not installed: run `make system-deps` (system-packages.txt)", pytrace=False)
    work = tmp_path_factory.mktemp("prometheus")
    modelled = lab.worker_nodes[:2]
    sparse = lab.worker_nodes[2] if len(lab.worker_nodes) > 2 else None
    end = (int(time.time()) // 3600 - 2) * 3600  # two hours ago, on the hour: fully in the past
    start = end - (POINTS - 1) * STEP
    rng = random.Random(7)  # noqa: S311 - reproducible synthetic noise
    util_lines, power_lines = [], []
    for node, watts in zip(modelled, CURVES, strict=True):
        for i in range(POINTS):
            util = 100.0 * ((i * 37) % POINTS) / (POINTS - 1)  # sweeps 0..100 in a scrambled order
            power = curve(watts, util) * (1 + 0.01 * rng.gauss(0, 1))
            util_lines.append(f'test_cpu_util_percent{{node="{node}"}} {util:.4f} {start + i * STEP}')
            power_lines.append(f'test_node_power_watts{{node="{node}"}} {power:.4f} {start + i * STEP}')
    if sparse:
        for i in range(10):  # ten samples: below power_models_min_samples
            t = end - (9 - i) * STEP
            util_lines.append(f'test_cpu_util_percent{{node="{sparse}"}} {10.0 * i:.1f} {t}')
            power_lines.append(f'test_node_power_watts{{node="{sparse}"}} {100 + 5.0 * i:.1f} {t}')
    openmetrics = work / "series.om"
    openmetrics.write_text(
        "# TYPE test_cpu_util_percent gauge\n"
        + "\n".join(util_lines)
        + "\n# TYPE test_node_power_watts gauge\n"
        + "\n".join(power_lines)
        + "\n# EOF\n"
    )
    data = work / "data"
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data)], check=True)
    config = work / "prometheus.yml"
    config.write_text("global:\n  evaluation_interval: 1m\nscrape_configs: []\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "prometheus.log").open("w")
    # A Prometheus of the site's network (the lab's), where the role queries it from the control plane.
    proc = subprocess.Popen(
        lab.in_lab_network(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=30d",
                f"--web.listen-address=127.0.0.1:{port}",
            ]
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_ready(lab, url, proc)
        yield {
            "url": url,
            "end": end,
            "modelled": modelled,
            "sparse": sparse,
            "promtool": promtool,
            "work": work,
        }
    finally:
        stop_process(proc, timeout=20)
        log.close()
        # the rules ConfigMap this module's runs put in kube-system (role_vars), not the site's
        # namespace: the module's own, so it goes with the module (the uninstall compares the lab)
        with contextlib.suppress(client.ApiException):
            client.CoreV1Api(lab.api_client()).delete_namespaced_config_map("power-models-rules", "kube-system")


def role_vars(telemetry, **extra):
    values = {
        "power_models_prometheus_url": telemetry["url"],
        "power_models_util_query": "test_cpu_util_percent",
        "power_models_power_query": "test_node_power_watts",
        "power_models_window": "4h",
        "power_models_step": "1m",
        "power_models_window_end": str(telemetry["end"]),
        "power_models_rules_namespace": "kube-system",
    }
    values.update(extra)
    return values


def annotations(core, name):
    return core.read_node(name).metadata.annotations or {}


# make lifecycle, not make test, for make test's time (67-78 s)
@pytest.mark.lifecycle
def test_power_models_publish_and_rerun(lab, telemetry, tmp_path):
    from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import predict_power

    core = client.CoreV1Api(lab.api_client())
    modelled, sparse = telemetry["modelled"], telemetry["sparse"]
    # Another field manager's annotation on a modelled node must survive every run.
    core.patch_node(
        modelled[0],
        {"metadata": {"annotations": {"example.com/owner": "ops"}}},
        field_manager=OTHER_MANAGER,
    )

    first = run_playbook(PLAYBOOK, lab.inventory, role_vars(telemetry))
    assert first.rc == 0 and first.failed == 0, first
    assert first.changed > 0, first

    # Peaks ConfigMap: exactly the modelled nodes, exactly k0/k1/k2 (upstream decodes strictly).
    cm = core.read_namespaced_config_map("peaks-node-power-model", "kube-system")
    peaks = json.loads(cm.data["power_model"])
    assert sorted(peaks) == sorted(modelled)
    for params in peaks.values():
        assert sorted(params) == ["k0", "k1", "k2"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in params.values())

    # Annotations: the default-kind model and its quality on modelled nodes only.
    for node, watts in zip(modelled, CURVES, strict=True):
        ann = annotations(core, node)
        model = json.loads(ann[f"{PREFIX}/power-model"])
        quality = json.loads(ann[f"{PREFIX}/power-model-quality"])
        assert model["kind"] == "piecewise_linear"
        assert quality["samples"] == POINTS
        for util in (0.0, 25.0, 50.0, 75.0, 100.0):
            assert predict_power(model, util) == pytest.approx(curve(watts, util), rel=0.05)
    assert annotations(core, modelled[0])["example.com/owner"] == "ops"
    for node in [lab.control_plane_node] + ([sparse] if sparse else []):
        assert f"{PREFIX}/power-model" not in annotations(core, node), node
    if sparse:
        assert f"{sparse}: too few samples (10 samples" in first.stdout

    # Field ownership: our manager owns our two annotations on the node and nothing else.
    managed = core.read_node(modelled[0]).metadata.managed_fields
    ours = [m for m in managed if m.manager == "poweraware-power-models"]
    assert len(ours) == 1 and ours[0].operation == "Apply"
    owned = ours[0].fields_v1["f:metadata"]
    assert set(owned) == {"f:annotations"}
    assert set(owned["f:annotations"]) == {f"f:{PREFIX}/power-model", f"f:{PREFIX}/power-model-quality"}

    # Recording rules: valid for promtool, and they compute P(u + d) - P(u) from the published model.
    rules_cm = core.read_namespaced_config_map("power-models-rules", "kube-system")
    rules_file = tmp_path / "power_models.rules.yml"
    rules_file.write_text(rules_cm.data["power_models.rules.yml"])
    check = subprocess.run(
        [telemetry["promtool"], "check", "rules", str(rules_file)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    rules = yaml.safe_load(rules_file.read_text())["groups"][0]["rules"]
    assert [r["labels"]["reference_cpu"] for r in rules[1:]] == ["1"] * len(modelled)
    assert_rules_evaluate(core, telemetry["promtool"], rules_file, modelled, tmp_path)

    # A re-run with the same window changes nothing; check mode neither. Side by side, as the site
    # fixture runs its own: both must change nothing, so neither sees the other's work.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rerun = pool.submit(run_playbook, PLAYBOOK, lab.inventory, role_vars(telemetry))
        checked = pool.submit(run_playbook, PLAYBOOK, lab.inventory, role_vars(telemetry), check=True, diff=True)
        second, check_run = rerun.result(), checked.result()
    assert second.rc == 0 and second.changed == 0, second
    assert check_run.rc == 0 and check_run.changed == 0, check_run

    # When the gate is raised past every node, models are withdrawn, never kept or invented.
    strict = run_playbook(PLAYBOOK, lab.inventory, role_vars(telemetry, power_models_min_samples=100000))
    assert strict.rc == 0 and strict.failed == 0, strict
    assert (
        json.loads(core.read_namespaced_config_map("peaks-node-power-model", "kube-system").data["power_model"]) == {}
    )
    for node in modelled:
        ann = annotations(core, node)
        assert f"{PREFIX}/power-model" not in ann and f"{PREFIX}/power-model-quality" not in ann
    assert annotations(core, modelled[0])["example.com/owner"] == "ops"
    rules = yaml.safe_load(
        core.read_namespaced_config_map("power-models-rules", "kube-system").data["power_models.rules.yml"]
    )["groups"][0]["rules"]
    assert [r["record"] for r in rules] == ["poweraware:node_cpu_utilisation:percent"]

    # ... and publishing again restores them; fail_on_unmodelled turns the report into a failure.
    again = run_playbook(PLAYBOOK, lab.inventory, role_vars(telemetry))
    assert again.rc == 0 and again.changed > 0, again
    assert sorted(
        json.loads(core.read_namespaced_config_map("peaks-node-power-model", "kube-system").data["power_model"])
    ) == sorted(modelled)
    failing = run_playbook(PLAYBOOK, lab.inventory, role_vars(telemetry, power_models_fail_on_unmodelled=True))
    assert failing.rc != 0 and "Nodes without a model" in failing.stdout, failing
    assert failing.changed == 0, failing


def assert_rules_evaluate(core, promtool, rules_file, nodes, tmp_path):
    """``promtool test rules``: feed utilisation series, expect the jump predicted by each node's model."""
    from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import predict_power
    from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import parse_cpu_quantity

    series, expected = [], []
    for node in nodes:
        obj = core.read_node(node)
        model = json.loads(obj.metadata.annotations[f"{PREFIX}/power-model"])
        d = 100.0 * 1000 / parse_cpu_quantity(obj.status.capacity["cpu"])
        for index, util in enumerate((3.0, 42.5, 99.0 - d / 2)):
            series.append({"series": f'test_cpu_util_percent{{node="{node}",case="{index}"}}', "values": f"{util}x5"})
            upper = util + d
            top = predict_power(model, 100.0)
            slope = top - predict_power(model, model["params"]["knot_util"][-2])
            slope /= 100.0 - model["params"]["knot_util"][-2]
            after = predict_power(model, min(upper, 100.0)) + slope * max(upper - 100.0, 0.0)
            expected.append(
                {
                    "labels": f'node_power_model_jump_watts{{node="{node}",case="{index}",reference_cpu="1"}}',
                    "value": round(after - predict_power(model, util), 6),
                }
            )
    test = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [],
                "alert_rule_test": [],
            }
        ],
    }
    # The recorded jump for each input series at 2m, compared with a tolerance by promtool's own
    # float comparison (exact to the printed digits), so we compare through a PromQL expression.
    for exp in expected:
        test["tests"][0]["promql_expr_test"].append(
            {
                "expr": f"abs({exp['labels']} - {exp['value']}) < bool 1e-4",
                "eval_time": "2m",
                "exp_samples": [{"labels": "{" + exp["labels"].split("{", 1)[1], "value": 1}],
            }
        )
    test_file = tmp_path / "rules_test.yml"
    test_file.write_text(yaml.safe_dump(test))
    result = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
