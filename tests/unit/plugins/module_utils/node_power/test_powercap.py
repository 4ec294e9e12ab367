"""_powercap directly: reading the RAPL zones, validating a power_cap request, the planned writes.

test_controls.py / test_controls_bad_inputs.py run the same code through apply_controls against the kernel
model; these tests call the module's functions with plain data, fast enough for mutation testing.
"""

from __future__ import annotations

import errno

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import powercap as pc
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor


def constraint(index, name, limit=125000000, window=27983872, **bounds):
    fields = {"max_power_uw": None, "min_power_uw": None, "max_time_window_us": None, "min_time_window_us": None}
    fields.update(bounds)
    return {"index": index, "name": name, "power_limit_uw": limit, "time_window_us": window, **fields}


def zone(package, *constraints, enabled="1"):
    return {
        "zone": f"intel-rapl:{package}",
        "name": f"package-{package}",
        "package": package,
        "die": None,
        "path": f"class/powercap/intel-rapl:{package}",
        "enabled": enabled,
        "constraints": list(constraints),
    }


LONG = constraint(0, "long_term", max_power_uw=125000000, min_time_window_us=976, max_time_window_us=40000000)
SHORT = constraint(1, "short_term", limit=156250000, window=2440, max_power_uw=187500000)
INFO = {"available": True, "zones": [zone(0, LONG, SHORT), zone(1, LONG, SHORT)]}


def write(path, label, current, target, compare, **extra):
    return {
        "control": "power_cap",
        "cpu": None,
        "hints": {errno.EACCES: pc.LOCKED_HINT},
        "path": path,
        "label": label,
        "current": current,
        "target": target,
        "compare": compare,
        # the zone's name: its directory number may differ on the next boot (registration order)
        "identity": f"RAPL zone {label.split()[0]}",
        **extra,
    }


def writes_of(package, index, name, limit_current, limit_target, window=None, enabled="1", held=None):
    """The writes of one package: ``window`` is (current, target, what the kernel would hold)."""
    base = f"class/powercap/intel-rapl:{package}"
    out = [
        write(
            f"{base}/constraint_{index}_power_limit_uw",
            f"package-{package} {name} power_limit_uw",
            limit_current,
            limit_target,
            "tolerance",
            tolerance=1000000,
            held=held or limit_target,
        )
    ]
    if window is not None:
        out.append(
            write(
                f"{base}/constraint_{index}_time_window_us",
                f"package-{package} {name} time_window_us",
                window[0],
                window[1],
                "time_window",
                held=window[2],
            )
        )
    out.append(write(f"{base}/enabled", f"package-{package} enabled", enabled, "1", "exact"))
    return out


def test_the_plan_sets_limit_window_and_enabled_of_every_package_in_order():
    plan = pc.plan_power_cap(INFO, {"watts": 100.5, "time_window_us": 1000000})
    assert plan == {
        "control": "power_cap",
        "available": True,
        "messages": [],
        "problems": [],
        "writes": writes_of(0, 0, "long_term", "125000000", "100500000", ("27983872", "1000000", "999424"))
        + writes_of(1, 0, "long_term", "125000000", "100500000", ("27983872", "1000000", "999424")),
    }


def test_the_plan_takes_the_named_constraint_and_only_the_named_packages():
    info = {"available": True, "zones": [zone(0, LONG, SHORT), zone(1, LONG, constraint(1, "short_term", limit=None))]}
    plan = pc.plan_power_cap(info, {"watts": 150, "constraint": "short_term", "packages": [1]})
    assert plan["problems"] == [] and plan["messages"] == []
    # no time window asked: none written; a limit the kernel did not report is current None
    assert plan["writes"] == writes_of(1, 1, "short_term", None, "150000000")
    assert pc.plan_power_cap(info, {"watts": 150, "packages": []})["writes"] == []  # no package named: none
    disabled = {"available": True, "zones": [zone(0, LONG, enabled="0")]}
    assert pc.plan_power_cap(disabled, {"watts": 150})["writes"] == writes_of(
        0, 0, "long_term", "125000000", "150000000", enabled="0"
    )


def test_the_plan_checks_the_power_and_window_bounds_inclusive():
    bounded = constraint(
        0,
        "long_term",
        max_power_uw=125000000,
        min_power_uw=10000000,
        min_time_window_us=976,
        max_time_window_us=40000000,
    )
    info = {"available": True, "zones": [zone(0, bounded)]}

    def problems(watts, window=None):
        return pc.plan_power_cap(info, {"watts": watts, "time_window_us": window})["problems"]

    assert problems(125, 40000000) == [] and problems(10, 976) == []
    assert problems(125.000001) == [
        "power_cap.watts=125 is above intel-rapl:0 (package-0)'s long_term max_power_uw 125 W "
        "(constraint_0_max_power_uw): the kernel would accept it but the hardware would never reach it; "
        "use at most 125"
    ]
    assert problems(9.999999) == [
        "power_cap.watts=10 is below intel-rapl:0 (package-0)'s long_term min_power_uw 10 W "
        "(constraint_0_min_power_uw); use at least 10"
    ]
    outside = (
        "is outside intel-rapl:0 (package-0)'s long_term range 976-40000000 us "
        "(constraint_0_min_time_window_us/constraint_0_max_time_window_us); use a value in that range"
    )
    assert problems(100, 975) == [f"power_cap.time_window_us=975 {outside}"]
    assert problems(100, 40000001) == [f"power_cap.time_window_us=40000001 {outside}"]
    # a bound the kernel does not report is no bound; a missing minimum reads 0
    open_ended = {"available": True, "zones": [zone(0, constraint(0, "long_term", max_time_window_us=500))]}
    assert pc.plan_power_cap(open_ended, {"watts": 9999, "time_window_us": 1})["problems"] == []
    assert pc.plan_power_cap(open_ended, {"watts": 1, "time_window_us": 501})["problems"] == [
        "power_cap.time_window_us=501 is outside intel-rapl:0 (package-0)'s long_term range 0-500 us "
        "(constraint_0_min_time_window_us/constraint_0_max_time_window_us); use a value in that range"
    ]


def test_the_plan_names_unknown_packages_and_constraints():
    plan = pc.plan_power_cap(INFO, {"watts": 100, "packages": [0, 3, 7], "constraint": "peak_power"})
    assert plan["writes"] == []
    assert plan["problems"] == [
        "power_cap.packages names package 3, which has no RAPL zone (packages: 0, 1); fix packages",
        "power_cap.packages names package 7, which has no RAPL zone (packages: 0, 1); fix packages",
        "power_cap.constraint='peak_power' is not a constraint of intel-rapl:0 (package-0); "
        "constraints: long_term short_term",
    ]
    unnamed = {"available": True, "zones": [zone(0, constraint(0, None), SHORT)]}
    assert pc.plan_power_cap(unnamed, {"watts": 100})["problems"] == [
        "power_cap.constraint='long_term' is not a constraint of intel-rapl:0 (package-0); constraints: ? short_term"
    ]


def test_the_plan_of_a_machine_without_power_limits_changes_nothing():
    none = pc.plan_power_cap({"available": False, "zones": []}, {"watts": 100})
    assert none == {
        "control": "power_cap",
        "available": False,
        "messages": ["power_cap: no RAPL package zone in powercap on this machine; power_cap skipped, nothing changed"],
        "writes": [],
        "problems": [],
    }
    energy_only = pc.plan_power_cap({"available": False, "zones": [zone(0)]}, {"watts": 100})
    assert energy_only["messages"] == [
        "power_cap: RAPL zones without power-limit constraints on this machine; power_cap skipped, nothing changed"
    ]
    # a bad request is refused first, whatever the machine
    refused = pc.plan_power_cap({"available": False, "zones": []}, {"watts": 0})
    assert refused["messages"] == [] and refused["problems"] == [
        "power_cap.watts=0 is not a power: give watts as a finite positive number, e.g. 150"
    ]


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        (
            "100",
            ["power_cap='100' is not a mapping: give watts (and optionally time_window_us, packages)"],
        ),
        (
            {"watts": 100, "window": 1, "zone": 0},
            [
                "power_cap has unknown key(s) window, zone; allowed: watts, time_window_us, packages, constraint, "
                "allow_below_floor"
            ],
        ),
        ({}, ["power_cap.watts is required: the package power limit in watts, e.g. 150"]),
        ({"watts": True}, ["power_cap.watts=True is not a power: give watts as a finite positive number, e.g. 150"]),
        ({"watts": "150"}, ["power_cap.watts='150' is not a power: give watts as a finite positive number, e.g. 150"]),
        ({"watts": -1.5}, ["power_cap.watts=-1.5 is not a power: give watts as a finite positive number, e.g. 150"]),
        (
            {"watts": 1, "time_window_us": 0},
            [
                "power_cap.time_window_us=0 is not a time window: give microseconds as a positive whole number, "
                "e.g. 1000000"
            ],
        ),
        (
            {"watts": 1, "time_window_us": True},
            [
                "power_cap.time_window_us=True is not a time window: give microseconds as a positive whole number, "
                "e.g. 1000000"
            ],
        ),
        (
            {"watts": 1, "time_window_us": 1.5},
            [
                "power_cap.time_window_us=1.5 is not a time window: give microseconds as a positive whole number, "
                "e.g. 1000000"
            ],
        ),
        # Ansible's float type reads "nan" and "inf" as floats: without the check the plan crashed
        # (int(round(nan)) raises ValueError, inf OverflowError)
        (
            {"watts": float("nan")},
            ["power_cap.watts=nan is not a power: give watts as a finite positive number, e.g. 150"],
        ),
        (
            {"watts": float("inf")},
            ["power_cap.watts=inf is not a power: give watts as a finite positive number, e.g. 150"],
        ),
        (
            {"watts": 100, "allow_below_floor": "yes"},
            ["power_cap.allow_below_floor='yes' is not a boolean: give true or false"],
        ),
        ({"watts": 1, "packages": 0}, ["power_cap.packages=0 is not a list of package ids, e.g. [0, 1]"]),
        (
            {"watts": 1, "packages": [0, True]},
            ["power_cap.packages=[0, True] is not a list of package ids, e.g. [0, 1]"],
        ),
        ({"watts": 1, "packages": ["0"]}, ["power_cap.packages=['0'] is not a list of package ids, e.g. [0, 1]"]),
    ],
)
def test_check_spec_refuses_with_the_exact_message(spec, problems):
    assert pc.check_spec(spec)[1] == problems


def test_check_spec_fields():
    assert pc.check_spec({"watts": 0.5, "time_window_us": 1, "packages": (0, 1)}) == (
        {"watts": 0.5, "time_window_us": 1, "packages": (0, 1), "constraint": "long_term"},
        [],
    )
    assert pc.check_spec({"watts": 150, "constraint": "short_term"}) == (
        {"watts": 150, "time_window_us": None, "packages": None, "constraint": "short_term"},
        [],
    )
    # a refused value is dropped from the fields, the others are kept
    fields, problems = pc.check_spec({"watts": -1, "time_window_us": -1, "packages": "0", "constraint": ""})
    assert fields == {"watts": None, "time_window_us": None, "packages": None, "constraint": "long_term"}
    assert len(problems) == 3


def test_read_powercap_of_the_kernel_model(make_node):
    node = make_node("intel_idle_uncore")
    info = pc.read_powercap(SysfsAccessor(str(node.sys)))
    long_term = constraint(0, "long_term", max_power_uw=125000000, max_time_window_us=40000000, min_time_window_us=976)
    short_term = constraint(1, "short_term", limit=156250000, window=2440, max_power_uw=187500000)
    assert info == {"available": True, "zones": [zone(0, long_term, short_term), zone(1, long_term, short_term)]}
    assert pc.powercap_facts(info) == {
        "available": True,
        "zones": [{k: v for k, v in z.items() if k != "path"} for z in info["zones"]],
        "messages": [],
    }


def test_a_node_with_more_than_ten_packages_has_every_zone_and_caps_the_eleventh(make_node):
    # The kernel names zones "%x" of their registration order (powercap_sys.c): on twelve packages
    # the 11th and 12th are intel-rapl:a and intel-rapl:b, and psys intel-rapl:c.
    node = make_node("intel_idle_uncore", packages=12)
    info = pc.read_powercap(SysfsAccessor(str(node.sys)))
    assert [(z["zone"], z["package"]) for z in info["zones"]] == [(f"intel-rapl:{p:x}", p) for p in range(12)]
    plan = pc.plan_power_cap(info, {"watts": 100, "packages": [10, 11]})
    assert plan["problems"] == []
    assert sorted({w["path"].split("/")[2] for w in plan["writes"]}) == ["intel-rapl:a", "intel-rapl:b"]


def test_read_powercap_skips_a_constraint_without_a_limit_and_reads_odd_values_as_none(make_node):
    node = make_node("intel_idle_uncore")
    rapl = node.sys / "devices/virtual/powercap/intel-rapl/intel-rapl:0"
    (rapl / "constraint_0_power_limit_uw").unlink()  # the first one: the next one is still read
    (rapl / "constraint_1_max_power_uw").write_text("-5\n")
    (rapl / "constraint_1_time_window_us").unlink()
    (rapl / "constraint_1_min_power_uw").write_text("5000000\n")
    (rapl / "constraint_7_power_limit_uw").write_text("1\n")  # no constraint_7_name: not a constraint
    info = pc.read_powercap(SysfsAccessor(str(node.sys)))
    (only,) = info["zones"][0]["constraints"]
    assert only == constraint(1, "short_term", limit=156250000, window=None, min_power_uw=5000000)


def test_facts_of_machines_without_power_limits(make_node):
    amd = pc.read_powercap(SysfsAccessor(str(make_node("amd_no_uncore").sys)))
    assert amd["available"] is False and [z["constraints"] for z in amd["zones"]] == [[]]
    assert pc.powercap_facts(amd)["messages"] == [
        "the RAPL package zones have no power-limit constraints (energy counters only)"
    ]
    bare = pc.read_powercap(SysfsAccessor(str(make_node("hwmon_only").sys)))
    assert bare == {"available": False, "zones": []}
    assert pc.powercap_facts(bare) == {
        "available": False,
        "zones": [],
        "messages": ["no RAPL package zone in powercap: a package power cap cannot be set"],
    }


def test_a_package_without_the_constraint_does_not_stop_the_others():
    info = {"available": True, "zones": [zone(0, LONG), zone(1, LONG, SHORT)]}
    plan = pc.plan_power_cap(info, {"watts": 150, "constraint": "short_term"})
    assert plan["problems"] == [
        "power_cap.constraint='short_term' is not a constraint of intel-rapl:0 (package-0); constraints: long_term"
    ]
    assert plan["writes"] == writes_of(1, 1, "short_term", "156250000", "150000000")


def test_the_maximum_is_shown_in_watts_to_six_digits():
    info = {"available": True, "zones": [zone(0, constraint(0, "long_term", max_power_uw=100000550))]}
    assert pc.plan_power_cap(info, {"watts": 101})["problems"] == [
        "power_cap.watts=101 is above intel-rapl:0 (package-0)'s long_term max_power_uw 100.001 W "
        "(constraint_0_max_power_uw): the kernel would accept it but the hardware would never reach it; "
        "use at most 100.001"
    ]


def test_a_cap_under_a_quarter_of_the_maximum_is_refused_unless_allowed_where_the_zone_has_no_minimum():
    """intel_rapl reports no min_power_uw for package zones and the kernel writes any limit (0.5 W on
    a 125 W package throttles it to a crawl): the floor is a quarter of max_power_uw there."""
    info = {"available": True, "zones": [zone(0, LONG), zone(1, LONG)]}

    def plan(**spec):
        return pc.plan_power_cap(info, spec)

    assert plan(watts=31.25)["problems"] == []  # the floor itself is allowed
    low = plan(watts=0.5)
    assert low["problems"] == [
        f"power_cap.watts=0.5 is under a quarter of intel-rapl:{p} (package-{p})'s long_term max_power_uw 125 W "
        "(constraint_0_max_power_uw; the zone reports no min_power_uw): the package would be throttled far below "
        "its rating; use at least 31.25, or set power_cap.allow_below_floor: true if so low a cap is intended"
        for p in (0, 1)
    ]
    allowed = plan(watts=0.5, allow_below_floor=True)
    assert allowed["problems"] == []
    assert [w["target"] for w in allowed["writes"] if w["path"].endswith("power_limit_uw")] == ["500000", "500000"]
    # where the zone has a minimum, it is the floor, and allow_below_floor does not lift it
    bounded = {"available": True, "zones": [zone(0, constraint(0, "long_term", max_power_uw=125000000,
                                                               min_power_uw=5000000))]}  # fmt: skip
    assert pc.plan_power_cap(bounded, {"watts": 6})["problems"] == []
    assert pc.plan_power_cap(bounded, {"watts": 4, "allow_below_floor": True})["problems"] == [
        "power_cap.watts=4 is below intel-rapl:0 (package-0)'s long_term min_power_uw 5 W "
        "(constraint_0_min_power_uw); use at least 5"
    ]
    # no maximum reported: no floor to take a share of
    open_ended = {"available": True, "zones": [zone(0, constraint(0, "long_term"))]}
    assert pc.plan_power_cap(open_ended, {"watts": 0.5})["problems"] == []
