"""Golden cases for kube_scheduler_extender: manifest (and config file) in, manifest and config out.

Inputs live in golden/input (kubeadm, one per release, made by kubeadm_manifests.py), golden/merge
(an existing --config with custom profiles and another extender) and golden/other (other
installers: flags in args, private registries with ports, build-suffixed tags, digests,
hand-written indentation, JSON). Expected outputs live in golden/expected/<case>/.

`UPDATE_GOLDEN=1 pytest tests/unit/plugins/module_utils/scheduler/test_golden.py` rewrites the expected files; they are
reviewed as diffs against the inputs (see docs/scheduler-extender.md, "How the golden files
were checked"), never accepted blindly.
"""

from __future__ import annotations

import dataclasses
import pathlib

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
MANIFEST_PATH = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG_PATH = "/etc/kubernetes/scheduler-extender.yaml"
POLICY_PATH = "/etc/kubernetes/scheduler-extender-policy.json"
USER_CONFIG_PATH = "/etc/kubernetes/scheduler-config.yaml"

TAS_URL = "https://tas-service.telemetry-aware-scheduling.svc.cluster.local:9001"

# The extender TAS documents (deploy/extender-configuration/scheduler-config.yaml), with a
# client certificate issued by the role instead of the copied cluster CA key, and the CA that
# verifies TAS (TAS's example has none: kube-scheduler then calls it without verification).
TAS_EXTENDER = {
    "url_prefix": TAS_URL,
    "filter_verb": "scheduler/filter",
    "prioritize_verb": "scheduler/prioritize",
    "weight": 1,
    "ignorable": True,
    "http_timeout": "5s",
    "managed_resources": [{"name": "telemetry/scheduling", "ignored_by_scheduler": True}],
    "tls": {
        "cert_file": "/etc/kubernetes/pki/tas/client.crt",
        "key_file": "/etc/kubernetes/pki/tas/client.key",
        "ca_file": "/etc/kubernetes/pki/tas/ca.crt",
    },
}

# An extender on loopback without TLS: no extra mount, no DNS policy.
LOOPBACK_EXTENDER = {"url_prefix": "http://127.0.0.1:9001/scheduler", "filter_verb": "filter", "weight": 5}

RELEASES = list(range(19, 37))


@dataclasses.dataclass
class Case:
    name: str
    manifest: str  # path under golden/
    extenders: list
    files: dict = dataclasses.field(default_factory=dict)  # node path -> path under golden/
    legacy_policy: bool = False
    kubernetes_version: str | None = None
    api_version: str | None = None  # expected
    reemitted: bool = False

    @property
    def policy(self) -> bool:
        """The module writes the legacy Policy file (asked for, or the only way on 1.18)."""
        return self.api_version == "v1"

    @property
    def expected_dir(self) -> pathlib.Path:
        return GOLDEN / "expected" / self.name


def _api(minor: int) -> str:
    version = {19: "v1beta1", 20: "v1beta1", 21: "v1beta1", 22: "v1beta2", 23: "v1beta3", 24: "v1beta3"}.get(
        minor, "v1"
    )
    return "kubescheduler.config.k8s.io/" + version


CASES = [Case(f"kubeadm-1.{m}", f"input/kubeadm-1.{m}.yaml", [TAS_EXTENDER], api_version=_api(m)) for m in RELEASES]
# 1.18 serves no beta configuration API: the Policy file without legacy_policy
CASES += [Case("kubeadm-1.18", "input/kubeadm-1.18.yaml", [TAS_EXTENDER], api_version="v1")]
CASES += [
    Case(f"kubeadm-1.{m}-policy", f"input/kubeadm-1.{m}.yaml", [TAS_EXTENDER], legacy_policy=True, api_version="v1")
    for m in (19, 20, 21, 22)
]
CASES += [
    Case(
        "merge-profiles-1.29",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: "merge/scheduler-config-v1.yaml"},
        api_version="kubescheduler.config.k8s.io/v1",
    ),
    Case(
        "merge-v1beta1-1.22",
        "merge/kubeadm-config-1.22.yaml",
        [LOOPBACK_EXTENDER],
        files={USER_CONFIG_PATH: "merge/scheduler-config-v1beta1.yaml"},
        api_version="kubescheduler.config.k8s.io/v1beta1",
    ),
    Case(
        "merge-replace-stale-1.29",
        "merge/kubeadm-config-1.29.yaml",
        [TAS_EXTENDER],
        files={USER_CONFIG_PATH: "merge/scheduler-config-v1-stale-tas.yaml"},
        api_version="kubescheduler.config.k8s.io/v1",
    ),
    Case("rke2-args-1.28", "other/rke2-args-1.28.yaml", [TAS_EXTENDER], api_version="kubescheduler.config.k8s.io/v1"),
    Case(
        "handwritten-digest-1.30",
        "other/handwritten-digest-1.30.yaml",
        [LOOPBACK_EXTENDER],
        api_version="kubescheduler.config.k8s.io/v1",
    ),
    Case(
        "digest-only-1.31",
        "other/digest-only-1.31.yaml",
        [LOOPBACK_EXTENDER],
        kubernetes_version="1.31",
        api_version="kubescheduler.config.k8s.io/v1",
    ),
    Case(
        "json-1.33",
        "other/json-1.33.json",
        [LOOPBACK_EXTENDER],
        api_version="kubescheduler.config.k8s.io/v1",
        reemitted=True,
    ),
]


def typed(extenders: list) -> tuple[list, list[str]]:
    """The extenders as the module's argument spec hands them over (types, defaults), and its errors."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible_collections.poweraware.k8s.plugins.modules import kube_scheduler_extender

    spec = {"extenders": kube_scheduler_extender.argument_spec()["extenders"]}
    result = ArgumentSpecValidator(spec).validate({"extenders": extenders})
    return result.validated_parameters["extenders"], [error.msg for error in result.errors.errors]
