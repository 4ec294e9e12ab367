"""What a lab looks like (LabConfig: every field a `lab` command-line option) and where its state
lives (LabPaths: one directory, ``.cache/lab`` by default; lab/cluster.py describes its layout)."""

from __future__ import annotations

import dataclasses
import pathlib

from lab import fake_sysfs, nodes
from lab.components import node_power

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_STATE_DIR = REPO_ROOT / ".cache" / "lab"
STATE_FILE = "lab.json"
DEFAULT_SYSFS_SCENARIO = "intel_pstate_active"
PORTS = {"etcd": 2379, "etcd-peer": 2380, "apiserver": 6443, "controller-manager": 10257, "scheduler": 10259}


@dataclasses.dataclass
class LabConfig:
    """What the lab looks like. Every field can be set from ``lab`` command-line options."""

    state_dir: pathlib.Path = DEFAULT_STATE_DIR
    workers: int = 3
    server_types: int = 0  # SPECpower server models among the workers; 0: every worker its own
    control_plane: str = "lab-control-plane"
    worker_prefix: str = "lab-worker-"
    cpu: str = "32"
    memory: str = "128Gi"
    allocatable_memory: str = "127Gi"  # less system-reserved and the eviction threshold, as a kubelet reports
    pods: str = "110"
    sysfs_scenario: str = DEFAULT_SYSFS_SCENARIO
    timeout: float = 120.0  # per health wait

    @property
    def worker_names(self) -> list[str]:
        return [f"{self.worker_prefix}{i}" for i in range(1, self.workers + 1)]

    @property
    def node_names(self) -> list[str]:
        return [self.control_plane, *self.worker_names]

    @property
    def nodes(self) -> list[nodes.Node]:
        try:
            servers = self.power_servers()
        except node_power.NoData:
            servers = ()  # `lab up` says what is missing (it reads power_servers); the rest works without
        # the control plane is a server too: it draws power, and collectd meters it as on any node
        control = servers[-1] if servers else None
        found = [
            nodes.Node(
                self.control_plane,
                nodes.node_address(0, True),
                True,
                internal_address=nodes.lab_node_ip(nodes.node_address(0, True)),
                power_server=control.id if control else "",
                tdp_w=node_power.package_tdp_w(control, self.packages) if control else None,
            )
        ]
        for i, name in enumerate(self.worker_names, 1):
            server = servers[i - 1] if servers else None
            found.append(
                nodes.Node(
                    name,
                    nodes.node_address(i, False),
                    False,
                    internal_address=nodes.lab_node_ip(nodes.node_address(i, False)),
                    power_server=server.id if server else "",
                    tdp_w=node_power.package_tdp_w(server, self.packages) if server else None,
                )
            )
        return found

    @property
    def packages(self) -> int:
        """RAPL packages of every node's fake kernel."""
        return int(fake_sysfs.SCENARIOS[self.sysfs_scenario].get("packages") or 1)

    def power_servers(self) -> tuple:
        """The SPECpower server of each worker, then the control plane's (lab/components/node_power.py);
        NoData without the data set."""
        return node_power.lab_servers(self.workers, self.packages, self.server_types)

    def port(self, name: str) -> int:
        # Fixed, as on a kubeadm node: the nodes' kubeconfigs and kube-scheduler's probes use them.
        return PORTS[name]

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.port('apiserver')}"

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["state_dir"] = str(self.state_dir)
        return data

    @classmethod
    def from_json(cls, data: dict) -> LabConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["state_dir"] = pathlib.Path(values["state_dir"])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class LabPaths:
    state_dir: pathlib.Path

    @property
    def state_file(self) -> pathlib.Path:
        return self.state_dir / STATE_FILE

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.state_dir / "kubeconfig"

    @property
    def pki(self) -> pathlib.Path:
        return self.state_dir / "pki"

    @property
    def logs(self) -> pathlib.Path:
        return self.state_dir / "logs"

    @property
    def images(self) -> pathlib.Path:
        """The nodes' "container images": executables and the image map (lab/images.py)."""
        return self.state_dir / "images"

    @property
    def bin(self) -> pathlib.Path:
        return self.state_dir / "bin"

    @property
    def lock(self) -> pathlib.Path:
        # Beside the state directory, so it outlives `down` removing that directory.
        return self.state_dir.parent / f".{self.state_dir.name}.lock"

    def node_root(self, node: str) -> pathlib.Path:
        return self.state_dir / "nodes" / node

    def node_disk(self, node: str) -> pathlib.Path:
        return self.node_root(node) / "disk"

    def log(self, component: str) -> pathlib.Path:
        return self.logs / f"{component.replace('/', '-')}.log"
