"""Reading (utilisation, power) samples from Prometheus: parsing, joining, and the module end to end
against a local HTTP server that answers like Prometheus' query_range endpoint."""

from __future__ import annotations

import http.server
import io
import json
import threading
import urllib.parse
from contextlib import redirect_stdout

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import prometheus as prom
from ansible_collections.poweraware.k8s.plugins.modules import prometheus_power_samples_info as module


def matrix(series):
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": labels, "values": [[t, str(v)] for t, v in points]} for labels, points in series],
        },
    }


# --- pure helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("1h30m", 5400), ("2d", 172800), ("90", 90), (15, 15), ("500ms", 0.5)]
)
def test_parse_duration(text, seconds):
    assert prom.parse_duration(text, "step") == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "5M", "-5m", "0", True, "1h 30m"])
def test_parse_duration_rejects(text):
    with pytest.raises(prom.PrometheusError, match="step"):
        prom.parse_duration(text, "step")


def test_parse_time():
    assert prom.parse_time("1767225600", "end") == 1767225600
    assert prom.parse_time("2026-01-01T00:00:00Z", "end") == 1767225600
    assert prom.parse_time("2026-01-01T01:00:00+01:00", "end") == 1767225600
    for bad in ("2026-01-01T00:00:00", "yesterday", "-1"):
        with pytest.raises(prom.PrometheusError, match="end"):
            prom.parse_time(bad, "end")


def test_query_range_params_limits_points():
    params = prom.query_range_params("up", 0, 3600, 60)
    assert params == {"query": "up", "start": "0", "end": "3600", "step": "60"}
    with pytest.raises(prom.PrometheusError, match="11000"):
        prom.query_range_params("up", 0, 86400 * 7, 15)
    with pytest.raises(prom.PrometheusError, match="empty"):
        prom.query_range_params("up", 10, 10, 1)


def test_parse_matrix_and_errors():
    answer = matrix([({"node": "a"}, [(1, 10), (2, 20)]), ({"node": "b"}, [(1, 5)])])
    assert prom.parse_matrix(answer, "node", "util_query") == {"a": {1.0: 10.0, 2.0: 20.0}, "b": {1.0: 5.0}}
    with pytest.raises(prom.PrometheusError, match="bad_data: parse error"):
        prom.parse_matrix({"status": "error", "errorType": "bad_data", "error": "parse error"}, "node", "q")
    with pytest.raises(prom.PrometheusError, match=r"sum by \(node\)"):
        prom.parse_matrix(
            matrix([({"node": "a", "cpu": "0"}, [(1, 1)]), ({"node": "a", "cpu": "1"}, [(1, 1)])]), "node", "q"
        )
    with pytest.raises(prom.PrometheusError, match="none has the label 'node'"):
        prom.parse_matrix(matrix([({"instance": "x"}, [(1, 1)])]), "node", "q")
    with pytest.raises(prom.PrometheusError, match="matrix"):
        prom.parse_matrix({"status": "success", "data": {"resultType": "vector", "result": []}}, "node", "q")


def test_join_samples_pairs_equal_timestamps_and_drops_the_rest():
    util = {"a": {1.0: 10.0, 2.0: 100.3, 3.0: 150.0, 4.0: 50.0}, "b": {1.0: 5.0}}
    power = {"a": {1.0: 100.0, 2.0: 200.0, 3.0: 300.0, 5.0: 1.0}, "c": {1.0: 3.0}}
    samples, dropped = prom.join_samples(util, power)
    assert samples["a"] == [
        {"time": 1.0, "util": 10.0, "watts": 100.0},
        {"time": 2.0, "util": 100.0, "watts": 200.0},  # 100.3 % clamped
    ]
    assert dropped == {"a": 3, "b": 1, "c": 1}  # a: 150 % out of range, t=4 and t=5 unpaired
    assert samples["b"] == [] and samples["c"] == []


# --- the module against a fake Prometheus ---------------------------------------------------


class FakePrometheus(http.server.BaseHTTPRequestHandler):
    answers: dict = {}
    requests: list = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers["Content-Length"])
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        self.requests.append({"path": self.path, "form": form, "auth": self.headers.get("Authorization")})
        answer = self.answers.get(form["query"][0])
        status = 200 if answer and answer.get("status") == "success" else 400
        body = json.dumps(answer or {"status": "error", "errorType": "bad_data", "error": "unknown query"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakePrometheus.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def run_module(args, monkeypatch):
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        module.main()
    return json.loads(out.getvalue())


def test_module_reads_and_pairs_samples(server, monkeypatch):
    end = 1767225600
    FakePrometheus.answers = {
        "util": matrix([({"node": "w1"}, [(end - 60, 10), (end, 20)]), ({"node": "w2"}, [(end, 30)])]),
        "power": matrix([({"node": "w1"}, [(end - 60, 110), (end, 120)])]),
    }
    result = run_module(
        {
            "url": server,
            "util_query": "util",
            "power_query": "power",
            "end": str(end + 30),
            "window": "2m",
            "step": "1m",
            "bearer_token": "s3cret",
            "_ansible_check_mode": True,
        },
        monkeypatch,
    )
    assert not result.get("failed"), result
    assert result["changed"] is False
    assert result["samples"]["w1"] == [
        {"time": end - 60, "util": 10.0, "watts": 110.0},
        {"time": end, "util": 20.0, "watts": 120.0},
    ]
    assert result["nodes"] == ["w1"]
    assert result["dropped"] == {"w1": 0, "w2": 1}
    assert result["window"] == {"start": end - 120, "end": end, "step": 60}  # end rounded down to the step
    assert [r["path"] for r in FakePrometheus.requests] == ["/api/v1/query_range"] * 2
    assert FakePrometheus.requests[0]["form"]["step"] == ["60"]
    assert FakePrometheus.requests[0]["auth"] == "Bearer s3cret"


def test_module_reports_prometheus_errors(server, monkeypatch):
    FakePrometheus.answers = {}
    result = run_module({"url": server, "util_query": "nope", "power_query": "power"}, monkeypatch)
    assert result["failed"]
    assert "util_query" in result["msg"] and "unknown query" in result["msg"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"url": "prometheus:9090"}, "must start with http"),
        ({"url": "http://p:9090/api/v1"}, "without /api/v1"),
        ({"url": "http://p:9090", "step": "fast"}, "step"),
        ({"url": "http://p:9090", "window": "30d", "step": "15s"}, "11000"),
        ({"url": "http://p:9090", "end": "tomorrow"}, "end"),
    ],
)
def test_module_validates_before_querying(args, message, monkeypatch):
    # No server runs here, so FakePrometheus.requests would stay empty whatever the module did:
    # count the module's HTTP requests themselves.
    queried = []

    def open_url(url, *a, **kw):
        queried.append(url)
        raise AssertionError("queried before validating")

    monkeypatch.setattr(module, "open_url", open_url)
    result = run_module({"util_query": "u", "power_query": "p", **args}, monkeypatch)
    assert result["failed"] and message in result["msg"]
    assert queried == []


def test_module_connection_failure_says_how_to_fix(monkeypatch):
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_module({"url": f"http://127.0.0.1:{port}", "util_query": "u", "power_query": "p"}, monkeypatch)
    assert result["failed"] and "reachable" in result["msg"]
