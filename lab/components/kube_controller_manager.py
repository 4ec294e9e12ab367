"""kube-controller-manager: one instance, signing with the cluster CA, as kubeadm runs it."""

from __future__ import annotations

import pathlib

from lab import pki
from lab.api import http_ok, insecure_context
from lab.components import network
from lab.process import LabProcess


def component(bin_dir: pathlib.Path, port: int, kubeconfig: pathlib.Path, lab_pki: pki.LabPki) -> LabProcess:
    p = lab_pki.path
    conf = str(kubeconfig)
    return LabProcess(
        "kube-controller-manager",
        [
            str(bin_dir / "kube-controller-manager"),
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--kubeconfig={conf}",
            f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}",
            f"--client-ca-file={p('ca.crt')}",
            f"--requestheader-client-ca-file={p('front-proxy-ca.crt')}",
            f"--root-ca-file={p('ca.crt')}",
            f"--service-account-private-key-file={p('sa.key')}",
            f"--cluster-signing-cert-file={p('ca.crt')}",
            f"--cluster-signing-key-file={p('ca.key')}",
            "--use-service-account-credentials=true",
            "--controllers=*,bootstrapsigner,tokencleaner",
            # One instance: no lease to wait for after a restart.
            "--leader-elect=false",
            f"--service-cluster-ip-range={network.SERVICE_CIDR}",
            "--profiling=false",
        ],
        # kube-controller-manager serves with a self-signed certificate, as on kubeadm.
        health=lambda: http_ok(f"https://127.0.0.1:{port}/healthz", insecure_context()),
    )
