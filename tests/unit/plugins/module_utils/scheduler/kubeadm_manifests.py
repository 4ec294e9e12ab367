"""kube-scheduler static pod manifests as kubeadm writes them, release by release (1.18 .. 1.36).

kubeadm builds the Pod in cmd/kubeadm/app/phases/controlplane/manifests.go (GetStaticPodSpecs,
getSchedulerCommand) and cmd/kubeadm/app/util/staticpod/utils.go (ComponentPod, LivenessProbe,
ReadinessProbe, StartupProbe) and writes it with sigs.k8s.io/yaml, so keys come out sorted and
sequences are not indented. What changed between releases (kubeadm PRs in kubernetes/kubernetes):

| from | change | PR |
|---|---|---|
| 1.18 | the oldest (v1.18.20's kubeadm source, below) | - |
| 1.19 | startupProbe; probes `initialDelaySeconds: 10`, `periodSeconds: 10`; `system-node-critical` | #91179 |

1.18 (k8s.io/kubernetes v1.18.20, cmd/kubeadm/app/util/staticpod/utils.go): a liveness probe only,
with `initialDelaySeconds: 15` and no `periodSeconds`, `priorityClassName: system-cluster-critical`,
and `--port=0` already there in that patch release.
| 1.22 | pod `securityContext.seccompProfile: RuntimeDefault` | #100234 |
| 1.23 | `--port=0` removed (flag is a no-op) | #105034 |
| 1.25 | default image registry `registry.k8s.io` (was `k8s.gcr.io`) | kubeadm 1.25 |
| 1.27 | `priority: 2000001000` next to `priorityClassName: system-node-critical` | #114338 |
| 1.32 | probes use `/livez` (liveness, startup) and a `/readyz` readinessProbe | #126945 |
| 1.34 | probes use the named port `probe-port` declared in `ports` | #132776 |
| 1.34 | `creationTimestamp: null` no longer written (apimachinery omitzero) | #130989 |

The 1.36 output was checked against the kubeadm source of the lab's pinned release
(k8s.io/kubernetes v1.36.3, cmd/kubeadm/app/phases/controlplane/manifests.go).
`python kubeadm_manifests.py DIR` writes DIR/kubeadm-1.NN.yaml; the golden test checks the
committed inputs still match this generator.
"""

from __future__ import annotations

import pathlib
import sys

FIRST, LAST = 18, 36


def image_tag(minor: int) -> str:
    return {18: "v1.18.20", 36: "v1.36.3"}.get(minor, f"v1.{minor}.0")


def kubeadm_scheduler_manifest(minor: int) -> str:
    registry = "registry.k8s.io" if minor >= 25 else "k8s.gcr.io"
    kubeconfig = "/etc/kubernetes/scheduler.conf"
    flags = {
        "authentication-kubeconfig": kubeconfig,
        "authorization-kubeconfig": kubeconfig,
        "bind-address": "127.0.0.1",
        "kubeconfig": kubeconfig,
        "leader-elect": "true",
    }
    if minor <= 22:
        flags["port"] = "0"
    health = "/livez" if minor >= 32 else "/healthz"
    port = "probe-port" if minor >= 34 else "10259"

    def probe(name, path, failure, initial, period):
        out = [f"    {name}:", f"      failureThreshold: {failure}", "      httpGet:", "        host: 127.0.0.1"]
        out += [f"        path: {path}", f"        port: {port}", "        scheme: HTTPS"]
        if initial:
            out.append(f"      initialDelaySeconds: {initial}")
        if period:
            out.append(f"      periodSeconds: {period}")
        out.append("      timeoutSeconds: 15")
        return out

    lines = ["apiVersion: v1", "kind: Pod", "metadata:"]
    if minor < 34:
        lines.append("  creationTimestamp: null")
    lines += [
        "  labels:",
        "    component: kube-scheduler",
        "    tier: control-plane",
        "  name: kube-scheduler",
        "  namespace: kube-system",
        "spec:",
        "  containers:",
        "  - command:",
        "    - kube-scheduler",
    ]
    lines += [f"    - --{k}={v}" for k, v in sorted(flags.items())]
    lines += [f"    image: {registry}/kube-scheduler:{image_tag(minor)}", "    imagePullPolicy: IfNotPresent"]
    if minor >= 19:
        lines += probe("livenessProbe", health, 8, 10, 10)
    else:
        lines += probe("livenessProbe", health, 8, 15, 0)
    lines.append("    name: kube-scheduler")
    if minor >= 34:
        lines += ["    ports:", "    - containerPort: 10259", "      name: probe-port", "      protocol: TCP"]
    if minor >= 32:
        lines += probe("readinessProbe", "/readyz", 3, 0, 1)
    lines += ["    resources:", "      requests:", "        cpu: 100m"]
    if minor >= 19:
        lines += probe("startupProbe", health, 24, 10, 10)
    lines += [
        "    volumeMounts:",
        f"    - mountPath: {kubeconfig}",
        "      name: kubeconfig",
        "      readOnly: true",
        "  hostNetwork: true",
    ]
    if minor >= 27:
        lines.append("  priority: 2000001000")
    lines.append(f"  priorityClassName: {'system-node-critical' if minor >= 19 else 'system-cluster-critical'}")
    if minor >= 22:
        lines += ["  securityContext:", "    seccompProfile:", "      type: RuntimeDefault"]
    lines += [
        "  volumes:",
        "  - hostPath:",
        f"      path: {kubeconfig}",
        "      type: FileOrCreate",
        "    name: kubeconfig",
        "status: {}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for minor in range(FIRST, LAST + 1):
        (out / f"kubeadm-1.{minor}.yaml").write_text(kubeadm_scheduler_manifest(minor))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
