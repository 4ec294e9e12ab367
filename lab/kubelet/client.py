"""kube-apiserver as the node's kubelet calls it for the pods bound to the node, with the node's
credentials (through static_pods.KubeApi): NodeApi."""

from __future__ import annotations

import base64
import contextlib
import time
import urllib.error
import urllib.parse
import urllib.request

from .common import PodError


# --- the node's API access --------------------------------------------------------------------
class NodeApi:
    """The calls kubelet makes, with the node's credentials (the Node authorizer limits them to
    pods bound to this node and the objects those pods reference)."""

    def __init__(self, api):
        self.api = api  # static_pods.KubeApi

    def pods(self, node: str) -> list[dict]:
        selector = urllib.parse.quote(f"spec.nodeName={node}")
        return self.api.request("GET", f"/api/v1/pods?fieldSelector={selector}")["items"]

    def object_data(self, kind: str, namespace: str, name: str, optional: bool) -> dict[str, bytes] | None:
        plural = {"ConfigMap": "configmaps", "Secret": "secrets"}[kind]
        obj = self.api.request("GET", f"/api/v1/namespaces/{namespace}/{plural}/{name}", missing_ok=True)
        if obj is None:
            if optional:
                return None
            raise PodError(f'{kind.lower()} "{name}" not found')
        if kind == "Secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return data

    def claimed_volume(self, namespace: str, claim: str) -> dict:
        """The PersistentVolume a pod's claim is bound to (kubelet's volume manager: the claim must
        be Bound and its volume must name it back), with kubelet's messages when it is not."""
        pvc = self.api.request("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}", missing_ok=True)
        if pvc is None:
            raise PodError(f'persistentvolumeclaim "{claim}" not found')
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if (pvc.get("status") or {}).get("phase") != "Bound" or not volume_name:
            phase = (pvc.get("status") or {}).get("phase", "")
            raise PodError(f'PVC {namespace}/{claim} has non-bound phase ("{phase}")')
        pv = self.api.request("GET", f"/api/v1/persistentvolumes/{volume_name}", missing_ok=True)
        if pv is None:
            raise PodError(f'persistentvolume "{volume_name}" not found')
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != pvc["metadata"]["uid"]:
            raise PodError(f"the PV {volume_name} is not bound to the PVC {namespace}/{claim}")
        return pv

    def token(self, pod: dict, audience: str | None, seconds: int) -> tuple[str, float]:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        account = spec.get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        if audience:
            body["spec"]["audiences"] = [audience]
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        result = self.api.request("POST", path, body)
        status = result.get("status") or {}
        expires = time.time() + seconds
        with contextlib.suppress(KeyError, ValueError):
            expires = time.mktime(time.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        return status["token"], expires

    def kubernetes_service(self) -> tuple[str, str]:
        """The ``default/kubernetes`` Service's cluster IP and https port: what kubelet puts in every
        container's ``KUBERNETES_SERVICE_HOST/PORT``."""
        service = self.api.request("GET", "/api/v1/namespaces/default/services/kubernetes", missing_ok=True)
        spec = (service or {}).get("spec") or {}
        ports = [p for p in spec.get("ports") or [] if p.get("name") == "https"] or spec.get("ports") or []
        if not spec.get("clusterIP") or not ports:
            raise PodError("the default/kubernetes Service has no cluster IP and port yet: the API server makes it")
        return spec["clusterIP"], str(ports[0]["port"])

    def patch_status(self, pod: dict, status: dict) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        self.api.request("PATCH", path, {"status": status}, patch=True)

    def delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        self.api.request("DELETE", path, body, missing_ok=True)
