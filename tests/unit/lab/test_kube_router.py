"""lab/components/kube_router.py: the add-on made from kube-router's own manifests.

The documents below have the shape of kube-router v2.1.0's daemonset/kube-router-firewall-daemonset.yaml
and daemonset/kubeadm-kuberouter.yaml, trimmed to the fields the add-on reads or changes; the lab
applies the real files (lab up waits for the DaemonSet on every node).
"""

from __future__ import annotations

import pytest
import yaml

from lab import assets, images
from lab.components import kube_router

FIREWALL = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "kube-router", "namespace": "kube-system"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "kube-router",
                        "image": "docker.io/cloudnativelabs/kube-router",
                        "imagePullPolicy": "Always",
                        "args": [
                            "--run-router=false",
                            "--run-firewall=true",
                            "--run-service-proxy=false",
                            "--kubeconfig=/var/lib/kube-router/kubeconfig",
                        ],
                        "securityContext": {"privileged": True},
                        "env": [
                            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                            {"name": "KUBE_ROUTER_CNI_CONF_FILE", "value": "/etc/cni/net.d/10-kuberouter.conflist"},
                        ],
                        "volumeMounts": [
                            {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                            {"name": "cni-conf-dir", "mountPath": "/etc/cni/net.d"},
                            {"name": "kubeconfig", "mountPath": "/var/lib/kube-router/kubeconfig", "readOnly": True},
                            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                        ],
                    }
                ],
                "initContainers": [{"name": "install-cni", "image": "docker.io/cloudnativelabs/kube-router"}],
                "hostNetwork": True,
                "volumes": [
                    {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                    {"name": "cni-conf-dir", "hostPath": {"path": "/etc/cni/net.d"}},
                    {"name": "kube-router-cfg", "configMap": {"name": "kube-router-cfg"}},
                    {"name": "kubeconfig", "hostPath": {"path": "/var/lib/kube-router/kubeconfig"}},
                    {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                    {"name": "host-opt", "hostPath": {"path": "/opt"}},
                ],
            }
        }
    },
}
KUBEADM = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-router-cfg", "namespace": "kube-system"}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-router", "namespace": "kube-system"}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kube-router", "namespace": "kube-system"}},
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kube-router", "namespace": "kube-system"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                "verbs": ["list", "get", "watch"],
            },
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "get", "watch"]},
            {"apiGroups": ["extensions"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": [""], "resources": ["services/status"], "verbs": ["update"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "kube-router"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kube-router"},
        "subjects": [{"kind": "ServiceAccount", "name": "kube-router", "namespace": "kube-system"}],
    },
]


@pytest.fixture
def source(tmp_path):
    cni = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-router-cfg"}}
    (tmp_path / kube_router.FIREWALL_MANIFEST).write_text(yaml.safe_dump_all([cni, FIREWALL]))
    (tmp_path / kube_router.KUBEADM_MANIFEST).write_text(yaml.safe_dump_all(KUBEADM))
    return tmp_path


def test_the_firewall_runs_alone_with_its_service_account_and_installs_no_cni(source):
    account, role, binding, daemonset = yaml.safe_load_all(kube_router.manifest_text(source))
    assert [account["kind"], role["kind"], binding["kind"], daemonset["kind"]] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
    ]
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "initContainers" not in pod and pod["serviceAccountName"] == "kube-router" and pod["hostNetwork"]
    assert container["args"] == ["--run-router=false", "--run-firewall=true", "--run-service-proxy=false"]
    assert container["image"] == "docker.io/cloudnativelabs/kube-router:v2.1.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert [e["name"] for e in container["env"]] == ["NODE_NAME"]
    assert [v["name"] for v in pod["volumes"]] == ["lib-modules", "xtables-lock"]
    assert [m["name"] for m in container["volumeMounts"]] == ["lib-modules", "xtables-lock"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] and "namespace" not in role["metadata"]


def test_the_firewall_may_only_read(source):
    _account, role, _binding, _daemonset = yaml.safe_load_all(kube_router.manifest_text(source))
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert {v for _g, _r, v in granted} == {"get", "list", "watch"}
    assert {r for g, r, _v in granted if g == ""} == {"namespaces", "pods", "services", "nodes", "endpoints"}
    assert {(g, r) for g, r, _v in granted if g} == {
        ("networking.k8s.io", "networkpolicies"),
        ("discovery.k8s.io", "endpointslices"),
    }


def test_a_manifest_that_no_longer_runs_the_firewall_alone_is_refused(source):
    changed = yaml.safe_load(yaml.safe_dump(FIREWALL))
    changed["spec"]["template"]["spec"]["containers"][0]["args"][0] = "--run-router=true"
    (source / kube_router.FIREWALL_MANIFEST).write_text(yaml.safe_dump(changed))
    with pytest.raises(kube_router.ManifestError, match="no longer runs the firewall alone"):
        kube_router.manifests(source)


def test_a_missing_object_is_named(source):
    (source / kube_router.KUBEADM_MANIFEST).write_text(yaml.safe_dump_all(KUBEADM[:2]))
    with pytest.raises(kube_router.ManifestError, match="kubeadm-kuberouter.yaml has 0 ServiceAccount objects"):
        kube_router.manifests(source)


def test_the_image_is_the_built_version():
    """The DaemonSet's image, the lab's image map and the Go build name one version."""
    build = next(c for c in assets.COMPONENTS if c.name == "kube-router")
    image = next(i for i in images.IMAGES if i.repository == kube_router.IMAGE.rsplit(":", 1)[0])
    assert image.reference == kube_router.IMAGE and image.tag == image.version == build.version
    assert f"version.Version={build.version}" in build.ldflags()
