"""cpu_power_plan's parsing, checks and plan checked one by one, with exact messages and boundaries.

The edges: the CPU
list forms ``expand_cpus`` takes, the ends of ``profile_frequency_mhz`` (0 %, 100 %, lower limits
that are not a multiple of 100 MHz), each branch of the kubelet cross-check, the profile and
C-state checks at their limits, and the plan of CPUs with and without EPP.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import cpu_power_plan as cp

# Two limit groups (a hybrid part), CPU 5 offline, EPP and two governors.
INFO = {
    "cpufreq_available": True,
    "epp_supported": True,
    "present": "0-5",
    "offline": "5",
    "available_governors": ["performance", "powersave"],
    "limit_groups": [
        {"cpus": [0, 1, 2], "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 4000},
        {"cpus": [3, 4, 5], "cpuinfo_min_mhz": 850, "cpuinfo_max_mhz": 3050},
    ],
    "messages": [],
}

PROFILES = {
    "fast": {"epp": "performance", "governor": "performance", "min_pct": 0, "max_pct": 100},
    "slow": {"epp": "power", "governor": "powersave", "max_pct": 50},
}


def node(info=None, **kw):
    info = INFO if info is None else info
    args = {"pools": [], "profiles": PROFILES, "reserved": "0", "reserved_given": True, "kubelet_reserved": "0",
            "kubelet_source": "kubelet.yaml", "host": "w1"}  # fmt: skip
    args.update(kw)
    return cp.plan_node(info, **args)


# --- expand_cpus ------------------------------------------------------------------------------------


def test_expand_cpus_forms():
    assert cp.expand_cpus(None) == ([], [])
    assert cp.expand_cpus("") == ([], [])
    assert cp.expand_cpus("1,,2") == ([1, 2], [])  # a blank part is skipped, not the end
    assert cp.expand_cpus(" 4 ,x ,2") == ([4, 2], ["x "])  # bad parts as given
    assert cp.expand_cpus(3) == ([3], [])
    assert cp.expand_cpus(2.0) == ([2], [])
    assert cp.expand_cpus([1, 1, "1-2"]) == ([1, 2], [])
    assert cp.expand_cpus([["y", 0], "z", (3,)]) == ([0, 3], ["y", "z"])
    assert cp.expand_cpus(object()) == ([], [])


# --- profile_frequency_mhz ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "pct", "want"),
    [
        (800, 5050, 100, 5050),  # 100 %: the limit itself, not rounded down
        (800, 5050, 99.99, 5000),
        (800, 5050, 100.5, 5050),
        (850, 5000, 0, 850),
        (850, 5000, 1, 850),  # 891.5 rounds down to 800, below the limit: the limit
        (850, 5000, -1, 850),
        (800, 100800, 0.5, 1300),  # half a percent of 100 000 MHz is not 0
        (800, 5000, 50, 2900),
        (800, 5000, 57, 3100),  # 3194 MHz rounds down
        (0, 1000, 99, 900),
        (800, 5000, "50", 2900),
        ("800", "5000.0", 100, 5000),
        ("850", 5000, 0, 850),
    ],
)
def test_profile_frequency(lo, hi, pct, want):
    got = cp.profile_frequency_mhz(lo, hi, pct)
    assert got == want and got.__class__ is int  # not a float or a bool


# --- plan_node: reserved CPUs and the kubelet cross-check ---------------------------------------------


def test_reserved_from_the_kubelet_is_a_note():
    result = node(reserved="1,0", reserved_given=False, kubelet_reserved="0-1", shared_profile="fast")
    assert result["errors"] == []
    assert result["notes"] == ["reserved CPUs 0,1 from kubelet.yaml", "pool shared: CPUs 5 are offline and skipped"]
    assert result["reserved"] == [0, 1] and result["shared"] == [2, 3, 4, 5]


def test_no_reserved_from_the_kubelet_is_a_note_with_none():
    result = node(reserved=None, reserved_given=False, kubelet_reserved="", shared_profile=None)
    assert result["notes"] == ["reserved CPUs none from kubelet.yaml"]
    assert result["reserved"] == [] and result["shared"] == [0, 1, 2, 3, 4, 5]


def test_given_reserved_equal_to_the_kubelet_ones_in_another_order():
    result = node(reserved="0,2", kubelet_reserved="2,0")
    assert result["errors"] == [] and result["notes"] == []


def test_given_reserved_differing_from_the_kubelet_ones():
    result = node(reserved="", kubelet_reserved="1")
    assert result["errors"] == [
        "cpu_power_reserved_cpus (none) does not match the kubelet reserved CPUs (1, from kubelet.yaml): the shared "
        "pool would take CPUs the kubelet keeps for system daemons, or leave some unmanaged; make them equal"
    ]
    result = node(reserved="1", kubelet_reserved="")
    assert result["errors"][0].startswith("cpu_power_reserved_cpus (1) does not match the kubelet reserved CPUs (none,")


@pytest.mark.parametrize("given", [True, False])
def test_unknown_kubelet_reserved_is_a_note(given):
    result = node(reserved="0", reserved_given=given, kubelet_reserved=None)
    assert result["errors"] == []
    assert result["notes"] == [
        "kubelet reserved CPUs unknown (cpu_power_kubelet_reserved_cpus unset and no reservedSystemCPUs in "
        "kubelet.yaml): reserved CPUs not cross-checked"
    ]


def test_reserved_cpus_not_present_and_bad_parts():
    result = node(reserved="0,7-8,a,b", kubelet_reserved=None)
    assert result["errors"] == [
        "cpu_power_reserved_cpus 0,7-8,a,b is not a CPU list (bad part: a, b)",
        "cpu_power_reserved_cpus names CPUs 7,8 that are not present on w1 (present: 0-5)",
    ]
    assert result["assignments"] == [] and result["reserved"] == [0, 7, 8]


# --- plan_node: pools ----------------------------------------------------------------------------------


def test_pool_errors_exact():
    pools = [
        {"name": "a", "cpus": "", "profile": "nope"},
        {"name": "b", "cpus": "1-2,9", "profile": "fast"},
        {"name": "c", "cpus": "2-3", "profile": "fast"},
        {"name": "d", "cpus": "3", "profile": "slow"},
    ]
    result = node(pools=pools)
    assert result["errors"] == [
        "pool a: profile nope is not defined (cpu_power_profiles has: fast, slow)",
        "pool a has no CPUs",
        "pool b names CPUs 9 that are not present on w1 (present: 0-5)",
        "pools b and c overlap on CPU 2; each CPU belongs to one pool",
        "pools c and d overlap on CPU 3; each CPU belongs to one pool",
    ]
    assert result["assignments"] == [] and result["node"] is None
    assert result["shared"] == [4, 5]


# --- plan_node: profiles and C-states --------------------------------------------------------------------


@pytest.mark.parametrize(
    "profile",
    [
        {"min_pct": 0, "max_pct": 100},
        {"min_pct": 100},
        {"max_pct": 0},
        {"min_pct": 0.5, "max_pct": 0.5},
        {"cstates": None},
        {"cstates": {}},
        {"cstates": {"disable": [], "enable": ["C1"], "max_latency_us": 0}},
        {"cstates": {"disable": ["C6", "C1E"], "max_latency_us": 10}},
    ],
)
def test_profiles_at_their_limits_are_accepted(profile):
    assert node(profiles={"p": profile}, shared_profile="p")["errors"] == []


@pytest.mark.parametrize(
    ("profile", "errors"),
    [
        ({"min_pct": True}, ["profile p: min_pct True is not a percentage within 0..100"]),
        ({"max_pct": "50"}, ["profile p: max_pct 50 is not a percentage within 0..100"]),
        ({"min_pct": -0.5}, ["profile p: min_pct -0.5 is not a percentage within 0..100"]),
        # A value that is not a percentage is named once; the order of the two is not judged on it.
        ({"min_pct": 100.5}, ["profile p: min_pct 100.5 is not a percentage within 0..100"]),
        ({"max_pct": -1}, ["profile p: max_pct -1 is not a percentage within 0..100"]),
        # Used to raise ValueError / TypeError from float() after the message was added.
        ({"min_pct": "abc"}, ["profile p: min_pct abc is not a percentage within 0..100"]),
        ({"min_pct": [1], "max_pct": "x"}, ["profile p: min_pct [1] is not a percentage within 0..100",
                                            "profile p: max_pct x is not a percentage within 0..100"]),
        ({"min_pct": 50.5, "max_pct": 50}, ["profile p: min_pct 50.5 is above max_pct 50"]),
        ({"zeta": 1, "alpha": 2}, ["profile p: unknown key(s) alpha, zeta; allowed: epp, governor, min_pct, max_pct, "
                                   "cstates"]),
        ({"cstates": ["C6"]}, ["profile p: cstates must be a mapping with keys disable, enable, max_latency_us, "
                               "got ['C6']"]),
        ({"cstates": {"b": 1, "a": 2}}, ["profile p: cstates: unknown key(s) a, b; allowed: disable, enable, "
                                         "max_latency_us"]),
        ({"cstates": {"enable": "C1"}},
         ["profile p: cstates.enable 'C1' is not a list of state names, e.g. [C6] or [C1E, C6]"]),
        ({"cstates": {"disable": ("C6",)}},
         ["profile p: cstates.disable ('C6',) is not a list of state names, e.g. [C6] or [C1E, C6]"]),
        ({"cstates": {"disable": ["C6", 6]}},
         ["profile p: cstates.disable ['C6', 6] is not a list of state names, e.g. [C6] or [C1E, C6]"]),
        ({"cstates": {"max_latency_us": True}},
         ["profile p: cstates.max_latency_us True is not a whole number of microseconds >= 0"]),
        ({"cstates": {"max_latency_us": 1.0}},
         ["profile p: cstates.max_latency_us 1.0 is not a whole number of microseconds >= 0"]),
        ({"cstates": {"max_latency_us": -1}},
         ["profile p: cstates.max_latency_us -1 is not a whole number of microseconds >= 0"]),
    ],
)  # fmt: skip
def test_profile_errors_exact(profile, errors):
    result = node(profiles={"p": profile}, shared_profile="p")
    assert result["errors"] == errors
    assert result["assignments"] == []


def test_a_bare_percentage_key_is_no_bound():
    # `min_pct:` with nothing after it is null in YAML: the same as leaving the key out.
    for bare, left_out in (
        ({"min_pct": None, "max_pct": 40}, {"max_pct": 40}),
        ({"min_pct": 60, "max_pct": None}, {"min_pct": 60}),
    ):
        got, want = (node(profiles={"p": prof}, shared_profile="p") for prof in (bare, left_out))
        assert got["errors"] == [] and got["assignments"] == want["assignments"] != []


def test_shared_profile_not_defined():
    result = node(profiles={}, shared_profile="x")
    assert result["errors"] == ["cpu_power_shared_profile x is not defined in cpu_power_profiles"]


# --- plan_node: the plan --------------------------------------------------------------------------------


def test_plan_with_epp_per_pool_and_limit_group():
    profiles = dict(PROFILES, lowlat={"epp": "performance", "min_pct": 100, "cstates": {"max_latency_us": 5}})
    pools = [{"name": "dp", "cpus": [2, 3], "profile": "lowlat"}, {"name": "bg", "cpus": "4", "profile": "slow"}]
    result = node(pools=pools, profiles=profiles, shared_profile="fast", fallback_governor="powersave")
    assert result["errors"] == []
    assert result["assignments"] == [
        {"pool": "dp", "profile": "lowlat", "cpus": [2], "min_mhz": 4000, "max_mhz": 4000, "epp": "performance",
         "governor": None, "cstates": {"max_latency_us": 5}},
        {"pool": "dp", "profile": "lowlat", "cpus": [3], "min_mhz": 3050, "max_mhz": 3050, "epp": "performance",
         "governor": None, "cstates": {"max_latency_us": 5}},
        {"pool": "bg", "profile": "slow", "cpus": [4], "min_mhz": 850, "max_mhz": 1900, "epp": "power",
         "governor": "powersave"},
        {"pool": "shared", "profile": "fast", "cpus": [1], "min_mhz": 800, "max_mhz": 4000, "epp": "performance",
         "governor": "performance"},
        {"pool": "shared", "profile": "fast", "cpus": [5], "min_mhz": 850, "max_mhz": 3050, "epp": "performance",
         "governor": "performance"},
    ]  # fmt: skip
    assert result["slowdowns"] == ["pool bg (profile slow): CPUs 4 capped at 1900 MHz of 3050 MHz, EPP power"]
    assert result["notes"] == ["pool shared: CPUs 5 are offline and skipped"]
    assert result["shared"] == [1, 5] and result["reserved"] == [0]
    assert result["node"] is None
    assert list(result) == [
        "errors", "notes", "slowdowns", "assignments", "reserved", "shared", "node", "apply", "unmanaged"
    ]  # fmt: skip
    assert result["apply"] == result["assignments"]


def test_plan_without_epp_uses_the_fallback_governor_when_available():
    info = dict(INFO, epp_supported=False, offline=None)
    result = node(info, pools=[{"name": "bg", "cpus": "1-3", "profile": "slow"}], fallback_governor="powersave")
    assert result["assignments"] == [
        {"pool": "bg", "profile": "slow", "cpus": [1, 2], "min_mhz": 800, "max_mhz": 2400, "epp": None,
         "governor": "powersave"},
        {"pool": "bg", "profile": "slow", "cpus": [3], "min_mhz": 850, "max_mhz": 1900, "epp": None,
         "governor": "powersave"},
    ]  # fmt: skip
    assert result["slowdowns"] == [
        "pool bg (profile slow): CPUs 1,2 capped at 2400 MHz of 4000 MHz",
        "pool bg (profile slow): CPUs 3 capped at 1900 MHz of 3050 MHz",
    ]
    assert result["notes"] == []
    # a governor the driver does not offer, or no list of governors: none
    result = node(info, pools=[{"name": "bg", "cpus": "1", "profile": "slow"}], fallback_governor="schedutil")
    assert result["assignments"][0]["governor"] is None
    bare = dict(info, available_governors=None)
    result = node(bare, pools=[{"name": "bg", "cpus": "1", "profile": "slow"}], fallback_governor="powersave")
    assert result["assignments"][0]["governor"] is None


def test_no_cpufreq_note_joins_the_messages():
    info = dict(INFO, cpufreq_available=False, messages=["one", "two"])
    result = node(info, shared_profile="fast")
    assert result["notes"] == ["no cpufreq on w1: one; two - nothing applied"]
    assert result["assignments"] == []
    result = node(dict(INFO, cpufreq_available=False, messages=None), shared_profile="fast")
    assert result["notes"] == ["no cpufreq on w1:  - nothing applied"]


def test_no_pools_no_profiles_plan_nothing():
    result = cp.plan_node(INFO, None, None)
    assert result["errors"] == [] and result["assignments"] == []
    assert result["reserved"] == [] and result["shared"] == [0, 1, 2, 3, 4, 5]
    assert result["node"] is None


def test_node_controls_alone_and_with_errors():
    result = node(power_cap={"watts": 90})
    assert result["node"] == {"pool": "node", "profile": None, "cpus": "all", "power_cap": {"watts": 90}}
    assert result["apply"] == [result["node"], *result["assignments"]]  # found locked before any pool is written
    result = node(uncore={"max_pct": 50})
    assert result["node"] == {"pool": "node", "profile": None, "cpus": "all", "uncore": {"max_pct": 50}}
    assert node(uncore={"max_pct": 50}, shared_profile="x")["node"] is None


def test_plan_node_defaults():
    # reserved not given: the kubelet's CPUs are taken and noted; no host, no kubelet source
    result = cp.plan_node(INFO, [], {}, reserved="0", kubelet_reserved="0")
    assert result["errors"] == [] and result["notes"] == ["reserved CPUs 0 from "]
    result = cp.plan_node(INFO, [], {}, reserved="9")
    assert result["errors"] == ["cpu_power_reserved_cpus names CPUs 9 that are not present on  (present: 0-5)"]


def test_profile_without_min_pct_starts_at_the_cpuinfo_minimum():
    # a range of 100 000 MHz: 1 % would be 1000 MHz above the minimum
    info = dict(INFO, limit_groups=[{"cpus": [0, 1, 2, 3, 4, 5], "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 100800}])
    result = node(info, profiles={"p": {"max_pct": 99}}, shared_profile="p")
    assert [(a["cpus"], a["min_mhz"], a["max_mhz"]) for a in result["assignments"]] == [([1, 2, 3, 4, 5], 800, 99800)]


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - _assign, `prof.get("max_pct", 100)` -> `prof.get("max_pct", 101)`: profile_frequency_mhz places
#   every percentage >= 100 at the group's cpuinfo maximum, so a profile without max_pct plans the
#   same maximum either way (and _check_profiles compares the profile's own values, not this default).
