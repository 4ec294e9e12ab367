"""The lab's kubelet runs the pods whose image the lab knows (lab/images.py, lab/kubelet/pods.py):
a real kube-state-metrics as a Deployment places it, with its service-account token, a ConfigMap
volume and downward-API environment, as a non-root user, Ready because its probe answers, restarted
when it dies, stopped and removed when deleted; an image that cannot start says why in the status."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import select
import subprocess
import time
import urllib.request

import grpc
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from poweraware_testing import wait_until

from lab.kubelet import cpu_manager, pods, runtime

pytestmark = pytest.mark.lab

KSM_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.15.0"


@pytest.fixture
def apis(lab):
    api_client = lab.api_client()
    return client.CoreV1Api(api_client), client.AppsV1Api(api_client), client.RbacAuthorizationV1Api(api_client)


@pytest.fixture
def namespace(lab, apis):
    _core, _apps, rbac = apis
    with lab.scratch_namespace("kubelet-test") as name:
        try:
            yield name
        finally:
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role_binding(name)
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role(name)


def ksm_pod_spec(namespace: str, **container) -> dict:
    spec = {
        "serviceAccountName": "ksm",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534},
        "containers": [
            {
                "name": "kube-state-metrics",
                "image": KSM_IMAGE,
                "args": ["--port=8080", "--telemetry-port=8081", "--resources=nodes,pods"],
                "ports": [
                    {"name": "http-metrics", "containerPort": 8080},
                    {"name": "telemetry", "containerPort": 8081},
                ],
                "env": [
                    {"name": "MY_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "GREETING", "value": "on $(MY_NODE)"},
                ],
                "volumeMounts": [{"name": "settings", "mountPath": "/etc/ksm-test", "readOnly": True}],
                "livenessProbe": {"httpGet": {"path": "/livez", "port": "http-metrics"}, "periodSeconds": 2},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": "telemetry"}, "periodSeconds": 1},
                **container,
            }
        ],
        "volumes": [{"name": "settings", "configMap": {"name": "ksm-settings"}}],
    }
    return spec


def create_ksm_prerequisites(apis, namespace: str) -> None:
    core, _apps, rbac = apis
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "ksm"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "ksm-settings"}, "data": {"mode": "lab"}})
    rbac.create_cluster_role(
        {
            "metadata": {"name": namespace},
            "rules": [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": namespace},
            "subjects": [{"kind": "ServiceAccount", "name": "ksm", "namespace": namespace}],
        }
    )


def ready_pod(core, namespace: str, timeout: float = 90):
    def check():
        pods = core.list_namespaced_pod(namespace).items
        for pod in pods:
            conditions = {c.type: c.status for c in pod.status.conditions or []}
            if conditions.get("Ready") == "True" and pod.metadata.deletion_timestamp is None:
                return pod
        return None

    return wait_until(check, timeout, "a Ready pod")


def pid_of(pod) -> int:
    container_id = pod.status.container_statuses[0].container_id
    assert container_id.startswith("lab://"), container_id  # the lab's kubelet runs it, not kwok
    return int(container_id.removeprefix("lab://"))


def test_a_mapped_image_runs_for_real_with_what_kubelet_gives_a_container(lab, apis, namespace):
    core, apps, _rbac = apis
    create_ksm_prerequisites(apis, namespace)
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "ksm"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "ksm"}},
                "template": {"metadata": {"labels": {"app": "ksm"}}, "spec": ksm_pod_spec(namespace)},
            },
        },
    )
    pod = ready_pod(core, namespace)
    node = pod.spec.node_name
    assert node in lab.worker_nodes
    octet = lab.addresses[node].rsplit(".", 1)[1]
    assert pod.status.pod_ip.startswith(f"10.244.{octet}."), pod.status.pod_ip
    assert pod.status.host_ip == lab.node_ips[node]
    pid = pid_of(pod)

    # The process: the image's executable, as the pod's user, with the pod's environment.
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    assert "Uid:\t65534\t65534" in status and "Gid:\t65534\t65534" in status
    environ = dict(
        item.split("=", 1) for item in pathlib.Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if item
    )
    assert environ["MY_NODE"] == node and environ["GREETING"] == f"on {node}"
    # The API server as every pod finds it: the kubernetes Service (kube-proxy on the pod's node
    # sends it to the API server's advertised address; kube-state-metrics' in-cluster client uses it).
    assert (environ["KUBERNETES_SERVICE_HOST"], environ["KUBERNETES_SERVICE_PORT"]) == ("10.96.0.1", "443")
    # Its own network namespace, as a container has: the image's own arguments, no address flag.
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert not any(word.startswith("--host") for word in cmdline), cmdline
    assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink(f"/proc/{lab.node_pid(node)}/ns/net")
    # and its own host name, the pod's name, as kubelet gives a pod that is not on the host network
    hostname = subprocess.run(
        ["nsenter", f"--uts=/proc/{pid}/ns/uts", "hostname"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert hostname == pod.metadata.name, hostname

    # Its file system view: the token bound to this pod, the namespace, the CA, the ConfigMap.
    root = pathlib.Path(f"/proc/{pid}/root")
    # (/var/run is an absolute link to /run: resolved inside the container's root, as it sees it)
    sa_dir = pathlib.Path(runtime.resolve_in_root(str(root), "/var/run/secrets/kubernetes.io/serviceaccount"))
    assert (sa_dir / "namespace").read_text() == namespace
    assert "BEGIN CERTIFICATE" in (sa_dir / "ca.crt").read_text()
    token = (sa_dir / "token").read_text()
    review = client.AuthenticationV1Api(core.api_client).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )
    assert review.status.authenticated, review.status
    assert review.status.user.username == f"system:serviceaccount:{namespace}:ksm"
    assert review.status.user.extra["authentication.kubernetes.io/pod-name"] == [pod.metadata.name]
    assert (root / "etc/ksm-test/mode").read_text() == "lab"
    # ... made in the container's own mount namespace: nothing appeared on the node.
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink(f"/proc/{lab.node_pid(node)}/ns/mnt")
    on_node = lab.ssh(node, "test -e /run/secrets && echo leaked || echo clean")
    assert on_node.stdout.strip() == "clean", on_node

    # Kubelet's DNS for a ClusterFirst pod: the cluster DNS and the namespace's search path.
    resolv = (root / "etc/resolv.conf").read_text()
    assert "nameserver 10.96.0.10" in resolv and f"search {namespace}.svc.cluster.local svc.cluster.local" in resolv

    # It works, reached as any client in the cluster reaches it: its Service's DNS name, the
    # ClusterIP, the EndpointSlice the API server accepted with the pod's own address.
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "ksm"},
            "spec": {"selector": {"app": "ksm"}, "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]},
        },
    )
    discovery = client.DiscoveryV1Api(core.api_client)

    def endpoint_addresses():
        slices = discovery.list_namespaced_endpoint_slice(namespace, label_selector="kubernetes.io/service-name=ksm")
        found = {a for s in slices.items for e in s.endpoints or [] for a in e.addresses}
        return found or None

    assert wait_until(endpoint_addresses, 30, "an EndpointSlice for the Service") == {pod.status.pod_ip}
    # From inside the pod (as `kubectl exec` would run it: the container's mount and network
    # namespaces, its root, its resolv.conf), the short name through the search path.
    fetch = (
        "import urllib.request,sys;"
        "sys.stdout.write(urllib.request.urlopen('http://ksm:8080/metrics',timeout=10).read().decode())"
    )
    exec_in_pod = ["nsenter", f"--target={pid}", "--mount", "--net", "--root", "--wd", "python3", "-c", fetch]
    metrics = wait_until(
        lambda: (
            (r := subprocess.run(exec_in_pod, capture_output=True, text=True, check=False)).returncode == 0 and r.stdout
        ),
        30,
        "the Service answering by its DNS name inside the pod",
    )
    # The node itself resolves no cluster names: a kubeadm host's resolver is the site's.
    on_node = lab.ssh(node, f"getent hosts ksm.{namespace}.svc.cluster.local || echo unresolved", check=False)
    assert on_node.stdout.strip() == "unresolved", on_node
    # ... and only inside the lab: the controller is not in the cluster's network (this machine's
    # own network may accept a connection to any address, but the pod never answers it).
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"http://{pod.status.pod_ip}:8080/metrics", timeout=5) as r,
    ):
        assert b"kube_node_info" not in r.read()
    # kube-state-metrics lists every lab node from the real API server.
    nodes_seen = {
        line.split('node="', 1)[1].split('"', 1)[0]
        for line in metrics.splitlines()
        if line.startswith("kube_node_info{")
    }
    assert nodes_seen == {lab.control_plane_node, *lab.worker_nodes}

    # Killed, it is restarted with the last termination in the status, and Ready again.
    os.kill(pid, 15)

    def restarted():
        current = core.read_namespaced_pod(pod.metadata.name, namespace)
        statuses = current.status.container_statuses or []
        return current if statuses and statuses[0].restart_count == 1 and statuses[0].ready else None

    current = wait_until(restarted, 60, "a restart and Ready again")
    last = current.status.container_statuses[0].last_state.terminated
    assert last.exit_code == 143 and last.reason == "Error"
    new_pid = pid_of(current)
    assert new_pid != pid

    # Deleted, it stops, leaves the API and its directory goes.
    core.delete_namespaced_pod(pod.metadata.name, namespace)
    wait_until(
        lambda: (
            not os.path.exists(f"/proc/{new_pid}") or "zombie" in pathlib.Path(f"/proc/{new_pid}/status").read_text()
        ),
        30,
        "the process to stop",
    )
    wait_until(
        lambda: all(p.metadata.name != pod.metadata.name for p in core.list_namespaced_pod(namespace).items),
        30,
        "the pod to leave the API",
    )
    pod_dir = lab.node_disk(node) / "var/lib/kubelet/pods" / pod.metadata.uid
    wait_until(lambda: not pod_dir.exists(), 10, f"{pod_dir} removed")
    # The Deployment's replacement runs for real too.
    assert pid_of(ready_pod(core, namespace)) != new_pid


def test_a_mapped_image_that_cannot_start_says_why(lab, apis, namespace):
    core, _apps, _rbac = apis
    create_ksm_prerequisites(apis, namespace)
    missing = ksm_pod_spec(namespace, command=["/no-such-program"])
    crashing = ksm_pod_spec(namespace, args=["--no-such-flag"])
    # A directory volume over a file of the node: the container's mounts fail in its first process.
    unmountable = ksm_pod_spec(namespace, volumeMounts=[{"name": "settings", "mountPath": "/etc/passwd"}])
    for name, spec in (("missing", missing), ("crashing", crashing), ("unmountable", unmountable)):
        core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})

    def waiting(name, reason):
        def check():
            pod = core.read_namespaced_pod(name, namespace)
            statuses = pod.status.container_statuses or []
            state = statuses[0].state.waiting if statuses else None
            return pod if state is not None and state.reason == reason else None

        return check

    pod = wait_until(waiting("missing", "CreateContainerConfigError"), 60, "CreateContainerConfigError")
    message = pod.status.container_statuses[0].state.waiting.message
    assert "no-such-program" in message and "executable file not found" in message
    assert pod.status.phase == "Pending"
    pod = wait_until(waiting("crashing", "CrashLoopBackOff"), 60, "CrashLoopBackOff")
    status = pod.status.container_statuses[0]
    assert status.restart_count >= 1 and status.last_state.terminated.exit_code == 1
    assert not status.ready
    logs = lab.pod_log(namespace, "crashing")
    assert "unknown flag: --no-such-flag" in logs
    pod = wait_until(waiting("unmountable", "RunContainerError"), 60, "RunContainerError")
    message = pod.status.container_statuses[0].state.waiting.message
    assert message.startswith("lab kubelet: cannot create the container: ") and "/etc/passwd" in message, message


def test_unmapped_images_stay_simulated_by_kwok(lab, apis, namespace):
    core, _apps, _rbac = apis
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "pause"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
        },
    )
    pod = ready_pod(core, namespace)
    assert not (pod.status.container_statuses[0].container_id or "").startswith("lab://")
    assert pod.status.pod_ip.startswith("10.245.")  # kwok's --cidr
    for node in lab.worker_nodes:
        status = json.loads((lab.node_disk(node) / "var/lib/kubelet/lab-static-pods.json").read_text())
        assert all(not key.startswith(f"{namespace}/") for key in status.get("api_pods", {}))
    assert pods.claims(core.api_client.sanitize_for_serialization(pod), {}) is False


ALPINE = "docker.io/library/alpine:3.17.3"  # the power demo's init image, mapped to this machine's sleep and sh


def _alpine(name: str, *command: str) -> dict:
    return {"name": name, "image": ALPINE, "command": list(command)}


def test_init_containers_run_in_order_to_the_end_before_the_containers(lab, apis, namespace):
    """kubelet's rule: one init container at a time, each to a successful end, then the containers; until
    then the pod is Pending, not Initialized, its containers waiting PodInitializing. A failed init
    container fails the pod under restartPolicy Never, and its containers never start."""
    core, _apps, _rbac = apis
    worker = sorted(lab.worker_nodes)[0]

    def pod(name: str, init: list[dict]) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": worker,
                "restartPolicy": "Never",
                "initContainers": init,
                "containers": [_alpine("main", "sleep", "1")],
            },
        }

    core.create_namespaced_pod(
        namespace, pod("ordered", [_alpine("first", "sleep", "3"), _alpine("second", "sleep", "1")])
    )

    def status():
        return core.read_namespaced_pod("ordered", namespace).status

    def initializing(s):
        conditions = {c.type: c.status for c in s.conditions or []}
        inits = {c.name: c.state for c in s.init_container_statuses or []}
        main = (s.container_statuses or [None])[0]
        return (
            s.phase == "Pending"
            and conditions.get("Initialized") == "False"
            and inits.get("first") is not None
            and inits["first"].running is not None
            and inits["second"].waiting is not None
            and main is not None
            and main.state.waiting is not None
            and main.state.waiting.reason == "PodInitializing"
            and s
        )

    seen = wait_until(lambda: initializing(status()), 30, "the first init container running, the rest waiting")
    done = wait_until(lambda: (s := status()).phase == "Succeeded" and s, 60, "the pod to run through to Succeeded")
    first, second = done.init_container_statuses
    assert first.state.terminated.exit_code == 0 and second.state.terminated.exit_code == 0
    assert first.ready and second.ready
    # in order: the second started once the first had ended, and the container after both
    assert second.state.terminated.started_at >= first.state.terminated.finished_at
    assert done.container_statuses[0].state.terminated.started_at >= second.state.terminated.finished_at
    assert {c.type: c.status for c in done.conditions}["Initialized"] == "True"

    core.create_namespaced_pod(namespace, pod("failing", [_alpine("fails", "sh", "-c", "exit 3")]))
    failed = wait_until(
        lambda: (s := core.read_namespaced_pod("failing", namespace).status).phase == "Failed" and s,
        30,
        "the pod with a failing init container to fail",
    )
    assert failed.init_container_statuses[0].state.terminated.exit_code == 3
    assert failed.container_statuses[0].state.waiting.reason == "PodInitializing"
    print(f"PROOF init containers: while initializing {seen.phase}, then {done.phase}; failing init: {failed.phase}")


def test_kubectl_logs_reaches_the_nodes_kubelet_api(lab, apis, namespace):
    """``kubectl logs`` as a user types it: kubectl -> kube-apiserver -> the node's kubelet API
    (https://<InternalIP>:10250/containerLogs, the API server's kubelet client certificate, the
    kubelet's serving certificate from the cluster CA, its authorisation by SubjectAccessReview).
    Before, the lab's nodes served no kubelet API and kube-apiserver looked the node's name up in DNS:
    ``dial tcp: lookup lab-worker-2 on ...: network is unreachable``."""
    core, _apps, _rbac = apis
    kubectl = lab.bin_dir / "kubectl"
    if not kubectl.exists():
        pytest.skip("the lab's assets have no kubectl")
    script = "echo first; echo second; sleep 2; echo later; exec sleep 3600"
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "talker", "labels": {"app": "talker"}},
            "spec": {"containers": [_alpine("say", "sh", "-c", script)], "terminationGracePeriodSeconds": 0},
        },
    )
    wait_until(
        lambda: (s := core.read_namespaced_pod("talker", namespace).status).phase == "Running" and s,
        60,
        "the talker pod to run",
    )

    def kubectl_run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(kubectl), f"--kubeconfig={lab.kubeconfig}", "-n", namespace, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    logs = wait_until(
        lambda: (r := kubectl_run("logs", "talker")).returncode == 0 and "later" in r.stdout and r,
        30,
        "kubectl logs to show the container's output",
    )
    assert logs.stdout == "first\nsecond\nlater\n", logs
    # the TAS demo's form: a label selector (kubectl asks each pod's log with tailLines=10)
    selected = kubectl_run("logs", "-l", "app=talker", "--tail=1")
    assert (selected.returncode, selected.stdout) == (0, "later\n"), selected
    limited = kubectl_run("logs", "talker", "--limit-bytes=6")
    assert limited.stdout == "first\n", limited
    # followed: the stream stays open (kubelet's follow through the API server's proxy)
    follower = subprocess.Popen(
        [str(kubectl), f"--kubeconfig={lab.kubeconfig}", "-n", namespace, "logs", "-f", "--tail=1", "talker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout.readline() == "later\n"
        time.sleep(1)
        assert follower.poll() is None, "kubectl logs -f ended while the container runs"
    finally:
        follower.kill()
        follower.communicate()
    refused = kubectl_run("logs", "talker", "--timestamps")
    assert refused.returncode != 0 and "without per-line timestamps" in refused.stderr, refused
    # a user the API server lets read pods but not pods/log (the namespace's default service
    # account, given get on pods only) never reaches the kubelet
    _core, _apps, rbac = apis
    rbac.create_namespaced_role(
        namespace,
        {"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    )
    token = core.create_namespaced_service_account_token(
        "default", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    admin = yaml.safe_load(lab.kubeconfig.read_text())
    cluster = admin["clusters"][0]["name"]
    reader_config = lab.state_dir / f"reader-{namespace}.conf"
    reader_config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": "reader", "user": {"token": token}}],
                "contexts": [{"name": "reader", "context": {"cluster": cluster, "user": "reader"}}],
                "current-context": "reader",
            }
        )
    )
    reader_config.chmod(0o600)
    try:
        forbidden = subprocess.run(
            [str(kubectl), f"--kubeconfig={reader_config}", "-n", namespace, "logs", "talker"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        reader_config.unlink()
    assert forbidden.returncode != 0 and 'cannot get resource "pods/log"' in forbidden.stderr, forbidden
    print(f"PROOF kubectl logs: {logs.stdout!r}; -l --tail=1: {selected.stdout!r}; refused: {refused.stderr.strip()!r}")


def test_kubectl_exec_attach_and_port_forward_reach_the_container(lab, apis, namespace):
    """``kubectl exec``, ``attach`` and ``port-forward`` as a user types them: kube-apiserver
    translates kubectl's WebSockets to SPDY for the node's kubelet, which asks its runtime's streaming
    server (k8s.io/cri-streaming) for the stream and proxies it. The command runs as the container
    does (its user, host name, environment, capability bounding set), its exit code comes back, stdin
    goes in; port-forward reaches a port bound to the pod's own loopback, and attach shows what the
    container writes. Before, kubelet's /exec, /attach and /portForward answered 404."""
    core, _apps, _rbac = apis
    kubectl = lab.bin_dir / "kubectl"
    serve = (
        "mkdir -p /www/site && echo pod-says-hi > /www/site/hi.txt && cd /www/site && "
        "exec python3 -u -m http.server 8080 --bind 127.0.0.1"
    )
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                "containers": [
                    {
                        **_alpine("serve", "sh", "-c", serve),
                        "env": [{"name": "GREETING", "value": "hello from the pod"}],
                        "volumeMounts": [{"name": "www", "mountPath": "/www"}],
                    },
                    {
                        **_alpine("locked", "sleep", "3600"),
                        "securityContext": {
                            "runAsUser": 0,
                            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                        },
                    },
                ],
                "volumes": [{"name": "www", "emptyDir": {}}],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )
    pod = wait_until(
        lambda: (p := core.read_namespaced_pod("web", namespace)).status.phase == "Running" and p,
        60,
        "the web pod to run",
    )
    base = [str(kubectl), f"--kubeconfig={lab.kubeconfig}", "-n", namespace]

    def kubectl_run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*base, *argv], input=stdin, capture_output=True, text=True, timeout=60, check=False)

    probe = "id -u; id -g; hostname; echo $GREETING; grep CapBnd /proc/self/status"
    ran = wait_until(
        lambda: (r := kubectl_run("exec", "web", "--", "sh", "-c", probe)).returncode == 0 and r,
        30,
        "kubectl exec to run a command in the container",
    )
    container_bounding = next(
        line
        for line in pathlib.Path(f"/proc/{pid_of(pod)}/status").read_text().splitlines()
        if line.startswith("CapBnd")
    )
    assert ran.stdout.splitlines() == ["1000", "1000", "web", "hello from the pod", container_bounding], ran
    # a root container keeps only its capabilities, and so does what is exec'd in it (-c picks it)
    locked = kubectl_run("exec", "web", "-c", "locked", "--", "grep", "-E", "^(Uid|CapEff|CapBnd)", "/proc/self/status")
    net_bind_service = "0000000000000400"
    assert locked.stdout.split() == ["Uid:", *["0"] * 4, "CapEff:", net_bind_service, "CapBnd:", net_bind_service], (
        locked
    )
    failed = kubectl_run("exec", "web", "--", "sh", "-c", "echo to-stderr >&2; exit 7")
    assert failed.returncode == 7 and "to-stderr" in failed.stderr, failed
    assert "command terminated with exit code 7" in failed.stderr, failed
    piped = kubectl_run("exec", "-i", "web", "--", "sh", "-c", "tr a-z A-Z", stdin="piped input\n")
    assert (piped.returncode, piped.stdout) == (0, "PIPED INPUT\n"), piped
    missing = kubectl_run("exec", "web", "--", "no-such-command")
    assert missing.returncode != 0, missing

    attach = subprocess.Popen([*base, "attach", "web"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    forward = subprocess.Popen(
        [*base, "port-forward", "pod/web", "0:8080"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:<port> -> 8080"
        assert line.startswith("Forwarding from 127.0.0.1:"), (line, forward.stderr)
        local = int(line.split("127.0.0.1:", 1)[1].split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/hi.txt", timeout=30) as response:  # noqa: S310
            served = response.read().decode()
        assert served == "pod-says-hi\n"
        # attach shows what the container writes from the moment it is attached: http.server's line
        # for a request made after that. kubectl attach says nothing when it is attached, so the
        # request is made again each second until its line comes through.
        attached = ""
        deadline = time.monotonic() + 30
        while "GET /hi.txt" not in attached and time.monotonic() < deadline:
            ready = select.select([attach.stdout], [], [], 1)[0]
            if ready:
                attached += attach.stdout.readline()
            else:
                with urllib.request.urlopen(f"http://127.0.0.1:{local}/hi.txt", timeout=30) as response:  # noqa: S310
                    response.read()
        assert "GET /hi.txt" in attached, attached
    finally:
        for process in (attach, forward):
            process.kill()
            process.communicate()
    print(
        f"PROOF kubectl exec: {ran.stdout.splitlines()}; root without capabilities: {locked.stdout.split()}; "
        f"exit 7 -> {failed.returncode}; "
        f"stdin -> {piped.stdout!r}; port-forward -> {served!r}; attach -> {attached.strip()!r}"
    )


STRESS_IMAGE = "docker.io/alexeiled/stress-ng:0.12.05"  # the power demo's load, run by the lab as lab/stress_ng.py


def test_kubectl_top_and_a_cpu_hpa_read_the_kubelets_resource_metrics(lab, apis, namespace):
    """metrics-server (v0.9.0, applied from its release manifests when the lab starts) scrapes each
    node's kubelet at its InternalIP (``/metrics/resource``, with its service account's token: the
    kubelet's TokenReview and SubjectAccessReview for nodes/metrics) and serves metrics.k8s.io:
    ``kubectl top nodes`` shows every node, ``kubectl top pod`` shows a stress-ng pod using the CPUs
    its arguments stress, and an HPA on CPU utilisation scales its Deployment out on those figures.
    The kubelet's ``/stats/summary`` and ``/metrics/cadvisor`` answer through kube-apiserver's node
    proxy, which refused the lab's former loopback node addresses ("address not allowed")."""
    core, apps, _rbac = apis
    kubectl = [str(lab.bin_dir / "kubectl"), f"--kubeconfig={lab.kubeconfig}"]

    def kubectl_run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*kubectl, *argv], capture_output=True, text=True, timeout=60, check=False)

    def top_nodes():
        done = kubectl_run("top", "nodes", "--no-headers")
        rows = [line.split() for line in done.stdout.splitlines()]
        return (
            done.returncode == 0
            and len(rows) == len(lab.addresses)
            and all("<unknown>" not in r for r in rows)
            and rows
        )

    nodes_top = wait_until(top_nodes, 120, "kubectl top nodes to show every node")
    assert sorted(row[0] for row in nodes_top) == sorted(lab.addresses)

    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "burner"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "burner"}},
                "template": {
                    "metadata": {"labels": {"app": "burner"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "stress",
                                "image": STRESS_IMAGE,
                                "args": ["--cpu", "2", "--cpu-load", "50", "--timeout", "0"],
                                "resources": {"requests": {"cpu": "500m"}},
                            }
                        ],
                    },
                },
            },
        },
    )

    def top_burner():
        done = kubectl_run("top", "pod", "-n", namespace, "-l", "app=burner", "--no-headers")
        rows = [line.split() for line in done.stdout.splitlines()]
        return done.returncode == 0 and rows and rows[0][1].endswith("m") and rows

    burner = wait_until(top_burner, 120, "kubectl top pod to show the stress-ng pod")
    millicores = int(burner[0][1].removesuffix("m"))
    assert 900 <= millicores <= 1200, burner  # two workers at 50 %: one CPU, and the process's own

    # kubectl autoscale's HPA: 200 % of the request used, a 50 % target, at most three replicas
    scaled = kubectl_run("autoscale", "deployment", "burner", "-n", namespace, "--cpu=50%", "--min=1", "--max=3")
    assert scaled.returncode == 0, scaled
    wait_until(
        lambda: (apps.read_namespaced_deployment("burner", namespace).spec.replicas or 0) == 3,
        180,
        "the CPU HPA to scale the stress-ng Deployment to three replicas",
    )
    described = kubectl_run("get", "hpa", "burner", "-n", namespace, "--no-headers")

    node = core.read_namespaced_pod(burner[0][0], namespace).spec.node_name  # the pod top showed, running
    summary = json.loads(kubectl_run("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout)
    assert summary["node"]["nodeName"] == node
    assert any(p["podRef"]["namespace"] == namespace for p in summary["pods"]), summary["pods"]
    cadvisor = kubectl_run("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics/cadvisor").stdout
    assert f'namespace="{namespace}"' in cadvisor and "machine_cpu_cores" in cadvisor
    print(
        f"PROOF kubectl top nodes: {[' '.join(r) for r in nodes_top]}; top pod: {' '.join(burner[0])}; "
        f"hpa: {described.stdout.strip()}"
    )


PYTHON_IMAGE = "docker.io/library/python:3.12.14-slim-bookworm"  # mapped to the nodes' python3


def test_calls_arrive_over_the_overlay_as_on_a_vxlan_cluster(lab, apis, namespace):
    """The source addresses a NetworkPolicy engine sees (lab/components/network.py): the control
    plane's call to a pod on a worker (kube-apiserver's proxy, as its aggregator calls the metrics
    adapter) and a worker host's call arrive from the caller's tunnel address (``flannel.1``, its pod
    CIDR's network address), a pod's from the pod's own address - through a Service too, whose
    ClusterIP kubeadm's kube-proxy translates on the caller's node, by the name kubeadm's CoreDNS
    gives it; CoreDNS forwards a node's name to the site's resolver. Before, every node shared one
    network namespace, no call crossed a tunnel, and the lab's own service proxy relayed a Service's
    calls from the control-plane node."""
    core, _apps, _rbac = apis
    server_node, client_node = lab.worker_nodes[0], lab.worker_nodes[1]
    server = {
        "name": "web",
        "image": PYTHON_IMAGE,
        "command": ["python3", "-u", "-m", "http.server", "8080"],  # logs each client's address
    }
    client_script = "import sys, time, urllib.request; urllib.request.urlopen(sys.argv[1]).read(); time.sleep(3600)"
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"nodeName": server_node, "containers": [server], "terminationGracePeriodSeconds": 0},
        },
    )
    pod = wait_until(
        lambda: (p := core.read_namespaced_pod("web", namespace)).status.phase == "Running" and p.status.pod_ip and p,
        60,
        "the web pod to run",
    )
    url = f"http://{pod.status.pod_ip}:8080/"

    def callers() -> list[str]:
        return [line.split(" ", 1)[0] for line in lab.pod_log(namespace, "web").splitlines() if '"GET /' in line]

    def wait_for_caller(count: int) -> str:
        return wait_until(lambda: len(found := callers()) >= count and found[count - 1], 30, f"call {count}")

    # kube-apiserver on the control-plane node dials the pod itself
    def proxied() -> bool:  # until the server listens (Running comes before its bind)
        try:
            return core.connect_get_namespaced_pod_proxy_with_path("web:8080", namespace, "", _preload_content=False)
        except ApiException as exc:
            assert exc.status == 503, exc  # the pod's address refused the connection: not up yet
            return False

    assert wait_until(proxied, 30, "kube-apiserver's proxy to the web pod").status == 200
    control_plane_tunnel = "10.244.1.0"  # lab-control-plane's pod CIDR 10.244.1.0/24
    assert wait_for_caller(1) == control_plane_tunnel

    # a worker's host network (a host-network exporter, the kubelet)
    lab.ssh(client_node, f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}').read()\"")
    client_ip = internal_ip(core, client_node)
    client_tunnel = "10.244." + client_ip.rsplit(".", 1)[1] + ".0"
    assert wait_for_caller(2) == client_tunnel

    # a pod on another worker: its own address, no translation
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "caller"},
            "spec": {
                "nodeName": client_node,
                "containers": [
                    {"name": "call", "image": PYTHON_IMAGE, "command": ["python3", "-c", client_script, url]}
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )
    caller = wait_until(
        lambda: (p := core.read_namespaced_pod("caller", namespace)).status.pod_ip and p, 60, "the caller pod"
    )
    assert wait_for_caller(3) == caller.status.pod_ip

    # a pod's call to the Service, by its name: CoreDNS answers the ClusterIP, kube-proxy on the
    # caller's node sends it to the web pod, which sees the caller's own address
    core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    resolve_then_call = (
        "import socket, sys, time, urllib.request; print(socket.gethostbyname(sys.argv[2]), flush=True); "
        "urllib.request.urlopen(sys.argv[1]).read(); time.sleep(3600)"
    )
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "service-caller"},
            "spec": {
                "nodeName": client_node,
                "containers": [
                    {
                        "name": "call",
                        "image": PYTHON_IMAGE,
                        "command": ["python3", "-c", resolve_then_call, f"http://web.{namespace}.svc/", server_node],
                    }
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )
    service_caller = wait_until(
        lambda: (p := core.read_namespaced_pod("service-caller", namespace)).status.pod_ip and p, 60, "the pod"
    )
    assert wait_for_caller(4) == service_caller.status.pod_ip
    assert lab.pod_log(namespace, "service-caller").split() == [internal_ip(core, server_node)]

    # each worker is a host of its own on the site's network: its eth0, its end of the overlay
    found: dict[str, list[str]] = {}
    for line in lab.ssh(client_node, "ip -4 -o address show").stdout.splitlines():
        fields = line.split()
        found.setdefault(fields[1], []).append(fields[3])
    host = {name: cidrs for name, cidrs in found.items() if not name.startswith("cali")}  # its pods' veths
    assert host == {"lo": ["127.0.0.1/8"], "eth0": [f"{client_ip}/24"], "flannel.1": [f"{client_tunnel}/32"]}, found
    # and its sysfs lists them (Ansible's network facts and udev read /sys/class/net)
    listed = set(lab.ssh(client_node, "ls /sys/class/net").stdout.split())
    assert {name for name in listed if not name.startswith("cali")} == {"lo", "eth0", "flannel.1"}, listed
    assert lab.ssh(client_node, "cat /sys/class/net/flannel.1/mtu").stdout.strip() == "8950"


def internal_ip(core, node: str) -> str:
    addresses = core.read_node(node).status.addresses
    return next(a.address for a in addresses if a.type == "InternalIP")


def test_a_guaranteed_pod_gets_exclusive_cpus_in_the_kubelets_checkpoint(lab, apis, namespace):
    """kubelet's static CPU manager on a worker (its config.yaml: ``cpuManagerPolicy: static``,
    ``reservedSystemCPUs: 0-1``; lab/kubelet/cpu_manager.py): a Guaranteed pod asking for cpu "2" gets
    two CPUs of its own outside the reserved ones, in the node's /var/lib/kubelet/cpu_manager_state
    as kubelet writes it (mode 0600, its checksum); a Burstable pod beside it gets none; deleted, the
    pod's CPUs go back to defaultCpuSet. The control plane's kubelet keeps policy none's file. The node
    reads its topology from its fake kernel, NUMA nodes included."""
    core, _apps, _rbac = apis
    worker = sorted(lab.worker_nodes)[0]
    checkpoint = lab.node_disk(worker) / "var/lib/kubelet/cpu_manager_state"

    def state() -> dict:
        return json.loads(checkpoint.read_text())

    assert state()["policyName"] == "static"
    reserved = cpu_manager.parse_cpuset("0-1")
    fixed = {"cpu": "2", "memory": "64Mi"}
    for name, resources in (
        ("exclusive", {"requests": fixed, "limits": fixed}),
        ("shared", {"requests": {"cpu": "2"}}),
    ):
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "nodeName": worker,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{**_alpine("main", "sleep", "3600"), "resources": resources}],
                },
            },
        )
    uids = {name: core.read_namespaced_pod(name, namespace).metadata.uid for name in ("exclusive", "shared")}
    for name in uids:  # both admitted, both running
        wait_until(lambda n=name: core.read_namespaced_pod(n, namespace).status.phase == "Running", 30, f"{name} up")
    running = state()
    given = cpu_manager.parse_cpuset(running["entries"][uids["exclusive"]]["main"])
    default = cpu_manager.parse_cpuset(running["defaultCpuSet"])
    assert len(given) == 2 and not given & reserved and not given & default, running
    assert reserved <= default and uids["shared"] not in running["entries"], running
    entries = running["entries"]
    assert running["checksum"] == cpu_manager.checksum("static", running["defaultCpuSet"], entries), running
    assert oct(checkpoint.stat().st_mode & 0o777) == "0o600"
    kernel = lab.ssh(
        worker,
        "cd /sys/devices/system && cat cpu/cpu3/topology/thread_siblings_list node/node0/cpulist cpu/online",
    )
    siblings, node0, online = kernel.stdout.split()
    assert siblings == "3" and node0 == online, kernel

    core.delete_namespaced_pod("exclusive", namespace)
    released = wait_until(
        lambda: uids["exclusive"] not in (s := state()).get("entries", {}) and s, 30, "the CPUs back in defaultCpuSet"
    )
    assert given <= cpu_manager.parse_cpuset(released["defaultCpuSet"]), released
    control_plane = json.loads(
        (lab.node_disk(lab.control_plane_node) / "var/lib/kubelet/cpu_manager_state").read_text()
    )
    assert (control_plane["policyName"], control_plane["defaultCpuSet"]) == ("none", ""), control_plane
    print(
        f"PROOF cpu manager: {worker} gave {sorted(given)} to the Guaranteed pod: {running}; after deletion: {released}"
    )


def test_a_guaranteed_pods_cpus_are_read_over_the_workers_pod_resources_socket(lab, apis, namespace):
    """kubelet's PodResources API on a worker (lab/kubelet/pod_resources.py), read as the Kubernetes
    Power Manager's agent reads it: a gRPC client built from kubelet's api.proto on the node's
    /var/lib/kubelet/pod-resources/kubelet.sock (reached through the node's mount namespace) lists a
    Guaranteed pod with cpu "2" and the two CPUs the checkpoint gives its container, Get names the
    same, GetAllocatableResources is every CPU but the reserved 0-1; deleted, the pod leaves List."""
    pb, services = grpc.protos_and_services("lab/kubelet/pod_resources_v1.proto")
    core, _apps, _rbac = apis
    worker = sorted(lab.worker_nodes)[0]
    socket_path = f"/proc/{lab.node_pid(worker)}/root/var/lib/kubelet/pod-resources/kubelet.sock"
    fixed = {"cpu": "2", "memory": "64Mi"}
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "pinned"},
            "spec": {
                "nodeName": worker,
                "terminationGracePeriodSeconds": 0,
                "containers": [{**_alpine("main", "sleep", "3600"), "resources": {"requests": fixed, "limits": fixed}}],
            },
        },
    )
    uid = core.read_namespaced_pod("pinned", namespace).metadata.uid
    wait_until(lambda: core.read_namespaced_pod("pinned", namespace).status.phase == "Running", 30, "pinned up")
    checkpoint = json.loads((lab.node_disk(worker) / "var/lib/kubelet/cpu_manager_state").read_text())
    given = sorted(cpu_manager.parse_cpuset(checkpoint["entries"][uid]["main"]))
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        stub = services.PodResourcesListerStub(channel)

        def listed() -> dict:
            pods = stub.List(pb.ListPodResourcesRequest(), timeout=10).pod_resources
            return {(p.namespace, p.name): {c.name: sorted(c.cpu_ids) for c in p.containers} for p in pods}

        assert listed()[(namespace, "pinned")] == {"main": given}, listed()
        got = stub.Get(pb.GetPodResourcesRequest(pod_name="pinned", pod_namespace=namespace), timeout=10)
        assert [(c.name, sorted(c.cpu_ids)) for c in got.pod_resources.containers] == [("main", given)]
        allocatable = sorted(stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=10).cpu_ids)
        online = cpu_manager.parse_cpuset(lab.ssh(worker, "cat /sys/devices/system/cpu/online").stdout.strip())
        assert allocatable == sorted(online - {0, 1}) and len(given) == 2 and set(given) <= set(allocatable)
        core.delete_namespaced_pod("pinned", namespace)
        wait_until(lambda: (namespace, "pinned") not in listed(), 30, "the deleted pod gone from List")
    print(f"PROOF pod resources: {worker}'s kubelet.sock lists {namespace}/pinned main with CPUs {given}")
