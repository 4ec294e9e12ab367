"""Every NetworkPolicy the collection ships, enforced by a real policy engine over an overlay.

The lab runs kube-router's network policy controller on every node (lab/components/kube_router.py),
and a node's call to a pod on another node arrives from its tunnel address, as under Calico
IPIP/VXLAN or flannel (lab/components/network.py). On the session's site converge (the default
``poweraware_network_policy_control_plane: any``), each shipped policy is tried from real pods:
the component's own clients and the control plane reach it, a stranger pod (in another namespace,
and in the component's own) does not where the policy names its clients, and the component
reaches the API server, its listed peers and nothing else. A refusal counts only where the port
answers the pod's own node (which every CNI admits, as it admits the kubelet's probes), so a
closed port cannot pass for a refused one.

The connections are made from inside the pods (``kubectl exec``: the lab's containers see the
node's python3) with a plain TCP connect: kube-router answers a refused SYN with ICMP
port-unreachable, so a refusal is prompt.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import shlex
import uuid

import pytest
from kubernetes.client.rest import ApiException
from poweraware_testing import wait_until
from site_run import run_site

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(900)]

PYTHON_IMAGE = "docker.io/library/python:3.12.14-slim-bookworm"  # mapped to the nodes' python3
STRANGER_PORT = 8080
# the destinations that are Services' ClusterIPs: default/kubernetes and kube-system/kube-dns (TCP)
SERVICES = {"api": ("10.96.0.1", 443), "dns": ("10.96.0.10", 53)}
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()\n"
    "    print('open')\n"
    "except OSError as exc:\n"
    "    print('closed', exc)\n"
)


@dataclasses.dataclass(frozen=True)
class Component:
    namespace: str
    selector: str
    port: int


# What the site deploys that a shipped policy selects (docs/security.md, "Per component").
COMPONENTS = {
    "collectd": Component("monitoring", "app.kubernetes.io/name=collectd", 9103),
    "kube-state-metrics": Component("monitoring", "app.kubernetes.io/name=kube-state-metrics", 8080),
    "prometheus": Component("monitoring", "app.kubernetes.io/name=prometheus", 9090),
    "prometheus-adapter": Component("custom-metrics", "app.kubernetes.io/name=prometheus-adapter", 6443),
    "tas": Component("telemetry-aware-scheduling", "app.kubernetes.io/name=telemetry-aware-scheduling", 9001),
    "nfd-master": Component(
        "node-feature-discovery",
        "app.kubernetes.io/name=node-feature-discovery,app.kubernetes.io/component=master",
        8080,
    ),
    "nfd-worker": Component(
        "node-feature-discovery",
        "app.kubernetes.io/name=node-feature-discovery,app.kubernetes.io/component=worker",
        8080,
    ),
    "peaks": Component("kube-system", "app.kubernetes.io/name=peaks", 10259),
    "load-watcher": Component("kube-system", "app.kubernetes.io/name=peaks-load-watcher", 2020),
}
# namespace/name of each shipped policy -> the components whose rows below try it
POLICIES = {
    "monitoring/collectd": ("collectd",),
    "monitoring/kube-state-metrics": ("kube-state-metrics",),
    "monitoring/prometheus": ("prometheus",),
    "monitoring/prometheus-from-peaks-load-watcher": ("load-watcher", "prometheus"),
    "custom-metrics/prometheus-adapter": ("prometheus-adapter",),
    "telemetry-aware-scheduling/telemetry-aware-scheduling": ("tas",),
    "node-feature-discovery/node-feature-discovery": ("nfd-master", "nfd-worker"),
    "kube-system/peaks": ("peaks",),
    "kube-system/peaks-load-watcher": ("load-watcher",),
}

# (from, to, port or None for the component's own, admitted?). "stranger" is a pod in a namespace of
# the test's own, "monitoring-stranger" one in monitoring beside collectd, kube-state-metrics and
# Prometheus; "api" and "dns" are the kubernetes and kube-dns Services' ClusterIPs.
INGRESS = [
    ("prometheus", "collectd", None, True),
    ("stranger", "collectd", None, False),
    ("monitoring-stranger", "collectd", None, False),
    ("prometheus", "kube-state-metrics", None, True),
    ("prometheus", "kube-state-metrics", 8081, False),  # its telemetry port: nobody scrapes it
    ("stranger", "kube-state-metrics", None, False),
    ("monitoring-stranger", "kube-state-metrics", None, False),
    ("prometheus-adapter", "prometheus", None, True),
    ("load-watcher", "prometheus", None, True),  # the peaks role's policy in Prometheus' namespace
    # the control plane by port (`any`): the power_models play reads Prometheus from there, and so may
    # any pod (docs/security.md: prometheus_network_policy_control_plane_reads)
    ("stranger", "prometheus", None, True),
    # `any`: the aggregator and kube-scheduler arrive from a tunnel address; TLS authenticates them
    ("stranger", "prometheus-adapter", None, True),
    ("stranger", "tas", None, True),
    ("stranger", "nfd-master", None, False),
    ("stranger", "nfd-worker", None, False),
    ("stranger", "peaks", None, False),
    ("peaks", "load-watcher", None, True),
    ("stranger", "load-watcher", None, False),
]
EGRESS = [
    # every component that uses the API reaches it; collectd reaches nothing, load-watcher only Prometheus
    *[(name, "api", None, name not in ("collectd", "load-watcher")) for name in COMPONENTS],
    *[(name, "stranger", None, False) for name in COMPONENTS],
    ("prometheus-adapter", "dns", None, True),
    ("peaks", "dns", None, True),
    ("load-watcher", "dns", None, True),
    ("tas", "dns", None, False),
    ("prometheus-adapter", "kube-state-metrics", None, False),
    ("tas", "prometheus", None, False),
]


@dataclasses.dataclass
class Probe:
    namespace: str
    pod: str
    ip: str
    node: str


def _pod(core, namespace: str, selector: str) -> Probe:
    pods = [
        p
        for p in core.list_namespaced_pod(namespace, label_selector=selector).items
        if p.status.phase == "Running" and p.status.pod_ip and not p.metadata.deletion_timestamp
    ]
    assert pods, f"no running pod {selector} in {namespace}"
    pod = sorted(pods, key=lambda p: p.metadata.name)[0]
    return Probe(namespace, pod.metadata.name, pod.status.pod_ip, pod.spec.node_name)


def _stranger(core, namespace: str, node: str) -> Probe:
    name = f"netpol-stranger-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "netpol-stranger"}},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "web",
                        "image": PYTHON_IMAGE,
                        "command": ["python3", "-m", "http.server", str(STRANGER_PORT)],
                        "securityContext": {"runAsUser": 65534},
                    }
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )
    pod = wait_until(
        lambda: (p := core.read_namespaced_pod(name, namespace)).status.phase == "Running" and p.status.pod_ip and p,
        60,
        f"the stranger pod {namespace}/{name}",
    )
    return Probe(namespace, name, pod.status.pod_ip, node)


@pytest.fixture(scope="module")
def probes(site, api, lab):
    """The components' pods and two stranger pods (one in a namespace of the test's own, one in
    monitoring), on the first worker."""
    core = api["core"]
    found = {name: _pod(core, c.namespace, c.selector) for name, c in COMPONENTS.items()}
    strangers = []
    with lab.scratch_namespace("netpol") as namespace:
        try:
            found["stranger"] = _stranger(core, namespace, lab.worker_nodes[0])
            strangers.append(found["stranger"])
            found["monitoring-stranger"] = _stranger(core, "monitoring", lab.worker_nodes[1])
            strangers.append(found["monitoring-stranger"])
            yield found
        finally:
            for probe in strangers:
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_pod(probe.pod, probe.namespace, grace_period_seconds=0)


def _connect_from_pod(lab, probe: Probe, address: str, port: int) -> str:
    return lab.pod_exec(probe.namespace, probe.pod, ["python3", "-c", CONNECT, address, str(port)]).decode().strip()


def _connect_from_node(lab, node: str, address: str, port: int) -> str:
    return lab.ssh(node, f"python3 -c {shlex.quote(CONNECT)} {address} {port}").stdout.strip()


def _target(probes: dict, name: str, port: int | None) -> tuple[str, int, str | None]:
    """(address, port, the node it runs on or None for a Service) of a row's destination."""
    if name in SERVICES:
        return (*SERVICES[name], None)
    if name in ("stranger", "monitoring-stranger"):
        return probes[name].ip, port or STRANGER_PORT, probes[name].node
    return probes[name].ip, port or COMPONENTS[name].port, probes[name].node


def test_every_shipped_policy_has_its_rows(site, api):
    """Every NetworkPolicy the site applied is tried below: a new one needs its rows."""
    shipped = {
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in api["networking"]
        .list_network_policy_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=poweraware.k8s")
        .items
    }
    assert shipped == set(POLICIES), shipped ^ set(POLICIES)
    tried = {name for row in INGRESS + EGRESS for name in row[:2]}
    assert {c for components in POLICIES.values() for c in components} <= tried


def test_each_policy_admits_what_must_pass_and_refuses_the_rest(site, api, lab, probes):
    """Each row of INGRESS and EGRESS from inside the pods; every refused row's destination answers
    its own node (it listens: the policy refused). The rows run four at a time."""
    wanted = {(src, dst, port): admitted for src, dst, port, admitted in [*INGRESS, *EGRESS]}
    assert len(wanted) == len(INGRESS) + len(EGRESS), "a row is listed twice"

    def attempt(key):
        src, dst, port = key
        address, dst_port, _node = _target(probes, dst, port)
        return key, _connect_from_pod(lab, probes[src], address, dst_port)

    def control(dst_key):
        dst, port = dst_key
        address, dst_port, node = _target(probes, dst, port)
        return dst_key, _connect_from_node(lab, node, address, dst_port)

    # a Service's ClusterIP has no node of its own to show it listens: its admitted rows show it
    refused_targets = {
        (dst, port) for (_s, dst, port), admitted in wanted.items() if not admitted and dst not in SERVICES
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        got = dict(pool.map(attempt, wanted))
        listening = dict(pool.map(control, refused_targets))
    table = [f"{src:>20} -> {dst}:{port or ''} {got[(src, dst, port)]}" for src, dst, port in wanted]
    print("PROOF enforced policies (kube-router, overlay sources):", *table, sep="\n  ")
    assert {k: v for k, v in listening.items() if v != "open"} == {}, "a refused row's port must listen"
    wrong = {
        f"{src} -> {dst}:{port or ''}": got[(src, dst, port)]
        for (src, dst, port), admitted in wanted.items()
        if (got[(src, dst, port)] == "open") != admitted
    }
    assert wrong == {}, wrong


def test_the_control_planes_callers_are_admitted_over_the_overlay(site, api, lab, probes):
    """The aggregator reaches the adapter (the custom metrics API answers) from the control-plane
    node's tunnel address, kube-apiserver's proxy reaches Prometheus, and Prometheus scrapes every
    target, while every policy is enforced."""
    adapter = probes["prometheus-adapter"]
    assert adapter.node != lab.control_plane_node  # so the aggregator's call crosses the overlay
    values = wait_until(
        lambda: lab.node_custom_metric("package_power_avg") or None, 120, "the custom metrics API to answer"
    )
    assert set(values) >= set(lab.worker_nodes), values
    prometheus = probes["prometheus"]
    raw = api["core"].connect_get_namespaced_pod_proxy_with_path(
        f"{prometheus.pod}:9090", prometheus.namespace, "api/v1/targets", _preload_content=False
    )
    active = json.loads(raw.data)["data"]["activeTargets"]
    assert active and all(t["health"] == "up" for t in active), [(t["scrapeUrl"], t["health"]) for t in active]
    print(f"PROOF over the overlay: custom metrics {values}; Prometheus targets up: {len(active)}")


def _adapter_available(api) -> str:
    apiservice = api["reg"].read_api_service("v1beta1.custom.metrics.k8s.io")
    condition = next(c for c in apiservice.status.conditions if c.type == "Available")
    return f"{condition.status} {condition.reason}: {condition.message or ''}".strip()


def _restart_adapter(api) -> None:
    core = api["core"]
    selector = "app.kubernetes.io/name=prometheus-adapter"
    old = {p.metadata.name for p in core.list_namespaced_pod("custom-metrics", label_selector=selector).items}
    for name in old:
        core.delete_namespaced_pod(name, "custom-metrics")
    wait_until(
        lambda: any(
            p.metadata.name not in old and p.status.phase == "Running"
            for p in core.list_namespaced_pod("custom-metrics", label_selector=selector).items
        ),
        120,
        "a new adapter pod",
    )


# make lifecycle, not make test, for make test's time (three runs of the adapter's role)
@pytest.mark.lifecycle
def test_the_control_plane_by_address_needs_its_tunnel_address_on_an_overlay(site, api, lab):
    """``poweraware_network_policy_control_plane: api_servers`` without sources, the collection's
    default before it named the control plane by port: the adapter admits the API servers' advertise
    addresses only, the aggregator's calls arrive from the control-plane node's tunnel address, the
    policy engine refuses them and the custom metrics APIService goes unavailable (kube-scheduler
    would skip TAS the same way, silently). The tunnel address as a source brings it back; the
    default (``any``) is restored at the end."""
    control_plane_tunnel = "10.244.1.0/32"  # flannel.1 of lab-control-plane: its pod CIDR's network address
    by_address = {"poweraware_network_policy_control_plane": "api_servers"}
    try:
        done = run_site(lab, tags=["prometheus_adapter"], extra_vars=by_address)
        assert done.rc == 0 and done.failed == 0, done
        ingress = api["networking"].read_namespaced_network_policy("prometheus-adapter", "custom-metrics").spec.ingress
        assert [peer.ip_block.cidr for peer in ingress[0]._from] == ["10.0.0.2/32"], ingress
        # the engine keeps established connections (conntrack): the aggregator's stays up until the
        # adapter restarts, as every pod of a fresh install starts under the policy
        _restart_adapter(api)
        broken = wait_until(
            # not MissingEndpoints, which the restart gives before the new pod is ready: the calls refused
            lambda: (a := _adapter_available(api)).startswith("False FailedDiscoveryCheck") and a,
            180,
            "the APIService to fail its discovery check",
        )
        done = run_site(
            lab,
            tags=["prometheus_adapter"],
            extra_vars={**by_address, "poweraware_network_policy_control_plane_sources": control_plane_tunnel},
        )
        assert done.rc == 0 and done.failed == 0, done
        _restart_adapter(api)
        mended = wait_until(
            lambda: (a := _adapter_available(api)).startswith("True") and a, 180, "the APIService to be Available"
        )
        assert lab.node_custom_metric("package_power_avg")
    finally:
        restored = run_site(lab, tags=["prometheus_adapter"])
    assert restored.rc == 0 and restored.failed == 0, restored
    wait_until(lambda: _adapter_available(api).startswith("True"), 180, "the APIService Available again with any")
    print(f"PROOF api_servers without sources: {broken}; with {control_plane_tunnel}: {mended}")
