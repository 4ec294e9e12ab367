"""Our scheduler extender's decisions (plugins/module_utils/_extender.py): requests, view, protocol."""

from __future__ import annotations

import json

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils._extender import (
    STALE,
    ClusterState,
    ExtenderError,
    config_errors,
    extender_priority,
    filter_result,
    node_summary,
    parse_args,
    pod_requests,
    prioritize_result,
)
from ansible_collections.poweraware.k8s.plugins.module_utils._placement_score import rank_nodes
from ansible_collections.poweraware.k8s.plugins.module_utils._quantity import QuantityError, parse_byte_quantity

LINEAR_CHEAP = {"kind": "linear", "params": {"idle_w": 50.0, "max_w": 150.0}}  # +1 W per percent
LINEAR_DEAR = {"kind": "linear", "params": {"idle_w": 50.0, "max_w": 450.0}}  # +4 W per percent


def node(name, cpu="4", memory="8Gi", model=None, annotation=None, allocatable_cpu=None):
    annotations = {}
    if model is not None:
        annotations["poweraware.io/power-model"] = json.dumps(model)
    if annotation is not None:
        annotations["poweraware.io/power-model"] = annotation
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory},
            "allocatable": {"cpu": allocatable_cpu or cpu, "memory": memory},
        },
    }


def pod(name, cpu="500m", memory="256Mi", node_name=None, phase="Running", uid=None, init=(), overhead=None):
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if init:
        spec["initContainers"] = list(init)
    if overhead:
        spec["overhead"] = overhead
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or name},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_byte_quantities_round_up_like_quantity_value():
    assert parse_byte_quantity("512Mi") == 512 * 2**20
    assert parse_byte_quantity("1G") == 10**9
    assert parse_byte_quantity("1.5Ki") == 1536
    assert parse_byte_quantity("1m") == 1  # 0.001 rounds up
    assert parse_byte_quantity(42) == 42
    for bad in ("-1", "12 Mi", True, 1.5, None):
        with pytest.raises(QuantityError):
            parse_byte_quantity(bad)


def test_pod_requests_as_kube_scheduler_computes_them():
    assert pod_requests(pod("p", cpu="250m", memory="1Mi")) == (250, 2**20)
    # A plain init container: the larger of it and the containers' sum.
    init = {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "1Ki"}}}
    assert pod_requests(pod("p", cpu="500m", memory="1Mi", init=[init])) == (2000, 2**20)
    # A sidecar (restartPolicy Always) adds to the sum and to the init containers after it.
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
    late = {"name": "l", "resources": {"requests": {"cpu": "1"}}}
    assert pod_requests(pod("p", cpu="500m", memory="0", init=[sidecar, late])) == (1100, 0)
    assert pod_requests(pod("p", cpu="500m", memory="0", init=[late, sidecar])) == (1000, 0)
    assert pod_requests(pod("p", cpu="500m", memory="1Ki", overhead={"cpu": "10m", "memory": "1Ki"})) == (510, 2048)
    assert pod_requests({"spec": {"containers": [{"name": "c"}]}}) == (0, 0)
    with pytest.raises(ExtenderError, match=r"spec.containers\[0\].resources.requests.cpu: 'lots'"):
        pod_requests(pod("p", cpu="lots"))


def test_node_summary_keeps_capacity_and_a_checked_model_or_says_why_not():
    good = node_summary(node("a", cpu="8", model=LINEAR_CHEAP), "poweraware.io")
    assert (good["cpu_capacity"], good["memory_allocatable"], good["model"], good["problem"]) == (
        8000,
        8 * 2**30,
        LINEAR_CHEAP,
        "",
    )
    none = node_summary(node("b"), "poweraware.io")
    assert none["model"] is None and none["problem"].startswith("no annotation poweraware.io/power-model")
    broken = node_summary(node("c", annotation="{not json"), "poweraware.io")
    assert broken["model"] is None and "is not a valid model" in broken["problem"]
    wrong = node_summary(node("d", model={"kind": "cubic", "params": {}}), "poweraware.io")
    assert wrong["model"] is None and "unknown kind 'cubic'" in wrong["problem"]
    other_prefix = node_summary(node("e", model=LINEAR_CHEAP), "example.com")
    assert other_prefix["model"] is None and "example.com/power-model" in other_prefix["problem"]
    with pytest.raises(ExtenderError, match="status.capacity.cpu is missing"):
        node_summary({"metadata": {"name": "x"}, "status": {}}, "poweraware.io")


def test_cluster_state_follows_watch_events():
    state = ClusterState()
    state.set_nodes([node("a", model=LINEAR_CHEAP), node("b")])
    state.set_pods([pod("p1", cpu="1", node_name="a"), pod("p2", cpu="500m", node_name="a"), pod("unbound")])
    assert state.requested == {"a": [1500, 2 * 256 * 2**20]}
    state.pod_event("MODIFIED", pod("p1", cpu="1", node_name="a", phase="Succeeded"))  # finished: no longer counts
    assert state.requested["a"][0] == 500
    state.pod_event("ADDED", pod("p3", cpu="2", node_name="b"))
    state.pod_event("DELETED", pod("p2", node_name="a"))
    assert state.requested == {"b": [2000, 256 * 2**20]}
    state.pod_event("BOOKMARK", pod("p9", node_name="a"))
    assert "p9" not in state.pods
    state.node_event("MODIFIED", node("b", model=LINEAR_DEAR))
    assert state.nodes["b"]["model"] == LINEAR_DEAR
    state.node_event("DELETED", node("a"))
    assert set(state.nodes) == {"b"}
    state.pod_event("ADDED", pod("bad", cpu="lots", node_name="b"))
    assert "pod bad" in state.problems and "bad" not in state.pods


def _state():
    state = ClusterState()
    state.set_nodes([node("cheap", model=LINEAR_CHEAP), node("dear", model=LINEAR_DEAR), node("plain")])
    state.set_pods([pod("busy", cpu="3500m", node_name="cheap")])
    return state


def test_prioritize_prefers_the_smallest_predicted_jump_and_agrees_with_rank_nodes():
    state = _state()
    incoming = pod("new", cpu="1")
    scores, ranked, neutral, unknown = prioritize_result(state, incoming, ["dear", "plain", "cheap", "ghost"])
    by_host = {s["Host"]: s["Score"] for s in scores}
    # cheap has 500m left: the 1-CPU pod does not fit there (score 0); dear's jump is predicted (10),
    # plain has no model (neutral 5), ghost is not in the view yet (neutral 5).
    assert by_host == {"dear": 10, "plain": 5, "cheap": 0, "ghost": 5}
    assert [r["name"] for r in ranked] == ["dear", "plain", "cheap"]
    assert set(neutral) == {"plain"} and unknown == ["ghost"]
    expected = rank_nodes(
        [
            {"name": "dear", "cpu_capacity": 4000, "model": LINEAR_DEAR, "memory_allocatable": 8 * 2**30},
            {"name": "plain", "cpu_capacity": 4000, "model": None},
            {"name": "cheap", "cpu_capacity": 4000, "cpu_requested": 3500, "model": LINEAR_CHEAP},
        ],
        1000,
    )
    assert [r["name"] for r in expected] == [r["name"] for r in ranked]
    assert [r["score"] for r in expected] == [r["score"] for r in ranked]


def test_the_cheaper_jump_wins_on_equal_load():
    state = _state()
    state.pod_event("DELETED", pod("busy", node_name="cheap"))
    scores, ranked, _neutral, _unknown = prioritize_result(state, pod("new", cpu="1"), ["dear", "cheap"])
    assert ranked[0]["name"] == "cheap" and ranked[0]["cost_w"] == pytest.approx(25.0)
    assert {s["Host"]: s["Score"] for s in scores} == {"cheap": 10, "dear": 5}


def test_a_stale_view_scores_every_node_neutrally():
    scores, _ranked, neutral, _unknown = prioritize_result(
        _state(), pod("new", cpu="100m"), ["dear", "cheap"], fresh=False
    )
    assert {s["Score"] for s in scores} == {5}
    assert neutral == {"dear": STALE, "cheap": STALE}


def test_filter_refuses_only_nodes_the_pod_overfills():
    reply, _ranked = filter_result(_state(), pod("new", cpu="1"), ["dear", "cheap", "ghost"])
    assert reply["NodeNames"] == ["dear", "ghost"]
    assert list(reply["FailedNodes"]) == ["cheap"] and "does not fit" in reply["FailedNodes"]["cheap"]
    # With node objects (nodeCacheCapable false) the reply carries the objects that passed.
    objects = [node("dear", model=LINEAR_DEAR), node("small", cpu="500m")]
    reply, _ranked = filter_result(_state(), pod("new", cpu="1"), ["dear", "small"], objects)
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["dear"]
    assert list(reply["FailedNodes"]) == ["small"]


def test_memory_is_a_feasibility_limit():
    state = ClusterState()
    state.set_nodes([node("a", memory="1Gi", model=LINEAR_CHEAP), node("b", memory="4Gi", model=LINEAR_DEAR)])
    reply, _ranked = filter_result(state, pod("big", cpu="100m", memory="2Gi"), ["a", "b"])
    assert reply["NodeNames"] == ["b"] and "memory" in reply["FailedNodes"]["a"]


def test_parse_args_takes_either_field_case_and_says_what_is_wrong():
    body = json.dumps({"Pod": pod("p"), "NodeNames": ["a", "b"]})
    assert parse_args(body)[1:] == (["a", "b"], None)
    body = json.dumps({"pod": pod("p"), "nodes": {"items": [node("a")]}})
    _pod, names, objects = parse_args(body.encode())
    assert names == ["a"] and objects[0]["metadata"]["name"] == "a"
    for bad, message in (
        ("{", "not JSON"),
        ("[]", "expected an ExtenderArgs object"),
        ('{"NodeNames": []}', "Pod is missing"),
        ('{"Pod": {}}', "neither Nodes nor NodeNames"),
        ('{"Pod": {}, "NodeNames": "a"}', "NodeNames must be a list"),
        ('{"Pod": {}, "Nodes": {"items": [{}]}}', r"Nodes.items\[0\]: metadata.name is missing"),
    ):
        with pytest.raises(ExtenderError, match=message):
            parse_args(bad)


@pytest.mark.parametrize(
    ("score", "priority"), [(0, 0), (1, 0), (4, 0), (5, 1), (49, 5), (50, 5), (51, 5), (94, 9), (95, 10), (100, 10)]
)
def test_extender_priority_rounds_half_up(score, priority):
    assert extender_priority(score) == priority


GOOD_CONFIG = {
    "power_extender_state": "present",
    "power_extender_port": 10290,
    "power_extender_address": "127.0.0.1",
    "power_extender_allowed_clients": ["kube-scheduler-tas-client"],
    "power_extender_api_user": "poweraware:scheduler-extender",
    "power_extender_annotation_prefix": "poweraware.io",
    "power_extender_stale_after": 30,
    "power_extender_http_timeout": 1,
    "power_extender_wait_timeout": 120,
    "power_extender_code_dir": "/opt/poweraware/scheduler-extender",
    "power_extender_manifest_path": "/etc/kubernetes/manifests/poweraware-scheduler-extender.yaml",
    "power_extender_pki_dir": "/etc/kubernetes/pki/poweraware-extender",
}


def test_the_roles_defaults_and_their_extra_vars_spelling_are_valid():
    assert config_errors(GOOD_CONFIG) == []
    as_strings = {k: str(v) if isinstance(v, (int, float)) else v for k, v in GOOD_CONFIG.items()}
    assert config_errors(as_strings) == []


def test_every_problem_is_reported_at_once_with_variable_value_reason_and_fix():
    bad = {
        **GOOD_CONFIG,
        "power_extender_state": "running",
        "power_extender_port": "70000",
        "power_extender_address": "localhost",
        "power_extender_allowed_clients": "kube-scheduler-tas-client",
        "power_extender_api_user": "system:extender",
        "power_extender_annotation_prefix": "Power_Models",
        "power_extender_stale_after": "0",
        "power_extender_http_timeout": "fast",
        "power_extender_wait_timeout": float("nan"),
        "power_extender_code_dir": "/etc/kubernetes/manifests/code",
        "power_extender_pki_dir": "pki",
    }
    problems = config_errors(bad)
    assert len(problems) == 11, problems
    text = "\n".join(problems)
    for expected in (
        "power_extender_state='running': must be present or absent",
        "power_extender_port='70000': must be a TCP port",
        "power_extender_address='localhost': must be an IP address",
        "from -e give JSON",
        "power_extender_api_user='system:extender'",
        "power_extender_annotation_prefix='Power_Models': must be a DNS subdomain",
        "power_extender_stale_after='0': must be a number of seconds, at least 1",
        "power_extender_http_timeout='fast'",
        "power_extender_wait_timeout=nan",
        "power_extender_code_dir='/etc/kubernetes/manifests/code': must be outside /etc/kubernetes/manifests",
        "power_extender_pki_dir='pki': must be an absolute path",
    ):
        assert expected in text, (expected, problems)
    assert config_errors({**GOOD_CONFIG, "power_extender_port": 10290.5}) != []
    assert config_errors({**GOOD_CONFIG, "power_extender_port": True}) != []
    assert config_errors({**GOOD_CONFIG, "power_extender_code_dir": "/opt/../etc"}) != []
