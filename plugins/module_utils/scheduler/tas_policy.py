# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of Telemetry Aware Scheduling policies (``TASPolicy``, telemetry.intel.com/v1alpha1).

Pure logic, no Ansible imports, Python 3.9 compatible.

The rules are those of the upstream CRD's openAPI schema (intel/platform-aware-scheduling,
``deploy/tas-policy-crd.yaml``) plus what the TAS extender itself needs to make sense of a policy:

* ``spec.strategies`` is a non-empty mapping from a strategy TAS implements (``scheduleonmetric``,
  ``dontschedule``, ``deschedule``, ``labeling``) to ``{policyName, logicalOperator, rules}``;
* ``logicalOperator`` is ``allOf`` or ``anyOf``;
* every rule has a ``metricname`` matching ``^[a-zA-Z0-9_-]+$`` and an ``operator`` out of
  ``Equals``, ``LessThan``, ``GreaterThan``; ``target`` is an int64 (not a float, not a string,
  not a boolean; :func:`normalize_policy` first turns whole-number strings such as ``"70"``, which
  is what ``-e name=value`` gives, into integers); ``labels`` is a list of strings;
* ``scheduleonmetric`` ranks nodes by its first rule only and only ``LessThan`` (lowest first) or
  ``GreaterThan`` (highest first) define an order, so it takes exactly one such rule;
* the filtering strategies compare against ``target``, so they need one;
* ``labeling`` rules carry ``key=value`` labels.

Metric names are the names the custom metrics API serves, not Prometheus series names: the usual
Prometheus Adapter rule (``matches: ^node_(.*)``) strips ``node_``, so the series
``node_package_power_avg`` is the metric ``package_power_avg``. A rule naming a metric that still
carries the stripped prefix never matches anything in TAS, so it is reported with the served name.
"""

from __future__ import annotations

import re

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name_part,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "LOGICAL_OPERATORS",
    "OPERATORS",
    "STRATEGIES",
    "NODE_LABELING_STRATEGIES",
    "adapter_metric_name",
    "moved_policies",
    "named_policies",
    "node_labeling_strategies",
    "node_permissions",
    "node_rbac_name",
    "normalize_policy",
    "policy_node_labels",
    "policy_objects",
    "validate_policies",
    "validate_policy",
    "validate_spec",
]

API_VERSION = "telemetry.intel.com/v1alpha1"
KIND = "TASPolicy"
STRATEGIES = ("scheduleonmetric", "dontschedule", "deschedule", "labeling")
# The strategies whose enforcement patches Node objects: deschedule labels violating nodes
# ``<policy>=violating`` for the descheduler, labeling sets ``telemetry.aware.scheduling.<policy>/<key>``.
# TAS needs ``patch`` on nodes only for these.
NODE_LABELING_STRATEGIES = ("deschedule", "labeling")
OPERATORS = ("Equals", "LessThan", "GreaterThan")
ORDERING_OPERATORS = ("LessThan", "GreaterThan")
LOGICAL_OPERATORS = ("allOf", "anyOf")
RULE_KEYS = ("metricname", "operator", "target", "labels")
STRATEGY_KEYS = ("policyName", "logicalOperator", "rules")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# A whole number written as a string, as ``-e name=value`` gives every value: "70", "+70", " -5 ".
_INTEGER_STRING = re.compile(r"^\s*[-+]?[0-9]+\s*$")
_METRIC_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def _plain_copy(value):
    """A deep copy as plain dicts and lists. Filters are given ansible-core's lazy containers, whose
    own deep copy clones the templar with its plugin loaders (ansible-core 2.19+ then prints
    "Instantiating filter PluginLoader with aliases is deprecated", an error from 2.25); this copies
    the data only."""
    if isinstance(value, dict):
        return {key: _plain_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain_copy(item) for item in value)
    return value


def adapter_metric_name(series, prefix="node_"):
    """Return the name the Prometheus Adapter serves for the Prometheus ``series``.

    The adapter rule ``name: {matches: ^node_(.*)}`` serves the first capture group, so
    ``node_package_power_avg`` becomes ``package_power_avg``. Series without the prefix are
    served unchanged.
    """
    if not isinstance(series, str) or not series:
        raise ValueError(f"series must be a non-empty string, got {series!r}")
    if prefix and series.startswith(prefix) and len(series) > len(prefix):
        return series[len(prefix) :]
    return series


def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _check_metric(where, name, known_metrics, stripped_prefix, errors):
    if not isinstance(name, str) or not name:
        errors.append(f"{where}.metricname must be a non-empty string, got {_type_name(name)}")
        return
    if not _METRIC_NAME.fullmatch(name):
        errors.append(
            f"{where}.metricname {name!r} is not a valid metric name: the CRD allows only letters, digits, '_' and '-'"
            " (pattern ^[a-zA-Z0-9_-]+$)"
        )
        return
    if stripped_prefix and name.startswith(stripped_prefix) and len(name) > len(stripped_prefix):
        errors.append(
            f"{where}.metricname {name!r} is a Prometheus series name: the Prometheus Adapter strips "
            f"{stripped_prefix!r}, so custom.metrics.k8s.io serves it as "
            f"{adapter_metric_name(name, stripped_prefix)!r}; use that name"
        )
        return
    if known_metrics and name not in known_metrics:
        errors.append(
            f"{where}.metricname {name!r} is not served by the metrics adapter (known metrics: "
            f"{', '.join(sorted(known_metrics))})"
        )


def _check_target(where, rule, required, errors):
    if "target" not in rule or rule["target"] is None:
        if required:
            errors.append(f"{where}.target is required for this strategy (an integer to compare the metric with)")
        return
    target = rule["target"]
    if isinstance(target, str):
        if _INTEGER_STRING.fullmatch(target):
            hint = "write it as a number, or pass the policy through normalize_policy (filter tas_policy_normalized)"
        else:
            hint = "which is not a whole number"
        errors.append(f"{where}.target must be an integer (the CRD declares int64), got string {target!r}, {hint}")
    elif isinstance(target, bool) or not isinstance(target, int):
        errors.append(
            f"{where}.target must be an integer (the CRD declares int64), got {_type_name(target)} {target!r}"
        )
    elif not INT64_MIN <= target <= INT64_MAX:
        errors.append(f"{where}.target {target} is outside the int64 range")


def _check_labels(where, strategy, rule, errors):
    if "labels" not in rule or rule["labels"] is None:
        if strategy == "labeling":
            errors.append(f"{where}.labels is required for the labeling strategy (a list of key=value strings)")
        return
    labels = rule["labels"]
    if not isinstance(labels, (list, tuple)):
        errors.append(f"{where}.labels must be a list of strings, got {_type_name(labels)}")
        return
    for index, label in enumerate(labels):
        if not isinstance(label, str):
            errors.append(f"{where}.labels[{index}] must be a string, got {_type_name(label)}")
            continue
        if strategy != "labeling":
            continue
        key, sep, value = label.partition("=")
        if not sep or not is_qualified_name_part(key) or not is_label_value(value):
            errors.append(
                f"{where}.labels[{index}] {label!r} must be key=value with a valid Kubernetes label name and value"
            )


def _check_rule(where, strategy, rule, known_metrics, stripped_prefix, errors):
    if not isinstance(rule, dict):
        errors.append(f"{where} must be a mapping, got {_type_name(rule)}")
        return
    for key in sorted(set(rule) - set(RULE_KEYS), key=str):
        errors.append(f"{where} has unknown field {key!r} (allowed: {', '.join(RULE_KEYS)})")
    if "metricname" not in rule:
        errors.append(f"{where}.metricname is required")
    else:
        _check_metric(where, rule["metricname"], known_metrics, stripped_prefix, errors)
    operator = rule.get("operator")
    if "operator" not in rule:
        errors.append(f"{where}.operator is required (one of {'|'.join(OPERATORS)})")
    elif operator not in OPERATORS:
        errors.append(f"{where}.operator {operator!r} is not one of {'|'.join(OPERATORS)}")
    elif strategy == "scheduleonmetric" and operator not in ORDERING_OPERATORS:
        errors.append(
            f"{where}.operator {operator!r} cannot rank nodes: scheduleonmetric takes LessThan (lowest first) or"
            " GreaterThan (highest first)"
        )
    _check_target(where, rule, strategy != "scheduleonmetric", errors)
    _check_labels(where, strategy, rule, errors)


def _check_strategy(name, strategy, known_metrics, stripped_prefix, errors):
    where = f"spec.strategies.{name}"
    if name not in STRATEGIES:
        errors.append(f"{where}: unknown strategy {name!r} (TAS implements {', '.join(STRATEGIES)})")
        return
    if not isinstance(strategy, dict):
        errors.append(f"{where} must be a mapping with rules, got {_type_name(strategy)}")
        return
    for key in sorted(set(strategy) - set(STRATEGY_KEYS), key=str):
        errors.append(f"{where} has unknown field {key!r} (allowed: {', '.join(STRATEGY_KEYS)})")
    if "policyName" in strategy and not isinstance(strategy["policyName"], str):
        errors.append(f"{where}.policyName must be a string, got {_type_name(strategy['policyName'])}")
    if "logicalOperator" in strategy and strategy["logicalOperator"] not in LOGICAL_OPERATORS:
        errors.append(
            f"{where}.logicalOperator {strategy['logicalOperator']!r} is not one of {'|'.join(LOGICAL_OPERATORS)}"
        )
    rules = strategy.get("rules")
    if rules is None:
        errors.append(f"{where}.rules is required (a non-empty list)")
        return
    if not isinstance(rules, (list, tuple)):
        errors.append(f"{where}.rules must be a list, got {_type_name(rules)}")
        return
    if not rules:
        errors.append(f"{where}.rules is empty: a strategy without rules does nothing")
        return
    if name == "scheduleonmetric" and len(rules) != 1:
        errors.append(f"{where}.rules has {len(rules)} rules: scheduleonmetric ranks nodes by exactly one rule")
    for index, rule in enumerate(rules):
        _check_rule(f"{where}.rules[{index}]", name, rule, known_metrics, stripped_prefix, errors)


def normalize_policy(policy):
    """Return a copy of ``policy`` whose rule targets written as whole-number strings are integers.

    Values given on the command line (``-e tas_policy_max_tdp_percent=70``) and many templated
    values are strings; the CRD declares ``target`` an int64, so ``"70"`` becomes ``70``. Anything
    else (``"70%"``, ``60.5``, a boolean, an odd structure) is left exactly as it is, for
    :func:`validate_policy` to report with the field named. The input is not modified.
    """
    if not isinstance(policy, dict):
        return policy
    policy = _plain_copy(policy)
    spec = policy.get("spec")
    strategies = spec.get("strategies") if isinstance(spec, dict) else None
    if not isinstance(strategies, dict):
        return policy
    for strategy in strategies.values():
        rules = strategy.get("rules") if isinstance(strategy, dict) else None
        if not isinstance(rules, list):
            continue
        for rule in rules:
            if (
                isinstance(rule, dict)
                and isinstance(rule.get("target"), str)
                and _INTEGER_STRING.fullmatch(rule["target"])
            ):
                rule["target"] = int(rule["target"].strip())
    return policy


def validate_spec(spec, known_metrics=None, stripped_prefix="node_"):
    """Return the list of problems with a TASPolicy ``spec`` (empty when it is valid)."""
    errors = []
    known = frozenset(known_metrics or ())
    if not isinstance(spec, dict):
        return [f"spec must be a mapping, got {_type_name(spec)}"]
    for key in sorted(set(spec) - {"strategies"}, key=str):
        errors.append(f"spec has unknown field {key!r} (allowed: strategies)")
    strategies = spec.get("strategies")
    if strategies is None:
        errors.append("spec.strategies is required")
    elif not isinstance(strategies, dict):
        errors.append(f"spec.strategies must be a mapping of strategy name to strategy, got {_type_name(strategies)}")
    elif not strategies:
        errors.append(f"spec.strategies is empty: give at least one of {', '.join(STRATEGIES)}")
    else:
        for name in sorted(strategies, key=str):
            _check_strategy(name, strategies[name], known, stripped_prefix, errors)
    return errors


def validate_policy(policy, known_metrics=None, stripped_prefix="node_"):
    """Return the list of problems with a whole TASPolicy object (empty when it is valid).

    ``known_metrics``: when given, every ``metricname`` must be one of these served names.
    ``stripped_prefix``: the prefix the metrics adapter removes from series names (``node_``);
    empty to disable that check.
    """
    if not isinstance(policy, dict):
        return [f"a TASPolicy must be a mapping, got {_type_name(policy)}"]
    errors = []
    if policy.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion must be {API_VERSION!r}, got {policy.get('apiVersion')!r}")
    if policy.get("kind") != KIND:
        errors.append(f"kind must be {KIND!r}, got {policy.get('kind')!r}")
    metadata = policy.get("metadata")
    if not isinstance(metadata, dict):
        errors.append("metadata must be a mapping with name and namespace")
    else:
        name = metadata.get("name")
        if not is_dns1123_subdomain(name):
            errors.append(f"metadata.name {name!r} is not a valid Kubernetes object name (DNS-1123 subdomain)")
        elif not is_label_value(name):  # a valid subdomain fails only by length, over 63 characters
            errors.append(
                f"metadata.name {name!r} is longer than 63 characters: pods opt in with the label"
                " telemetry-policy=<name>, and label values are at most 63 characters"
            )
        namespace = metadata.get("namespace")
        if namespace is not None and not is_dns1123_label(namespace):
            errors.append(f"metadata.namespace {namespace!r} is not a valid namespace name (DNS-1123 label)")
    if "spec" not in policy:
        errors.append("spec is required")
    else:
        errors.extend(validate_spec(policy["spec"], known_metrics, stripped_prefix))
    return errors


def node_labeling_strategies(policy):
    """Return the strategies of the TASPolicy ``policy`` that make TAS patch nodes, in a stable order.

    A policy that is not a mapping, or has no ``spec.strategies`` mapping, labels no nodes (the
    validation reports what is wrong with it).
    """
    spec = policy.get("spec") if isinstance(policy, dict) else None
    strategies = spec.get("strategies") if isinstance(spec, dict) else None
    if not isinstance(strategies, dict):
        return []
    return [name for name in NODE_LABELING_STRATEGIES if name in strategies]


def node_rbac_name(policy):
    """The name of the ClusterRole and ClusterRoleBinding that let TAS patch nodes for ``policy``."""
    return f"poweraware:tas-policy:{policy['metadata']['namespace']}:{policy['metadata']['name']}"


def node_permissions(policies, state="present"):
    """Which policies TAS may label nodes for, and what to delete for the others.

    ``grant``: ``{name, strategies}`` per policy with a node-labelling strategy (``state`` present);
    ``withdraw``: the ClusterRoleBinding and then the ClusterRole (as ``{apiVersion, kind,
    metadata.name}``) of every other policy, or of every policy when ``state`` is absent, so that
    one apply and one delete cover all policies.
    """
    grant, withdraw = [], []
    for policy in policies:
        strategies = node_labeling_strategies(policy) if state == "present" else []
        if strategies:
            grant.append({"name": node_rbac_name(policy), "strategies": strategies})
            continue
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            withdraw.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": kind,
                    "metadata": {"name": node_rbac_name(policy)},
                }
            )
    return {"grant": grant, "withdraw": withdraw}


# --- several policies per run (tas_policy_policies) ---------------------------------------------

# The labels every policy the role applies carries (what the role's absent and the dry run find).
MANAGED_LABELS = {
    "app.kubernetes.io/name": "telemetry-aware-scheduling",
    "app.kubernetes.io/managed-by": "poweraware.k8s",
}
SHORT_FORM_KEYS = ("name", "namespace", "strategies")


def _policy_object(entry, default_namespace):
    """One ``tas_policy_policies`` entry as a TASPolicy object, or a problem (str)."""
    if not isinstance(entry, dict):
        return (
            "must be a TASPolicy (apiVersion, kind, metadata, spec) or {name, namespace, strategies}, got "
            + _type_name(entry)
        )
    if "spec" in entry or "metadata" in entry:  # as TAS's README and `kubectl apply -f` files write it
        policy = _plain_copy(entry)
        policy.setdefault("apiVersion", API_VERSION)
        policy.setdefault("kind", KIND)
        metadata = policy.get("metadata")
        if isinstance(metadata, dict):
            if metadata.get("namespace") in (None, ""):
                metadata["namespace"] = default_namespace
            labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
            metadata["labels"] = {**labels, **MANAGED_LABELS}
        return policy
    unknown = sorted(set(entry) - set(SHORT_FORM_KEYS), key=str)
    if unknown:
        return (
            f"has unknown keys {', '.join(map(repr, unknown))}: give a whole TASPolicy (apiVersion, kind, metadata, "
            f"spec), or the short form with {', '.join(SHORT_FORM_KEYS)} only"
        )
    namespace = entry.get("namespace") if entry.get("namespace") not in (None, "") else default_namespace
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": entry.get("name"), "namespace": namespace, "labels": dict(MANAGED_LABELS)},
        "spec": {"strategies": _plain_copy(entry.get("strategies"))},
    }


def named_policies(value):
    """Whether ``value`` is a list of objects each with ``metadata.name`` and ``metadata.namespace``: the
    input the filters that work on whole policies (``tas_policy_objects``' result, ``k8s_info``'s
    resources) take."""
    return isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("metadata"), dict) and {"name", "namespace"} <= set(p["metadata"])
        for p in value
    )


def moved_policies(found, desired):
    """The policies of ours in the cluster (``found``, TASPolicy objects as read) that a policy of this
    run (``desired``) has left: same name, ours by :data:`MANAGED_LABELS`, in a namespace no policy of
    that name is applied to now. Changing ``tas_policy_namespace`` (or turning the power demo on, which
    moves the power policy to the demo's namespace) would otherwise leave the old one behind,
    scheduling that namespace's pods by a policy nobody maintains. A policy of ours whose name this
    run does not give is not touched: only ``state: absent`` removes policies."""
    wanted = {}
    for policy in desired or []:
        metadata = policy.get("metadata") or {}
        wanted.setdefault(metadata.get("name"), set()).add(metadata.get("namespace"))
    moved = []
    for policy in found or []:
        metadata = (policy.get("metadata") or {}) if isinstance(policy, dict) else {}
        labels = metadata.get("labels") or {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
        ours = all(labels.get(key) == value for key, value in MANAGED_LABELS.items())
        if ours and name in wanted and namespace not in wanted[name]:
            moved.append(
                {
                    "apiVersion": policy.get("apiVersion", API_VERSION),
                    "kind": policy.get("kind", KIND),
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": _plain_copy(policy.get("spec") or {}),
                }
            )
    return sorted(moved, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))


def policy_objects(power, extra, default_namespace, variable="tas_policy_policies"):
    """The TASPolicy objects of one run and the problems with their shape: ``power`` (the role's own
    policy, or None) first, then each entry of ``extra``, each normalised (:func:`normalize_policy`)
    and labelled as the role's. Problems name the entry by its index in ``variable``; the content
    of each object is :func:`validate_policies`' to check."""
    problems = []
    objects = [normalize_policy(power)] if power is not None else []
    origins = ["the role's own policy (tas_policy_name)"] if power is not None else []
    if extra is None:
        extra = []
    if not isinstance(extra, list):
        return objects, [f"{variable} must be a list of TASPolicies, got {_type_name(extra)}"]
    for index, entry in enumerate(extra):
        made = _policy_object(entry, default_namespace)
        if isinstance(made, str):
            problems.append(f"{variable}[{index}] {made}")
        else:
            objects.append(normalize_policy(made))
            origins.append(f"{variable}[{index}]")
    seen = {}
    for policy, origin in zip(objects, origins):
        metadata = policy.get("metadata") if isinstance(policy, dict) else None
        if not isinstance(metadata, dict):
            continue
        key = (metadata.get("namespace"), metadata.get("name"))
        if key in seen:
            problems.append(
                f"TASPolicy {key[0]}/{key[1]} is given twice ({seen[key]} and {origin}): give each policy a name "
                "of its own"
            )
        seen.setdefault(key, origin)
    return objects, problems


def _policy_title(policy, index):
    metadata = policy.get("metadata") if isinstance(policy, dict) else None
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        return f"TASPolicy {metadata.get('namespace')}/{metadata['name']}"
    return f"policy {index + 1} of the run"


def validate_policies(policies, known_metrics=None, stripped_prefix="node_"):
    """Every problem of every policy of a run, each prefixed with the policy it is about."""
    errors = []
    for index, policy in enumerate(policies):
        errors.extend(
            f"{_policy_title(policy, index)}: {problem}"
            for problem in validate_policy(policy, known_metrics=known_metrics, stripped_prefix=stripped_prefix)
        )
    return errors


LABELING_PREFIX = "telemetry.aware.scheduling."  # TAS's labeling strategy: <prefix><policy>/<key>=<value>
VIOLATING = "violating"  # TAS's deschedule strategy: <policy>=violating


def policy_node_labels(nodes, policies):
    """The labels TAS put on ``nodes`` (Node objects as the API returns them) for the policies named
    in ``policies``: ``<name>=violating`` (its deschedule strategy) and
    ``telemetry.aware.scheduling.<name>/*`` (its labeling strategy), whatever strategies the objects
    list now (a removed policy may have had others). Sorted ``{node, label}`` pairs; TAS removes
    them when a policy is deleted (its strategies' Cleanup), for which it needs its node permission."""
    names = set()
    for policy in policies or []:
        metadata = policy.get("metadata") if isinstance(policy, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
            names.add(metadata["name"])
    found = []
    for node in nodes or []:
        node_meta = node.get("metadata") if isinstance(node, dict) else None
        labels = (node_meta or {}).get("labels") or {}
        for key, value in labels.items():
            violating = key in names and value == VIOLATING
            labelled = key.startswith(LABELING_PREFIX) and key[len(LABELING_PREFIX) :].split("/", 1)[0] in names
            if violating or labelled:
                found.append({"node": node_meta.get("name"), "label": f"{key}={value}"})
    return sorted(found, key=lambda item: (str(item["node"]), item["label"]))
