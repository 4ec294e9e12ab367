# ruff: noqa: E501 - exact, long messages
"""_coexistence's edges checked one by one, with the exact text a user reads.

Written against the mutants mutmut left alive (docs/development.md, "Mutation testing"): who
manages an object when Helm's release is named only by the annotation or only by the instance
label, repeated and malformed managedFields, objects whose metadata or spec is not a mapping, an
APIService whose Service lacks a namespace or a name, kube-scheduler manifests with a sidecar, a
single container of another name, no ``command``, a non-text item or a trailing ``--config``, and
extenders that clash with several existing entries (the joined messages), several shared
resources, malformed records and resources.
"""

from __future__ import annotations

import json

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import coexistence as c

HELM = "app.kubernetes.io/managed-by"
CONFIG = "/etc/kubernetes/kubescheduler-config.yaml"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


def meta_obj(labels=None, annotations=None, managed_fields=None, kind="Deployment"):
    meta = {"name": "tas", "namespace": "kube-system", "labels": labels or {}}
    if annotations is not None:
        meta["annotations"] = annotations
    if managed_fields is not None:
        meta["managedFields"] = managed_fields
    return {"kind": kind, "metadata": meta}


# --- managed_by ----------------------------------------------------------------------------------


def test_helm_release_named_only_by_the_annotation():
    obj = meta_obj({HELM: "Helm"}, {"meta.helm.sh/release-name": "tas"})
    assert c.managed_by(obj) == "app.kubernetes.io/managed-by=Helm (release tas)"


def test_helm_release_annotation_wins_over_the_instance_label():
    obj = meta_obj({HELM: "Helm", "app.kubernetes.io/instance": "other"}, {"meta.helm.sh/release-name": "tas"})
    assert c.managed_by(obj) == "app.kubernetes.io/managed-by=Helm (release tas)"


def test_helm_release_named_only_by_the_instance_label():
    obj = meta_obj({HELM: "Helm", "app.kubernetes.io/instance": "nfd"}, {})
    assert c.managed_by(obj) == "app.kubernetes.io/managed-by=Helm (release nfd)"


def test_manager_label_without_a_release():
    assert c.managed_by(meta_obj({HELM: "kustomize"})) == "app.kubernetes.io/managed-by=kustomize"


def test_field_managers_once_each_in_order_and_malformed_entries_skipped():
    fields = [
        {"manager": "kubectl-client-side-apply", "operation": "Update"},
        "junk",
        {"operation": "Update"},
        {"manager": "helm", "operation": "Update"},
        {"manager": "kubectl-client-side-apply", "operation": "Apply"},
    ]
    assert c.managed_by(meta_obj(managed_fields=fields)) == "field managers kubectl-client-side-apply, helm"


def test_non_objects_and_non_mapping_metadata_have_no_manager():
    assert c.is_ours("DaemonSet collectd") is False
    assert c.managed_by(None) == "unknown manager"
    assert c.object_name({"kind": "Pod", "metadata": None}) == "Pod ?"
    assert c.object_name({"kind": "Pod", "metadata": ["name", "x"]}) == "Pod ?"


# --- _mismatch -----------------------------------------------------------------------------------


def test_daemonset_without_a_selector_or_spec_names_an_empty_selector():
    selector = {"app.kubernetes.io/name": "collectd"}
    ours = {"kind": "DaemonSet", "metadata": {"name": "collectd", "labels": {HELM: "poweraware.k8s"}}, "spec": None}
    decision = c.decide("collectd", "fail", [ours], {"selector": selector})
    assert decision["message"].startswith(
        "collectd: collectd is already installed by someone else: DaemonSet collectd: its selector {} is not "
        "ours (app.kubernetes.io/name=collectd); a DaemonSet's selector cannot be changed"
    )


@pytest.mark.parametrize(
    ("service", "have"),
    [
        ({"name": "prometheus-adapter"}, "?/prometheus-adapter"),
        ({"namespace": "custom-metrics"}, "custom-metrics/?"),
    ],
)
def test_apiservice_service_without_namespace_or_name(service, have):
    obj = {
        "kind": "APIService",
        "metadata": {"name": "v1beta1.custom.metrics.k8s.io", "labels": {HELM: "poweraware.k8s"}},
        "spec": {"service": service},
    }
    expected = {"service": {"namespace": "custom-metrics", "name": "prometheus-adapter"}}
    decision = c.decide("prometheus_adapter", "fail", [obj], expected)
    assert (
        f"APIService v1beta1.custom.metrics.k8s.io: it points at Service {have}, not ours "
        "(custom-metrics/prometheus-adapter); there is one APIService"
    ) in decision["message"]


# --- scheduler_config_path -----------------------------------------------------------------------


def pod(*containers, spec=True):
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-scheduler"}}
    if spec:
        doc["spec"] = {"containers": list(containers)}
    return json.dumps(doc)


NONE = {"path": "", "flag": ""}


def test_the_kube_scheduler_container_is_found_next_to_a_sidecar():
    sidecar = {"name": "log-shipper", "command": ["shipper", "--config=/etc/shipper.yaml"]}
    scheduler = {"name": "kube-scheduler", "command": ["kube-scheduler", f"--config={CONFIG}"]}
    assert c.scheduler_config_path(pod(sidecar, scheduler)) == {"path": CONFIG, "flag": "--config"}
    assert c.scheduler_config_path(pod(scheduler, sidecar)) == {"path": CONFIG, "flag": "--config"}


def test_two_containers_none_named_kube_scheduler_load_nothing():
    first = {"name": "scheduler", "command": ["kube-scheduler", f"--config={CONFIG}"]}
    second = {"name": "other", "command": ["other"]}
    assert c.scheduler_config_path(pod(first, second)) == NONE


def test_two_containers_named_kube_scheduler_load_nothing():
    one = {"name": "kube-scheduler", "command": ["kube-scheduler", f"--config={CONFIG}"]}
    assert c.scheduler_config_path(pod(one, dict(one))) == NONE


def test_a_single_container_of_another_name_is_the_scheduler():
    only = {"name": "scheduler", "command": ["kube-scheduler", f"--config={CONFIG}"]}
    assert c.scheduler_config_path(pod(only)) == {"path": CONFIG, "flag": "--config"}


def test_flags_only_in_args_without_a_command():
    only = {"name": "kube-scheduler", "args": ["--policy-config-file", "/etc/p.json"]}
    assert c.scheduler_config_path(pod(only)) == {"path": "/etc/p.json", "flag": "--policy-config-file"}


def test_a_command_line_the_module_refuses_loads_nothing():
    # kube_scheduler_extender refuses these manifests itself (_sched_manifest.argv_problems and
    # "must be a list of strings"): coexistence reads no file from them rather than guess one
    for container in (
        {"name": "kube-scheduler", "command": ["kube-scheduler", 5, f"--config={CONFIG}"]},
        {"name": "kube-scheduler", "command": ["kube-scheduler", "--config"]},
        # one argv: kube-scheduler would take "--config=..." as the first --config's value
        {"name": "kube-scheduler", "command": ["kube-scheduler", "--config"], "args": [f"--config={CONFIG}"]},
        {"name": "kube-scheduler", "command": ["sh", "-c", f"kube-scheduler --config={CONFIG}"]},
    ):
        assert c.scheduler_config_path(pod(container)) == NONE


def test_a_flag_ending_command_takes_its_value_from_args():
    split = {"name": "kube-scheduler", "command": ["kube-scheduler", "--config"], "args": [CONFIG]}
    assert c.scheduler_config_path(pod(split)) == {"path": CONFIG, "flag": "--config"}


@pytest.mark.parametrize("text", ["kind: Pod\nspec: null\n", "kind: Pod\nspec: [a]\n", "kind: Pod\n"])
def test_a_pod_without_a_spec_mapping_loads_nothing(text):
    assert c.scheduler_config_path(text) == NONE


# --- extender_coexistence ------------------------------------------------------------------------
TAS_URL = "https://tas.example:9001"
GPU_URL = "https://gas.example:9001"
OUR_TAS = {"url_prefix": "https://tas.ours:9001", "managed_resources": [{"name": "telemetry/scheduling"}]}
OUR_GPU = {
    "url_prefix": GPU_URL,
    "managed_resources": [{"name": "gpu.intel.com/i915"}, {"name": "gpu.intel.com/millicores"}],
}
# extenders[0] shares TAS's resource, [1] has our GPU extender's URL, [2] manages both GPU resources.
THREE = f"""extenders:
  - urlPrefix: {TAS_URL}
    managedResources: [{{name: telemetry/scheduling}}]
  - urlPrefix: {GPU_URL}/
  - urlPrefix: https://gas.bmra:9001
    managedResources: [{{name: gpu.intel.com/millicores}}, {{name: gpu.intel.com/i915}}, {{ignoredByScheduler: true}}, gpu]
"""
HIT_TAS = f"extenders[0] (urlPrefix {TAS_URL}) in {CONFIG} manages telemetry/scheduling"
HIT_GPU_URL = f"extenders[1] (urlPrefix {GPU_URL}/) in {CONFIG} has the same urlPrefix"
HIT_GPU_RES = (
    f"extenders[2] (urlPrefix https://gas.bmra:9001) in {CONFIG} manages gpu.intel.com/i915, gpu.intel.com/millicores"
)


def test_several_clashes_fail_with_every_one_named():
    decision = c.extender_coexistence("fail", "", THREE, CONFIG, [OUR_TAS, OUR_GPU], MANIFEST)
    assert decision == {
        "action": "fail",
        "extenders": [],
        "kept": [HIT_TAS, HIT_GPU_URL, HIT_GPU_RES],
        "message": (
            f"scheduler_extender: kube-scheduler ({MANIFEST}) already loads an extender that is not ours: "
            f"our extender https://tas.ours:9001: the existing {HIT_TAS}, not added by poweraware.k8s; "
            f"our extender {GPU_URL}: the existing {HIT_GPU_URL} and {HIT_GPU_RES}, not added by poweraware.k8s; "
            "kube-scheduler refuses a resource managed by two extenders. Nothing was changed. Set "
            "scheduler_extender_existing=adopt to keep the existing extender and not add ours, or remove it "
            "first (scheduler_extender_existing=fail, the default, stops here)."
        ),
    }


def test_several_clashes_adopted_with_every_one_named():
    decision = c.extender_coexistence("adopt", "", THREE, CONFIG, [OUR_TAS, OUR_GPU], MANIFEST)
    assert decision == {
        "action": "adopt",
        "extenders": [],
        "kept": [HIT_TAS, HIT_GPU_URL, HIT_GPU_RES],
        "message": (
            f"scheduler_extender: keeping the existing {HIT_TAS}; {HIT_GPU_URL}; {HIT_GPU_RES} "
            f"(scheduler_extender_existing=adopt): our extender https://tas.ours:9001, {GPU_URL} is not added; "
            "nothing else to register, kube-scheduler is left as it is."
        ),
    }


def test_extenders_that_are_not_mappings_are_passed_through_in_place():
    config = f"extenders:\n  - urlPrefix: {TAS_URL}\n    managedResources: [{{name: telemetry/scheduling}}]\n"
    decision = c.extender_coexistence("fail", "", config, CONFIG, ["junk", OUR_TAS, None], MANIFEST)
    assert decision["action"] == "fail"
    assert decision["extenders"] == ["junk", None]
    assert decision["kept"] == [HIT_TAS]


def test_only_a_trailing_slash_is_ignored_in_urls():
    for existing in (f"{TAS_URL}X", f"{TAS_URL}/X"):
        config = f"extenders:\n  - urlPrefix: {existing}\n"
        ours = {"url_prefix": TAS_URL, "managed_resources": []}
        assert c.extender_coexistence("fail", "", config, CONFIG, [ours])["action"] == "register"
    config = f"extenders:\n  - urlPrefix: {TAS_URL}//\n"
    ours = {"url_prefix": TAS_URL + "/", "managed_resources": []}
    assert c.extender_coexistence("fail", "", config, CONFIG, [ours])["kept"] == [
        f"extenders[0] (urlPrefix {TAS_URL}//) in {CONFIG} has the same urlPrefix"
    ]


def record_manifest(raw):
    return json.dumps({"kind": "Pod", "metadata": {"annotations": {"poweraware.k8s/scheduler-extender": raw}}})


@pytest.mark.parametrize("raw", ['["https://tas.example:9001"]', "not json", '{"extenders": "x"}'])
def test_an_unreadable_record_claims_no_extender(raw):
    config = f"extenders:\n  - urlPrefix: {TAS_URL}\n    managedResources: [{{name: telemetry/scheduling}}]\n"
    decision = c.extender_coexistence("fail", record_manifest(raw), config, CONFIG, [OUR_TAS])
    assert decision["action"] == "fail" and decision["kept"] == [HIT_TAS]


def test_a_record_whose_extenders_is_a_string_claims_no_extender():
    """A damaged record (``extenders`` a string) is not read letter by letter: an entry whose urlPrefix
    is one of its letters is still someone else's."""
    config = "extenders:\n  - urlPrefix: h\n    managedResources: [{name: telemetry/scheduling}]\n"
    decision = c.extender_coexistence("fail", record_manifest('{"extenders": "https"}'), config, CONFIG, [OUR_TAS])
    assert decision["action"] == "fail"
    assert decision["kept"] == [f"extenders[0] (urlPrefix h) in {CONFIG} manages telemetry/scheduling"]


def test_an_entry_without_url_is_ours_when_the_record_lists_the_empty_url():
    """The rule: an entry is ours when its urlPrefix (absent: empty) is in the manifest's record."""
    config = "extenders:\n  - managedResources: [{name: telemetry/scheduling}]\n"
    decision = c.extender_coexistence("fail", record_manifest('{"extenders": [""]}'), config, CONFIG, [OUR_TAS])
    assert decision == {"action": "register", "extenders": [OUR_TAS], "message": "", "kept": []}
    decision = c.extender_coexistence("fail", record_manifest('{"extenders": ["None"]}'), config, CONFIG, [OUR_TAS])
    assert decision["kept"] == [f"extenders[0] (urlPrefix (none)) in {CONFIG} manages telemetry/scheduling"]


def test_resources_without_a_text_name_are_not_compared():
    config = "extenders:\n  - urlPrefix: https://x.example\n    managedResources: [{ignoredByScheduler: true}, {name: 5}, telemetry/scheduling]\n"
    ours = {"url_prefix": TAS_URL, "managed_resources": [{"name": "telemetry/scheduling"}, "5", {"name": None}]}
    assert c.extender_coexistence("fail", "", config, CONFIG, [ours])["action"] == "register"


# Mutants left alive on purpose (same observable behaviour), from the mutation run of this file:
# - _load, `not text or not isinstance(text, str)` -> `not text and not isinstance(text, str)`: a
#   truthy non-str (bytes, a mapping) then fails at `.encode` inside the try and comes back None, and
#   "" loads as None: the same result for every input but an object with a str-like encode method.
# - _load, "utf-8" -> "UTF-8" (encode and decode): codec names are case-insensitive.
# - _our_urls, `record = {}` -> `record = None` after a JSON error: the next line treats both as "no
#   record" (None is not a dict).
# - _our_urls, `if isinstance(doc, dict)` -> `or True`: _meta returns {} for a non-dict doc anyway.
# - scheduler_config_path, `if isinstance(doc, dict)` -> `or True`, and _scheduler_container,
#   `doc.get("spec") if isinstance(doc, dict)` -> `or True`: each guard is the other's backup; with
#   one of them gone the other still returns None for a non-mapping document.
# - extender_coexistence, `ext.get("url_prefix") or ""` -> `or "XXXX"` and
#   `entry.get("urlPrefix") or ""` -> `or "XXXX"`: a missing URL then matches only a URL that is
#   literally "XXXX" (before, an empty URL never matched); no real urlPrefix is "XXXX".
