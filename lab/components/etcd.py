"""etcd: the cluster's store, on loopback, without fsync (throw-away data)."""

from __future__ import annotations

import pathlib

from lab.api import http_ok
from lab.process import LabProcess


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def component(bin_dir: pathlib.Path, data_dir: pathlib.Path, port: int, peer_port: int) -> LabProcess:
    client, peer = url(port), f"http://127.0.0.1:{peer_port}"
    return LabProcess(
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name=lab",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=lab={peer}",
            # Throw-away data: skipping fsync makes start-up and every write much faster.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        health=lambda: http_ok(f"{client}/health"),
    )
