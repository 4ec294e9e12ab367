"""The scheduling half of the cluster stack against the lab: roles nfd, tas, tas_policy, power_demo.

The roles are the session's site converge's (conftest.py; its re-run and check mode, which prove
them idempotent and certificates not re-issued, are test_site.py's); the tests that change
parameters run playbooks/cluster_stack.yml with the tags of these roles only. The real
kube-apiserver judges every object; kwok nodes run the pods (Running without containers). Checked
here: objects accepted and ready, NFD workers on every worker and nowhere else, the TAS
certificates (chain, names, usages, 0600 keys), the extender's placement for the cluster's
version, RBAC that is as narrow as claimed (SubjectAccessReview), node patching granted only with a
policy that labels nodes, the policy as parameterised, bad policies refused before anything is
applied, a pending change named by check mode, the demo's HPA.
"""

from __future__ import annotations

import json
import stat

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.descheduler import DIGESTS as DESCHEDULER_DIGESTS
from ansible_run import REPO_ROOT, run_playbook
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from poweraware_testing import TAS_README_POLICY as README_POLICY
from poweraware_testing import wait_until

# Each test may wait for whole playbook runs (the site fixture runs three).
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(1800)]

PLAYBOOK = REPO_ROOT / "playbooks" / "cluster_stack.yml"
TAGS = ["nfd", "tas", "tas_policy"]
NFD_NS = "node-feature-discovery"
TAS_NS = "telemetry-aware-scheduling"
POLICY = "power-sensitive-scheduling-policy"


def run(lab, tags=None, extra_vars=None, check=False):
    return run_playbook(
        PLAYBOOK,
        inventory=lab.inventory / "hosts.yml",
        tags=tags or TAGS,
        extra_vars=extra_vars,
        check=check,
        timeout=900,
    )


@pytest.fixture(scope="module")
def converged(site):
    """The session's site converge (conftest.py), which applies these roles with everything else;
    its re-run and check mode (test_site.py) prove them idempotent."""
    result = site["converge"]
    assert result.rc == 0 and result.failed == 0, result
    return result


def pki_dir(lab):
    return lab.node_disk(lab.control_plane_node) / "etc" / "kubernetes" / "pki" / "tas"


def can(api, service_account, verb, resource, group="", namespace=None, subresource=None):
    from kubernetes import client

    ns, name = service_account.split("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{ns}:{name}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=resource, namespace=namespace, subresource=subresource
            ),
        )
    )
    return api["authz"].create_subject_access_review(review).status.allowed


# --- NFD -------------------------------------------------------------------------------------------
def test_nfd_crds_established(converged, api):
    for name in ("nodefeatures", "nodefeaturegroups", "nodefeaturerules"):
        crd = api["ext"].read_custom_resource_definition(f"{name}.nfd.k8s-sigs.io")
        conditions = {c.type: c.status for c in crd.status.conditions}
        assert conditions.get("Established") == "True", name


def test_nfd_master_available(converged, api):
    deployment = api["apps"].read_namespaced_deployment("nfd-master", NFD_NS)
    assert deployment.status.available_replicas == 1
    assert deployment.spec.template.spec.containers[0].image == (
        "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"
        "@sha256:2fa1c99ad09bdf2c8ad97706a4ad2fd548c84d5ecd70ba32a6152c667b96c4d2"
    )


def test_nfd_worker_on_every_worker_and_not_on_the_control_plane(converged, api, lab):
    pods = api["core"].list_namespaced_pod(NFD_NS, label_selector="app.kubernetes.io/component=worker").items
    assert sorted(p.spec.node_name for p in pods) == sorted(lab.worker_nodes)
    assert all(p.status.phase == "Running" for p in pods), [(p.metadata.name, p.status.phase) for p in pods]
    ds = api["apps"].read_namespaced_daemon_set("nfd-worker", NFD_NS)
    assert ds.status.number_ready == ds.status.desired_number_scheduled == len(lab.worker_nodes)


def test_nfd_power_rule_accepted(converged, api):
    rule = api["custom"].get_cluster_custom_object(
        "nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules", "poweraware-power-features"
    )
    labels = [label for r in rule["spec"]["rules"] for label in r["labels"]]
    assert labels == [
        "feature.node.kubernetes.io/poweraware-rapl",
        "feature.node.kubernetes.io/poweraware-pstate-active",
    ]


def test_nfd_labels_the_workers_from_their_own_features(converged, api, lab):
    """NFD runs for real: each nfd-worker (a process on its node, as the image's USER 65534) reads its
    node's features into a NodeFeature object named after the node, and nfd-master labels the node
    from it, with NFD's own labels (the P-state driver from the node's sysfs) and with the role's
    power NodeFeatureRule (intel_pstate in active mode, the lab's CPUs). The RAPL rule matches on
    loaded kernel modules, which this machine's kernel does not list (no /proc/modules), so the lab
    cannot show that label (docs/lab.md)."""
    core, custom = api["core"], api["custom"]
    pods = core.list_namespaced_pod(NFD_NS, label_selector="app.kubernetes.io/name=node-feature-discovery").items
    for p in pods:
        (status,) = p.status.container_statuses
        assert status.ready and status.state.running, (p.metadata.name, status)
        assert status.state.running.started_at, p.metadata.name  # a process the lab's kubelet started
    features = custom.list_namespaced_custom_object("nfd.k8s-sigs.io", "v1alpha1", NFD_NS, "nodefeatures")["items"]
    by_node = {f["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"]: f for f in features}
    assert sorted(by_node) == sorted(lab.worker_nodes), sorted(by_node)
    for node, feature in by_node.items():
        pstate = feature["spec"]["features"]["attributes"]["cpu.pstate"]["elements"]
        assert pstate["status"] == "active", (node, pstate)

    def labelled():
        found = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
        return (
            all(
                found[n].get("feature.node.kubernetes.io/poweraware-pstate-active") == "true"
                and found[n].get("feature.node.kubernetes.io/cpu-pstate.status") == "active"
                for n in lab.worker_nodes
            )
            and found
        )

    found = wait_until(labelled, 120, "nfd-master labelling every worker from its NodeFeature", interval=2)
    assert "feature.node.kubernetes.io/poweraware-pstate-active" not in found[lab.control_plane_node]
    nfd = {
        n: (
            sum(k.startswith("feature.node.kubernetes.io/") for k in found[n]),
            {k: v for k, v in found[n].items() if "pstate" in k or "poweraware" in k},
        )
        for n in lab.worker_nodes
    }
    print(f"PROOF NFD labels from the workers' own features (count, power ones): {nfd}")


def test_nfd_rbac_is_narrow(converged, api):
    worker, master = f"{NFD_NS}/nfd-worker", f"{NFD_NS}/nfd-master"
    assert can(api, worker, "create", "nodefeatures", "nfd.k8s-sigs.io", NFD_NS)
    assert not can(api, worker, "create", "nodefeatures", "nfd.k8s-sigs.io", "default")
    assert not can(api, worker, "patch", "nodes")
    assert not can(api, worker, "list", "secrets", namespace=NFD_NS)
    assert can(api, master, "patch", "nodes")
    assert can(api, master, "watch", "nodefeaturerules", "nfd.k8s-sigs.io")
    assert not can(api, master, "delete", "nodes")
    assert not can(api, master, "create", "nodefeatures", "nfd.k8s-sigs.io", NFD_NS)
    assert not can(api, master, "get", "secrets", namespace=NFD_NS)


# --- TAS -------------------------------------------------------------------------------------------
def test_tas_certificates(converged, lab):
    pki = pki_dir(lab)
    for key in ("ca.key", "tls.key"):
        assert stat.S_IMODE((pki / key).stat().st_mode) == 0o600, key
    # no client pair here: kube-scheduler's is the scheduler_extender role's (docs/security.md)
    assert not (pki / "client.key").exists() and not (pki / "client.crt").exists()
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    server = x509.load_pem_x509_certificate((pki / "tls.crt").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert server.issuer == ca.subject
    ca.public_key().verify(server.signature, server.tbs_certificate_bytes, ec.ECDSA(server.signature_hash_algorithm))
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert f"tas-service.{TAS_NS}.svc" in sans and f"tas-service.{TAS_NS}.svc.cluster.local" in sans
    server_eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(server_eku) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_tas_secret_holds_the_files(converged, api, lab):
    import base64

    secret = api["core"].read_namespaced_secret("extender-secret", TAS_NS)  # the name TAS's docs use
    assert secret.type == "kubernetes.io/tls"
    for key, name in (("tls.crt", "tls.crt"), ("tls.key", "tls.key"), ("ca.crt", "ca.crt")):
        assert base64.b64decode(secret.data[key]) == (pki_dir(lab) / name).read_bytes(), key


def test_tas_deployment_on_the_control_plane(converged, api, lab):
    deployment = api["apps"].read_namespaced_deployment("telemetry-aware-scheduling", TAS_NS)
    assert deployment.status.available_replicas == 1
    # TAS's docs' command finds it: kubectl logs -l app=tas -n telemetry-aware-scheduling
    (pod,) = api["core"].list_namespaced_pod(TAS_NS, label_selector="app=tas").items
    assert pod.metadata.labels["app.kubernetes.io/name"] == "telemetry-aware-scheduling"
    spec = deployment.spec.template.spec
    container = spec.containers[0]
    assert container.image == "docker.io/intel/telemetry-aware-scheduling:0.7.0"
    args = container.command
    assert args[0] == "/extender" and "--port=9001" in args and "--cacert=/tas/cert/ca.crt" in args
    assert any(a.startswith("--syncPeriod=") for a in args)
    # The lab runs Kubernetes >= 1.24: the control-plane label, not the old master one.
    assert lab.k8s_version.startswith("v1.")
    assert [t.key for t in spec.tolerations] == ["node-role.kubernetes.io/control-plane"]
    term = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms[0]
    assert term.match_expressions[0].key == "node-role.kubernetes.io/control-plane"
    pods = api["core"].list_namespaced_pod(TAS_NS, label_selector="app.kubernetes.io/name=telemetry-aware-scheduling")
    assert [p.spec.node_name for p in pods.items] == [lab.control_plane_node]


def test_tas_service(converged, api):
    service = api["core"].read_namespaced_service("tas-service", TAS_NS)
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(9001, "https")]


def test_tas_rbac_is_narrow(converged, api):
    sa = f"{TAS_NS}/telemetry-aware-scheduling"
    assert can(api, sa, "list", "taspolicies", "telemetry.intel.com", "default")
    assert can(api, sa, "update", "taspolicies", "telemetry.intel.com", "default", subresource="status")
    assert can(api, sa, "get", "nodes", "custom.metrics.k8s.io")
    assert can(api, sa, "list", "nodes")
    # The power policy neither deschedules nor labels: TAS may not patch nodes.
    assert not can(api, sa, "patch", "nodes")
    assert can(api, sa, "list", "pods", namespace="default")
    assert not can(api, sa, "update", "taspolicies", "telemetry.intel.com", "default")
    assert not can(api, sa, "delete", "nodes")
    assert not can(api, sa, "delete", "pods", namespace="default")
    assert not can(api, sa, "get", "secrets", namespace=TAS_NS)


def test_taspolicy_crd_is_the_upstream_schema(converged, api):
    crd = api["ext"].read_custom_resource_definition("taspolicies.telemetry.intel.com")
    crd = api["ext"].api_client.sanitize_for_serialization(crd)
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    strategy = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["strategies"]
    rule = strategy["additionalProperties"]["properties"]["rules"]["items"]
    assert rule["properties"]["operator"]["enum"] == ["Equals", "LessThan", "GreaterThan"]
    assert rule["properties"]["metricname"]["pattern"] == "^[a-zA-Z0-9_-]+$"
    assert rule["properties"]["target"] == {"type": "integer", "format": "int64"}


# --- TAS policy ------------------------------------------------------------------------------------
def test_power_policy_present(converged, api):
    policy = api["custom"].get_namespaced_custom_object(
        "telemetry.intel.com", "v1alpha1", "default", "taspolicies", POLICY
    )
    assert policy["spec"]["strategies"] == {
        "dontschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": 60}]},
        "scheduleonmetric": {"rules": [{"metricname": "package_power_avg", "operator": "LessThan"}]},
    }


# Each refusal's wording is the unit tests' (tests/unit/plugins/module_utils/scheduler/test_tas_policy.py,
# tests/unit/plugins/filter/test_tas_policy_filters.py); here the role's wiring: one run with several bad
# parameters names every problem at once and applies nothing.
BAD_POLICY = {
    "tas_policy_metric": "node_package_power_avg",
    "tas_policy_dontschedule_operator": "GreaterThen",
    "tas_policy_extra_strategies": {
        "deschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": "80%"}]},
        "dont-schedule": {"rules": []},
    },
}
BAD_POLICY_MESSAGES = (
    "custom.metrics.k8s.io serves it as 'package_power_avg'",
    "operator 'GreaterThen' is not one of",
    "got string '80%', which is not a whole number",
    "unknown strategy 'dont-schedule'",
)


def test_bad_policy_rejected_before_apply(converged, api, lab):
    from kubernetes.client.rest import ApiException

    name = "bad-policy"
    result = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_name": name, **BAD_POLICY})
    assert result.rc != 0 and result.failed == 1, result
    assert "The TAS policies are invalid and none was applied" in result.stdout, result
    assert f"TASPolicy default/{name}: " in result.stdout, result
    missing = [message for message in BAD_POLICY_MESSAGES if message not in result.stdout]
    assert not missing, (missing, result)
    assert "TASK [poweraware.k8s.tas_policy : Apply the TAS policies]" not in result.stdout, result
    with pytest.raises(ApiException) as err:
        api["custom"].get_namespaced_custom_object("telemetry.intel.com", "v1alpha1", "default", "taspolicies", name)
    assert err.value.status == 404


def test_policy_parameters_reach_the_object(converged, api, lab):
    name = "param-policy"
    try:
        result = run(
            lab,
            tags=["tas_policy"],
            extra_vars={
                "tas_policy_name": name,
                "tas_policy_max_tdp_percent": 75,
                "tas_policy_deschedule_enabled": True,
            },
        )
        assert result.rc == 0, result
        policy = api["custom"].get_namespaced_custom_object(
            "telemetry.intel.com", "v1alpha1", "default", "taspolicies", name
        )
        assert policy["spec"]["strategies"]["dontschedule"]["rules"][0]["target"] == 75
        assert policy["spec"]["strategies"]["deschedule"]["rules"][0] == {
            "metricname": "package_power_avg",
            "operator": "GreaterThan",
            "target": 80,
        }
        # deschedule labels violating nodes: TAS may patch nodes while this policy uses it
        assert can(api, f"{TAS_NS}/telemetry-aware-scheduling", "patch", "nodes")
        binding = api["rbac"].read_cluster_role_binding(f"poweraware:tas-policy:default:{name}")
        assert [(s.kind, s.namespace, s.name) for s in binding.subjects] == [
            ("ServiceAccount", TAS_NS, "telemetry-aware-scheduling")
        ]
        # turning deschedule off withdraws it, as removing the policy does
        result = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_name": name, "tas_policy_max_tdp_percent": 75})
        assert result.rc == 0, result
        assert not can(api, f"{TAS_NS}/telemetry-aware-scheduling", "patch", "nodes")
    finally:
        removed = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_name": name, "tas_policy_state": "absent"})
        assert removed.rc == 0, removed
    names = {r.metadata.name for r in api["rbac"].list_cluster_role().items}
    names |= {b.metadata.name for b in api["rbac"].list_cluster_role_binding().items}
    assert not {n for n in names if n.startswith("poweraware:tas-policy:")}


def _with_metric(policy: dict, metric: str, labeling_target: int) -> dict:
    out = json.loads(json.dumps(policy))
    for strategy in out["spec"]["strategies"].values():
        for rule in strategy["rules"]:
            rule["metricname"] = metric
    out["spec"]["strategies"]["labeling"]["rules"][0]["target"] = labeling_target
    return out


# make lifecycle, not make test, for make test's time (59 s)
@pytest.mark.lifecycle
def test_several_policies_in_one_run_and_the_readme_policy(converged, api, lab):
    """tas_policy_policies: the TAS README's policy as written is refused with the exact renaming and
    nothing is applied; renamed to a metric the lab serves, it is applied next to the power policy,
    TAS's labeling strategy labels the node above its target (the per-policy node RBAC at work), and
    absent removes both policies and the grant."""
    from kubernetes.client.rest import ApiException

    core, custom = api["core"], api["custom"]
    namespace, name = "health-metric-demo", "scheduling-policy"
    own = "readme-run-power"  # the role's own policy in these runs (the site's stays as it is)

    def policies():
        found = custom.list_cluster_custom_object("telemetry.intel.com", "v1alpha1", "taspolicies")["items"]
        return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in found}

    before = policies()
    refused = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_name": own, "tas_policy_policies": [README_POLICY]})
    assert refused.rc != 0, refused
    assert (
        f"TASPolicy {namespace}/{name}: spec.strategies.labeling.rules[0].metricname 'node_metric' is a Prometheus "
        "series name: the Prometheus Adapter strips 'node_', so custom.metrics.k8s.io serves it as 'metric'; use "
        "that name"
    ) in refused.stdout, refused
    assert policies() == before, "the refused run applied something"

    power = lab.node_custom_metric("package_power_avg")
    high, low = max(power, key=power.get), min(power, key=power.get)
    assert power[high] - power[low] > 8, power  # the lab's servers differ (docs/lab.md)
    target = int((power[high] + power[low]) / 2)
    readme = _with_metric(README_POLICY, "package_power_avg", target)
    label = f"telemetry.aware.scheduling.{name}/label1"
    try:
        applied = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_name": own, "tas_policy_policies": [readme]})
        assert applied.rc == 0, applied
        assert {("default", own), (namespace, name)} <= policies()
        stored = custom.get_namespaced_custom_object("telemetry.intel.com", "v1alpha1", namespace, "taspolicies", name)
        assert stored["spec"] == readme["spec"]  # as written
        assert can(api, f"{TAS_NS}/telemetry-aware-scheduling", "patch", "nodes")  # labeling, deschedule
        labelled = wait_until(
            lambda: {n.metadata.name for n in core.list_node().items if n.metadata.labels.get(label) == "foo"},
            120,
            f"TAS labelling {high} ({power[high]:.1f} % of TDP > {target}) {label}=foo",
            interval=2,
        )
        assert high in labelled and low not in labelled, (labelled, power, target)
        print(f"PROOF README policy: {label}=foo on {sorted(labelled)} (package_power_avg {power}, target {target})")
    finally:
        absent = {"tas_policy_name": own, "tas_policy_policies": [readme], "tas_policy_state": "absent"}
        removed = run(lab, tags=["tas_policy"], extra_vars=absent)
        assert removed.rc == 0, removed
        core.delete_namespace(namespace)
    # TAS removed its labels (its Cleanup) while it still could: the role withdrew the grant after
    left = [
        (n.metadata.name, k)
        for n in core.list_node().items
        for k in n.metadata.labels
        if k.startswith(f"telemetry.aware.scheduling.{name}/") or k == name
    ]
    assert not left, left
    assert not {(namespace, name), ("default", own)} & policies() and ("default", POLICY) in policies()
    with pytest.raises(ApiException):
        api["rbac"].read_cluster_role_binding(f"poweraware:tas-policy:{namespace}:{name}")
    assert not can(api, f"{TAS_NS}/telemetry-aware-scheduling", "patch", "nodes")


# --- descheduler -----------------------------------------------------------------------------------
# make lifecycle, not make test, for make test's time (90 s)
@pytest.mark.lifecycle
def test_the_descheduler_moves_a_pod_off_a_violating_node(converged, api, lab):
    """TAS's deschedule strategy with the real descheduler (v0.36.0, the release the role chooses for
    the lab's Kubernetes 1.36): a pod that may run on the most and the least loaded worker, preferring
    the most loaded, with the required affinity `<policy> NotIn [violating]`, runs there; a policy
    whose deschedule target lies between the two workers' power makes TAS label the loaded one
    violating, and the descheduler, deployed by the same run because the policy deschedules, evicts
    the pod, whose replacement is scheduled on the other worker. A policy the descheduler would
    crash-loop on is refused before anything is applied; the run is idempotent; absent removes it."""
    from kubernetes.client.rest import ApiException

    core, apps, rbac = api["core"], api["apps"], api["rbac"]
    own, namespace = "deschedule-proof-power", "deschedule-proof"

    refused = run(
        lab,
        tags=["descheduler"],
        extra_vars={
            "poweraware_enable_descheduler": True,
            "descheduler_policy": {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [{"name": "p", "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}}],
            },
        },
    )
    assert refused.rc != 0, refused
    assert (
        "Nothing was changed: descheduler_policy: profile 'p': RemoveDuplicates is enabled in plugins.balance "
        "but has no pluginConfig entry"
    ) in refused.stdout, refused
    with pytest.raises(ApiException):
        apps.read_namespaced_deployment("descheduler", "kube-system")

    power = wait_until(lambda: lab.node_custom_metric("package_power_avg"), 120, "package_power_avg served")
    workers = {n: power[n] for n in lab.worker_nodes}
    high, low = max(workers, key=workers.get), min(workers, key=workers.get)
    assert workers[high] - workers[low] > 8, workers  # the lab's servers differ (docs/lab.md)
    target = int((workers[high] + workers[low]) / 2)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [high, low]},
                            {"key": own, "operator": "NotIn", "values": ["violating"]},
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [high]}]
                    },
                }
            ],
        }
    }
    labels = {"app": "deschedule-proof"}
    core.create_namespace({"metadata": {"name": namespace}})
    run_vars = {
        "tas_policy_name": own,
        "tas_policy_deschedule_enabled": True,
        "tas_policy_deschedule_tdp_percent": target,
        "descheduler_interval": "5s",
    }
    try:
        apps.create_namespaced_deployment(
            namespace,
            {
                "metadata": {"name": "workload", "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "affinity": affinity,
                            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
                        },
                    },
                },
            },
        )

        def pods():
            return [
                p
                for p in core.list_namespaced_pod(namespace, label_selector="app=deschedule-proof").items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp
            ]

        (first,) = wait_until(lambda: len(found := pods()) == 1 and found, 60, "the workload pod running")
        assert first.spec.node_name == high, (first.spec.node_name, workers)

        applied = run(lab, tags=["tas_policy", "descheduler"], extra_vars=run_vars)
        assert applied.rc == 0 and applied.failed == 0, applied
        (deployment,) = [
            d for d in apps.list_namespaced_deployment("kube-system").items if d.metadata.name == "descheduler"
        ]
        (container,) = deployment.spec.template.spec.containers
        # the release for the lab's 1.36, pinned by the digest its maintainers published
        assert container.image == f"registry.k8s.io/descheduler/descheduler:v0.36.0@{DESCHEDULER_DIGESTS['v0.36.0']}"
        (running,) = core.list_namespaced_pod("kube-system", label_selector="app.kubernetes.io/name=descheduler").items
        assert running.status.phase == "Running" and all(c.ready for c in running.status.container_statuses)
        # least privilege: it evicts, it reads no Secrets and writes no nodes
        sa = "kube-system/descheduler"
        assert can(api, sa, "create", "pods", subresource="eviction")
        assert not can(api, sa, "get", "secrets", namespace="kube-system")
        assert not can(api, sa, "patch", "nodes")
        policy = api["networking"].read_namespaced_network_policy("descheduler", "kube-system")
        assert policy.spec.policy_types == ["Ingress", "Egress"] and not policy.spec.ingress
        assert policy.spec.egress  # the API server only (docs/security.md)

        def moved():
            now = pods()
            return len(now) == 1 and now[0].metadata.uid != first.metadata.uid and now[0].spec.node_name and now[0]

        second = wait_until(moved, 180, f"the pod evicted from {high} and its replacement running", interval=2)
        assert second.spec.node_name == low, (second.spec.node_name, workers, target)
        assert core.read_node(high).metadata.labels.get(own) == "violating"
        assert core.read_node(low).metadata.labels.get(own) != "violating"
        events = [
            e.message
            for e in core.list_namespaced_event(namespace).items
            if e.involved_object.uid == first.metadata.uid and "sigs.k8s.io/descheduler" in (e.message or "")
        ]
        assert f"pod eviction from {high} node by sigs.k8s.io/descheduler" in events, events

        again = run(lab, tags=["tas_policy", "descheduler"], extra_vars=run_vars)
        assert again.rc == 0 and again.changed == 0, again
        print(
            f"PROOF descheduler: {first.metadata.name} on {high} ({workers[high]:.1f} % of TDP > {target}) evicted by "
            f"the descheduler ({events[0]!r}); replacement {second.metadata.name} on {low} ({workers[low]:.1f} %)"
        )
    finally:
        removed = run(
            lab,
            tags=["tas_policy", "descheduler"],
            extra_vars={
                **run_vars,
                "tas_policy_state": "absent",
                "poweraware_enable_descheduler": True,
                "descheduler_state": "absent",
            },
        )
        assert removed.rc == 0, removed
        core.delete_namespace(namespace)
    with pytest.raises(ApiException):
        apps.read_namespaced_deployment("descheduler", "kube-system")
    with pytest.raises(ApiException):
        rbac.read_cluster_role("poweraware:descheduler")
    with pytest.raises(ApiException):
        api["networking"].read_namespaced_network_policy("descheduler", "kube-system")
    assert not any(own in n.metadata.labels for n in core.list_node().items)


# --- check mode ------------------------------------------------------------------------------------
def test_check_mode_reports_a_pending_change(converged, lab, api):
    result = run(lab, tags=["tas_policy"], extra_vars={"tas_policy_max_tdp_percent": 61}, check=True)
    assert result.rc == 0 and result.changed == 1, result
    policy = api["custom"].get_namespaced_custom_object(
        "telemetry.intel.com", "v1alpha1", "default", "taspolicies", POLICY
    )
    assert policy["spec"]["strategies"]["dontschedule"]["rules"][0]["target"] == 60


# --- power demo ------------------------------------------------------------------------------------
def test_power_demo(converged, api, lab):
    """In the policy's existing namespace (default): the demo's objects, nothing changed on the
    namespace (it is not ours), the HPA of an earlier version removed, idempotent, removed with
    state=absent. The demo scaling in its own namespace is test_site.py's."""
    # the policy's namespace given: the demo follows it (with the demo on it would be power-demo)
    demo = {"poweraware_enable_power_demo": True, "tas_policy_namespace": "default"}
    labels_before = api["core"].read_namespace("default").metadata.labels
    # the HPA an earlier version of the role named after the Deployment: the run removes it
    api["autoscaling"].create_namespaced_horizontal_pod_autoscaler(
        "default",
        {
            "metadata": {
                "name": "power-hungry-application",
                "labels": {"app.kubernetes.io/managed-by": "poweraware.k8s"},
            },
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "power-hungry-application"},
                "maxReplicas": 3,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "node_package_power_watts_per_pod"},
                            "target": {"type": "AverageValue", "averageValue": "50"},
                        },
                    }
                ],
            },
        },
    )
    try:
        result = run(lab, tags=["power_demo"], extra_vars=demo)
        assert result.rc == 0 and result.changed == 2, result  # the demo applied, the old HPA removed
        hpas = [h.metadata.name for h in api["autoscaling"].list_namespaced_horizontal_pod_autoscaler("default").items]
        assert hpas == ["power-autoscaler"], hpas
        assert api["core"].read_namespace("default").metadata.labels == labels_before
        hpa = api["autoscaling"].read_namespaced_horizontal_pod_autoscaler("power-autoscaler", "default")
        (metric,) = hpa.spec.metrics
        assert metric.type == "Pods" and metric.pods.metric.name == "node_package_power_per_pod"
        assert metric.pods.target.type == "AverageValue" and metric.pods.target.average_value == "50"
        assert hpa.spec.behavior.scale_down.stabilization_window_seconds == 300  # Kubernetes' default kept
        deployment = api["apps"].read_namespaced_deployment("power-hungry-application", "default")
        template = deployment.spec.template
        assert template.metadata.labels["telemetry-policy"] == POLICY
        assert template.metadata.labels["app"] == "power-hungry-application"  # the demo's label
        # off nodes TAS's deschedule strategy labels violating (what the descheduler acts on)
        (term,) = (
            template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        )
        assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [(POLICY, "NotIn", ["violating"])]
        (container,) = template.spec.containers
        assert container.args == ["--cpu", "12", "--timeout", "300s"]  # the demo's load
        # the demo's dormant start: its init container sleeps 30 s before stress-ng starts
        (init,) = template.spec.init_containers
        assert (init.name, init.image, init.command) == (
            "init-stress-ng",
            "docker.io/library/alpine:3.17.3",
            ["sleep", "30"],
        )
        assert init.resources.limits == {"cpu": "50m", "memory": "50Mi"}
        assert container.resources.limits["telemetry/scheduling"] == "1"
        again = run(lab, tags=["power_demo"], extra_vars=demo)
        assert again.rc == 0 and again.changed == 0, again
    finally:
        removed = run(lab, tags=["power_demo"], extra_vars={**demo, "power_demo_state": "absent"})
        assert removed.rc == 0, removed
    assert not api["autoscaling"].list_namespaced_horizontal_pod_autoscaler("default").items
