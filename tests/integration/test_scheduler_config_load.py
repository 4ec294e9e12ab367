"""Every interesting `v1` configuration the extender module generates, loaded by the REAL kube-scheduler
(issue 11, item 7): the module's port of kube-scheduler's validation must agree with kube-scheduler.

For each case (scheduler_config_cases.py, shared with test_scheduler_config_versions.py) the
configuration is computed exactly as the module computes it (``plan_present``, the same inputs as the
unit tests: ours alone, merged with a user's profiles and extender, a stale entry replaced, converted
from v1beta3), written to a temporary directory with the lab's kubeconfig, and
started as ``kube-scheduler --config=... --secure-port=<free port> --leader-elect=false``:

* LOADS: the scheduler must answer ``/healthz`` with ``ok``.
* REFUSED: configurations the module refuses (built by merging without the module's check) must make
  kube-scheduler exit non-zero with its own validation message; the module's message names the same rule.

The scheduler runs for a few seconds against the lab's API server only (it is stopped as soon as it is
healthy). Uses only ``lab.kubeconfig``, ``lab.bin_dir`` and ``lab.k8s_version`` of the lab fixture.
"""

from __future__ import annotations

import pathlib
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils import _sched_manifest as ms
from extender_server import make_ca
from poweraware_testing import stop_process
from scheduler_config_cases import LOADS, NODE_KUBECONFIG, refused_cases, unchecked_config
from scheduler_config_cases import plan as plan_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HEALTH_TIMEOUT = 90
EXIT_TIMEOUT = 60

REFUSED = refused_cases("v1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthz(port: int) -> str | None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as reply:
            return reply.read().decode()
    except (urllib.error.URLError, OSError):
        return None


def _start(lab, directory: pathlib.Path, config_text: str) -> tuple[subprocess.Popen, int, pathlib.Path]:
    config = directory / "scheduler-config.yaml"
    config.write_text(config_text.replace(NODE_KUBECONFIG, str(lab.kubeconfig)))
    log = directory / "kube-scheduler.log"
    port = _free_port()
    command = [
        str(pathlib.Path(lab.bin_dir) / "kube-scheduler"),
        f"--config={config}",
        f"--kubeconfig={lab.kubeconfig}",
        f"--authentication-kubeconfig={lab.kubeconfig}",
        f"--authorization-kubeconfig={lab.kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
    ]
    with log.open("wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
    return process, port, log


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("extender-tls")
    ca = make_ca(directory)
    return {"cert": str(ca.cert), "key": str(ca.key), "ca": str(ca.cert)}


@pytest.fixture(scope="module")
def loaded():
    names: list[str] = []
    yield names
    print(f"\n{len(names)} generated v1 configurations loaded by the real kube-scheduler: {', '.join(names)}")


@pytest.mark.parametrize("case", LOADS, ids=lambda c: c.name)
def test_generated_config_loads_in_real_kube_scheduler(lab, pki, tmp_path, case, loaded):
    plan = plan_for(case, pki, lab.k8s_version)
    assert plan.api_version == "kubescheduler.config.k8s.io/v1", plan.api_version
    assert yaml.safe_load(plan.file_after)["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    process, port, log = _start(lab, tmp_path, plan.file_after)
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT
        answer = None
        while time.monotonic() < deadline and process.poll() is None:
            answer = _healthz(port)
            if answer == "ok":
                break
            time.sleep(0.5)
        assert answer == "ok", (
            f"kube-scheduler did not become healthy with the {case.name} configuration "
            f"(exit {process.poll()}):\n{plan.file_after}\n--- log ---\n{log.read_text()[-4000:]}"
        )
    finally:
        stop_process(process)
    loaded.append(case.name)


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_config_the_module_refuses_is_refused_by_kube_scheduler(lab, pki, tmp_path, case):
    with pytest.raises(ms.ManifestError) as info:
        plan_for(case, pki, lab.k8s_version)
    assert case.refused_by_module in str(info.value)
    process, _port, log = _start(lab, tmp_path, unchecked_config(case, pki))
    try:
        code = process.wait(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        stop_process(process)
    output = log.read_text()
    assert code not in (None, 0), f"kube-scheduler accepted the {case.name} configuration:\n{output[-4000:]}"
    assert case.refused_by_scheduler in output, output[-4000:]
