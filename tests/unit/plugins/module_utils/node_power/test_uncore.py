"""_uncore directly: reading the uncore domains, validating an uncore request, the planned writes.

test_controls.py / test_controls_bad_inputs.py run the same code through apply_controls against the kernel
model; these tests call the module's functions with plain data, fast enough for mutation testing.
"""

from __future__ import annotations

import shutil

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import uncore as uc
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor

DIR = "devices/system/cpu/intel_uncore_frequency"


def domain(name, package, lo=800000, hi=2400000, cur_min=None, cur_max=None):
    return {
        "name": name,
        "path": f"{DIR}/{name}",
        "package": package,
        "initial_min_khz": lo,
        "initial_max_khz": hi,
        "min_khz": lo if cur_min is None else cur_min,
        "max_khz": hi if cur_max is None else cur_max,
    }


def write(name, attr, current, target):
    return {
        "control": "uncore",
        "path": f"{DIR}/{name}/{attr}",
        "cpu": None,
        "label": f"{name} {attr}",
        "current": current,
        "target": target,
        "compare": "exact",
    }


INFO = {"available": True, "domains": [domain("package_00_die_00", 0), domain("package_01_die_00", 1)]}


def test_percentages_are_of_the_initial_range_rounded_down_to_a_ratio_step():
    plan = uc.plan_uncore(INFO, {"min_pct": 33, "max_pct": 75})
    # 800000 + 1600000 * 33 // 100 = 1328000 -> 1300000; 800000 + 1600000 * 75 // 100 = 2000000
    assert plan == {
        "control": "uncore",
        "available": True,
        "messages": [],
        "problems": [],
        "writes": [
            write("package_00_die_00", "min_freq_khz", "800000", "1300000"),
            write("package_00_die_00", "max_freq_khz", "2400000", "2000000"),
            write("package_01_die_00", "min_freq_khz", "800000", "1300000"),
            write("package_01_die_00", "max_freq_khz", "2400000", "2000000"),
        ],
    }
    # never below the initial minimum, even when that is no ratio step
    odd = {"available": True, "domains": [domain("uncore00", 0, lo=850000, hi=2450000)]}
    assert uc.plan_uncore(odd, {"min_pct": 0, "max_pct": 100})["writes"] == [
        write("uncore00", "min_freq_khz", "850000", "850000"),
        write("uncore00", "max_freq_khz", "2450000", "2400000"),
    ]


def test_a_raised_maximum_is_written_before_the_minimum():
    low = {"available": True, "domains": [domain("uncore00", 0, cur_min=800000, cur_max=1000000)]}
    assert uc.plan_uncore(low, {"min_khz": 1200000, "max_khz": 2000000})["writes"] == [
        write("uncore00", "max_freq_khz", "1000000", "2000000"),
        write("uncore00", "min_freq_khz", "800000", "1200000"),
    ]
    # the same maximum: min first
    assert uc.plan_uncore(low, {"min_khz": 900000, "max_khz": 1000000})["writes"] == [
        write("uncore00", "min_freq_khz", "800000", "900000"),
        write("uncore00", "max_freq_khz", "1000000", "1000000"),
    ]
    # only one bound; a current value the kernel did not report is None
    unread = {"available": True, "domains": [dict(domain("uncore00", 0), max_khz=None)]}
    assert uc.plan_uncore(unread, {"max_pct": 50})["writes"] == [write("uncore00", "max_freq_khz", None, "1600000")]
    assert uc.plan_uncore(unread, {"min_pct": 50})["writes"] == [write("uncore00", "min_freq_khz", "800000", "1600000")]


def test_frequencies_must_lie_in_the_initial_range_inclusive():
    def problems(**spec):
        return uc.plan_uncore(INFO, dict(spec, packages=[0]))["problems"]

    assert problems(min_khz=800000, max_khz=2400000) == []
    assert problems(min_khz=700000) == [
        "uncore.min_khz=700000 is outside package_00_die_00's limits 800000-2400000 kHz "
        "(initial_min_freq_khz/initial_max_freq_khz); use a value in that range or min_pct"
    ]
    assert problems(max_khz=2500000) == [
        "uncore.max_khz=2500000 is outside package_00_die_00's limits 800000-2400000 kHz "
        "(initial_min_freq_khz/initial_max_freq_khz); use a value in that range or max_pct"
    ]


def test_min_above_max_is_refused_per_domain():
    high_min = {"available": True, "domains": [domain("uncore00", 0, cur_max=1000000), domain("uncore01", 1)]}
    plan = uc.plan_uncore(high_min, {"min_khz": 1200000})
    assert plan["problems"] == [
        "uncore: min 1200000 kHz is above max 1000000 kHz for uncore00; min must be <= max (set both bounds)"
    ]
    assert plan["writes"] == [write("uncore01", "min_freq_khz", "800000", "1200000")]
    assert uc.plan_uncore(high_min, {"min_khz": 1000000})["problems"] == []  # equal is fine


def test_packages_select_domains_and_unknown_ones_are_named():
    assert uc.plan_uncore(INFO, {"max_pct": 100, "packages": [1]})["writes"] == [
        write("package_01_die_00", "max_freq_khz", "2400000", "2400000")
    ]
    plan = uc.plan_uncore(INFO, {"max_pct": 100, "packages": [2, 5]})
    assert plan["writes"] == []
    assert plan["problems"] == [
        "uncore.packages names package 2, which has no uncore domain (packages: 0, 1); fix packages",
        "uncore.packages names package 5, which has no uncore domain (packages: 0, 1); fix packages",
    ]


def test_a_machine_without_uncore_changes_nothing():
    plan = uc.plan_uncore({"available": False, "domains": []}, {"max_pct": 50})
    assert plan == {
        "control": "uncore",
        "available": False,
        "messages": [
            "uncore: no intel_uncore_frequency directory (driver not loaded, or an AMD/ARM machine without an "
            "uncore frequency interface); uncore skipped, nothing changed"
        ],
        "writes": [],
        "problems": [],
    }
    refused = uc.plan_uncore({"available": False, "domains": []}, {"max_pct": 500})
    assert refused["messages"] == [] and len(refused["problems"]) == 1


PCT = (
    "is not a percentage: give a whole number 0-100 "
    "(0 = initial_min_freq_khz, 100 = initial_max_freq_khz of each domain)"
)
KHZ = "is not a frequency: give kHz as a positive whole number (e.g. 2000000), or min_pct / max_pct"


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        ("fast", ["uncore='fast' is not a mapping: give min_khz/max_khz or min_pct/max_pct"]),
        (
            {"max_pct": 50, "max": 1, "min": 2},
            ["uncore has unknown key(s) max, min; allowed: min_khz, max_khz, min_pct, max_pct, packages"],
        ),
        ({}, ["uncore is empty: give min_khz/max_khz (kHz) or min_pct/max_pct (0-100)"]),
        ({"packages": [0]}, ["uncore is empty: give min_khz/max_khz (kHz) or min_pct/max_pct (0-100)"]),
        (
            {"min_khz": 1000000, "min_pct": 5, "max_khz": 2000000, "max_pct": 5},
            ["uncore: give min_khz or min_pct, not both", "uncore: give max_khz or max_pct, not both"],
        ),
        ({"min_pct": -1}, [f"uncore.min_pct=-1 {PCT}"]),
        ({"max_pct": 101}, [f"uncore.max_pct=101 {PCT}"]),
        ({"max_pct": 50.0}, [f"uncore.max_pct=50.0 {PCT}"]),
        ({"max_pct": True}, [f"uncore.max_pct=True {PCT}"]),
        ({"min_khz": 0}, [f"uncore.min_khz=0 {KHZ}"]),
        ({"max_khz": True}, [f"uncore.max_khz=True {KHZ}"]),
        ({"max_khz": "2000000"}, [f"uncore.max_khz='2000000' {KHZ}"]),
        (
            {"max_khz": 2050000},
            [
                "uncore.max_khz=2050000 is not a multiple of 100000 kHz: the uncore ratio is set in 100 MHz steps "
                "and the kernel truncates it to 2000000; use 2000000 or 2100000"
            ],
        ),
        ({"max_pct": 5, "packages": 0}, ["uncore.packages=0 is not a list of package ids, e.g. [0, 1]"]),
        ({"max_pct": 5, "packages": [False]}, ["uncore.packages=[False] is not a list of package ids, e.g. [0, 1]"]),
    ],
)
def test_check_spec_refuses_with_the_exact_message(spec, problems):
    assert uc.check_spec(spec)[2] == problems


def test_check_spec_bounds():
    assert uc.check_spec({"min_pct": 0, "max_pct": 100, "packages": (1,)}) == (
        {"min": ("pct", 0), "max": ("pct", 100)},
        (1,),
        [],
    )
    assert uc.check_spec({"min_khz": 100000, "max_khz": 2000000}) == (
        {"min": ("khz", 100000), "max": ("khz", 2000000)},
        None,
        [],
    )
    assert uc.check_spec({"max_pct": 10, "packages": "0"})[:2] == ({"max": ("pct", 10)}, None)


def test_read_uncore_legacy_and_facts(make_node):
    info = uc.read_uncore(SysfsAccessor(str(make_node("intel_idle_uncore").sys)))
    legacy = [
        {
            "name": f"package_0{p}_die_00",
            "path": f"{DIR}/package_0{p}_die_00",
            "min_khz": 800000,
            "max_khz": 2400000,
            "initial_min_khz": 800000,
            "initial_max_khz": 2400000,
            "current_khz": 1600000,
            "package": p,
            "die": 0,
            "domain_id": None,
        }
        for p in (0, 1)
    ]
    assert info == {"available": True, "interface": "legacy", "domains": legacy, "package_dirs": []}
    assert uc.uncore_facts(info) == dict(info, messages=[])


def test_read_uncore_tpmi_in_numeric_order(make_node):
    node = make_node("uncore_tpmi")
    base = node.sys / DIR
    shutil.copytree(base / "uncore03", base / "uncore99")
    shutil.copytree(base / "uncore03", base / "uncore100")
    (base / "uncore03" / "fabric_cluster_id").write_text("2\n")
    info = uc.read_uncore(SysfsAccessor(str(node.sys)))
    assert info["interface"] == "tpmi" and info["available"] is True
    assert info["package_dirs"] == ["package_00_die_00", "package_01_die_00"]
    names = ["uncore00", "uncore01", "uncore02", "uncore03", "uncore99", "uncore100"]
    assert [d["name"] for d in info["domains"]] == names
    assert info["domains"][3] == {
        "name": "uncore03",
        "path": f"{DIR}/uncore03",
        "min_khz": 800000,
        "max_khz": 2500000,
        "initial_min_khz": 800000,
        "initial_max_khz": 2500000,
        "current_khz": 1600000,
        "package": 1,
        "die": None,
        "domain_id": 1,
        "cluster_id": 2,
    }


def test_read_uncore_without_domains(make_node):
    node = make_node("intel_idle_uncore")
    none = {"available": False, "interface": None, "domains": [], "package_dirs": []}
    for entry in (node.sys / DIR).iterdir():
        shutil.rmtree(entry)
    (node.sys / DIR / "unknown_dir").mkdir()
    assert uc.read_uncore(SysfsAccessor(str(node.sys))) == none
    absent = uc.read_uncore(SysfsAccessor(str(make_node("amd_no_uncore").sys)))
    assert absent == none
    assert uc.uncore_facts(absent)["messages"] == [
        "no intel_uncore_frequency directory: the driver is not loaded, or this is not an Intel server "
        "(AMD and ARM have no uncore frequency interface); uncore settings cannot be applied"
    ]


def test_the_smallest_frequency_is_refused_as_no_ratio_step():
    # below one step the truncated ratio would be 0, which the kernel refuses: 0 is no fix to offer
    assert uc.check_spec({"min_khz": 1})[2] == [
        "uncore.min_khz=1 is not a multiple of 100000 kHz: the uncore ratio is set in 100 MHz steps "
        "and it would be ratio 0, which the kernel refuses; use 100000"
    ]
    assert uc.check_spec({"max_khz": 99999})[2][0].endswith("use 100000")
    assert uc.check_spec({"max_khz": 100001})[2][0].endswith("truncates it to 100000; use 100000 or 200000")


def test_a_lowered_maximum_below_the_current_minimum_is_refused():
    high_min = {"available": True, "domains": [domain("uncore00", 0, cur_min=1200000)]}
    assert uc.plan_uncore(high_min, {"max_khz": 1000000})["problems"] == [
        "uncore: min 1200000 kHz is above max 1000000 kHz for uncore00; min must be <= max (set both bounds)"
    ]


def test_read_uncore_reads_missing_or_odd_values_as_none(make_node):
    node = make_node("intel_idle_uncore")
    first = node.sys / DIR / "package_00_die_00"
    (first / "current_freq_khz").unlink()
    (first / "max_freq_khz").write_text("n/a\n")
    info = uc.read_uncore(SysfsAccessor(str(node.sys)))
    assert info["domains"][0]["current_khz"] is None and info["domains"][0]["max_khz"] is None
    assert info["domains"][0]["min_khz"] == 800000
