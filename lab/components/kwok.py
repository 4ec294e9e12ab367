"""kwok: keeps the simulated nodes' status (Ready, heartbeats, leases) and the status of pods the
lab does not run itself. Node addresses come from the Node objects the lab creates (each node's own
127.0.1.N), which kwok's node-initialize stage keeps."""

from __future__ import annotations

import pathlib

from lab.process import LabProcess

ANNOTATION = "kwok.x-k8s.io/node"
STAGES = pathlib.Path(__file__).resolve().parent.parent / "kwok-stages"


def component(bin_dir: pathlib.Path, kubeconfig: pathlib.Path, home: pathlib.Path) -> LabProcess:
    return LabProcess(
        "kwok",
        [
            str(bin_dir / "kwok"),
            f"--kubeconfig={kubeconfig}",
            # kwok reads one object per config file (ansible-test's yamllint allows one document per file).
            *(f"--config={stage}" for stage in sorted(STAGES.glob("*.yaml"))),
            f"--manage-nodes-with-annotation-selector={ANNOTATION}=fake",
            "--node-lease-duration-seconds=40",
            # Pod addresses stay on loopback: nothing the API server proxies to may leave this machine.
            "--cidr=127.244.0.0/16",
        ],
        # kwok also reads ~/.kwok/kwok.yaml: keep a user's own kwok set-up out of the lab.
        env={"HOME": str(home)},
    )
