"""The lab's "container images": which image repositories the lab's kubelet runs for real, and how.

A bare-metal node pulls an image and runs its entrypoint; the lab has no registry and no container
runtime, so an image the lab knows is an executable built from the same project's Go module at the
version the role deploys (lab/assets.py builds and caches it), or, for collectd, which is C and
no Go module, the executable of this machine's Debian package (``system_path``, installed by
``make system-deps``) at Debian's version, which ``why`` justifies, or, for the power demo's
stress-ng, the lab's own load process (``script``: a stress-ng whose load is simulated, as the
nodes' CPUs are, lab/stress_ng.py); running "the container" means
running that executable inside the node with what kubelet gives a container (lab/kubelet/).
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

from lab import assets
from lab.components import registry
from lab.pki import atomic_write

MAP_FILE = "image-map.json"


@dataclasses.dataclass(frozen=True)
class Image:
    repository: str  # as the roles write it, without tag or digest
    tag: str  # the tag the role deploys: only that version of the image is this executable
    entrypoint: tuple[str, ...]  # the image's ENTRYPOINT: its first word is an executable of the images dir
    version: str  # the version the executable is built at (the role's default tag)
    why: str = ""
    system_path: str = ""  # the executable comes from this machine's Debian package, not a Go build
    script: str = ""  # the executable is this file of the lab (standard library only) run by the node's python3
    user: str = ""  # the image's USER (numeric uid[:gid]), applied when the pod sets no runAsUser
    # Other executables of the image that the roles' containers run, from this machine's Debian
    # packages: (name in the images dir, path here).
    also: tuple[tuple[str, str], ...] = ()
    # The role variable that names this image when its project publishes none: the user builds and
    # pushes it, the role's default is empty, and the lab is such a user (its reference is this one).
    user_built: str = ""
    # Commands of the image whose file in the images dir has another name (the images dir is one
    # directory for every image: the scheduler-plugins image's kube-scheduler is not the lab's own):
    # (name the container runs, name in the images dir).
    executables: tuple[tuple[str, str], ...] = ()
    # A cluster add-on the lab itself applies (lab/addons.py ADDONS), not an image a role deploys.
    addon: bool = False
    # What the lab's power meter counts as the container's CPU use: "requests" (every other image),
    # or "stress-ng" (while the container runs, the CPUs its stress-ng arguments stress).
    cpu_use: str = "requests"

    def to_json(self) -> dict:
        image = {"entrypoint": list(self.entrypoint), "version": self.version}
        if self.user:
            image["user"] = self.user
        if self.executables:
            image["executables"] = dict(self.executables)
        if self.cpu_use != "requests":  # the kubelet's statistics count a stress image's simulated load
            image["cpu_use"] = self.cpu_use
        return image

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


IMAGES = (
    Image(
        repository="registry.k8s.io/kube-state-metrics/kube-state-metrics",
        tag="v2.15.0",
        # Dockerfile: ENTRYPOINT ["/kube-state-metrics", "--port=8080", "--telemetry-port=8081"]
        entrypoint=("kube-state-metrics", "--port=8080", "--telemetry-port=8081"),
        version="v2.15.0",
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
        tag="v3.16.0",
        # Dockerfile: ENTRYPOINT ["/bin/prometheus"]; the role gives every argument
        entrypoint=("prometheus",),
        version="v3.16.0",
        why="scrapes collectd and kube-state-metrics (Kubernetes service discovery) and records the "
        "power rules; built from its Go module because Debian's package has no Kubernetes discovery",
    ),
    Image(
        repository="registry.k8s.io/nfd/node-feature-discovery",
        tag="v0.19.0",
        # Dockerfile: no ENTRYPOINT; the role's containers give the command (nfd-master, nfd-worker), which
        # are both in the images dir; the image runs as USER 65534:65534
        entrypoint=("nfd-master",),
        version="v0.19.0",
        why="nfd-worker reads each node's features (CPUID, the node's /sys under /host-sys, features.d) into "
        "NodeFeature objects; nfd-master turns them and the role's power NodeFeatureRule into node labels",
        user="65534:65534",
    ),
    Image(
        repository="registry.k8s.io/descheduler/descheduler",
        tag="v0.36.0",
        # Dockerfile: no ENTRYPOINT (CMD ["/bin/descheduler", "--help"]); the role gives the command
        entrypoint=("descheduler",),
        version="v0.36.0",
        why="evicts the pods whose required node affinity a node TAS labelled violating no longer meets "
        "(TAS's deschedule strategy); the release for Kubernetes 1.36, which the lab runs",
        user="1000",  # Dockerfile: USER 1000
    ),
    Image(
        repository="registry.k8s.io/scheduler-plugins/kube-scheduler",
        tag="v0.33.5",
        # Dockerfile (build/scheduler): ENTRYPOINT ["/bin/kube-scheduler"], USER 65532:65532
        entrypoint=("kube-scheduler",),
        version="v0.33.5",
        why="the second scheduler the peaks role deploys: kube-scheduler with the Peaks score plugin, which "
        "places the pods that name its schedulerName by the published power models and load-watcher's utilisation",
        user="65532:65532",
        executables=(("kube-scheduler", "scheduler-plugins"),),
    ),
    Image(
        # load-watcher publishes no image: its README has users build one (docker build) and push it
        # to their own registry; the lab's is the local registry such a user pushes to.
        repository="localhost:5000/load-watcher",
        tag="v0.2.4",
        user_built="peaks_load_watcher_image",
        # Dockerfile: CMD ["/bin/load-watcher"] on alpine (root)
        entrypoint=("load-watcher",),
        version="v0.2.4",
        why="serves Peaks the nodes' CPU utilisation (avg_over_time of instance:node_cpu:ratio) from the "
        "stack's Prometheus on :2020/watcher",
    ),
    Image(
        # No maintained collectd image is published: users build the collection's Containerfile
        # (roles/collectd/files/Containerfile) and push it; the lab is such a user, whose registry is the
        # local one (inventory/lab/group_vars/all/cluster_stack.yml names it).
        repository="localhost:5000/poweraware/collectd",
        tag="5.12.0-14",
        user_built="collectd_image",
        # the role gives the command (/usr/sbin/collectd -f -C ...): its file name is the key
        entrypoint=("collectd",),
        # Debian bookworm's collectd-core version, which the Containerfile installs and this machine runs
        version="5.12.0-14",
        why="runs the role's RAPL plugin (python plugin) and the cpu plugin (each node's /proc/stat) and exports "
        "through write_prometheus: the Containerfile installs the same Debian packages this machine runs",
        system_path="/usr/sbin/collectd",
        # the role's energy reader container runs the image's python3 (Debian's 3.11, as the Containerfile's)
        also=(("python3", "/usr/bin/python3"),),
        user="65534:65534",
    ),
    Image(
        repository="docker.io/library/python",
        tag="3.12.14-slim-bookworm",
        # the power_extender role's static pod runs python3 on our code from a host directory
        entrypoint=("python3",),
        version="3.11 (Debian bookworm's python3 package)",
        why="a stock Python image runs our scheduler extender, which is standard library only and Python 3.9 "
        "compatible (module_utils), so Debian's 3.11 runs the same files the image's 3.12 would",
        system_path="/usr/bin/python3",
    ),
    Image(
        repository="quay.io/prometheus-operator/prometheus-config-reloader",
        tag="v0.92.0",
        # Dockerfile: USER nobody, ENTRYPOINT ["/bin/prometheus-config-reloader"]; the role gives the args
        entrypoint=("prometheus-config-reloader",),
        version="v0.92.0",
        why="the prometheus role's sidecar: reloads Prometheus when kubelet brings a changed configuration "
        "or rules file into the pod",
        user="65534",
    ),
    Image(
        repository="registry.k8s.io/metrics-server/metrics-server",
        tag="v0.9.0",
        # Dockerfile: USER 65534, ENTRYPOINT ["/metrics-server"]; the release's Deployment gives the args
        entrypoint=("metrics-server",),
        version="v0.9.0",
        why="the cluster's resource metrics API (kubectl top, resource-metric HPAs), from the kubelets' "
        "/metrics/resource; the lab applies its release manifests as a cluster add-on",
        user="65534",
        addon=True,
    ),
    # kubeadm's own add-ons (`kubeadm init phase addon all`, as `kubeadm init` applies them): the
    # Services' data path on every node, and the cluster DNS.
    Image(
        repository="registry.k8s.io/kube-proxy",
        tag="v1.36.3",
        # the image has no ENTRYPOINT; kubeadm's DaemonSet runs /usr/local/bin/kube-proxy --config=...
        entrypoint=("kube-proxy",),
        version="v1.36.3",
        why="Services as a kubeadm cluster has them: kube-proxy (iptables mode) on every node DNATs a "
        "ClusterIP to an endpoint, so the endpoint sees the client pod's own address",
        addon=True,
    ),
    Image(
        repository="registry.k8s.io/coredns/coredns",
        tag="v1.14.2",
        # Dockerfile: USER nonroot (65532), ENTRYPOINT ["/coredns"]; kubeadm's Deployment gives -conf
        entrypoint=("coredns",),
        version="v1.14.2",
        why="the cluster DNS kubeadm deploys (Service kube-system/kube-dns, 10.96.0.10), whose pods the "
        "roles' DNS egress rules admit by their k8s-app: kube-dns label",
        user="65532",
        addon=True,
    ),
    # The lab's NetworkPolicy engine (lab/components/kube_router.py), as a kubeadm user adds one.
    Image(
        repository="docker.io/cloudnativelabs/kube-router",
        tag="v2.1.0",
        # Dockerfile: ENTRYPOINT ["/usr/local/bin/kube-router"]; the DaemonSet gives the args
        entrypoint=("kube-router",),
        version="v2.1.0",
        why="enforces NetworkPolicies (its firewall alone, beside the lab's overlay) as a cluster's CNI does, "
        "judging each packet by the source address the pod sees",
        addon=True,
    ),
    Image(
        repository="docker.io/alexeiled/stress-ng",
        tag="0.12.05",
        # Dockerfile: ENTRYPOINT ["/stress-ng"]; the role gives --cpu and --timeout as args
        entrypoint=("stress-ng",),
        version="the lab's load process, stress-ng's --cpu, --cpu-load and --timeout",
        why="the power demo's load: the CPUs it stresses are counted by the lab's power meter while it "
        "runs (this machine has two cores for all the nodes), and its timeout ends it as stress-ng's does",
        script="stress_ng.py",
        cpu_use="stress-ng",
    ),
    Image(
        repository="docker.io/library/alpine",
        tag="3.17.3",
        # no ENTRYPOINT, CMD ["/bin/sh"]; the power demo's init container runs its sleep (busybox)
        entrypoint=("sh",),
        version="Debian bookworm's dash and coreutils sleep",
        why="the power demo's dormant start: its init container sleeps before stress-ng starts",
        system_path="/bin/sh",
        also=(("sleep", "/usr/bin/sleep"),),
    ),
)


# The previous release's (v0.1.0) images at the versions this release moved on from, which
# test_upgrade.py converges for real before this release (lab/assets.py PREVIOUS_RELEASE builds
# them; make lifecycle). Each is this release's image of the same repository (entrypoint, user) at
# the previous tag, its executables those of the build of that version, under the previous names
# (assets.previous_name). The lab maps them only when every one of them is built
# (previous_available), so that none falls to kwok half-way.
def _previous(repository: str, tag: str) -> Image:
    current = next(image for image in IMAGES if image.repository == repository)
    build = next(c for c in assets.PREVIOUS_RELEASE if assets.previous_version(c) == tag)
    return dataclasses.replace(
        current,
        tag=tag,
        version=tag,
        why="the previous release's, which test_upgrade.py converges before this release's",
        executables=tuple((name, assets.previous_name(name, tag)) for name in build.binaries),
    )


PREVIOUS_IMAGES = (
    _previous("quay.io/prometheus/prometheus", "v2.53.2"),
    _previous("quay.io/prometheus-operator/prometheus-config-reloader", "v0.85.0"),
    _previous("registry.k8s.io/nfd/node-feature-discovery", "v0.17.3"),
    _previous("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.13.0"),
    # The previous release's default collectd image, which no build of ours stands for: the Debian
    # collectd this release's image runs too, started by the previous command
    # (/opt/collectd/sbin/collectd: its file name is the key); barometer's image has no USER.
    Image(
        repository="docker.io/opnfv/barometer-collectd",
        tag="stable",
        entrypoint=("collectd",),
        version="5.12.0 (Debian bookworm's collectd-core; barometer builds collectd 5.12 from source)",
        why="the previous release's default collectd image",
        system_path="/usr/sbin/collectd",
        also=(("python3", "/usr/bin/python3"),),
    ),
)


def previous_available() -> bool:
    """Whether the lab runs PREVIOUS_IMAGES: every build of the previous release is in the cache."""
    return assets.previous_release_built()


def _mapped_images() -> tuple[Image, ...]:
    return IMAGES + (PREVIOUS_IMAGES if previous_available() else ())


def stress_images() -> dict[str, dict]:
    """The images whose containers' CPU use is what their stress-ng arguments ask for, by reference
    (as in the image map: the entrypoint the container's args follow)."""
    return {image.reference: image.to_json() for image in IMAGES if image.cpu_use == "stress-ng"}


def system_executables() -> dict[str, pathlib.Path]:
    """The images' executables that come from Debian packages and are installed here, by the name
    the images dir gives them (a pod of a missing one shows it in its status)."""
    found = {}
    for image in IMAGES:
        if image.system_path and os.access(image.system_path, os.X_OK):
            found[image.entrypoint[0]] = pathlib.Path(image.system_path)
        for name, path in image.also:
            if os.access(path, os.X_OK):
                found[name] = pathlib.Path(path)
    return found


SCRIPT_INTERPRETER = "#!/usr/bin/python3\n"  # the nodes' Python (Debian's), as the lab's sshd and sudo are


def lab_scripts() -> dict[str, pathlib.Path]:
    """The images' executables that are files of the lab, by the name the images dir gives them."""
    here = pathlib.Path(__file__).parent
    return {image.entrypoint[0]: here / image.script for image in IMAGES if image.script}


def _write_if_changed(path: pathlib.Path, data: str, mode: int) -> None:
    if not (path.exists() and path.read_text() == data and path.stat().st_mode & 0o777 == mode):
        atomic_write(path, data, mode)


def mirrored_images() -> list[tuple[str, str, list[str], str]]:
    """What the site's mirror holds (lab/components/registry.py): every image a role deploys, as
    (repository, tag, entrypoint, user); the add-ons the lab applies itself come from their public
    references."""
    return [(i.repository, i.tag, list(i.entrypoint), i.user) for i in IMAGES if not i.addon]


def image_map() -> dict[str, dict]:
    """Every reference the lab's kubelet runs: the public ones (preloaded on the nodes, as an
    air-gapped site imports images) and the mirror's, which the kubelet pulls before it runs them
    (``pull``: through the registry API, with the pod's pull secrets)."""
    found = {image.reference: image.to_json() for image in _mapped_images()}
    for image in IMAGES:
        if not image.addon:
            mirrored = f"{registry.MIRROR}/{registry.mirrored(image.repository)}:{image.tag}"
            found[mirrored] = {**image.to_json(), "pull": True}
    return found


def kwok_selector() -> dict:
    """The matchExpression that keeps kwok's pod stages off the pods the lab's kubelet runs: kwok
    evaluates the jq key over every container and NotIn fails when any value is in the list, the
    same rule lab/kubelet/pods.py uses to claim a pod (any mapped container). An image at another
    tag than the one mapped (another version) stays kwok's: the lab has no executable for it."""
    return {
        "key": '.spec.containers.[].image | sub("@.*$"; "")',
        "operator": "NotIn",
        "values": sorted(image_map()),
    }


def prepare_images_dir(binaries: dict[str, pathlib.Path], target: pathlib.Path) -> pathlib.Path:
    """One directory the nodes mount read-only: every executable (hard links into the build cache,
    copies across file systems: a symlink would point into the controller's home, which a node does
    not see; the lab's scripts written out behind their interpreter line) and the image map."""
    target.mkdir(parents=True, exist_ok=True)
    for name, source in lab_scripts().items():
        # a script of the lab becomes an executable of the image: the source behind its interpreter line
        _write_if_changed(target / name, SCRIPT_INTERPRETER + source.read_text(), 0o755)
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
    _write_if_changed(target / MAP_FILE, json.dumps(image_map(), indent=2, sort_keys=True) + "\n", 0o644)
    return target
