"""The lab itself: a real control plane, nodes that are hosts (SSH, sudo, their own hostname, address,
kubeadm files and kernel), real scheduling, static-pod restarts inside the control-plane node, a
simulated power cycle, and a teardown that leaves nothing behind."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from poweraware_testing import wait_until

from lab import assets, cluster, config, nodes
from lab.components import network

pytestmark = pytest.mark.lab


@pytest.fixture
def namespace(lab):
    with lab.scratch_namespace("lab-test") as name:
        yield name


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
        assert lab.node_sysfs(name).joinpath("devices", "system", "cpu").is_dir()
        internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
        assert internal == [lab.node_ips[name]], name
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


MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


def _write_manifest(lab, text: str) -> None:
    # On the node, temporary file then rename: the way Ansible's atomic_move replaces a manifest.
    lab.write_node_file(lab.control_plane_node, MANIFEST, text, "0600")


def test_static_pod_runner_restarts_the_scheduler_when_its_manifest_changes(lab):
    cp = lab.control_plane_node
    original = lab.ssh(cp, f"cat {MANIFEST}", sudo=True).stdout
    # The runner's status names what it runs; right after an earlier test restored the manifest it
    # may still name the one before (it polls): start from the manifest on the disk, running.
    on_disk = hashlib.sha256(original.encode()).hexdigest()
    old_pid, old_hash = wait_until(
        lambda: (s := _scheduler_pid(lab))[0] and s[1] == on_disk and s, 30, "the runner to run the manifest on disk"
    )
    lab.wait_scheduler_healthy(60)
    # The runner keeps a mirror pod, as kubelet does, with the manifest's hash and the probe's verdict.
    wait_until(lambda: _mirror_state(lab) == (old_hash[:32], True), 20, "a Ready mirror pod")
    mirror = _mirror_pod(lab)
    assert mirror.spec.node_name == lab.control_plane_node
    assert [(o.kind, o.name) for o in mirror.metadata.owner_references] == [("Node", lab.control_plane_node)]
    # A change such as the scheduler-extender role makes: a --config file on a new hostPath mount,
    # whose clientConnection.kubeconfig is a path inside the container.
    config_file = "/etc/kubernetes/lab-test-scheduler-config.yaml"
    lab.write_node_file(
        cp,
        config_file,
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
                "leaderElection": {"leaderElect": True},
                "profiles": [{"schedulerName": "lab-test-scheduler"}, {"schedulerName": "default-scheduler"}],
            }
        ),
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
        lab.write_node_file(cp, "/etc/kubernetes/manifests/.kube-scheduler.yaml.swp", "not a pod")
        time.sleep(2.5)
        assert _scheduler_pid(lab) == (old_pid, old_hash)

        started = time.monotonic()
        _write_manifest(lab, yaml.safe_dump(pod, sort_keys=False))
        new_pid, new_hash = wait_until(
            lambda: (s := _scheduler_pid(lab))[0] not in (None, old_pid) and s, 15, "a new kube-scheduler pid"
        )
        # The old process is gone from the node (pids are the node's: this machine shares them).
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
        _write_manifest(lab, yaml.safe_dump(broken, sort_keys=False))
        wait_until(lambda: not lab.scheduler_healthy(), 15, "the scheduler to go down")
        # The runner writes its status after each poll: a health check can fail (the old process
        # being stopped, or a slow answer) before the poll that records the error is written.
        status = wait_until(
            lambda: (s := lab.static_pods_status()["pods"]["kube-scheduler.yaml"])["state"] == "error" and s,
            10,
            "the runner to record the broken manifest",
        )
        assert "absent.conf" in status["error"], status
        wait_until(lambda: _mirror_state(lab) is None, 20, "the mirror pod to go away")
    finally:
        # ...and a roll-back to the original brings it back, as the extender role relies on.
        _write_manifest(lab, original)
        lab.ssh(cp, f"rm -f /etc/kubernetes/manifests/.kube-scheduler.yaml.swp {config_file}", sudo=True)
        lab.wait_scheduler_healthy(60)
    restored_pid, restored_hash = wait_until(
        lambda: (s := _scheduler_pid(lab))[1] == old_hash and s, 20, "the runner to run the restored manifest"
    )
    assert restored_hash == old_hash and restored_pid not in (old_pid, new_pid)
    wait_until(lambda: _mirror_state(lab) == (old_hash[:32], True), 20, "the mirror pod back")


def test_nodes_are_hosts_reached_over_ssh(lab):
    """Each node answers on its own address with its own hostname, a sudo login, kubeadm's files
    with kubeadm's modes, its own kernel at /sys - and nothing of this machine's checkout. The
    controller reaches it at 127.0.1.N; its sshd answers on its own address inside the lab, 10.0.1.N."""
    for name, address in lab.node_ips.items():
        out = lab.ssh(name, "hostname; id -un; sudo -n id -u; echo $SSH_CONNECTION").stdout.split("\n")
        assert out[0] == name
        assert out[1:3] == ["ansible", "0"]
        assert out[3].split()[2] == address  # the address the node's sshd answered on
        cpu0 = lab.ssh(name, "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq").stdout.strip()
        assert cpu0 == (lab.node_sysfs(name) / "devices/system/cpu/cpu0/cpufreq/scaling_max_freq").read_text().strip()
        # The controller's checkout is hidden: empty, or absent when it lives under the node's own /tmp.
        assert lab.ssh(name, f"ls -A {config.REPO_ROOT} 2>/dev/null || true").stdout == ""
        assert lab.ssh(name, "python3 -c 'import kubernetes'", check=False).returncode != 0  # a fresh server
        modes = lab.ssh(name, "sudo -n stat -c '%a %U %n' /etc/kubernetes/kubelet.conf /var/lib/kubelet/config.yaml")
        assert modes.stdout.split("\n")[:2] == [
            "600 root /etc/kubernetes/kubelet.conf",
            "644 root /var/lib/kubelet/config.yaml",
        ]
        assert lab.ssh(name, "cat /etc/kubernetes/admin.conf", check=False).returncode != 0  # root only
    cp = lab.control_plane_node
    listing = lab.ssh(cp, "sudo -n stat -c '%a %n' /etc/kubernetes/admin.conf /etc/kubernetes/scheduler.conf").stdout
    assert listing.split("\n")[:2] == ["600 /etc/kubernetes/admin.conf", "600 /etc/kubernetes/scheduler.conf"]
    worker_config = lab.ssh(lab.worker_nodes[0], "cat /var/lib/kubelet/config.yaml").stdout
    assert "reservedSystemCPUs: 0-1" in worker_config


def test_the_lab_network_lets_nothing_out_but_the_sites_proxy(lab):
    """The control plane shares the control-plane node's network namespace, each worker has one of
    its own, none is the controller's; from a node, nothing outside is reachable (no route beyond
    the site's network), peers resolve from /etc/hosts, cluster names do not resolve on the host,
    and pip and apt name the site's egress proxy (the converges' pip installs go through it)."""
    instance = cluster.Lab.from_state(lab.state_dir, log=lambda _msg: None)
    assert instance is not None
    # The border made the control-plane node's namespace (its listeners stay in this machine's);
    # every other lab process joined it, but the workers, which made their own at boot, and the
    # site's switch, whose bridge no node's firewall may see.
    namespaces = {name: os.readlink(f"/proc/{info['pid']}/ns/net") for name, info in instance.processes.items()}
    workers = {f"node/{name}" for name in lab.worker_nodes} | {"site-switch"}
    shared = {ns for name, ns in namespaces.items() if name not in workers}
    own = [namespaces[name] for name in sorted(workers)]
    assert len(shared) == 1 and len(set(own)) == len(own) and not shared & set(own), namespaces
    assert os.readlink("/proc/self/ns/net") not in set(namespaces.values())
    node = lab.worker_nodes[0]
    direct = lab.ssh(
        node, "python3 -c \"import socket; socket.create_connection(('198.51.100.7', 443), timeout=3)\"", check=False
    )
    assert direct.returncode != 0 and "Network is unreachable" in direct.stderr, direct
    peer = lab.worker_nodes[-1]
    assert lab.ssh(node, f"getent hosts {peer}").stdout.split()[0] == lab.node_ips[peer]
    assert lab.ssh(node, "getent hosts kubernetes.default.svc.cluster.local", check=False).returncode != 0
    assert f"proxy = {network.proxy_url()}" in lab.ssh(node, "cat /etc/pip.conf").stdout
    assert network.proxy_url() in lab.ssh(node, "cat /etc/apt/apt.conf.d/90site-proxy").stdout


def test_ansible_facts_name_each_node_and_its_address(lab):
    """`ansible -i inventory/lab all -m setup`: each node's own hostname, and the address it answers on."""
    bin_dir = pathlib.Path(sys.executable).parent
    proc = subprocess.run(
        [str(bin_dir / "ansible"), "-i", str(lab.inventory), "all", "-m", "ansible.builtin.setup", "-o"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=config.REPO_ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(config.REPO_ROOT / "ansible.cfg")},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    facts = {}
    for line in proc.stdout.splitlines():
        host, _sep, rest = line.partition(" | SUCCESS => ")
        if rest:
            facts[host] = json.loads(rest)["ansible_facts"]
    assert sorted(facts) == sorted(lab.addresses)
    for host, fact in facts.items():
        assert fact["ansible_hostname"] == host
        assert fact["ansible_env"]["SSH_CONNECTION"].split()[2] == lab.node_ips[host]
        assert fact["ansible_python"]["executable"] == "/usr/bin/python3"
        print(
            f"PROOF {host}: hostname {fact['ansible_hostname']}, reached at {lab.addresses[host]}, "
            f"address {lab.node_ips[host]}"
        )


def test_reboot_brings_the_kernel_back_at_power_on_and_runs_boot_units(lab):
    """A node restart: its kernel at power-on values, its disk kept, its enabled units run in order."""
    worker = lab.worker_nodes[-1]
    policy = "/sys/devices/system/cpu/cpufreq/policy2/scaling_max_freq"
    unit = "/etc/systemd/system/lab-test-boot.service"
    before = lab.ssh(worker, f"cat {policy}").stdout.strip()
    lab.ssh(worker, f"echo 1200000 > {policy}", sudo=True)
    lab.write_node_file(
        worker,
        unit,
        # after the collection's boot unit, which re-applies the CPU profiles when the site has run
        "[Unit]\nDescription=lab test\nAfter=poweraware-cpu-power.service\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        f"ExecStart=/bin/sh -c 'echo 2000000 > {policy}'\n[Install]\nWantedBy=multi-user.target\n",
    )
    lab.ssh(worker, "systemctl enable lab-test-boot.service && systemctl daemon-reload", sudo=True)
    try:
        instance = cluster.Lab.from_state(lab.state_dir, log=lambda _m: None)
        report = instance.reboot(worker)
        assert report["before_units"]["policy2/scaling_max_freq"] == "3900000"  # power-on value
        assert report["after_boot"]["policy2/scaling_max_freq"] == "2000000"  # the unit ran
        assert any("Finished lab-test-boot.service" in line for line in report["boot_log"]), report["boot_log"]
        assert lab.ssh(worker, f"cat {policy}").stdout.strip() == "2000000"
        state = lab.ssh(worker, "systemctl is-active lab-test-boot.service", sudo=True).stdout.strip()
        assert state == "active"
        assert lab.ssh(worker, "hostname").stdout.strip() == worker
    finally:
        lab.ssh(worker, f"systemctl disable lab-test-boot.service; rm -f {unit}; systemctl daemon-reload", sudo=True)
        # the value the node had (the uninstall, which runs later, compares every sysfs attribute)
        lab.ssh(worker, f"echo {before} > {policy}", sudo=True)


@pytest.mark.lab_teardown
def test_lab_down_leaves_no_process_namespace_mount_or_state(lab):
    """Runs last: `down` stops every process (by pid and by node namespace), and with them the
    namespaces, mounts and sshds; no state, no busy port, no listening node address is left."""
    instance = cluster.Lab.from_state(lab.state_dir, log=lambda _msg: None)
    assert instance is not None and instance.healthy()
    assert instance.up(build=False) is False  # already running: nothing started
    pids = {name: info["pid"] for name, info in instance.processes.items()}
    namespaces = {info["mnt_ns"] for name, info in instance.processes.items() if name.startswith("node/")}
    assert len(namespaces) == len(lab.addresses)
    members = {pid for ns in namespaces for pid in nodes.pids_in_namespace(ns)}
    assert stat_mode(lab.state_dir) == 0o700
    assert stat_mode(lab.state_dir / "pki" / "ca.key") == 0o600
    assert stat_mode(lab.state_dir / "kubeconfig") == 0o600
    assert stat_mode(lab.state_dir / "ssh" / "id_ed25519") == 0o600
    stopped = instance.down()
    assert set(pids.values()) <= set(stopped)
    assert cluster.tagged_processes(lab.state_dir) == []
    for pid in members | set(pids.values()):
        assert not cluster.process_alive(pid, None), pid
    for ns in namespaces:
        assert nodes.pids_in_namespace(ns) == [], ns  # the namespace, and its mounts, are gone
    assert not lab.state_dir.exists()
    for port in config.PORTS.values():
        assert cluster.port_free(port), port
    for address in lab.addresses.values():
        assert not nodes.port_open(address, nodes.SSH_PORT), address
    mounts = pathlib.Path("/proc/self/mountinfo").read_text()
    assert str(lab.state_dir) not in mounts


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
