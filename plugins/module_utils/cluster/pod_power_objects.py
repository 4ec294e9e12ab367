# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod_power role's cluster side (docs/pod-power.md): its CustomResourceDefinitions, the admission
policy that refuses what the Kubernetes Power Manager silently ignores, the agents' identities and
least-privilege RBAC, a PowerNode per node, the role's PowerProfiles and TimeOfDays - and the checks
made before any of it is applied (another power manager installed, a host whose CPUs cpu_power owns,
a malformed profile), every problem at once.

Pure logic, no Ansible imports, no I/O, Python 3.8: the input is what the role read from the API server
(``k8s_info_many`` resources) and its variables; the output is the objects to apply or remove.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import (
    DNS1123_SUBDOMAIN_MAX,
    QUALIFIED_NAME_MAX,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    qualified_name_problems,
)

__all__ = [
    "AGENT_ROLE",
    "API_VERSION",
    "CSTATES_KEYS",
    "EPP_VALUES",
    "FOREIGN_MANAGERS",
    "GROUP",
    "LABELS",
    "POLICY_NAME",
    "PROFILE_KEYS",
    "RESOURCE_PREFIX",
    "TIME_OF_DAY_KEYS",
    "admission_policy",
    "crds",
    "node_names",
    "plan",
    "profile_problems",
    "removal",
    "time_of_day_problems",
    "tokens",
]

GROUP = "power.poweraware.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
# The Kubernetes Power Manager's extended resources: its pod specs run here unchanged.
RESOURCE_PREFIX = "power.intel.com/"
LABELS = {
    "app.kubernetes.io/name": "pod-power",
    "app.kubernetes.io/part-of": "poweraware",
    "app.kubernetes.io/managed-by": "poweraware.k8s",
}
AGENT_ROLE = "poweraware:pod-power-agent"
POLICY_NAME = "poweraware-pod-power"
# The kernel's EPP strings, and the Power Manager's hyphen spellings of two of them (the agent writes
# the kernel's).
EPP_VALUES = (
    "default",
    "performance",
    "balance_performance",
    "balance-performance",
    "balance_power",
    "balance-power",
    "power",
)
PROFILE_KEYS = ("name", "shared", "min", "max", "epp", "governor", "cstates", "cpuCapacity", "nodeSelector")
# cpu_power's profile C-states keys (module_utils/node_power/cpu_power_plan.py CSTATES_KEYS), the same here.
CSTATES_KEYS = ("disable", "enable", "max_latency_us")
TIME_OF_DAY_KEYS = ("name", "timeZone", "nodeSelector", "schedule")
SCHEDULE_KEYS = ("time", "powerProfile")
# What the Power Manager's TimeOfDay schedules also do, which the agent does not.
SCHEDULE_REFUSED = {
    "pods": "moving pods between profiles is not done: give the pod the profile it needs",
    "cState": "C-states go in the shared profile's cstates (disable, enable, max_latency_us)",
}

# Other installations that set the same CPUs and advertise the same resources, by the CRDs they install.
FOREIGN_MANAGERS = (
    (
        "Kubernetes Power Manager",
        ("powerprofiles.power.intel.com", "powerconfigs.power.intel.com"),
        "uninstall it first: delete its PowerConfig (kubectl delete powerconfigs.power.intel.com --all -A), which "
        "removes its node agents, then its operator and its power.intel.com CRDs",
    ),
    (
        "Cluster Power Manager",
        ("powerprofiles.power.cluster-power-manager.github.io", "powerconfigs.power.cluster-power-manager.github.io"),
        "uninstall it first: delete its PowerConfig (kubectl delete powerconfigs.power.cluster-power-manager.github.io "
        "--all -A), which removes its node agents, then the operator as you installed it (make undeploy, helm "
        "uninstall or its OLM bundle) and its power.cluster-power-manager.github.io CRDs",
    ),
)

_PERCENT = re.compile(r"(100|[1-9]?[0-9])%")
_PERCENT_PATTERN = r"^(100|[1-9]?[0-9])%$"
_CAPACITY_PERCENT = re.compile(r"(100|[1-9][0-9]?)%")
_CAPACITY_PATTERN = r"^(100|[1-9][0-9]?)%$"
_GOVERNOR = re.compile(r"[a-z][a-z0-9_]{0,31}")
_GOVERNOR_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
_TIME = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?")
_TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$"
_TIME_ZONE = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")
_TIME_ZONE_PATTERN = r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"
_CSTATE = re.compile(r"[A-Za-z0-9_-]{1,32}")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _frequency(value):
    """A profile frequency as the CRD takes it: an integer (MHz) or ``N%``; digits-only text, what
    ``-e`` gives for a number, is the integer. None when it is neither."""
    if _is_int(value):
        return value if value > 0 else None
    if isinstance(value, str):
        if value.isdigit() and value.isascii():
            return int(value) if int(value) > 0 else None
        if _PERCENT.fullmatch(value):
            return value
    return None


def _labels_problems(value, where):
    if not isinstance(value, Mapping):
        return [f"{where} must be a mapping of label keys to values, not {type(value).__name__}"]
    problems = []
    for key, item in value.items():
        if not isinstance(key, str):
            problems.append(f"{where} key {key!r} is not a label key (text)")
            continue
        key_problems = qualified_name_problems(key)
        if key_problems:
            problems.append(f"{where} key {key!r} is not a label key: {'; '.join(key_problems)}")
        if not isinstance(item, str) or not is_label_value(item):
            problems.append(
                f"{where}[{key!r}] {item!r} is not a label value (text of at most 63 alphanumerics, '-', '_' or "
                "'.', starting and ending alphanumeric; quote numbers and booleans)"
            )
    return problems


def _node_selector_problems(value, where):
    if not isinstance(value, Mapping):
        return [f"{where} must be a mapping {{matchLabels: {{key: value}}}}, not {type(value).__name__}"]
    unknown = sorted(set(value) - {"matchLabels"}, key=str)
    problems = []
    if unknown:
        problems.append(
            f"{where} has {', '.join(map(str, unknown))}: only matchLabels is supported (nodes that carry every label)"
        )
    if "matchLabels" in value:
        problems += _labels_problems(value["matchLabels"], f"{where}.matchLabels")
    return problems


def _cstates_problems(value, where):
    if not isinstance(value, Mapping):
        return [f"{where} must be a mapping {{disable: [names], enable: [names], max_latency_us: N}}"]
    problems = []
    unknown = sorted(set(value) - set(CSTATES_KEYS), key=str)
    if unknown:
        problems.append(
            f"{where} has {', '.join(map(str, unknown))}: the keys are {', '.join(CSTATES_KEYS)} (the Cluster Power "
            "Manager's names: {C6: false} is disable: [C6], maxLatencyUs is max_latency_us)"
        )
    for key in ("disable", "enable"):
        names = value.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and _CSTATE.fullmatch(n) for n in names):
            problems.append(f"{where}.{key} {names!r} must be a list of C-state names (C1, C1E, C6 ...)")
    if isinstance(value.get("disable"), list) and isinstance(value.get("enable"), list):
        both = sorted(set(value["disable"]) & set(value["enable"]), key=str)
        if both:
            problems.append(f"{where}: {', '.join(map(str, both))} both disabled and enabled; name each state once")
    if "max_latency_us" in value and not (_is_int(value["max_latency_us"]) and value["max_latency_us"] >= 0):
        problems.append(f"{where}.max_latency_us {value['max_latency_us']!r} must be a whole number of microseconds")
    return problems


def profile_problems(name, spec, where="pod_power_profiles"):
    """The problems of one PowerProfile spec named ``name`` (its ``metadata.name``), each naming the field,
    the value, why and the fix; [] when the API server and the agent would take it."""
    label = f"{where}[{name!r}]"
    problems = []
    if not isinstance(name, str) or not is_dns1123_subdomain(name) or len(name) > QUALIFIED_NAME_MAX:
        problems.append(
            f"{label}: the name must be lower-case alphanumerics, '-' and '.', starting and ending alphanumeric, at "
            f"most {QUALIFIED_NAME_MAX} characters: it is the name part of the resource {RESOURCE_PREFIX}<name>"
        )
    if not isinstance(spec, Mapping):
        return problems + [f"{label} must be a mapping of {', '.join(PROFILE_KEYS)}, not {type(spec).__name__}"]
    unknown = sorted(set(spec) - set(PROFILE_KEYS), key=str)
    if unknown:
        hint = " (the Cluster Power Manager's pstates: put its min, max, epp and governor directly here)"
        problems.append(
            f"{label} has {', '.join(map(str, unknown))}: a profile's keys are {', '.join(PROFILE_KEYS)}"
            + (hint if "pstates" in unknown else "")
        )
    if "name" in spec and spec["name"] != name:
        problems.append(f"{label}.name {spec['name']!r} must be {name!r} (the Power Manager repeats the name there)")
    if "shared" in spec and not isinstance(spec["shared"], bool):
        problems.append(f"{label}.shared {spec['shared']!r} must be true or false")
    frequencies = {}
    for key in ("min", "max"):
        if key not in spec:
            continue
        value = _frequency(spec[key])
        if value is None:
            problems.append(
                f"{label}.{key} {spec[key]!r} must be a frequency in MHz (a whole number above 0, as the Power Manager "
                "takes it) or a percentage 'N%' (0-100) of each CPU's own cpuinfo range"
            )
        else:
            frequencies[key] = value
    low, high = frequencies.get("min"), frequencies.get("max")
    if isinstance(low, str) and isinstance(high, str):
        low_number, high_number = int(low[:-1]), int(high[:-1])
    else:
        low_number, high_number = low, high
    # Only like with like: MHz against a percentage depends on the node's CPUs (the agent's check).
    if type(low) is type(high) and low is not None and low_number > high_number:
        problems.append(f"{label}: min {low!r} is above max {high!r}; swap them")
    if "epp" in spec and spec["epp"] not in EPP_VALUES:
        problems.append(f"{label}.epp {spec['epp']!r} must be one of {', '.join(EPP_VALUES)}")
    if "governor" in spec and not (isinstance(spec["governor"], str) and _GOVERNOR.fullmatch(spec["governor"])):
        problems.append(f"{label}.governor {spec['governor']!r} must be a cpufreq governor name (powersave, ...)")
    if "cstates" in spec:
        problems += _cstates_problems(spec["cstates"], f"{label}.cstates")
    if "cpuCapacity" in spec:
        capacity = spec["cpuCapacity"]
        if not (
            (_is_int(capacity) and capacity >= 1)
            or (isinstance(capacity, str) and _CAPACITY_PERCENT.fullmatch(capacity))
        ):
            problems.append(
                f"{label}.cpuCapacity {capacity!r} must be a number of CPUs (1 or more) or a percentage 'N%' "
                "(1-100) of the node's CPUs that are not reserved"
            )
    if "nodeSelector" in spec:
        problems += _node_selector_problems(spec["nodeSelector"], f"{label}.nodeSelector")
    return problems


def _normalized_profile(name, spec):
    """The spec as applied: digits-only frequencies as integers, everything else as written."""
    out = dict(spec)
    for key in ("min", "max"):
        if key in out:
            out[key] = _frequency(out[key])
    return out


def time_of_day_problems(entry, index, profiles, where="pod_power_time_of_day"):
    """The problems of one TimeOfDay of the role (``{name, timeZone, nodeSelector, schedule}``); ``profiles``
    are the role's PowerProfiles, against which a schedule's profile is checked when it is one of them."""
    label = f"{where}[{index}]"
    if not isinstance(entry, Mapping):
        return [f"{label} must be a mapping of {', '.join(TIME_OF_DAY_KEYS)}, not {type(entry).__name__}"]
    problems = []
    name = entry.get("name")
    if not isinstance(name, str) or not is_dns1123_subdomain(name):
        problems.append(
            f"{label}.name {name!r} must be the TimeOfDay's name (lower-case alphanumerics, '-' and '.', starting and "
            "ending alphanumeric)"
        )
    else:
        label = f"{where}[{index}] ({name})"
    unknown = sorted(set(entry) - set(TIME_OF_DAY_KEYS), key=str)
    if unknown:
        hint = ""
        if "reservedCPUs" in unknown:
            hint = " (reservedCPUs are the kubelet's reservedSystemCPUs: the agent reads them, never touches them)"
        problems.append(f"{label} has {', '.join(map(str, unknown))}: the keys are {', '.join(TIME_OF_DAY_KEYS)}{hint}")
    if "timeZone" in entry and not (isinstance(entry["timeZone"], str) and _TIME_ZONE.fullmatch(entry["timeZone"])):
        problems.append(f"{label}.timeZone {entry['timeZone']!r} must be an IANA time zone name (Europe/Dublin, UTC)")
    if "nodeSelector" in entry:
        problems += _node_selector_problems(entry["nodeSelector"], f"{label}.nodeSelector")
    schedule = entry.get("schedule")
    if not isinstance(schedule, list) or not schedule:
        return problems + [f"{label}.schedule must be a non-empty list of {{time: 'HH:MM', powerProfile: <name>}}"]
    seen = set()
    for position, item in enumerate(schedule):
        at = f"{label}.schedule[{position}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at} must be a mapping {{time, powerProfile}}")
            continue
        for key in sorted(set(item) - set(SCHEDULE_KEYS), key=str):
            problems.append(
                f"{at}.{key}: not supported ({SCHEDULE_REFUSED.get(key, 'the keys are time, powerProfile')})"
            )
        time = item.get("time")
        if not isinstance(time, str) or not _TIME.fullmatch(time):
            problems.append(f"{at}.time {time!r} must be a time of day 'HH:MM' (00:00-23:59), quoted")
        elif time in seen:
            problems.append(f"{at}.time {time!r} is given twice; one profile per time")
        else:
            seen.add(time)
        profile = item.get("powerProfile")
        if not isinstance(profile, str) or not profile:
            problems.append(f"{at}.powerProfile {profile!r} must name a shared PowerProfile")
        elif (
            isinstance(profiles, Mapping)
            and isinstance(profiles.get(profile), Mapping)
            and profiles[profile].get("shared") is not True
        ):
            problems.append(
                f"{at}.powerProfile {profile!r} is not a shared profile: a TimeOfDay chooses the shared pool's "
                f"profile; set shared: true on it or name another"
            )
    return problems


def _meta(obj):
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _object(kind, name, spec=None, api_version=API_VERSION, namespace=None, **extra):
    metadata = {"name": name, "labels": dict(LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        obj["spec"] = spec
    obj.update(extra)
    return obj


def _match_labels_schema():
    return {
        "type": "object",
        "description": "Nodes that carry every one of these labels (default: every pod power node).",
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            # Kubernetes' label selector forms the Cluster Power Manager takes: declared so that they are
            # refused with a message instead of being dropped silently.
            "labelSelector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "matchExpressions": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "x-kubernetes-validations": [
            {
                "rule": "!has(self.labelSelector)",
                "message": "nodeSelector.labelSelector: write nodeSelector.matchLabels",
            },
            {
                "rule": "!has(self.matchExpressions)",
                "message": "nodeSelector.matchExpressions is not supported: use matchLabels",
            },
        ],
    }


def _frequency_schema(what):
    return {
        "description": (
            f"{what} frequency: an integer is MHz (the Power Manager's unit), 'N%' a percentage of each CPU's own "
            "cpuinfo_min..cpuinfo_max range, rounded down to 100 MHz."
        ),
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "minimum": 1,
        "maxLength": 4,
        "pattern": _PERCENT_PATTERN,
    }


def _crd(plural, kind, singular, short_names, schema, columns, status=False):
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns
        + [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
    }
    if status:
        version["subresources"] = {"status": {}}
    names = {"plural": plural, "singular": singular, "kind": kind, "listKind": f"{kind}List"}
    if short_names:
        names["shortNames"] = list(short_names)
    return _object(
        "CustomResourceDefinition",
        f"{plural}.{GROUP}",
        {"group": GROUP, "names": names, "scope": "Cluster", "versions": [version]},
        api_version="apiextensions.k8s.io/v1",
    )


def _profile_crd():
    spec = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 63, "description": "The Power Manager's repeat of metadata.name."},
            "shared": {
                "type": "boolean",
                "description": "The profile of the shared pool (CPUs no Guaranteed pod holds, reserved CPUs excluded).",
            },
            "min": _frequency_schema("Lowest"),
            "max": _frequency_schema("Highest"),
            "epp": {"type": "string", "enum": list(EPP_VALUES), "description": "Energy-performance preference."},
            "governor": {
                "type": "string",
                "pattern": _GOVERNOR_PATTERN,
                "description": "cpufreq governor; unset leaves each CPU's as it is.",
            },
            "cstates": {
                "type": "object",
                "description": "Idle states of the profile's CPUs, as the cpu_power role's profiles set them.",
                "properties": {
                    "disable": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 32},
                    "enable": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 32},
                    "max_latency_us": {"type": "integer", "minimum": 0},
                    # the Cluster Power Manager's spellings: refused with the translation
                    "names": {"type": "object", "additionalProperties": {"type": "boolean"}},
                    "maxLatencyUs": {"type": "integer"},
                },
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.names)",
                        "message": "cstates.names: write disable: [C6] for C6: false, enable: [C1] for C1: true",
                    },
                    {"rule": "!has(self.maxLatencyUs)", "message": "cstates.maxLatencyUs: write max_latency_us"},
                ],
            },
            "cpuCapacity": {
                "description": "How many CPUs of a node may run this profile at once: a number, or 'N%' of the "
                "node's CPUs that are not reserved (default 100%).",
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "minimum": 1,
                "maxLength": 4,
                "pattern": _CAPACITY_PATTERN,
            },
            "nodeSelector": _match_labels_schema(),
            "pstates": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "cpuScalingPolicy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-validations": [
            {
                "rule": "!has(self.min) || !has(self.max) || type(self.min) != int || type(self.max) != int"
                " || self.min <= self.max",
                "message": "spec.min is above spec.max (MHz): swap them",
            },
            {
                # 'N%' without leading zeros: the shorter text is the smaller number, equal lengths compare as text
                # (no parsing: what the API server's cost estimate allows for text of any length)
                "rule": "!has(self.min) || !has(self.max) || type(self.min) != string || type(self.max) != string"
                " || self.min.size() < self.max.size() || (self.min.size() == self.max.size() && self.min <= self.max)",
                "message": "spec.min is above spec.max (percentages of the cpuinfo range): swap them",
            },
            {
                "rule": "!has(self.pstates)",
                "message": "spec.pstates is the Cluster Power Manager's: put its min, max, epp and governor directly "
                "under spec",
            },
            {"rule": "!has(self.cpuScalingPolicy)", "message": "spec.cpuScalingPolicy (DPDK scaling) is not supported"},
        ],
    }
    schema = {
        "type": "object",
        "description": "A CPU power profile; pods ask for it as the resource power.intel.com/<name>.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.metadata.name.size() <= 63",
                "message": "the name is the name part of the resource power.intel.com/<name>: at most 63 characters",
            },
            {
                "rule": "!has(self.spec) || !has(self.spec.name) || self.spec.name == self.metadata.name",
                "message": "spec.name (the Power Manager repeats the name there) must equal metadata.name",
            },
        ],
    }
    columns = [
        {"name": "Shared", "type": "boolean", "jsonPath": ".spec.shared"},
        {"name": "Min", "type": "string", "jsonPath": ".spec.min"},
        {"name": "Max", "type": "string", "jsonPath": ".spec.max"},
        {"name": "EPP", "type": "string", "jsonPath": ".spec.epp"},
    ]
    return _crd("powerprofiles", "PowerProfile", "powerprofile", ["pprof"], schema, columns)


def _node_crd():
    def text():
        return {"type": "string"}

    status = {
        "type": "object",
        "description": "Written by the node's agent only.",
        # the agent's status carries what it knows; the fields below are typed, anything more is kept
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "sharedPool": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"profile": text(), "cpus": text()},
            },
            "reservedCPUs": text(),
            "activeProfiles": {"type": "array", "items": text()},
            "workloads": {
                "type": "array",
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {
                        "pod": text(),
                        "uid": text(),
                        "container": text(),
                        "cpus": text(),
                        "profile": text(),
                    },
                },
            },
            "profiles": {
                "type": "array",
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"name": text(), "resource": text(), "epp": text(), "governor": text()},
                },
            },
            "conditions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {
                        "type": text(),
                        "status": text(),
                        "reason": text(),
                        "message": text(),
                        "lastTransitionTime": text(),
                    },
                },
            },
            "observedAt": text(),
        },
    }
    schema = {
        "type": "object",
        "description": "One pod power node: the role creates it, the node's agent reports its CPUs in its status.",
        "properties": {
            "apiVersion": text(),
            "kind": text(),
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["nodeName"],
                "properties": {"nodeName": {"type": "string", "maxLength": 253}},
            },
            "status": status,
        },
        "x-kubernetes-validations": [
            {
                "rule": "!has(self.spec) || self.spec.nodeName == self.metadata.name",
                "message": "a PowerNode is named after its node: spec.nodeName must equal metadata.name",
            }
        ],
    }
    columns = [
        {
            "name": "Shared",
            "type": "string",
            "jsonPath": ".status.sharedPool.profile",
            "description": "Shared pool profile",
        },
        {"name": "Active", "type": "string", "jsonPath": ".status.activeProfiles", "description": "Profiles in use"},
    ]
    return _crd("powernodes", "PowerNode", "powernode", [], schema, columns, status=True)


def _time_of_day_crd():
    entry = {
        "type": "object",
        "required": ["time", "powerProfile"],
        "properties": {
            "time": {"type": "string", "maxLength": 8, "pattern": _TIME_PATTERN, "description": "Local time, HH:MM."},
            "powerProfile": {
                "type": "string",
                "minLength": 1,
                "maxLength": 253,
                "description": "A shared PowerProfile.",
            },
            # the Power Manager's: refused with the reason
            "pods": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "cState": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-validations": [
            {"rule": "!has(self.pods)", "message": "schedule[].pods: " + SCHEDULE_REFUSED["pods"]},
            {"rule": "!has(self.cState)", "message": "schedule[].cState: " + SCHEDULE_REFUSED["cState"]},
        ],
    }
    spec = {
        "type": "object",
        "required": ["schedule"],
        "properties": {
            "timeZone": {
                "type": "string",
                "maxLength": 64,
                "pattern": _TIME_ZONE_PATTERN,
                "description": "IANA name; default UTC.",
            },
            "nodeSelector": _match_labels_schema(),
            "schedule": {
                "type": "array",
                "minItems": 1,
                "maxItems": 96,
                "items": entry,
                "x-kubernetes-list-type": "atomic",
            },
            "reservedCPUs": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.schedule.all(a, self.schedule.exists_one(b, b.time == a.time))",
                "message": "spec.schedule names a time twice: one profile per time",
            },
            {
                "rule": "!has(self.reservedCPUs)",
                "message": "spec.reservedCPUs: the agent takes the kubelet's reservedSystemCPUs and never touches them",
            },
        ],
    }
    schema = {
        "type": "object",
        "description": "The shared pool's profile by time of day.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
    }
    columns = [{"name": "TimeZone", "type": "string", "jsonPath": ".spec.timeZone"}]
    return _crd("timeofdays", "TimeOfDay", "timeofday", [], schema, columns)


def crds():
    """The three CustomResourceDefinitions, PowerProfile, PowerNode and TimeOfDay (all cluster-scoped)."""
    return [_profile_crd(), _node_crd(), _time_of_day_crd()]


def admission_policy():
    """The ValidatingAdmissionPolicy and its binding: a pod that asks for a power profile is refused at
    creation when it asks for two, when a container's profile count is not its whole-CPU request, or
    when it is not Guaranteed (what the Kubernetes Power Manager schedules and then silently ignores)."""
    prefix = RESOURCE_PREFIX
    asks = f"r.startsWith('{prefix}')"
    containers = "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
    match = (
        f"({containers}).exists(c, has(c.resources) && ("
        f"(has(c.resources.requests) && c.resources.requests.exists(r, {asks})) || "
        f"(has(c.resources.limits) && c.resources.limits.exists(r, {asks}))))"
    )

    def same(side, resource):
        return (
            f"quantity(string(c.resources.{side}['{resource}'])).compareTo("
            f"quantity(string(c.resources.limits['{resource}']))) == 0"
        )

    variables = [
        {"name": "containers", "expression": containers},
        {
            "name": "powered",
            "expression": "variables.containers.filter(c, has(c.resources) && has(c.resources.requests)"
            f" && c.resources.requests.exists(r, {asks}))",
        },
        {"name": "profiles", "expression": f"variables.powered.map(c, c.resources.requests.filter(r, {asks}))"},
        {
            "name": "countDiffers",
            "expression": f"variables.powered.filter(c, c.resources.requests.exists(r, {asks}"
            # equal to a whole count: whole CPUs, however written (2, 2000m), as the static CPU manager takes them
            " && !('cpu' in c.resources.requests"
            " && quantity(string(c.resources.requests[r])).isInteger()"
            " && quantity(string(c.resources.requests['cpu']))"
            ".compareTo(quantity(string(c.resources.requests[r]))) == 0)))",
        },
        {
            "name": "notGuaranteed",
            "expression": "variables.containers.filter(c, !(has(c.resources) && has(c.resources.limits)"
            " && 'cpu' in c.resources.limits && 'memory' in c.resources.limits"
            " && (!has(c.resources.requests)"
            f" || ((!('cpu' in c.resources.requests) || {same('requests', 'cpu')})"
            f" && (!('memory' in c.resources.requests) || {same('requests', 'memory')})))))",
        },
    ]
    listed = f"variables.powered.map(c, c.name + ': ' + c.resources.requests.filter(r, {asks}).join(', ')).join('; ')"
    two = (
        f"its containers must all ask for the same {prefix}<profile>, the one profile the node gives the pod's "
        "CPUs; put a container that needs another profile in a pod of its own"
    )
    counts = (
        f"a container asks for as many {prefix}<profile> as whole CPUs (its cpu request), so that every CPU the "
        "kubelet's static CPU manager gives it runs the profile; set both to the same whole number"
    )
    guaranteed = (
        "a pod that asks for a power profile must be Guaranteed (every container and init container with cpu and "
        "memory limits, and requests absent or equal to them), so that the kubelet's static CPU manager gives it whole "
        "CPUs of its own; set its requests equal to its limits"
    )
    differs = (
        "variables.countDiffers.map(c, 'container ' + c.name + ' asks for ' + c.resources.requests.filter(r, "
        f"{asks}).map(r, r + ': ' + string(c.resources.requests[r])).join(', ') + ' and cpu: ' + ('cpu' in "
        "c.resources.requests ? string(c.resources.requests['cpu']) : 'none')).join('; ')"
    )
    lacking = "variables.notGuaranteed.map(c, c.name).join(', ')"
    validations = [
        {
            "expression": "variables.profiles.all(l, l.size() == 1 && l[0] == variables.profiles[0][0])",
            "message": f"refused: two power profiles in one pod: {two}",
            "messageExpression": f"'refused: two power profiles in one pod (' + {listed} + '): ' + {_cel_text(two)}",
        },
        {
            "expression": "variables.countDiffers.size() == 0",
            "message": f"refused: profile count differs from CPU count: {counts}",
            "messageExpression": (
                f"'refused: profile count differs from CPU count (' + {differs} + '): ' + {_cel_text(counts)}"
            ),
        },
        {
            "expression": "variables.notGuaranteed.size() == 0",
            "message": f"refused: the pod is not Guaranteed: {guaranteed}",
            "messageExpression": (
                f"'refused: the pod is not Guaranteed (' + {lacking} + ' without cpu and memory limits equal to its "
                f"requests): ' + {_cel_text(guaranteed)}"
            ),
        },
    ]
    policy = _object(
        "ValidatingAdmissionPolicy",
        POLICY_NAME,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "matchConditions": [{"name": "asks-for-a-power-profile", "expression": match}],
            "variables": variables,
            "validations": validations,
        },
        api_version="admissionregistration.k8s.io/v1",
    )
    binding = _object(
        "ValidatingAdmissionPolicyBinding",
        POLICY_NAME,
        {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
        api_version="admissionregistration.k8s.io/v1",
    )
    return [policy, binding]


def _cel_text(text):
    """A CEL string literal of ``text`` (double-quoted: the messages' apostrophes need no escape)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_names(node):
    """The names of one node's objects: its ServiceAccount, token Secret and ClusterRole(Binding)."""
    return {
        "service_account": f"pod-power-{node}",
        "secret": f"pod-power-{node}-token",
        "role": f"{AGENT_ROLE}:{node}",
    }


def _node_objects(node, namespace):
    names = node_names(node)
    account = _object("ServiceAccount", names["service_account"], api_version="v1", namespace=namespace)
    # A long-lived token, the documented way (a Secret of this type naming the account): the token
    # controller fills in token and ca.crt; the agent, a systemd unit and not a pod, reads them from files.
    secret = _object(
        "Secret", names["secret"], api_version="v1", namespace=namespace, type="kubernetes.io/service-account-token"
    )
    secret["metadata"]["annotations"] = {"kubernetes.io/service-account.name": names["service_account"]}
    own = [node]
    role = _object(
        "ClusterRole",
        names["role"],
        api_version="rbac.authorization.k8s.io/v1",
        rules=[
            # its own Node only: its labels (profiles' nodeSelector), and its status for the extended resources
            {"apiGroups": [""], "resources": ["nodes"], "resourceNames": own, "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "resourceNames": own, "verbs": ["get", "patch"]},
            # its own PowerNode only, whose status it writes
            {"apiGroups": [GROUP], "resources": ["powernodes"], "resourceNames": own, "verbs": ["get"]},
            {
                "apiGroups": [GROUP],
                "resources": ["powernodes/status"],
                "resourceNames": own,
                "verbs": ["get", "patch", "update"],
            },
        ],
    )
    binding = _object(
        "ClusterRoleBinding",
        names["role"],
        api_version="rbac.authorization.k8s.io/v1",
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names["role"]},
        subjects=[{"kind": "ServiceAccount", "name": names["service_account"], "namespace": namespace}],
    )
    power_node = _object("PowerNode", node, {"nodeName": node})
    return account, secret, role, binding, power_node


def _shared_role(nodes, namespace):
    role = _object(
        "ClusterRole",
        AGENT_ROLE,
        api_version="rbac.authorization.k8s.io/v1",
        rules=[
            # the pods of its node (RBAC cannot narrow a list to a field selector), the profiles and schedules
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [GROUP], "resources": ["powerprofiles", "timeofdays"], "verbs": ["get", "list", "watch"]},
            # Events on the pods it refuses (the core API's, which the agent posts)
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        ],
    )
    binding = _object(
        "ClusterRoleBinding",
        AGENT_ROLE,
        api_version="rbac.authorization.k8s.io/v1",
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_ROLE},
        subjects=[
            {"kind": "ServiceAccount", "name": node_names(node)["service_account"], "namespace": namespace}
            for node in nodes
        ],
    )
    return role, binding


def _foreign(found):
    problems = []
    for manager, names, fix in FOREIGN_MANAGERS:
        crds_found = [obj for key, objs in found.items() if str(key).startswith("foreign") for obj in objs or []]
        present = sorted({_meta(obj).get("name") for obj in crds_found} & set(names))
        if present:
            problems.append(
                f"the {manager} is installed (CustomResourceDefinition {', '.join(present)} found): its node agent "
                f"would set the same CPUs' frequencies and advertise the same {RESOURCE_PREFIX}<profile> resources, so "
                f"the two would undo each other on every CPU. {fix[0].upper()}{fix[1:]}, or leave "
                "poweraware_enable_pod_power false (docs/pod-power.md maps its objects to ours)"
            )
    return problems


def _host_problems(host):
    """cpu_power on the same host: its pools and shared profile own CPUs the agent would own too."""
    problems = []
    pools = host.get("cpu_power_pools") or []
    shared = host.get("cpu_power_shared_profile")
    if pools:
        named = ", ".join(str(p.get("name")) if isinstance(p, Mapping) else str(p) for p in pools)
        problems.append(f"cpu_power_pools ({named})")
    if shared not in (None, ""):
        problems.append(f"cpu_power_shared_profile ({shared})")
    if not problems:
        return []
    return [
        f"host {host.get('host')}: {' and '.join(problems)} set for this host, and the pod power agent owns every CPU "
        "of its node that is not reserved: one owner per CPU. Set cpu_power_pools: [] and cpu_power_shared_profile: "
        "null in its host_vars (the cpu_power role then gives those CPUs their original settings back on its next "
        "run, which site.yml makes before this one), or take the host out of pod_power_nodes"
    ]


def _select(hosts, found, errors, notes):
    """The pod power nodes, ``{host: node}``: the hosts whose Node exists and carries their labels."""
    nodes = {_meta(obj).get("name"): obj for obj in found.get("nodes") or []}
    selected, seen = {}, {}
    for host in hosts:
        name, node = host.get("host"), host.get("node")
        if not isinstance(node, str) or not is_dns1123_subdomain(node):
            errors.append(f"host {name}: pod_power_node_name {node!r} is not a Kubernetes node name")
            continue
        if len(node_names(node)["service_account"]) > DNS1123_SUBDOMAIN_MAX:
            errors.append(
                f"host {name}: node name {node!r} is too long for its ServiceAccount pod-power-<node> (at most "
                f"{DNS1123_SUBDOMAIN_MAX} characters)"
            )
            continue
        if node in seen:
            errors.append(f"hosts {seen[node]} and {name} both name node {node}: set pod_power_node_name apart")
            continue
        seen[node] = name
        labels = host.get("labels") or {}
        label_problems = _labels_problems(labels, f"host {name}: pod_power_node_labels")
        if label_problems:
            errors += label_problems
            continue
        if node not in nodes:
            errors.append(
                f"host {name}: the cluster has no Node {node!r} (kubectl get nodes lists them); set "
                "pod_power_node_name for this host to its Node's name, or take the host out of pod_power_nodes"
            )
            continue
        have = _meta(nodes[node]).get("labels") or {}
        missing = sorted(f"{k}={v}" for k, v in labels.items() if have.get(k) != v)
        if missing:
            notes.append(
                f"host {name} skipped: Node {node} lacks the labels pod_power_node_labels asks for "
                f"({', '.join(missing)}); nothing of pod power is set up there (kubectl label node {node} "
                f"{' '.join(missing)} to add it)"
            )
            continue
        problems = _host_problems(host)
        if "checks" in host:
            # what the node side read on the host before anything changed (its kubelet, cpufreq)
            checks = host["checks"]
            if not isinstance(checks, Mapping):
                problems.append(
                    f"host {name}: its node checks did not run in this play (unreachable, failed or left out by "
                    "--limit): the kubelet and CPUs there are not known; run again with the host"
                )
            else:
                problems += [f"host {name}: {problem}" for problem in checks.get("errors") or []]
        if problems:
            errors += problems
            continue
        selected[name] = node
    return selected


def plan(hosts, found, profiles, time_of_day, namespace):
    """What the role applies (``pod_power_state`` present), after checking everything first.

    ``hosts`` are the inventory's pod power hosts, each ``{host, node, labels, cpu_power_pools,
    cpu_power_shared_profile}`` and optionally ``checks``, what the node side found on the host first
    (``{errors}``; null when it did not run there: the host is refused). ``found`` is what
    ``k8s_info_many`` read: ``nodes`` (every Node), under every key starting with ``foreign`` the other
    power managers' CRDs (read by name), and ``power_nodes``, ``profiles`` and ``time_of_day`` (ours,
    by label).

    Returns ``errors`` (nothing is applied when there is one), ``notes``, ``selected`` (``{host:
    node}``), ``crds``, ``objects`` (after the namespace, in apply order), ``prune`` (ours no longer
    wanted: the role's profiles and TimeOfDays removed from its variables), ``secrets`` (``{node:
    Secret name}``, whose tokens the agents use) and ``token_queries`` (the ``k8s_info_many`` queries
    that read them, by node).
    """
    found = found if isinstance(found, Mapping) else {}
    errors, notes = [], []
    errors += _foreign(found)
    if not is_dns1123_label(namespace):
        errors.append(f"pod_power_namespace {namespace!r} is not a namespace name (a DNS-1123 label)")
    if not isinstance(profiles, Mapping):
        errors.append(f"pod_power_profiles must be a mapping of profile names to specs, not {type(profiles).__name__}")
        profiles = {}
    for name, spec in profiles.items():
        errors += profile_problems(name, spec)
    if not isinstance(time_of_day, list):
        errors.append(f"pod_power_time_of_day must be a list of TimeOfDay specs, not {type(time_of_day).__name__}")
        time_of_day = []
    names = [t.get("name") for t in time_of_day if isinstance(t, Mapping)]
    for index, entry in enumerate(time_of_day):
        errors += time_of_day_problems(entry, index, profiles)
    for name in sorted({n for n in names if isinstance(n, str) and names.count(n) > 1}):
        errors.append(f"pod_power_time_of_day names {name} twice; give each TimeOfDay its own name")
    if not isinstance(hosts, list):
        errors.append(f"the pod power hosts must be a list, not {type(hosts).__name__}")
        hosts = []
    selected = _select([h for h in hosts if isinstance(h, Mapping)], found, errors, notes)
    if hosts and not selected and not errors:
        notes.append("no host of pod_power_nodes carries the labels asked for: only the cluster objects are applied")
    nodes = sorted(selected.values())
    stale = sorted(
        name for name in (_meta(obj).get("name") for obj in found.get("power_nodes") or []) if name not in nodes
    )
    for name in stale:
        notes.append(
            f"PowerNode {name} is ours but node {name} is no longer a pod power node: its agent may still run there. "
            f"Put its host back in pod_power_nodes and run with -e pod_power_state=absent, or remove the agent's unit "
            f"on that node by hand, then kubectl delete powernode {name}"
        )
    result = {
        "errors": errors,
        "notes": notes,
        "selected": selected,
        "crds": crds(),
        "objects": [],
        "prune": [],
        "secrets": {node: node_names(node)["secret"] for node in nodes},
        "token_queries": {
            node: {"api_version": "v1", "kind": "Secret", "namespace": namespace, "name": node_names(node)["secret"]}
            for node in nodes
        },
    }
    if errors:
        return result
    objects = []
    per_node = [_node_objects(node, namespace) for node in nodes]
    shared_role, shared_binding = _shared_role(nodes, namespace)
    # identities and permissions first, then what the agents read, then the admission policy
    objects.append(shared_role)
    for account, secret, role, binding, _power_node in per_node:
        objects += [account, secret, role, binding]
    objects.append(shared_binding)
    objects += [power_node for *_rest, power_node in per_node]
    wanted_profiles = sorted(profiles)
    objects += [_object("PowerProfile", name, _normalized_profile(name, profiles[name])) for name in wanted_profiles]
    wanted_tod = []
    for entry in time_of_day:
        spec = {k: entry[k] for k in ("timeZone", "nodeSelector", "schedule") if k in entry}
        objects.append(_object("TimeOfDay", entry["name"], spec))
        wanted_tod.append(entry["name"])
    objects += admission_policy()
    result["objects"] = objects
    for key, kind, wanted in (("profiles", "PowerProfile", wanted_profiles), ("time_of_day", "TimeOfDay", wanted_tod)):
        for obj in found.get(key) or []:
            name = _meta(obj).get("name")
            if name and name not in wanted:
                result["prune"].append({"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}})
    return result


def removal(hosts, found, namespace):
    """What the role removes (``pod_power_state`` absent), in order, for ``_common``'s remove.yml:
    ``objects`` (the admission policy first, then the PowerNodes, profiles and TimeOfDays, the RBAC, the
    identities and the CRDs; the namespace is remove.yml's last step) and ``notes`` (objects that are not
    ours but go with the CRDs). The nodes are the hosts' and those of every PowerNode of ours found."""
    found = found if isinstance(found, Mapping) else {}
    nodes = {h.get("node") for h in hosts or [] if isinstance(h, Mapping) and isinstance(h.get("node"), str)}
    nodes |= {_meta(obj).get("name") for obj in found.get("power_nodes") or [] if _meta(obj).get("name")}
    nodes = sorted(n for n in nodes if is_dns1123_subdomain(n))
    policy, binding = admission_policy()
    objects = [binding, policy]

    def ref(kind, name, api_version=API_VERSION, ns=None):
        meta = {"name": name}
        if ns:
            meta["namespace"] = ns
        return {"apiVersion": api_version, "kind": kind, "metadata": meta}

    rbac = "rbac.authorization.k8s.io/v1"
    objects += [ref("PowerNode", node) for node in nodes]
    for key, kind in (("profiles", "PowerProfile"), ("time_of_day", "TimeOfDay")):
        objects += [ref(kind, name) for name in sorted({_meta(o).get("name") for o in found.get(key) or []} - {None})]
    objects += [ref("ClusterRoleBinding", AGENT_ROLE, rbac), ref("ClusterRole", AGENT_ROLE, rbac)]
    for node in nodes:
        names = node_names(node)
        objects += [
            ref("ClusterRoleBinding", names["role"], rbac),
            ref("ClusterRole", names["role"], rbac),
            ref("Secret", names["secret"], "v1", namespace),
            ref("ServiceAccount", names["service_account"], "v1", namespace),
        ]
    objects += [ref("CustomResourceDefinition", _meta(crd)["name"], "apiextensions.k8s.io/v1") for crd in crds()]
    notes = []
    others = []
    ours = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for key, kind in (("all_profiles", "PowerProfile"), ("all_time_of_day", "TimeOfDay")):
        for obj in found.get(key) or []:
            name = _meta(obj).get("name")
            if name and (kind, name) not in ours:
                others.append(f"{kind} {name}")
    if others:
        notes.append(
            f"{', '.join(others)} (not applied by the role) go with the {GROUP} CustomResourceDefinitions: nothing "
            "reads them once the agents are gone"
        )
    return {"objects": objects, "notes": notes}


def tokens(found):
    """The agents' tokens from their Secrets as ``k8s_info_many`` read them (``{node: [Secret]}``):
    ``tokens`` (``{node: {token, ca}}``, decoded, for the Secrets the token controller has filled in) and
    ``waiting`` (the nodes whose Secret is missing or not filled in yet)."""
    out = {"tokens": {}, "waiting": []}
    for node, objs in sorted((found or {}).items()):
        data = (objs[0].get("data") if objs and isinstance(objs[0], Mapping) else None) or {}
        try:
            token = base64.b64decode(data.get("token") or "", validate=True).decode("utf-8")
            ca = base64.b64decode(data.get("ca.crt") or "", validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            token = ca = ""
        if token and ca:
            out["tokens"][node] = {"token": token, "ca": ca}
        else:
            out["waiting"].append(node)
    return out
