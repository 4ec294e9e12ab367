"""The cluster add-ons the lab applies after its control plane and nodes are up, as a kubeadm user
does after `kubeadm init`: kubeadm's own add-on phase (kube-proxy, CoreDNS), a NetworkPolicy engine
(kube-router's firewall, lab/components/kube_router.py), and the release manifests of ADDONS
(metrics-server); each is waited for, as everything after it needs it. ``lab`` is the
lab.cluster.Lab being started."""

from __future__ import annotations

import pathlib
import subprocess

from lab import assets, kubeadm, pki
from lab.components import kube_router

# (the Go build that carries it, its kustomization there, the APIService it serves): metrics-server as
# its README installs it (the release's components.yaml is overlays/release).
ADDONS = (("metrics-server", "manifests/overlays/release", "v1beta1.metrics.k8s.io"),)


class AddonError(RuntimeError):
    """An add-on could not be applied (the reason is the message)."""


def apply_all(lab) -> None:
    kubeadm_addons(lab)
    network_policy_engine(lab)
    apply_addons(lab)


def kubeadm_addons(lab) -> None:
    """kubeadm init's addon phase, run as kubeadm runs it (`kubeadm init phase addon all`, the
    lab's kubeadm against the lab's API server with the admin kubeconfig): kube-proxy's DaemonSet
    on every node and CoreDNS behind the kube-dns Service, from kubeadm's own manifests; then
    waited for, as everything after them (a pod's Service, its DNS) needs them."""
    binary = lab.paths.bin / "kubeadm"
    if not binary.exists():
        raise AddonError(f"kubeadm's add-ons: no {binary} (the lab's kubeadm build)")
    config_file = lab.paths.state_dir / "kubeadm-init.yaml"
    pki.atomic_write(config_file, kubeadm.init_configuration(lab.config), 0o600)
    command = [str(binary), "init", "phase", "addon", "all", f"--config={config_file}"]
    done = subprocess.run(
        [*command, f"--kubeconfig={lab.paths.kubeconfig}"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AddonError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()}")
    lab.wait_for(
        "kube-proxy on every node",
        lambda: daemonset_ready(lab, "kube-system", "kube-proxy"),
        None,
        timeout=max(120.0, lab.config.timeout),
    )
    lab.wait_for("CoreDNS", lambda: coredns_available(lab), None, timeout=max(120.0, lab.config.timeout))


def network_policy_engine(lab) -> None:
    """kube-router's firewall on every node (lab/components/kube_router.py), applied as a user
    applies a CNI's manifest after `kubeadm init`, and waited for: a policy applied before its
    controller has synced is enforced only from then on."""
    kubectl = lab.paths.bin / "kubectl"
    build = next(c for c in assets.COMPONENTS if c.name == "kube-router")
    source = assets.cached_bin_dir(build) / "daemonset"
    if assets.assets_dir_from_env() is not None or not source.is_dir() or not kubectl.exists():
        raise AddonError(
            f"the NetworkPolicy engine: no {source} or kubectl from the lab's own build "
            "(run `make lab-build`; an assets directory from the environment has no kube-router manifests)"
        )
    try:
        text = kube_router.manifest_text(source)
    except kube_router.ManifestError as exc:
        raise AddonError(f"the NetworkPolicy engine: {exc}") from exc
    manifest = lab.paths.state_dir / "kube-router.yaml"
    pki.atomic_write(manifest, text, 0o644)
    kubectl_apply(lab, "the NetworkPolicy engine", "-f", manifest)
    lab.wait_for(
        "kube-router's firewall on every node",
        lambda: daemonset_ready(lab, kube_router.NAMESPACE, kube_router.NAME),
        None,
        timeout=max(120.0, lab.config.timeout),
    )


def daemonset_ready(lab, namespace: str, name: str) -> bool:
    found = lab.found(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
    status = (found or {}).get("status") or {}
    return status.get("numberReady", 0) == status.get("desiredNumberScheduled", -1) == len(lab.config.nodes)


def coredns_available(lab) -> bool:
    found = lab.found("/apis/apps/v1/namespaces/kube-system/deployments/coredns")
    if found is None:
        return False
    wanted = (found.get("spec") or {}).get("replicas", 1)
    return (found.get("status") or {}).get("availableReplicas", 0) >= wanted


def apply_addons(lab) -> None:
    """The cluster add-ons a kubeadm cluster is given after `kubeadm init` (ADDONS), applied as
    their projects say (kubectl apply -k of the release's kustomization), then waited for: a
    registered APIService that is not Available fails API discovery for every client."""
    kubectl = lab.paths.bin / "kubectl"
    for component, kustomization, apiservice in ADDONS:
        build = next(c for c in assets.COMPONENTS if c.name == component)
        source = assets.cached_bin_dir(build) / kustomization
        if assets.assets_dir_from_env() is not None or not source.is_dir() or not kubectl.exists():
            lab.log(f"add-on {component}: not applied (no {source} or kubectl from the lab's own build)")
            continue
        kubectl_apply(lab, f"add-on {component}", "-k", source)
        lab.wait_for(
            f"the add-on {component}'s APIService {apiservice} to be Available",
            lambda name=apiservice: apiservice_available(lab, name),
            None,
            timeout=max(120.0, lab.config.timeout),
        )


def kubectl_apply(lab, what: str, flag: str, source: pathlib.Path) -> None:
    """`kubectl apply -f FILE` or `-k DIR` with the admin kubeconfig, as a user applies an add-on."""
    command = [str(lab.paths.bin / "kubectl"), f"--kubeconfig={lab.paths.kubeconfig}", "apply", flag, str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AddonError(f"{what}: kubectl apply {flag} {source} failed: {done.stderr.strip()}")


def apiservice_available(lab, name: str) -> bool:
    found = lab.found(f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
