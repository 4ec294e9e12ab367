# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes descheduler that gives TAS's ``deschedule`` strategy its effect: which release for
which cluster, and its policy, checked before anything is applied.

Pure logic, no Ansible imports, Python 3.9 compatible.

TAS labels a node ``<policy>=violating`` when it breaks the policy's deschedule rules; that label
does nothing by itself. The descheduler's ``RemovePodsViolatingNodeAffinity`` plugin evicts the pods
whose *required* node affinity the node no longer satisfies (``<policy> NotIn [violating]``), and their
controllers recreate them where the scheduler, with TAS, puts them (TAS README, "Deschedule").

The checks below are the ones the descheduler makes when it starts (pkg/descheduler/policyconfig.go,
pkg/framework/profile/profile.go and the plugins' validation.go of v0.36.0), plus the ones it only
logs at run time (an unknown ``nodeAffinityType`` is skipped with an error line, evicting nothing):
a policy that would crash-loop the pod, or run and never evict, is refused here instead.
"""

from __future__ import annotations

import re

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import is_dns1123_label

__all__ = [
    "API_VERSION",
    "DIGESTS",
    "RELEASES",
    "PLUGINS",
    "tas_policy",
    "release_for",
    "policy_errors",
    "plan",
]

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"

# Kubernetes minor -> descheduler release. "Starting with descheduler release v0.18 the minor version
# of descheduler matches the minor version of the k8s client packages that it is compiled with", and
# a release is tested against that minor and the two before it (README, "Compatibility Matrix"). The
# newest patch of each minor whose image registry.k8s.io serves: the v0.36.0 user guide's image list
# (docs/user-guide.md) and the patch releases promoted after it was written (v0.30.2, v0.32.2; v0.35.1
# is tagged, but no image of it was promoted). 1.29 is the oldest: v1alpha2, the only policy API this
# role writes, is the only one v0.29 and later read.
RELEASES = {
    29: "v0.29.0",
    30: "v0.30.2",
    31: "v0.31.0",
    32: "v0.32.2",
    33: "v0.33.0",
    34: "v0.34.0",
    35: "v0.35.0",
    36: "v0.36.0",
}

# Release -> the digest of its multi-arch image index, as the descheduler maintainers promoted it to
# registry.k8s.io: kubernetes/k8s.io registry.k8s.io/images/k8s-staging-descheduler/images.yaml (commit
# 2e14a1e6bb62, up to v0.33.0), and the promotion pull requests' own digests for the later ones
# (v0.35.0: 9133, v0.36.0: 9513). v0.34.0's promotion (8710) gives none in text, so it runs by tag
# (docs/security.md#images). The role pins the digest only with a release it chose from RELEASES.
DIGESTS = {
    "v0.29.0": "sha256:227389ece22ac74f7c1de9922270e3a6fde38c0351bb1919ee08f3dd83470005",
    "v0.30.2": "sha256:6512585f9aab6a4e2fcb2c33cc017709fddb507446b07a3bd8fc78ebf25aca48",
    "v0.31.0": "sha256:4001c25d6c967c7c69c76ea1b4619ddcd5568f42df6360e1ba320834cbcd0d5f",
    "v0.32.2": "sha256:df9583a5b0e30e9984a517019316d72674fbfd6ad6065c95284333f7ff1963d4",
    "v0.33.0": "sha256:de38c88dcb1e7d822c4bd320551cc55e541c160c6ba380d99772949b0c967ab0",
    "v0.35.0": "sha256:d6878e6265784f75f450d8d6b47739915c059ade4d68bad4c478ab33667482d5",
    "v0.36.0": "sha256:7ca92c0a7b4f1c51d306409da6b832005fcadb224e384795646376726734c6e5",
}

# Each registered plugin (pkg/descheduler/setupplugins.go) and the extension points it implements
# (the methods of its type): a plugin enabled at a point it lacks stops the descheduler at start
# ("profile %q configures deschedule extension point of non-existing plugins").
PLUGINS = {
    "DefaultEvictor": ("filter", "preEvictionFilter"),
    "LowNodeUtilization": ("balance",),
    "HighNodeUtilization": ("balance",),
    "PodLifeTime": ("deschedule",),
    "RemoveDuplicates": ("balance",),
    "RemoveFailedPods": ("deschedule",),
    "RemovePodsHavingTooManyRestarts": ("deschedule",),
    "RemovePodsViolatingInterPodAntiAffinity": ("deschedule",),
    "RemovePodsViolatingNodeAffinity": ("deschedule",),
    "RemovePodsViolatingNodeTaints": ("deschedule",),
    "RemovePodsViolatingTopologySpreadConstraint": ("balance",),
}
EXTENSION_POINTS = ("deschedule", "balance", "filter", "preEvictionFilter")
# The descheduler adds DefaultEvictor's pluginConfig itself (setDefaultEvictor); every other enabled
# plugin needs one ("unable to find %q plugin config").
IMPLICIT_CONFIG = ("DefaultEvictor",)
NODE_AFFINITY_TYPES = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)
_VERSION = re.compile(r"^v?1\.(\d+)(?:\.\d+)?(?:[-+].*)?$")
_TAG = re.compile(r"^v0\.(\d+)\.\d+$")
# Go's time.ParseDuration, positive: what --descheduling-interval accepts.
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$")


def tas_policy(namespaces=None):
    """The policy TAS's README gives for its deschedule strategy: evict pods whose required node
    affinity their node no longer meets, optionally only in ``namespaces`` (include)."""
    args = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
    if namespaces:
        args["namespaces"] = {"include": list(namespaces)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "name": "tas-deschedule",
                "pluginConfig": [{"name": "RemovePodsViolatingNodeAffinity", "args": args}],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            }
        ],
    }


def release_for(kubernetes_version):
    """The descheduler tag for a cluster's ``gitVersion`` (``v1.36.3``): (tag, None) or (None, problem)."""
    match = _VERSION.fullmatch(str(kubernetes_version).strip())
    if not match:
        return None, (
            f"the cluster's Kubernetes version {kubernetes_version!r} is not a version like v1.36.3; "
            "set descheduler_image_tag to the descheduler release to deploy"
        )
    minor = int(match.group(1))
    if minor in RELEASES:
        return RELEASES[minor], None
    oldest, newest = min(RELEASES), max(RELEASES)
    if minor < oldest:
        return None, (
            f"Kubernetes 1.{minor} is older than 1.{oldest}, the oldest release whose descheduler "
            f"({RELEASES[oldest]}) reads the {API_VERSION} policy this role writes; upgrade the cluster, "
            "or deploy a descheduler of your own and set poweraware_enable_descheduler to false"
        )
    return None, (
        f"Kubernetes 1.{minor} is newer than 1.{newest}, the newest release this collection knows a "
        f"descheduler for ({RELEASES[newest]}; each descheduler minor matches a Kubernetes minor); set "
        f"descheduler_image_tag to v0.{minor}.0 or later once it is released"
    )


def _is_list_of_str(value):
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _affinity_args_errors(where, args):
    errors = []
    types = args.get("nodeAffinityType")
    if not _is_list_of_str(types) or not types:
        errors.append(
            f"{where}: args.nodeAffinityType={types!r} must list one or more of {', '.join(NODE_AFFINITY_TYPES)} "
            "(TAS's deschedule needs requiredDuringSchedulingIgnoredDuringExecution)"
        )
    else:
        unknown = [t for t in types if t not in NODE_AFFINITY_TYPES]
        if unknown:
            errors.append(
                f"{where}: args.nodeAffinityType has {', '.join(unknown)}, which the descheduler skips with an "
                f"error and never evicts for; use {' or '.join(NODE_AFFINITY_TYPES)}"
            )
    namespaces = args.get("namespaces")
    if namespaces is not None:
        if not isinstance(namespaces, dict) or set(namespaces) - {"include", "exclude"}:
            errors.append(f"{where}: args.namespaces={namespaces!r} must be a mapping with include or exclude")
        elif namespaces.get("include") and namespaces.get("exclude"):
            errors.append(f"{where}: args.namespaces sets both include and exclude; only one of them can be set")
        else:
            for key in ("include", "exclude"):
                if key in namespaces and not _is_list_of_str(namespaces[key]):
                    errors.append(
                        f"{where}: args.namespaces.{key}={namespaces[key]!r} must be a list of namespace names"
                    )
    return errors


def _profile_errors(index, profile, names):
    if not isinstance(profile, dict):
        return [f"profiles[{index}]={profile!r} must be a mapping with name, pluginConfig and plugins"]
    name = profile.get("name")
    where = f"profile {name!r}" if isinstance(name, str) and name else f"profiles[{index}]"
    errors = []
    if not isinstance(name, str) or not name:
        errors.append(f"{where}: name={name!r} must be a non-empty string")
    elif name in names:
        errors.append(f"{where}: the name is used by another profile; give each profile its own")
    names.add(name)
    configs = profile.get("pluginConfig", [])
    configured = set()
    if not isinstance(configs, list):
        errors.append(f"{where}: pluginConfig={configs!r} must be a list of {{name, args}}")
        configs = []
    for position, config in enumerate(configs):
        plugin = config.get("name") if isinstance(config, dict) else None
        if plugin not in PLUGINS:
            errors.append(
                f"{where}: pluginConfig[{position}] names plugin {plugin!r}, which the descheduler does not "
                f"register; known plugins: {', '.join(sorted(PLUGINS))}"
            )
            continue
        if plugin in configured:
            errors.append(f"{where}: pluginConfig configures {plugin} twice; keep one entry")
        configured.add(plugin)
        args = config.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            errors.append(f"{where}: pluginConfig {plugin} args={args!r} must be a mapping")
        elif plugin == "RemovePodsViolatingNodeAffinity":
            errors.extend(_affinity_args_errors(f"{where}: pluginConfig {plugin}", args))
    plugins = profile.get("plugins", {})
    if not isinstance(plugins, dict):
        errors.append(f"{where}: plugins={plugins!r} must map extension points to {{enabled: [...]}}")
        plugins = {}
    enabled_any = False
    for point, entry in plugins.items():
        if point not in EXTENSION_POINTS:
            errors.append(f"{where}: plugins.{point} is not an extension point; use {', '.join(EXTENSION_POINTS)}")
            continue
        enabled = entry.get("enabled", []) if isinstance(entry, dict) else None
        if not isinstance(enabled, list):
            errors.append(f"{where}: plugins.{point}={entry!r} must be {{enabled: [plugin names]}}")
            continue
        for plugin in enabled:
            if plugin not in PLUGINS:
                errors.append(
                    f"{where}: plugins.{point}.enabled names {plugin!r}, which the descheduler does not register"
                )
            elif point not in PLUGINS[plugin]:
                errors.append(
                    f"{where}: plugins.{point}.enabled names {plugin}, which implements only "
                    f"{', '.join(PLUGINS[plugin])}; the descheduler would stop at start"
                )
            elif plugin not in configured and plugin not in IMPLICIT_CONFIG:
                errors.append(
                    f"{where}: {plugin} is enabled in plugins.{point} but has no pluginConfig entry, and the "
                    f"descheduler stops at start without one; add {{name: {plugin}, args: ...}} to pluginConfig"
                )
            if point in ("deschedule", "balance"):
                enabled_any = True
    if not enabled_any:
        errors.append(
            f"{where}: enables no plugin at the deschedule or balance extension point, so it evicts nothing; "
            "enable RemovePodsViolatingNodeAffinity under plugins.deschedule for TAS's deschedule strategy"
        )
    return errors


def policy_errors(policy):
    """Every problem of a DeschedulerPolicy (a mapping), all at once; an empty list when there is none."""
    if not isinstance(policy, dict):
        return [f"the descheduler policy must be a DeschedulerPolicy mapping, not {type(policy).__name__}"]
    errors = []
    if policy.get("apiVersion") != API_VERSION:
        errors.append(
            f"apiVersion={policy.get('apiVersion')!r}: the policy must be apiVersion {API_VERSION} "
            "(v1alpha1 is no longer read since descheduler v0.30)"
        )
    if policy.get("kind") != KIND:
        errors.append(f"kind={policy.get('kind')!r}: the policy must be kind {KIND}")
    profiles = policy.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        errors.append(f"profiles={profiles!r}: the policy needs a list of one or more profiles")
        profiles = []
    names = set()
    for index, profile in enumerate(profiles):
        errors.extend(_profile_errors(index, profile, names))
    for key in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"):
        value = policy.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            errors.append(f"{key}={value!r} must be a whole number of pods, 0 or more")
    return errors


def plan(policy, kubernetes_version, image_tag="", namespaces=None, interval="5m", image_digest=""):
    """What the descheduler role applies: ``{policy, image_tag, image_digest, reads_metrics, errors}``.

    ``policy`` empty means TAS's (see ``tas_policy``); ``image_tag`` empty means the release for the
    cluster's ``kubernetes_version``, and then an empty ``image_digest`` means that release's published
    digest (``DIGESTS``; empty where none is published). A tag of the user's runs with the user's digest
    only: the table's cannot vouch for an image it did not choose. Every problem is in ``errors``, and
    nothing is to be applied when there is one.
    """
    effective = policy if policy else tas_policy(namespaces)
    errors = [f"descheduler_policy: {e}" for e in policy_errors(effective)] if policy else []
    if namespaces and policy:
        errors.append(
            "descheduler_namespaces applies only to the policy this role writes; with descheduler_policy set, "
            "put args.namespaces in its RemovePodsViolatingNodeAffinity pluginConfig instead"
        )
    if namespaces is not None and not isinstance(namespaces, list):
        errors.append(f"descheduler_namespaces={namespaces!r} must be a list of namespace names")
    elif namespaces:
        # The descheduler does not check them: a name no namespace can have limits it to nothing.
        bad = [n for n in namespaces if not is_dns1123_label(n)]
        if bad:
            errors.append(
                f"descheduler_namespaces has {', '.join(repr(n) for n in bad)}, which no namespace can be named: "
                "a namespace name is a DNS label (lower-case letters, digits and '-', at most 63 characters)"
            )
    if not _DURATION.fullmatch(str(interval)) or not re.search(r"[1-9]", str(interval)):
        errors.append(
            f"descheduler_interval={interval!r} is not a positive Go duration; write it like 5m, 90s or 1h30m"
        )
    tag = str(image_tag).strip() if image_tag else ""
    digest = str(image_digest).strip() if image_digest else ""
    if tag:
        if not _TAG.fullmatch(tag):
            errors.append(f"descheduler_image_tag={image_tag!r} is not a descheduler release tag like v0.36.0")
    else:
        tag, problem = release_for(kubernetes_version)
        if problem:
            errors.append(problem)
        elif not digest:
            digest = DIGESTS.get(tag, "")
    collector = effective.get("metricsCollector") if isinstance(effective, dict) else None
    # metrics.k8s.io is read only by the metrics collector (LowNodeUtilization's actual usage): the
    # ClusterRole grants it only then.
    reads_metrics = isinstance(collector, dict) and collector.get("enabled") is True
    return {
        "policy": effective,
        "image_tag": tag or "",
        "image_digest": digest,
        "reads_metrics": reads_metrics,
        "errors": errors,
    }
