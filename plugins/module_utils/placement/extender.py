# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions of our scheduler extender: Kubernetes objects in, extender protocol out.

Pure Python, standard library only, Python 3.9 compatible: the service (roles/power_extender,
``files/poweraware_extender.py``) runs it on a stock Python image, and tests and the benchmarks call
it directly. Ranking is ``placement_score.rank_nodes``, the one implementation of the policy the
placement benchmark calls "ours".

Where utilisation comes from at decision time: the CPU requests of the pods bound to each node, as
the API reports them (``ClusterState`` keeps their sums from a watch), over the node's CPU capacity.
This is what kube-scheduler itself counts, it is current the moment a pod is bound, and a burst of
pods scored on it spreads instead of piling onto the node whose measured figure is still stale (see
``placement_score``). The benchmark models the same choice.

A node is scored neutrally, with the reason logged by the service, when it has no model annotation,
its annotation is not a valid model, the extender has not seen the node yet, or the extender's view
is not fresh (its watch is down: ``fresh=False``). Powered-off nodes do not reach an extender: a
powered-off node is NotReady and kube-scheduler filters it out before calling us, so every candidate
is powered on (``rank_nodes``' ``wake`` order applies where a power manager offers nodes to wake,
as the benchmark's ``off`` regime models).

Protocol (k8s.io/kube-scheduler/extender/v1): ``ExtenderArgs`` has ``Pod`` and either ``Nodes`` (a
NodeList) or ``NodeNames`` (``nodeCacheCapable``); field names are Go's, either case is accepted.
Prioritize scores are 0..``MAX_EXTENDER_PRIORITY`` (kube-scheduler multiplies them by the extender's
weight and by 10); they are ``rank_nodes``' 0..100 scores scaled and rounded half up.
"""

from __future__ import annotations

import ipaddress
import json
import math

from ansible_collections.poweraware.k8s.plugins.module_utils.placement.placement_score import (
    PlacementScoreError,
    rank_nodes,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    MODEL_ANNOTATION,
    annotation_prefix_problems,
    compile_model,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import (
    QuantityError,
    parse_byte_quantity,
    parse_cpu_quantity,
)

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "ClusterState",
    "config_errors",
    "ExtenderError",
    "extender_priority",
    "filter_result",
    "node_summary",
    "parse_args",
    "pod_requests",
    "prioritize_result",
]

MAX_EXTENDER_PRIORITY = 10
# The CPU a container without a CPU request counts for when nodes are scored: kube-scheduler's own
# DefaultMilliCPURequest (pkg/scheduler/util/pod_resources.go; the scoring plugins pass it to
# component-helpers' PodRequests as NonMissingContainerRequests). Without it every node's predicted
# jump for such a pod is 0 W and all nodes tie; fitting still counts the pod's real requests.
DEFAULT_POD_CPU_M = 100
TERMINAL_PHASES = ("Succeeded", "Failed")
STALE = "the extender's view of pods and nodes is not current (its watch is reconnecting)"


class ExtenderError(ValueError):
    """A request or object the extender cannot use; the message names the field."""


def _field(mapping, name):
    """``mapping[Name]`` or ``mapping[name]``: the scheduler sends Go names, people send JSON names."""
    if not isinstance(mapping, dict):
        return None
    if name in mapping:
        return mapping[name]
    return mapping.get(name[0].lower() + name[1:])


def _quantity(parse, value, where):
    try:
        return parse(value)
    except QuantityError as err:
        raise ExtenderError(f"{where}: {err}") from None


def _container_requests(container, where, missing_cpu_m=0):
    resources = (container or {}).get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    if "cpu" in requests:
        cpu = _quantity(parse_cpu_quantity, requests["cpu"], f"{where}.resources.requests.cpu")
    elif "cpu" in limits:  # the API server's defaulting: a limit without a request is also the request
        cpu = _quantity(parse_cpu_quantity, limits["cpu"], f"{where}.resources.limits.cpu")
    else:
        cpu = missing_cpu_m
    memory = requests.get("memory")
    memory = 0 if memory is None else _quantity(parse_byte_quantity, memory, f"{where}.resources.requests.memory")
    return cpu, memory


def pod_requests(pod, missing_cpu_m=0):
    """``(cpu_millicores, memory_bytes)`` a pod requests, computed as kube-scheduler's ``PodRequests``.

    A container without a CPU request counts its CPU limit (as the API server defaults it), else
    ``missing_cpu_m`` (0 for fitting; ``DEFAULT_POD_CPU_M`` for scoring, as kube-scheduler's
    ``NonMissingContainerRequests``). The containers' sum; an init container needs its own request
    plus the restartable (sidecar) init containers started before it, and the pod needs the largest
    of these if it exceeds the sum; sidecars run alongside the containers, so they add to the sum;
    ``spec.overhead`` is added last.
    """
    spec = (pod or {}).get("spec") or {}
    cpu = memory = 0
    for index, container in enumerate(spec.get("containers") or []):
        c_cpu, c_mem = _container_requests(container, f"spec.containers[{index}]", missing_cpu_m)
        cpu, memory = cpu + c_cpu, memory + c_mem
    sidecar_cpu = sidecar_mem = init_cpu = init_mem = 0
    for index, container in enumerate(spec.get("initContainers") or []):
        c_cpu, c_mem = _container_requests(container, f"spec.initContainers[{index}]", missing_cpu_m)
        if (container or {}).get("restartPolicy") == "Always":
            sidecar_cpu, sidecar_mem = sidecar_cpu + c_cpu, sidecar_mem + c_mem
            cpu, memory = cpu + c_cpu, memory + c_mem
            init_cpu, init_mem = max(init_cpu, sidecar_cpu), max(init_mem, sidecar_mem)
        else:
            init_cpu, init_mem = max(init_cpu, sidecar_cpu + c_cpu), max(init_mem, sidecar_mem + c_mem)
    cpu, memory = max(cpu, init_cpu), max(memory, init_mem)
    overhead = spec.get("overhead") or {}
    if "cpu" in overhead:
        cpu += _quantity(parse_cpu_quantity, overhead["cpu"], "spec.overhead.cpu")
    if "memory" in overhead:
        memory += _quantity(parse_byte_quantity, overhead["memory"], "spec.overhead.memory")
    return cpu, memory


def _name(obj, what):
    name = ((obj or {}).get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ExtenderError(f"{what}: metadata.name is missing")
    return name


def node_summary(node, annotation_prefix):
    """What the extender keeps of a Node: capacities and its model (compiled), or why it has none."""
    name = _name(node, "node")
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    where = f"node {name!r}"
    if "cpu" not in capacity:
        raise ExtenderError(f"{where}: status.capacity.cpu is missing")
    cpu_capacity = _quantity(parse_cpu_quantity, capacity["cpu"], f"{where}: status.capacity.cpu")
    cpu_allocatable = (
        _quantity(parse_cpu_quantity, allocatable["cpu"], f"{where}: status.allocatable.cpu")
        if "cpu" in allocatable
        else cpu_capacity
    )
    memory = allocatable.get("memory")
    memory_allocatable = (
        None if memory is None else _quantity(parse_byte_quantity, memory, f"{where}: status.allocatable.memory")
    )
    key = f"{annotation_prefix}/{MODEL_ANNOTATION}"
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(key)
    model = None
    problem = ""
    if text is None:
        problem = f"no annotation {key} (the power_models role publishes it once the node has a good fit)"
    else:
        try:
            model = json.loads(text)
            compile_model(model, name)  # checked here, so that ranking never meets a bad model
        except ValueError as err:  # JSONDecodeError and PowerModelError are ValueErrors
            model = None
            problem = f"annotation {key} is not a valid model: {err}"
    return {
        "name": name,
        "cpu_capacity": cpu_capacity,
        "cpu_allocatable": cpu_allocatable,
        "memory_allocatable": memory_allocatable,
        "model": model,
        "problem": problem,
    }


def _pod_key(pod):
    meta = (pod or {}).get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class ClusterState:
    """The extender's view of the cluster, fed by list and watch events (no API call per request).

    Keeps each node's summary and, per node, the summed requests of the non-terminal pods bound to
    it. Not thread-safe: the service holds one lock around every call.
    """

    def __init__(self, annotation_prefix="poweraware.io"):
        self.annotation_prefix = annotation_prefix
        self.nodes = {}
        self.pods = {}  # key -> (node, cpu_m, memory)
        self.requested = {}  # node -> [cpu_m, memory]
        self.problems = {}  # object -> why it was ignored (the service logs each once)

    # -- nodes
    def set_nodes(self, items):
        self.nodes = {}
        for item in items:
            self.node_event("ADDED", item)

    def node_event(self, kind, node):
        if kind == "DELETED":
            self.nodes.pop(_name(node, "node"), None)
            return
        if kind not in ("ADDED", "MODIFIED"):
            return
        try:
            summary = node_summary(node, self.annotation_prefix)
        except ExtenderError as err:
            self.problems[f"node {((node or {}).get('metadata') or {}).get('name')}"] = str(err)
            return
        self.nodes[summary["name"]] = summary

    # -- pods
    def set_pods(self, items):
        self.pods, self.requested = {}, {}
        for item in items:
            self.pod_event("ADDED", item)

    def _forget(self, key):
        old = self.pods.pop(key, None)
        if old is not None:
            totals = self.requested[old[0]]
            totals[0] -= old[1]
            totals[1] -= old[2]
            if totals == [0, 0]:
                del self.requested[old[0]]

    def pod_event(self, kind, pod):
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = _pod_key(pod)
        self._forget(key)
        spec, status = (pod or {}).get("spec") or {}, (pod or {}).get("status") or {}
        node = spec.get("nodeName")
        if kind == "DELETED" or not node or status.get("phase") in TERMINAL_PHASES:
            return
        try:
            cpu, memory = pod_requests(pod)
        except ExtenderError as err:
            self.problems[f"pod {key}"] = str(err)
            return
        self.pods[key] = (node, cpu, memory)
        totals = self.requested.setdefault(node, [0, 0])
        totals[0] += cpu
        totals[1] += memory

    # -- decisions
    def candidates(self, names, node_objects=None, fresh=True):
        """``(rank_nodes inputs, {name: why neutral}, [names the extender cannot judge])``."""
        given = {}
        for node in node_objects or ():
            try:
                summary = node_summary(node, self.annotation_prefix)
            except ExtenderError:
                continue
            given[summary["name"]] = summary
        inputs, neutral, unknown = [], {}, []
        for name in names:
            summary = given.get(name) or self.nodes.get(name)
            if summary is None:
                unknown.append(name)
                continue
            cpu, memory = self.requested.get(name, (0, 0))
            model = summary["model"] if fresh else None
            if model is None:
                neutral[name] = summary["problem"] if fresh else STALE
            entry = {
                "name": name,
                "cpu_capacity": summary["cpu_capacity"],
                "cpu_allocatable": summary["cpu_allocatable"],
                "cpu_requested": cpu,
                "model": model,
            }
            if summary["memory_allocatable"] is not None:
                entry["memory_allocatable"] = summary["memory_allocatable"]
                entry["memory_requested"] = memory
            inputs.append(entry)
        return inputs, neutral, unknown


def parse_args(body):
    """``(pod, node_names, node_objects or None)`` of an ``ExtenderArgs`` JSON body (bytes or str)."""
    try:
        args = json.loads(body)
    except ValueError as err:
        raise ExtenderError(f"request body: not JSON: {err}") from None
    if not isinstance(args, dict):
        raise ExtenderError("request body: expected an ExtenderArgs object")
    pod = _field(args, "Pod")
    if not isinstance(pod, dict):
        raise ExtenderError("request body: Pod is missing")
    nodes = _field(args, "Nodes")
    if isinstance(nodes, dict):
        items = nodes.get("items") or []
        return pod, [_name(node, f"Nodes.items[{i}]") for i, node in enumerate(items)], items
    names = _field(args, "NodeNames")
    if names is None:
        raise ExtenderError("request body: neither Nodes nor NodeNames is set")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ExtenderError("request body: NodeNames must be a list of node names")
    return pod, names, None


def extender_priority(score):
    """``rank_nodes``' 0..100 score as an extender priority 0..10, rounded half up."""
    return (score * MAX_EXTENDER_PRIORITY + 50) // 100


def _rank(state, pod, names, node_objects, fresh, default_cpu_m):
    cpu, memory = pod_requests(pod)
    size = pod_requests(pod, default_cpu_m)[0]  # what the jump is predicted for
    inputs, neutral, unknown = state.candidates(names, node_objects, fresh)
    try:
        results = rank_nodes(inputs, cpu, memory, pod_cpu_size=size)
    except PlacementScoreError as err:  # a node object that slipped past the summary's checks
        raise ExtenderError(str(err)) from None
    return results, neutral, unknown


def filter_result(state, pod, names, node_objects=None, fresh=True, default_cpu_m=DEFAULT_POD_CPU_M):
    """``(ExtenderFilterResult, ranked)``: nodes the pod does not fit on (by requests) fail, with the reason.

    Nodes the extender has not seen pass: kube-scheduler has filtered them by its own cache already.
    """
    results, _neutral, _unknown = _rank(state, pod, names, node_objects, fresh, default_cpu_m)
    failed = {r["name"]: r["reason"] for r in results if r["status"] == "unfit"}
    kept = [name for name in names if name not in failed]
    reply = {"FailedNodes": failed, "Error": ""}
    if node_objects is not None:
        reply["Nodes"] = {"items": [n for n in node_objects if n["metadata"]["name"] not in failed]}
    else:
        reply["NodeNames"] = kept
    return reply, results


def prioritize_result(state, pod, names, node_objects=None, fresh=True, default_cpu_m=DEFAULT_POD_CPU_M):
    """``(HostPriorityList, ranked, neutral reasons, unknown names)`` for one pod.

    Nodes the extender has not seen get the neutral score, 5. A container without a CPU request or
    limit counts ``default_cpu_m`` for the predicted jump (``DEFAULT_POD_CPU_M``, kube-scheduler's).
    """
    results, neutral, unknown = _rank(state, pod, names, node_objects, fresh, default_cpu_m)
    scores = [{"Host": r["name"], "Score": extender_priority(r["score"])} for r in results]
    scores += [{"Host": name, "Score": extender_priority(50)} for name in unknown]
    return scores, results, neutral, unknown


# --- the role's input (filter poweraware.k8s.power_extender_errors) ------------------------------

# The largest runAsUser/runAsGroup the API server takes (a non-negative int32).
MAX_ID = 2147483647


def _number(value):
    """A number from YAML or from ``-e`` (a string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _whole(value):
    """A whole number from YAML or from ``-e``, else None (fractions, nan and inf included)."""
    number = _number(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def config_errors(values):
    """Every problem with the power_extender role's variables, each naming variable, value, reason and fix."""
    problems = []

    def bad(name, reason):
        problems.append(f"{name}={values.get(name)!r}: {reason}")

    state = values.get("power_extender_state")
    if state not in ("present", "absent"):
        bad("power_extender_state", "must be present or absent")
    port = _whole(values.get("power_extender_port"))
    if port is None or not 1 <= port <= 65535:
        bad("power_extender_port", "must be a TCP port, a whole number from 1 to 65535 (default 10290)")
    address = values.get("power_extender_address")
    try:
        ipaddress.ip_address(str(address))
    except ValueError:
        bad("power_extender_address", "must be an IP address (the serving certificate names it); use 127.0.0.1")
    clients = values.get("power_extender_allowed_clients")
    if (
        not isinstance(clients, (list, tuple))
        or not clients
        or not all(isinstance(c, str) and c.strip() for c in clients)
    ):
        bad(
            "power_extender_allowed_clients",
            "must be a non-empty list of client certificate common names (kube-scheduler's: "
            'scheduler_extender_client_common_name); from -e give JSON: \'{"power_extender_allowed_clients": ["cn"]}\'',
        )
    user = values.get("power_extender_api_user")
    if not isinstance(user, str) or not user.strip() or user.startswith("system:"):
        bad(
            "power_extender_api_user",
            "must be a user name outside the reserved system: prefix (default poweraware:scheduler-extender)",
        )
    problems += annotation_prefix_problems(
        "power_extender_annotation_prefix",
        values.get("power_extender_annotation_prefix"),
        "the power_models role's power_models_annotation_prefix",
    )
    size = _whole(values.get("power_extender_default_pod_cpu_m"))
    if size is None or not 0 <= size <= 256000:
        bad(
            "power_extender_default_pod_cpu_m",
            f"must be a whole number of millicores from 0 to 256000 (kube-scheduler's default, {DEFAULT_POD_CPU_M})",
        )
    uid = _whole(values.get("power_extender_run_as_user"))
    if uid is None or not 1 <= uid <= MAX_ID:
        # Kubernetes takes runAsUser 0..2147483647; 0 is root, which the pod's runAsNonRoot refuses.
        bad(
            "power_extender_run_as_user",
            f"must be a whole number from 1 to {MAX_ID}, a uid no other account or process on the "
            "control-plane nodes uses (default 10290); 0 would run the extender as root",
        )
    for name, least in (
        ("power_extender_stale_after", 1),
        ("power_extender_http_timeout", 0.05),
        ("power_extender_wait_timeout", 1),
    ):
        number = _number(values.get(name))
        if number is None or not math.isfinite(number) or number < least:
            bad(name, f"must be a number of seconds, at least {least:g}")
    paths = {}
    for name in ("power_extender_code_dir", "power_extender_manifest_path", "power_extender_pki_dir"):
        path = values.get(name)
        if not isinstance(path, str) or not path.startswith("/") or "/../" in path + "/":
            bad(name, "must be an absolute path without '..'")
        else:
            paths[name] = path.rstrip("/")
    manifest = paths.get("power_extender_manifest_path")
    if manifest:
        manifests_dir = manifest.rsplit("/", 1)[0]
        for name in ("power_extender_code_dir", "power_extender_pki_dir"):
            if name in paths and (paths[name] + "/").startswith(manifests_dir + "/"):
                bad(name, f"must be outside {manifests_dir}: kubelet runs every file there as a static pod")
    return problems
