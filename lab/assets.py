"""Find or build the lab's binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.

Order of precedence:
1. ``POWERAWARE_K8S_ASSETS`` or ``KUBEBUILDER_ASSETS`` (the envtest convention) names a directory of
   prebuilt binaries: it is used as it is and nothing is built.
2. The per-user cache ``${XDG_CACHE_HOME:-~/.cache}/poweraware-k8s/<component>-<version>/bin``.
3. A build from the Go module proxy with the wrapper modules in ``lab/go/<component>``, whose
   ``go.mod``/``go.sum`` pin every version; the result goes into the cache (2).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

GO_DIR = pathlib.Path(__file__).resolve().parent / "go"
ASSETS_ENV_VARS = ("POWERAWARE_K8S_ASSETS", "KUBEBUILDER_ASSETS")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# Linked into the lab's bin/ when there, never required (an assets directory may lack them): kubectl,
# kubeadm (installed on the nodes), and the executables of the images the lab runs (lab/images.py; a
# pod whose executable is missing shows it in its status).
OPTIONAL_BINARIES = (
    "kubectl",
    "kubeadm",
    "kube-state-metrics",
    "extender",
    "adapter",
    "prometheus",
    "descheduler",
    "scheduler-plugins",
    "load-watcher",
    "nfd-master",
    "nfd-worker",
    "cri-streaming",
    "metrics-server",
    "prometheus-config-reloader",
    "kube-proxy",
    "coredns",
    "kube-router",
)
# Go's usual install place on these machines; PATH wins when it has a go.
GO_FALLBACKS = ("/usr/local/go/bin/go",)


class AssetsError(RuntimeError):
    """The binaries cannot be had: the message says what to do."""


@dataclasses.dataclass(frozen=True)
class GoBuild:
    """One wrapper module in lab/go and what it builds."""

    name: str
    module: str  # the required module whose version keys the cache
    packages: tuple[str, ...]  # built in one `go build` so shared packages compile once
    binaries: tuple[str, ...]
    output_name: str | None = None  # for a single package whose directory name is not the binary's
    version_packages: tuple[str, ...] = ()  # packages whose version variables the release build sets
    stamps: tuple[str, ...] = ()  # other -X package.variable=value stamps the project's release build sets
    # directories of the required module's source kept beside the binaries (metrics-server's manifests)
    sources: tuple[str, ...] = ()

    def ldflags(self) -> str:
        """-s -w, plus the version stamps Kubernetes' own build sets (hack/lib/version.sh), so that
        `/version` and `--version` report the release instead of v0.0.0-master."""
        flags = ["-s", "-w"]
        if self.version_packages:
            version = self.version
            major, minor = version.lstrip("v").split(".")[:2]
            for package in self.version_packages:
                for name, value in (
                    ("gitVersion", version),
                    ("gitMajor", major),
                    ("gitMinor", minor),
                    ("gitCommit", ""),
                    ("gitTreeState", "clean"),
                ):
                    flags.append(f"-X {package}.{name}={value}")
        flags += [f"-X {stamp}" for stamp in self.stamps]
        return " ".join(flags)

    def recipe(self) -> str:
        """Everything that decides what the build produces: a change means a rebuild."""
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.module_dir / name).read_bytes())
        for source in sorted(self.module_dir.glob("*.go")):  # a wrapper module's own main package
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
        built = (self.packages, self.binaries, self.output_name, self.ldflags())
        digest.update(repr((*built, self.sources) if self.sources else built).encode())
        return digest.hexdigest()

    @property
    def module_dir(self) -> pathlib.Path:
        return GO_DIR / self.name

    @property
    def version(self) -> str:
        return module_version(self.module_dir / "go.mod", self.module)


# Where Kubernetes' release build stamps its version (hack/lib/version.sh).
KUBERNETES_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")

COMPONENTS = (
    GoBuild(
        name="kubernetes",
        module="k8s.io/kubernetes",
        packages=(
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
        ),
        binaries=("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
        version_packages=KUBERNETES_VERSION_PACKAGES,
    ),
    # kubeadm of the same release, installed on every node at /usr/bin/kubeadm as the kubeadm package
    # installs it (lab/node_init.py): what a user upgrades with, and what regenerates the static-pod
    # manifests from kubeadm's own templates (`kubeadm init phase control-plane`, `kubeadm upgrade`).
    GoBuild(
        name="kubeadm",
        module="k8s.io/kubernetes",
        packages=("k8s.io/kubernetes/cmd/kubeadm",),
        binaries=("kubeadm",),
        version_packages=KUBERNETES_VERSION_PACKAGES,
    ),
    # kube-proxy of the same release: the registry.k8s.io/kube-proxy image's /usr/local/bin/kube-proxy,
    # which kubeadm's kube-proxy add-on runs on every node (lab/cluster.py runs `kubeadm init phase addon`).
    GoBuild(
        name="kube-proxy",
        module="k8s.io/kubernetes",
        packages=("k8s.io/kubernetes/cmd/kube-proxy",),
        binaries=("kube-proxy",),
        version_packages=KUBERNETES_VERSION_PACKAGES,
    ),
    # CoreDNS at the version kubeadm's DNS add-on deploys (the image's /coredns; its Makefile: go build
    # of the module's main package, CGO_ENABLED=0, the commit stamped): the cluster's DNS, and the
    # site's resolver the nodes' resolv.conf names (lab/components/site_dns.py).
    GoBuild(
        name="coredns",
        module="github.com/coredns/coredns",
        packages=("github.com/coredns/coredns",),
        binaries=("coredns",),
        output_name="coredns",
    ),
    # kube-router, the lab's NetworkPolicy engine (the cloudnativelabs/kube-router image's
    # /usr/local/bin/kube-router; its Makefile: go build ./cmd/kube-router with the version stamped), with
    # the project's DaemonSet manifests its firewall add-on is made from (lab/cluster.py).
    GoBuild(
        name="kube-router",
        module="github.com/cloudnativelabs/kube-router/v2",
        packages=("github.com/cloudnativelabs/kube-router/v2/cmd/kube-router",),
        binaries=("kube-router",),
        output_name="kube-router",
        stamps=("github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v2.1.0",),
        sources=("daemonset",),
    ),
    GoBuild(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        packages=("go.etcd.io/etcd/server/v3",),
        binaries=("etcd",),
        output_name="etcd",
    ),
    GoBuild(
        name="kwok",
        module="sigs.k8s.io/kwok",
        packages=("sigs.k8s.io/kwok/cmd/kwok",),
        binaries=("kwok",),
    ),
    # The images the lab runs for real (lab/images.py), at the versions the roles deploy.
    GoBuild(
        name="kube-state-metrics",
        module="k8s.io/kube-state-metrics/v2",
        packages=("k8s.io/kube-state-metrics/v2",),
        binaries=("kube-state-metrics",),
        output_name="kube-state-metrics",
    ),
    GoBuild(
        name="tas",
        module="github.com/intel/platform-aware-scheduling/telemetry-aware-scheduling",
        # The image's /extender is the module's cmd package (its Makefile: go build -o bin/extender ./cmd).
        packages=("github.com/intel/platform-aware-scheduling/telemetry-aware-scheduling/cmd",),
        binaries=("extender",),
        output_name="extender",
    ),
    GoBuild(
        name="prometheus-adapter",
        module="sigs.k8s.io/prometheus-adapter",
        # The image's /adapter (its Makefile: go build -o adapter ./cmd/adapter).
        packages=("sigs.k8s.io/prometheus-adapter/cmd/adapter",),
        binaries=("adapter",),
        output_name="adapter",
    ),
    GoBuild(
        name="prometheus",
        module="github.com/prometheus/prometheus",
        # The image's /bin/prometheus; its web UI is not built in (the release embeds assets that
        # need npm), so the UI pages answer 404 and the API, which is all the stack uses, works.
        # promtool of the same release checks and unit-tests the power rules as Prometheus 3 reads them
        # (tests/integration/test_prometheus_rules.py; Debian's promtool, a 2.x, checks them too).
        packages=("github.com/prometheus/prometheus/cmd/prometheus", "github.com/prometheus/prometheus/cmd/promtool"),
        binaries=("prometheus", "promtool"),
        # .promu.yml: what `prometheus --version` and /api/v1/status/buildinfo report
        stamps=(
            "github.com/prometheus/common/version.Version=3.16.0",
            "github.com/prometheus/common/version.Branch=HEAD",
            "github.com/prometheus/common/version.BuildUser=poweraware-lab",
        ),
    ),
    GoBuild(
        name="nfd",
        module="sigs.k8s.io/node-feature-discovery",
        # The image's nfd-master and nfd-worker (its Dockerfile: go install ./cmd/...), which the role's
        # containers name as their command.
        packages=(
            "sigs.k8s.io/node-feature-discovery/cmd/nfd-master",
            "sigs.k8s.io/node-feature-discovery/cmd/nfd-worker",
        ),
        binaries=("nfd-master", "nfd-worker"),
        # The image build's LDFLAGS (Makefile, Dockerfile): the version `-version` reports, and the
        # container's host mount prefix, under which the worker's DaemonSet mounts /sys, /boot, /etc...
        stamps=(
            "sigs.k8s.io/node-feature-discovery/pkg/version.version=v0.19.0",
            "sigs.k8s.io/node-feature-discovery/pkg/utils/hostpath.pathPrefix=/host-",
        ),
    ),
    GoBuild(
        name="descheduler",
        module="sigs.k8s.io/descheduler",
        # The image's /bin/descheduler (its Makefile: go build -o _output/bin/descheduler ./cmd/descheduler).
        packages=("sigs.k8s.io/descheduler/cmd/descheduler",),
        binaries=("descheduler",),
        output_name="descheduler",
        # Makefile's LDFLAGS: what `descheduler version` reports
        stamps=("sigs.k8s.io/descheduler/pkg/version.version=v0.36.0",),
    ),
    GoBuild(
        name="scheduler-plugins",
        module="sigs.k8s.io/scheduler-plugins",
        # The image's /bin/kube-scheduler with the out-of-tree plugins, Peaks among them (its Makefile:
        # go build -o bin/kube-scheduler cmd/scheduler/main.go). Named apart from the lab's own
        # kube-scheduler; the image map gives the image's name back (lab/images.py).
        packages=("sigs.k8s.io/scheduler-plugins/cmd/scheduler",),
        binaries=("scheduler-plugins",),
        output_name="scheduler-plugins",
        # Its Makefile stamps the scheduler-plugins release (VERSION=v0.33.5) as Kubernetes' gitVersion;
        # kube-scheduler 1.33 takes its binary version from that stamp and refuses to start below its
        # emulation floor ("emulation version 0.33 is not between [1.31, 0.33.0]"). The Kubernetes
        # release it is built against is the version that starts (docs/peaks.md).
        stamps=("k8s.io/component-base/version.gitVersion=v1.33.5",),
    ),
    # The container runtime's streaming server (exec, attach, port-forward) the lab's kubelet asks for
    # stream URLs, as kubelet asks containerd: k8s.io/cri-streaming at the lab's release, with the
    # lab's runtime (main.go) behind it; the kubelet starts it from the nodes' images directory.
    GoBuild(
        name="cri-streaming",
        module="k8s.io/cri-streaming",
        packages=("poweraware.example/k8s/lab/cri-streaming",),
        binaries=("cri-streaming",),
        output_name="cri-streaming",
    ),
    # The prometheus role's reloader sidecar (the image's /bin/prometheus-config-reloader; the project's
    # Makefile: go build ./cmd/prometheus-config-reloader, its version stamped into prometheus/common).
    GoBuild(
        name="prometheus-config-reloader",
        module="github.com/prometheus-operator/prometheus-operator",
        packages=("github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader",),
        binaries=("prometheus-config-reloader",),
        output_name="prometheus-config-reloader",
        stamps=("github.com/prometheus/common/version.Version=0.92.0",),
    ),
    # metrics-server, the cluster add-on behind kubectl top and resource-metric HPAs (the image's
    # /metrics-server; its Makefile: go build -o metrics-server ./cmd/metrics-server), with the
    # manifests its release's components.yaml is built from (lab/cluster.py applies overlays/release).
    GoBuild(
        name="metrics-server",
        module="sigs.k8s.io/metrics-server",
        packages=("sigs.k8s.io/metrics-server/cmd/metrics-server",),
        binaries=("metrics-server",),
        output_name="metrics-server",
        stamps=("k8s.io/client-go/pkg/version.gitVersion=v0.9.0",),
        sources=("manifests",),
    ),
    # The site's image mirror (lab/components/registry.py): the CNCF Distribution registry, the
    # `registry:3` image's /bin/registry (its Makefile: go build ./cmd/registry, the version stamped),
    # and the wrapper's labhtpasswd for its bcrypt htpasswd file.
    GoBuild(
        name="registry",
        module="github.com/distribution/distribution/v3",
        packages=(
            "github.com/distribution/distribution/v3/cmd/registry",
            "poweraware.example/k8s/lab/registry/labhtpasswd",
        ),
        binaries=("registry", "labhtpasswd"),
        stamps=("github.com/distribution/distribution/v3/version.version=v3.1.2",),
    ),
    GoBuild(
        name="load-watcher",
        module="github.com/paypal/load-watcher",
        # The image its Dockerfile builds: /bin/load-watcher (Makefile: go build -o bin/load-watcher main.go).
        packages=("github.com/paypal/load-watcher",),
        binaries=("load-watcher",),
        output_name="load-watcher",
    ),
)


# Older kube-schedulers, one per kubescheduler.config.k8s.io version the lab's release no longer serves,
# that load the extender module's configurations in that version (tests/integration/
# test_scheduler_config_versions.py): v1beta1 (1.19 - 1.21), v1beta2 (1.22), v1beta3 (1.23, 1.24).
# Not lab binaries: `scheduler_release` builds one on first use, never at lab start.
SCHEDULER_RELEASES = tuple(
    GoBuild(
        name=f"kube-scheduler-v{minor}",
        module="k8s.io/kubernetes",
        packages=("k8s.io/kubernetes/cmd/kube-scheduler",),
        binaries=("kube-scheduler",),
        version_packages=KUBERNETES_VERSION_PACKAGES,
    )
    for minor in ("1.21", "1.22", "1.24")
)


def module_version(go_mod: pathlib.Path, module: str) -> str:
    """The version of ``module`` required by a go.mod (the wrapper modules pin exactly one each)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if not match:
        raise AssetsError(f"{go_mod} does not require {module}")
    return match.group(1)


def kubernetes_version() -> str:
    return COMPONENTS[0].version


def cache_root() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "poweraware-k8s"


def cached_bin_dir(component: GoBuild) -> pathlib.Path:
    return cache_root() / f"{component.name}-{component.version}" / "bin"


def assets_dir_from_env() -> pathlib.Path | None:
    for var in ASSETS_ENV_VARS:
        value = os.environ.get(var)
        if value:
            return pathlib.Path(value).expanduser().resolve()
    return None


def find_go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return next((path for path in GO_FALLBACKS if os.access(path, os.X_OK)), None)


def _missing(directory: pathlib.Path, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if not os.access(directory / name, os.X_OK)]


RECIPE_FILE = "build.json"


def cached_build_current(component: GoBuild) -> bool:
    """The cache holds this component's binaries, built with the current recipe."""
    bin_dir = cached_bin_dir(component)
    if _missing(bin_dir, component.binaries):
        return False
    try:
        stamp = json.loads((bin_dir / RECIPE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("recipe") == component.recipe()


def _copy_sources(component: GoBuild, go: str, staging: pathlib.Path, env: dict) -> None:
    """The module's source directories the lab uses besides its binaries, from the module cache the
    build has just filled (``go list -m -json`` names the module's directory), made writable so a
    rebuild can replace them."""
    listed = subprocess.run(
        [go, "list", "-m", "-json", component.module],
        cwd=component.module_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        raise AssetsError(f"go list -m {component.module} failed: {listed.stderr.strip()}")
    module_dir = pathlib.Path(json.loads(listed.stdout)["Dir"])
    for name in component.sources:
        target = staging / name
        shutil.copytree(module_dir / name, target, copy_function=shutil.copyfile)
        for directory, _dirs, _files in os.walk(target):
            os.chmod(directory, 0o755)  # noqa: S103 - a cache directory of this user's


def build_component(component: GoBuild, go: str, log=print) -> pathlib.Path:
    """Build one component into its cache directory; an interrupted build leaves no partial bin/."""
    target = cached_bin_dir(component)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        # `-o DIR/` names each binary after its package; a single package may need another name.
        output = str(staging / component.output_name) if component.output_name else f"{staging}{os.sep}"
        cmd = [go, "build", "-trimpath", f"-ldflags={component.ldflags()}", "-o", output, *component.packages]
        env = dict(os.environ)
        # The wrapper modules' go.sum is the pin: never rewrite it during a build.
        env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
        log(
            f"building {component.name} {component.version} ({', '.join(component.binaries)}); "
            "the first build takes several minutes"
        )
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=component.module_dir, env=env, check=False)
        if proc.returncode != 0:
            raise AssetsError(f"go build of {component.name} failed (exit {proc.returncode}); see the output above")
        missing = _missing(staging, component.binaries)
        if missing:
            raise AssetsError(f"go build of {component.name} produced no {', '.join(missing)}")
        if component.sources:
            _copy_sources(component, go, staging, env)
        stamp = {"recipe": component.recipe(), "version": component.version, "go": go, "command": cmd[1:]}
        (staging / RECIPE_FILE).write_text(json.dumps(stamp, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        log(f"built {component.name} in {time.monotonic() - started:.0f} s -> {target}")
        return target
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _no_go_message(missing: list[str]) -> str:
    return (
        f"the lab needs {', '.join(missing)} and cannot build them: no Go toolchain found "
        f"(looked in PATH and {', '.join(GO_FALLBACKS)}). Either install Go >= 1.26 and run again "
        f"(binaries are built once from the Go module proxy and cached under {cache_root()}), or set "
        "POWERAWARE_K8S_ASSETS (or KUBEBUILDER_ASSETS) to a directory holding prebuilt "
        f"{', '.join(BINARIES)}."
    )


# The previous release's (v0.1.0) images whose versions this release moved on from, each in a module
# directory of its own (lab/go/<name>): test_upgrade.py (make lifecycle) converges that release for
# real before this one, so its pods must run, not be pretended by kwok. Not built at lab start:
# `python -m lab build --previous` (make lifecycle) builds them, and a lab started with all of them
# in the cache runs them (lab/images.py PREVIOUS_IMAGES), each executable under "<binary>-<version>".
_PROMU_STAMPS = (
    "github.com/prometheus/common/version.Branch=HEAD",
    "github.com/prometheus/common/version.BuildUser=poweraware-lab",
)
PREVIOUS_RELEASE = (
    GoBuild(
        name="prometheus-v2.53.2",
        module="github.com/prometheus/prometheus",
        packages=("github.com/prometheus/prometheus/cmd/prometheus",),
        binaries=("prometheus",),
        output_name="prometheus",
        stamps=("github.com/prometheus/common/version.Version=2.53.2", *_PROMU_STAMPS),
    ),
    GoBuild(
        name="prometheus-config-reloader-v0.85.0",
        module="github.com/prometheus-operator/prometheus-operator",
        packages=("github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader",),
        binaries=("prometheus-config-reloader",),
        output_name="prometheus-config-reloader",
        stamps=("github.com/prometheus/common/version.Version=0.85.0",),
    ),
    GoBuild(
        name="nfd-v0.17.3",
        module="sigs.k8s.io/node-feature-discovery",
        packages=(
            "sigs.k8s.io/node-feature-discovery/cmd/nfd-master",
            "sigs.k8s.io/node-feature-discovery/cmd/nfd-worker",
        ),
        binaries=("nfd-master", "nfd-worker"),
        stamps=(
            "sigs.k8s.io/node-feature-discovery/pkg/version.version=v0.17.3",
            "sigs.k8s.io/node-feature-discovery/pkg/utils/hostpath.pathPrefix=/host-",
        ),
    ),
    GoBuild(
        name="kube-state-metrics-v2.13.0",
        module="k8s.io/kube-state-metrics/v2",
        packages=("k8s.io/kube-state-metrics/v2",),
        binaries=("kube-state-metrics",),
        output_name="kube-state-metrics",
    ),
)


def previous_release_built() -> bool:
    """Whether the cache holds every PREVIOUS_RELEASE build (the lab then runs those images too)."""
    return assets_dir_from_env() is None and all(cached_build_current(c) for c in PREVIOUS_RELEASE)


def previous_version(component: GoBuild) -> str:
    """The release tag a PREVIOUS_RELEASE build is named after (``nfd-v0.17.3``: ``v0.17.3``)."""
    return component.name.rsplit("-", 1)[1]


def previous_name(binary: str, version: str) -> str:
    """A previous release's executable in the images dir: ``<binary>-<version>`` (``prometheus-v2.53.2``),
    beside this release's ``prometheus``."""
    return f"{binary}-{version}"


def previous_release_binaries(build: bool = False, log=print) -> dict[str, pathlib.Path]:
    """The previous release's executables by their name in the images dir (``previous_name``): every
    one built first when ``build``, none unless all are built."""
    if build:
        for component in PREVIOUS_RELEASE:
            ensure_built(component, log=log)
    if not previous_release_built():
        return {}
    return {
        previous_name(name, previous_version(component)): cached_bin_dir(component) / name
        for component in PREVIOUS_RELEASE
        for name in component.binaries
    }


def resolve_binaries(build: bool = True, log=print) -> dict[str, pathlib.Path]:
    """Map each binary name to its path, building what the cache lacks when ``build`` is true."""
    assets = assets_dir_from_env()
    if assets is not None:
        missing = _missing(assets, BINARIES)
        if missing:
            raise AssetsError(
                f"{assets} (from {'/'.join(ASSETS_ENV_VARS)}) lacks {', '.join(missing)}; the lab builds "
                "nothing when that variable is set: add them there, or unset it to build and cache them"
            )
        found = {name: assets / name for name in BINARIES}
        found.update({name: assets / name for name in OPTIONAL_BINARIES if not _missing(assets, (name,))})
        return found
    if any(not cached_build_current(c) for c in COMPONENTS):
        cache_root().mkdir(parents=True, exist_ok=True)
        # One build at a time per user (make lab and a test session may both need one).
        with open(cache_root() / ".build.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            to_build = [c for c in COMPONENTS if not cached_build_current(c)]
            if to_build:
                missing = [b for c in to_build for b in c.binaries]
                if not build:
                    raise AssetsError(f"not built yet: {', '.join(missing)} (run `make lab` once)")
                go = find_go()
                if go is None:
                    raise AssetsError(_no_go_message(missing))
                for component in to_build:
                    build_component(component, go, log=log)
    paths: dict[str, pathlib.Path] = {}
    for component in COMPONENTS:
        for name in component.binaries:
            paths[name] = cached_bin_dir(component) / name
    paths.update(previous_release_binaries())
    return paths


def ensure_built(component: GoBuild, log=print) -> pathlib.Path:
    """The component's cache directory (bin/), built first, under the per-user build lock, unless the
    cache holds the current recipe's build. For binaries the lab does not start (resolve_binaries)."""
    if not cached_build_current(component):
        cache_root().mkdir(parents=True, exist_ok=True)
        with open(cache_root() / ".build.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cached_build_current(component):
                go = find_go()
                if go is None:
                    raise AssetsError(
                        f"{component.name} {component.version} is not built and no Go toolchain was found (looked "
                        f"in PATH and {', '.join(GO_FALLBACKS)}); install Go >= 1.26 to build it into {cache_root()}"
                    )
                build_component(component, go, log=log)
    return cached_bin_dir(component)


def build_all(log=print, older_schedulers: bool = True) -> None:
    """Every Go binary the test suite uses: the lab's (``resolve_binaries``) and, unless told
    otherwise, the older kube-schedulers (SCHEDULER_RELEASES), which only the config-version test
    runs. ``make integration`` calls it before the tests, so that a cold cache is built outside any
    test's timeout (about 40 minutes on two cores) and a warm one costs a look at each recipe."""
    resolve_binaries(build=True, log=log)
    if not older_schedulers:
        return
    for component in SCHEDULER_RELEASES:  # built whatever POWERAWARE_K8S_ASSETS says, as scheduler_release does
        ensure_built(component, log=log)


def scheduler_release(name: str, log=print) -> pathlib.Path:
    """The kube-scheduler of a release: ``"lab"`` for the lab's own (from POWERAWARE_K8S_ASSETS or
    KUBEBUILDER_ASSETS when set, like the lab), or one of SCHEDULER_RELEASES by name
    (``kube-scheduler-v1.21``); built on first use, without starting the lab."""
    if name == "lab":
        assets = assets_dir_from_env()
        if assets is not None:
            return assets / "kube-scheduler"
        return ensure_built(COMPONENTS[0], log=log) / "kube-scheduler"
    component = next((c for c in SCHEDULER_RELEASES if c.name == name), None)
    if component is None:
        raise AssetsError(f"no kube-scheduler release {name!r}: known {', '.join(c.name for c in SCHEDULER_RELEASES)}")
    return ensure_built(component, log=log) / "kube-scheduler"


def link_bin_dir(binaries: dict[str, pathlib.Path], bin_dir: pathlib.Path) -> pathlib.Path:
    """One directory with every binary (symlinks), as envtest's assets directory has."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, path in binaries.items():
        link = bin_dir / name
        if link.is_symlink() or link.exists():
            if link.is_symlink() and pathlib.Path(os.readlink(link)) == path:
                continue
            link.unlink()
        link.symlink_to(path)
    return bin_dir
