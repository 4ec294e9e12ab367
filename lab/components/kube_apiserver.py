"""kube-apiserver: flags as kubeadm sets them, with the aggregation layer: every address of the
control-plane node's network namespace (127.0.0.1 for the control plane and the control-plane node,
as kubeadm's kubeconfigs have it on a single control-plane node), advertised at the site address
the workers' kubelets reach it at and pods reach through the kubernetes Service."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from lab import pki
from lab.components import network
from lab.process import LabProcess


def component(
    bin_dir: pathlib.Path, port: int, etcd_url: str, lab_pki: pki.LabPki, ready: Callable[[], bool]
) -> LabProcess:
    p = lab_pki.path
    return LabProcess(
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--advertise-address={network.ADVERTISE_ADDRESS}",
            "--bind-address=0.0.0.0",
            f"--secure-port={port}",
            f"--etcd-servers={etcd_url}",
            f"--service-cluster-ip-range={network.SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--client-ca-file={p('ca.crt')}",
            f"--tls-cert-file={p('apiserver.crt')}",
            f"--tls-private-key-file={p('apiserver.key')}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p('sa.pub')}",
            f"--service-account-signing-key-file={p('sa.key')}",
            # Aggregation layer, as kubeadm configures it: APIServices such as
            # v1beta1.custom.metrics.k8s.io can be registered.
            f"--requestheader-client-ca-file={p('front-proxy-ca.crt')}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={p('front-proxy-client.crt')}",
            f"--proxy-client-key-file={p('front-proxy-client.key')}",
            # No kube-proxy here: reach aggregated servers at their endpoint addresses.
            "--enable-aggregator-routing=true",
            # The kubelets, as kubeadm configures kube-apiserver to reach them (logs, exec):
            # by the node's InternalIP, with its kubelet client certificate.
            f"--kubelet-client-certificate={p('apiserver-kubelet-client.crt')}",
            f"--kubelet-client-key={p('apiserver-kubelet-client.key')}",
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--profiling=false",
        ],
        health=ready,
    )
