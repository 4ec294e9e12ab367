"""What kubeadm v1.36 writes for the lab's cluster: the configuration `kubeadm init` would have been
given (and uploads as kubeadm-config), and kube-scheduler's static-pod manifest
(cmd/kubeadm/app/phases/controlplane). The lab runs kubeadm's own add-on phase with the first, and
its control-plane node's kubelet runs the second."""

from __future__ import annotations

import yaml

from lab import assets
from lab.components import network

# kubeadm's label and taint of a control-plane node (since v1.24)
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def cluster_configuration() -> str:
    """The ClusterConfiguration kubeadm v1.36 uploads for this cluster (``kubeadm config print
    init-defaults`` with the lab's release and networks), as the text of kubeadm-config's key."""
    doc = {
        "apiServer": {},
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "caCertificateValidityPeriod": "87600h0m0s",
        "certificateValidityPeriod": "8760h0m0s",
        "certificatesDir": "/etc/kubernetes/pki",
        "clusterName": "kubernetes",
        "controllerManager": {},
        "dns": {},
        "encryptionAlgorithm": "RSA-2048",
        "etcd": {"local": {"dataDir": "/var/lib/etcd"}},
        "imageRepository": "registry.k8s.io",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": assets.kubernetes_version(),
        "networking": {
            "dnsDomain": network.CLUSTER_DOMAIN,
            "podSubnet": network.POD_CIDR,
            "serviceSubnet": network.SERVICE_CIDR,
        },
        "proxy": {},
        "scheduler": {},
    }
    return yaml.safe_dump(doc, default_flow_style=False, sort_keys=True)


def init_configuration(config) -> str:
    """What `kubeadm init --config` would have been given for the cluster of ``config`` (a
    lab.config.LabConfig): the InitConfiguration
    (the API server's advertise address and port, which kube-proxy's kubeconfig names), the uploaded
    ClusterConfiguration, and a KubeProxyConfiguration that leaves nf_conntrack_max alone
    (``conntrack.maxPerCore: 0``, as kind sets it: the sysctl is read-only outside the host's own
    network namespace, and every lab node has one of its own)."""
    init = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": network.ADVERTISE_ADDRESS, "bindPort": config.port("apiserver")},
        "nodeRegistration": {
            "name": config.control_plane,
            "criSocket": "unix:///var/run/containerd/containerd.sock",
            "taints": [{"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}],
        },
    }
    proxy = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "conntrack": {"maxPerCore": 0},
    }
    documents = [yaml.safe_dump(init, sort_keys=True), cluster_configuration(), yaml.safe_dump(proxy)]
    return "---\n".join(documents)


def scheduler_manifest(config) -> str:
    """kube-scheduler's static-pod manifest as kubeadm v1.36 writes it for the cluster of ``config``."""
    version = assets.kubernetes_version()
    command = [
        "kube-scheduler",
        "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--bind-address=127.0.0.1",
        "--kubeconfig=/etc/kubernetes/scheduler.conf",
        "--leader-elect=true",
    ]
    port = config.port("scheduler")

    def probe(path: str, initial: int, period: int, failures: int) -> dict:
        return {
            "failureThreshold": failures,
            "httpGet": {"host": "127.0.0.1", "path": path, "port": "probe-port", "scheme": "HTTPS"},
            **({"initialDelaySeconds": initial} if initial else {}),
            "periodSeconds": period,
            "timeoutSeconds": 15,
        }

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"component": "kube-scheduler", "tier": "control-plane"},
            "name": "kube-scheduler",
            "namespace": "kube-system",
        },
        "spec": {
            "containers": [
                {
                    "command": command,
                    "image": f"registry.k8s.io/kube-scheduler:{version}",
                    "imagePullPolicy": "IfNotPresent",
                    "livenessProbe": probe("/livez", 10, 10, 8),
                    "name": "kube-scheduler",
                    "ports": [{"containerPort": port, "name": "probe-port", "protocol": "TCP"}],
                    "readinessProbe": probe("/readyz", 0, 1, 3),
                    "resources": {"requests": {"cpu": "100m"}},
                    "startupProbe": probe("/livez", 10, 10, 24),
                    "volumeMounts": [
                        {"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True}
                    ],
                }
            ],
            "hostNetwork": True,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [
                {"hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"}, "name": "kubeconfig"}
            ],
        },
        "status": {},
    }
    return yaml.safe_dump(pod, sort_keys=False)
