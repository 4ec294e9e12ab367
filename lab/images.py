"""The lab's "container images": which image repositories the lab's kubelet runs for real, and how.

A bare-metal node pulls an image and runs its entrypoint; the lab has no registry and no container
runtime, so an image the lab knows is an executable built from the same project's Go module at the
version the role deploys (lab/assets.py builds and caches it), or, for collectd, which is C and
no Go module, the executable of this machine's Debian package (``system_path``, installed by
``make system-deps``) at Debian's version, which ``why`` justifies; running "the container" means
running that executable inside the node with what kubelet gives a container (lab/kubelet_pods.py).
Every other image stays a kwok-simulated pod: kwok's stages skip the pods whose image is mapped here
(``kwok_selector``), so exactly one of the two owns each pod's status.

This table is the one place that knows an image; the node reads it as ``image-map.json`` next to
the executables (``/usr/lib/poweraware-lab/images`` inside a node).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil

MAP_FILE = "image-map.json"


@dataclasses.dataclass(frozen=True)
class Image:
    repository: str  # as the roles write it, without tag or digest
    tag: str  # the tag the role deploys: only that version of the image is this executable
    entrypoint: tuple[str, ...]  # the image's ENTRYPOINT: its first word is an executable of the images dir
    version: str  # the version the executable is built at (the role's default tag)
    why: str = ""
    system_path: str = ""  # the executable comes from this machine's Debian package, not a Go build

    def to_json(self) -> dict:
        return {
            "entrypoint": list(self.entrypoint),
            "version": self.version,
        }

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


IMAGES = (
    Image(
        repository="registry.k8s.io/kube-state-metrics/kube-state-metrics",
        tag="v2.13.0",
        # Dockerfile: ENTRYPOINT ["/kube-state-metrics", "--port=8080", "--telemetry-port=8081"]
        entrypoint=("kube-state-metrics", "--port=8080", "--telemetry-port=8081"),
        version="v2.13.0",
    ),
    Image(
        repository="docker.io/intel/telemetry-aware-scheduling",
        tag="0.7.0",
        # Dockerfile: ENTRYPOINT ["/extender"]
        entrypoint=("extender",),
        version="v0.7.0",
        why="the scheduler extender the tas role deploys, called by kube-scheduler through its Service",
    ),
    Image(
        repository="registry.k8s.io/prometheus-adapter/prometheus-adapter",
        tag="v0.12.0",
        # Dockerfile: ENTRYPOINT ["/adapter"]
        entrypoint=("adapter",),
        version="v0.12.0",
        why="serves custom.metrics.k8s.io from Prometheus to TAS and the HPA, behind the aggregator",
    ),
    Image(
        repository="quay.io/prometheus/prometheus",
        tag="v2.53.2",
        # Dockerfile: ENTRYPOINT ["/bin/prometheus"]; the role gives every argument
        entrypoint=("prometheus",),
        version="v2.53.2",
        why="scrapes collectd and kube-state-metrics (Kubernetes service discovery) and records the "
        "power rules; built from its Go module because Debian's package has no Kubernetes discovery",
    ),
    Image(
        repository="docker.io/opnfv/barometer-collectd",
        tag="stable",
        # the role gives the command (/opt/collectd/sbin/collectd -f -C ...): its file name is the key
        entrypoint=("collectd",),
        version="5.12.0 (Debian bookworm's collectd-core package)",
        why="runs the role's RAPL plugin (python plugin) and exports through write_prometheus; "
        "barometer's image builds collectd 5.12 from source too, with the same two plugins",
        system_path="/usr/sbin/collectd",
    ),
)


def system_executables() -> dict[str, pathlib.Path]:
    """The images' executables that come from Debian packages and are installed here, by the name
    the images dir gives them (a pod of a missing one shows it in its status)."""
    found = {}
    for image in IMAGES:
        if image.system_path and os.access(image.system_path, os.X_OK):
            found[image.entrypoint[0]] = pathlib.Path(image.system_path)
    return found


def image_map() -> dict[str, dict]:
    return {image.reference: image.to_json() for image in IMAGES}


def kwok_selector() -> dict:
    """The matchExpression that keeps kwok's pod stages off the pods the lab's kubelet runs: kwok
    evaluates the jq key over every container and NotIn fails when any value is in the list, the
    same rule lab/kubelet_pods.py uses to claim a pod (any mapped container). An image at another
    tag than the one mapped (another version) stays kwok's: the lab has no executable for it."""
    return {
        "key": '.spec.containers.[].image | sub("@.*$"; "")',
        "operator": "NotIn",
        "values": sorted(image.reference for image in IMAGES),
    }


def prepare_images_dir(binaries: dict[str, pathlib.Path], target: pathlib.Path) -> pathlib.Path:
    """One directory the nodes mount read-only: every executable (hard links into the build cache,
    copies across file systems: a symlink would point into the controller's home, which a node does
    not see) and the image map."""
    target.mkdir(parents=True, exist_ok=True)
    for name, source in {**binaries, **system_executables()}.items():
        link = target / name
        source = source.resolve()
        if link.exists() and os.path.samestat(link.stat(), source.stat()):
            continue
        tmp = target / f".{name}.new"
        tmp.unlink(missing_ok=True)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copy2(source, tmp)
        os.replace(tmp, link)
    data = json.dumps(image_map(), indent=2, sort_keys=True) + "\n"
    map_path = target / MAP_FILE
    if not map_path.exists() or map_path.read_text() != data:
        tmp = target / f".{MAP_FILE}.new"
        tmp.write_text(data)
        os.replace(tmp, map_path)
    return target
