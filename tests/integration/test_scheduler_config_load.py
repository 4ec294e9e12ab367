"""Every interesting `v1` configuration the extender module generates, loaded by the REAL kube-scheduler
(issue 11, item 7): the module's port of kube-scheduler's validation must agree with kube-scheduler.

For each case the configuration is computed exactly as the module computes it (``plan_present``, the
same inputs as the unit tests: ours alone, merged with a user's profiles and extender, a stale entry
replaced, converted from v1beta3), written to a temporary directory with the lab's kubeconfig, and
started as ``kube-scheduler --config=... --secure-port=<free port> --leader-elect=false``:

* LOADS: the scheduler must answer ``/healthz`` with ``ok``.
* REFUSED: configurations the module refuses (built by merging without the module's check) must make
  kube-scheduler exit non-zero with its own validation message; the module's message names the same rule.

The scheduler runs for a few seconds against the lab's API server only (it is stopped as soon as it is
healthy). Uses only ``lab.kubeconfig``, ``lab.bin_dir`` and ``lab.k8s_version`` of the lab fixture.
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils import _sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils import _sched_manifest as ms
from extender_server import make_ca

UNIT = pathlib.Path(__file__).resolve().parents[1] / "unit" / "scheduler_extender"
sys.path.insert(0, str(UNIT))
from cases import GOLDEN, LOOPBACK_EXTENDER, TAS_EXTENDER, USER_CONFIG_PATH  # noqa: E402
from poweraware_testing import tas_extender_config  # noqa: E402

pytestmark = [pytest.mark.lab, pytest.mark.slow]

MANIFEST_PATH = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG_PATH = "/etc/kubernetes/scheduler-extender.yaml"
POLICY_PATH = "/etc/kubernetes/scheduler-extender-policy.json"
NODE_KUBECONFIG = "/etc/kubernetes/scheduler.conf"  # what kubeadm manifests pass; replaced by the lab's
HEALTH_TIMEOUT = 90
EXIT_TIMEOUT = 60

BMRA_V1BETA3 = """\
# written by hand, v1beta3 as BMRA-era playbooks did
apiVersion: kubescheduler.config.k8s.io/v1beta3
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
extenders:
  - urlPrefix: "http://127.0.0.1:8888/gpu"
    filterVerb: "filter"
    weight: 2
    managedResources:
      - name: "example.com/gpu"
        ignoredByScheduler: true
"""


@dataclasses.dataclass
class Case:
    name: str
    manifest: str  # under golden/
    extenders: list
    files: dict = dataclasses.field(default_factory=dict)  # node path -> text
    kubernetes_version: str | None = None  # None: the lab's release
    refused_by_scheduler: str | None = None  # kube-scheduler's own message, for REFUSED cases
    refused_by_module: str | None = None  # the module's message for the same config


def _tls(extender: dict, pki: dict) -> dict:
    """The extender with its TLS files replaced by real PEM files (kube-scheduler reads the CA at start)."""
    out = copy.deepcopy(extender)
    if out.get("tls"):
        out["tls"] = {"cert_file": pki["cert"], "key_file": pki["key"], "ca_file": pki["ca"]}
    return out


LOADS = [
    Case("ours-alone-tas-tls", "input/kubeadm-1.36.yaml", [TAS_EXTENDER]),
    Case("ours-alone-loopback", "input/kubeadm-1.36.yaml", [LOOPBACK_EXTENDER]),
    Case(
        "ours-alone-all-verbs",
        "input/kubeadm-1.36.yaml",
        [
            dict(
                LOOPBACK_EXTENDER,
                prioritize_verb="prioritize",
                preempt_verb="preempt",
                bind_verb="bind",
                node_cache_capable=True,
                ignorable=True,
                http_timeout="750ms",
                managed_resources=[{"name": "example.com/fpga", "ignored_by_scheduler": False}],
            ),
            dict(TAS_EXTENDER, url_prefix="https://127.0.0.1:9443/tas"),
        ],
    ),
    Case(
        "merged-user-profiles-and-extender",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: (GOLDEN / "merge/scheduler-config-v1.yaml").read_text()},
    ),
    Case(
        "merged-stale-entry-replaced",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: (GOLDEN / "merge/scheduler-config-v1-stale-tas.yaml").read_text()},
    ),
    Case(
        "converted-from-v1beta3-on-1.28",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: BMRA_V1BETA3},
        kubernetes_version="1.28",
    ),
]

REFUSED = [
    Case(
        "duplicate-managed-resource-with-bmra-tas",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: tas_extender_config("v1")},
        refused_by_scheduler="duplicate extender managed resource name",
        refused_by_module="duplicate extender managed resource name",
    ),
    Case(
        "second-binder",
        "merge/kubeadm-config-1.29.yaml",
        [dict(LOOPBACK_EXTENDER, bind_verb="bind")],
        files={
            USER_CONFIG_PATH: BMRA_V1BETA3.replace("v1beta3", "v1").replace(
                'filterVerb: "filter"', 'filterVerb: "filter"\n    bindVerb: "bind"'
            )
        },
        refused_by_scheduler="only one extender can implement bind",
        refused_by_module="only one extender with a bindVerb",
    ),
    Case(
        "prioritize-without-weight",
        "merge/kubeadm-config-1.29.yaml",
        [LOOPBACK_EXTENDER],
        files={
            USER_CONFIG_PATH: BMRA_V1BETA3.replace("v1beta3", "v1").replace(
                "    weight: 2\n", '    prioritizeVerb: "prioritize"\n    weight: 0\n'
            )
        },
        refused_by_scheduler="must have a positive weight applied to it",
        refused_by_module="must have a positive weight applied to it",
    ),
    Case(
        "unknown-field",
        "merge/kubeadm-config-1.29.yaml",
        [LOOPBACK_EXTENDER],
        files={USER_CONFIG_PATH: BMRA_V1BETA3.replace("v1beta3", "v1").replace("filterVerb:", "filterverb:")},
        refused_by_scheduler="unknown field",
        refused_by_module="unknown field",
    ),
]


def _plan(case: Case, pki: dict, lab_version: str):
    extenders, errors = sc.normalize_extenders([_tls(e, pki) for e in case.extenders])
    assert not errors, errors
    return ms.plan_present(
        (GOLDEN / case.manifest).read_text(),
        MANIFEST_PATH,
        case.files.get,
        extenders,
        CONFIG_PATH,
        POLICY_PATH,
        kubernetes_version=case.kubernetes_version or lab_version,
    )


def _unchecked_config(case: Case, pki: dict) -> str:
    """What the module would write for a REFUSED case if it did not check: a plain merge."""
    extenders, _errors = sc.normalize_extenders([_tls(e, pki) for e in case.extenders])
    text = case.files[USER_CONFIG_PATH]
    current = yaml.safe_load(text)
    ops, _replaced = ms.config_add_ops(current, [sc.render_extender(e) for e in extenders])
    merged, _doc = ms.edit_file(text, current, ops, "config")
    return merged


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


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
    plan = _plan(case, pki, lab.k8s_version)
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
        _stop(process)
    loaded.append(case.name)


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_config_the_module_refuses_is_refused_by_kube_scheduler(lab, pki, tmp_path, case):
    with pytest.raises(ms.ManifestError) as info:
        _plan(case, pki, lab.k8s_version)
    assert case.refused_by_module in str(info.value)
    process, _port, log = _start(lab, tmp_path, _unchecked_config(case, pki))
    try:
        code = process.wait(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _stop(process)
    output = log.read_text()
    assert code not in (None, 0), f"kube-scheduler accepted the {case.name} configuration:\n{output[-4000:]}"
    assert case.refused_by_scheduler in output, output[-4000:]
