# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Upstream Peaks as a second scheduler: its configuration, from the power models we publish.

Pure logic, no Ansible imports, Python 3.9 compatible.

Peaks (kubernetes-sigs/scheduler-plugins, ``pkg/trimaran/peaks``, KEP "PEAKS power-aware
scheduling") is a Score plugin of the scheduler-plugins kube-scheduler. For a pod requesting ``r``
millicores on a node of capacity ``C`` whose CPU utilisation is ``x`` percent (load-watcher's
``avg_over_time(instance:node_cpu:ratio[15m]) * 100``), it predicts ``p = x + 100 r / C`` and scores
``int64(1e15 * k1 * (exp(k2 p) - exp(k2 x)))`` with the node's model ``P(u) = k0 + k1 exp(k2 u)``;
NormalizeScore maps the smallest jump to 100. What this module guards against, all read from the
plugin's code at v0.33.5 (the same in v0.34.7):

- The models must be in the profile's ``pluginConfig``: ``initNodePowerModels`` decodes the file
  that ``NODE_POWER_MODEL`` names into a local copy of the map and drops it, so a scheduler started
  with only the ConfigMap file scores every node 0 and places pods at random. The role therefore
  copies the published ConfigMap into the configuration (and rolls the scheduler when it changes).
- The argument keys are ``WatcherAddress`` and ``NodePowerModel``, capitalised: the struct tags of
  ``PeaksArgs`` are malformed, so the field names are the JSON keys (as upstream's
  ``scheduler-config.yaml`` writes them), and the scheduler's strict decoding refuses any other case.
- A node without a model scores a jump of 0 W, and a node load-watcher has no metrics for scores the
  minimum raw score; after normalisation both look like the *best* node. Every node without a model
  is therefore listed (the role reports them), and the node's name must be the name load-watcher
  reports (the ``instance`` label of ``instance:node_cpu:ratio``, the Kubernetes node name).
- ``int64(float)`` of a jump beyond about 9,223 W overflows (Go gives an undefined value): a model
  whose jump from 0 to 100 % exceeds that is refused.
- Two schedulers answering the same ``schedulerName`` race for the same pods: ``default-scheduler``
  is refused.

load-watcher serves on port 2020, fixed in its code (``pkg/watcher/watcher.go``), at ``/watcher``.

The scheduler is a kube-scheduler, so Kubernetes' version skew policy holds for it: never newer than
the kube-apiserver it talks to, and at most one minor older ("kube-scheduler ... may be up to one
minor version older", https://kubernetes.io/releases/version-skew-policy/). scheduler-plugins'
minor is the Kubernetes minor it is compiled with (its README, "Compatibility Matrix": ``v0.33.5``
is built with ``v1.33.5``). ``skew`` refuses a release outside the policy unless the user accepts
running it unsupported.
"""

from __future__ import annotations

import json
import math
import re

from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_version import VersionError, parse_version
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    PEAKS_COEFFICIENTS,
    finite_number,
)

__all__ = ["API_VERSION", "WATCHER_PORT", "MAX_JUMP_W", "parse_models", "scheduler_configuration", "skew", "plan"]

API_VERSION = "kubescheduler.config.k8s.io/v1"
WATCHER_PORT = 2020
# int64 holds 9.22e18; Peaks multiplies watts by 1e15
MAX_JUMP_W = 9223.0
PLUGIN = "Peaks"
_URL = re.compile(r"^https?://[^\s/:]+(:\d{1,5})?(/\S*)?$")
# scheduler-plugins release tags: v0.<Kubernetes minor>.<patch> (one digit patches follow Kubernetes',
# three digit ones are plugin-only releases on the same client packages)
_RELEASE_TAG = re.compile(r"^v0\.(\d+)\.(\d+)$")
# The newest scheduler-plugins release, for the message (its README's compatibility matrix)
NEWEST_RELEASE = "v0.34.7"
SKEW_VARIABLE = "peaks_allow_version_skew"


def skew(image_tag, server_version, allow=False):
    """Whether the scheduler-plugins release ``image_tag`` may run beside API servers of
    ``server_version`` (``v1.36.3``): ``(error, warning)``, each ``""`` when there is none. Outside the
    skew policy it is an error, or with ``allow`` a warning that says what is unsupported."""
    tag = _RELEASE_TAG.fullmatch(str(image_tag).strip())
    try:
        _major, server_minor, _patch = parse_version(str(server_version))
    except VersionError as exc:
        return "", f"the API servers' version is not known ({exc}): the scheduler's version skew is not checked"
    if not tag:
        problem = (
            f"peaks_image_tag {image_tag!r}: not a scheduler-plugins release tag such as v0.33.5, whose minor is "
            f"the Kubernetes minor it is built with, so its skew against the API servers (1.{server_minor}) "
            "cannot be checked"
        )
        fix = f"give the release tag of your build, or set {SKEW_VARIABLE}: true to run it unchecked"
        return ("", f"{problem}; running it because {SKEW_VARIABLE} is true") if allow else (f"{problem}: {fix}", "")
    minor = int(tag.group(1))
    if server_minor - 1 <= minor <= server_minor:
        return "", ""
    relation = "newer than" if minor > server_minor else f"{server_minor - minor} minors older than"
    problem = (
        f"peaks_image_tag {image_tag} is the scheduler-plugins kube-scheduler built with Kubernetes 1.{minor}, "
        f"{relation} the API servers ({server_version}); Kubernetes' version skew policy lets a kube-scheduler be "
        "at most one minor older than kube-apiserver and never newer"
    )
    if allow:
        return "", f"{problem}. Running it anyway because {SKEW_VARIABLE} is true: unsupported"
    return (
        f"{problem}: set peaks_image_tag (and peaks_image_digest) to a release for 1.{server_minor} or "
        f"1.{server_minor - 1} (the newest scheduler-plugins release is {NEWEST_RELEASE}), or set "
        f"{SKEW_VARIABLE}: true to run this one unsupported",
        "",
    )


def parse_models(text, where):
    """``({node: {k0, k1, k2}}, errors)`` from the JSON the power_models role publishes."""
    try:
        models = json.loads(text)
    except ValueError as err:
        return {}, [f"{where}: not JSON ({err}): publish it again with the power_models role"]
    if not isinstance(models, dict):
        return {}, [f"{where}: expected a JSON object of node name -> {{k0, k1, k2}}, got {type(models).__name__}"]
    if not models:
        return {}, [
            f"{where}: no node has a Peaks model: without models Peaks scores every node alike; fit them "
            "first (the power_models role with power_models_peaks_configmap_enabled)"
        ]
    errors = []
    parsed = {}
    for node in sorted(models):
        model = models[node]
        if not isinstance(model, dict):
            errors.append(f"{where}: node {node!r}: expected {{k0, k1, k2}}, got {model!r}")
            continue
        missing = [k for k in PEAKS_COEFFICIENTS if k not in model]
        extra = sorted(set(model) - set(PEAKS_COEFFICIENTS))
        bad = [f"{k}={model[k]!r}" for k in PEAKS_COEFFICIENTS if k in model and not finite_number(model[k])]
        if missing or extra or bad:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(missing)}")
            if extra:
                # Peaks decodes its models with DisallowUnknownFields
                problems.append(f"unknown {', '.join(extra)}")
            if bad:
                problems.append(f"not finite numbers: {', '.join(bad)} (Peaks reads float64)")
            errors.append(f"{where}: node {node!r}: {'; '.join(problems)}")
            continue
        k1, k2 = float(model["k1"]), float(model["k2"])
        try:
            span = abs(k1 * (math.exp(k2 * 100.0) - 1.0))
        except OverflowError:
            span = math.inf
        if span > MAX_JUMP_W:
            errors.append(
                f"{where}: node {node!r}: the model's jump from 0 to 100 % is {span:.4g} W, beyond the "
                f"{MAX_JUMP_W:.0f} W Peaks can score (it multiplies watts by 1e15 into an int64): refit it"
            )
            continue
        parsed[node] = {k: float(model[k]) for k in PEAKS_COEFFICIENTS}
    return parsed, errors


def scheduler_configuration(models, scheduler_name, watcher_address):
    """The KubeSchedulerConfiguration: one profile whose only Score plugin is Peaks.

    The filters stay kube-scheduler's defaults (a pod only lands where it fits). Upstream's profile
    disables every other preScore and score plugin so that the power jump alone ranks the feasible
    nodes. One replica without leader election (upstream's deployment): the role's Deployment
    recreates, never overlaps, its pod.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": scheduler_name,
                "plugins": {
                    "preScore": {"disabled": [{"name": "*"}]},
                    "score": {"enabled": [{"name": PLUGIN}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [
                    {
                        "name": PLUGIN,
                        "args": {
                            "WatcherAddress": watcher_address,
                            "NodePowerModel": {node: dict(models[node]) for node in sorted(models)},
                        },
                    }
                ],
            }
        ],
    }


def plan(
    configmap,
    key,
    scheduler_name,
    watcher_address,
    nodes=None,
    where="ConfigMap",
    image_tag=None,
    server_version=None,
    allow_skew=False,
):
    """What the peaks role applies: ``{config, models, nodes_without_model, errors, warnings}``.

    ``configmap``: the published ConfigMap (a mapping with ``data``) or None when it does not exist;
    ``key``: its data key; ``nodes``: the cluster's node names, to report those without a model;
    ``image_tag``, ``server_version``: the scheduler's release and the API servers' version, whose skew
    is checked when both are given (``skew``; ``allow_skew`` turns a refusal into a warning).
    """
    errors, warnings = [], []
    if image_tag is not None and server_version is not None:
        skew_error, skew_warning = skew(image_tag, server_version, allow_skew)
        errors += [skew_error] if skew_error else []
        warnings += [skew_warning] if skew_warning else []
    if not isinstance(scheduler_name, str) or not scheduler_name.strip():
        errors.append("peaks_scheduler_name: empty: pods opt in with this schedulerName; upstream's is Peaks")
    elif scheduler_name == "default-scheduler":
        errors.append(
            "peaks_scheduler_name: default-scheduler is the cluster's kube-scheduler: two schedulers would race "
            "for every pod; choose another name (upstream's is Peaks)"
        )
    if not isinstance(watcher_address, str) or not _URL.fullmatch(watcher_address):
        errors.append(
            f"load-watcher address {watcher_address!r}: expected http(s)://host:port, for example "
            f"http://load-watcher.kube-system.svc:{WATCHER_PORT}"
        )
    models = {}
    if configmap is None:
        errors.append(
            f"{where}: not found: the power_models role publishes it (power_models_peaks_configmap_enabled); "
            "run the power models first, or point peaks_models_configmap at your own"
        )
    else:
        data = (configmap or {}).get("data") or {}
        if key not in data:
            errors.append(
                f"{where}: has no key {key!r} (keys: {', '.join(sorted(data)) or 'none'}): "
                "set peaks_models_configmap_key"
            )
        else:
            models, model_errors = parse_models(data[key], f"{where} key {key}")
            errors += model_errors
    without = sorted(set(nodes or ()) - set(models))
    config = scheduler_configuration(models, scheduler_name, watcher_address) if not errors else {}
    return {"config": config, "models": models, "nodes_without_model": without, "errors": errors, "warnings": warnings}
