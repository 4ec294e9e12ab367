# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kube-scheduler configuration API versions, for every Kubernetes release 1.18+.

Pure logic, no Ansible import; Python 3.9 compatible (runs on the managed node).

* ``SERVED`` is the table of ``kubescheduler.config.k8s.io`` versions each release serves
  (docs/scheduler-extender.md); ``select_api_version`` picks the newest, or the legacy ``Policy``
  where it is the only way (1.18) or asked for (1.19 - 1.22).
* ``conversion_blockers`` says whether an existing file in an older served version can be
  moved to the newest one by changing ``apiVersion`` alone (the ``CONVERTIBLE_FIELDS`` table).
"""

from __future__ import annotations

GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
POLICY_KIND = "Policy"
POLICY_API_VERSION = "v1"

# 1.18 (the TAS power demo's release) serves only alpha configuration APIs (v1alpha1, v1alpha2):
# there the extender goes into the legacy Policy file, the way 1.18's own docs configure extenders.
# 1.17 and older are out of support for years and refused.
OLDEST_SUPPORTED_MINOR = 18
FIRST_CONFIG_MINOR = 19  # the first release with a beta KubeSchedulerConfiguration (v1beta1)
NEWEST_KNOWN_MINOR = 36
LAST_POLICY_MINOR = 22
LAST_INSECURE_SERVING_MINOR = 22  # the last release serving healthz/metrics over plain HTTP (port 10251)


def served_table():
    table = {18: ("v1alpha2", "v1alpha1")}
    for minor in range(19, 22):
        table[minor] = ("v1beta1",)
    table[22] = ("v1beta2", "v1beta1")
    for minor in (23, 24):
        table[minor] = ("v1beta3", "v1beta2")
    for minor in (25, 26, 27):
        table[minor] = ("v1", "v1beta3", "v1beta2")
    table[28] = ("v1", "v1beta3")
    for minor in range(29, NEWEST_KNOWN_MINOR + 1):
        table[minor] = ("v1",)
    return table


# minor release of Kubernetes 1.x -> kubescheduler.config.k8s.io versions served, newest first
SERVED = served_table()


class ConfigError(ValueError):
    """The request cannot be served; the message says what is wrong and how to fix it."""


def served_versions(minor):
    """Versions served by Kubernetes 1.<minor>, newest first (releases newer than the table serve v1)."""
    if minor in SERVED:
        return SERVED[minor]
    if minor > NEWEST_KNOWN_MINOR:
        return ("v1",)
    return ()


def select_api_version(version, legacy_policy=False):
    """Return ``(api_version, warnings)`` for a ``(major, minor, patch)`` release.

    ``api_version`` is ``'kubescheduler.config.k8s.io/<v>'`` or ``'v1'`` for the legacy Policy
    (``is_policy``), which 1.18 always gets.
    Raises ConfigError for releases this module cannot configure.
    """
    major, minor, _patch = version
    warnings = []
    if major != 1:
        raise ConfigError(
            f"Kubernetes {major}.{minor} is not a release this module knows; it supports "
            f"1.{OLDEST_SUPPORTED_MINOR} to 1.{NEWEST_KNOWN_MINOR} (pass kubernetes_version if the detected version "
            "is wrong)"
        )
    if minor < OLDEST_SUPPORTED_MINOR:
        hint = ""
        if minor < 10:
            hint = " (an unquoted 1.30 in YAML is the number 1.3: quote kubernetes_version)"
        raise ConfigError(
            f"Kubernetes 1.{minor} is not supported{hint}: the oldest release this module configures is "
            f"1.{OLDEST_SUPPORTED_MINOR} (through the legacy scheduler Policy file; a {KIND} from "
            f"1.{FIRST_CONFIG_MINOR}), the newest 1.{NEWEST_KNOWN_MINOR}. Upgrade the control plane first, or "
            "configure the extender by hand with a Policy file."
        )
    if minor < FIRST_CONFIG_MINOR:
        # no beta or GA configuration API: the Policy file, whether or not legacy_policy was set
        return POLICY_API_VERSION, warnings
    if legacy_policy:
        if minor > LAST_POLICY_MINOR:
            raise ConfigError(
                f"legacy_policy was requested but Kubernetes 1.{minor} removed the scheduler Policy API (last "
                f"release with it: 1.{LAST_POLICY_MINOR}); drop legacy_policy to write a {KIND} "
                f"{GROUP}/{served_versions(minor)[0]}"
            )
        return POLICY_API_VERSION, warnings
    if minor > NEWEST_KNOWN_MINOR:
        warnings.append(
            f"Kubernetes 1.{minor} is newer than the newest release this module was verified against "
            f"(1.{NEWEST_KNOWN_MINOR}); assuming it serves {GROUP}/v1"
        )
    return f"{GROUP}/{served_versions(minor)[0]}", warnings


def is_policy(api_version):
    """Whether ``select_api_version`` chose the legacy Policy file."""
    return api_version == POLICY_API_VERSION


# --- converting an existing file from an older served version ---------------------------------

# kubescheduler.config.k8s.io versions, oldest first.
VERSION_ORDER = ("v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1beta3", "v1")

# Top-level KubeSchedulerConfiguration fields with the same JSON name, type and meaning in
# v1beta1, v1beta2, v1beta3 and v1 (k8s.io/kube-scheduler config/<version>/types.go;
# enableProfiling/enableContentionProfiling are the inlined DebuggingConfiguration). A file made
# of these converts by changing its apiVersion line and nothing else. "profiles" qualifies only
# with schedulerName alone (PROFILE_FIELDS); see conversion_blockers for what does not convert.
CONVERTIBLE_FIELDS = (
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "extenders",
    "profiles",
)
PROFILE_FIELDS = ("schedulerName",)

# Why a field blocks the conversion (the warning names it, so the user can convert by hand).
NOT_CONVERTIBLE = {
    "healthzBindAddress": "v1 has no healthzBindAddress (kube-scheduler serves /healthz on --secure-port)",
    "metricsBindAddress": "v1 has no metricsBindAddress (kube-scheduler serves /metrics on --secure-port)",
    "plugins": "plugin names, default plugins and default score weights differ between versions (v1beta2 "
    "removed NodeLabel, ServiceAffinity, NodeResourcesLeastAllocated, NodeResourcesMostAllocated and "
    "RequestedToCapacityRatio; v1beta3 raised the default weights of InterPodAffinity, NodeAffinity and "
    "TaintToleration and added multiPoint)",
    "pluginConfig": "plugin arguments are versioned with the plugins (see plugins)",
}

# Versions whose default score weights differ from the newest (KEP-785: v1beta3 set InterPodAffinity
# and NodeAffinity to 2, TaintToleration to 3); converted files get the new defaults, as the release does
# once the old version is removed, and the module says so.
OLD_DEFAULT_WEIGHTS = ("v1beta1", "v1beta2")


def config_version(doc):
    """``'v1beta3'`` of a KubeSchedulerConfiguration's apiVersion (None when not of our group)."""
    group, _sep, version = str((doc or {}).get("apiVersion", "")).partition("/")
    return version if group == GROUP else None


def conversion_target(version, minor):
    """The version a file in ``version`` should move to on Kubernetes 1.<minor>, or None (already newest)."""
    served = served_versions(minor)
    if not served or version not in served or version == served[0]:
        return None
    return served[0]


def conversion_blockers(doc, source, target):
    """Reasons a file in ``source`` cannot become ``target`` by changing apiVersion alone ([] = safe)."""
    reasons = []
    for key in doc:
        if key in CONVERTIBLE_FIELDS:
            continue
        reasons.append(f"{key}: {NOT_CONVERTIBLE.get(key, f'not known to mean the same in {target} as in {source}')}")
    election = doc.get("leaderElection")
    if isinstance(election, dict) and election.get("resourceLock") not in (None, "leases"):
        reasons.append(
            f"leaderElection.resourceLock: {election.get('resourceLock')!r}; newer releases accept only 'leases'"
        )
    profiles = doc.get("profiles")
    if isinstance(profiles, list):
        for index, profile in enumerate(profiles):
            if not isinstance(profile, dict):
                reasons.append(f"profiles[{index}]: not a mapping")
                continue
            for key in profile:
                if key not in PROFILE_FIELDS:
                    reasons.append(
                        f"profiles[{index}].{key}: "
                        f"{NOT_CONVERTIBLE.get(key, f'not known to mean the same in {target}')}"
                    )
    elif profiles is not None:
        reasons.append("profiles: not a list")
    return reasons
