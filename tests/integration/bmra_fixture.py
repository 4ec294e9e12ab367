# ruff: noqa: E501 - image digests and exact messages
"""A "BMRA-shaped" lab: the objects and the kube-scheduler configuration Intel's BMRA playbooks create.

Names, namespaces, labels and selectors follow intel/container-experience-kits (the archived BMRA
repository, its last commit):

- roles/collectd_install: ``kubectl apply`` of DaemonSet ``monitoring/collectd`` (labels and
  selector ``app: collectd``), ServiceAccount ``monitoring/collectd``, headless Service
  ``monitoring/collectd-service`` (port ``https`` 9104);
- roles/prometheus_install/kube_prometheus: APIService ``v1beta1.custom.metrics.k8s.io`` (label
  ``app: custom-metrics-apiserver``) pointing at Service ``monitoring/prometheus-adapter``, and the
  kube-prometheus adapter Deployment and Service (``app.kubernetes.io/part-of: kube-prometheus``);
- roles/nfd_install: the Helm release ``node-feature-discovery`` (chart v0.14) in ``kube-system``:
  CRDs ``nodefeatures`` and ``nodefeaturerules.nfd.k8s-sigs.io``, Deployment
  ``node-feature-discovery-master``, DaemonSet ``node-feature-discovery-worker``;
- roles/platform_aware_scheduling_install: the Helm release ``tas`` of its telemetry-aware-scheduling
  chart in ``kube-system`` (pas_namespace): CRD ``taspolicies.telemetry.intel.com``, Deployment
  ``tas-telemetry-aware-scheduling``, Service ``telemetry-aware-scheduling`` (tas_service_name) on
  9001; and in kube-scheduler (create-scheduler-config.yml), on kubespray's
  ``/etc/kubernetes/kubescheduler-config.yaml``: a blockinfile ``extenders:`` entry
  ``https://telemetry-aware-scheduling.kube-system.svc.cluster.local:9001`` managing
  ``telemetry/scheduling`` with the client pair ``/host/certs/tas/tls-extender-client{,-key}.pem``,
  ``dnsPolicy: ClusterFirstWithHostNet`` after ``spec:``, a hostPath volume ``tas-extender-client``
  of ``/etc/ssl/tas`` mounted at ``/host/certs/tas``; kubespray adds ``--config`` and mounts the file.

One deviation: BMRA forces ``apiVersion: kubescheduler.config.k8s.io/v1beta3`` with lineinfile,
which kube-scheduler 1.29 and later refuse; the lab runs 1.36, so the file is written in ``v1`` (the
rest is as BMRA writes it). Objects are created with the field managers those tools use (``kubectl-
client-side-apply``, ``helm``), so they are visibly not ours.

``install(lab)`` sets it all up and returns a ``BmraState``; ``cleanup(lab, state)`` puts the lab back
(the original manifest bytes, the files and every object it created removed). Conflicting objects of
the collection's own (left by other test modules on a shared lab) are deleted first, because BMRA's
carry the same names; other test modules converge their own objects again in their fixtures.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime
import pathlib
import time

import yaml
from poweraware_testing import tas_extenders_block

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

OUR_LABEL = "app.kubernetes.io/managed-by=poweraware.k8s"
KUBECTL = "kubectl-client-side-apply"
HELM = "helm"

CONFIG_PATH = "/etc/kubernetes/kubescheduler-config.yaml"
TAS_SSL = "/etc/ssl/tas"
TAS_URL = "https://telemetry-aware-scheduling.kube-system.svc.cluster.local:9001"
CLIENT_CERT = "/host/certs/tas/tls-extender-client.pem"
CLIENT_KEY = "/host/certs/tas/tls-extender-client-key.pem"

# kubespray's kubescheduler-config.yaml, then BMRA's blockinfile (TAS with TLS, GAS off).
SCHEDULER_CONFIG = (
    """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: "/etc/kubernetes/scheduler.conf"
profiles:
  - schedulerName: default-scheduler
# BEGIN ANSIBLE MANAGED BLOCK
"""
    + tas_extenders_block(TAS_URL, CLIENT_CERT, CLIENT_KEY)
    + "# END ANSIBLE MANAGED BLOCK\n"
)

HELM_NFD = {
    "app.kubernetes.io/name": "node-feature-discovery",
    "app.kubernetes.io/instance": "node-feature-discovery",
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/version": "v0.14.3",
    "helm.sh/chart": "node-feature-discovery-0.14.3",
}
HELM_NFD_ANNOTATIONS = {
    "meta.helm.sh/release-name": "node-feature-discovery",
    "meta.helm.sh/release-namespace": "kube-system",
}
HELM_TAS = {
    "app.kubernetes.io/name": "telemetry-aware-scheduling",
    "app.kubernetes.io/instance": "tas",
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/version": "0.1",
    "helm.sh/chart": "telemetry-aware-scheduling-0.1",
}
HELM_TAS_ANNOTATIONS = {"meta.helm.sh/release-name": "tas", "meta.helm.sh/release-namespace": "kube-system"}
KUBE_PROMETHEUS_ADAPTER = {
    "app.kubernetes.io/component": "metrics-adapter",
    "app.kubernetes.io/name": "prometheus-adapter",
    "app.kubernetes.io/part-of": "kube-prometheus",
}

# (kind, namespace, name) of every BMRA object, in creation order.
OBJECTS = [
    ("Namespace", None, "monitoring"),
    ("ServiceAccount", "monitoring", "collectd"),
    ("DaemonSet", "monitoring", "collectd"),
    ("Service", "monitoring", "collectd-service"),
    ("ServiceAccount", "monitoring", "prometheus-adapter"),
    ("Deployment", "monitoring", "prometheus-adapter"),
    ("Service", "monitoring", "prometheus-adapter"),
    ("APIService", None, "v1beta1.custom.metrics.k8s.io"),
    ("CustomResourceDefinition", None, "nodefeatures.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", None, "nodefeaturerules.nfd.k8s-sigs.io"),
    ("ServiceAccount", "kube-system", "node-feature-discovery"),
    ("Deployment", "kube-system", "node-feature-discovery-master"),
    ("DaemonSet", "kube-system", "node-feature-discovery-worker"),
    ("CustomResourceDefinition", None, "taspolicies.telemetry.intel.com"),
    ("ServiceAccount", "kube-system", "tas-telemetry-aware-scheduling"),
    ("Deployment", "kube-system", "tas-telemetry-aware-scheduling"),
    ("Service", "kube-system", "telemetry-aware-scheduling"),
]

# Objects of the collection that carry BMRA's names (deleted before BMRA's are made).
OUR_CONFLICTING = [
    ("DaemonSet", "monitoring", "collectd"),
    ("APIService", None, "v1beta1.custom.metrics.k8s.io"),
    ("CustomResourceDefinition", None, "nodefeatures.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", None, "nodefeaturegroups.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", None, "nodefeaturerules.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", None, "taspolicies.telemetry.intel.com"),
]


@dataclasses.dataclass
class BmraState:
    original_manifest: bytes
    created: list[tuple[str, str | None, str]]
    manifest: bytes = b""
    config: bytes = b""


# --- Kubernetes API helpers ----------------------------------------------------------------------
def _read(apis, kind, namespace, name):
    """The object as a plain dict, or None."""
    from kubernetes.client.rest import ApiException

    readers = {
        "Namespace": lambda: apis["core"].read_namespace(name),
        "ServiceAccount": lambda: apis["core"].read_namespaced_service_account(name, namespace),
        "Service": lambda: apis["core"].read_namespaced_service(name, namespace),
        "DaemonSet": lambda: apis["apps"].read_namespaced_daemon_set(name, namespace),
        "Deployment": lambda: apis["apps"].read_namespaced_deployment(name, namespace),
        "APIService": lambda: apis["reg"].read_api_service(name),
        "CustomResourceDefinition": lambda: apis["ext"].read_custom_resource_definition(name),
    }
    try:
        obj = readers[kind]()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return apis["core"].api_client.sanitize_for_serialization(obj)


def _create(apis, body, manager):
    kind, meta = body["kind"], body["metadata"]
    namespace = meta.get("namespace")
    creators = {
        "Namespace": lambda: apis["core"].create_namespace(body, field_manager=manager),
        "ServiceAccount": lambda: apis["core"].create_namespaced_service_account(
            namespace, body, field_manager=manager
        ),
        "Service": lambda: apis["core"].create_namespaced_service(namespace, body, field_manager=manager),
        "DaemonSet": lambda: apis["apps"].create_namespaced_daemon_set(namespace, body, field_manager=manager),
        "Deployment": lambda: apis["apps"].create_namespaced_deployment(namespace, body, field_manager=manager),
        "APIService": lambda: apis["reg"].create_api_service(body, field_manager=manager),
        "CustomResourceDefinition": lambda: apis["ext"].create_custom_resource_definition(body, field_manager=manager),
    }
    creators[kind]()


def _delete(apis, kind, namespace, name):
    from kubernetes.client.rest import ApiException

    deleters = {
        "Namespace": lambda: apis["core"].delete_namespace(name),
        "ServiceAccount": lambda: apis["core"].delete_namespaced_service_account(name, namespace),
        "Service": lambda: apis["core"].delete_namespaced_service(name, namespace),
        "DaemonSet": lambda: apis["apps"].delete_namespaced_daemon_set(name, namespace),
        "Deployment": lambda: apis["apps"].delete_namespaced_deployment(name, namespace),
        "APIService": lambda: apis["reg"].delete_api_service(name),
        "CustomResourceDefinition": lambda: apis["ext"].delete_custom_resource_definition(name),
    }
    try:
        deleters[kind]()
    except ApiException as exc:
        if exc.status != 404:
            raise


def _wait_gone(apis, items, timeout=180.0):
    deadline = time.monotonic() + timeout
    pending = list(items)
    while pending and time.monotonic() < deadline:
        pending = [item for item in pending if _read(apis, *item) is not None]
        if pending:
            time.sleep(1)
    if pending:
        raise TimeoutError(f"still there after {timeout:.0f} s: {pending}")


def _meta(name, namespace=None, labels=None, annotations=None):
    meta = {"name": name, "labels": dict(labels or {})}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _pod_template(labels, containers, service_account, host_network=False, volumes=None):
    spec = {"serviceAccountName": service_account, "containers": containers}
    if host_network:
        spec["hostNetwork"] = True
    if volumes:
        spec["volumes"] = volumes
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _crd(name, group, kind, plural, scope, labels=None, versions=("v1alpha1",)):
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": _meta(
            name, labels=labels, annotations={"api-approved.kubernetes.io": "unapproved, experimental-only"}
        ),
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [{"name": v, "served": True, "storage": True, "schema": schema} for v in versions],
        },
    }


def _taspolicy_crd():
    """BMRA's chart ships the upstream TASPolicy CRD (the schema our role ships too), without our labels."""
    crd = yaml.safe_load((REPO_ROOT / "roles" / "tas" / "files" / "taspolicy-crd.yml").read_text())
    crd = copy.deepcopy(crd)
    crd["metadata"] = _meta(crd["metadata"]["name"])
    return crd


def bmra_objects(ca_bundle_b64: str) -> list[tuple[dict, str]]:
    """Every object BMRA creates, with the field manager that created it."""
    collectd_labels = {"app": "collectd"}
    nfd_master = {**HELM_NFD, "role": "master"}
    nfd_worker = {**HELM_NFD, "role": "worker"}
    return [
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta("monitoring")}, "kubernetes.core"),
        ({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("collectd", "monitoring")}, KUBECTL),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": _meta("collectd", "monitoring", collectd_labels),
                "spec": {
                    "selector": {"matchLabels": collectd_labels},
                    "template": _pod_template(
                        collectd_labels,
                        [
                            {
                                "name": "collectd",
                                "image": "intel/observability-collectd@sha256:ece869707363959223135d777148f3b97db0477990ef23b2ca4e0644d92ecb09",
                                "securityContext": {"privileged": True},
                            },
                            {
                                "name": "collectd-exporter",
                                "image": "prom/collectd-exporter@sha256:73fbda4d24421bff3b741c27efc36f1b6fbe7c57c378d56d4ff78101cd556654",
                                "ports": [{"name": "exporter", "containerPort": 9103}],
                                "args": [
                                    "--web.listen-address=127.0.0.1:9103",
                                    "--collectd.listen-address=127.0.0.1:25826",
                                ],
                            },
                        ],
                        "collectd",
                        host_network=True,
                        volumes=[
                            {"name": "pkgpower", "hostPath": {"path": "/sys/devices/virtual/powercap/intel-rapl/"}}
                        ],
                    ),
                },
            },
            KUBECTL,
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("collectd-service", "monitoring", {"app": "collectd-service"}),
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": "None",
                    "selector": collectd_labels,
                    "ports": [{"name": "https", "port": 9104, "targetPort": "https", "protocol": "TCP"}],
                },
            },
            KUBECTL,
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta("prometheus-adapter", "monitoring", KUBE_PROMETHEUS_ADAPTER),
            },
            KUBECTL,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("prometheus-adapter", "monitoring", KUBE_PROMETHEUS_ADAPTER),
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": KUBE_PROMETHEUS_ADAPTER},
                    "template": _pod_template(
                        KUBE_PROMETHEUS_ADAPTER,
                        [
                            {
                                "name": "prometheus-adapter",
                                "image": "registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.10.0",
                            }
                        ],
                        "prometheus-adapter",
                    ),
                },
            },
            KUBECTL,
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("prometheus-adapter", "monitoring", KUBE_PROMETHEUS_ADAPTER),
                "spec": {
                    "selector": KUBE_PROMETHEUS_ADAPTER,
                    "ports": [{"name": "adapter-https", "port": 443, "targetPort": 6443}],
                },
            },
            KUBECTL,
        ),
        (
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": _meta("v1beta1.custom.metrics.k8s.io", labels={"app": "custom-metrics-apiserver"}),
                "spec": {
                    "service": {"name": "prometheus-adapter", "namespace": "monitoring"},
                    "group": "custom.metrics.k8s.io",
                    "version": "v1beta1",
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                    "caBundle": ca_bundle_b64,
                    "insecureSkipTLSVerify": False,
                },
            },
            KUBECTL,
        ),
        (_crd("nodefeatures.nfd.k8s-sigs.io", "nfd.k8s-sigs.io", "NodeFeature", "nodefeatures", "Namespaced"), HELM),
        (
            _crd(
                "nodefeaturerules.nfd.k8s-sigs.io", "nfd.k8s-sigs.io", "NodeFeatureRule", "nodefeaturerules", "Cluster"
            ),
            HELM,
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta("node-feature-discovery", "kube-system", HELM_NFD, HELM_NFD_ANNOTATIONS),
            },
            HELM,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("node-feature-discovery-master", "kube-system", nfd_master, HELM_NFD_ANNOTATIONS),
                "spec": {
                    "replicas": 1,
                    "selector": {
                        "matchLabels": {
                            "app.kubernetes.io/name": "node-feature-discovery",
                            "app.kubernetes.io/instance": "node-feature-discovery",
                            "role": "master",
                        }
                    },
                    "template": _pod_template(
                        nfd_master,
                        [{"name": "master", "image": "registry.k8s.io/nfd/node-feature-discovery:v0.14.3-minimal"}],
                        "node-feature-discovery",
                    ),
                },
            },
            HELM,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": _meta("node-feature-discovery-worker", "kube-system", nfd_worker, HELM_NFD_ANNOTATIONS),
                "spec": {
                    "selector": {
                        "matchLabels": {
                            "app.kubernetes.io/name": "node-feature-discovery",
                            "app.kubernetes.io/instance": "node-feature-discovery",
                            "role": "worker",
                        }
                    },
                    "template": _pod_template(
                        nfd_worker,
                        [{"name": "worker", "image": "registry.k8s.io/nfd/node-feature-discovery:v0.14.3-minimal"}],
                        "node-feature-discovery",
                    ),
                },
            },
            HELM,
        ),
        (_taspolicy_crd(), HELM),
        (
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta("tas-telemetry-aware-scheduling", "kube-system", HELM_TAS, HELM_TAS_ANNOTATIONS),
            },
            HELM,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("tas-telemetry-aware-scheduling", "kube-system", HELM_TAS, HELM_TAS_ANNOTATIONS),
                "spec": {
                    "replicas": 1,
                    "selector": {
                        "matchLabels": {
                            "app.kubernetes.io/name": "telemetry-aware-scheduling",
                            "app.kubernetes.io/instance": "tas",
                        }
                    },
                    "template": _pod_template(
                        HELM_TAS,
                        [
                            {
                                "name": "tas-extender",
                                "image": "docker.io/intel/telemetry-aware-scheduling:0.6.0",
                                "command": [
                                    "/extender",
                                    "--syncPeriod=2s",
                                    "--v=4",
                                    "--cert=/etc/ssl/tas/tas-extender-secret.cert",
                                    "--cacert=/etc/ssl/tas/ca.crt",
                                    "--key=/etc/ssl/tas/tas-extender-secret.key",
                                ],
                                "securityContext": {"runAsUser": 10001},
                            }
                        ],
                        "tas-telemetry-aware-scheduling",
                    ),
                },
            },
            HELM,
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("telemetry-aware-scheduling", "kube-system", HELM_TAS, HELM_TAS_ANNOTATIONS),
                "spec": {
                    "type": "ClusterIP",
                    "selector": {
                        "app.kubernetes.io/name": "telemetry-aware-scheduling",
                        "app.kubernetes.io/instance": "tas",
                    },
                    "ports": [{"port": 9001}],
                },
            },
            HELM,
        ),
    ]


# --- kube-scheduler, as BMRA leaves it ------------------------------------------------------------
def _insert_after(text: str, anchor: str, block: str) -> str:
    lines = text.split("\n")
    matches = [i for i, line in enumerate(lines) if line == anchor]
    if not matches:
        raise AssertionError(f"the lab's kube-scheduler manifest has no line {anchor!r}")
    index = matches[-1]  # lineinfile/blockinfile insertafter: the last match
    return "\n".join(lines[: index + 1] + block.rstrip("\n").split("\n") + lines[index + 1 :])


def bmra_manifest(original: str) -> str:
    """kubespray's --config flag and mount, then BMRA's dnsPolicy, volume and mount (its line edits)."""
    text = _insert_after(original, "    - --bind-address=127.0.0.1", f"    - --config={CONFIG_PATH}")
    text = _insert_after(
        text,
        "    volumeMounts:",
        f"    - mountPath: {CONFIG_PATH}\n      name: kubescheduler-config\n      readOnly: true",
    )
    text = _insert_after(
        text, "  volumes:", f"  - hostPath:\n      path: {CONFIG_PATH}\n    name: kubescheduler-config"
    )
    text = _insert_after(text, "spec:", "  dnsPolicy: ClusterFirstWithHostNet")
    text = _insert_after(
        text,
        "  volumes:",
        f"# volumes - ANSIBLE MANAGED BLOCK\n  - hostPath:\n      path: {TAS_SSL}\n    name: tas-extender-client\n"
        "# volumes - ANSIBLE MANAGED BLOCK",
    )
    text = _insert_after(
        text,
        "    volumeMounts:",
        "# mounts - ANSIBLE MANAGED BLOCK\n    - mountPath: /host/certs/tas\n      name: tas-extender-client\n"
        "      readOnly: true\n# mounts - ANSIBLE MANAGED BLOCK",
    )
    return text


def _client_pair() -> tuple[str, str]:
    """The TAS client pair BMRA's tls.yml issues (here self-signed: the lab has no TAS to call)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tas-extender-client")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return cert_pem, key_pem


def manifest_record_present(lab) -> bool:
    """Whether the collection's own extender record is in the lab's manifest (another test left it)."""
    doc = yaml.safe_load(lab.scheduler_manifest.read_text())
    return "poweraware.k8s/scheduler-extender" in ((doc.get("metadata") or {}).get("annotations") or {})


# --- install / cleanup ---------------------------------------------------------------------------
def remove_our_conflicting_objects(lab) -> list[str]:
    """Delete the collection's objects that carry BMRA's names; return what was deleted."""
    apis = lab.apis()
    deleted = []
    for item in OUR_CONFLICTING:
        obj = _read(apis, *item)
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        if obj is not None and labels.get("app.kubernetes.io/managed-by") == "poweraware.k8s":
            _delete(apis, *item)
            deleted.append(item)
    _wait_gone(apis, deleted)
    return [f"{kind} {ns + '/' if ns else ''}{name}" for kind, ns, name in deleted]


def install(lab) -> BmraState:
    """Make the lab look like a cluster BMRA provisioned (API objects, then kube-scheduler)."""
    if manifest_record_present(lab):
        raise RuntimeError(
            "the lab's kube-scheduler manifest carries poweraware.k8s/scheduler-extender: run "
            "playbooks/scheduler_extender.yml -e scheduler_extender_state=absent first"
        )
    remove_our_conflicting_objects(lab)
    apis = lab.apis()
    ca_b64 = base64.b64encode(pathlib.Path(lab.ca_cert).read_bytes()).decode()
    state = BmraState(original_manifest=lab.scheduler_manifest.read_bytes(), created=[])
    try:
        for body, manager in bmra_objects(ca_b64):
            meta = body["metadata"]
            key = (body["kind"], meta.get("namespace"), meta["name"])
            if _read(apis, *key) is not None:
                if key[0] in ("Namespace", "ServiceAccount"):
                    continue  # shared with the collection's objects (monitoring, monitoring/collectd): kept as is
                raise RuntimeError(f"{key} already exists on the lab; cannot make BMRA's")
            _create(apis, body, manager)
            state.created.append(key)
        _wait_established(apis, [name for kind, _ns, name in state.created if kind == "CustomResourceDefinition"])

        cp = lab.control_plane_node
        cert_pem, key_pem = _client_pair()
        lab.ssh(cp, f"install -d -m 0755 {TAS_SSL}", sudo=True)
        lab.write_node_file(cp, f"{TAS_SSL}/tls-extender-client.pem", cert_pem, "0644")
        lab.write_node_file(cp, f"{TAS_SSL}/tls-extender-client-key.pem", key_pem, "0600")
        lab.write_node_file(cp, CONFIG_PATH, SCHEDULER_CONFIG, "0644")
        lab.write_node_file(
            cp, "/etc/kubernetes/manifests/kube-scheduler.yaml", bmra_manifest(state.original_manifest.decode()), "0600"
        )
        _wait_running_manifest(lab)
        lab.wait_scheduler_healthy(120)
        state.manifest = lab.scheduler_manifest.read_bytes()
        state.config = (lab.node_disk(cp) / CONFIG_PATH.lstrip("/")).read_bytes()
    except BaseException:
        cleanup(lab, state)
        raise
    return state


def _wait_established(apis, names, timeout=60.0):
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = _read(apis, "CustomResourceDefinition", None, name)
            conditions = {c["type"]: c["status"] for c in ((crd or {}).get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established within {timeout:.0f} s")
            time.sleep(0.5)


def _wait_running_manifest(lab, timeout=60.0):
    """Wait until the control-plane kubelet runs the manifest now on disk."""
    import hashlib

    want = hashlib.sha256(lab.scheduler_manifest.read_bytes()).hexdigest()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if want in repr(lab.static_pods_status()):
            return
        time.sleep(0.5)


def cleanup(lab, state: BmraState) -> None:
    """Put the lab back: the original manifest bytes, BMRA's files and objects removed."""
    cp = lab.control_plane_node
    problems = []
    if lab.scheduler_manifest.read_bytes() != state.original_manifest:
        lab.write_node_file(
            cp, "/etc/kubernetes/manifests/kube-scheduler.yaml", state.original_manifest.decode(), "0600"
        )
    lab.ssh(cp, f"rm -rf {TAS_SSL} {CONFIG_PATH}", sudo=True, check=False)
    apis = lab.apis()
    for item in reversed(state.created):
        try:
            _delete(apis, *item)
        except Exception as exc:  # noqa: BLE001 - report every object that could not be removed
            problems.append(f"{item}: {exc}")
    try:
        _wait_gone(apis, [item for item in state.created if item[0] != "Namespace"])
    except TimeoutError as exc:
        problems.append(str(exc))
    try:
        _wait_running_manifest(lab)
        lab.wait_scheduler_healthy(120)
    except TimeoutError as exc:
        problems.append(str(exc))
    if lab.scheduler_manifest.read_bytes() != state.original_manifest:
        problems.append("the lab's kube-scheduler manifest is not back to its original bytes")
    if problems:
        raise RuntimeError("cleaning up the BMRA-shaped lab: " + "; ".join(problems))


# --- what the tests compare ----------------------------------------------------------------------
def bmra_versions(lab, state: BmraState) -> dict[str, str]:
    """resourceVersion of every object BMRA's fixture created (missing ones as 'missing')."""
    apis = lab.apis()
    out = {}
    for kind, namespace, name in state.created:
        obj = _read(apis, kind, namespace, name)
        out[f"{kind} {namespace or ''}/{name}"] = obj["metadata"]["resourceVersion"] if obj else "missing"
    return out


def our_objects(lab) -> dict[str, str]:
    """Every object labelled as the collection's, with its resourceVersion, across the kinds the roles apply."""
    from kubernetes import client

    api_client = lab.api_client()
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    ext, reg, rbac = (
        client.ApiextensionsV1Api(api_client),
        client.ApiregistrationV1Api(api_client),
        client.RbacAuthorizationV1Api(api_client),
    )
    listers = {
        "Namespace": core.list_namespace,
        "ServiceAccount": core.list_service_account_for_all_namespaces,
        "Service": core.list_service_for_all_namespaces,
        "ConfigMap": core.list_config_map_for_all_namespaces,
        "Secret": core.list_secret_for_all_namespaces,
        "DaemonSet": apps.list_daemon_set_for_all_namespaces,
        "Deployment": apps.list_deployment_for_all_namespaces,
        "APIService": reg.list_api_service,
        "CustomResourceDefinition": ext.list_custom_resource_definition,
        "ClusterRole": rbac.list_cluster_role,
        "ClusterRoleBinding": rbac.list_cluster_role_binding,
    }
    out = {}
    for kind, lister in listers.items():
        for item in lister(label_selector=OUR_LABEL).items:
            meta = item.metadata
            out[f"{kind} {meta.namespace or ''}/{meta.name}"] = meta.resource_version
    return out
