"""Our scheduler extender's decisions (plugins/module_utils/placement/extender.py): requests, view, protocol."""

from __future__ import annotations

import json

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.extender import (
    DEFAULT_POD_CPU_M,
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
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import rank_nodes
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError, parse_byte_quantity
from poweraware_testing import EXTENDER_SETTINGS

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


def _bare(name, **resources):
    """A pod whose one container has ``resources`` as given (none at all by default)."""
    container = {"name": "c", **({"resources": resources} if resources else {})}
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"containers": [container]}}


def test_a_pod_without_cpu_requests_is_sized_as_kube_scheduler_scores_it():
    """kube-scheduler's scoring counts a container without a CPU request as DefaultMilliCPURequest (100m);
    a CPU limit without a request is the request (the API server's defaulting). Fitting counts 0."""
    assert DEFAULT_POD_CPU_M == 100
    assert pod_requests(_bare("none")) == (0, 0)
    assert pod_requests(_bare("none"), DEFAULT_POD_CPU_M) == (100, 0)
    assert pod_requests(_bare("limit", limits={"cpu": "2"})) == (2000, 0)
    assert pod_requests(_bare("limit", limits={"cpu": "2"}), DEFAULT_POD_CPU_M) == (2000, 0)
    assert pod_requests(_bare("request", requests={"cpu": "250m"}, limits={"cpu": "2"}), 100) == (250, 0)
    two = _bare("two")
    two["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "300m"}}})
    assert pod_requests(two, DEFAULT_POD_CPU_M) == (400, 0)  # per container, as NonMissingContainerRequests


def test_a_pod_without_requests_goes_to_the_smallest_jump_not_a_tie():
    """Counted as 0 m, every node's predicted jump was 0 W and every node scored the same: the pod
    went wherever kube-scheduler's other plugins sent it. Sized at the default, the cheaper jump wins."""
    state = _state()
    state.pod_event("DELETED", pod("busy", node_name="cheap"))
    scores, ranked, _neutral, _unknown = prioritize_result(state, _bare("bare"), ["dear", "cheap"])
    assert ranked[0]["name"] == "cheap" and ranked[0]["cost_w"] == pytest.approx(2.5)  # 100m of 4 CPUs: 2.5 %
    assert ranked[1]["cost_w"] == pytest.approx(10.0)
    assert {s["Host"]: s["Score"] for s in scores} == {"cheap": 10, "dear": 5}
    tied, _ranked, _n, _u = prioritize_result(state, _bare("bare"), ["dear", "cheap"], default_cpu_m=0)
    assert {s["Score"] for s in tied} == {10}  # what counting it as 0 m gave: a tie
    # the size scores, the request fits: a nearly full node still takes a pod that requests nothing
    state.pod_event("ADDED", pod("fill", cpu="3950m", node_name="cheap"))
    reply, _ranked = filter_result(state, _bare("bare"), ["cheap"])
    assert reply["NodeNames"] == ["cheap"] and not reply["FailedNodes"]
    _scores, ranked, _n, _u = prioritize_result(state, _bare("bare"), ["cheap"])
    assert ranked[0]["status"] == "on" and ranked[0]["util_after"] == pytest.approx(100.0)


def test_rank_nodes_predicts_for_the_size_and_fits_by_the_request():
    nodes = [{"name": "a", "cpu_capacity": 4000, "cpu_requested": 1000, "model": LINEAR_CHEAP}]
    (by_request,) = rank_nodes(nodes, 0)
    (sized,) = rank_nodes(nodes, 0, pod_cpu_size=400)
    assert by_request["cost_w"] == pytest.approx(0.0) and sized["cost_w"] == pytest.approx(10.0)
    assert sized["util_after"] == pytest.approx(35.0)
    (unfit,) = rank_nodes(nodes, 3500, pod_cpu_size=100)
    assert unfit["status"] == "unfit"  # the request decides fitting
    with pytest.raises(ValueError, match="pod_cpu_size"):
        rank_nodes(nodes, 0, pod_cpu_size=-1)


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


def test_the_roles_defaults_and_their_extra_vars_spelling_are_valid():
    assert config_errors(EXTENDER_SETTINGS) == []
    as_strings = {k: str(v) if isinstance(v, (int, float)) else v for k, v in EXTENDER_SETTINGS.items()}
    assert config_errors(as_strings) == []


def test_every_problem_is_reported_at_once_with_variable_value_reason_and_fix():
    bad = {
        **EXTENDER_SETTINGS,
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
        "power_extender_default_pod_cpu_m": "100m",
        "power_extender_run_as_user": "0",
    }
    problems = config_errors(bad)
    assert len(problems) == 13, problems
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
        "power_extender_default_pod_cpu_m='100m': must be a whole number of millicores from 0 to 256000 "
        "(kube-scheduler's default, 100)",
        "power_extender_run_as_user='0': must be a whole number from 1 to 2147483647, a uid no other account or "
        "process on the control-plane nodes uses (default 10290); 0 would run the extender as root",
    ):
        assert expected in text, (expected, problems)
    assert config_errors({**EXTENDER_SETTINGS, "power_extender_port": 10290.5}) != []
    assert config_errors({**EXTENDER_SETTINGS, "power_extender_port": True}) != []
    assert config_errors({**EXTENDER_SETTINGS, "power_extender_code_dir": "/opt/../etc"}) != []


@pytest.mark.parametrize("uid", [-1, 0, 2147483648, 10290.5, "inf", "nan", True, None, "10290 ", "²"])
def test_the_pods_uid_is_a_non_root_int32(uid):
    # inf and nan crashed the whole-number check (int(inf) raises) before _whole; "10290 " is what -e
    # gives with a stray space, and is taken
    problems = config_errors({**EXTENDER_SETTINGS, "power_extender_run_as_user": uid})
    if uid == "10290 ":
        assert problems == []
    else:
        assert [p.split(":", maxsplit=1)[0] for p in problems] == [f"power_extender_run_as_user={uid!r}"], problems
    assert config_errors({**EXTENDER_SETTINGS, "power_extender_run_as_user": 2147483647}) == []
    assert config_errors({**EXTENDER_SETTINGS, "power_extender_port": "inf"})[0].startswith("power_extender_port='inf'")


# --- exact messages, boundaries and edge cases (mutation testing, issue 17 item 6) -------------------


def test_request_and_overhead_errors_name_the_field_and_the_quantity_error():
    with pytest.raises(ExtenderError) as err:
        pod_requests(pod("p", memory="lots"))
    assert str(err.value).startswith("spec.containers[0].resources.requests.memory: ")
    assert "lots" in str(err.value)
    bad_init = {"name": "i", "resources": {"requests": {"cpu": "x1"}}}
    with pytest.raises(ExtenderError) as err:
        pod_requests(pod("p", init=[bad_init]))
    assert str(err.value).startswith("spec.initContainers[0].resources.requests.cpu: ")
    with pytest.raises(ExtenderError) as err:
        pod_requests(pod("p", overhead={"cpu": "x2"}))
    assert str(err.value).startswith("spec.overhead.cpu: ")
    with pytest.raises(ExtenderError) as err:
        pod_requests(pod("p", overhead={"memory": "x3"}))
    assert str(err.value).startswith("spec.overhead.memory: ")
    second = {"spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "y"}}}]}}
    with pytest.raises(ExtenderError) as err:
        pod_requests(second)
    assert str(err.value).startswith("spec.containers[1].resources.requests.cpu: ")


def test_pod_requests_sums_every_container_and_takes_init_memory_like_cpu():
    two = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "1Ki"}}},
                {"name": "b", "resources": {"requests": {"cpu": "200m", "memory": "2Ki"}}},
                None,
                {"name": "c", "resources": None},
            ]
        }
    }
    assert pod_requests(two) == (300, 3 * 1024)
    # Memory: sidecars add to the sum and to the init containers after them, as cpu does.
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Ki"}}}
    late = {"name": "l", "resources": {"requests": {"memory": "4Ki"}}}
    assert pod_requests(pod("p", cpu="0", memory="2Ki", init=[sidecar, late])) == (0, 5 * 1024)
    assert pod_requests(pod("p", cpu="0", memory="2Ki", init=[late, sidecar])) == (0, 4 * 1024)
    # Two sidecars: the second init sees both; the pod sums both.
    s1 = {"name": "s1", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "1Ki"}}}
    s2 = {"name": "s2", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m", "memory": "2Ki"}}}
    assert pod_requests(pod("p", cpu="0", memory="0", init=[s1, s2])) == (300, 3 * 1024)
    # A sidecar adds to a larger containers' sum.
    assert pod_requests(pod("p", cpu="1", memory="4Ki", init=[s1])) == (1100, 5 * 1024)
    big = {"name": "big", "resources": {"requests": {"cpu": "1", "memory": "8Ki"}}}
    assert pod_requests(pod("p", cpu="0", memory="0", init=[s1, s2, big])) == (1300, 11 * 1024)
    assert pod_requests(pod("p", cpu="0", memory="0", init=[big, s1, s2])) == (1000, 8 * 1024)
    # Only-memory / only-cpu overhead.
    assert pod_requests(pod("p", cpu="100m", memory="1Ki", overhead={"memory": "1Ki"})) == (100, 2048)
    assert pod_requests(pod("p", cpu="100m", memory="1Ki", overhead={"cpu": "5m"})) == (105, 1024)
    assert pod_requests(None) == (0, 0)
    assert pod_requests({"spec": {"initContainers": [None]}}) == (0, 0)


def none_problem(prefix):
    return f"no annotation {prefix}/power-model (the power_models role publishes it once the node has a good fit)"


def test_node_summary_messages_in_full():
    none = node_summary(node("b"), "poweraware.io")
    assert none["problem"] == (
        "no annotation poweraware.io/power-model (the power_models role publishes it once the node has a good fit)"
    )
    broken = node_summary(node("c", annotation="{not json"), "poweraware.io")
    assert broken["problem"].startswith("annotation poweraware.io/power-model is not a valid model: ")
    try:
        json.loads("{not json")
    except ValueError as err:
        assert broken["problem"] == f"annotation poweraware.io/power-model is not a valid model: {err}"
    with pytest.raises(ExtenderError) as err:
        node_summary({"metadata": {"name": "x"}, "status": {}}, "poweraware.io")
    assert str(err.value) == "node 'x': status.capacity.cpu is missing"
    with pytest.raises(ExtenderError) as err:
        node_summary({"metadata": {"name": "x"}, "status": {"capacity": {"cpu": "lots"}}}, "poweraware.io")
    assert str(err.value).startswith("node 'x': status.capacity.cpu: ")
    with pytest.raises(ExtenderError) as err:
        node_summary(
            {"metadata": {"name": "x"}, "status": {"capacity": {"cpu": "1"}, "allocatable": {"cpu": "z"}}}, "p.io"
        )
    assert str(err.value).startswith("node 'x': status.allocatable.cpu: ")
    with pytest.raises(ExtenderError) as err:
        node_summary(
            {"metadata": {"name": "x"}, "status": {"capacity": {"cpu": "1"}, "allocatable": {"memory": "z"}}}, "p.io"
        )
    assert str(err.value).startswith("node 'x': status.allocatable.memory: ")
    for nameless in ({}, {"metadata": {"name": ""}}, {"metadata": {"name": 5}}, None):
        with pytest.raises(ExtenderError) as err:
            node_summary(nameless, "p.io")
        assert str(err.value) == "node: metadata.name is missing"


def test_node_summary_allocatable_defaults():
    bare = node_summary({"metadata": {"name": "x"}, "status": {"capacity": {"cpu": "2"}}}, "p.io")
    assert bare == {
        "name": "x",
        "cpu_capacity": 2000,
        "cpu_allocatable": 2000,
        "memory_allocatable": None,
        "model": None,
        "problem": "no annotation p.io/power-model (the power_models role publishes it once the node has a good fit)",
    }
    split = node_summary(node("y", cpu="4", allocatable_cpu="3500m", memory="1Ki"), "p.io")
    assert (split["cpu_capacity"], split["cpu_allocatable"], split["memory_allocatable"]) == (4000, 3500, 1024)


def test_cluster_state_default_prefix_problems_and_bookkeeping():
    state = ClusterState()
    assert state.annotation_prefix == "poweraware.io"
    state.set_nodes([node("a", model=LINEAR_CHEAP), {"metadata": {"name": "broken"}, "status": {}}, node("c")])
    assert set(state.nodes) == {"a", "c"}
    assert state.problems == {"node broken": "node 'broken': status.capacity.cpu is missing"}
    state.node_event("BOOKMARK", node("z"))
    assert set(state.nodes) == {"a", "c"}
    state.set_nodes([node("c")])
    assert set(state.nodes) == {"c"}
    # A pod's totals leave when its last request does; pods without uid are keyed namespace/name.
    state.set_pods([{"metadata": {"name": "p", "namespace": "ns"}, "spec": pod("p", cpu="1", node_name="c")["spec"]}])
    assert list(state.pods) == ["ns/p"] and state.requested == {"c": [1000, 256 * 2**20]}
    state.pod_event("DELETED", {"metadata": {"name": "p", "namespace": "ns"}})
    assert state.pods == {} and state.requested == {}
    state.pod_event("ADDED", {"metadata": {"name": "q"}, "spec": pod("q", cpu="1", node_name="c")["spec"]})
    assert list(state.pods) == ["/q"]
    state.pod_event("ADDED", {"metadata": {"namespace": "ns"}, "spec": pod("r", cpu="1", node_name="c")["spec"]})
    assert list(state.pods) == ["/q", "ns/"]
    # A pod whose requests are zero on one side is kept until both are zero.
    state.set_pods([pod("m", cpu="0", memory="1Ki", node_name="c"), pod("n", cpu="1", memory="0", node_name="c")])
    state.pod_event("DELETED", pod("n"))
    assert state.requested == {"c": [0, 1024]}
    # An unknown event kind does not forget the pod; a re-add replaces it.
    state.pod_event("BOOKMARK", pod("m", cpu="5", node_name="c"))
    assert state.requested == {"c": [0, 1024]}
    state.pod_event("MODIFIED", pod("m", cpu="2", memory="0", node_name="c"))
    assert state.requested == {"c": [2000, 0]} and state.pods == {"m": ("c", 2000, 0)}
    state.pod_event("MODIFIED", pod("m", cpu="2", memory="0", node_name="c", phase="Failed"))
    assert state.requested == {} and state.pods == {}
    state.pod_event("ADDED", pod("bad", memory="lots", node_name="c"))
    assert state.problems["pod bad"].startswith("spec.containers[0].resources.requests.memory: ")


def test_candidates_prefer_given_objects_skip_bad_ones_and_pass_memory_only_when_known():
    state = ClusterState()
    state.set_nodes([node("a", cpu="2", model=LINEAR_CHEAP), node("b")])
    state.set_pods([pod("p", cpu="1", memory="1Ki", node_name="a")])
    given = [{"metadata": {"name": "bad"}, "status": {}}, node("b", cpu="8", model=LINEAR_DEAR)]
    inputs, neutral, unknown = state.candidates(["a", "b", "ghost"], given)
    assert inputs == [
        {
            "name": "a",
            "cpu_capacity": 2000,
            "cpu_allocatable": 2000,
            "cpu_requested": 1000,
            "model": LINEAR_CHEAP,
            "memory_allocatable": 8 * 2**30,
            "memory_requested": 1024,
        },
        {
            "name": "b",
            "cpu_capacity": 8000,
            "cpu_allocatable": 8000,
            "cpu_requested": 0,
            "model": LINEAR_DEAR,
            "memory_allocatable": 8 * 2**30,
            "memory_requested": 0,
        },
    ]
    assert neutral == {} and unknown == ["ghost"]
    state.set_nodes([{"metadata": {"name": "nomem"}, "status": {"capacity": {"cpu": "1"}}}])
    inputs, neutral, unknown = state.candidates(["nomem"])
    assert inputs == [
        {"name": "nomem", "cpu_capacity": 1000, "cpu_allocatable": 1000, "cpu_requested": 0, "model": None}
    ]
    assert neutral == {"nomem": none_problem("poweraware.io")}
    assert STALE == "the extender's view of pods and nodes is not current (its watch is reconnecting)"


def test_parse_args_messages_in_full():
    for bad, message in (
        ("[]", "request body: expected an ExtenderArgs object"),
        ('{"NodeNames": []}', "request body: Pod is missing"),
        ('{"Pod": 1, "NodeNames": []}', "request body: Pod is missing"),
        ('{"Pod": {}}', "request body: neither Nodes nor NodeNames is set"),
        ('{"Pod": {}, "NodeNames": "a"}', "request body: NodeNames must be a list of node names"),
        ('{"Pod": {}, "NodeNames": ["a", 1]}', "request body: NodeNames must be a list of node names"),
        (
            '{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"}}, {}]}}',
            "Nodes.items[1]: metadata.name is missing",
        ),
    ):
        with pytest.raises(ExtenderError) as err:
            parse_args(bad)
        assert str(err.value) == message
    with pytest.raises(ValueError) as decode_error:
        json.loads("{")
    with pytest.raises(ExtenderError) as err:
        parse_args("{")
    assert str(err.value) == f"request body: not JSON: {decode_error.value}"
    # The Go name wins when both spellings are sent; Nodes without items is an empty list.
    body = json.dumps({"Pod": {"a": 1}, "pod": {"b": 2}, "NodeNames": ["x"], "nodeNames": ["y"]})
    assert parse_args(body) == ({"a": 1}, ["x"], None)
    assert parse_args(json.dumps({"Pod": {}, "Nodes": {"items": None}})) == ({}, [], [])
    assert parse_args(json.dumps({"Pod": {}, "Nodes": None, "NodeNames": ["n"]})) == ({}, ["n"], None)
    assert parse_args(json.dumps({"Pod": {}, "NodeNames": []})) == ({}, [], None)


def test_filter_and_prioritize_replies_in_full():
    state = _state()
    reply, ranked = filter_result(state, pod("new", cpu="1"), ["dear", "cheap", "ghost"])
    assert reply == {
        "FailedNodes": {"cheap": next(r["reason"] for r in ranked if r["name"] == "cheap")},
        "Error": "",
        "NodeNames": ["dear", "ghost"],
    }
    objects = [node("dear", model=LINEAR_DEAR), node("small", cpu="500m")]
    reply, ranked = filter_result(state, pod("new", cpu="1"), ["dear", "small"], objects)
    assert reply == {
        "FailedNodes": {"small": next(r["reason"] for r in ranked if r["name"] == "small")},
        "Error": "",
        "Nodes": {"items": [objects[0]]},
    }
    scores, _ranked, _neutral, unknown = prioritize_result(state, pod("new", cpu="100m"), ["ghost", "other"])
    assert scores == [{"Host": "ghost", "Score": 5}, {"Host": "other", "Score": 5}] and unknown == ["ghost", "other"]
    with pytest.raises(ExtenderError) as err:
        prioritize_result(state, pod("new", cpu="lots"), ["dear"])
    assert str(err.value).startswith("spec.containers[0].resources.requests.cpu: ")


def _problems(**changes):
    return config_errors({**EXTENDER_SETTINGS, **changes})


def test_config_messages_in_full():
    assert _problems(power_extender_state="running") == ["power_extender_state='running': must be present or absent"]
    assert _problems(power_extender_state="absent") == []
    assert _problems(power_extender_port=0) == [
        "power_extender_port=0: must be a TCP port, a whole number from 1 to 65535 (default 10290)"
    ]
    assert _problems(power_extender_address="localhost") == [
        "power_extender_address='localhost': must be an IP address (the serving certificate names it); use 127.0.0.1"
    ]
    assert _problems(power_extender_address="::1") == []
    assert _problems(power_extender_allowed_clients=[]) == [
        "power_extender_allowed_clients=[]: must be a non-empty list of client certificate common names "
        "(kube-scheduler's: scheduler_extender_client_common_name); from -e give JSON: "
        '\'{"power_extender_allowed_clients": ["cn"]}\''
    ]
    assert _problems(power_extender_api_user="system:x") == [
        "power_extender_api_user='system:x': must be a user name outside the reserved system: prefix "
        "(default poweraware:scheduler-extender)"
    ]
    assert _problems(power_extender_annotation_prefix="A") == [
        "power_extender_annotation_prefix='A': must be a DNS subdomain, the power_models role's "
        "power_models_annotation_prefix"
    ]
    assert _problems(power_extender_http_timeout=0.04) == [
        "power_extender_http_timeout=0.04: must be a number of seconds, at least 0.05"
    ]
    assert _problems(power_extender_wait_timeout=0.5) == [
        "power_extender_wait_timeout=0.5: must be a number of seconds, at least 1"
    ]
    assert _problems(power_extender_code_dir="opt") == [
        "power_extender_code_dir='opt': must be an absolute path without '..'"
    ]
    assert _problems(power_extender_pki_dir="/etc/kubernetes/manifests/") == [
        "power_extender_pki_dir='/etc/kubernetes/manifests/': must be outside /etc/kubernetes/manifests: "
        "kubelet runs every file there as a static pod"
    ]


@pytest.mark.parametrize(
    ("changes", "bad"),
    [
        ({"power_extender_port": 1}, []),
        ({"power_extender_port": 65535}, []),
        ({"power_extender_port": "65535"}, []),
        ({"power_extender_port": " 443 "}, []),
        ({"power_extender_port": 443.0}, []),
        ({"power_extender_port": 65536}, ["power_extender_port"]),
        ({"power_extender_port": -1}, ["power_extender_port"]),
        ({"power_extender_port": None}, ["power_extender_port"]),
        ({"power_extender_port": "port"}, ["power_extender_port"]),
        ({"power_extender_port": [443]}, ["power_extender_port"]),
        ({"power_extender_port": False}, ["power_extender_port"]),
        ({"power_extender_address": None}, ["power_extender_address"]),
        ({"power_extender_allowed_clients": ("a", "b")}, []),
        ({"power_extender_allowed_clients": ["a", " "]}, ["power_extender_allowed_clients"]),
        ({"power_extender_allowed_clients": ["a", 1]}, ["power_extender_allowed_clients"]),
        ({"power_extender_allowed_clients": None}, ["power_extender_allowed_clients"]),
        ({"power_extender_api_user": " "}, ["power_extender_api_user"]),
        ({"power_extender_api_user": 5}, ["power_extender_api_user"]),
        ({"power_extender_api_user": "me:system:x"}, []),
        ({"power_extender_annotation_prefix": "a" * 61 + ("." + "b" * 63) * 3}, []),
        (
            {"power_extender_annotation_prefix": "a" * 61 + ("." + "b" * 63) * 3 + "c"},
            ["power_extender_annotation_prefix"],
        ),
        ({"power_extender_annotation_prefix": None}, ["power_extender_annotation_prefix"]),
        ({"power_extender_annotation_prefix": "a-b.c9"}, []),
        ({"power_extender_annotation_prefix": "-a"}, ["power_extender_annotation_prefix"]),
        ({"power_extender_annotation_prefix": "a-"}, ["power_extender_annotation_prefix"]),
        ({"power_extender_annotation_prefix": "a..b"}, ["power_extender_annotation_prefix"]),
        ({"power_extender_default_pod_cpu_m": 0}, []),
        ({"power_extender_default_pod_cpu_m": "250"}, []),
        ({"power_extender_default_pod_cpu_m": 256000}, []),
        ({"power_extender_default_pod_cpu_m": 256001}, ["power_extender_default_pod_cpu_m"]),
        ({"power_extender_default_pod_cpu_m": -1}, ["power_extender_default_pod_cpu_m"]),
        ({"power_extender_default_pod_cpu_m": 1.5}, ["power_extender_default_pod_cpu_m"]),
        ({"power_extender_default_pod_cpu_m": None}, ["power_extender_default_pod_cpu_m"]),
        ({"power_extender_stale_after": 1}, []),
        ({"power_extender_stale_after": 0.99}, ["power_extender_stale_after"]),
        ({"power_extender_stale_after": float("inf")}, ["power_extender_stale_after"]),
        ({"power_extender_stale_after": "inf"}, ["power_extender_stale_after"]),
        ({"power_extender_http_timeout": 0.05}, []),
        ({"power_extender_http_timeout": "0.05"}, []),
        ({"power_extender_wait_timeout": 1}, []),
        ({"power_extender_wait_timeout": None}, ["power_extender_wait_timeout"]),
        ({"power_extender_code_dir": "/opt/x/"}, []),
        ({"power_extender_code_dir": "/opt/x/.."}, ["power_extender_code_dir"]),
        ({"power_extender_code_dir": "/opt/..x"}, []),
        ({"power_extender_code_dir": None}, ["power_extender_code_dir"]),
        ({"power_extender_manifest_path": "manifest.yaml"}, ["power_extender_manifest_path"]),
        ({"power_extender_code_dir": "/etc/kubernetes/manifests-code"}, []),
        ({"power_extender_code_dir": "/etc/kubernetes/manifestsX"}, []),
        ({"power_extender_code_dir": "/etc/kubernetes/manifests"}, ["power_extender_code_dir"]),
        ({"power_extender_pki_dir": "/etc/kubernetes/manifests/pki"}, ["power_extender_pki_dir"]),
        (
            {
                "power_extender_code_dir": "/etc/kubernetes/manifests/c",
                "power_extender_pki_dir": "/etc/kubernetes/manifests/p",
            },
            ["power_extender_code_dir", "power_extender_pki_dir"],
        ),
        (
            {"power_extender_code_dir": "/etc/kubernetes/manifests/c", "power_extender_manifest_path": "m"},
            ["power_extender_manifest_path"],
        ),
    ],
)
def test_config_boundaries(changes, bad):
    assert [p.partition("=")[0] for p in _problems(**changes)] == bad


def test_a_new_state_takes_events_before_any_list_and_ignores_deletes_of_unknown_nodes():
    state = ClusterState("p.io")
    state.node_event("ADDED", node("a"))
    state.pod_event("ADDED", pod("p", cpu="1", node_name="a"))
    assert set(state.nodes) == {"a"} and state.requested == {"a": [1000, 256 * 2**20]}
    state.node_event("DELETED", node("never-seen"))
    assert set(state.nodes) == {"a"}
    with pytest.raises(ExtenderError) as err:
        state.node_event("DELETED", {"metadata": {}})
    assert str(err.value) == "node: metadata.name is missing"


def test_a_bad_model_is_named_with_the_node():
    wrong = node_summary(node("d", model={"kind": "cubic", "params": {}}), "poweraware.io")
    assert wrong["problem"] == (
        "annotation poweraware.io/power-model is not a valid model: power model for node 'd': model.kind: "
        "unknown kind 'cubic'; expected one of piecewise_linear, peaks, linear"
    )


def test_a_node_object_ranking_refuses_is_an_extender_error_with_its_message():
    zero = {"metadata": {"name": "z"}, "status": {"capacity": {"cpu": "0"}}}
    with pytest.raises(ExtenderError) as err:
        prioritize_result(ClusterState(), pod("new"), ["z"], [zero])
    assert str(err.value) == "placement score: node 'z': cpu_capacity: is zero; a node that can run pods has some CPU"


def test_prioritize_uses_the_node_objects_it_is_given_and_filter_ranks_fresh_by_default():
    state = ClusterState()
    scores, ranked, neutral, unknown = prioritize_result(
        state, pod("new", cpu="1"), ["x"], [node("x", model=LINEAR_CHEAP)]
    )
    assert scores == [{"Host": "x", "Score": 10}] and unknown == [] and neutral == {}
    assert ranked[0]["cost_w"] == pytest.approx(25.0)
    _reply, ranked = filter_result(_state(), pod("new", cpu="1"), ["dear", "plain"])
    assert {r["name"]: r["cost_w"] for r in ranked} == {"dear": pytest.approx(100.0), "plain": None}
    _reply, ranked = filter_result(_state(), pod("new", cpu="1"), ["dear"], fresh=False)
    assert [r["cost_w"] for r in ranked] == [None]


def test_the_manifest_directory_is_the_manifest_path_s_parent_without_trailing_slashes():
    inside = "/etc/kubernetes/manifests/c"
    assert _problems(
        power_extender_manifest_path="/etc/kubernetes/manifests/x.yaml/", power_extender_code_dir=inside
    ) == [
        f"power_extender_code_dir={inside!r}: must be outside /etc/kubernetes/manifests: "
        "kubelet runs every file there as a static pod"
    ]


def test_an_annotation_prefix_with_a_trailing_newline_is_refused():
    # '$' matches before a final newline; Kubernetes would refuse the annotation key later.
    problems = config_errors({**EXTENDER_SETTINGS, "power_extender_annotation_prefix": "poweraware.io\n"})
    assert len(problems) == 1 and "must be a DNS subdomain" in problems[0], problems
