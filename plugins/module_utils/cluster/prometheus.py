# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-node (utilisation, power) samples from Prometheus range queries.

Pure Python, no Ansible imports, Python 3.9 compatible: the HTTP call is done by the module
(``prometheus_power_samples_info``); this file builds the request, reads the HTTP API's
``query_range`` answers (``{"status": "success", "data": {"resultType": "matrix", "result":
[{"metric": {...}, "values": [[<unix time>, "<value>"], ...]}]}}``) and joins the two series of each
node on their evaluation timestamps.
"""

from __future__ import annotations

import datetime
import math
import re

__all__ = [
    "MAX_POINTS",
    "PrometheusError",
    "join_samples",
    "parse_duration",
    "parse_matrix",
    "parse_time",
    "query_range_params",
    "service_url",
    "storage_errors",
]

# Prometheus refuses range queries with more than 11,000 points per series.
MAX_POINTS = 11000

_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class PrometheusError(ValueError):
    """Bad options or an answer that cannot be used; the message says what and how to fix it."""


def parse_duration(value, name):
    """Seconds in a Prometheus duration (``5m``, ``1h30m``, ``2d``) or a plain number of seconds."""
    if isinstance(value, bool):
        raise PrometheusError(f"{name}: expected a duration like '5m' or a number of seconds, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise PrometheusError(
                    f"{name}: {value!r} is not a duration; use Prometheus units like '30s', '5m', '1h30m', '2d'"
                ) from None
            seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise PrometheusError(f"{name}: must be a positive duration, got {value!r}")
    return seconds


def parse_time(value, name):
    """Unix seconds from a number, a numeric string or an RFC 3339 timestamp."""
    if isinstance(value, bool):
        raise PrometheusError(f"{name}: expected a unix time or an RFC 3339 timestamp, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        seconds = _parse_number(text)
        if seconds is None:
            parsed = _parse_rfc3339(text, name, value)
            if parsed.tzinfo is None:
                raise PrometheusError(f"{name}: {value!r} has no time zone; add Z or an offset like +01:00")
            seconds = parsed.timestamp()
    if not math.isfinite(seconds) or seconds < 0:
        raise PrometheusError(f"{name}: must be a time after 1970, got {value!r}")
    return seconds


def _parse_number(text):
    try:
        return float(text)
    except ValueError:
        return None


def _parse_rfc3339(text, name, value):
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PrometheusError(
            f"{name}: {value!r} is neither a unix time nor an RFC 3339 timestamp (e.g. 2026-01-01T00:00:00Z)"
        ) from None


def query_range_params(query, start, end, step):
    """Form parameters of ``/api/v1/query_range``; validates the window up front."""
    if not isinstance(query, str) or not query.strip():
        raise PrometheusError("query: must be a non-empty PromQL expression")
    if end <= start:
        raise PrometheusError(f"the window is empty: start {start} is not before end {end}")
    points = int((end - start) // step) + 1
    if points > MAX_POINTS:
        raise PrometheusError(
            f"the window has {points} points per series at step {step:g}s; Prometheus allows {MAX_POINTS}. Use a "
            "larger step or a shorter window"
        )
    return {"query": query, "start": _fmt(start), "end": _fmt(end), "step": _fmt(step)}


def _fmt(seconds):
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def parse_matrix(answer, node_label, what):
    """``{node: {timestamp: value}}`` from a query_range answer; one series per node required."""
    if not isinstance(answer, dict):
        raise PrometheusError(f"{what}: the answer is not a JSON object; is the URL a Prometheus server?")
    if answer.get("status") != "success":
        raise PrometheusError(
            f"{what}: Prometheus answered {answer.get('errorType', 'an error')}: {answer.get('error', 'no message')}"
        )
    data = answer.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(
            f"{what}: expected a range vector (matrix), got {data.get('resultType')!r}; the expression must return an "
            "instant vector"
        )
    series = {}
    unlabelled = 0
    for item in data.get("result") or []:
        labels = item.get("metric") or {}
        node = labels.get(node_label)
        if not node:
            unlabelled += 1
            continue
        if node in series:
            raise PrometheusError(
                f"{what}: the expression returns more than one series for {node_label}={node!r}; aggregate it per "
                f"node, e.g. sum by ({node_label}) (...)"
            )
        points = {}
        for pair in item.get("values") or []:
            try:
                stamp, value = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                raise PrometheusError(f"{what}: malformed sample {pair!r} for node {node!r}") from None
            points[stamp] = value
        series[node] = points
    if unlabelled and not series:
        raise PrometheusError(
            f"{what}: {unlabelled} series but none has the label {node_label!r}; keep it in the expression (e.g. avg "
            f"by ({node_label}) (...))"
        )
    return series


def join_samples(util_series, power_series):
    """Pair utilisation and power of each node at equal timestamps.

    Returns ``(samples, dropped)``: ``samples`` maps node -> list of ``{"time", "util", "watts"}``
    sorted by time; ``dropped`` maps node -> number of points left out (no partner at that
    timestamp, utilisation outside 0..100 beyond rounding, negative or non-finite power).
    Utilisation within 0.5 of the bounds is clamped (counters sampled a hair apart).
    """
    samples = {}
    dropped = {}
    for node in sorted(set(util_series) | set(power_series)):
        util = util_series.get(node, {})
        power = power_series.get(node, {})
        kept = []
        lost = len(set(util) ^ set(power))
        for stamp in sorted(set(util) & set(power)):
            u, w = util[stamp], power[stamp]
            if not (math.isfinite(u) and math.isfinite(w)) or w < 0 or u < -0.5 or u > 100.5:
                lost += 1
                continue
            kept.append({"time": stamp, "util": min(max(u, 0.0), 100.0), "watts": w})
        samples[node] = kept
        dropped[node] = lost
    return samples, dropped


def service_url(services, port_name="http"):
    """``http://<ClusterIP>:<port>`` of the first Service in ``services`` (k8s_info resources) that
    has a ClusterIP, at its port named ``port_name`` (its only port when none has that name); ``""``
    when there is none. A node reaches ClusterIPs (kube-proxy) but resolves no cluster DNS names,
    so the address, not the Service's name. IPv6 addresses are bracketed."""
    for service in services or []:
        spec = (service or {}).get("spec") or {}
        ip = spec.get("clusterIP") or ""
        ports = spec.get("ports") or []
        if not ip or ip == "None" or not ports:
            continue  # headless, or nothing to call
        named = [p for p in ports if p.get("name") == port_name]
        if not named and len(ports) != 1:
            continue
        port = (named or ports)[0].get("port")
        host = f"[{ip}]" if ":" in ip else ip
        return f"http://{host}:{int(port)}"
    return ""


# Prometheus' flag grammars: --storage.tsdb.retention.time is a model.Duration (units in this order,
# each at most once); --storage.tsdb.retention.size is alecthomas/units Base2Bytes (a sequence of
# numbers with B, KB..EB or KiB..EiB, all powers of 1024, or a bare 0).
_FLAG_DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")
_FLAG_BYTES = re.compile(r"^(?:0|(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[KMGTPE]i?B|B))+)$")


def storage_errors(storage, size, retention, retention_size, parse_size):
    """Every problem with the managed Prometheus' storage variables, each naming the variable, the
    value, the reason and the fix (``parse_size`` reads a Kubernetes byte quantity or raises
    ValueError: the quantity parser, injected so this file stays free of it)."""
    errors = []
    if storage not in ("emptyDir", "persistentVolumeClaim"):
        errors.append(f"prometheus_storage={storage!r} is not a storage kind: use emptyDir or persistentVolumeClaim")
    try:
        if parse_size(size) <= 0:
            raise ValueError("it is zero")
    except ValueError as err:
        errors.append(
            f"prometheus_storage_size_limit={size!r} is not a volume size ({err}): write a Kubernetes quantity "
            "such as '4Gi'"
        )
    if not isinstance(retention, str) or not retention or not _FLAG_DURATION.match(retention) or retention == "0":
        errors.append(
            f"prometheus_retention={retention!r} is not a Prometheus duration: write units in the order y, w, d, "
            "h, m, s, ms, such as '24h' or '15d'"
        )
    bad_size = not isinstance(retention_size, str) or not _FLAG_BYTES.match(retention_size)
    if retention_size not in ("", None) and bad_size:
        errors.append(
            f"prometheus_retention_size={retention_size!r} is not a Prometheus size: write a number and B, KB, MB, "
            "GB, TB (powers of 1024, as Prometheus reads them), such as '3GB', or leave it empty"
        )
    return errors
