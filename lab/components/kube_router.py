"""The lab's NetworkPolicy engine: kube-router's network policy controller on every node.

A cluster enforces NetworkPolicies only when its CNI (or a policy engine beside it) does; flannel
alone, which the lab's overlay is shaped after (lab/components/network.py), enforces none. The
lab runs kube-router v2.1.0 in its firewall-only mode, the project's documented way to add
NetworkPolicy enforcement to another CNI's pod network: ``--run-router=false --run-firewall=true
--run-service-proxy=false``. Its controller matches pods by address in the node's filter table
(INPUT, FORWARD and OUTPUT jump to its chains, the selected pods' and peers' addresses are ipsets),
so it judges a packet by the source address the pod sees: a pod's own address, or for a node's
packet to a pod on another node, the overlay tunnel's address (``flannel.1``), as Calico's
IPIP/VXLAN and flannel's VXLAN deliver it. The local node always reaches its own pods (the
kubelet's probes), as kube-router's ``-m addrtype --src-type LOCAL`` rule and every CNI admit it.

The add-on is made from the project's own manifests at the built version (the Go build keeps its
``daemonset/`` directory): the DaemonSet of ``kube-router-firewall-daemonset.yaml`` with the
service account and RBAC of ``kubeadm-kuberouter.yaml`` in place of a kubeconfig on each host,
without what installs kube-router's own CNI (the init container, its ConfigMap and the CNI and
/opt volumes: the lab's pod network is the overlay's). Applied after kubeadm's add-ons, as a
kubeadm user applies a CNI after ``kubeadm init``.
"""

from __future__ import annotations

import copy
import pathlib

import yaml

NAME = "kube-router"
NAMESPACE = "kube-system"
IMAGE = "docker.io/cloudnativelabs/kube-router:v2.1.0"
FIREWALL_MANIFEST = "kube-router-firewall-daemonset.yaml"  # the DaemonSet, firewall-only
KUBEADM_MANIFEST = "kubeadm-kuberouter.yaml"  # the service account and its RBAC
# What installs kube-router's own bridge CNI, which a firewall beside another CNI must not run.
CNI_INSTALL_VOLUMES = frozenset({"cni-conf-dir", "kube-router-cfg", "host-opt"})
# The firewall reads these (its informers: pods, namespaces, NetworkPolicies, and the nodes, Services,
# Endpoints and EndpointSlices every kube-router start syncs before it runs a controller); the kubeadm
# manifest's leases and services/status rules serve its BGP router, which this mode does not run.
READ_ONLY_VERBS = frozenset({"get", "list", "watch"})
READ_RESOURCES = frozenset(
    {"namespaces", "pods", "services", "nodes", "endpoints", "networkpolicies", "endpointslices"}
)


class ManifestError(ValueError):
    """kube-router's manifests do not have the shape this add-on is made from."""


def _documents(path: pathlib.Path) -> list[dict]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError(f"kube-router's {path.name}: {exc}") from exc


def _one(documents: list[dict], kind: str, source: str) -> dict:
    found = [d for d in documents if d.get("kind") == kind]
    if len(found) != 1:
        raise ManifestError(f"kube-router's {source} has {len(found)} {kind} objects, expected one")
    return copy.deepcopy(found[0])


def firewall_daemonset(daemonset: dict, service_account: str) -> dict:
    """The firewall DaemonSet as a kubeadm cluster with another CNI runs it: the service account's
    in-cluster credentials instead of ``--kubeconfig`` (a file the manifest expects on every host),
    the image at the built version, preloaded (the lab's nodes pull add-ons from nowhere), and no
    step that installs kube-router's own CNI."""
    pod = daemonset["spec"]["template"]["spec"]
    pod.pop("initContainers", None)
    pod["serviceAccountName"] = service_account
    pod["volumes"] = [v for v in pod.get("volumes", []) if v["name"] not in CNI_INSTALL_VOLUMES | {"kubeconfig"}]
    for container in pod["containers"]:
        container["image"] = IMAGE
        container["imagePullPolicy"] = "IfNotPresent"
        container["args"] = [a for a in container.get("args", []) if not a.startswith("--kubeconfig")]
        container["env"] = [e for e in container.get("env", []) if e["name"] != "KUBE_ROUTER_CNI_CONF_FILE"]
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts", []) if m["name"] not in CNI_INSTALL_VOLUMES | {"kubeconfig"}
        ]
    return daemonset


def read_only(cluster_role: dict) -> dict:
    """The ClusterRole with the firewall's reads only (READ_ONLY_VERBS of READ_RESOURCES), and without
    the legacy ``extensions`` group, which no served API has had since Kubernetes 1.16."""
    rules = []
    for rule in cluster_role.get("rules", []):
        verbs = [v for v in rule.get("verbs", []) if v in READ_ONLY_VERBS]
        groups = [g for g in rule.get("apiGroups", []) if g != "extensions"]
        resources = [r for r in rule.get("resources", []) if r in READ_RESOURCES]
        if verbs and groups and resources:
            rules.append({**rule, "apiGroups": groups, "resources": resources, "verbs": verbs})
    cluster_role["rules"] = rules
    cluster_role["metadata"].pop("namespace", None)  # cluster-scoped
    return cluster_role


def manifests(source: pathlib.Path) -> list[dict]:
    """The add-on's objects, from kube-router's ``daemonset/`` directory ``source``."""
    firewall = _documents(source / FIREWALL_MANIFEST)
    kubeadm = _documents(source / KUBEADM_MANIFEST)
    account = _one(kubeadm, "ServiceAccount", KUBEADM_MANIFEST)
    binding = _one(kubeadm, "ClusterRoleBinding", KUBEADM_MANIFEST)
    binding["metadata"].pop("namespace", None)
    daemonset = firewall_daemonset(_one(firewall, "DaemonSet", FIREWALL_MANIFEST), account["metadata"]["name"])
    args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
    wanted = {"--run-router=false", "--run-firewall=true", "--run-service-proxy=false"}
    if not wanted <= set(args):
        raise ManifestError(f"kube-router's {FIREWALL_MANIFEST} no longer runs the firewall alone: args {args}")
    return [account, read_only(_one(kubeadm, "ClusterRole", KUBEADM_MANIFEST)), binding, daemonset]


def manifest_text(source: pathlib.Path) -> str:
    return yaml.safe_dump_all(manifests(source), sort_keys=False)
