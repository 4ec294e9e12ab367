"""The lab's "container images": which image repositories the lab's kubelet runs for real, and how.

A bare-metal node pulls an image and runs its entrypoint; the lab has no registry and no container
runtime, so an image the lab knows is an executable built from the same project's Go module at the
version the role deploys (lab/assets.py builds and caches it), and running "the container" means
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
    entrypoint: tuple[str, ...]  # the image's ENTRYPOINT: its first word is an executable of the images dir
    version: str  # the version the executable is built at (the role's default tag)
    # Flags that make the process listen on the pod's own address instead of every address (the
    # lab's pods share the machine's network namespace). Added unless the container sets the flag.
    pod_address_flags: tuple[str, ...] = ()
    why: str = ""

    def to_json(self) -> dict:
        return {
            "entrypoint": list(self.entrypoint),
            "version": self.version,
            "pod_address_flags": list(self.pod_address_flags),
        }


IMAGES = (
    Image(
        repository="registry.k8s.io/kube-state-metrics/kube-state-metrics",
        # Dockerfile: ENTRYPOINT ["/kube-state-metrics", "--port=8080", "--telemetry-port=8081"]
        entrypoint=("kube-state-metrics", "--port=8080", "--telemetry-port=8081"),
        version="v2.13.0",
        # Both listeners default to "::" (every address).
        pod_address_flags=("--host={pod_ip}", "--telemetry-host={pod_ip}"),
    ),
)


def repository_of(image: str) -> str:
    """``registry/path/name`` of an image reference: without ``@digest`` and without ``:tag`` (a
    colon in the registry part is a port, not a tag)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return name


def image_map() -> dict[str, dict]:
    return {image.repository: image.to_json() for image in IMAGES}


def kwok_selector() -> dict:
    """The matchExpression that keeps kwok's pod stages off the pods the lab's kubelet runs: kwok
    evaluates the jq key over every container and NotIn fails when any value is in the list, the
    same rule lab/kubelet_pods.py uses to claim a pod (any mapped container)."""
    return {
        "key": '.spec.containers.[].image | sub("@.*$"; "") | sub(":[^:/]*$"; "")',
        "operator": "NotIn",
        "values": sorted(image.repository for image in IMAGES),
    }


def prepare_images_dir(binaries: dict[str, pathlib.Path], target: pathlib.Path) -> pathlib.Path:
    """One directory the nodes mount read-only: every executable (hard links into the build cache,
    copies across file systems: a symlink would point into the controller's home, which a node does
    not see) and the image map."""
    target.mkdir(parents=True, exist_ok=True)
    for name, source in binaries.items():
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
