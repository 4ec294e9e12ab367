"""plugins/module_utils/cluster/prometheus.py: exact messages, bounds and units (the Prometheus HTTP API and
duration grammar are the oracle: https://prometheus.io/docs/prometheus/latest/querying/api/).

Reading (utilisation, power) samples from Prometheus: parsing, joining, and the module end to end
against a local HTTP server that answers like Prometheus' query_range endpoint.
"""

from __future__ import annotations

import http.server
import io
import json
import math
import threading
import urllib.parse
from contextlib import redirect_stdout

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import prometheus as prom
from ansible_collections.poweraware.k8s.plugins.modules import prometheus_power_samples_info as module


def message(call, *args):
    with pytest.raises(prom.PrometheusError) as exc:
        call(*args)
    return str(exc.value)


def test_prometheus_error_is_a_value_error_and_the_point_limit_is_prometheus_own():
    assert issubclass(prom.PrometheusError, ValueError)
    assert prom.MAX_POINTS == 11000


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1ms", 0.001),
        ("1s", 1),
        ("1m", 60),
        ("1h", 3600),
        ("1d", 86400),
        ("1w", 604800),
        ("1y", 31536000),
        ("1h30m15s", 5415),
        ("2w3d", 2 * 604800 + 3 * 86400),
        ("  5m ", 300),
        ("0.5", 0.5),
        (2, 2.0),
        (0.25, 0.25),
    ],
)
def test_parse_duration_units(value, seconds):
    assert prom.parse_duration(value, "step") == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "step: expected a duration like '5m' or a number of seconds, got True"),
        ("5 minutes", "step: '5 minutes' is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"),
        ("m5", "step: 'm5' is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"),
        ("5m3", "step: '5m3' is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"),
        ("x5m", "step: 'x5m' is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"),
        ("", "step: '' is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"),
        (0, "step: must be a positive duration, got 0"),
        ("0s", "step: must be a positive duration, got '0s'"),
        (-1, "step: must be a positive duration, got -1"),
        (math.inf, "step: must be a positive duration, got inf"),
        ("nan", "step: must be a positive duration, got 'nan'"),
    ],
)
def test_parse_duration_messages(value, text):
    assert message(prom.parse_duration, value, "step") == text


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (1767225600.5, 1767225600.5),
        (" 1767225600 ", 1767225600.0),
        ("2026-01-01T00:00:00z", 1767225600.0),
        ("2026-01-01T00:00:00.250Z", 1767225600.25),
        ("2025-12-31T19:00:00-05:00", 1767225600.0),
    ],
)
def test_parse_time(value, seconds):
    assert prom.parse_time(value, "end") == seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (False, "end: expected a unix time or an RFC 3339 timestamp, got False"),
        ("2026-01-01T00:00:00", "end: '2026-01-01T00:00:00' has no time zone; add Z or an offset like +01:00"),
        (
            "yesterday",
            "end: 'yesterday' is neither a unix time nor an RFC 3339 timestamp (e.g. 2026-01-01T00:00:00Z)",
        ),
        (-1, "end: must be a time after 1970, got -1"),
        ("-0.5", "end: must be a time after 1970, got '-0.5'"),
        (math.nan, "end: must be a time after 1970, got nan"),
        ("inf", "end: must be a time after 1970, got 'inf'"),
    ],
)
def test_parse_time_messages(value, text):
    assert message(prom.parse_time, value, "end") == text


def test_query_range_params_format_and_bounds():
    assert prom.query_range_params("up", 0.5, 6.25, 0.001) == {
        "query": "up",
        "start": "0.5",
        "end": "6.25",
        "step": "0.001",
    }
    assert prom.query_range_params("up", 10, 11, 1)["end"] == "11"
    # exactly MAX_POINTS points is allowed, one more is not
    assert prom.query_range_params("up", 0, 10999, 1)["end"] == "10999"
    assert message(prom.query_range_params, "up", 0, 11000, 1) == (
        "the window has 11001 points per series at step 1s; Prometheus allows 11000. Use a larger step "
        "or a shorter window"
    )
    assert "at step 0.5s" in message(prom.query_range_params, "up", 0, 6000, 0.5)
    # Prometheus accepts 1100 s at a 100 ms step (it divides whole durations: 11000 steps, not more than
    # 11000); so does the module, whose float floor division gives 1100 // 0.1 == 10999.0 (1100 / 0.1 is 11000.0)
    assert prom.query_range_params("up", 0, 1100, 0.1)["step"] == "0.1"
    assert message(prom.query_range_params, "up", 10, 9, 1) == "the window is empty: start 10 is not before end 9"
    assert message(prom.query_range_params, " ", 0, 10, 1) == "query: must be a non-empty PromQL expression"
    assert message(prom.query_range_params, None, 0, 10, 1) == "query: must be a non-empty PromQL expression"


def matrix(*series):
    return {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}


def test_parse_matrix_messages():
    assert message(prom.parse_matrix, [], "node", "q") == (
        "q: the answer is not a JSON object; is the URL a Prometheus server?"
    )
    assert message(prom.parse_matrix, {"status": "error"}, "node", "q") == (
        "q: Prometheus answered an error: no message"
    )
    assert message(prom.parse_matrix, {"status": "success"}, "node", "q") == (
        "q: expected a range vector (matrix), got None; the expression must return an instant vector"
    )
    assert message(prom.parse_matrix, matrix({"metric": {"node": "a"}, "values": [[1]]}), "node", "q") == (
        "q: malformed sample [1] for node 'a'"
    )
    assert message(prom.parse_matrix, matrix({"metric": {"node": "a"}, "values": [[1, "x"]]}), "node", "q") == (
        "q: malformed sample [1, 'x'] for node 'a'"
    )
    assert message(prom.parse_matrix, matrix({"metric": {"node": "a"}, "values": [None]}), "node", "q") == (
        "q: malformed sample None for node 'a'"
    )
    two = matrix({"metric": {"host": "a"}, "values": []}, {"metric": {"host": "a"}, "values": []})
    assert message(prom.parse_matrix, two, "host", "q") == (
        "q: the expression returns more than one series for host='a'; aggregate it per node, e.g. sum by (host) (...)"
    )
    unlabelled = matrix({"metric": {}, "values": []}, {"values": []})
    assert message(prom.parse_matrix, unlabelled, "node", "q") == (
        "q: 2 series but none has the label 'node'; keep it in the expression (e.g. avg by (node) (...))"
    )


def test_parse_matrix_keeps_labelled_series_and_skips_unlabelled_ones():
    answer = matrix(
        {"metric": {"node": "a"}, "values": [["1.5", "2"], [3, "4.25"]]},
        {"metric": {"node": ""}, "values": [[1, "9"]]},
        {"metric": {"instance": "x"}, "values": [[1, "9"]]},
        {"metric": {"node": "b"}},
    )
    assert prom.parse_matrix(answer, "node", "q") == {"a": {1.5: 2.0, 3.0: 4.25}, "b": {}}
    assert prom.parse_matrix(matrix(), "node", "q") == {}
    assert prom.parse_matrix({"status": "success", "data": {"resultType": "matrix"}}, "node", "q") == {}


def test_join_samples_bounds_clamping_and_counts():
    util = {"a": {1.0: -0.5, 2.0: 100.5, 3.0: -0.6, 4.0: 100.6, 5.0: 50.0, 6.0: math.nan, 7.0: 5.0, 8.0: 0.0}}
    power = {"a": {1.0: 10.0, 2.0: 20.0, 3.0: 30.0, 4.0: 40.0, 5.0: math.inf, 6.0: 60.0, 7.0: -0.1, 8.0: 0.0}}
    samples, dropped = prom.join_samples(util, power)
    assert samples["a"] == [
        {"time": 1.0, "util": 0.0, "watts": 10.0},
        {"time": 2.0, "util": 100.0, "watts": 20.0},
        {"time": 8.0, "util": 0.0, "watts": 0.0},
    ]
    assert dropped == {"a": 5}
    samples, dropped = prom.join_samples({"b": {2.0: 1.0, 1.0: 2.0}}, {"b": {1.0: 5.0, 2.0: 6.0}})
    assert [s["time"] for s in samples["b"]] == [1.0, 2.0]  # sorted by time
    assert dropped == {"b": 0}
    assert prom.join_samples({}, {}) == ({}, {})


def test_parse_matrix_names_the_result_type_it_got():
    vector = {"status": "success", "data": {"resultType": "vector", "result": []}}
    assert message(prom.parse_matrix, vector, "node", "q") == (
        "q: expected a range vector (matrix), got 'vector'; the expression must return an instant vector"
    )


def matrix_of(series):
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


def test_parse_time_forms():
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
    answer = matrix_of([({"node": "a"}, [(1, 10), (2, 20)]), ({"node": "b"}, [(1, 5)])])
    assert prom.parse_matrix(answer, "node", "util_query") == {"a": {1.0: 10.0, 2.0: 20.0}, "b": {1.0: 5.0}}
    with pytest.raises(prom.PrometheusError, match="bad_data: parse error"):
        prom.parse_matrix({"status": "error", "errorType": "bad_data", "error": "parse error"}, "node", "q")
    with pytest.raises(prom.PrometheusError, match=r"sum by \(node\)"):
        prom.parse_matrix(
            matrix_of([({"node": "a", "cpu": "0"}, [(1, 1)]), ({"node": "a", "cpu": "1"}, [(1, 1)])]), "node", "q"
        )
    with pytest.raises(prom.PrometheusError, match="none has the label 'node'"):
        prom.parse_matrix(matrix_of([({"instance": "x"}, [(1, 1)])]), "node", "q")
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
        "util": matrix_of([({"node": "w1"}, [(end - 60, 10), (end, 20)]), ({"node": "w2"}, [(end, 30)])]),
        "power": matrix_of([({"node": "w1"}, [(end - 60, 110), (end, 120)])]),
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
