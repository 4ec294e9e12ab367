"""cpu_topology's discovery checked field by field on in-memory sysfs trees (memory_sysfs.py).

The edges: every raw
EPP value the drivers name, a policy read into its dict, the online / offline / no-cpufreq CPUs,
the driver chosen among several, the policy order (policy2 before policy10), the limit groups of
an interleaved hybrid part, the RAPL zones and the facts' exact messages.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import cpu_topology as ct
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import PowerError
from memory_sysfs import CPU, MemorySysfs, machine

POWERCAP = "class/powercap"

# --- normalize_epp ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        # a number is a register value with no name on this CPU: shown as the kernel shows it, never
        # renamed by a table (balance_performance is 128 on some models, 32 on others)
        ("0", "0"),
        ("128\n", "128"),
        (" 192 ", "192"),
        ("191", "191"),
        ("255", "255"),
        (" power \n", "power"),
        (None, None),
    ],
)
def test_normalize_epp(raw, want):
    assert ct.normalize_epp(raw) == want


def test_constants():
    assert ct.MANAGED_ATTRS == (
        "scaling_min_freq",
        "scaling_max_freq",
        "scaling_governor",
        "energy_performance_preference",
    )
    assert ct.ACTIVE_EPP_DRIVERS == ("intel_pstate", "amd-pstate-epp")


# --- read_policy ---------------------------------------------------------------------------------------


def test_read_policy_with_epp():
    acc = machine(
        policies=[("policy0", [0, 1], {"base": 2100000, "epp": "balance_power", "epp_available": "power  performance"})]
    )
    pol = ct.read_policy(acc, f"{CPU}/cpufreq/policy0", "policy0")
    assert pol == {
        "name": "policy0",
        "path": f"{CPU}/cpufreq/policy0",
        "related_cpus": [0, 1],
        "affected_cpus": [0, 1],
        "driver": "intel_pstate",
        "cpuinfo_min_freq": "800000",
        "cpuinfo_max_freq": "3900000",
        "base_frequency": "2100000",
        "available_governors": ["performance", "powersave"],
        "has_epp": True,
        "available_epp": ["power", "performance"],
        "values": {
            "scaling_min_freq": "800000",
            "scaling_max_freq": "3900000",
            "scaling_governor": "powersave",
            "energy_performance_preference": "balance_power",
        },
    }


def test_read_policy_without_epp_and_sparse_files():
    rel = f"{CPU}/cpufreq/policy3"
    acc = MemorySysfs({f"{rel}/related_cpus": "2-3", f"{rel}/affected_cpus": "", f"{rel}/scaling_max_freq": "7"})
    pol = ct.read_policy(acc, rel, "policy3")
    assert pol == {
        "name": "policy3",
        "path": rel,
        "related_cpus": [2, 3],
        "affected_cpus": [],
        "driver": None,
        "cpuinfo_min_freq": None,
        "cpuinfo_max_freq": None,
        "base_frequency": None,
        "available_governors": [],
        "has_epp": False,
        "available_epp": [],
        "values": {"scaling_min_freq": None, "scaling_max_freq": "7", "scaling_governor": None},
    }
    assert f"{rel}/energy_performance_preference" not in acc.reads


# --- Topology ------------------------------------------------------------------------------------------


def test_missing_present_file_is_not_sysfs():
    with pytest.raises(PowerError) as err:
        ct.Topology(MemorySysfs({}, root="/host/sys"))
    assert str(err.value) == (
        "/host/sys/devices/system/cpu/present is missing: this is not a Linux sysfs tree (check sysfs_root)"
    )


def test_topology_online_offline_and_policies():
    acc = machine(
        present="0-4",
        online="0-2,4",
        policies=[("policy10", [4], {"driver": "b_driver"}), ("policy2", [2], {}), ("policy0", [0, 3], {})],
        extra={f"{CPU}/intel_pstate/status": "active\n", f"{CPU}/amd_pstate/status": "passive"},
    )
    topo = ct.Topology(acc)
    assert topo.acc is acc
    assert (topo.present, topo.online, topo.offline) == ([0, 1, 2, 3, 4], [0, 1, 2, 4], [3])
    assert (topo.intel_pstate_status, topo.amd_pstate_status) == ("active", "passive")
    assert sorted(topo.policies) == ["policy0", "policy10", "policy2"]
    assert topo.cpu_policy == {0: "policy0", 2: "policy2", 4: "policy10"}  # CPU 1: no cpufreq, CPU 3 offline
    assert topo.policies["policy10"]["driver"] == "b_driver"
    assert topo.driver == "b_driver"  # the first of the sorted drivers
    assert topo.epp_active_mode is False
    assert topo.policy_order(["policy10", "policy2", "policy0"]) == ["policy0", "policy2", "policy10"]


def test_policy_order_ties_and_empty_cpus_by_name():
    acc = machine(present="0-3", policies=[("pb", [1], {"related": ""}), ("pa", [2], {"related": ""}),
                                           ("pc", [0], {"related": "0"})])  # fmt: skip
    topo = ct.Topology(acc)
    assert topo.policy_order(["pb", "pc", "pa"]) == ["pa", "pb", "pc"]


def test_every_online_cpu_is_read_once_per_policy():
    acc = machine(present="0-3", policies=[("policy0", [0, 1, 2, 3], {})])
    topo = ct.Topology(acc)
    assert topo.cpu_policy == {0: "policy0", 1: "policy0", 2: "policy0", 3: "policy0"}
    assert acc.reads.count(f"{CPU}/cpufreq/policy0/scaling_driver") == 1
    assert topo.online == [0, 1, 2, 3] and topo.offline == []
    assert topo.intel_pstate_status is None and topo.amd_pstate_status is None


def test_pre_4_7_layout_names_the_policy_after_its_cpu():
    rel = f"{CPU}/cpu1/cpufreq"
    acc = MemorySysfs(
        {f"{CPU}/present": "1", f"{rel}/related_cpus": "1", f"{rel}/scaling_driver": "acpi-cpufreq"},
        {},
    )
    topo = ct.Topology(acc)
    assert list(topo.policies) == ["cpu1"]
    assert topo.policies["cpu1"]["path"] == rel
    assert topo.cpu_policy == {1: "cpu1"}
    assert topo.driver == "acpi-cpufreq"


@pytest.mark.parametrize(
    ("driver", "active"),
    [("intel_pstate", True), ("amd-pstate-epp", True), ("intel_cpufreq", False), ("amd-pstate", False)],
)
def test_epp_active_mode(driver, active):
    topo = ct.Topology(machine(present="0", policies=[("policy0", [0], {"driver": driver})]))
    assert topo.driver == driver
    assert topo.epp_active_mode is active


def test_driver_without_policies():
    acc = machine(present="0-1", extra={f"{CPU}/cpufreq/policy0/scaling_driver": "intel_cpufreq"})
    topo = ct.Topology(acc)
    assert topo.policies == {} and topo.driver == "intel_cpufreq"
    assert ct.Topology(machine(present="0-1")).driver is None
    empty = machine(present="0", extra={f"{CPU}/cpufreq/policy0/scaling_driver": ""})
    assert ct.Topology(empty).driver is None
    assert ct.Topology(empty).epp_active_mode is False


def test_driver_of_policies_without_a_driver_file():
    acc = machine(present="0-1", policies=[("policy0", [0, 1], {"driver": ""})])
    assert ct.Topology(acc).driver is None


# --- read_rapl -----------------------------------------------------------------------------------------


def test_read_rapl_without_powercap():
    assert ct.read_rapl(MemorySysfs({})) == {"available": False, "zones": [], "skipped": []}


def test_read_rapl_zones():
    zone0, zone1 = f"{POWERCAP}/intel-rapl:0", f"{POWERCAP}/intel-rapl:1"
    acc = MemorySysfs(
        {
            f"{zone0}/name": "package-0",
            f"{zone0}/constraint_0_max_power_uw": "125000000",
            f"{zone0}/max_energy_range_uj": "262143328850",
            f"{zone0}/energy_uj": "1",
            f"{zone1}/name": "package-1-die-2",
            f"{zone1}/constraint_0_max_power_uw": "-1",
            f"{zone1}/max_energy_range_uj": "x",
            f"{zone1}/energy_uj": PermissionError(13, "denied"),
            f"{POWERCAP}/intel-rapl:2/name": "psys",
        }
    )
    assert ct.read_rapl(acc) == {
        "available": True,
        "zones": [
            {
                "zone": "intel-rapl:0",
                "name": "package-0",
                "package": 0,
                "die": None,
                "tdp_w": 125.0,
                "max_energy_range_uj": 262143328850,
                "energy_readable": True,
            },
            {
                "zone": "intel-rapl:1",
                "name": "package-1-die-2",
                "package": 1,
                "die": 2,
                "tdp_w": None,
                "max_energy_range_uj": None,
                "energy_readable": False,
            },
        ],
        "skipped": [{"zone": "intel-rapl:2", "name": "psys"}],
    }


def test_read_rapl_tdp_rounding_and_missing_files():
    zone = f"{POWERCAP}/intel-rapl:0"
    acc = MemorySysfs({f"{zone}/name": "package-0", f"{zone}/constraint_0_max_power_uw": "65432198"})
    (found,) = ct.read_rapl(acc)["zones"]
    assert found["tdp_w"] == 65.432
    acc.files[f"{zone}/constraint_0_max_power_uw"] = "1000000000"
    assert ct.read_rapl(acc)["zones"][0]["tdp_w"] == 1000.0  # micro: divided by exactly 10^6
    assert found["max_energy_range_uj"] is None and found["energy_readable"] is False


def test_read_rapl_only_psys_is_not_available():
    acc = MemorySysfs({f"{POWERCAP}/intel-rapl:0/name": "psys"})
    assert ct.read_rapl(acc) == {"available": False, "zones": [], "skipped": [{"zone": "intel-rapl:0", "name": "psys"}]}


# --- gather_cpufreq_info -------------------------------------------------------------------------------


def hybrid():
    """P-cores 0 and 3 (5000 MHz), E-cores 1 and 2 (3800 MHz), CPU 3 offline, CPU 4 without cpufreq."""
    p = {"lo": 800000, "hi": 5000000, "base": 3000000, "epp": "128", "epp_available": "performance power",
         "values": {"scaling_min_freq": 1200000, "scaling_governor": "performance"}}  # fmt: skip
    e = {"lo": 800000, "hi": 3800000, "base": 2000000, "epp": "power", "epp_available": "power balance_power",
         "governors": "powersave performance"}  # fmt: skip
    return machine(
        present="0-4",
        online="0-2,4",
        policies=[("policy0", [0], p), ("policy1", [1], e), ("policy2", [2], e), ("policy3", [3], p)],
    )


def test_gather_hybrid_facts():
    acc = hybrid()
    info = ct.gather_cpufreq_info(acc)
    p_settings = {
        "cpuinfo_min_mhz": 800,
        "cpuinfo_max_mhz": 5000,
        "base_mhz": 3000,
        "scaling_min_mhz": 1200,
        "scaling_max_mhz": 5000,
        "governor": "performance",
        "epp": "128",  # the kernel shows a number: a value with no name on this CPU
    }
    e_settings = {
        "cpuinfo_min_mhz": 800,
        "cpuinfo_max_mhz": 3800,
        "base_mhz": 2000,
        "scaling_min_mhz": 800,
        "scaling_max_mhz": 3800,
        "governor": "powersave",
        "epp": "power",
    }
    assert info["cpus"] == {
        "0": {"online": True, "policy": "policy0", **p_settings},
        "1": {"online": True, "policy": "policy1", **e_settings},
        "2": {"online": True, "policy": "policy2", **e_settings},
        "3": {"online": False, "policy": None},
        "4": {"online": True, "policy": None},
    }
    assert info["limit_groups"] == [
        {"cpus": [0], "cpulist": "0", "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 5000, "base_mhz": 3000},
        {"cpus": [1, 2], "cpulist": "1-2", "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 3800, "base_mhz": 2000},
    ]
    assert info["policies"][0] == {
        "name": "policy0",
        "cpus": "0",
        "online_cpus": "0",
        "shared": False,
        **p_settings,
        "available_governors": ["performance", "powersave"],
        "epp_raw": "128",
        "available_epp": ["performance", "power"],
    }
    assert [p["name"] for p in info["policies"]] == ["policy0", "policy1", "policy2"]
    assert info["available_epp"] == ["performance", "power", "balance_power"]
    assert info["available_governors"] == ["performance", "powersave"]
    assert (info["present"], info["online"], info["offline"]) == ("0-4", "0-2,4", "3")
    assert info["cpufreq_available"] is True
    assert info["driver"] == "intel_pstate"
    assert info["hwp"] is True
    assert info["epp_supported"] is True
    assert info["epp_refused_under_performance"] is True
    assert info["intel_pstate_status"] is None and info["amd_pstate_status"] is None
    assert info["rapl"] == {"available": False, "zones": [], "skipped": []}
    assert info["messages"] == ["CPUs 3 are offline and are skipped by cpu_power_profile"]
    assert list(info) == [
        "cpufreq_available",
        "driver",
        "intel_pstate_status",
        "amd_pstate_status",
        "hwp",
        "epp_supported",
        "epp_refused_under_performance",
        "present",
        "online",
        "offline",
        "available_governors",
        "available_epp",
        "policies",
        "cpus",
        "limit_groups",
        "rapl",
        "messages",
    ]


def test_limit_groups_of_interleaved_cores_sorted_by_first_cpu():
    big = {"lo": 800000, "hi": 5000000}
    little = {"lo": 800000, "hi": 3800000}
    acc = machine(present="0-3", policies=[("policy0", [0], big), ("policy1", [1], little),
                                           ("policy2", [2], little), ("policy3", [3], big)])  # fmt: skip
    groups = ct.gather_cpufreq_info(acc)["limit_groups"]
    assert [(g["cpus"], g["cpulist"], g["cpuinfo_max_mhz"], g["base_mhz"]) for g in groups] == [
        ([0, 3], "0,3", 5000, None),
        ([1, 2], "1-2", 3800, None),
    ]


def test_shared_policy_with_an_offline_member():
    acc = machine(present="0-3", online="0-2", policies=[("policy0", [0, 1], {}), ("policy2", [2, 3], {})])
    info = ct.gather_cpufreq_info(acc)
    assert [(p["name"], p["cpus"], p["online_cpus"], p["shared"]) for p in info["policies"]] == [
        ("policy0", "0-1", "0-1", True),
        ("policy2", "2-3", "2", True),
    ]
    assert info["policies"][0]["epp_raw"] is None and info["policies"][0]["epp"] is None
    assert info["epp_supported"] is False
    assert info["hwp"] is False  # intel_pstate without EPP nor hwp_dynamic_boost


def test_passed_topology_is_used():
    acc = machine(present="0-1", policies=[("policy0", [0, 1], {})])
    topo = ct.Topology(acc)
    acc.files[f"{CPU}/present"] = "0-7"  # read again only without the topology
    assert ct.gather_cpufreq_info(acc, topo)["present"] == "0-1"
    assert ct.gather_cpufreq_info(acc)["present"] == "0-7"


@pytest.mark.parametrize(
    ("driver", "epp", "boost", "hwp"),
    [
        ("intel_cpufreq", None, True, True),
        ("intel_cpufreq", None, False, False),
        ("intel_cpufreq", "power", False, True),
        ("intel_pstate", None, True, True),
        ("amd-pstate-epp", "power", True, None),
        ("acpi-cpufreq", None, False, None),
    ],
)
def test_hwp(driver, epp, boost, hwp):
    extra = {f"{CPU}/intel_pstate/hwp_dynamic_boost": "0"} if boost else {}
    acc = machine(present="0", policies=[("policy0", [0], {"driver": driver, "epp": epp})], extra=extra)
    info = ct.gather_cpufreq_info(acc)
    assert info["hwp"] is hwp
    assert info["epp_supported"] is (epp is not None)


def test_no_cpufreq_messages_and_facts():
    acc = machine(present="0-3", online="0-1")
    info = ct.gather_cpufreq_info(acc)
    assert info["messages"] == [
        "no cpufreq policy found for any online CPU: the kernel exposes no CPU frequency scaling "
        "(no driver loaded, intel_pstate=disable, or a virtual machine); cpu_power_profile cannot apply profiles",
        "CPUs 2-3 are offline and are skipped by cpu_power_profile",
    ]
    assert info["cpufreq_available"] is False and info["driver"] is None and info["hwp"] is None
    assert info["epp_supported"] is False and info["epp_refused_under_performance"] is False
    assert info["policies"] == [] and info["limit_groups"] == [] and info["available_governors"] == []
    assert info["cpus"] == {str(c): {"online": c < 2, "policy": None} for c in range(4)}


def test_all_online_has_no_messages():
    info = ct.gather_cpufreq_info(machine(present="0-1", policies=[("policy0", [0, 1], {})]))
    assert info["messages"] == [] and info["offline"] == ""


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - read_policy, `continue` -> `break` when the policy has no EPP file: EPP is the last of
#   MANAGED_ATTRS, so nothing is left to read either way.
# - _cpu_entries, `... if entry["policy"] else None` -> `if entry["policy"] or True`: a CPU without
#   a policy looks up topo.policies.get(None), which is None as well (policies are keyed by name).
