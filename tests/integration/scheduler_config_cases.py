"""The kube_scheduler_extender configurations the integration tests load in REAL kube-schedulers, and how
they are computed, for test_scheduler_config_versions.py (every served version, one release each, the
lab's own kube-scheduler for v1; no lab).

A configuration is computed exactly as the module computes it (``plan_present`` on the case's
manifest and node files, the extenders normalized as the module does); TLS files are real PEM files,
because kube-scheduler reads them when it builds the extender. REFUSED cases are configurations the
module refuses; ``unchecked_config`` builds what it would write without its check (a plain merge).
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib
import re
import sys

import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms

UNIT = pathlib.Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils" / "scheduler"
if str(UNIT) not in sys.path:
    sys.path.insert(0, str(UNIT))

from cases import CASES, GOLDEN, LOOPBACK_EXTENDER, TAS_EXTENDER, USER_CONFIG_PATH  # noqa: E402
from poweraware_testing import tas_extender_config  # noqa: E402

MANIFEST_PATH = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG_PATH = "/etc/kubernetes/scheduler-extender.yaml"
POLICY_PATH = "/etc/kubernetes/scheduler-extender-policy.json"
NODE_KUBECONFIG = "/etc/kubernetes/scheduler.conf"  # what kubeadm manifests pass; replaced by a local one
GOLDEN_CASES = CASES  # the unit tests' golden cases, loaded by test_scheduler_config_versions.py

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
    kubernetes_version: str | None = None  # None: the caller's release
    legacy_policy: bool = False
    refused_by_scheduler: str | None = None  # kube-scheduler's own message, for REFUSED cases
    refused_by_module: str | None = None  # the module's message for the same config


def tls_files(extender: dict, pki: dict) -> dict:
    """The extender with its TLS files replaced by real PEM files (kube-scheduler reads them at start)."""
    out = copy.deepcopy(extender)
    if out.get("tls"):
        kept = {key: out["tls"][key] for key in ("insecure", "server_name") if key in out["tls"]}
        out["tls"] = {**kept, "cert_file": pki["cert"], "key_file": pki["key"], "ca_file": pki["ca"]}
    return out


ALL_VERBS_EXTENDERS = [
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
]

# Ours alone: valid in every configuration version (kubernetes_version picks the version).
OURS_ALONE = [
    Case("ours-alone-tas-tls", "input/kubeadm-1.36.yaml", [TAS_EXTENDER]),
    Case("ours-alone-loopback", "input/kubeadm-1.36.yaml", [LOOPBACK_EXTENDER]),
    Case("ours-alone-all-verbs", "input/kubeadm-1.36.yaml", ALL_VERBS_EXTENDERS),
]

LOADS = OURS_ALONE + [
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


def refused_cases(version: str = "v1") -> list[Case]:
    """Configurations the module refuses, the user's file in kubescheduler.config.k8s.io/``version``
    (kube-scheduler's validation messages are the same in 1.21, 1.22, 1.24 and 1.36)."""
    bmra = BMRA_V1BETA3.replace("v1beta3", version)
    second_binder = bmra.replace('filterVerb: "filter"', 'filterVerb: "filter"\n    bindVerb: "bind"')
    no_weight = bmra.replace("    weight: 2\n", '    prioritizeVerb: "prioritize"\n    weight: 0\n')
    return [
        Case(
            "duplicate-managed-resource-with-bmra-tas",
            "merge/kubeadm-config-1.29.yaml",
            [TAS_EXTENDER],
            files={USER_CONFIG_PATH: tas_extender_config(version)},
            refused_by_scheduler="duplicate extender managed resource name",
            refused_by_module="duplicate extender managed resource name",
        ),
        Case(
            "second-binder",
            "merge/kubeadm-config-1.29.yaml",
            [dict(LOOPBACK_EXTENDER, bind_verb="bind")],
            files={USER_CONFIG_PATH: second_binder},
            refused_by_scheduler="only one extender can implement bind",
            refused_by_module="only one extender with a bindVerb",
        ),
        Case(
            "prioritize-without-weight",
            "merge/kubeadm-config-1.29.yaml",
            [LOOPBACK_EXTENDER],
            files={USER_CONFIG_PATH: no_weight},
            refused_by_scheduler="must have a positive weight applied to it",
            refused_by_module="must have a positive weight applied to it",
        ),
        Case(
            # client-go's transport rule, which kube-scheduler meets when it builds the extenders
            "insecure-with-a-ca-file",
            "merge/kubeadm-config-1.29.yaml",
            [dict(LOOPBACK_EXTENDER, url_prefix="https://127.0.0.1:9443/scheduler", tls={"insecure": True})],
            files={USER_CONFIG_PATH: bmra},
            refused_by_scheduler="specifying a root certificates file with the insecure flag is not allowed",
            refused_by_module="specifying a root certificates file with the insecure flag is not allowed",
        ),
        Case(
            "unknown-field",
            "merge/kubeadm-config-1.29.yaml",
            [LOOPBACK_EXTENDER],
            files={USER_CONFIG_PATH: bmra.replace("filterVerb:", "filterverb:")},
            refused_by_scheduler="unknown field",
            refused_by_module="unknown field",
        ),
    ]


def _kubeconfig_flag(manifest_text: str) -> str | None:
    match = re.search(r"--kubeconfig=([^\s\"',]+)", manifest_text)
    return match.group(1) if match else None


def plan(case: Case, pki: dict, kubernetes_version: str, kubeconfig: str | None = None):
    """The module's plan for ``case`` (``kubernetes_version`` unless the case names its own).

    ``kubeconfig``: a kubeconfig on this machine that replaces the one the manifest passes (and the
    node files name), in the module's INPUTS, so that its output is loaded as it is written."""
    extenders, errors = sc.normalize_extenders([tls_files(e, pki) for e in case.extenders])
    assert not errors, errors
    manifest = (GOLDEN / case.manifest).read_text()
    files = dict(case.files)
    node_kubeconfig = _kubeconfig_flag(manifest)
    if kubeconfig and node_kubeconfig:
        manifest = manifest.replace(node_kubeconfig, kubeconfig)
        files = {path: text.replace(node_kubeconfig, kubeconfig) for path, text in files.items()}
    return ms.plan_present(
        manifest,
        MANIFEST_PATH,
        files.get,
        extenders,
        CONFIG_PATH,
        POLICY_PATH,
        kubernetes_version=case.kubernetes_version or kubernetes_version,
        legacy_policy=case.legacy_policy,
    )


def unchecked_config(case: Case, pki: dict, kubeconfig: str | None = None) -> str:
    """What the module would write for a REFUSED case if it did not check: a plain merge (``kubeconfig``
    replaces the node's in the user's file, as in ``plan``)."""
    extenders, _errors = sc.normalize_extenders([tls_files(e, pki) for e in case.extenders])
    text = case.files[USER_CONFIG_PATH]
    if kubeconfig:
        text = text.replace(NODE_KUBECONFIG, kubeconfig)
    current = yaml.safe_load(text)
    ops, _replaced = ms.config_add_ops(current, [sc.render_extender(e) for e in extenders])
    merged, _doc, _reemitted = ms.edit_file(text, current, ops, "config")
    return merged
