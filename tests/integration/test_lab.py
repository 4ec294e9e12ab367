"""The lab itself: real control plane, kwok nodes, real scheduling, static-pod restarts, clean teardown."""

from __future__ import annotations

import collections
import contextlib
import os
import pathlib
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from lab import assets, cluster

pytestmark = pytest.mark.lab


def wait_until(check, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}")


@pytest.fixture
def namespace(lab):
    api = client.CoreV1Api(lab.api_client())
    name = f"lab-test-{uuid.uuid4().hex[:8]}"
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(
        lambda: any(sa.metadata.name == "default" for sa in api.list_namespaced_service_account(name).items),
        60,
        "the default service account",
    )
    yield name
    with contextlib.suppress(ApiException):
        api.delete_namespace(name)


def pod_template(app: str) -> client.V1PodTemplateSpec:
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": app}),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="app",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                )
            ]
        ),
    )


def running_pods(core: client.CoreV1Api, namespace: str, app: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def test_nodes_are_ready_with_realistic_shape(lab):
    core = client.CoreV1Api(lab.api_client())
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert sorted(nodes) == sorted([lab.control_plane_node, *lab.worker_nodes])
    assert len(lab.worker_nodes) == 3
    for name, node in nodes.items():
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", name
        labels = node.metadata.labels
        assert labels["kubernetes.io/hostname"] == name
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] == "amd64"
        assert node.status.capacity["cpu"] == "32"
        assert node.status.capacity["pods"] == "110"
        assert node.status.allocatable["memory"] == "127Gi"
        assert node.status.node_info.kubelet_version == lab.k8s_version
        assert lab.node_root(name).joinpath("sys", "devices", "system", "cpu").is_dir()
    control_plane = nodes[lab.control_plane_node]
    assert "node-role.kubernetes.io/control-plane" in control_plane.metadata.labels
    assert [(t.key, t.effect) for t in control_plane.spec.taints] == [
        ("node-role.kubernetes.io/control-plane", "NoSchedule")
    ]
    for name in lab.worker_nodes:
        assert not nodes[name].spec.taints
    version = client.VersionApi(lab.api_client()).get_code()
    assert version.git_version == lab.k8s_version


def test_deployment_pods_are_spread_over_the_workers_by_kube_scheduler(lab, namespace):
    api_client = lab.api_client()
    apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
    apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="spread"),
            spec=client.V1DeploymentSpec(
                replicas=6,
                selector=client.V1LabelSelector(match_labels={"app": "spread"}),
                template=pod_template("spread"),
            ),
        ),
    )
    pods = wait_until(
        lambda: (p := running_pods(core, namespace, "spread")) and len(p) == 6 and p, 90, "6 Running pods"
    )
    per_node = collections.Counter(p.spec.node_name for p in pods)
    assert set(per_node) == set(lab.worker_nodes), per_node  # all workers used, never the control plane
    assert max(per_node.values()) - min(per_node.values()) <= 1, per_node
    for pod in pods:
        assert pod.spec.scheduler_name == "default-scheduler"
        scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
        assert scheduled and scheduled[0].status == "True"
    events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    assert len({e.involved_object.name for e in events}) >= 6
    assert all(
        e.source.component == "default-scheduler" or e.reporting_component == "default-scheduler" for e in events
    )


def test_daemonset_gets_one_pod_per_worker_and_none_on_the_control_plane(lab, namespace):
    api_client = lab.api_client()
    apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
    apps.create_namespaced_daemon_set(
        namespace,
        client.V1DaemonSet(
            metadata=client.V1ObjectMeta(name="per-node"),
            spec=client.V1DaemonSetSpec(
                selector=client.V1LabelSelector(match_labels={"app": "per-node"}),
                template=pod_template("per-node"),
            ),
        ),
    )
    pods = wait_until(
        lambda: (p := running_pods(core, namespace, "per-node")) and len(p) == len(lab.worker_nodes) and p,
        90,
        "one Running pod per worker",
    )
    assert sorted(p.spec.node_name for p in pods) == sorted(lab.worker_nodes)
    time.sleep(2)  # a pod for the tainted control plane would have been created by now
    assert len(core.list_namespaced_pod(namespace, label_selector="app=per-node").items) == len(lab.worker_nodes)
    status = apps.read_namespaced_daemon_set_status("per-node", namespace).status
    assert status.desired_number_scheduled == len(lab.worker_nodes)


def _scheduler_pid(lab) -> tuple[int | None, str]:
    pod = lab.static_pods_status()["pods"].get("kube-scheduler.yaml", {})
    pids = pod.get("pids") or [None]
    return pids[0], pod.get("sha256", "")


def _mirror_pod(lab) -> client.V1Pod | None:
    try:
        return client.CoreV1Api(lab.api_client()).read_namespaced_pod(
            f"kube-scheduler-{lab.control_plane_node}", "kube-system"
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _mirror_state(lab) -> tuple[str, bool] | None:
    """The mirror pod's config.mirror hash and whether it is Ready."""
    pod = _mirror_pod(lab)
    if pod is None:
        return None
    ready = [c.status for c in pod.status.conditions or [] if c.type == "Ready"] == ["True"]
    return pod.metadata.annotations.get("kubernetes.io/config.mirror"), ready


def _write_manifest(path: pathlib.Path, text: str) -> None:
    # Same file system, then rename: the way Ansible's atomic_move replaces a manifest.
    tmp = path.parent.parent / f".{path.name}.{uuid.uuid4().hex}"
    tmp.write_text(text)
    os.replace(tmp, path)


def test_static_pod_runner_restarts_the_scheduler_when_its_manifest_changes(lab):
    manifest = lab.scheduler_manifest
    original = manifest.read_text()
    etc = lab.node_root(lab.control_plane_node) / "etc" / "kubernetes"
    old_pid, old_hash = _scheduler_pid(lab)
    assert old_pid and lab.scheduler_healthy()
    # The runner keeps a mirror pod, as kubelet does, with the manifest's hash and the probe's verdict.
    wait_until(lambda: _mirror_state(lab) == (old_hash[:32], True), 20, "a Ready mirror pod")
    mirror = _mirror_pod(lab)
    assert mirror.spec.node_name == lab.control_plane_node
    assert [(o.kind, o.name) for o in mirror.metadata.owner_references] == [("Node", lab.control_plane_node)]
    # A change such as the scheduler-extender role makes: a --config file on a new hostPath mount,
    # whose clientConnection.kubeconfig is a path inside the container.
    config_file = etc / "lab-test-scheduler-config.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
                "leaderElection": {"leaderElect": True},
                "profiles": [{"schedulerName": "lab-test-scheduler"}, {"schedulerName": "default-scheduler"}],
            }
        )
    )
    pod = yaml.safe_load(original)
    container = pod["spec"]["containers"][0]
    container["command"] = [a for a in container["command"] if not a.startswith("--kubeconfig=")]
    container["command"].append("--config=/etc/kubernetes/lab-test-scheduler-config.yaml")
    container["volumeMounts"].append(
        {"mountPath": "/etc/kubernetes/lab-test-scheduler-config.yaml", "name": "config", "readOnly": True}
    )
    pod["spec"]["volumes"].append(
        {"name": "config", "hostPath": {"path": "/etc/kubernetes/lab-test-scheduler-config.yaml", "type": "File"}}
    )
    try:
        # Files kubelet would skip: a dotfile. It must not cause a restart.
        (manifest.parent / ".kube-scheduler.yaml.swp").write_text("not a pod")
        time.sleep(2.5)
        assert _scheduler_pid(lab) == (old_pid, old_hash)

        started = time.monotonic()
        _write_manifest(manifest, yaml.safe_dump(pod, sort_keys=False))
        new_pid, new_hash = wait_until(
            lambda: (s := _scheduler_pid(lab))[0] not in (None, old_pid) and s, 15, "a new kube-scheduler pid"
        )
        assert not cluster.process_alive(old_pid, None)
        lab.wait_scheduler_healthy(60)
        restart_seconds = time.monotonic() - started
        argv = lab.static_pods_status()["pods"]["kube-scheduler.yaml"]["argv"]
        assert any(a.startswith("--config=") and a.endswith("lab-test-scheduler-config.yaml") for a in argv)
        assert restart_seconds < 30, restart_seconds
        wait_until(lambda: _mirror_state(lab) == (new_hash[:32], True), 20, "the mirror pod of the new manifest")

        # A manifest the runner cannot run (missing hostPath File) stops the pod: health fails...
        broken = yaml.safe_load(original)
        broken["spec"]["volumes"][0]["hostPath"] = {"path": "/etc/kubernetes/absent.conf", "type": "File"}
        _write_manifest(manifest, yaml.safe_dump(broken, sort_keys=False))
        wait_until(lambda: not lab.scheduler_healthy(), 15, "the scheduler to go down")
        assert lab.static_pods_status()["pods"]["kube-scheduler.yaml"]["state"] == "error"
        wait_until(lambda: _mirror_state(lab) is None, 20, "the mirror pod to go away")
    finally:
        # ...and a roll-back to the original brings it back, as the extender role relies on.
        _write_manifest(manifest, original)
        (manifest.parent / ".kube-scheduler.yaml.swp").unlink(missing_ok=True)
        lab.wait_scheduler_healthy(60)
        config_file.unlink(missing_ok=True)
    restored_pid, restored_hash = _scheduler_pid(lab)
    assert restored_hash == old_hash and restored_pid not in (old_pid, new_pid)
    wait_until(lambda: _mirror_state(lab) == (old_hash[:32], True), 20, "the mirror pod back")


def test_lab_down_leaves_no_process_and_no_state(lab, tmp_path):
    """A second, one-worker lab on other ports: up, a repeated up is a no-op, down removes everything."""
    state_dir = tmp_path / "lab"
    port_offset = lab.scheduler_port - 10259 + 1000  # clear of the session's lab
    config = cluster.LabConfig(state_dir=state_dir, port_offset=port_offset, workers=1)
    second = cluster.Lab(config, log=lambda _msg: None)
    try:
        assert second.up(build=False) is True
        pids = {name: info["pid"] for name, info in second.processes.items()}
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "static-pods"}
        tagged = cluster.tagged_processes(second.paths.state_dir)
        assert set(pids.values()) <= set(tagged)
        assert len(tagged) == len(pids) + 1  # and kube-scheduler, started by the runner
        assert stat_mode(state_dir) == 0o700
        assert stat_mode(state_dir / "pki" / "ca.key") == 0o600
        assert stat_mode(state_dir / "kubeconfig") == 0o600
        again = cluster.Lab(
            cluster.LabConfig(state_dir=state_dir, port_offset=port_offset, workers=1), log=lambda _m: None
        )
        assert again.up(build=False) is False  # already running: nothing started
        assert again.processes == second.processes
    finally:
        stopped = second.down()
    assert set(pids.values()) <= set(stopped)
    assert cluster.tagged_processes(second.paths.state_dir) == []
    for pid in tagged:
        assert not cluster.process_alive(pid, None), pid
    assert not state_dir.exists()
    for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler"):
        assert cluster.port_free(config.port(name)), name
    # The session's lab was not touched.
    assert lab.scheduler_healthy()


def stat_mode(path: pathlib.Path) -> int:
    return path.stat().st_mode & 0o777


def test_assets_directory_wins_and_nothing_is_built(lab, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("POWERAWARE_K8S_ASSETS", raising=False)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(lab.bin_dir))

    def no_build(*_args, **_kwargs):
        raise AssertionError("nothing may be built when an assets directory is set")

    monkeypatch.setattr(assets, "build_component", no_build)
    found = assets.resolve_binaries(build=True)
    assert {name: path.parent for name, path in found.items() if name in assets.BINARIES} == {
        name: lab.bin_dir.resolve() for name in assets.BINARIES
    }
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    (incomplete / "etcd").symlink_to(lab.bin_dir / "etcd")
    monkeypatch.setenv("POWERAWARE_K8S_ASSETS", str(incomplete))  # the project variable comes first
    with pytest.raises(assets.AssetsError, match="lacks kube-apiserver, kube-controller-manager, kube-scheduler, kwok"):
        assets.resolve_binaries(build=True)


def test_without_go_or_binaries_the_message_names_both_ways_out(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("POWERAWARE_K8S_ASSETS", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    monkeypatch.setattr(assets, "GO_FALLBACKS", (str(tmp_path / "go" / "bin" / "go"),))
    with pytest.raises(assets.AssetsError) as error:
        assets.resolve_binaries(build=True)
    message = str(error.value)
    assert "no Go toolchain found" in message
    assert "install Go >= 1.26" in message
    assert "POWERAWARE_K8S_ASSETS" in message and "KUBEBUILDER_ASSETS" in message
    assert not (tmp_path / "empty-cache" / "poweraware-k8s" / "kubernetes-v1.36.3").exists()
