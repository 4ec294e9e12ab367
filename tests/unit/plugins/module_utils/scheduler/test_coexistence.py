# ruff: noqa: E501 - exact, long messages
"""Coexistence with an installation the collection did not make (plugins/module_utils/scheduler/coexistence.py).

Every component x {nothing there, ours there, theirs there} x {fail, adopt}, with the exact messages
a user sees; the objects "theirs" are shaped as BMRA creates them (intel/container-experience-kits:
collectd_install, prometheus_install/kube_prometheus, nfd_install Helm release, the
telemetry-aware-scheduling chart of platform_aware_scheduling_install), and the kube-scheduler
configuration as BMRA's create-scheduler-config.yml writes it.

coexistence's edges checked one by one, with the exact text a user reads.

The edges: who
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
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.coexistence import FilterModule
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import coexistence as c
from poweraware_testing import tas_extenders_block

OURS = {"app.kubernetes.io/managed-by": "poweraware.k8s"}
COLLECTD_SELECTOR = {"app.kubernetes.io/name": "collectd", "app.kubernetes.io/part-of": "poweraware"}
ADAPTER_SERVICE = {"namespace": "custom-metrics", "name": "prometheus-adapter"}


def obj(kind, name, namespace=None, labels=None, annotations=None, managers=(), spec=None):
    meta = {"name": name, "labels": dict(labels or {}), "uid": f"{kind}-{namespace}-{name}"}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    if managers:
        meta["managedFields"] = [{"manager": m, "operation": "Apply"} for m in managers]
    return {"kind": kind, "metadata": meta, "spec": spec or {}}


HELM_TAS = {
    "app.kubernetes.io/name": "telemetry-aware-scheduling",
    "app.kubernetes.io/instance": "tas",
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": "telemetry-aware-scheduling-0.1",
}
HELM_NFD = {
    "app.kubernetes.io/name": "node-feature-discovery",
    "app.kubernetes.io/instance": "node-feature-discovery",
    "app.kubernetes.io/managed-by": "Helm",
    "role": "master",
}

# component -> (expected, [our objects], [their objects])
CASES = {
    "collectd": (
        {"selector": COLLECTD_SELECTOR},
        [
            obj(
                "DaemonSet",
                "collectd",
                "monitoring",
                {**OURS, **COLLECTD_SELECTOR},
                managers=["poweraware"],
                spec={"selector": {"matchLabels": COLLECTD_SELECTOR}},
            )
        ],
        [
            obj(
                "DaemonSet",
                "collectd",
                "monitoring",
                {"app": "collectd"},
                managers=["kubectl-client-side-apply"],
                spec={"selector": {"matchLabels": {"app": "collectd"}}},
            )
        ],
    ),
    "prometheus_adapter": (
        {"service": ADAPTER_SERVICE},
        [
            obj(
                "APIService",
                "v1beta1.custom.metrics.k8s.io",
                labels=OURS,
                managers=["poweraware"],
                spec={"service": ADAPTER_SERVICE},
            )
        ],
        [
            obj(
                "APIService",
                "v1beta1.custom.metrics.k8s.io",
                labels={"app": "custom-metrics-apiserver"},
                managers=["kubectl-client-side-apply"],
                spec={"service": {"namespace": "monitoring", "name": "prometheus-adapter"}},
            )
        ],
    ),
    "nfd": (
        {},
        [
            obj("CustomResourceDefinition", "nodefeatures.nfd.k8s-sigs.io", labels=OURS, managers=["poweraware"]),
            obj("Deployment", "nfd-master", "node-feature-discovery", OURS, managers=["poweraware"]),
        ],
        [
            obj("CustomResourceDefinition", "nodefeatures.nfd.k8s-sigs.io", managers=["helm"]),
            obj(
                "Deployment",
                "node-feature-discovery-master",
                "kube-system",
                HELM_NFD,
                {"meta.helm.sh/release-name": "node-feature-discovery"},
                ["helm"],
            ),
        ],
    ),
    "tas": (
        {},
        [
            obj("CustomResourceDefinition", "taspolicies.telemetry.intel.com", labels=OURS, managers=["poweraware"]),
            obj(
                "Deployment", "telemetry-aware-scheduling", "telemetry-aware-scheduling", OURS, managers=["poweraware"]
            ),
            obj("Service", "tas-service", "telemetry-aware-scheduling", OURS, managers=["poweraware"]),
        ],
        [
            obj("CustomResourceDefinition", "taspolicies.telemetry.intel.com", managers=["helm"]),
            obj(
                "Deployment",
                "tas-telemetry-aware-scheduling",
                "kube-system",
                HELM_TAS,
                {"meta.helm.sh/release-name": "tas"},
                ["helm"],
            ),
            obj(
                "Service",
                "telemetry-aware-scheduling",
                "kube-system",
                HELM_TAS,
                {"meta.helm.sh/release-name": "tas"},
                ["helm"],
            ),
        ],
    ),
}

FAIL = {
    "collectd": (
        "collectd: collectd is already installed by someone else: DaemonSet monitoring/collectd: not "
        "managed by poweraware.k8s (field managers kubectl-client-side-apply); its selector app=collectd "
        "is not ours (app.kubernetes.io/name=collectd, app.kubernetes.io/part-of=poweraware); a DaemonSet's "
        "selector cannot be changed, so ours cannot be applied over it. Nothing was changed. Set collectd_existing=adopt "
        "to use the existing installation instead of deploying ours, or remove it first (collectd_existing=fail, "
        "the default, stops here)."
    ),
    "prometheus_adapter": (
        "prometheus_adapter: the custom metrics API (custom.metrics.k8s.io) is already installed by "
        "someone else: APIService v1beta1.custom.metrics.k8s.io: not managed by poweraware.k8s (field "
        "managers kubectl-client-side-apply); it points at Service monitoring/prometheus-adapter, not "
        "ours (custom-metrics/prometheus-adapter); there is one APIService per API group version, so "
        "applying ours would take it over (server-side apply conflict). Nothing was changed. Set prometheus_adapter_existing=adopt "
        "to use the existing installation instead of deploying ours, or remove it first (prometheus_adapter_existing=fail, "
        "the default, stops here)."
    ),
    "nfd": (
        "nfd: Node Feature Discovery is already installed by someone else: CustomResourceDefinition "
        "nodefeatures.nfd.k8s-sigs.io: not managed by poweraware.k8s (field managers helm); applying "
        "ours would replace its schema under the installation that uses it; Deployment kube-system/node-feature-discovery-master: "
        "not managed by poweraware.k8s (app.kubernetes.io/managed-by=Helm (release node-feature-discovery); "
        "field managers helm); two installations would act on the same objects. Nothing was changed. "
        "Set nfd_existing=adopt to use the existing installation instead of deploying ours, or remove "
        "it first (nfd_existing=fail, the default, stops here)."
    ),
    "tas": (
        "tas: Telemetry Aware Scheduling is already installed by someone else: CustomResourceDefinition "
        "taspolicies.telemetry.intel.com: not managed by poweraware.k8s (field managers helm); applying "
        "ours would replace its schema under the installation that uses it; Deployment kube-system/tas-telemetry-aware-scheduling: "
        "not managed by poweraware.k8s (app.kubernetes.io/managed-by=Helm (release tas); field managers "
        "helm); two installations would act on the same objects; Service kube-system/telemetry-aware-scheduling: "
        "not managed by poweraware.k8s (app.kubernetes.io/managed-by=Helm (release tas); field managers "
        "helm); applying ours would take it over. Nothing was changed. Set tas_existing=adopt to use "
        "the existing installation instead of deploying ours, or remove it first (tas_existing=fail, "
        "the default, stops here)."
    ),
}
ADOPT = {
    "collectd": (
        "collectd: using the existing DaemonSet monitoring/collectd (collectd_existing=adopt): our "
        "collectd DaemonSet, ConfigMap, ServiceAccount and Service are not applied and its wait is "
        "skipped (managed by: field managers kubectl-client-side-apply)."
    ),
    "prometheus_adapter": (
        "prometheus_adapter: using the existing APIService v1beta1.custom.metrics.k8s.io (prometheus_adapter_existing=adopt): "
        "our Prometheus Adapter, its certificates and its APIService are not applied and its waits "
        "are skipped (managed by: field managers kubectl-client-side-apply)."
    ),
    "nfd": (
        "nfd: using the existing CustomResourceDefinition nodefeatures.nfd.k8s-sigs.io, Deployment "
        "kube-system/node-feature-discovery-master (nfd_existing=adopt): our NFD CRDs, nfd-master, "
        "nfd-worker and power NodeFeatureRule are not applied and its waits are skipped (managed by: "
        "app.kubernetes.io/managed-by=Helm (release node-feature-discovery); field managers helm | "
        "field managers helm)."
    ),
    "tas": (
        "tas: using the existing CustomResourceDefinition taspolicies.telemetry.intel.com, Deployment "
        "kube-system/tas-telemetry-aware-scheduling, Service kube-system/telemetry-aware-scheduling "
        "(tas_existing=adopt): our TAS certificates, TASPolicy CRD, Deployment and Service are not "
        "applied and its wait is skipped (managed by: app.kubernetes.io/managed-by=Helm (release tas); "
        "field managers helm | field managers helm)."
    ),
}
OBJECTS = {
    "collectd": ["DaemonSet monitoring/collectd"],
    "prometheus_adapter": ["APIService v1beta1.custom.metrics.k8s.io"],
    "nfd": [
        "CustomResourceDefinition nodefeatures.nfd.k8s-sigs.io",
        "Deployment kube-system/node-feature-discovery-master",
    ],
    "tas": [
        "CustomResourceDefinition taspolicies.telemetry.intel.com",
        "Deployment kube-system/tas-telemetry-aware-scheduling",
        "Service kube-system/telemetry-aware-scheduling",
    ],
}


@pytest.mark.parametrize("choice", c.CHOICES)
@pytest.mark.parametrize("component", sorted(CASES))
def test_nothing_there_deploys(component, choice):
    expected, _ours, _theirs = CASES[component]
    assert c.decide(component, choice, [], expected) == {"action": "deploy", "message": "", "objects": []}


@pytest.mark.parametrize("choice", c.CHOICES)
@pytest.mark.parametrize("component", sorted(CASES))
def test_ours_there_deploys(component, choice):
    expected, ours, _theirs = CASES[component]
    assert c.decide(component, choice, ours, expected) == {"action": "deploy", "message": "", "objects": []}


@pytest.mark.parametrize("choice", ["fail", "adopt"])
@pytest.mark.parametrize("component", sorted(CASES))
def test_theirs_there(component, choice):
    expected, _ours, theirs = CASES[component]
    message = {"fail": FAIL, "adopt": ADOPT}[choice][component]
    assert c.decide(component, choice, theirs, expected) == {
        "action": choice,
        "message": message,
        "objects": OBJECTS[component],
    }


@pytest.mark.parametrize("component", sorted(CASES))
def test_theirs_next_to_ours_is_still_theirs(component):
    expected, ours, theirs = CASES[component]
    decision = c.decide(component, "fail", ours + theirs, expected)
    assert decision["action"] == "fail" and decision["objects"] == OBJECTS[component]


def test_our_label_with_another_selector_is_in_the_way():
    expected, ours, _theirs = CASES["collectd"]
    old = json.loads(json.dumps(ours[0]))
    old["spec"]["selector"]["matchLabels"] = {"app": "collectd"}
    decision = c.decide("collectd", "fail", [old], expected)
    assert decision["action"] == "fail"
    assert (
        "DaemonSet monitoring/collectd: its selector app=collectd is not ours (app.kubernetes.io/name=collectd, "
        "app.kubernetes.io/part-of=poweraware); a DaemonSet's selector cannot be changed"
    ) in decision["message"]


def test_our_apiservice_pointing_elsewhere_is_in_the_way():
    expected, ours, _theirs = CASES["prometheus_adapter"]
    moved = json.loads(json.dumps(ours[0]))
    moved["spec"]["service"] = {"namespace": "monitoring", "name": "prometheus-adapter"}
    assert c.decide("prometheus_adapter", "adopt", [moved], expected)["action"] == "adopt"
    local = json.loads(json.dumps(ours[0]))
    local["spec"] = {}
    assert (
        "it points at Service none (local), not ours (custom-metrics/prometheus-adapter)"
        in c.decide("prometheus_adapter", "fail", [local], expected)["message"]
    )


def test_managed_by_without_anything():
    assert c.managed_by({"kind": "Service", "metadata": {"name": "x"}}) == "unknown manager"
    assert c.object_name({"kind": "Service", "metadata": {"name": "x", "namespace": "n"}}) == "Service n/x"
    assert c.object_name({"metadata": {}}) == "object ?"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: c.decide("collectd", "ignore", []), "collectd_existing must be one of fail|adopt, got 'ignore'"),
        (
            lambda: c.decide("prometheus", "fail", []),
            "unknown component 'prometheus'; known: collectd, nfd, prometheus_adapter, tas",
        ),
        (lambda: c.decide("tas", "fail", ["x"]), "objects must be Kubernetes objects (dicts), got 'x'"),
        (
            lambda: c.extender_coexistence("keep", "", "", "", []),
            "scheduler_extender_existing must be one of fail|adopt, got 'keep'",
        ),
        (
            lambda: c.extender_coexistence("fail", "", "", "", "x"),
            "extenders must be a list of the module's extender definitions",
        ),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(c.CoexistenceError) as info:
        call()
    assert str(info.value) == message


# --- kube-scheduler ------------------------------------------------------------------------------
MANIFEST_PATH = "/etc/kubernetes/manifests/kube-scheduler.yaml"
BMRA_CONFIG_PATH = "/etc/kubernetes/kubescheduler-config.yaml"
BMRA_URL = "https://telemetry-aware-scheduling.kube-system.svc.cluster.local:9001"
OUR_URL = "https://tas-service.telemetry-aware-scheduling.svc.cluster.local:9001"


def manifest(flags=(), args=None, record=None):
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {
            "containers": [
                {
                    "name": "kube-scheduler",
                    "command": ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", *flags],
                }
            ]
        },
    }
    if args is not None:
        doc["spec"]["containers"][0]["args"] = args
    if record is not None:
        doc["metadata"]["annotations"] = {"poweraware.k8s/scheduler-extender": json.dumps(record)}
    return json.dumps(doc)


# As BMRA's create-scheduler-config.yml leaves kubespray's file (blockinfile, TLS on).
BMRA_CONFIG = (
    """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
# BEGIN ANSIBLE MANAGED BLOCK
"""
    + tas_extenders_block(
        BMRA_URL, "/host/certs/tas/tls-extender-client.pem", "/host/certs/tas/tls-extender-client-key.pem"
    )
    + "# END ANSIBLE MANAGED BLOCK\n"
)
OUR_TAS = {
    "url_prefix": OUR_URL,
    "filter_verb": "scheduler/filter",
    "managed_resources": [{"name": "telemetry/scheduling", "ignored_by_scheduler": True}],
}
OTHER = {
    "url_prefix": "https://power.example.svc:9443",
    "filter_verb": "filter",
    "managed_resources": [{"name": "example.com/power"}],
}
BMRA_MANIFEST = manifest([f"--config={BMRA_CONFIG_PATH}"])

SCHED_FAIL = (
    f"scheduler_extender: kube-scheduler ({MANIFEST_PATH}) already loads an extender that is not ours: our extender {OUR_URL}: "
    f"the existing extenders[0] (urlPrefix {BMRA_URL}) in {BMRA_CONFIG_PATH} manages telemetry/scheduling, not added by poweraware.k8s; "
    "kube-scheduler refuses a resource managed by two extenders. Nothing was changed. Set scheduler_extender_existing=adopt to keep "
    "the existing extender and not add ours, or remove it first (scheduler_extender_existing=fail, the default, stops here)."
)
SCHED_KEPT = f"extenders[0] (urlPrefix {BMRA_URL}) in {BMRA_CONFIG_PATH} manages telemetry/scheduling"
SCHED_ADOPT = (
    f"scheduler_extender: keeping the existing {SCHED_KEPT} (scheduler_extender_existing=adopt): our extender {OUR_URL} is not added; "
    "nothing else to register, kube-scheduler is left as it is."
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BMRA_MANIFEST, {"path": BMRA_CONFIG_PATH, "flag": "--config"}),
        (manifest(["--config", "/etc/a.yaml"]), {"path": "/etc/a.yaml", "flag": "--config"}),
        (manifest(args=["--policy-config-file=/etc/p.json"]), {"path": "/etc/p.json", "flag": "--policy-config-file"}),
        # kubelet runs command then args as one argv: the value of a flag ending command is args[0]
        (manifest(["--config"], args=["/etc/split.yaml"]), {"path": "/etc/split.yaml", "flag": "--config"}),
        (manifest(), {"path": "", "flag": ""}),
        # command not a list of strings: kube_scheduler_extender refuses the manifest itself
        (
            json.dumps({"kind": "Pod", "spec": {"containers": [{"command": "kube-scheduler --config=/x"}]}}),
            {"path": "", "flag": ""},
        ),
        ("", {"path": "", "flag": ""}),
        ("{not yaml", {"path": "", "flag": ""}),
        ("[1, 2]", {"path": "", "flag": ""}),
        (json.dumps({"kind": "Pod", "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}), {"path": "", "flag": ""}),
    ],
)
def test_scheduler_config_path(text, expected):
    assert c.scheduler_config_path(text) == expected


@pytest.mark.parametrize("choice", c.CHOICES)
def test_scheduler_nothing_there_registers(choice):
    for text, config in (
        (manifest(), ""),
        (BMRA_MANIFEST, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"),
    ):
        decision = c.extender_coexistence(choice, text, config, BMRA_CONFIG_PATH, [OUR_TAS], MANIFEST_PATH)
        assert decision == {"action": "register", "extenders": [OUR_TAS], "message": "", "kept": []}


@pytest.mark.parametrize("choice", c.CHOICES)
def test_scheduler_ours_there_registers(choice):
    ours = manifest([f"--config={BMRA_CONFIG_PATH}"], record={"v": 1, "extenders": [OUR_URL + "/"]})
    config = f"extenders:\n  - urlPrefix: {OUR_URL}\n    managedResources: [{{name: telemetry/scheduling}}]\n"
    decision = c.extender_coexistence(choice, ours, config, BMRA_CONFIG_PATH, [OUR_TAS], MANIFEST_PATH)
    assert decision == {"action": "register", "extenders": [OUR_TAS], "message": "", "kept": []}


def test_scheduler_bmra_extender_fail():
    decision = c.extender_coexistence("fail", BMRA_MANIFEST, BMRA_CONFIG, BMRA_CONFIG_PATH, [OUR_TAS], MANIFEST_PATH)
    assert decision == {"action": "fail", "extenders": [], "message": SCHED_FAIL, "kept": [SCHED_KEPT]}


def test_scheduler_bmra_extender_adopt():
    decision = c.extender_coexistence("adopt", BMRA_MANIFEST, BMRA_CONFIG, BMRA_CONFIG_PATH, [OUR_TAS], MANIFEST_PATH)
    assert decision == {"action": "adopt", "extenders": [], "message": SCHED_ADOPT, "kept": [SCHED_KEPT]}


def test_scheduler_adopt_keeps_our_other_extenders():
    decision = c.extender_coexistence(
        "adopt", BMRA_MANIFEST, BMRA_CONFIG, BMRA_CONFIG_PATH, [OUR_TAS, OTHER], MANIFEST_PATH
    )
    assert decision["extenders"] == [OTHER]
    assert decision["message"] == (
        f"scheduler_extender: keeping the existing {SCHED_KEPT} (scheduler_extender_existing=adopt): our extender {OUR_URL} is not added."
    )


def test_scheduler_same_url_is_in_the_way():
    config = f"extenders:\n  - urlPrefix: {OUR_URL}/\n    filterVerb: filter\n"
    decision = c.extender_coexistence("fail", BMRA_MANIFEST, config, BMRA_CONFIG_PATH, [OUR_TAS])
    assert decision["kept"] == [f"extenders[0] (urlPrefix {OUR_URL}/) in {BMRA_CONFIG_PATH} has the same urlPrefix"]
    assert decision["message"].startswith(
        "scheduler_extender: kube-scheduler already loads an extender that is not ours: our extender "
    )


def test_scheduler_legacy_policy_and_unrelated_extenders():
    policy = json.dumps(
        {
            "kind": "Policy",
            "apiVersion": "v1",
            "extenders": [{"urlPrefix": BMRA_URL, "managedResources": [{"name": "telemetry/scheduling"}]}, "junk"],
        }
    )
    decision = c.extender_coexistence(
        "fail", manifest(["--policy-config-file=/etc/p.json"]), policy, "/etc/p.json", [OUR_TAS]
    )
    assert decision["action"] == "fail" and decision["kept"] == [
        f"extenders[0] (urlPrefix {BMRA_URL}) in /etc/p.json manages telemetry/scheduling"
    ]
    gas = "extenders:\n  - urlPrefix: https://gpu-aware-scheduling.kube-system.svc.cluster.local:9001\n    managedResources: [{name: gpu.intel.com/i915}]\n"
    assert c.extender_coexistence("fail", BMRA_MANIFEST, gas, BMRA_CONFIG_PATH, [OUR_TAS])["action"] == "register"
    assert c.extender_coexistence("fail", BMRA_MANIFEST, "{broken", "", [OUR_TAS])["action"] == "register"
    no_url = "extenders:\n  - managedResources: [{name: telemetry/scheduling}]\n"
    kept = c.extender_coexistence("adopt", BMRA_MANIFEST, no_url, "", [OUR_TAS])["kept"]
    assert kept == ["extenders[0] (urlPrefix (none)) in the scheduler configuration manages telemetry/scheduling"]


# --- the filters ---------------------------------------------------------------------------------
FILTERS = FilterModule().filters()


def test_filters_are_registered():
    assert set(FILTERS) == {
        "coexistence",
        "scheduler_config_path",
        "scheduler_extender_coexistence",
        "removal_plan",
        "namespace_removal_plan",
    }


def test_filters_return_the_decisions():
    expected, _ours, theirs = CASES["collectd"]
    assert FILTERS["coexistence"](theirs, "collectd", "adopt", expected)["message"] == ADOPT["collectd"]
    assert FILTERS["coexistence"](None, "tas")["action"] == "deploy"
    assert FILTERS["scheduler_config_path"](BMRA_MANIFEST)["path"] == BMRA_CONFIG_PATH
    assert FILTERS["scheduler_config_path"](None)["path"] == ""
    decision = FILTERS["scheduler_extender_coexistence"](
        [OUR_TAS], "fail", BMRA_MANIFEST, BMRA_CONFIG, BMRA_CONFIG_PATH, MANIFEST_PATH
    )
    assert decision["message"] == SCHED_FAIL


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: FILTERS["coexistence"]([], "collectd", "yes"),
            "coexistence: collectd_existing must be one of fail|adopt, got 'yes'",
        ),
        (lambda: FILTERS["scheduler_config_path"](5), "scheduler_config_path: the manifest must be text"),
        (
            lambda: FILTERS["scheduler_extender_coexistence"]([], "fail", b"x"),
            "scheduler_extender_coexistence: manifest_text must be text",
        ),
        (
            lambda: FILTERS["scheduler_extender_coexistence"]([], "no"),
            "scheduler_extender_coexistence: scheduler_extender_existing must be one of fail|adopt, got 'no'",
        ),
    ],
)
def test_filter_errors(call, message):
    with pytest.raises(AnsibleFilterError) as info:
        call()
    assert str(info.value) == message


def test_manifest_text_as_a_str_subclass_is_read():
    """Ansible passes filters tagged str subclasses, which libyaml's loader refuses as text: our own
    registration must still be recognised (it was taken for a foreign extender on every re-run)."""

    class Tagged(str):
        pass

    manifest = Tagged(
        "metadata:\n  annotations:\n"
        '    poweraware.k8s/scheduler-extender: \'{"extenders": ["https://tas.example:9001"]}\'\n'
    )
    config = "extenders:\n- urlPrefix: https://tas.example:9001\n  managedResources:\n  - name: telemetry/scheduling\n"
    ours = [{"url_prefix": "https://tas.example:9001", "managed_resources": [{"name": "telemetry/scheduling"}]}]
    result = c.extender_coexistence("fail", manifest, config, "/etc/kubernetes/config.yaml", ours)
    assert result == {"action": "register", "extenders": ours, "message": "", "kept": []}
    # the same configuration under a manifest without our record: a foreign extender in the way
    assert c.extender_coexistence("fail", Tagged("metadata: {}\n"), config, "c.yaml", ours)["action"] == "fail"


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
OUR_TAS_ENTRY = {"url_prefix": "https://tas.ours:9001", "managed_resources": [{"name": "telemetry/scheduling"}]}
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
    decision = c.extender_coexistence("fail", "", THREE, CONFIG, [OUR_TAS_ENTRY, OUR_GPU], MANIFEST)
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
    decision = c.extender_coexistence("adopt", "", THREE, CONFIG, [OUR_TAS_ENTRY, OUR_GPU], MANIFEST)
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
    decision = c.extender_coexistence("fail", "", config, CONFIG, ["junk", OUR_TAS_ENTRY, None], MANIFEST)
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
    decision = c.extender_coexistence("fail", record_manifest(raw), config, CONFIG, [OUR_TAS_ENTRY])
    assert decision["action"] == "fail" and decision["kept"] == [HIT_TAS]


def test_a_record_whose_extenders_is_a_string_claims_no_extender():
    """A damaged record (``extenders`` a string) is not read letter by letter: an entry whose urlPrefix
    is one of its letters is still someone else's."""
    config = "extenders:\n  - urlPrefix: h\n    managedResources: [{name: telemetry/scheduling}]\n"
    decision = c.extender_coexistence(
        "fail", record_manifest('{"extenders": "https"}'), config, CONFIG, [OUR_TAS_ENTRY]
    )
    assert decision["action"] == "fail"
    assert decision["kept"] == [f"extenders[0] (urlPrefix h) in {CONFIG} manages telemetry/scheduling"]


def test_an_entry_without_url_is_ours_when_the_record_lists_the_empty_url():
    """The rule: an entry is ours when its urlPrefix (absent: empty) is in the manifest's record."""
    config = "extenders:\n  - managedResources: [{name: telemetry/scheduling}]\n"
    decision = c.extender_coexistence("fail", record_manifest('{"extenders": [""]}'), config, CONFIG, [OUR_TAS_ENTRY])
    assert decision == {"action": "register", "extenders": [OUR_TAS_ENTRY], "message": "", "kept": []}
    decision = c.extender_coexistence(
        "fail", record_manifest('{"extenders": ["None"]}'), config, CONFIG, [OUR_TAS_ENTRY]
    )
    assert decision["kept"] == [f"extenders[0] (urlPrefix (none)) in {CONFIG} manages telemetry/scheduling"]


def test_resources_without_a_text_name_are_not_compared():
    config = "extenders:\n  - urlPrefix: https://x.example\n    managedResources: [{ignoredByScheduler: true}, {name: 5}, telemetry/scheduling]\n"
    ours = {"url_prefix": TAS_URL, "managed_resources": [{"name": "telemetry/scheduling"}, "5", {"name": None}]}
    assert c.extender_coexistence("fail", "", config, CONFIG, [ours])["action"] == "register"


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
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
