"""Waits (poweraware.k8s.k8s_apply, docs/site.md "Waits"), on the lab's real kube-apiserver and
kube-controller-manager.

Long waits report as they go: a Deployment whose readiness probe never answers never becomes
Available; the wait says every REPORT_EVERY seconds what it waits for, for how long and what the
Deployment's status says, then fails naming the object, the time and the last status.

A wait for a Deployment is a wait for its rollout: when a task that changed the pod template
returns, the new template's pod is the one that runs and is ready (kubectl rollout status's rule).
"""

from __future__ import annotations

import pathlib
import re
import uuid

import pytest
from ansible_run import run_playbook

pytestmark = [pytest.mark.lab]

PLAYBOOK = pathlib.Path(__file__).resolve().parent / "playbooks" / "wait_progress.yml"
ROLLOUT = PLAYBOOK.with_name("rollout_wait.yml")


@pytest.fixture
def namespace(lab):
    from kubernetes import client

    # a name of its own per test: the namespace is deleted, not waited for (its finalizers take seconds)
    name = f"poweraware-wait-test-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(lab.api_client())
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def test_a_rollout_that_never_ends_is_reported_while_waited_for_and_then_named(lab, namespace):
    run = run_playbook(
        PLAYBOOK, inventory=lab.inventory, extra_vars={"test_namespace": namespace, "test_wait_timeout": 30}
    )
    assert run.rc != 0 and run.failed == 1, run
    # one line after the first 20 s step, none for the last (a step never leaves a stub)
    lines = re.findall(r"^lab-control-plane: waiting for .*$", run.stdout, re.M)
    assert len(lines) == 1, run
    assert re.match(
        rf"lab-control-plane: waiting for Deployment {namespace}/never-ready until Available=True "
        r"\(2\d s of 30 s\): 0 of 1 replicas available, 1 updated; Available=False \(MinimumReplicasUnavailable",
        lines[0],
    ), lines
    assert (
        f"Deployment {namespace}/never-ready was not ready after 30 s (waited until Available=True); its status: 0 of 1"
        in run.stdout
    )
    assert "Timed out waiting on resource" in run.stdout  # kubernetes.core's own words stay


def test_a_wait_for_a_deployment_ends_with_its_rollout(lab, namespace):
    """Strategy Recreate, a readiness probe 3 s after start. Revisions 1 and 2: when each wait ends,
    the one pod is that revision's, ready (kubernetes.core's own Deployment check passes as soon as
    the controller has observed the new generation while the old pod, being deleted, still counts
    as available: under load the task returned with no new pod yet). Revision 3 is applied while a
    ValidatingAdmissionPolicy refuses to delete the pods: the old pod stays, available and counted,
    and no new one is created, which kubernetes.core's check calls ready at once; the wait fails
    after its 8 s naming the rollout (and the policy is removed)."""
    from kubernetes import client

    run = run_playbook(ROLLOUT, inventory=lab.inventory, extra_vars={"test_namespace": namespace})
    assert run.rc == 0 and run.failed == 0, run.stdout[-4000:]
    assert "0 out of 1 new replicas have been updated" in run.stdout
    policies = client.AdmissionregistrationV1Api(lab.api_client()).list_validating_admission_policy().items
    assert not [p.metadata.name for p in policies if p.metadata.name.startswith(namespace)]
