"""plugins/module_utils/cluster/prometheus.py: exact messages, bounds and units (the Prometheus HTTP API and
duration grammar are the oracle: https://prometheus.io/docs/prometheus/latest/querying/api/)."""

from __future__ import annotations

import math

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import prometheus as prom


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
