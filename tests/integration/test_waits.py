"""Long waits report as they go (poweraware.k8s.k8s_apply, docs/site.md "Waits"), on the lab's real
kube-apiserver and kube-controller-manager: a Deployment whose readiness probe never answers never
becomes Available; the wait says every REPORT_EVERY seconds what it waits for, for how long and what the
Deployment's status says, then fails naming the object, the time and the last status."""

from __future__ import annotations

import pathlib
import re
import uuid

import pytest
from ansible_run import run_playbook

pytestmark = [pytest.mark.lab]

PLAYBOOK = pathlib.Path(__file__).resolve().parent / "playbooks" / "wait_progress.yml"
# a name of its own per run: the namespace is deleted, not waited for (its finalizers take seconds)
NAMESPACE = f"poweraware-wait-test-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(lab):
    from kubernetes import client

    core = client.CoreV1Api(lab.api_client())
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    yield NAMESPACE
    core.delete_namespace(NAMESPACE)


def test_a_rollout_that_never_ends_is_reported_while_waited_for_and_then_named(lab, namespace):
    run = run_playbook(
        PLAYBOOK, inventory=lab.inventory, extra_vars={"test_namespace": namespace, "test_wait_timeout": 30}
    )
    assert run.rc != 0 and run.failed == 1, run
    # one line after the first 20 s step, none for the last (a step never leaves a stub)
    lines = re.findall(r"^lab-control-plane: waiting for .*$", run.stdout, re.M)
    assert len(lines) == 1, run
    assert re.match(
        rf"lab-control-plane: waiting for Deployment {NAMESPACE}/never-ready until Available=True "
        r"\(2\d s of 30 s\): 0 of 1 replicas available, 1 updated; Available=False \(MinimumReplicasUnavailable",
        lines[0],
    ), lines
    assert (
        f"Deployment {NAMESPACE}/never-ready was not ready after 30 s (waited until Available=True); its status: 0 of 1"
        in run.stdout
    )
    assert "Timed out waiting on resource" in run.stdout  # kubernetes.core's own words stay
