"""The Prometheus Adapter rules the prometheus_adapter role renders, and the metric names they serve.

TAS reads ``custom.metrics.k8s.io/v1beta1/nodes/*/package_power_avg``: the adapter rule strips
``node_`` from the Prometheus series ``node_package_power_avg``. Per-pod series keep their name
(``node_package_power_per_pod``, what the HPA uses). This test renders the role's template with
the role's defaults and applies the rules the way the adapter does: a series is selected by the
rule's seriesQuery label matchers, its name is mapped by ``name.matches`` / ``name.as`` (Go
regexp ``Expand``), and it is served for the resources its labels name.
"""

from __future__ import annotations

import json
import pathlib
import re

import jinja2
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "prometheus_adapter"
RULES = ROOT / "roles" / "prometheus" / "files" / "power_rules.yml"


def render_config(**overrides) -> dict:
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(overrides)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701 - YAML, not HTML
    env.filters["to_json"] = json.dumps
    return yaml.safe_load(env.from_string((ROLE / "templates" / "config.yaml.j2").read_text()).render(**variables))


_MATCHER = re.compile(r'\s*(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*')


def parse_selector(query: str) -> list[tuple[str, str, str]]:
    body = query.strip()
    assert body.startswith("{") and body.endswith("}"), query
    matchers = []
    for part in body[1:-1].split(","):
        m = _MATCHER.fullmatch(part)
        assert m, f"cannot parse matcher {part!r} in {query!r}"
        matchers.append((m["label"], m["op"], m["value"].encode().decode("unicode_escape")))
    return matchers


def selects(query: str, labels: dict[str, str]) -> bool:
    """PromQL label matching: a missing label is the empty string; regexes are fully anchored."""
    for label, op, value in parse_selector(query):
        actual = labels.get(label, "")
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
        if op == "=~" and not re.fullmatch(value, actual):
            return False
        if op == "!~" and re.fullmatch(value, actual):
            return False
    return True


def served_name(rule: dict, series: str) -> str | None:
    """name.matches / name.as as the adapter applies them (Go regexp Expand of ${n})."""
    m = re.search(rule["name"]["matches"], series)
    if not m:
        return None
    template = re.sub(r"\$\{(\d+)\}|\$(\d+)", lambda g: f"\\g<{g[1] or g[2]}>", rule["name"]["as"])
    return m.expand(template)


def serve(config: dict, series: list[dict[str, str]]) -> dict[tuple[str, str], str]:
    """{(resource kind, custom metric name): series name} for the given series."""
    served = {}
    for rule in config["rules"]:
        for labels in series:
            if not selects(rule["seriesQuery"], labels):
                continue
            name = served_name(rule, labels["__name__"])
            if name is None:
                continue
            resources = tuple(sorted(o["resource"] for o in rule["resources"]["overrides"].values()))
            key = (",".join(resources), name)
            assert key not in served or served[key] == labels["__name__"], f"two series serve {key}"
            served[key] = labels["__name__"]
    return served


# Series as Prometheus holds them: the recorded ones with their labels, and their inputs.
SERIES = [
    {"__name__": "node_package_power_avg", "node": "worker-1"},
    {"__name__": "node_package_power_watts", "node": "worker-1"},
    {"__name__": "node_package_power_per_pod", "namespace": "demo", "pod": "stress-1", "node": "worker-1"},
    {"__name__": "node_package_power_watts_per_pod", "namespace": "demo", "pod": "stress-1", "node": "worker-1"},
    {"__name__": "poweraware:pod_running_on_node", "namespace": "demo", "pod": "stress-1", "node": "worker-1"},
    {"__name__": "collectd_rapl_power", "node": "worker-1", "rapl": "package-0", "type": "package"},
    {"__name__": "kube_pod_info", "namespace": "demo", "pod": "stress-1", "node": "worker-1"},
    # node_exporter style series: no node label, not served
    {"__name__": "node_cpu_seconds_total", "instance": "10.0.0.1:9100", "cpu": "0", "mode": "idle"},
]


def test_node_prefix_is_stripped_for_node_metrics():
    served = serve(render_config(), SERIES)
    assert served[("node", "package_power_avg")] == "node_package_power_avg"
    assert served[("node", "package_power_watts")] == "node_package_power_watts"
    assert ("node", "node_package_power_avg") not in served  # the Prometheus name is NOT the metric name


def test_per_pod_metric_keeps_its_name_and_is_served_for_pods():
    served = serve(render_config(), SERIES)
    assert served[("namespace,pod", "node_package_power_per_pod")] == "node_package_power_per_pod"
    # not also served as a node metric (it carries a pod label)
    assert ("node", "package_power_per_pod") not in served


def test_nothing_else_is_served():
    assert set(serve(render_config(), SERIES)) == {
        ("node", "package_power_avg"),
        ("node", "package_power_watts"),
        ("namespace,pod", "node_package_power_per_pod"),
        ("namespace,pod", "node_package_power_watts_per_pod"),
    }


def test_every_recorded_node_metric_is_served():
    """Each node_* record of the rule file the prometheus role deploys is reachable through the adapter."""
    records = [r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    node_records = [r for r in records if r.startswith("node_")]
    assert "node_package_power_avg" in node_records
    served = set(serve(render_config(), SERIES).values())
    assert set(node_records) <= served


def test_prefix_variable_changes_the_name():
    served = serve(render_config(prometheus_adapter_node_prefix="node_package_"), SERIES)
    assert served[("node", "power_avg")] == "node_package_power_avg"


@pytest.mark.parametrize(
    ("series", "expected"),
    [("node_package_power_avg", "package_power_avg"), ("node_x", "x"), ("collectd_rapl_power", None)],
)
def test_name_mapping(series, expected):
    node_rule = render_config()["rules"][0]
    assert node_rule["name"] == {"matches": "^node_(.*)$", "as": "${1}"}
    assert served_name(node_rule, series) == expected


def test_selector_parser_matches_promql_semantics():
    assert selects('{__name__=~"^node_.*",node!="",pod=""}', {"__name__": "node_a", "node": "n"})
    assert not selects('{__name__=~"^node_.*",node!="",pod=""}', {"__name__": "node_a", "node": "n", "pod": "p"})
    assert not selects('{__name__=~"node"}', {"__name__": "node_a"})  # anchored
    with pytest.raises(AssertionError):
        parse_selector('{__name__~"x"}')
