# ruff: noqa: E501 - image digests and exact messages
"""Coexistence with a BMRA-provisioned cluster (issue 11 item 6, docs "Coexistence with an existing installation").

bmra_fixture makes the lab look like a cluster Intel's BMRA set up: its collectd DaemonSet
``monitoring/collectd`` (selector ``app: collectd``), the custom metrics APIService pointing at
``monitoring/prometheus-adapter``, the NFD and TAS Helm releases in ``kube-system`` with their CRDs,
and kube-scheduler loading kubespray's ``/etc/kubernetes/kubescheduler-config.yaml`` with BMRA's TAS
extender for ``telemetry/scheduling``. Then, over SSH as on any cluster:

- ``<role>_existing=fail`` (the default): each role stops before changing anything, with a message
  naming the object and the variable; the BMRA objects keep their resourceVersions, none of the
  collection's objects appear or change, and the scheduler's manifest and configuration keep their bytes;
- ``<role>_existing=adopt``: the play converges without deploying ours, says so in one line per
  component, leaves BMRA's objects and files as they are, and a second run changes nothing.
"""

from __future__ import annotations

import bmra_fixture
import pytest
from ansible_run import FAST_SCHEDULER_EXTENDER, REPO_ROOT, run_playbook

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(3600)]

CLUSTER_STACK = REPO_ROOT / "playbooks" / "cluster_stack.yml"
SCHEDULER_EXTENDER = REPO_ROOT / "playbooks" / "scheduler_extender.yml"
COMPONENT_TAGS = ["nfd", "collectd", "prometheus_adapter", "tas"]
ADOPT = {f"{component}_existing": "adopt" for component in COMPONENT_TAGS}

# role -> what its failure message must name
FAIL_NAMES = {
    "nfd": [
        "CustomResourceDefinition nodefeatures.nfd.k8s-sigs.io",
        "Deployment kube-system/node-feature-discovery-master",
        "app.kubernetes.io/managed-by=Helm (release node-feature-discovery)",
    ],
    "collectd": [
        "DaemonSet monitoring/collectd",
        "kubectl-client-side-apply",
        "its selector app=collectd",
    ],
    "prometheus_adapter": [
        "APIService v1beta1.custom.metrics.k8s.io",
        "it points at Service monitoring/prometheus-adapter, not ours (custom-metrics/prometheus-adapter)",
    ],
    "tas": [
        "CustomResourceDefinition taspolicies.telemetry.intel.com",
        "Deployment kube-system/tas-telemetry-aware-scheduling",
        "Service kube-system/telemetry-aware-scheduling",
        "app.kubernetes.io/managed-by=Helm (release tas)",
    ],
}


@pytest.fixture(scope="module")
def bmra(lab):
    lab.wait_scheduler_healthy(120)
    state = bmra_fixture.install(lab)
    try:
        yield state
    finally:
        bmra_fixture.cleanup(lab, state)


def snapshot(lab, state):
    """What must not change: BMRA's objects, the collection's objects, kube-scheduler's files."""
    config = lab.node_disk(lab.control_plane_node) / bmra_fixture.CONFIG_PATH.lstrip("/")
    return {
        "bmra": bmra_fixture.bmra_versions(lab, state),
        "ours": bmra_fixture.our_objects(lab),
        "manifest": lab.scheduler_manifest.read_bytes(),
        "config": config.read_bytes(),
    }


def assert_unchanged(before, after):
    assert after["bmra"] == before["bmra"], "BMRA's objects changed"
    assert after["ours"] == before["ours"], "the collection's objects changed or appeared"
    assert after["manifest"] == before["manifest"], "kube-scheduler's manifest changed"
    assert after["config"] == before["config"], "BMRA's scheduler configuration changed"


def test_fixture_is_bmra_shaped(lab, bmra):
    assert bmra.manifest == lab.scheduler_manifest.read_bytes()
    assert b"--config=/etc/kubernetes/kubescheduler-config.yaml" in bmra.manifest
    assert b"dnsPolicy: ClusterFirstWithHostNet" in bmra.manifest
    assert bmra_fixture.TAS_URL.encode() in bmra.config
    assert lab.scheduler_healthy(), "kube-scheduler does not run BMRA's configuration"
    assert "missing" not in bmra_fixture.bmra_versions(lab, bmra).values()


@pytest.mark.parametrize("component", COMPONENT_TAGS)
def test_fail_stops_before_changing_anything(lab, bmra, component):
    before = snapshot(lab, bmra)
    result = run_playbook(CLUSTER_STACK, inventory=lab.inventory, tags=[component], timeout=900)
    assert result.rc != 0 and result.failed >= 1, result
    out = result.stdout
    assert f"{component}: " in out and "is already installed by someone else" in out, result
    for name in FAIL_NAMES[component]:
        assert name in out, (name, out[out.find("fatal:") :][:1500])
    assert f"Set {component}_existing=adopt" in out and "Nothing was changed." in out, result
    assert_unchanged(before, snapshot(lab, bmra))


def client_pair_state(lab):
    command = "stat -c '%n %Y %s' /etc/kubernetes/pki/scheduler-extender/client.crt /etc/kubernetes/pki/scheduler-extender/client.key"
    return lab.ssh(lab.control_plane_node, command + " 2>&1 || true", sudo=True, check=False).stdout


def test_scheduler_extender_fail_stops_before_changing_anything(lab, bmra):
    before = snapshot(lab, bmra)
    pair_before = client_pair_state(lab)
    result = run_playbook(SCHEDULER_EXTENDER, inventory=lab.inventory, extra_vars=FAST_SCHEDULER_EXTENDER, timeout=900)
    assert result.rc != 0 and result.failed >= 1, result
    out = result.stdout
    for text in (
        "scheduler_extender: kube-scheduler (/etc/kubernetes/manifests/kube-scheduler.yaml) already loads an extender that is not ours",
        f"extenders[0] (urlPrefix {bmra_fixture.TAS_URL}) in {bmra_fixture.CONFIG_PATH} manages telemetry/scheduling",
        "Set scheduler_extender_existing=adopt",
        "Nothing was changed.",
    ):
        assert text in out, (text, result)
    assert_unchanged(before, snapshot(lab, bmra))
    # Stopped before the client certificate too (it may exist from another test: it must not change).
    assert client_pair_state(lab) == pair_before, "the client certificate or key changed although the role stopped"
    lab.wait_scheduler_healthy(60)


def test_adopt_uses_bmra_and_deploys_nothing_of_ours(lab, bmra):
    before = snapshot(lab, bmra)
    first = run_playbook(CLUSTER_STACK, inventory=lab.inventory, tags=COMPONENT_TAGS, extra_vars=ADOPT, timeout=900)
    assert first.rc == 0 and first.failed == 0, first
    for line in (
        "nfd: using the existing CustomResourceDefinition nodefeatures.nfd.k8s-sigs.io",
        "collectd: using the existing DaemonSet monitoring/collectd (collectd_existing=adopt)",
        "prometheus_adapter: using the existing APIService v1beta1.custom.metrics.k8s.io (prometheus_adapter_existing=adopt)",
        "tas: using the existing CustomResourceDefinition taspolicies.telemetry.intel.com",
    ):
        assert line in first.stdout, (line, first)
    assert_unchanged(before, snapshot(lab, bmra))

    again = run_playbook(CLUSTER_STACK, inventory=lab.inventory, tags=COMPONENT_TAGS, extra_vars=ADOPT, timeout=900)
    assert again.rc == 0 and again.changed == 0, again
    assert_unchanged(before, snapshot(lab, bmra))


def test_scheduler_extender_adopt_keeps_bmra_extender(lab, bmra):
    before = snapshot(lab, bmra)
    extra = {**FAST_SCHEDULER_EXTENDER, "scheduler_extender_existing": "adopt"}
    first = run_playbook(SCHEDULER_EXTENDER, inventory=lab.inventory, extra_vars=extra, timeout=900)
    assert first.rc == 0 and first.failed == 0, first
    assert (
        f"scheduler_extender: keeping the existing extenders[0] (urlPrefix {bmra_fixture.TAS_URL}) in "
        f"{bmra_fixture.CONFIG_PATH} manages telemetry/scheduling (scheduler_extender_existing=adopt)"
    ) in first.stdout, first
    assert "nothing else to register, kube-scheduler is left as it is." in first.stdout, first
    assert_unchanged(before, snapshot(lab, bmra))
    assert lab.scheduler_healthy()

    again = run_playbook(SCHEDULER_EXTENDER, inventory=lab.inventory, extra_vars=extra, timeout=900)
    assert again.rc == 0 and again.changed == 0, again
    assert_unchanged(before, snapshot(lab, bmra))
