"""The lab kubelet's decisions for API pods (lab/kubelet/pods.py and its modules): which pods it claims (the same
rule kwok's generated stages use to skip them), addresses, Kubernetes' $(VAR) expansion, the
ENTRYPOINT/command/args rules, listen flags, volume items and paths resolved inside a container root."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.descheduler import release_for
from poweraware_testing import role_defaults

from lab import assets, images
from lab.components import kwok
from lab.kubelet import client, common, containers, grpc_h2, pods, probes, pull, runtime, sandbox, volumes

KSM = "registry.k8s.io/kube-state-metrics/kube-state-metrics"
IMAGE_MAP = images.image_map()


def pod(*container_images, annotations=None, host_network=False):
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "annotations": annotations or {}},
        "spec": {
            "containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(container_images)],
            "hostNetwork": host_network,
        },
    }


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        (f"{KSM}:v2.15.0", f"{KSM}:v2.15.0"),
        (f"{KSM}@sha256:{'a' * 64}", f"{KSM}:latest"),
        (f"{KSM}:v2.15.0@sha256:{'a' * 64}", f"{KSM}:v2.15.0"),
        ("localhost:5000/tools/ksm:1", "localhost:5000/tools/ksm:1"),
        ("localhost:5000/tools/ksm", "localhost:5000/tools/ksm:latest"),
        ("busybox", "busybox:latest"),
    ],
)
def test_reference_drops_the_digest_and_not_a_registry_port(image, reference):
    assert pull.reference_of(image) == reference


def test_a_pod_is_claimed_when_any_container_is_mapped_and_never_a_mirror_pod():
    assert pods.claims(pod(f"{KSM}:v2.15.0"), IMAGE_MAP)
    assert pods.claims(pod("registry.k8s.io/pause:3.10", f"{KSM}:v2.15.0"), IMAGE_MAP)
    assert not pods.claims(pod("registry.k8s.io/pause:3.10"), IMAGE_MAP)
    mirror = pod(f"{KSM}:v2.15.0", annotations={"kubernetes.io/config.mirror": "x"})
    assert not pods.claims(mirror, IMAGE_MAP)
    # Another version of a mapped image is not the executable the lab has: kwok keeps it.
    assert not pods.claims(pod(f"{KSM}:v2.12.0"), IMAGE_MAP)
    assert not pods.claims(pod("docker.io/intel/telemetry-aware-scheduling:0.6.0"), IMAGE_MAP)
    assert pods.claims(pod("docker.io/intel/telemetry-aware-scheduling:0.7.0"), IMAGE_MAP)


def test_kwok_stages_skip_exactly_the_pods_the_kubelet_claims(tmp_path):
    stages = {p.name: yaml.safe_load(p.read_text()) for p in kwok.write_stages(tmp_path)}
    pod_stages = [s for s in stages.values() if s["spec"]["resourceRef"]["kind"] == "Pod"]
    assert {s["metadata"]["name"] for s in pod_stages} == {"pod-ready", "pod-complete", "pod-delete"}
    for stage in pod_stages:
        assert images.kwok_selector() in stage["spec"]["selector"]["matchExpressions"], stage["metadata"]["name"]
    node_stages = [s for s in stages.values() if s["spec"]["resourceRef"]["kind"] == "Node"]
    assert node_stages and all(
        images.kwok_selector() not in (s["spec"].get("selector") or {}).get("matchExpressions", []) for s in node_stages
    )
    # The jq key strips what reference_of strips; NotIn compares against the same references.
    assert images.kwok_selector()["values"] == sorted(IMAGE_MAP)


def test_pod_addresses_are_stable_per_uid_distinct_and_in_the_nodes_range():
    first = sandbox.pod_address("uid-a", "10.244.12.0/24", set())
    assert first == sandbox.pod_address("uid-a", "10.244.12.0/24", set())
    assert first.startswith("10.244.12.")
    assert 2 <= int(first.rsplit(".", 1)[1]) <= 254
    taken = {first}
    again = sandbox.pod_address("uid-a", "10.244.12.0/24", taken)
    assert again != first and again.startswith("10.244.12.")
    everything = {f"10.244.12.{i}" for i in range(2, 255)}
    with pytest.raises(common.PodError, match="no free pod address"):
        sandbox.pod_address("uid-b", "10.244.12.0/24", everything)
    with pytest.raises(common.PodError, match="IPv4 /24, not 10.244.0.0/16"):
        sandbox.pod_address("uid-b", "10.244.0.0/16", set())


def _dns_pod(policy=None, host_network=False, config=None):
    spec = {"hostNetwork": host_network}
    if policy:
        spec["dnsPolicy"] = policy
    if config:
        spec["dnsConfig"] = config
    return {"metadata": {"namespace": "monitoring", "name": "p"}, "spec": spec}


def test_resolv_conf_follows_kubelets_dns_policies():
    cluster_first = sandbox.resolv_conf(_dns_pod(), "10.96.0.10", "cluster.local")
    assert cluster_first == (
        "nameserver 10.96.0.10\nsearch monitoring.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
    )
    # ClusterFirst on the host network falls back to the node's file, as kubelet does.
    assert sandbox.resolv_conf(_dns_pod(host_network=True), "10.96.0.10", "cluster.local") is None
    assert sandbox.resolv_conf(_dns_pod("Default"), "10.96.0.10", "cluster.local") is None
    with_host = sandbox.resolv_conf(_dns_pod("ClusterFirstWithHostNet", True), "10.96.0.10", "cluster.local")
    assert with_host == cluster_first
    merged = sandbox.resolv_conf(
        _dns_pod(
            config={
                "nameservers": ["10.96.0.53"],
                "searches": ["example.org"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
            }
        ),
        "10.96.0.10",
        "cluster.local",
    )
    assert merged.splitlines() == [
        "nameserver 10.96.0.10",
        "nameserver 10.96.0.53",
        "search monitoring.svc.cluster.local svc.cluster.local cluster.local example.org",
        "options ndots:2 edns0",
    ]
    only = sandbox.resolv_conf(_dns_pod("None", config={"nameservers": ["10.0.0.2"]}), "10.96.0.10", "c.l")
    assert only == "nameserver 10.0.0.2\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("--node=$(NODE)", "--node=w1"),
        ("$(NODE)-$(NODE)", "w1-w1"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$$(NODE)", "$(NODE)"),
        ("cost $$5", "cost $5"),
        ("$NODE", "$NODE"),
    ],
)
def test_variable_references_expand_as_kubernetes_does(value, expected):
    assert containers.expand(value, {"NODE": "w1"}) == expected


def test_command_replaces_the_entrypoint_and_args_replace_its_defaults():
    image = IMAGE_MAP[f"{KSM}:v2.15.0"]
    assert containers.resolve_command({}, image, {}) == list(image["entrypoint"])
    only_args = containers.resolve_command({"args": ["--port=9000"]}, image, {})
    assert only_args == ["kube-state-metrics", "--port=9000"]  # the image's default args are gone
    command = containers.resolve_command({"command": ["/kube-state-metrics"], "args": ["--v=$(V)"]}, image, {"V": "2"})
    assert command == ["/kube-state-metrics", "--v=2"]
    with pytest.raises(common.PodError, match="no entrypoint"):
        containers.resolve_command({}, {"entrypoint": []}, {})


def test_volume_items_select_keys_paths_and_modes_and_refuse_missing_keys():
    data = {"a": b"1", "b": b"2"}
    assert volumes.key_to_path_items(data, None, 0o644) == {"a": (b"1", 0o644), "b": (b"2", 0o644)}
    picked = volumes.key_to_path_items(data, [{"key": "b", "path": "dir/b.txt", "mode": 0o400}], 0o644)
    assert picked == {"dir/b.txt": (b"2", 0o400)}
    with pytest.raises(common.PodError, match="'c' is not in"):
        volumes.key_to_path_items(data, [{"key": "c"}], 0o644)


class ObjectsApi:
    """NodeApi's object reads from a dict the test changes, counting the reads."""

    def __init__(self, objects):
        self.objects, self.reads = objects, 0

    def object_data(self, kind, namespace, name, optional):
        self.reads += 1
        data = self.objects.get((kind, name))
        if data is None and not optional:
            raise common.PodError(f'{kind.lower()} "{name}" not found')
        return data


def test_configmap_volumes_follow_the_api_by_an_atomic_swap_and_only_when_changed(tmp_path):
    """kubelet's volume sync: a changed ConfigMap is written anew (a new ..data directory swapped in,
    the old one gone), an unchanged one is not touched, an optional one that appears later shows
    up (a subPath mount binds the file it resolved to at start, so it is not updated)."""
    api = ObjectsApi({("ConfigMap", "settings"): {"mode": b"one"}, ("Secret", "creds"): {"key": b"k1"}})
    p = pod(f"{KSM}:v2.15.0")
    p["spec"]["volumes"] = [
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {"name": "late", "configMap": {"name": "late", "optional": True}},
    ]
    pod_volumes = volumes.PodVolumes(api, p, tmp_path, None)
    pod_volumes.prepare()
    settings = pod_volumes.volumes["settings"].source
    first = os.readlink(settings / "..data")
    assert (settings / "mode").read_text() == "one"
    assert pod_volumes.sync() == []  # nothing changed: nothing written
    assert os.readlink(settings / "..data") == first
    api.objects[("ConfigMap", "settings")] = {"mode": b"two", "extra": b"x"}
    api.objects[("ConfigMap", "late")] = {"now": b"here"}
    assert sorted(pod_volumes.sync()) == ["late", "settings"]
    assert (settings / "mode").read_text() == "two" and (settings / "extra").read_text() == "x"
    assert os.readlink(settings / "..data") != first and not (settings / first).exists()
    assert (pod_volumes.volumes["late"].source / "now").read_text() == "here"
    api.objects[("Secret", "creds")] = {"key": b"k2"}
    assert pod_volumes.sync() == ["creds"]
    creds = pod_volumes.volumes["creds"].source / "key"
    assert creds.read_text() == "k2" and (creds.stat().st_mode & 0o777) == 0o400


def test_downward_fields_and_an_unsupported_one():
    p = pod(f"{KSM}:v2.15.0")
    p["metadata"]["labels"] = {"app": "x"}
    p["spec"]["nodeName"] = "w1"
    assert volumes.field_value(p, "metadata.namespace", "", "") == "ns"
    assert volumes.field_value(p, "spec.nodeName", "", "") == "w1"
    assert volumes.field_value(p, "status.podIP", "10.244.1.2", "") == "10.244.1.2"
    assert volumes.field_value(p, "metadata.labels['app']", "", "") == "x"
    with pytest.raises(common.PodError, match="not supported"):
        volumes.field_value(p, "spec.priority", "", "")


def test_container_paths_resolve_inside_the_root_through_absolute_symlinks(tmp_path):
    root = tmp_path / "rootfs"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    os.symlink("/run", root / "var" / "run")  # Debian's /var/run, absolute
    os.symlink("../../etc", root / "var" / "up")
    resolved = runtime.resolve_in_root(str(root), "/var/run/secrets/kubernetes.io/serviceaccount")
    assert resolved == str(root / "run" / "secrets" / "kubernetes.io" / "serviceaccount")
    # ".." never climbs out of the root, whatever the link says.
    assert runtime.resolve_in_root(str(root), "/var/up/../../../x") == str(root / "x")
    os.symlink("loop", root / "loop")
    with pytest.raises(OSError, match="too many levels"):
        runtime.resolve_in_root(str(root), "/loop/x")


def test_every_mapped_image_is_a_roles_default_image_at_its_default_tag():
    """The lab runs what the roles deploy: a role whose default image or tag moves without the map
    (and the executable's Go module) would leave its pods to kwok without anyone noticing."""
    roles = pathlib.Path(__file__).resolve().parents[3] / "roles"
    defaults = {}
    for path in roles.glob("*/defaults/main.yml"):
        defaults.update(role_defaults(path))
    # an empty default tag is chosen per cluster (the descheduler's follows the Kubernetes minor): the
    # lab's Kubernetes decides it
    lab_minor = assets.kubernetes_version()
    deployed = {
        f"{defaults[key]}:{defaults[key + '_tag'] or (key == 'descheduler_image' and release_for(lab_minor)[0])}"
        for key in defaults
        if key.endswith("_image") and f"{key}_tag" in defaults
    }
    # an image nobody publishes (load-watcher; a maintained collectd) is the user's build: the role's
    # default is empty and its tag the release the docs tell users to build, which the lab runs
    user_built = [image for image in images.IMAGES if image.user_built]
    assert [image.repository for image in user_built] == [
        "localhost:5000/load-watcher",
        "localhost:5000/poweraware/collectd",
    ]
    for image in user_built:
        assert defaults[image.user_built] == "", image
        assert defaults[image.user_built + "_tag"] == image.tag == image.version, image
    # a cluster add-on (metrics-server, kubeadm's, the policy engine) is the lab's, applied from its project's manifests
    addons = {image.reference for image in images.IMAGES if image.addon}
    assert addons == {
        "registry.k8s.io/metrics-server/metrics-server:v0.9.0",
        "registry.k8s.io/kube-proxy:v1.36.3",
        "registry.k8s.io/coredns/coredns:v1.14.2",
        "docker.io/cloudnativelabs/kube-router:v2.1.0",
    }
    assert {image.reference for image in images.IMAGES if not image.user_built and not image.addon} <= deployed


def test_a_pod_network_is_a_veth_named_from_the_uid_with_a_host_route_and_a_default_route():
    interface = sandbox.host_interface("0f6c1b1e-5a34-4b8e-9f57-1b2c3d4e5f60")
    assert interface.startswith("cali") and len(interface) == 15  # IFNAMSIZ - 1
    assert interface != sandbox.host_interface("another-uid")
    plan = sandbox.sandbox_plan(interface, "10.244.11.9", 4242)
    node = [argv for where, argv in plan if where == "node"]
    pod = [argv for where, argv in plan if where == "pod"]
    assert node[0] == ["ip", "link", "add", interface, "type", "veth", "peer", "name", "eth0", "netns", "4242"]
    assert ["ip", "route", "add", "10.244.11.9/32", "dev", interface] in node
    assert ["ip", "address", "add", "10.244.11.9/32", "dev", "eth0"] in pod
    # The gateway is on-link before the default route names it, and eth0 is up before either.
    assert (
        pod.index(["ip", "link", "set", "eth0", "up"])
        < pod.index(["ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link"])
        < pod.index(["ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0"])
    )
    assert [where for where, _argv in plan] == sorted((where for where, _argv in plan), key=["node", "pod"].index)
    # containerd 2's defaults for a pod with a network namespace of its own
    assert ["sysctl", "-q", "-w", "net.ipv4.ip_unprivileged_port_start=0"] in pod
    assert ["sysctl", "-q", "-w", "net.ipv4.ping_group_range=0 2147483647"] in pod


def test_the_kubernetes_service_names_the_pods_api_server_and_waits_until_it_exists():
    class Api:
        def __init__(self, service):
            self.service = service

        def request(self, method, path, body=None, missing_ok=False, patch=False):
            assert (method, path) == ("GET", "/api/v1/namespaces/default/services/kubernetes")
            return self.service

    service = {"spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]}}
    assert client.NodeApi(Api(service)).kubernetes_service() == ("10.96.0.1", "443")
    with pytest.raises(common.PodError, match="no cluster IP"):
        client.NodeApi(Api(None)).kubernetes_service()


def test_pod_hostname_is_kubelets():
    assert sandbox.pod_hostname({"metadata": {"name": "web-0"}, "spec": {}}) == "web-0"
    assert sandbox.pod_hostname({"metadata": {"name": "web-0"}, "spec": {"hostname": "db"}}) == "db"
    long_name = "a" * 62 + "-b" + "c" * 10  # cut at 63 ends with "-": trimmed, as kubelet does
    assert sandbox.pod_hostname({"metadata": {"name": long_name}, "spec": {}}) == "a" * 62


NFD = "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"


def _api_pod(spec_context=None, container_context=None, image=NFD):
    body = pod(image)
    if spec_context is not None:
        body["spec"]["securityContext"] = spec_context
    if container_context is not None:
        body["spec"]["containers"][0]["securityContext"] = container_context
    api_pod = containers.ApiPod(body, "n", "127.0.1.1", "10.244.1.2", IMAGE_MAP, pathlib.Path("/nonexistent"), None)
    (container,) = api_pod.containers
    return api_pod, container


def test_the_image_user_applies_when_the_pod_names_none():
    # NFD's image runs as USER 65534:65534: its pods set only runAsNonRoot, as upstream's manifests do
    api_pod, container = _api_pod({"runAsNonRoot": True})
    assert runtime.run_as(api_pod.pod, container.spec, container.image) == (65534, 65534, ())
    # the pod's runAsUser/runAsGroup win over the image's
    api_pod, container = _api_pod({"runAsNonRoot": True, "runAsUser": 1000}, {"runAsGroup": 2000})
    assert runtime.run_as(api_pod.pod, container.spec, container.image) == (1000, 2000, ())


def test_an_image_without_user_runs_as_root_and_runasnonroot_refuses_it():
    load_watcher = "localhost:5000/load-watcher:v0.2.4"  # no USER in its Dockerfile
    api_pod, container = _api_pod({"runAsNonRoot": True}, image=load_watcher)
    with pytest.raises(common.PodError, match="runAsNonRoot and image will run as root"):
        runtime.run_as(api_pod.pod, container.spec, container.image)
    api_pod, container = _api_pod(None, image=load_watcher)
    assert runtime.run_as(api_pod.pod, container.spec, container.image) is None
    # the descheduler's USER 1000 has no group: the group is the uid's, as the lab gives it
    api_pod, container = _api_pod({}, image="registry.k8s.io/descheduler/descheduler:v0.36.0")
    assert runtime.run_as(api_pod.pod, container.spec, container.image) == (1000, 1000, ())


def _h2_server(status: int | None):
    """A one-shot server speaking the server side of a gRPC health check: its SETTINGS, response
    headers (opaque HPACK bytes), the HealthCheckResponse with ``status`` (None: a trailers-only
    error answer), trailers ending the stream."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    received = {}

    def serve():
        conn, _addr = listener.accept()
        with conn:
            preface = conn.recv(len(grpc_h2.PREFACE))
            received["preface"] = preface
            conn.sendall(grpc_h2.frame(grpc_h2.SETTINGS, 0, 0, b"\x00\x03\x00\x00\x00\x64"))
            ends = grpc_h2.END_HEADERS
            if status is None:
                ends |= grpc_h2.END_STREAM
            conn.sendall(grpc_h2.frame(grpc_h2.HEADERS, ends, 1, b"\x88\x5f\x8b\x1d\x75\xd0\x62\x0d"))
            if status is not None:
                message = b"\x00\x00\x00\x00\x02\x08" + bytes([status])
                conn.sendall(grpc_h2.frame(grpc_h2.DATA, 0, 1, message))
                trailer = grpc_h2.END_HEADERS | grpc_h2.END_STREAM
                conn.sendall(grpc_h2.frame(grpc_h2.HEADERS, trailer, 1, b"\x40\x8b\x9a"))
            conn.recv(65536)

    threading.Thread(target=serve, daemon=True).start()
    return listener, received


@pytest.mark.parametrize(
    ("status", "ok", "message"),
    [
        (1, True, ""),
        (2, False, 'service unhealthy (responded with "NOT_SERVING")'),
        (None, False, "gRPC health check failed: no HealthCheckResponse (an error status)"),
    ],
)
def test_a_grpc_probe_passes_only_on_serving(status, ok, message):
    listener, received = _h2_server(status)
    with listener:
        port = listener.getsockname()[1]
        probe = {"grpc": {"port": port}, "timeoutSeconds": 2}
        assert probes.run_probe(probe, {}, "127.0.0.1", None) == (ok, message)
    assert received["preface"] == grpc_h2.PREFACE


def test_a_grpc_probe_of_a_closed_port_fails():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    ok, message = probes.run_probe({"grpc": {"port": port}}, {}, "127.0.0.1", None)
    assert not ok and message.startswith("probe failed:"), message


def test_a_missing_host_path_of_unset_type_is_created_as_a_directory(tmp_path):
    missing = tmp_path / "etc" / "kubernetes" / "node-feature-discovery" / "features.d"
    assert volumes.prepare_host_path({"path": str(missing)}) == missing
    assert missing.is_dir()
    with pytest.raises(common.PodError, match="is not a directory"):
        volumes.prepare_host_path({"path": str(tmp_path / "absent"), "type": "Directory"})
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize(
    ("resources", "ref", "value"),
    [
        ({"limits": {"memory": "512Mi"}}, {"resource": "limits.memory"}, "536870912"),  # NFD's GOMEMLIMIT
        ({"limits": {"memory": "512Mi"}}, {"resource": "limits.memory", "divisor": "1Mi"}, "512"),
        ({"requests": {"cpu": "250m"}}, {"resource": "requests.cpu"}, "1"),  # rounded up, as kubelet
        ({"requests": {"cpu": "250m"}}, {"resource": "requests.cpu", "divisor": "1m"}, "250"),
        ({"limits": {"memory": "1e3"}}, {"resource": "limits.memory"}, "1000"),
        ({"limits": {"memory": "512Mi"}}, {"resource": "limits.memory", "divisor": "0"}, "536870912"),  # stored
        ({}, {"resource": "limits.memory"}, "0"),
    ],
)
def test_resource_field_refs_are_whole_numbers_of_the_divisor(resources, ref, value):
    assert containers.resource_value({"resources": resources}, ref) == value


def test_capabilities_follow_containerds_rule():
    caps = runtime.CAPABILITIES

    def kept(**given):
        return runtime.kept_capabilities({"securityContext": {"capabilities": given}} if given else {})

    assert kept() is None  # none named: the lab leaves the process's set
    assert kept(drop=["ALL"]) == frozenset()
    assert kept(drop=["ALL"], add=["DAC_READ_SEARCH"]) == {caps["DAC_READ_SEARCH"]}
    assert kept(drop=["NET_RAW"]) == runtime.RUNTIME_DEFAULT_CAPABILITIES - {caps["NET_RAW"]}
    assert kept(add=["CAP_SYS_ADMIN"]) == runtime.RUNTIME_DEFAULT_CAPABILITIES | {caps["SYS_ADMIN"]}
    assert kept(add=["ALL"], drop=["SYS_ADMIN"]) == set(caps.values()) - {caps["SYS_ADMIN"]}
    with pytest.raises(common.PodError, match="unknown capability 'SYS_MAGIC' in securityContext.capabilities.add"):
        kept(add=["SYS_MAGIC"])


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping from the bounding set needs root")
def test_a_root_container_without_capabilities_has_none_after_exec():
    """uid 0 with drop [ALL] (the collectd pod's energy reader): exec leaves it no capability, and
    keeping one leaves exactly that one."""

    def effective(kept):
        out = subprocess.run(
            ["/bin/grep", "^CapEff:", "/proc/self/status"],
            preexec_fn=lambda: runtime.limit_capabilities(kept),  # noqa: PLW1509
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return int(out.split()[1], 16)

    assert effective(frozenset()) == 0
    assert effective(frozenset({runtime.CAPABILITIES["DAC_READ_SEARCH"]})) == 1 << 2


class ClaimsApi:
    """kube-apiserver's answers to the node's claim and volume reads (lab/kubelet/static_pods.py KubeApi.request)."""

    def __init__(self, objects):
        self.objects = objects

    def request(self, method, path, body=None, missing_ok=False):
        assert method == "GET"
        return self.objects.get(path)


def claim_objects(tmp_path, phase="Bound", claim_uid="u1"):
    pvc = {"metadata": {"name": "data", "uid": "u1"}, "spec": {"volumeName": "pv1"}, "status": {"phase": phase}}
    local = {"path": str(tmp_path / "disk")}
    pv = {"metadata": {"name": "pv1"}, "spec": {"local": local, "claimRef": {"uid": claim_uid}}}
    return {"/api/v1/namespaces/ns/persistentvolumeclaims/data": pvc, "/api/v1/persistentvolumes/pv1": pv}


def test_a_claim_bound_to_a_local_volume_is_given_to_the_pods_fs_group_as_kubelet_does(tmp_path):
    """kubelet's local plugin on the first mount (SetVolumeOwnership): every file gets the pod's
    fsGroup and group read-write, directories also setgid and execute; a symbolic link gets the group
    but keeps its target's mode; an unbound claim, a volume bound elsewhere or a missing local path
    keep the pod from starting with kubelet's message."""
    group = 65534 if os.geteuid() == 0 else os.getgid()
    disk = tmp_path / "disk"
    (disk / "wal").mkdir(parents=True)
    (disk / "wal" / "00000001").write_bytes(b"x")
    os.chmod(disk / "wal" / "00000001", 0o600)
    os.chmod(disk, 0o700)
    (tmp_path / "outside").write_text("keep")
    os.chmod(tmp_path / "outside", 0o600)
    os.symlink(tmp_path / "outside", disk / "link")
    p = pod(f"{KSM}:v2.15.0")
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pod_volumes = volumes.PodVolumes(client.NodeApi(ClaimsApi(claim_objects(tmp_path))), p, tmp_path, group)
    pod_volumes.prepare()
    assert pod_volumes.volumes["data"].source == disk
    for path, mode in ((disk, 0o2770), (disk / "wal", 0o2775), (disk / "wal" / "00000001", 0o660)):
        info = path.stat()
        assert (info.st_gid, stat.S_IMODE(info.st_mode)) == (group, mode), (path, oct(info.st_mode))
    assert stat.S_IMODE((tmp_path / "outside").stat().st_mode) == 0o600  # the link's target kept its mode
    for objects, message in (
        (claim_objects(tmp_path, phase="Pending"), 'has non-bound phase \\("Pending"\\)'),
        (claim_objects(tmp_path, claim_uid="other"), "is not bound to the PVC ns/data"),
        ({}, 'persistentvolumeclaim "data" not found'),
    ):
        with pytest.raises(common.PodError, match=message):
            volumes.PodVolumes(client.NodeApi(ClaimsApi(objects)), p, tmp_path, group).prepare()
    shutil.rmtree(disk)
    with pytest.raises(common.PodError, match="does not exist"):
        volumes.PodVolumes(client.NodeApi(ClaimsApi(claim_objects(tmp_path))), p, tmp_path, group).prepare()


def test_on_root_mismatch_skips_the_walk_when_the_root_is_already_the_groups():
    """fsGroupChangePolicy: OnRootMismatch looks at the root only (a file below keeps its mode)."""
    group = 65534 if os.geteuid() == 0 else os.getgid()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "f").write_text("x")
        os.chmod(root / "f", 0o600)
        os.chown(root, -1, group)
        os.chmod(root, 0o2770)  # noqa: S103 - the mode kubelet gives a volume's root
        volumes.set_volume_ownership(root, group, "OnRootMismatch")
        assert stat.S_IMODE((root / "f").stat().st_mode) == 0o600
        volumes.set_volume_ownership(root, group, None)
        assert stat.S_IMODE((root / "f").stat().st_mode) == 0o660


class FakeRegistry:
    """A registry's GET answers: manifests by tag and digest, blobs by digest, basic auth."""

    def __init__(self, user="lab-mirror", password="s3cret"):  # noqa: S107 - a test registry's
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        config = b'{"config":{"Entrypoint":["prometheus"]}}'
        self.config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        self.manifest = json.dumps({"schemaVersion": 2, "config": {"digest": self.config_digest}}).encode()
        self.digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()
        base = "https://10.0.1.5:5000/v2/prometheus/prometheus"
        self.objects = {
            f"{base}/manifests/v3.16.0": self.manifest,
            f"{base}/manifests/{self.digest}": self.manifest,
            f"{base}/blobs/{self.config_digest}": config,
        }
        self.asked = []

    def __call__(self, url, headers):
        self.asked.append((url, headers.get("Authorization")))
        if headers.get("Authorization") != self.auth:
            return 401, b"", {"WWW-Authenticate": 'Basic realm="mirror"'}
        body = self.objects.get(url)
        return (200, body, {}) if body is not None else (404, b"", {})


def dockerconfig(host="10.0.1.5:5000", user="lab-mirror", password="s3cret", key=None):  # noqa: S107 - test data
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {".dockerconfigjson": json.dumps({"auths": {key or host: {"auth": auth}}}).encode()}


def test_a_pull_authenticates_with_the_pods_secret_and_checks_the_digest():
    """The lab runtime's PullImage: the pod's dockerconfigjson credentials for the host (a key with
    a scheme and a path matches too), the manifest by the pinned digest, the config blob's digest
    checked; the image ID is host/path@digest."""
    registry = FakeRegistry()
    image = "10.0.1.5:5000/prometheus/prometheus:v3.16.0"
    creds = pull.docker_credentials([dockerconfig(key="https://10.0.1.5:5000/v1/")], "10.0.1.5:5000")
    assert creds == [("lab-mirror", "s3cret")]
    assert pull.pull_image(image, creds, registry) == f"10.0.1.5:5000/prometheus/prometheus@{registry.digest}"
    pinned = f"{image}@{registry.digest}"
    assert pull.pull_image(pinned, creds, registry).endswith(registry.digest)
    assert registry.asked[-2][0].endswith(f"/manifests/{registry.digest}")  # by digest, not by tag
    assert pull.docker_credentials([dockerconfig(host="quay.io")], "10.0.1.5:5000") == []


@pytest.mark.parametrize(
    ("image", "secrets", "message"),
    [
        ("10.0.1.5:5000/prometheus/prometheus:v3.16.0", [], "401 Unauthorized"),
        ("10.0.1.5:5000/prometheus/prometheus:v3.16.0", [dockerconfig(password="wrong")], "401 Unauthorized"),
        ("10.0.1.5:5000/prometheus/prometheus:v9", [dockerconfig()], "prometheus:v9: not found"),
        ("10.0.1.5:5000/prometheus/prometheus:v3.16.0@sha256:" + "0" * 64, [dockerconfig()], "not found"),
    ],
)
def test_a_pull_that_cannot_succeed_says_why_in_containerds_words(image, secrets, message):
    registry = FakeRegistry()
    creds = pull.docker_credentials(secrets, "10.0.1.5:5000")
    with pytest.raises(common.PodError, match=message) as err:
        pull.pull_image(image, creds, registry)
    assert str(err.value).startswith(f'failed to pull and unpack image "{image}"')


def test_a_manifest_whose_bytes_do_not_match_the_pinned_digest_is_refused():
    registry = FakeRegistry()
    other = "sha256:" + "1" * 64
    registry.objects[f"https://10.0.1.5:5000/v2/prometheus/prometheus/manifests/{other}"] = registry.manifest
    with pytest.raises(common.PodError, match="does not match"):
        pull.pull_image(f"10.0.1.5:5000/prometheus/prometheus:v3.16.0@{other}", [("lab-mirror", "s3cret")], registry)


def test_the_lab_image_map_holds_the_mirrors_references_to_pull():
    """Every image a role deploys is in the mirror under its path without the public host, and the
    kwok stages leave those pods to the lab's kubelet too."""
    mapped = images.image_map()
    mirror = "10.0.1.5:5000/prometheus/prometheus:v3.16.0"
    assert mapped[mirror]["pull"] is True and "pull" not in mapped["quay.io/prometheus/prometheus:v3.16.0"]
    assert mapped[mirror]["entrypoint"] == mapped["quay.io/prometheus/prometheus:v3.16.0"]["entrypoint"]
    assert "10.0.1.5:5000/library/python:3.12.14-slim-bookworm" in mapped
    assert mirror in images.kwok_selector()["values"]
    assert pull.image_host(mirror) == "10.0.1.5:5000" and pull.image_host("alpine:3") == "docker.io"
