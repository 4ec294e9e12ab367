"""An air-gapped site: every image from the site's mirror, pulled with a pull secret.

The lab has a site mirror, the CNCF Distribution registry at 10.0.1.5:5000 (TLS from its own CA,
which the nodes' runtime trusts; htpasswd basic auth), filled at lab start with every image the
roles deploy under the public paths (lab/components/registry.py). A converge of the cluster stack
with ``poweraware_image_registry`` pointed at it and ``poweraware_image_pull_secrets`` naming a
``kubernetes.io/dockerconfigjson`` Secret makes every pod pull from it: the lab's kubelet pulls
through the registry API with the pod's secret, by the digest the converge pins (the mirror's:
a mirror that rebuilds images cannot keep the public digests), and reports the image ID it pulled.
A pod without the secret cannot use those images (kubelet verifies pull credentials, on by default
since 1.35), and the image list (poweraware.k8s.images) names what the converge deployed.

Marker lifecycle (make lifecycle; not in make test, for its time: the whole stack converged again
through the mirror). It runs after every other lab test but the uninstall (conftest.py LATE_MODULES)
and leaves the stack on the mirror, as an air-gapped site's stays: test_uninstall.py then removes it
from there, the site's pull Secrets first (they are the user's).
"""

from __future__ import annotations

import base64
import contextlib
import json
import pathlib

import pytest
import yaml
from ansible_run import run_playbook
from poweraware_testing import role_defaults, wait_until

from lab.components import registry

pytestmark = [pytest.mark.lab, pytest.mark.lifecycle, pytest.mark.slow]

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SECRET = "site-mirror"
# The cluster stack's namespaces (role defaults) and the image variables of its roles.
NAMESPACES = ("node-feature-discovery", "monitoring", "custom-metrics", "telemetry-aware-scheduling", "kube-system")
IMAGES = {
    "nfd": ["nfd_image"],
    "collectd": ["collectd_image"],
    "kube_state_metrics": ["kube_state_metrics_image"],
    "prometheus": ["prometheus_image", "prometheus_reloader_image"],
    "prometheus_adapter": ["prometheus_adapter_image"],
    "tas": ["tas_image"],
    "descheduler": ["descheduler_image"],
}

# The images the lab's user built (the role defaults are empty): the lab inventory names them.
LAB_INVENTORY_VARS = yaml.safe_load(
    (REPO_ROOT / "inventory" / "lab" / "group_vars" / "all" / "cluster_stack.yml").read_text()
)


def _core(lab):
    from kubernetes import client

    return client.CoreV1Api(lab.api_client())


def _repository(defaults: dict, variable: str) -> str:
    """The public repository of an image variable: the role's default, or, for an image the user
    builds (collectd's: the role's default is empty), the one the lab's inventory names."""
    return defaults[variable] or LAB_INVENTORY_VARS[variable]


def _mirror_digests(lab) -> dict[str, str]:
    """``<variable>_digest`` -> the digest the mirror serves that image at (mirror.json)."""
    served = json.loads((registry.directory(lab.state_dir) / "mirror.json").read_text())
    digests = {}
    for role, variables in IMAGES.items():
        defaults = role_defaults(REPO_ROOT / "roles" / role / "defaults" / "main.yml")
        for variable in variables:
            tag = defaults[f"{variable}_tag"] or "v0.36.0"  # the descheduler's release for the lab's 1.36
            key = f"{registry.MIRROR}/{registry.mirrored(_repository(defaults, variable))}:{tag}"
            digests[f"{variable}_digest"] = served[key]
    return digests


def _ours(lab) -> list:
    """The cluster stack's pods: every pod of its namespaces, in kube-system only the descheduler's
    (Peaks and the cluster's own pods run there too)."""
    pods = []
    for namespace in NAMESPACES:
        selector = "app.kubernetes.io/name=descheduler" if namespace == "kube-system" else ""
        found = _core(lab).list_namespaced_pod(namespace, label_selector=selector).items
        pods += [p for p in found if p.metadata.deletion_timestamp is None]
    return pods


def test_a_converge_through_the_sites_mirror_pulls_every_image_with_the_pull_secret(lab, site, tmp_path):
    assert site["converge"].rc == 0
    from kubernetes import client

    core = _core(lab)
    user, password = registry.credentials(lab.state_dir)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = json.dumps({"auths": {registry.MIRROR: {"auth": auth}}})
    for namespace in NAMESPACES:
        core.create_namespaced_secret(
            namespace,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name=SECRET),
                type="kubernetes.io/dockerconfigjson",
                string_data={".dockerconfigjson": config},
            ),
        )
    digests = _mirror_digests(lab)
    site_yml = REPO_ROOT / "site.yml"
    mirror_log = lab.state_dir / "logs" / "registry.log"
    pulls_before = mirror_log.read_text().count('"GET /v2/')
    try:
        # -e strings, as a user gives them on the command line
        # the site pushed its own build of collectd (no public image) to the mirror, under the same path
        built = {
            variable: f"{registry.MIRROR}/{registry.mirrored(value)}" for variable, value in LAB_INVENTORY_VARS.items()
        }
        extra = {
            "poweraware_image_registry": registry.MIRROR,
            "poweraware_image_pull_secrets": SECRET,
            **built,
            **digests,
        }
        run = run_playbook(site_yml, inventory=lab.inventory, tags=["cluster_stack"], extra_vars=extra)
        assert run.rc == 0 and run.failed == 0 and run.changed > 0, run

        def all_from_the_mirror():
            pods = _ours(lab)
            statuses = [(p, s) for p in pods for s in (p.status.container_statuses or [])]
            done = statuses and all(s.ready and s.image.startswith(f"{registry.MIRROR}/") for _p, s in statuses)
            return done and pods

        pods = wait_until(all_from_the_mirror, 240, "every pod of the stack running from the mirror")
        images = set()
        for pod in pods:
            assert [s.name for s in pod.spec.image_pull_secrets or []] == [SECRET], pod.metadata.name
            for status in pod.status.container_statuses:
                reference, _at, digest = status.image.partition("@")
                assert digest == digests[f"{_variable_of(reference)}_digest"], status.image
                # kubelet's image ID: what was pulled, by its manifest digest
                assert status.image_id == f"{reference.rsplit(':', 1)[0]}@{digest}", (status.image, status.image_id)
                images.add(status.image)
        assert len(images) >= 7, images
        # what poweraware.k8s.images lists for the same settings is what runs (the descheduler only
        # when a TAS policy deschedules: the list holds a superset); Peaks, which the lab's inventory
        # switches on, is not in the cluster stack this converge applied
        listed_file = tmp_path / "images.txt"
        listing = run_playbook(
            REPO_ROOT / "playbooks" / "images.yml",
            inventory=lab.inventory,
            extra_vars={**extra, "poweraware_images_file": str(listed_file), "poweraware_enable_peaks": "false"},
        )
        assert listing.rc == 0 and listing.failed == 0, listing
        listed = set(listed_file.read_text().split())
        assert images <= listed and all(i.startswith(f"{registry.MIRROR}/") for i in listed), (images, listed)
        assert len(listed - images) <= 1, listed - images
        log = mirror_log.read_text()
        assert log.count('"GET /v2/') > pulls_before  # the nodes pulled, authenticated
        assert "auth.user.name=lab-mirror" in log

        # A pod without the secret may not use what was pulled with it: kubelet pulls again with the
        # pod's own credentials (none), and the mirror refuses.
        image = next(iter(images))
        node = next(p.spec.node_name for p in pods if any(s.image == image for s in p.status.container_statuses))
        core.create_namespace({"metadata": {"name": "air-gap-test"}})
        wait_until(
            lambda: core.list_namespaced_service_account("air-gap-test", field_selector="metadata.name=default").items,
            60,
            "the new namespace's default service account",
        )
        core.create_namespaced_pod(
            "air-gap-test",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "no-pull-secret"},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "image": image, "command": ["sleep", "600"]}],
                },
            },
        )

        def refused():
            status = core.read_namespaced_pod("no-pull-secret", "air-gap-test").status.container_statuses
            waiting = status and status[0].state.waiting
            return waiting and waiting.reason in ("ErrImagePull", "ImagePullBackOff") and waiting

        waiting = wait_until(refused, 60, "the pod without the pull secret to be refused its image")
        print(f"PROOF air-gapped: {len(pods)} pods from {registry.MIRROR}; without the secret: {waiting.reason}")
    finally:
        # the pull secrets stay with the pods that pull with them
        with contextlib.suppress(client.ApiException):
            core.delete_namespace("air-gap-test")


def _variable_of(reference: str) -> str:
    """The image variable whose mirror reference this is (by the path after the mirror's host)."""
    path = reference.split("/", 1)[1].rsplit(":", 1)[0]
    for role, variables in IMAGES.items():
        defaults = role_defaults(REPO_ROOT / "roles" / role / "defaults" / "main.yml")
        for variable in variables:
            if registry.mirrored(_repository(defaults, variable)) == path:
                return variable
    raise AssertionError(f"{reference} is no image of the cluster stack")
