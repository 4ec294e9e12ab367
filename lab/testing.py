"""The lab as tests use it (envtest's shape): ``LabHandle``, a running lab's stable interface, and
``session``, which starts the lab or reuses a running healthy one for as long as a test session
needs it. tests/integration/conftest.py hands both to pytest as the ``lab`` fixture; a test of
another project can do the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import shlex
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from lab import assets, cluster, config, nodes
from lab.components import network, node_power

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _quantity(text: str) -> float:
    """A decimal Kubernetes quantity as the custom metrics API writes values: "21813m", "57"."""
    return float(text[:-1]) / 1000.0 if text.endswith("m") else float(text)


@dataclasses.dataclass(frozen=True)
class LabHandle:
    """A running lab, as the ``lab`` fixture hands it to tests. This interface is kept stable.

    Attributes:
        kubeconfig: the lab's admin kubeconfig on this machine (group ``system:masters``), for tests.
            Playbooks do not get it: on the nodes they use kubeadm's ``/etc/kubernetes/admin.conf``.
        api_url: ``https://127.0.0.1:6443`` (kube-apiserver).
        ca_cert, ca_key: the cluster CA (PEM files): sign serving/client certificates with it.
        bin_dir: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
        state_dir: the lab's state directory (``.cache/lab`` unless ``POWERAWARE_LAB_DIR``).
        control_plane_node: name of the tainted control-plane node (``lab-control-plane``).
        worker_nodes: names of the worker nodes (``lab-worker-1`` ...).
        addresses: node name -> the address the controller reaches it at (``127.0.1.1``, ``127.0.1.11``
            ...): its sshd, relayed into the lab.
        node_ips: node name -> its own address on the cluster's network (``10.0.1.1``, ``10.0.1.11``
            ...): its InternalIP, where its kubelet and sshd listen inside the lab.
        inventory: ``inventory/lab`` of this checkout (an SSH inventory of the nodes).
        scheduler_manifest: the control-plane node's ``/etc/kubernetes/manifests/kube-scheduler.yaml``,
            as a path on this machine (the node's disk); the node's kubelet restarts the scheduler
            within about a second of a content change.
        k8s_version: version of the control plane, e.g. ``v1.36.3``.

    Methods:
        node_disk(name): the node's disk on this machine (upper layers of its /etc, /usr, /var, /opt).
            Read a node's file as this machine sees it; to act on a node, use ``ssh``.
        node_sysfs(name): the node's fake kernel tree (its ``/sys``) on this machine.
        ssh(name, command, sudo=False): run a shell command on the node over SSH as the login user.
        write_node_file(name, path, text, mode): replace a node's file over SSH (atomic rename, as root).
        api_client(): a ``kubernetes.client.ApiClient`` for the admin kubeconfig.
        scheduler_healthy(): whether ``https://127.0.0.1:10259/healthz`` answers ok.
        wait_scheduler_healthy(timeout): wait for that, raising ``TimeoutError``.
        static_pods_status(): the control-plane kubelet's status (pods by manifest file: pids, sha256, state).
        lab_socket(): a TCP socket in the lab's network (lab/components/network.py): a server a test
            binds with it (on 127.0.0.1, say) is reached by the cluster's processes, not from here.
        in_lab_network(argv): ``argv`` prefixed to run in the lab's network (a server of the site's
            network, such as a Prometheus the roles query from the nodes).
        lab_http_get(url): (status, body) of a plain-HTTP GET made from inside the lab's network.
        pod_exec(namespace, pod, argv): the output of a command run in a pod (``kubectl exec``).
        pod_http_get(namespace, pod, url): the same made from inside a pod (``kubectl exec``: the lab's
            containers see the node's python3), where a NetworkPolicy admits the pod and not a node.
        scratch_namespace(prefix): a context manager, a namespace of the test's own ready for pods.
        simulated_power(): the lab's power meter now, per worker (server, utilisation, watts, TDP).
        node_custom_metric(metric): node -> value of the custom metrics API's ``nodes/*/<metric>``.
        prometheus_query(query, namespace): an instant query's result on the cluster stack's Prometheus.
        scheduler_log(): kube-scheduler's current log file (kubelet's /var/log/pods file on the node's disk).
    """

    kubeconfig: pathlib.Path
    api_url: str
    ca_cert: pathlib.Path
    ca_key: pathlib.Path
    bin_dir: pathlib.Path
    state_dir: pathlib.Path
    control_plane_node: str
    worker_nodes: list[str]
    addresses: dict[str, str]
    node_ips: dict[str, str]
    inventory: pathlib.Path
    scheduler_manifest: pathlib.Path
    k8s_version: str
    scheduler_port: int

    def _check(self, name: str) -> None:
        if name not in self.addresses:
            raise KeyError(f"no lab node {name!r}")

    def node_disk(self, name: str) -> pathlib.Path:
        self._check(name)
        return self.state_dir / "nodes" / name / "disk"

    def node_pid(self, name: str) -> int:
        """The node's init process (its mount namespace is the node's)."""
        self._check(name)
        return cluster.Lab.from_state(self.state_dir, log=lambda _m: None).processes[f"node/{name}"]["pid"]

    def pod_log(self, namespace: str, pod: str) -> str:
        """A pod's output, every container's in turn, as ``kubectl logs`` reads it: through
        kube-apiserver from the node's kubelet API (lab/kubelet/api.py)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        spec = core.read_namespaced_pod(pod, namespace).spec
        return "".join(
            core.read_namespaced_pod_log(pod, namespace, container=container.name, _preload_content=False).data.decode(
                errors="replace"
            )
            for container in spec.containers
        )

    def simulated_power(self) -> dict[str, dict]:
        """What the lab's power meter draws on each worker now (lab/components/node_power.py):
        node -> server, util_percent, watts, packages, package_tdp_w."""
        return json.loads((self.state_dir / node_power.STATUS_FILE).read_text())["nodes"]

    def node_custom_metric(self, metric: str) -> dict[str, float]:
        """node -> value of ``kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1/nodes/*/<metric>``;
        {} while the adapter does not serve it (it relists Prometheus' series every minute)."""
        return self._custom_metric(f"nodes/*/{metric}")

    def pod_custom_metric(self, namespace: str, metric: str) -> dict[str, float]:
        """pod -> value of ``.../v1beta1/namespaces/<namespace>/pods/*/<metric>`` (an HPA's Pods metric)."""
        return self._custom_metric(f"namespaces/{namespace}/pods/*/{metric}")

    def _custom_metric(self, path: str) -> dict[str, float]:
        from kubernetes.client.rest import ApiException

        api_client = self.api_client()
        try:
            response = api_client.call_api(
                "GET",
                f"{api_client.configuration.host}/apis/custom.metrics.k8s.io/v1beta1/{path}",
                header_params={"Accept": "application/json"},
            )
        except ApiException:
            return {}
        # the client's call_api returns every answer, errors included (a Status, e.g. 404 while
        # the adapter has not listed the series yet): only a 200 is a MetricValueList
        if response.status != 200:
            return {}
        items = json.loads(response.read() or response.data)["items"]
        return {item["describedObject"]["name"]: _quantity(item["value"]) for item in items}

    def prometheus_query(self, query: str, namespace: str = "monitoring") -> list[dict]:
        """An instant query on the cluster stack's own Prometheus (its pod, from inside the lab's network):
        the ``result`` of ``/api/v1/query``."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        pod = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=prometheus").items[0]
        url = f"http://{pod.status.pod_ip}:9090/api/v1/query?" + urllib.parse.urlencode({"query": query})
        status, body = self.lab_http_get(url)
        assert status == 200, body[:500]
        return json.loads(body)["data"]["result"]

    @staticmethod
    def processes(marker: str) -> list[dict]:
        """Every process on this machine (the lab's nodes are on it) whose command line contains
        ``marker``: its real uid and gid and its effective capabilities, from /proc, so a test checks
        what the lab's kubelet runs, not only the pod spec."""
        found = []
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                status = dict(
                    line.split(":\t", 1) for line in (proc / "status").read_text().splitlines() if ":\t" in line
                )
            except OSError:
                continue
            if any(marker.encode() in word for word in argv):
                found.append(
                    {
                        "pid": int(proc.name),
                        "uid": int(status["Uid"].split()[0]),
                        "gid": int(status["Gid"].split()[0]),
                        "cap_eff": int(status["CapEff"], 16),
                    }
                )
        return found

    def _border_pid(self) -> int:
        return cluster.Lab.from_state(self.state_dir, log=lambda _m: None).processes["network"]["pid"]

    def lab_socket(self):
        return network.socket_in(network.netns_path(self._border_pid()))

    def in_lab_network(self, argv: list[str]) -> list[str]:
        return network.enter_argv(self._border_pid()) + argv

    def lab_http_get(self, url: str, timeout: float = 5.0) -> tuple[int, bytes]:
        return network.http_get(network.netns_path(self._border_pid()), url, timeout)

    def pod_exec(self, namespace: str, pod: str, argv: list[str], timeout: float = 60.0) -> bytes:
        """``argv``'s output, run in the pod's first container by ``kubectl exec`` (through its kubelet,
        as a user runs it); OSError when kubectl or the command fails."""
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", "exec", "-n", namespace, pod, "--"]
            + argv,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip()
            raise OSError(f"{shlex.join(argv)[:120]} in {namespace}/{pod}: {detail}")
        return done.stdout

    def pod_http_get(self, namespace: str, pod: str, url: str, timeout: float = 5.0) -> tuple[int, bytes]:
        script = (
            "import sys, urllib.error, urllib.request\n"
            "try:\n"
            "    with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:\n"
            "        status, body = r.status, r.read()\n"
            "except urllib.error.HTTPError as e:\n"
            "    status, body = e.code, e.read()\n"
            "sys.stdout.buffer.write(b'%d\\n' % status + body)\n"
        )
        out = self.pod_exec(namespace, pod, ["python3", "-c", script, url, str(timeout)], timeout=timeout + 60)
        status, _newline, body = out.partition(b"\n")
        return int(status), body

    @contextlib.contextmanager
    def scratch_namespace(self, prefix: str):
        """A namespace of the test's own, yielded once its `default` service account exists (pods are
        refused before it), deleted afterwards."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        core = client.CoreV1Api(self.api_client())
        name = f"{prefix}-{os.urandom(4).hex()}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        try:
            deadline = time.monotonic() + 60
            while not any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no default service account in {name} within 60 s")
                time.sleep(0.5)
            yield name
        finally:
            with contextlib.suppress(ApiException):
                core.delete_namespace(name)

    def node_sysfs(self, name: str) -> pathlib.Path:
        self._check(name)
        return self.state_dir / "nodes" / name / "sys"

    def ssh(self, name: str, command: str, sudo: bool = False, check: bool = True) -> subprocess.CompletedProcess:
        self._check(name)
        result = self._ssh(name, f"sudo -n sh -c {shlex.quote(command)}" if sudo else command)
        if check and result.returncode != 0:
            raise RuntimeError(f"on {name}: {command!r} exited {result.returncode}: {result.stderr}")
        return result

    def write_node_file(self, name: str, path: str, text: str, mode: str = "0644") -> None:
        """Replace a file on the node atomically (temporary file, then rename), over SSH with sudo."""
        tmp, dest = shlex.quote(f"{path}.lab-test-tmp"), shlex.quote(path)
        script = f"cat > {tmp} && chmod {mode} {tmp} && mv -f {tmp} {dest}"
        result = self._ssh(name, f"sudo -n sh -c {shlex.quote(script)}", text)
        if result.returncode != 0:
            raise RuntimeError(f"writing {path} on {name} failed: {result.stderr}")

    def _ssh(self, name: str, remote: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        ssh_dir = self.state_dir / "ssh"
        argv = [
            "ssh",
            "-i",
            str(ssh_dir / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={ssh_dir / 'known_hosts'}",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            f"ansible@{self.addresses[name]}",
            remote,
        ]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, check=False)

    def api_client(self):
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=configuration)
        return client.ApiClient(configuration)

    def apis(self) -> dict:
        """Typed Kubernetes API clients for the lab, by short name (core, apps, ext, reg, custom, ...)."""
        from kubernetes import client

        api_client = self.api_client()
        return {
            "core": client.CoreV1Api(api_client),
            "apps": client.AppsV1Api(api_client),
            "ext": client.ApiextensionsV1Api(api_client),
            "reg": client.ApiregistrationV1Api(api_client),
            "custom": client.CustomObjectsApi(api_client),
            "authz": client.AuthorizationV1Api(api_client),
            "autoscaling": client.AutoscalingV2Api(api_client),
            "discovery": client.DiscoveryV1Api(api_client),
            "networking": client.NetworkingV1Api(api_client),
            "rbac": client.RbacAuthorizationV1Api(api_client),
        }

    def scheduler_healthy(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the scheduler's serving certificate is self-signed, as on kubeadm
        try:
            url = f"https://127.0.0.1:{self.scheduler_port}/healthz"
            with urllib.request.urlopen(url, context=context, timeout=2) as resp:
                return resp.status == 200 and resp.read() == b"ok"
        except (urllib.error.URLError, OSError):
            return False

    def wait_scheduler_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.scheduler_healthy():
                return
            time.sleep(0.5)
        raise TimeoutError(f"kube-scheduler not healthy within {timeout:.0f} s; see {self.scheduler_log()}")

    def static_pods_status(self) -> dict:
        path = self.node_disk(self.control_plane_node) / "var/lib/kubelet/lab-static-pods.json"
        return json.loads(path.read_text())

    def scheduler_log(self) -> pathlib.Path:
        return cluster.Lab.from_state(self.state_dir, log=lambda _m: None).scheduler_log()


def handle_for(lab: cluster.Lab) -> LabHandle:
    paths, config = lab.paths, lab.config
    return LabHandle(
        kubeconfig=paths.kubeconfig,
        api_url=config.api_url,
        ca_cert=paths.pki / "ca.crt",
        ca_key=paths.pki / "ca.key",
        bin_dir=paths.bin,
        state_dir=paths.state_dir,
        control_plane_node=config.control_plane,
        worker_nodes=config.worker_names,
        addresses={node.name: node.address for node in config.nodes},
        node_ips={node.name: node.node_ip for node in config.nodes},
        inventory=REPO_ROOT / "inventory" / "lab",
        scheduler_manifest=paths.node_disk(config.control_plane) / "etc/kubernetes/manifests/kube-scheduler.yaml",
        k8s_version=assets.kubernetes_version(),
        scheduler_port=config.port("scheduler"),
    )


class LabUnavailable(RuntimeError):
    """The lab did not start (the reason is the message)."""


@contextlib.contextmanager
def session(state_dir: pathlib.Path | None = None) -> Iterator[LabHandle]:
    """The local lab, started (binaries built on first use) or a running healthy one reused, for
    the ``with`` block. Sessions register as users of the lab; the last one to finish stops a lab
    that sessions started, so parallel sessions can share it. A lab started with ``make lab`` is
    left running. ``state_dir`` (default ``POWERAWARE_LAB_DIR`` or ``.cache/lab``) selects another
    state directory (one lab per machine: the nodes' addresses and kubeadm's ports are fixed)."""
    state_dir = state_dir or pathlib.Path(os.environ.get("POWERAWARE_LAB_DIR", config.DEFAULT_STATE_DIR))
    instance = cluster.Lab(config.LabConfig(state_dir=state_dir))
    try:
        instance.acquire(build=True)
    except (cluster.LabError, assets.AssetsError, nodes.NodeError) as exc:
        raise LabUnavailable(str(exc)) from exc
    try:
        yield handle_for(instance)
    finally:
        instance.release()
