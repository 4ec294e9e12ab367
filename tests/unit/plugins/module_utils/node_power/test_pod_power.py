"""pod_power (issue 47): PowerProfiles checked and normalised, the kubelet's CPU manager checkpoint,
the shared pool's profile by TimeOfDay, a profile on a node's limit groups, the pods' claims and
the node's plan - with the exact messages the node agent reports and the pods' Events carry.

The node throughout: a hybrid part with two limit groups (P-cores 0-7, two SMT threads each, 800 ..
4700 MHz; E-cores 8-11, 700 .. 3000 MHz), CPU 11 offline, the kubelet's reservedSystemCPUs 0-1 (the
first core's two threads), intel_pstate in active mode (EPP refused under the performance governor).
"""

from __future__ import annotations

import datetime
import json
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import pod_power as pp

NODE = "worker-1"
LABELS = {"kubernetes.io/hostname": NODE, "poweraware.io/pod-power": "true"}
RESERVED = "0-1"

INFO = {
    "cpufreq_available": True,
    "driver": "intel_pstate",
    "epp_supported": True,
    "epp_refused_under_performance": True,
    "present": "0-11",
    "online": "0-10",
    "offline": "11",
    "available_governors": ["performance", "powersave"],
    "available_epp": ["default", "performance", "balance_performance", "balance_power", "power"],
    "limit_groups": [
        {"cpus": [0, 1, 2, 3, 4, 5, 6, 7], "cpulist": "0-7", "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 4700,
         "base_mhz": 2100},
        {"cpus": [8, 9, 10, 11], "cpulist": "8-11", "cpuinfo_min_mhz": 700, "cpuinfo_max_mhz": 3000,
         "base_mhz": 1800},
    ],
    "messages": ["CPUs 11 are offline and are skipped by cpu_power_profile"],
}  # fmt: skip
P_CORES, E_CORES = INFO["limit_groups"]


def profile_object(object_name, **spec):
    """A PowerProfile as the API server returns it."""
    return {
        "apiVersion": f"{pp.GROUP}/v1",
        "kind": "PowerProfile",
        "metadata": {"name": object_name, "uid": f"uid-{object_name}", "resourceVersion": "4711"},
        "spec": spec,
    }


PROFILE_OBJECTS = [
    # as the Power Manager writes them: the name repeated in the spec, hyphenated EPP
    profile_object("performance", name="performance", min="80%", max="100%", epp="performance", governor="performance"),
    profile_object("eco", min=800, max=2000, epp="balance-power", governor="powersave", cpuCapacity="50%"),
    profile_object("shared-balanced", shared=True, max="80%", epp="balance_performance", governor="powersave"),
    # above the E-cores' cpuinfo_max: this node cannot do it
    profile_object("turbo", min=4000, max=4700, epp="performance", governor="performance", cpuCapacity=2),
    # for other nodes only
    profile_object("gpu-nodes", max="90%", nodeSelector={"matchLabels": {"accelerator": "gpu"}}),
]


def checked(objects=None):
    profiles, problems = pp.check_profiles(PROFILE_OBJECTS if objects is None else objects)
    assert problems == []
    return profiles


PROFILES = checked()

# kubelet's CPUManagerCheckpointV2 as it writes it: compact, keys sorted, checksum included
STATE_TEXT = json.dumps(
    {
        "policyName": "static",
        "defaultCpuSet": "0-1,6-7,10",
        "entries": {"uid-eco": {"worker": "8-9"}, "uid-fast": {"app": "2-3"}, "uid-plain": {"db": "4-5"}},
        "checksum": 3166112283,
    },
    separators=(",", ":"),
)
STATE = pp.parse_cpu_manager_state(STATE_TEXT)


def container(name, cpu="2", memory="1Gi", power=None, requests=True, **extra):
    """A container whose limits are ``cpu``/``memory`` (None: unset) plus power resources; requests
    equal to the limits (the API server's defaulting), or left out."""
    limits = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits.update(power or {})
    resources = {"limits": limits}
    if requests:
        resources["requests"] = dict(limits)
    resources.update(extra)
    return {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": resources}


def pod(name, uid, containers, namespace="apps", node=NODE, phase="Running", init=None, deleting=False):
    metadata = {"name": name, "namespace": namespace, "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = "2025-01-06T10:00:00Z"
    spec = {"nodeName": node, "containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


FAST = pod("fast-0", "uid-fast", [container("app", power={"power.intel.com/performance": "2"})])
ECO = pod("eco-0", "uid-eco", [container("worker", cpu="2000m", power={"power.intel.com/eco-worker-1": "2"})])
PLAIN = pod("db-0", "uid-plain", [container("db")], namespace="data")
PODS = [FAST, ECO, PLAIN]


NOT_GIVEN = object()  # node_plan(state=None) is the plan without a checkpoint, so the default is another value


def node_plan(pods=None, state=NOT_GIVEN, reserved=RESERVED, info=None, profiles=None, shared="shared-balanced",
              labels=None):  # fmt: skip
    return pp.plan(
        NODE,
        LABELS if labels is None else labels,
        PODS if pods is None else pods,
        STATE if state is NOT_GIVEN else state,
        reserved,
        INFO if info is None else info,
        PROFILES if profiles is None else profiles,
        shared,
    )


TURBO_PROBLEMS = [
    f"profile turbo: {key} {mhz} MHz is above CPUs 8-11's cpuinfo_max 3000 MHz on this node; lower {key} or use a "
    'percentage like "100%"'
    for key, mhz in (("min", 4000), ("max", 4700))
]


# --- check_profiles ---------------------------------------------------------------------------------


def test_check_profiles_normalises_the_power_managers_and_our_fields():
    assert PROFILES["performance"] == {
        "name": "performance",
        "shared": False,
        "min": ("pct", 80.0),
        "max": ("pct", 100.0),
        "epp": "performance",
        "governor": "performance",
        "cstates": None,
        "cpu_capacity": ("pct", 100.0),
        "node_selector": {},
    }
    assert PROFILES["eco"] == {
        "name": "eco",
        "shared": False,
        "min": ("mhz", 800),
        "max": ("mhz", 2000),
        "epp": "balance_power",  # the Power Manager's hyphen, the kernel's underscore
        "governor": "powersave",
        "cstates": None,
        "cpu_capacity": ("pct", 50.0),
        "node_selector": {},
    }
    assert PROFILES["shared-balanced"]["shared"] is True
    assert PROFILES["turbo"]["cpu_capacity"] == ("count", 2)
    assert PROFILES["gpu-nodes"]["node_selector"] == {"accelerator": "gpu"}
    assert sorted(PROFILES) == ["eco", "gpu-nodes", "performance", "shared-balanced", "turbo"]


def test_a_profile_without_spec_is_the_whole_range():
    profiles = checked([{"metadata": {"name": "plain"}}])
    assert profiles["plain"] == {
        "name": "plain",
        "shared": False,
        "min": None,
        "max": None,
        "epp": None,
        "governor": None,
        "cstates": None,
        "cpu_capacity": ("pct", 100.0),
        "node_selector": {},
    }


@pytest.mark.parametrize(
    ("value", "normalised"),
    [(2400, ("mhz", 2400)), (1, ("mhz", 1)), ("80%", ("pct", 80.0)), (" 50 %", ("pct", 50.0)), ("0%", ("pct", 0.0)),
     ("100%", ("pct", 100.0)), ("12.5%", ("pct", 12.5))],
)  # fmt: skip
def test_frequency_forms(value, normalised):
    assert checked([profile_object("p", max=value)])["p"]["max"] == normalised


HINT = 'give whole MHz (e.g. 2400) or a percentage of the CPUs\' range as a string (e.g. "80%")'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, f"profile p: max True is a boolean, not a frequency: {HINT}"),
        (0, f"profile p: max 0 MHz is not above 0: {HINT}"),
        (-100, f"profile p: max -100 MHz is not above 0: {HINT}"),
        ("101%", 'profile p: max \'101%\' is above 100%: give a percentage within "0%".."100%"'),
        ("fast", f"profile p: max 'fast' is neither whole MHz nor a percentage: {HINT}"),
        ("2400", f"profile p: max '2400' is neither whole MHz nor a percentage: {HINT}"),
        (2400.5, f"profile p: max 2400.5 is neither whole MHz nor a percentage: {HINT}"),
        ("-5%", f"profile p: max '-5%' is neither whole MHz nor a percentage: {HINT}"),
    ],
)
def test_frequency_refusals(value, message):
    assert pp.check_profiles([profile_object("p", max=value)]) == ({}, [message])


@pytest.mark.parametrize(
    ("low", "high", "message"),
    [
        (3000, 2000, "profile p: min 3000 is above max 2000: lower min or raise max"),
        ("90%", "50%", "profile p: min '90%' is above max '50%': lower min or raise max"),
    ],
)
def test_min_above_max_of_one_kind(low, high, message):
    assert pp.check_profiles([profile_object("p", min=low, max=high)]) == ({}, [message])


def test_min_and_max_of_two_kinds_are_judged_on_a_node():
    profiles = checked([profile_object("p", min=3000, max="10%")])
    assert profiles["p"]["min"] == ("mhz", 3000)
    assert profiles["p"]["max"] == ("pct", 10.0)


@pytest.mark.parametrize(
    ("value", "normalised"),
    [("default", "default"), ("performance", "performance"), ("balance-performance", "balance_performance"),
     ("balance_performance", "balance_performance"), ("balance-power", "balance_power"), ("power", "power")],
)  # fmt: skip
def test_epp_names(value, normalised):
    assert checked([profile_object("p", epp=value)])["p"]["epp"] == normalised


@pytest.mark.parametrize("value", ["turbo", "", 128, "balance performance"])
def test_epp_refusals(value):
    assert pp.check_profiles([profile_object("p", epp=value)]) == (
        {},
        [
            f"profile p: epp {value!r} is not an energy performance preference the kernel knows: give one of default, "
            "performance, balance_performance, balance_power, power"
        ],
    )


@pytest.mark.parametrize("value", [5, "", "  ", ["powersave"]])
def test_governor_refusals(value):
    assert pp.check_profiles([profile_object("p", governor=value)]) == (
        {},
        [
            f"profile p: governor {value!r} is not a governor name: give one like powersave or performance (the "
            "node's scaling_available_governors), or leave governor out to keep each CPU's own"
        ],
    )


def test_cstates_as_cpu_powers_profiles():
    cstates = {"disable": ["C6"], "enable": ["C1", "C1E"], "max_latency_us": 10}
    assert checked([profile_object("p", cstates=cstates)])["p"]["cstates"] == cstates


@pytest.mark.parametrize(
    ("cstates", "message"),
    [
        ("C6", "profile p: cstates must be a mapping with keys disable, enable, max_latency_us, got 'C6'"),
        ({"disabled": ["C6"]}, "profile p: cstates: unknown key(s) disabled; allowed: disable, enable, max_latency_us"),
        ({"disable": "C6"}, "profile p: cstates.disable 'C6' is not a list of state names, e.g. [C6] or [C1E, C6]"),
        ({"enable": [6]}, "profile p: cstates.enable [6] is not a list of state names, e.g. [C6] or [C1E, C6]"),
        ({"max_latency_us": -1}, "profile p: cstates.max_latency_us -1 is not a whole number of microseconds >= 0"),
        ({"max_latency_us": True}, "profile p: cstates.max_latency_us True is not a whole number of microseconds >= 0"),
    ],
)
def test_cstates_refusals(cstates, message):
    assert pp.check_profiles([profile_object("p", cstates=cstates)]) == ({}, [message])


@pytest.mark.parametrize(
    ("value", "normalised"),
    [(None, ("pct", 100.0)), (0, ("count", 0)), (4, ("count", 4)), ("50%", ("pct", 50.0)), ("0%", ("pct", 0.0))],
)
def test_cpu_capacity_forms(value, normalised):
    assert checked([profile_object("p", cpuCapacity=value)])["p"]["cpu_capacity"] == normalised


CAPACITY_HINT = 'give whole CPUs (e.g. 4) or a share of the node\'s non-reserved online CPUs as a string (e.g. "50%")'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, f"profile p: cpuCapacity -1 is below 0: {CAPACITY_HINT}"),
        (True, f"profile p: cpuCapacity True is neither whole CPUs nor a percentage: {CAPACITY_HINT}"),
        (2.5, f"profile p: cpuCapacity 2.5 is neither whole CPUs nor a percentage: {CAPACITY_HINT}"),
        ("half", f"profile p: cpuCapacity 'half' is neither whole CPUs nor a percentage: {CAPACITY_HINT}"),
        ("150%", f"profile p: cpuCapacity '150%' is above 100%: {CAPACITY_HINT}"),
    ],
)
def test_cpu_capacity_refusals(value, message):
    assert pp.check_profiles([profile_object("p", cpuCapacity=value)]) == ({}, [message])


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("gpu", "profile p: nodeSelector 'gpu' is not a mapping: give {matchLabels: {label: value}}"),
        (
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
            "profile p: nodeSelector field(s) matchExpressions are not supported: only matchLabels is (every label "
            "equal); select the nodes by labels",
        ),
        ({"matchLabels": ["gpu"]}, "profile p: nodeSelector.matchLabels ['gpu'] is not a mapping of label: value"),
        (
            {"matchLabels": {"gpu": True}},
            'profile p: nodeSelector.matchLabels gpu: label values are strings; quote them (e.g. "true", "1")',
        ),
    ],
)
def test_node_selector_refusals(selector, message):
    assert pp.check_profiles([profile_object("p", nodeSelector=selector)]) == ({}, [message])


def test_an_empty_node_selector_selects_every_node():
    assert checked([profile_object("p", nodeSelector={})])["p"]["node_selector"] == {}
    assert checked([profile_object("p", nodeSelector={"matchLabels": None})])["p"]["node_selector"] == {}


def test_unknown_spec_fields_are_refused_listing_the_allowed_ones():
    assert pp.check_profiles([profile_object("p", maxFreq=3000, pstates={})]) == (
        {},
        [
            "profile p: unknown spec field(s) maxFreq, pstates; allowed: name, shared, max, min, epp, governor, "
            "cstates, cpuCapacity, nodeSelector"
        ],
    )


def test_spec_name_must_be_the_objects_name():
    assert pp.check_profiles([profile_object("p", name="performance")]) == (
        {},
        ["profile p: spec.name 'performance' differs from metadata.name 'p': make them equal or leave spec.name out"],
    )


@pytest.mark.parametrize("value", ["true", 1, "yes"])
def test_shared_must_be_a_boolean(value):
    assert pp.check_profiles([profile_object("p", shared=value)]) == (
        {},
        [f"profile p: shared {value!r} is not true or false: write shared: true or false"],
    )


def test_objects_that_are_no_profiles():
    objects = [
        "performance",
        {"metadata": {}},
        profile_object("p"),
        profile_object("p", max="50%"),
        {"metadata": {"name": "q"}, "spec": ["max"]},
    ]
    assert pp.check_profiles(objects) == (
        {"p": checked([profile_object("p")])["p"]},
        [
            "PowerProfile #0: 'performance' is not an object with metadata and spec",
            "PowerProfile #1 has no metadata.name: every PowerProfile is named",
            "PowerProfile p is given twice: the second one is left out",
            "profile q: spec ['max'] is not a mapping of name, shared, max, min, epp, governor, cstates, cpuCapacity, "
            "nodeSelector",
        ],
    )


def test_every_problem_at_once_and_the_valid_profiles_kept():
    objects = [profile_object("bad", min=True, max="200%", epp="fast", cpuCapacity=-2, colour="red"), *PROFILE_OBJECTS]
    profiles, problems = pp.check_profiles(objects)
    assert profiles == PROFILES
    assert problems == [
        "profile bad: unknown spec field(s) colour; allowed: name, shared, max, min, epp, governor, cstates, "
        "cpuCapacity, nodeSelector",
        f"profile bad: min True is a boolean, not a frequency: {HINT}",
        'profile bad: max \'200%\' is above 100%: give a percentage within "0%".."100%"',
        "profile bad: epp 'fast' is not an energy performance preference the kernel knows: give one of default, "
        "performance, balance_performance, balance_power, power",
        f"profile bad: cpuCapacity -2 is below 0: {CAPACITY_HINT}",
    ]


def test_no_objects():
    assert pp.check_profiles([]) == ({}, [])
    assert pp.check_profiles(None) == ({}, [])


# --- profiles_for_node -------------------------------------------------------------------------------


def test_profiles_for_node_by_match_labels():
    assert sorted(pp.profiles_for_node(PROFILES, LABELS)) == ["eco", "performance", "shared-balanced", "turbo"]
    gpu = dict(LABELS, accelerator="gpu")
    assert "gpu-nodes" in pp.profiles_for_node(PROFILES, gpu)
    assert "gpu-nodes" not in pp.profiles_for_node(PROFILES, dict(LABELS, accelerator="fpga"))
    assert sorted(pp.profiles_for_node(PROFILES, None)) == ["eco", "performance", "shared-balanced", "turbo"]


def test_every_label_must_equal():
    profiles = checked([profile_object("p", nodeSelector={"matchLabels": {"a": "1", "b": "2"}})])
    assert pp.profiles_for_node(profiles, {"a": "1", "b": "2", "c": "3"}) == profiles
    assert pp.profiles_for_node(profiles, {"a": "1"}) == {}
    assert pp.profiles_for_node(profiles, {"a": "1", "b": "3"}) == {}


# --- parse_cpu_manager_state --------------------------------------------------------------------------


def test_kubelets_checkpoint():
    assert STATE == {
        "policy": "static",
        "default": [0, 1, 6, 7, 10],
        "entries": {"uid-eco": {"worker": [8, 9]}, "uid-fast": {"app": [2, 3]}, "uid-plain": {"db": [4, 5]}},
    }


def test_checkpoint_as_bytes_and_without_entries():
    # policy none: kubelet writes no entries and an empty default set
    text = b'{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'
    assert pp.parse_cpu_manager_state(text) == {"policy": "none", "default": [], "entries": {}}


def test_checksum_is_not_verified():
    doc = {"policyName": "static", "defaultCpuSet": "0-3", "checksum": 1}
    assert pp.parse_cpu_manager_state(json.dumps(doc))["default"] == [0, 1, 2, 3]


WHERE = "the kubelet's cpu_manager_state"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{",
            f"{WHERE} is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): "
            'expected {"policyName", "defaultCpuSet", "entries", "checksum"}',
        ),
        (
            "",
            f'{WHERE} is not JSON (Expecting value: line 1 column 1 (char 0)): expected {{"policyName", '
            '"defaultCpuSet", "entries", "checksum"}',
        ),
        ("[]", f'{WHERE} is list JSON, not an object {{"policyName", "defaultCpuSet", ...}}'),
        (
            '{"defaultCpuSet":""}',
            f"{WHERE} is not a CPU manager checkpoint: policyName None is not a string (kubelet writes none or static)",
        ),
        (
            '{"policyName":"static"}',
            f'{WHERE} is not a CPU manager checkpoint: defaultCpuSet is missing (kubelet always writes it, "" for no '
            "CPUs)",
        ),
        (
            '{"policyName":"static","defaultCpuSet":"0-x"}',
            f"{WHERE} is not a CPU manager checkpoint: defaultCpuSet: invalid CPU list '0-x': 'x' is not a CPU number "
            "(expected a form like '0-3,8,10-11')",
        ),
        (
            '{"policyName":"static","defaultCpuSet":3}',
            f"{WHERE} is not a CPU manager checkpoint: defaultCpuSet 3 is not a cpuset string (kubelet writes them "
            'like "2-3,8")',
        ),
        (
            '{"policyName":"static","defaultCpuSet":"","entries":{"0f3c":"2-3"}}',
            f"{WHERE} is not a CPU manager checkpoint: entries['0f3c'] is a cpuset, not a mapping of container name "
            "to cpuset: a v1 checkpoint (by container ID) from an old kubelet; pod_power reads the v2 checkpoint (by "
            "pod UID, then container)",
        ),
        (
            '{"policyName":"static","defaultCpuSet":"","entries":["u"]}',
            f"{WHERE} is not a CPU manager checkpoint: entries ['u'] is not a mapping of pod UID to containers",
        ),
        (
            '{"policyName":"static","defaultCpuSet":"","entries":{"u":7}}',
            f"{WHERE} is not a CPU manager checkpoint: entries['u'] 7 is not a mapping of container name to cpuset",
        ),
        (
            '{"policyName":"static","defaultCpuSet":"","entries":{"u":{"app":"5-2"}}}',
            f"{WHERE} is not a CPU manager checkpoint: entries['u']['app']: invalid CPU list '5-2': range '5-2' is "
            "descending",
        ),
    ],
)
def test_checkpoint_refusals(text, message):
    with pytest.raises(pp.PodPowerError) as info:
        pp.parse_cpu_manager_state(text)
    assert str(info.value) == message


def test_checkpoint_problems_all_at_once():
    text = '{"policyName":1,"defaultCpuSet":"a","entries":{"u":{"app":2}}}'
    with pytest.raises(pp.PodPowerError) as info:
        pp.parse_cpu_manager_state(text)
    assert str(info.value) == (
        f"{WHERE} is not a CPU manager checkpoint: policyName 1 is not a string (kubelet writes none or static); "
        "defaultCpuSet: invalid CPU list 'a': 'a' is not a CPU number (expected a form like '0-3,8,10-11'); "
        "entries['u']['app'] 2 is not a cpuset string (kubelet writes them like \"2-3,8\")"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            b"\xff",
            f"{WHERE} is not UTF-8 text ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)",
        ),
        (
            None,
            f"{WHERE} is not JSON (the JSON object must be str, bytes or bytearray, not NoneType): expected "
            '{"policyName", "defaultCpuSet", "entries", "checksum"}',
        ),
    ],
)
def test_checkpoint_that_is_no_text(text, message):
    with pytest.raises(pp.PodPowerError) as info:
        pp.parse_cpu_manager_state(text)
    assert str(info.value) == message


def test_pod_power_error_is_a_value_error():
    assert issubclass(pp.PodPowerError, ValueError)


# --- shared_profile -----------------------------------------------------------------------------------

NOW = datetime.datetime(2025, 1, 6, 12, 0, tzinfo=datetime.timezone.utc)  # winter: Berlin is UTC+1
DAY_NIGHT = checked([
    profile_object("day", shared=True, max="100%"),
    profile_object("night", shared=True, max="40%"),
    profile_object("exclusive", max="100%"),
])  # fmt: skip


def time_of_day(name, schedule, zone=None, selector=None, **extra):
    spec = {"schedule": schedule, **extra}
    if zone is not None:
        spec["timeZone"] = zone
    if selector is not None:
        spec["nodeSelector"] = selector
    return {"apiVersion": f"{pp.GROUP}/v1", "kind": "TimeOfDay", "metadata": {"name": name}, "spec": spec}


SCHEDULE = [{"time": "07:00", "powerProfile": "day"}, {"time": "19:30", "powerProfile": "night"}]


def at(hour, minute):
    return datetime.datetime(2025, 1, 6, hour, minute, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(
    ("now", "chosen"),
    [
        (at(0, 0), "night"),  # before the day's first entry: yesterday's last
        (at(6, 59), "night"),
        (at(7, 0), "day"),  # an entry starts at its minute
        (at(12, 0), "day"),
        (at(19, 29), "day"),
        (at(19, 30), "night"),
        (at(23, 59), "night"),
    ],
)
def test_time_of_day_in_utc(now, chosen):
    tods = [time_of_day("office-hours", SCHEDULE)]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, now) == (chosen, [])


def test_schedule_order_does_not_matter():
    tods = [time_of_day("office-hours", list(reversed(SCHEDULE)))]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(8, 0)) == ("day", [])
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(3, 0)) == ("night", [])


@pytest.mark.parametrize(("now", "chosen"), [(at(5, 59), "night"), (at(6, 0), "day"), (at(18, 30), "night")])
def test_time_of_day_in_its_zone(now, chosen):
    # 06:00 UTC is 07:00 in Berlin in January
    tods = [time_of_day("office-hours", SCHEDULE, zone="Europe/Berlin")]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, now) == (chosen, [])


def test_time_zone_lookup_is_injected():
    asked = []

    def lookup(name):
        asked.append(name)
        return datetime.timezone(datetime.timedelta(hours=-5))

    tods = [time_of_day("office-hours", SCHEDULE, zone="America/New_York")]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(12, 0), tz_lookup=lookup) == ("day", [])  # 07:00 there
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(11, 59), tz_lookup=lookup) == ("night", [])
    assert asked == ["America/New_York", "America/New_York"]


def test_a_naive_now_is_utc():
    tods = [time_of_day("office-hours", SCHEDULE)]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, datetime.datetime(2025, 1, 6, 7, 0)) == ("day", [])


def test_unknown_time_zone():
    tods = [time_of_day("office-hours", SCHEDULE, zone="Mars/Olympus_Mons")]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW) == (
        None,
        [
            "TimeOfDay office-hours: timeZone 'Mars/Olympus_Mons' is unknown on this node ('No time zone found with "
            "key Mars/Olympus_Mons'): give an IANA name like Europe/Berlin, or UTC"
        ],
    )


def test_without_zoneinfo_only_utc_is_known(monkeypatch):
    monkeypatch.setitem(sys.modules, "zoneinfo", None)  # Python 3.8: the import fails
    assert pp.shared_profile(DAY_NIGHT, [time_of_day("t", SCHEDULE, zone="UTC")], LABELS, at(8, 0)) == ("day", [])
    assert pp.shared_profile(DAY_NIGHT, [time_of_day("t", SCHEDULE, zone="Europe/Berlin")], LABELS, NOW) == (
        None,
        [
            "TimeOfDay t: timeZone 'Europe/Berlin' is unknown on this node (this node's Python has no zoneinfo "
            "(3.9+), so it knows UTC only): give an IANA name like Europe/Berlin, or UTC"
        ],
    )


def test_a_lookup_without_answer():
    tods = [time_of_day("t", SCHEDULE, zone="Local")]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW, tz_lookup=lambda name: None) == (
        None,
        [
            "TimeOfDay t: timeZone 'Local' is unknown on this node (not a zone name): give an IANA name like "
            "Europe/Berlin, or UTC"
        ],
    )


def test_without_time_of_day_the_single_shared_profile():
    assert pp.shared_profile(PROFILES, [], LABELS, NOW) == ("shared-balanced", [])
    assert pp.shared_profile(PROFILES, None, LABELS, NOW) == ("shared-balanced", [])


def test_without_any_shared_profile_none():
    assert pp.shared_profile(checked([profile_object("x")]), [], LABELS, NOW) == (None, [])


def test_two_shared_profiles_without_time_of_day():
    assert pp.shared_profile(DAY_NIGHT, [], LABELS, NOW) == (
        None,
        [
            "profiles day, night are all shared: true for this node: at most one shared profile may apply to a node "
            "without a TimeOfDay; set shared: false on all but one, narrow their nodeSelectors, or choose by time "
            "with a TimeOfDay (the shared pool keeps no profile until then)"
        ],
    )


def test_a_shared_profile_for_other_nodes_does_not_count():
    profiles = checked([
        profile_object("day", shared=True),
        profile_object("gpu-shared", shared=True, nodeSelector={"matchLabels": {"accelerator": "gpu"}}),
    ])  # fmt: skip
    assert pp.shared_profile(profiles, [], LABELS, NOW) == ("day", [])


def test_time_of_day_for_other_nodes_is_ignored():
    tods = [time_of_day("gpu-hours", [{"time": "00:00", "powerProfile": "nope"}], selector={"matchLabels": {"a": "b"}})]
    assert pp.shared_profile(PROFILES, tods, LABELS, NOW) == ("shared-balanced", [])


def test_time_of_day_selecting_this_node():
    tods = [time_of_day("office-hours", SCHEDULE, selector={"matchLabels": {"poweraware.io/pod-power": "true"}})]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(9, 0)) == ("day", [])


def test_two_time_of_days_for_one_node():
    tods = [time_of_day("a", SCHEDULE), time_of_day("b", SCHEDULE, selector={"matchLabels": {}})]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW) == (
        None,
        [
            "TimeOfDays a, b all select this node: one TimeOfDay may apply to a node; narrow their nodeSelectors "
            "(the shared pool keeps no profile until then)"
        ],
    )


def test_an_unreadable_selector_chooses_none():
    tods = [time_of_day("a", SCHEDULE, selector={"matchExpressions": []})]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW) == (
        None,
        [
            "TimeOfDay a: nodeSelector field(s) matchExpressions are not supported: only matchLabels is (every label "
            "equal); select the nodes by labels"
        ],
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"time": "7am", "powerProfile": "day"},
            'TimeOfDay t: schedule[1].time \'7am\' is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")',
        ),
        (
            {"time": "24:00", "powerProfile": "day"},
            'TimeOfDay t: schedule[1].time \'24:00\' is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")',
        ),
        (
            {"time": "12:60", "powerProfile": "day"},
            'TimeOfDay t: schedule[1].time \'12:60\' is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")',
        ),
        (
            {"powerProfile": "day"},
            'TimeOfDay t: schedule[1].time None is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")',
        ),
        (
            {"time": "12:00", "powerProfile": "weekend"},
            "TimeOfDay t: schedule[1].powerProfile 'weekend' is no PowerProfile for this node: create it (shared: "
            "true) or name one of: day, night",
        ),
        (
            {"time": "12:00", "powerProfile": "exclusive"},
            "TimeOfDay t: schedule[1].powerProfile exclusive is not shared: true: the schedule sets the shared pool's "
            "profile; name a shared profile or set shared: true on exclusive",
        ),
        (
            {"time": "12:00", "powerProfile": "day", "pods": [], "cState": {}},
            "TimeOfDay t: schedule[1] has unknown field(s) cState, pods; allowed: time, powerProfile (the Power "
            "Manager's pods and cState schedule keys are not supported)",
        ),
        ("12:00=day", "TimeOfDay t: schedule[1] '12:00=day' is not a mapping of time, powerProfile"),
        (
            {"time": " 07:00", "powerProfile": "night"},
            "TimeOfDay t: schedule[0] and schedule[1] both start at 07:00: give each time once",
        ),
    ],
)
def test_schedule_refusals_choose_none(entry, message):
    tods = [time_of_day("t", [SCHEDULE[0], entry])]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW) == (None, [message])


def test_one_digit_hours_are_times():
    tods = [time_of_day("t", [{"time": "7:05", "powerProfile": "day"}, SCHEDULE[1]])]
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(7, 5)) == ("day", [])
    assert pp.shared_profile(DAY_NIGHT, tods, LABELS, at(7, 4)) == ("night", [])


def test_schedule_profile_must_apply_to_this_node():
    profiles = checked([profile_object("day", shared=True, nodeSelector={"matchLabels": {"zone": "b"}})])
    tods = [time_of_day("t", [{"time": "07:00", "powerProfile": "day"}])]
    assert pp.shared_profile(profiles, tods, LABELS, NOW) == (
        None,
        [
            "TimeOfDay t: schedule[0].powerProfile 'day' is no PowerProfile for this node: create it (shared: true) "
            "or name one of: none"
        ],
    )


@pytest.mark.parametrize("schedule", [[], None, {"time": "07:00"}])
def test_an_empty_schedule(schedule):
    assert pp.shared_profile(DAY_NIGHT, [time_of_day("t", schedule)], LABELS, NOW) == (
        None,
        [f"TimeOfDay t: schedule {schedule!r} is empty or not a list: give [{{time, powerProfile}}, ...]"],
    )


def test_time_of_day_problems_all_at_once():
    tods = [time_of_day("t", [{"time": "noon", "powerProfile": "x"}], zone="Nowhere/Land", reservedCPUs="0-1")]
    name, problems = pp.shared_profile(DAY_NIGHT, tods, LABELS, NOW, tz_lookup=lambda zone: None)
    assert name is None
    assert problems == [
        "TimeOfDay t: unknown spec field(s) reservedCPUs; allowed: timeZone, nodeSelector, schedule",
        "TimeOfDay t: timeZone 'Nowhere/Land' is unknown on this node (not a zone name): give an IANA name like "
        "Europe/Berlin, or UTC",
        'TimeOfDay t: schedule[0].time \'noon\' is not a time of day: give "HH:MM" (24-hour, e.g. "07:30")',
        "TimeOfDay t: schedule[0].powerProfile 'x' is no PowerProfile for this node: create it (shared: true) or name "
        "one of: day, night",
    ]


# --- resolve ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "group", "setting"),
    [
        ("performance", P_CORES, {"min_mhz": 3900, "max_mhz": 4700, "epp": "performance", "governor": "performance"}),
        ("performance", E_CORES, {"min_mhz": 2500, "max_mhz": 3000, "epp": "performance", "governor": "performance"}),
        ("eco", P_CORES, {"min_mhz": 800, "max_mhz": 2000, "epp": "balance_power", "governor": "powersave"}),
        ("eco", E_CORES, {"min_mhz": 800, "max_mhz": 2000, "epp": "balance_power", "governor": "powersave"}),
        ("shared-balanced", P_CORES,
         {"min_mhz": 800, "max_mhz": 3900, "epp": "balance_performance", "governor": "powersave"}),
        ("shared-balanced", E_CORES,
         {"min_mhz": 700, "max_mhz": 2500, "epp": "balance_performance", "governor": "powersave"}),
        ("turbo", P_CORES, {"min_mhz": 4000, "max_mhz": 4700, "epp": "performance", "governor": "performance"}),
    ],
)  # fmt: skip
def test_resolve_per_limit_group(name, group, setting):
    assert pp.resolve(PROFILES[name], group, INFO) == (setting, [])


def test_resolve_unset_bounds_are_the_cpuinfo_range_and_cstates_go_along():
    cstates = {"disable": ["C6"]}
    profile = checked([profile_object("p", cstates=cstates)])["p"]
    assert pp.resolve(profile, E_CORES, INFO) == (
        {"min_mhz": 700, "max_mhz": 3000, "epp": None, "governor": None, "cstates": cstates},
        [],
    )


GROUP_2_3 = {"cpus": [2, 3], "cpulist": "2-3", "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 3000}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"max": 3700},
            "profile X: max 3700 MHz is above CPUs 2-3's cpuinfo_max 3000 MHz on this node; lower max or use a "
            'percentage like "100%"',
        ),
        (
            {"min": 3100},
            "profile X: min 3100 MHz is above CPUs 2-3's cpuinfo_max 3000 MHz on this node; lower min or use a "
            'percentage like "100%"',
        ),
        (
            {"min": 400},
            "profile X: min 400 MHz is below CPUs 2-3's cpuinfo_min 800 MHz on this node; raise min or use a "
            'percentage like "0%"',
        ),
        (
            {"max": 600},
            "profile X: max 600 MHz is below CPUs 2-3's cpuinfo_min 800 MHz on this node; raise max or use a "
            'percentage like "0%"',
        ),
        (
            {"min": 2500, "max": "50%"},
            "profile X: min 2500 MHz is above max 50% on CPUs 2-3 (2500 MHz > 1900 MHz on this node); lower min or "
            "raise max",
        ),
        (
            {"min": "90%", "max": 1000},
            "profile X: min 90% is above max 1000 MHz on CPUs 2-3 (2700 MHz > 1000 MHz on this node); lower min or "
            "raise max",
        ),
    ],
)
def test_resolve_frequency_the_node_cannot_do(spec, message):
    setting, problems = pp.resolve(checked([profile_object("X", **spec)])["X"], GROUP_2_3, INFO)
    assert problems == [message]


def test_resolve_at_the_cpuinfo_limits_is_fine():
    profile = checked([profile_object("X", min=800, max=3000)])["X"]
    assert pp.resolve(profile, GROUP_2_3, INFO) == (
        {"min_mhz": 800, "max_mhz": 3000, "epp": None, "governor": None},
        [],
    )


def test_resolve_names_the_group_by_its_cpus_when_it_has_no_cpulist():
    group = {"cpus": [8, 9, 10], "cpuinfo_min_mhz": 700, "cpuinfo_max_mhz": 3000}
    _setting, problems = pp.resolve(checked([profile_object("X", max=3100)])["X"], group, INFO)
    assert problems == [
        "profile X: max 3100 MHz is above CPUs 8-10's cpuinfo_max 3000 MHz on this node; lower max or use a "
        'percentage like "100%"'
    ]


def test_resolve_a_group_without_cpuinfo_limits():
    group = {"cpus": [4], "cpuinfo_min_mhz": None, "cpuinfo_max_mhz": None}
    assert pp.resolve(PROFILES["eco"], group, INFO)[1] == [
        "profile eco: CPUs 4 report no cpuinfo_min_freq/cpuinfo_max_freq, so no frequency can be set"
    ]


def test_resolve_epp_on_a_node_without_epp():
    info = dict(INFO, driver="acpi-cpufreq", epp_supported=False, available_epp=[], epp_refused_under_performance=False)
    assert pp.resolve(PROFILES["eco"], P_CORES, info)[1] == [
        "profile eco: epp balance_power needs an energy performance preference, which this node's CPUs do not offer "
        "(driver acpi-cpufreq); remove epp from the profile, or keep this node out with nodeSelector"
    ]


def test_resolve_epp_the_node_does_not_list():
    info = dict(INFO, available_epp=["default", "performance", "power"])
    assert pp.resolve(PROFILES["eco"], P_CORES, info)[1] == [
        "profile eco: epp balance_power is not among this node's energy_performance_available_preferences (default, "
        "performance, power); give one of those"
    ]


def test_resolve_governor_the_node_lacks():
    profile = checked([profile_object("X", governor="schedutil")])["X"]
    assert pp.resolve(profile, P_CORES, INFO)[1] == [
        "profile X: governor schedutil is not available on this node (scaling_available_governors: performance, "
        "powersave); give one of those or leave governor out"
    ]
    assert pp.resolve(profile, P_CORES, dict(INFO, available_governors=[]))[1] == [
        "profile X: governor schedutil is not available on this node (scaling_available_governors: none); give one "
        "of those or leave governor out"
    ]


def test_resolve_epp_refused_under_the_performance_governor():
    profile = checked([profile_object("X", governor="performance", epp="balance_power")])["X"]
    assert pp.resolve(profile, P_CORES, INFO)[1] == [
        "profile X: epp balance_power is refused by intel_pstate (EBUSY) while the governor is performance; set "
        "governor: powersave, or epp: performance"
    ]
    # passive mode (intel_cpufreq) takes it
    assert pp.resolve(profile, P_CORES, dict(INFO, epp_refused_under_performance=False))[1] == []


# --- resource_profile ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "profile"),
    [
        ("power.intel.com/performance", "performance"),
        ("power.intel.com/performance-worker-1", "performance"),  # the Power Manager's per-node name
        ("power.intel.com/eco-worker-1", "eco"),
        ("power.intel.com/eco-worker-2", None),  # another node's
        ("power.intel.com/unknown", None),
        ("power.intel.com/", None),
        ("intel.com/performance", None),
        ("cpu", None),
        (None, None),
    ],
)
def test_resource_profile(resource, profile):
    assert pp.resource_profile(resource, NODE, PROFILES) == profile


def test_resource_profile_exact_name_first():
    profiles = checked([profile_object("eco"), profile_object("eco-worker-1")])
    assert pp.resource_profile("power.intel.com/eco-worker-1", NODE, profiles) == "eco-worker-1"
    assert pp.resource_profile("power.intel.com/eco-worker-1", "", PROFILES) is None


# --- pod_claims ---------------------------------------------------------------------------------------

HERE = pp.profiles_for_node(PROFILES, LABELS)


def test_claims_of_a_guaranteed_pod():
    assert pp.pod_claims(FAST, NODE, HERE) == (
        [{"container": "app", "profile": "performance", "resource": "power.intel.com/performance", "count": 2}],
        [],
    )


def test_claims_by_per_node_resource_and_millicores():
    assert pp.pod_claims(ECO, NODE, HERE) == (
        [{"container": "worker", "profile": "eco", "resource": "power.intel.com/eco-worker-1", "count": 2}],
        [],
    )


def test_claims_with_limits_only_and_equal_quantities_spelled_differently():
    sidecar = container("sidecar", cpu="1", memory="1024Mi", requests=False)
    app = container("app", cpu="3", memory="1Gi", power={"power.intel.com/performance": 3})
    app["resources"]["requests"]["memory"] = "1073741824"
    claims, refusals = pp.pod_claims(pod("p", "u", [app, sidecar]), NODE, HERE)
    assert refusals == []
    assert claims == [{"container": "app", "profile": "performance", "resource": "power.intel.com/performance",
                       "count": 3}]  # fmt: skip


def test_claims_of_init_containers():
    init = [container("warm-up", cpu="1", power={"power.intel.com/performance": "1"})]
    main = [container("app", power={"power.intel.com/performance": "2"})]
    claims, refusals = pp.pod_claims(pod("p", "u", main, init=init), NODE, HERE)
    assert refusals == []
    assert [(c["container"], c["count"]) for c in claims] == [("warm-up", 1), ("app", 2)]


def test_a_pod_without_power_resources_claims_nothing():
    assert pp.pod_claims(PLAIN, NODE, HERE) == ([], [])
    burstable = pod("b", "u", [container("web", cpu=None, memory=None)])
    assert pp.pod_claims(burstable, NODE, HERE) == ([], [])


def test_two_profiles_in_one_pod():
    pod_ = pod("p", "u", [
        container("a", power={"power.intel.com/performance": "2"}),
        container("b", power={"power.intel.com/eco": "2"}),
    ])  # fmt: skip
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            "pod requests two power profiles (power.intel.com/eco, power.intel.com/performance); a pod's CPUs run "
            "one profile: ask for one"
        ],
    )


def test_three_profiles_in_one_container():
    power = {"power.intel.com/performance": "1", "power.intel.com/eco": "1", "power.intel.com/eco-worker-1": "1"}
    refusals = pp.pod_claims(pod("p", "u", [container("a", cpu="3", power=power)]), NODE, HERE)[1]
    assert refusals[0] == (
        "pod requests three power profiles (power.intel.com/eco, power.intel.com/eco-worker-1, "
        "power.intel.com/performance); a pod's CPUs run one profile: ask for one"
    )


def test_profile_count_differs_from_cpus():
    pod_ = pod("p", "u", [container("c", cpu="3", power={"power.intel.com/performance": "2"})])
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        ["container c asks for 2 power.intel.com/performance but cpu 3: ask for as many profile units as CPUs"],
    )


def test_fractional_cpus_get_no_exclusive_cpus():
    pod_ = pod("p", "u", [container("c", cpu="1500m", power={"power.intel.com/performance": "2"})])
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            "container c asks for 2 power.intel.com/performance but cpu 1500m, not a whole number of CPUs: the "
            "kubelet gives exclusive CPUs only for whole CPUs; ask for cpu 2"
        ],
    )


@pytest.mark.parametrize("amount", ["1.5", "1500m", "two", True])
def test_profile_count_must_be_whole(amount):
    pod_ = pod("p", "u", [container("c", power={"power.intel.com/performance": amount})])
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            f"container c asks for {amount} power.intel.com/performance, not a whole number: ask for whole profile "
            "units, one per CPU"
        ],
    )


NOT_GUARANTEED = (
    "pod is not Guaranteed ({}): the kubelet gives exclusive CPUs only to Guaranteed pods; give every container cpu "
    "and memory limits, with requests equal to them or left out"
)


@pytest.mark.parametrize(
    ("containers", "init", "reasons"),
    [
        ([container("app", memory=None, power={"power.intel.com/performance": "2"})], None,
         "container app has no memory limit"),
        ([container("app", cpu=None, power={"power.intel.com/performance": "2"})], None,
         "container app has no cpu limit"),
        ([container("app", power={"power.intel.com/performance": "2"}), container("log", cpu="0", memory="64Mi")],
         None, "container log has no cpu limit"),
        ([container("app", power={"power.intel.com/performance": "2"})], [container("setup", cpu=None, memory=None)],
         "init container setup has no cpu limit; init container setup has no memory limit"),
    ],
)  # fmt: skip
def test_not_guaranteed(containers, init, reasons):
    assert pp.pod_claims(pod("p", "u", containers, init=init), NODE, HERE) == ([], [NOT_GUARANTEED.format(reasons)])


def test_requests_below_limits_are_not_guaranteed():
    app = container("app", power={"power.intel.com/performance": "2"})
    app["resources"]["requests"].update(cpu="1", memory="512Mi")
    assert pp.pod_claims(pod("p", "u", [app]), NODE, HERE) == (
        [],
        [
            NOT_GUARANTEED.format(
                "container app requests cpu 1 but its limit is 2; container app requests memory 512Mi but its limit "
                "is 1Gi"
            ),
            "container app asks for 2 power.intel.com/performance but cpu 1: ask for as many profile units as CPUs",
        ],
    )


def test_unknown_profile():
    pod_ = pod("p", "u", [container("c", power={"power.intel.com/balanced": "2"})])
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            "container c asks for power.intel.com/balanced, but no PowerProfile of that name applies to node "
            "worker-1 (profiles here: eco, performance, turbo): create it, or ask for one of those"
        ],
    )
    assert pp.pod_claims(pod_, NODE, {})[1] == [
        "container c asks for power.intel.com/balanced, but no PowerProfile of that name applies to node worker-1 "
        "(profiles here: none): create it, or ask for one of those"
    ]


def test_a_profile_for_other_nodes_is_unknown_here():
    pod_ = pod("p", "u", [container("c", power={"power.intel.com/gpu-nodes": "2"})])
    assert pp.pod_claims(pod_, NODE, HERE)[1][0].startswith("container c asks for power.intel.com/gpu-nodes, but no ")


def test_the_shared_profile_is_not_for_exclusive_cpus():
    pod_ = pod("p", "u", [container("c", power={"power.intel.com/shared-balanced": "2"})])
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            "container c asks for power.intel.com/shared-balanced, but profile shared-balanced is the shared pool's "
            "(shared: true): ask for a profile without shared: true"
        ],
    )


def test_every_refusal_of_a_pod_at_once():
    pod_ = pod("p", "u", [
        container("a", cpu="3", memory=None, power={"power.intel.com/performance": "2"}),
        container("b", power={"power.intel.com/nope": "2"}),
    ])  # fmt: skip
    assert pp.pod_claims(pod_, NODE, HERE) == (
        [],
        [
            "pod requests two power profiles (power.intel.com/nope, power.intel.com/performance); a pod's CPUs run "
            "one profile: ask for one",
            NOT_GUARANTEED.format("container a has no memory limit"),
            "container a asks for 2 power.intel.com/performance but cpu 3: ask for as many profile units as CPUs",
            "container b asks for power.intel.com/nope, but no PowerProfile of that name applies to node worker-1 "
            "(profiles here: eco, performance, turbo): create it, or ask for one of those",
        ],
    )


# --- plan ---------------------------------------------------------------------------------------------

NODE_STATUS_PROFILES = [
    {"name": "eco", "resource": "power.intel.com/eco", "capacity": 4, "minMHz": 800, "maxMHz": 2000,
     "epp": "balance_power", "governor": "powersave"},
    {"name": "performance", "resource": "power.intel.com/performance", "capacity": 9, "minMHz": 2500,
     "maxMHz": 4700, "epp": "performance", "governor": "performance"},
]  # fmt: skip
WORKLOADS = [
    {"pod": "apps/eco-0", "uid": "uid-eco", "container": "worker", "cpus": "8-9", "profile": "eco"},
    {"pod": "apps/fast-0", "uid": "uid-fast", "container": "app", "cpus": "2-3", "profile": "performance"},
]


def test_plan_of_the_node():
    result = node_plan()
    assert result["assignments"] == [
        {"pool": "shared", "profile": "shared-balanced", "cpus": "6-7", "min_mhz": 800, "max_mhz": 3900,
         "epp": "balance_performance", "governor": "powersave"},
        {"pool": "shared", "profile": "shared-balanced", "cpus": "10", "min_mhz": 700, "max_mhz": 2500,
         "epp": "balance_performance", "governor": "powersave"},
        {"pool": "profile eco", "profile": "eco", "cpus": "8-9", "min_mhz": 800, "max_mhz": 2000,
         "epp": "balance_power", "governor": "powersave"},
        {"pool": "profile performance", "profile": "performance", "cpus": "2-3", "min_mhz": 3900, "max_mhz": 4700,
         "epp": "performance", "governor": "performance"},
    ]  # fmt: skip
    assert result["restore"] == [4, 5]  # the plain Guaranteed pod's CPUs: never slowed
    assert result["wanted"] == {
        2: "performance",
        3: "performance",
        4: None,
        5: None,
        6: "shared-balanced",
        7: "shared-balanced",
        8: "eco",
        9: "eco",
        10: "shared-balanced",
    }
    assert result["workloads"] == WORKLOADS
    assert result["refusals"] == []
    assert result["problems"] == TURBO_PROBLEMS
    assert result["shared"] == {"profile": "shared-balanced", "cpus": "6-7,10"}
    assert result["extended_resources"] == {
        "power.intel.com/eco": 4,  # 50% of the 9 online non-reserved CPUs, rounded down
        "power.intel.com/eco-worker-1": 4,
        "power.intel.com/performance": 9,
        "power.intel.com/performance-worker-1": 9,
    }
    assert result["status"] == {
        "sharedPool": {"profile": "shared-balanced", "cpus": "6-7,10"},
        "reservedCPUs": "0-1",
        "activeProfiles": ["eco", "performance", "shared-balanced"],
        "workloads": WORKLOADS,
        "profiles": NODE_STATUS_PROFILES,
    }


def test_plan_is_json_ready_for_the_status():
    status = node_plan()["status"]
    assert json.loads(json.dumps(status)) == status


@pytest.mark.parametrize("reserved", ["0-1", [0, 1], "1,0", "0-1,11"])
def test_reserved_and_offline_cpus_are_never_touched(reserved):
    result = node_plan(reserved=reserved)
    touched = {c for a in result["assignments"] for c in pp.expand_cpus(a["cpus"])[0]} | set(result["restore"])
    assert touched == set(range(2, 11))
    assert set(result["wanted"]) == set(range(2, 11))


def test_reserved_cpus_the_kubelet_gave_a_container_stay_untouched():
    state = pp.parse_cpu_manager_state(
        '{"policyName":"static","defaultCpuSet":"0-1,4-7,10","entries":{"uid-fast":{"app":"1-2"}},"checksum":0}'
    )
    result = node_plan(pods=[FAST], state=state)
    assert result["wanted"][2] == "performance"
    assert 1 not in result["wanted"]
    assert result["workloads"][0]["cpus"] == "2"
    assert result["problems"] == [
        *TURBO_PROBLEMS,
        "the kubelet gave container app of pod apps/fast-0 reserved CPUs 1: the reserved CPUs given here differ from "
        "the kubelet's reservedSystemCPUs; make them equal (reserved CPUs are never changed)",
    ]


def test_bad_reserved_cpus():
    assert node_plan(reserved="0-1,x")["problems"][0] == (
        "reserved CPUs '0-1,x' is not a CPU list (bad part: x): give the kubelet's reservedSystemCPUs, like 0-1"
    )


@pytest.mark.parametrize(
    "changed",
    [
        {"status": {"phase": "Succeeded"}},
        {"status": {"phase": "Failed"}},
        {"metadata": dict(FAST["metadata"], deletionTimestamp="2025-01-06T10:00:00Z")},
        {"spec": {"nodeName": "worker-2", "containers": FAST["spec"]["containers"]}},
    ],
)  # fmt: skip
def test_exclusive_cpus_of_pods_that_no_longer_count_are_restored(changed):
    result = node_plan(pods=[dict(FAST, **changed), ECO, PLAIN])
    assert result["wanted"][2] is None and result["wanted"][3] is None
    assert result["restore"] == [2, 3, 4, 5]
    assert [w["pod"] for w in result["workloads"]] == ["apps/eco-0"]
    assert result["refusals"] == []


def test_a_claim_the_kubelet_has_not_admitted_yet_is_skipped():
    pending = pod("fast-1", "uid-new", [container("app", power={"power.intel.com/performance": "2"})], phase="Pending")
    result = node_plan(pods=[*PODS, pending])
    assert result["workloads"] == WORKLOADS
    assert result["refusals"] == []
    assert result["problems"] == TURBO_PROBLEMS


def test_a_refused_pods_cpus_are_restored():
    two = pod("fast-0", "uid-fast", [container("app", power={"power.intel.com/performance": "2",
                                                             "power.intel.com/eco": "2"})])  # fmt: skip
    result = node_plan(pods=[two, ECO, PLAIN])
    assert result["wanted"][2] is None and result["wanted"][3] is None
    assert result["refusals"] == [
        {
            "namespace": "apps",
            "name": "fast-0",
            "uid": "uid-fast",
            "message": "pod requests two power profiles (power.intel.com/eco, power.intel.com/performance); a pod's "
            "CPUs run one profile: ask for one",
        }
    ]
    assert "performance" not in result["status"]["activeProfiles"]


def test_a_profile_the_node_cannot_do_on_the_pods_cpus():
    state = pp.parse_cpu_manager_state(
        '{"policyName":"static","defaultCpuSet":"0-5,8-10","entries":{"uid-t":{"app":"6-7"},"uid-e":{"app":"9-10"}},'
        '"checksum":0}'
    )
    on_p = pod("turbo-p", "uid-t", [container("app", power={"power.intel.com/turbo": "2"})])
    on_e = pod("turbo-e", "uid-e", [container("app", power={"power.intel.com/turbo": "2"})])
    result = node_plan(pods=[on_p, on_e], state=state)
    # on the P-cores turbo runs; on the E-cores it cannot: restored, the pod refused
    assert result["wanted"][6] == "turbo" and result["wanted"][7] == "turbo"
    assert result["wanted"][9] is None and result["wanted"][10] is None
    assert result["refusals"] == [
        {
            "namespace": "apps",
            "name": "turbo-e",
            "uid": "uid-e",
            "message": "node worker-1 cannot do profile turbo: "
            + "; ".join(p[len("profile turbo: ") :] for p in TURBO_PROBLEMS),
        }
    ]
    assert result["problems"] == TURBO_PROBLEMS
    assert [w["pod"] for w in result["workloads"]] == ["apps/turbo-p"]
    assert "power.intel.com/turbo" not in result["extended_resources"]


def test_a_pod_across_both_groups_is_refused_whole():
    state = pp.parse_cpu_manager_state(
        '{"policyName":"static","defaultCpuSet":"0-6,9-10","entries":{"uid-t":{"app":"7-8"}},"checksum":0}'
    )
    result = node_plan(pods=[pod("t", "uid-t", [container("app", power={"power.intel.com/turbo": "2"})])], state=state)
    assert result["wanted"][7] is None and result["wanted"][8] is None
    assert len(result["refusals"]) == 1
    assert result["workloads"] == []


# acpi-cpufreq's shared policies: CPUs 0-1, 2-3, ... each one policy (one write sets both); 11 offline
PAIRED = dict(INFO, policies=[{"name": f"policy{c}", "cpus": f"{c}-{c + 1}"} for c in range(0, 12, 2)])


def split_message(profile, cpus, policies, others):
    return (
        f"node worker-1 cannot do profile {profile}: CPUs {cpus} share cpufreq policies ({policies}) with CPUs "
        f"{others}, which do not run it (one write sets every CPU of a policy): a profile runs here only on whole "
        "policies of 2 CPUs; ask for a multiple of 2 CPUs where a policy is a core (the kubelet's full-pcpus-only "
        "policy option gives whole cores), or keep this node out with the profile's nodeSelector"
    )


def test_whole_shared_policies_plan_as_single_cpus_do():
    """The pods hold whole policies, the shared pool too (10-11: 11 is offline)."""
    result, single = node_plan(info=PAIRED), node_plan()
    assert result == single
    # restored whole: a policy's offline CPUs go along (the journal restores a policy with all its CPUs)
    assert node_plan(info=PAIRED, shared=None)["restore"] == [4, 5, 6, 7, 10, 11]
    assert node_plan(shared=None)["restore"] == [4, 5, 6, 7, 10]


def test_a_pod_holding_half_a_shared_policy_is_refused():
    state = pp.parse_cpu_manager_state(
        '{"policyName":"static","defaultCpuSet":"0-1,7,10","entries":{"uid-eco":{"worker":"8-9"},'
        '"uid-fast":{"app":"2-3"},"uid-plain":{"db":"4-5"},"uid-one":{"app":"6"}},"checksum":0}'
    )
    one = pod("one-0", "uid-one", [container("app", cpu="1", power={"power.intel.com/performance": "1"})])
    result = node_plan(pods=[*PODS, one], state=state, info=PAIRED)
    # its profile would set CPU 7 of the shared pool too: refused, and policy6 keeps its originals
    assert result["refusals"] == [
        {"namespace": "apps", "name": "one-0", "uid": "uid-one",
         "message": split_message("performance", "6", "policy6: CPUs 6-7", "7")}
    ]  # fmt: skip
    assert result["wanted"][6] is None and result["wanted"][7] is None
    assert result["restore"] == [4, 5, 6, 7]
    assert result["workloads"] == WORKLOADS
    assert [a["cpus"] for a in result["assignments"]] == ["10", "8-9", "2-3"]
    assert result["problems"] == TURBO_PROBLEMS


def test_a_refusal_for_half_a_policy_can_split_another_pods_policy():
    """A holds 6 and 8 at performance, B 9 at performance, 7 is the shared pool's: A splits policy6,
    and once A's CPUs are restored B's CPU 9 splits policy8 with A's 8."""
    state = pp.parse_cpu_manager_state(
        '{"policyName":"static","defaultCpuSet":"0-5,7,10","entries":{"uid-a":{"app":"6,8"},"uid-b":{"app":"9"}},'
        '"checksum":0}'
    )
    a = pod("a", "uid-a", [container("app", cpu="2", power={"power.intel.com/performance": "2"})])
    b = pod("b", "uid-b", [container("app", cpu="1", power={"power.intel.com/performance": "1"})])
    result = node_plan(pods=[a, b], state=state, info=PAIRED)
    assert [r["message"] for r in result["refusals"]] == [
        split_message("performance", "6", "policy6: CPUs 6-7", "7"),
        split_message("performance", "9", "policy8: CPUs 8-9", "8"),
    ]
    assert result["workloads"] == []
    assert {cpu: result["wanted"][cpu] for cpu in range(6, 10)} == dict.fromkeys(range(6, 10))
    assert result["restore"] == [6, 7, 8, 9]


def test_a_shared_policy_with_a_reserved_cpu_is_never_written():
    # reservedSystemCPUs 0 only: CPU 1 would be the shared pool's, but policy0 holds reserved CPU 0
    result = node_plan(reserved="0", info=PAIRED)
    assert result["wanted"][1] is None
    assert 0 not in result["restore"] and 1 in result["restore"]
    assert {c for a in result["assignments"] for c in pp.expand_cpus(a["cpus"])[0]} == {6, 7, 10, 2, 3, 8, 9}
    assert result["refusals"] == []


def test_a_shared_profile_the_node_cannot_do_on_a_group():
    profiles = checked([profile_object("shared-fast", shared=True, min=3100), *PROFILE_OBJECTS[:2]])
    result = node_plan(profiles=profiles, shared="shared-fast")
    assert result["wanted"][6] == "shared-fast" and result["wanted"][7] == "shared-fast"
    assert result["wanted"][10] is None  # an E-core: restored, not run at a profile it cannot hold
    assert result["shared"] == {"profile": "shared-fast", "cpus": "6-7,10"}
    assert [(a["pool"], a["cpus"]) for a in result["assignments"]] == [
        ("shared", "6-7"),
        ("profile eco", "8-9"),
        ("profile performance", "2-3"),
    ]
    assert result["problems"] == [
        "profile shared-fast: min 3100 MHz is above CPUs 8-11's cpuinfo_max 3000 MHz on this node; lower min or use "
        'a percentage like "100%"'
    ]


def test_no_shared_profile_leaves_the_shared_pool_restored():
    result = node_plan(shared=None)
    assert result["restore"] == [4, 5, 6, 7, 10]
    assert result["shared"] == {"profile": None, "cpus": "6-7,10"}
    assert [a["pool"] for a in result["assignments"]] == ["profile eco", "profile performance"]


def test_an_unknown_shared_profile():
    result = node_plan(shared="gpu-nodes")
    assert result["shared"]["profile"] is None
    assert result["problems"] == [
        *TURBO_PROBLEMS,
        "shared profile gpu-nodes is no PowerProfile for this node: the shared pool keeps no profile",
    ]


def test_without_the_kubelets_state_nothing_is_applied_or_offered():
    result = node_plan(state=None)
    assert result["assignments"] == []
    assert result["restore"] == list(range(2, 11))
    assert result["extended_resources"] == {}
    assert result["shared"] == {"profile": "shared-balanced", "cpus": ""}
    assert result["problems"] == [
        *TURBO_PROBLEMS,
        "no kubelet CPU manager state was read: which CPUs pods hold exclusively is unknown, so no profile is applied "
        "and none offered",
    ]


def test_cpu_manager_policy_none():
    state = pp.parse_cpu_manager_state('{"policyName":"none","defaultCpuSet":"","checksum":0}')
    result = node_plan(state=state)
    assert result["extended_resources"] == {}
    assert result["status"]["profiles"] == []
    assert result["wanted"] == dict.fromkeys(range(2, 11), "shared-balanced")
    assert result["workloads"] == []
    assert result["problems"][-1] == (
        "the kubelet's CPU manager policy is 'none', not static: pods get no exclusive CPUs, so no per-pod profile "
        "is offered; set cpuManagerPolicy: static in the kubelet configuration"
    )
    # each live pod that claims a profile is refused for it (an Event); one that claims none, or has ended,
    # is not; without a state read at all nobody is refused for the policy (the problems say why)
    done = pod("job-0", "uid-job", [container("app", power={"power.intel.com/performance": "1"})], phase="Succeeded")
    result = node_plan(pods=[*PODS, done], state=state)
    assert [(r["name"], r["message"]) for r in result["refusals"]] == [
        (name, "node worker-1's kubelet does not run the static CPU manager policy: the pod has no CPUs of its own to "
         "give a profile")
        for name in ("eco-0", "fast-0")
    ]  # fmt: skip
    assert node_plan(state=None)["refusals"] == []


def test_a_node_without_cpufreq():
    info = dict(INFO, cpufreq_available=False, limit_groups=[], messages=["no cpufreq policy found"])
    result = node_plan(info=info)
    assert result["assignments"] == []
    assert result["restore"] == list(range(2, 11))
    assert result["extended_resources"] == {}
    assert result["problems"] == ["this node has no cpufreq (no cpufreq policy found): no profile can run here"]
    assert [r["message"] for r in result["refusals"]] == [
        "node worker-1 cannot do profile eco: CPUs 8-9 have no cpufreq policy on this node",
        "node worker-1 cannot do profile performance: CPUs 2-3 have no cpufreq policy on this node",
    ]


def test_cpus_without_a_cpufreq_policy():
    info = dict(INFO, limit_groups=[P_CORES])  # the E-cores' driver failed
    result = node_plan(info=info)
    assert result["wanted"][10] is None and result["wanted"][8] is None
    assert result["extended_resources"] == {}  # a pod could land on CPUs no profile reaches
    assert result["problems"][0] == (
        "CPUs 8-10 have no cpufreq policy on this node: no profile runs on them (the kernel offers no frequency "
        "control there)"
    )
    assert result["refusals"][0]["message"] == (
        "node worker-1 cannot do profile eco: CPUs 8-9 have no cpufreq policy on this node"
    )


def test_profiles_for_other_nodes_are_left_out():
    result = node_plan(labels=dict(LABELS, accelerator="gpu"))
    assert "power.intel.com/gpu-nodes" in result["extended_resources"]
    assert "power.intel.com/gpu-nodes" not in node_plan()["extended_resources"]


@pytest.mark.parametrize(
    ("capacity", "offered"), [(None, 9), (0, 0), (3, 3), (20, 20), ("100%", 9), ("50%", 4), ("10%", 0), ("34%", 3)]
)
def test_capacity(capacity, offered):
    profiles = checked([profile_object("p", cpuCapacity=capacity)])
    result = node_plan(profiles=profiles, shared=None, pods=[])
    assert result["extended_resources"] == {"power.intel.com/p": offered, "power.intel.com/p-worker-1": offered}
    assert result["status"]["profiles"][0]["capacity"] == offered


def test_the_per_node_resource_only_when_its_name_is_valid():
    name = "p" * 60  # with -worker-1 the name part is 69 characters
    result = node_plan(profiles=checked([profile_object(name)]), shared=None, pods=[])
    assert result["extended_resources"] == {f"power.intel.com/{name}": 9}


def test_a_profile_name_too_long_for_a_resource():
    name = "p" * 64
    result = node_plan(profiles=checked([profile_object(name)]), shared=None, pods=[])
    assert result["extended_resources"] == {}
    assert result["problems"] == [
        f"profile {name}: power.intel.com/{name} is no valid extended resource name (the part after the / must be at "
        "most 63 characters, alphanumerics, '-', '_' or '.'): give the profile a shorter name"
    ]


def test_status_spans_the_groups_mhz():
    profiles = checked([profile_object("p", min="50%", max="75%")])
    result = node_plan(profiles=profiles, shared=None, pods=[])
    # P-cores 2750 .. 3700 MHz, E-cores 1800 .. 2400 MHz
    assert result["status"]["profiles"] == [
        {"name": "p", "resource": "power.intel.com/p", "capacity": 9, "minMHz": 1800, "maxMHz": 3700, "epp": None,
         "governor": None}
    ]  # fmt: skip


def test_plan_with_cstates_passes_them_on():
    profiles = checked([profile_object("quiet", shared=True, cstates={"disable": ["C1E"]})])
    result = node_plan(profiles=profiles, shared="quiet", pods=[])
    assert [a["cstates"] for a in result["assignments"]] == [{"disable": ["C1E"]}, {"disable": ["C1E"]}]


def test_plan_without_pods():
    result = node_plan(pods=[])
    assert result["workloads"] == []
    assert result["restore"] == [2, 3, 4, 5, 8, 9]  # held exclusively by containers without a claim
    assert result["status"]["activeProfiles"] == ["shared-balanced"]
