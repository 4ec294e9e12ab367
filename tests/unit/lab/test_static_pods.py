"""The lab's static pod runner (lab/kubelet/main.py, static_pods.py) gives a container the user, groups and capabilities
its securityContext asks for, by kubelet's and containerd's rules (runtime.run_as and
kept_capabilities, the same the API pods get): our scheduler extender's static pod runs as uid 10290
with no capability, kubeadm's pods (no securityContext) as root."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess

import pytest
import yaml

from lab.kubelet import main, static_pods

GREP = "/bin/grep"


def manifest(pod_context=None, container_context=None, dns_policy=None) -> bytes:
    container = {"name": "extender", "command": ["grep", "--version"]}
    if container_context is not None:
        container["securityContext"] = container_context
    spec = {"hostNetwork": True, "containers": [container]}
    if pod_context is not None:
        spec["securityContext"] = pod_context
    if dns_policy:
        spec["dnsPolicy"] = dns_policy
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"}, "spec": spec}
    return yaml.safe_dump(pod).encode()


@pytest.fixture
def bin_dir(tmp_path):
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "grep").symlink_to(GREP)
    return directory


def parse(content: bytes, bin_dir: pathlib.Path, tmp_path: pathlib.Path) -> static_pods.PodSpec:
    return static_pods.parse_manifest(content, tmp_path, bin_dir, tmp_path / "run")


EXTENDER = {"runAsNonRoot": True, "runAsUser": 10290, "runAsGroup": 10290}
DROP_ALL = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_extenders_security_context_is_taken_and_kubeadms_pods_stay_root(bin_dir, tmp_path):
    (container,) = parse(manifest(EXTENDER, DROP_ALL), bin_dir, tmp_path).containers
    assert container.user == (10290, 10290, ())
    assert container.capabilities == frozenset()
    # kube-scheduler's manifest as kubeadm writes it: no securityContext, root with the runner's set
    (container,) = parse(manifest(), bin_dir, tmp_path).containers
    assert container.user is None and container.capabilities is None
    # the container's fields win over the pod's, and the group follows the uid when none is given
    (container,) = parse(manifest({"runAsUser": 1000}, {"runAsUser": 2000}), bin_dir, tmp_path).containers
    assert container.user == (2000, 2000, ())


def test_run_as_non_root_refuses_root_as_kubelet_does(bin_dir, tmp_path):
    with pytest.raises(static_pods.StaticPodError, match="container 'extender': container has runAsNonRoot and image"):
        parse(manifest({"runAsNonRoot": True}), bin_dir, tmp_path)
    with pytest.raises(static_pods.StaticPodError, match="container's runAsUser breaks non-root policy"):
        parse(manifest({"runAsNonRoot": True, "runAsUser": 0}), bin_dir, tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing uid and dropping capabilities needs root")
def test_the_process_runs_with_the_user_and_no_capability(bin_dir, tmp_path):
    """The runner's own preexec, for real: the process's ids and effective capabilities in /proc."""
    args = argparse.Namespace(
        node_root=tmp_path,
        manifests=tmp_path / "manifests",
        bin_dir=bin_dir,
        log_dir=tmp_path / "log",
        run_dir=tmp_path / "run",
        status_file=None,
        poll_interval=1.0,
        kubeconfig=None,
        node_name=None,
        node_ip=None,
        image_map=None,
        pod_cidr="10.244.0.0/24",
        cluster_dns="10.96.0.10",
        cluster_domain="cluster.local",
        config=None,
        root_dir=tmp_path / "kubelet",
    )
    runner = main.Runner(args)

    def status(spec: static_pods.PodSpec) -> dict[str, str]:
        pod = static_pods.RunningPod(manifest=tmp_path / "p.yaml", content_hash="0", spec=spec)
        out = subprocess.run(
            [GREP, "-E", "^(Uid|Gid|Groups|CapEff):", "/proc/self/status"],
            preexec_fn=runner._preexec(pod, spec.containers[0]),  # noqa: PLW1509
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {key: value.split() for key, value in (line.split(":\t", 1) for line in out.splitlines())}

    ours = status(parse(manifest(EXTENDER, DROP_ALL), bin_dir, tmp_path))
    assert ours["Uid"] == ["10290"] * 4 and ours["Gid"] == ["10290"] * 4 and ours["Groups"] == []
    assert int(ours["CapEff"][0], 16) == 0
    kubeadms = status(parse(manifest(), bin_dir, tmp_path))
    assert kubeadms["Uid"][0] == "0" and int(kubeadms["CapEff"][0], 16) != 0
