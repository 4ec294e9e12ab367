"""promtool checks of the power recording rules the prometheus role deploys.

The rule file is roles/prometheus/files/power_rules.yml, the very file the role puts into
Prometheus (managed mode) or into a PrometheusRule / rule file (existing mode). The promtool unit
tests in tests/integration/promtool/ cover nodes with one, two and four packages. Each runs with two
promtools: the one of the release the role deploys (Prometheus 3, built from its Go module as the lab
builds it) and Debian's (a 2.x, as an existing Prometheus a user keeps may be): the rules mean the
same to both.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import test_collectd_rapl
import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
collectd_run = test_collectd_rapl.collectd_run  # the real-collectd fixture, shared
RULES = REPO_ROOT / "roles" / "prometheus" / "files" / "power_rules.yml"
PROMTOOL_DIR = pathlib.Path(__file__).resolve().parent / "promtool"
TESTS = {
    1: PROMTOOL_DIR / "power_rules_1_socket_test.yml",
    2: PROMTOOL_DIR / "power_rules_2_sockets_test.yml",
    4: PROMTOOL_DIR / "power_rules_4_sockets_test.yml",
}
DEBIAN_PROMTOOL = shutil.which("promtool")
# The TAS power demo's own rules, verbatim, and their promtool test on the demo's series names
DEMO_RULES = PROMTOOL_DIR / "tas_power_demo_rules.yml"
DEMO_TEST = PROMTOOL_DIR / "tas_power_demo_rules_test.yml"

pytestmark = [pytest.mark.standalone]


@pytest.fixture(scope="module")
def release_bin() -> pathlib.Path:
    """The directory of the role's Prometheus release: prometheus and promtool (lab/assets.py)."""
    from lab import assets

    return assets.ensure_built(next(c for c in assets.COMPONENTS if c.name == "prometheus"))


@pytest.fixture(scope="module", params=["release", "debian"])
def promtool_bin(request, release_bin) -> str:
    if request.param == "release":
        return str(release_bin / "promtool")
    if DEBIAN_PROMTOOL is None:
        pytest.fail("promtool is not installed: install the Debian package prometheus (`make system-deps` does)")
    return DEBIAN_PROMTOOL


# The upstream power demo's rule, translated to our metric names: it hard-codes two packages.
UPSTREAM_TWO_SOCKET_AVG = (
    '100 * ((sum without (type) (collectd_rapl_power{type="package", rapl="package-0"})'
    ' / sum without (type) (collectd_rapl_power{type="tdp", rapl="package-0"}))'
    ' + on (node) (sum without (type, rapl) (collectd_rapl_power{type="package", rapl="package-1"})'
    ' / sum without (type, rapl) (collectd_rapl_power{type="tdp", rapl="package-1"}))) / 2'
)


def promtool(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, check=False, timeout=120)


def test_rule_file_is_valid_and_complete(promtool_bin):
    proc = promtool(promtool_bin, "check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert "node_package_power_avg" in records
    assert "node_package_power_per_pod" in records
    assert "instance:node_cpu:ratio" in records  # load-watcher's CPU series


@pytest.mark.parametrize("sockets", sorted(TESTS))
def test_promtool_rule_tests(sockets, promtool_bin):
    test_file = TESTS[sockets]
    # the tests load the role's own rule file, not a copy
    rule_files = yaml.safe_load(test_file.read_text())["rule_files"]
    assert [(test_file.parent / f).resolve() for f in rule_files] == [RULES]
    proc = promtool(promtool_bin, "test", "rules", str(test_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def _expected(test_file: pathlib.Path, expr: str) -> dict[str, float]:
    """node -> the value a promtool test file expects of ``expr`` at its first such check."""
    test = yaml.safe_load(test_file.read_text())["tests"][0]
    check = next(c for c in test["promql_expr_test"] if c["expr"] == expr)
    node_label = re.compile(r'node="([^"]+)"')
    return {node_label.search(sample["labels"]).group(1): sample["value"] for sample in check["exp_samples"]}


def test_the_power_demos_own_rules_give_ours_on_the_series_we_export(promtool_bin):
    """The demo's recording rules as the demo ships them, on the demo's names collectd exports beside
    ours (collectd_seed_series_names), for the two-socket nodes of our own test: the same percent of
    TDP per node, the same per-pod value, as our rules give."""
    assert yaml.safe_load(DEMO_TEST.read_text())["rule_files"] == [DEMO_RULES.name]
    proc = promtool(promtool_bin, "test", "rules", str(DEMO_TEST))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout
    ours = _expected(TESTS[2], "node_package_power_avg")
    assert _expected(DEMO_TEST, "node_package_power_avg") == ours == {"n1": 62.5, "n2": 40}
    assert _expected(DEMO_TEST, "node_package_power_per_pod") == {"n1": 62.5, "n2": 40}


@pytest.mark.parametrize("sockets", [1, 4])
def test_a_two_socket_rule_fails_the_tests(tmp_path, sockets, promtool_bin):
    """The tests catch the upstream defect: a rule hard-coded for two packages."""
    rules = yaml.safe_load(RULES.read_text())
    for rule in rules["groups"][0]["rules"]:
        if rule.get("record") == "node_package_power_avg":
            rule["expr"] = UPSTREAM_TWO_SOCKET_AVG
    bad_rules = tmp_path / "two_socket_rules.yml"
    bad_rules.write_text(yaml.safe_dump(rules))
    assert promtool(promtool_bin, "check", "rules", str(bad_rules)).returncode == 0
    test = yaml.safe_load(TESTS[sockets].read_text())
    test["rule_files"] = [str(bad_rules)]
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(test))
    proc = promtool(promtool_bin, "test", "rules", str(test_file))
    assert proc.returncode != 0, proc.stdout
    assert "node_package_power_avg" in proc.stdout + proc.stderr


# --- end to end with real daemons ------------------------------------------------------------------
# Real collectd (fake RAPL tree) -> real Prometheus (the role's release) with the role's rule file ->
# the adapter's series queries (rendered from the prometheus_adapter role) against Prometheus' API.
KSM_METRICS = """# TYPE kube_pod_info gauge
kube_pod_info{namespace="demo",pod="a",uid="1",node="lab-node",host_ip="10.0.0.1"} 1
kube_pod_info{namespace="demo",pod="b",uid="2",node="lab-node",host_ip="10.0.0.1"} 1
# TYPE kube_pod_status_phase gauge
kube_pod_status_phase{namespace="demo",pod="a",uid="1",phase="Running"} 1
kube_pod_status_phase{namespace="demo",pod="b",uid="2",phase="Running"} 1
"""


@pytest.fixture
def fake_kube_state_metrics():
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            body = KSM_METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    thread.join()


def _prom_query(port: int, path: str, **params) -> dict:
    import json
    import urllib.parse
    import urllib.request

    url = f"http://127.0.0.1:{port}{path}?" + urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())["data"]


@pytest.mark.slow
def test_collectd_to_prometheus_to_adapter_queries(collectd_run, fake_kube_state_metrics, tmp_path, release_bin):
    import importlib.util
    import socket
    import time

    spec = importlib.util.spec_from_file_location(
        "adapter_naming", REPO_ROOT / "tests" / "unit" / "telemetry" / "test_adapter_naming.py"
    )
    naming = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(naming)
    render_config, served_name = naming.render_config, naming.served_name

    _tree, collectd_port, _log = collectd_run
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prom_port = s.getsockname()[1]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "collectd",
                "static_configs": [{"targets": [f"127.0.0.1:{collectd_port}"], "labels": {"node": "lab-node"}}],
                "metric_relabel_configs": [{"regex": "exported_instance", "action": "labeldrop"}],
            },
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{fake_kube_state_metrics}"]}],
            },
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [
            str(release_bin / "prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "w"),  # noqa: SIM115 - closed with the process
    )
    try:
        deadline = time.monotonic() + 60
        avg = per_pod = watts_per_pod = []
        while time.monotonic() < deadline:
            try:
                avg = _prom_query(prom_port, "/api/v1/query", query="node_package_power_avg")["result"]
                per_pod = _prom_query(prom_port, "/api/v1/query", query="node_package_power_per_pod")["result"]
                watts_per_pod = _prom_query(prom_port, "/api/v1/query", query="node_package_power_watts_per_pod")[
                    "result"
                ]
            except OSError:
                pass
            if avg and per_pod and watts_per_pod:
                break
            time.sleep(0.5)
        assert avg, (tmp_path / "prometheus.log").read_text()[-3000:]
        # package-0: 80 W of 200 W, package-1: 50 W of 150 W (package-2 unreadable: no power, not averaged)
        assert [r["metric"] for r in avg] == [{"__name__": "node_package_power_avg", "node": "lab-node"}]
        percent = 100 * (80 / 200 + 50 / 150) / 2
        assert float(avg[0]["value"][1]) == pytest.approx(percent, rel=0.05)
        # the demo's meaning: each running pod carries its node's percent of TDP
        assert sorted(r["metric"]["pod"] for r in per_pod) == ["a", "b"]
        for r in per_pod:
            assert float(r["value"][1]) == pytest.approx(percent, rel=0.05)
        # ours: the node's watts shared by its running pods
        assert sorted(r["metric"]["pod"] for r in watts_per_pod) == ["a", "b"]
        for r in watts_per_pod:
            assert float(r["value"][1]) == pytest.approx((80 + 50) / 2, rel=0.05)
        # the demo's own rule, as the demo ships it, on the demo's names this collectd exports too:
        # the same percent of TDP (the third package, unreadable, is in neither)
        demo_rule = yaml.safe_load(DEMO_RULES.read_text())["groups"][0]["rules"][0]
        assert demo_rule["record"] == "node_package_power_avg"
        demo = _prom_query(prom_port, "/api/v1/query", query=demo_rule["expr"])["result"]
        assert [r["metric"]["node"] for r in demo] == ["lab-node"], demo
        assert float(demo[0]["value"][1]) == pytest.approx(float(avg[0]["value"][1]), rel=0.05)

        # The adapter's series queries against this Prometheus, and the names it would serve.
        adapter = render_config()
        served = {}
        for rule in adapter["rules"]:
            series = _prom_query(prom_port, "/api/v1/series", **{"match[]": rule["seriesQuery"]})
            kinds = ",".join(sorted(o["resource"] for o in rule["resources"]["overrides"].values()))
            for labels in series:
                served.setdefault(kinds, set()).add(served_name(rule, labels["__name__"]))
        assert served == {
            "node": {"package_power_avg", "package_power_watts"},
            "namespace,pod": {"node_package_power_per_pod", "node_package_power_watts_per_pod"},
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)
