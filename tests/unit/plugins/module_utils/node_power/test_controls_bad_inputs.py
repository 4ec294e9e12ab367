# ruff: noqa: E501 - the catalogue holds exact, long messages
"""Catalogue of bad C-state / uncore / power-cap requests: exact message, nothing written.

Every problem of a request is reported at once ("; "-separated), before the first write.
``make unit PYTEST_ARGS='-k controls_bad_input -v'`` lists them; docs/node-power.md reproduces the table.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as cf

# (id, scenario, Request kwargs, control kwargs, exact message)
CATALOGUE = [
    (
        "cstates-unknown-key",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"cstates": {"disabel": ["C6"]}},
        (
            "cstates has unknown key(s) disabel; allowed: disable, enable, max_latency_us; cstates is empty: "
            "give disable (state names), enable (state names) and/or max_latency_us"
        ),
    ),
    (
        "cstates-not-a-list",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"cstates": {"disable": "C6"}},
        "cstates.disable='C6' is not a list of state names: give names as the kernel shows them (cpuN/cpuidle/stateK/name), e.g. [C6] or [C1E, C6]",
    ),
    (
        "cstates-unknown-state",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"cstates": {"disable": ["C9"]}},
        "cstates.disable names C9, which no managed CPU has (driver intel_idle; states: POLL C1 C1E C6); use one of those names",
    ),
    (
        "cstates-state0-poll",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"cstates": {"disable": ["POLL"]}},
        "cstates.disable names POLL, state0 of driver intel_idle: a profile never disables state0 (our policy, although the kernel would accept it); remove it",
    ),
    (
        "cstates-state0-wfi",
        "hwmon_only",
        {"cpus": "all"},
        {"cstates": {"disable": ["WFI"]}},
        "cstates.disable names WFI, state0 of driver psci_idle: a profile never disables state0 (our policy, although the kernel would accept it); remove it",
    ),
    (
        "cstates-in-both-lists",
        "acpi_idle",
        {"cpus": "0-5"},
        {"cstates": {"disable": ["C3"], "enable": ["C3"]}},
        "cstates: C3 is in both disable and enable; name each state once",
    ),
    (
        "cstates-negative-latency",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"cstates": {"max_latency_us": -1}},
        (
            "cstates.max_latency_us=-1 is not a latency: give a whole number of microseconds >= 0 (states "
            "with a larger exit latency are disabled; state0 never is)"
        ),
    ),
    (
        "cstates-cpu-not-present",
        "acpi_idle",
        {"cpus": "4-9"},
        {"cstates": {"disable": ["C3"]}},
        "CPU 8-9 is not present on this machine (present: 0-7); remove it from cpus",
    ),
    (
        "uncore-pct-above-100",
        "powercap_locked",
        {"cpus": "all"},
        {"uncore": {"max_pct": 150}},
        "uncore.max_pct=150 is not a percentage: give a whole number 0-100 (0 = initial_min_freq_khz, 100 = initial_max_freq_khz of each domain)",
    ),
    (
        "uncore-khz-and-pct",
        "powercap_locked",
        {"cpus": "all"},
        {"uncore": {"min_khz": 1000000, "min_pct": 10}},
        "uncore: give min_khz or min_pct, not both",
    ),
    (
        "uncore-not-a-ratio-step",
        "powercap_locked",
        {"cpus": "all"},
        {"uncore": {"max_khz": 2450000}},
        (
            "uncore.max_khz=2450000 is not a multiple of 100000 kHz: the uncore ratio is set in 100 MHz "
            "steps and the kernel truncates it to 2400000; use 2400000 or 2500000"
        ),
    ),
    (
        "uncore-outside-initial",
        "powercap_locked",
        {"cpus": "all"},
        {"uncore": {"max_khz": 3000000}},
        (
            "uncore.max_khz=3000000 is outside package_00_die_00's limits 800000-2400000 kHz (initial_min_freq_khz/initial_max_freq_khz); "
            "use a value in that range or max_pct"
        ),
    ),
    (
        "uncore-min-above-max",
        "powercap_locked",
        {"cpus": "all"},
        {"uncore": {"min_khz": 2000000, "max_khz": 1600000}},
        "uncore: min 2000000 kHz is above max 1600000 kHz for package_00_die_00; min must be <= max (set both bounds)",
    ),
    (
        "uncore-unknown-package",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"uncore": {"max_pct": 80, "packages": [5]}},
        "uncore.packages names package 5, which has no uncore domain (packages: 0, 1); fix packages",
    ),
    (
        "power-cap-above-max-power",
        "powercap_locked",
        {"cpus": "all"},
        {"power_cap": {"watts": 400}},
        (
            "power_cap.watts=400 is above intel-rapl:0 (package-0)'s long_term max_power_uw 125 W (constraint_0_max_power_uw): "
            "the kernel would accept it but the hardware would never reach it; use at most 125"
        ),
    ),
    (
        "power-cap-zero",
        "powercap_locked",
        {"cpus": "all"},
        {"power_cap": {"watts": 0}},
        "power_cap.watts=0 is not a power: give watts as a finite positive number, e.g. 150",
    ),
    (
        # Ansible's float type reads "nan" as a float; the plan crashed on it (int(round(nan)))
        "power-cap-nan",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"power_cap": {"watts": float("nan")}},
        "power_cap.watts=nan is not a power: give watts as a finite positive number, e.g. 150",
    ),
    (
        # the kernel writes it (no lower bound in intel_rapl) and the package crawls
        "power-cap-under-the-floor",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"power_cap": {"watts": 0.5}},
        (
            "power_cap.watts=0.5 is under a quarter of intel-rapl:0 (package-0)'s long_term max_power_uw 125 W "
            "(constraint_0_max_power_uw; the zone reports no min_power_uw): the package would be throttled far "
            "below its rating; use at least 31.25, or set power_cap.allow_below_floor: true if so low a cap is "
            "intended; power_cap.watts=0.5 is under a quarter of intel-rapl:1 (package-1)'s long_term "
            "max_power_uw 125 W (constraint_0_max_power_uw; the zone reports no min_power_uw): the package would "
            "be throttled far below its rating; use at least 31.25, or set power_cap.allow_below_floor: true if "
            "so low a cap is intended"
        ),
    ),
    (
        # an empty list selected no zone: the run succeeded and capped nothing
        "power-cap-no-packages",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"power_cap": {"watts": 100, "packages": []}},
        "power_cap.packages is empty, which caps no package: omit it for every package or name them, e.g. [0, 1]",
    ),
    (
        "uncore-no-packages",
        "intel_idle_uncore",
        {"cpus": "all"},
        {"uncore": {"max_pct": 50, "packages": []}},
        "uncore.packages is empty, which sets no package: omit it for every package or name them, e.g. [0, 1]",
    ),
    (
        "power-cap-without-watts",
        "powercap_locked",
        {"cpus": "all"},
        {"power_cap": {"time_window_us": 1000}},
        "power_cap.watts is required: the package power limit in watts, e.g. 150",
    ),
    (
        "power-cap-window-too-long",
        "powercap_locked",
        {"cpus": "all"},
        {"power_cap": {"watts": 100, "time_window_us": 50000000}},
        (
            "power_cap.time_window_us=50000000 is outside intel-rapl:0 (package-0)'s long_term range 976-40000000 "
            "us (constraint_0_min_time_window_us/constraint_0_max_time_window_us); use a value in that "
            "range"
        ),
    ),
    (
        "power-cap-unknown-constraint",
        "powercap_locked",
        {"cpus": "all"},
        {"power_cap": {"watts": 100, "constraint": "peak_power"}},
        "power_cap.constraint='peak_power' is not a constraint of intel-rapl:0 (package-0); constraints: long_term short_term",
    ),
    (
        "power-cap-unknown-package",
        "uncore_tpmi",
        {"cpus": "all"},
        {"power_cap": {"watts": 100, "packages": [0, 3]}},
        "power_cap.packages names package 3, which has no RAPL zone (packages: 0, 1); fix packages",
    ),
    (
        "all-problems-at-once",
        "powercap_locked",
        {"cpus": "all", "max_mhz": 4500},
        {"cstates": {"disable": ["C9"]}, "uncore": {"max_pct": 150}, "power_cap": {"watts": 400}},
        (
            "max_mhz=4500 MHz is outside CPU 0's limits 800-3900 MHz (policy0, cpuinfo_min_freq/cpuinfo_max_freq); "
            "use a value in that range or 'min'/'max'; cstates.disable names C9, which no managed CPU has "
            "(driver intel_idle; states: POLL C1 C1E C6); use one of those names; uncore.max_pct=150 is "
            "not a percentage: give a whole number 0-100 (0 = initial_min_freq_khz, 100 = initial_max_freq_khz "
            "of each domain); power_cap.watts=400 is above intel-rapl:0 (package-0)'s long_term max_power_uw "
            "125 W (constraint_0_max_power_uw): the kernel would accept it but the hardware would never "
            "reach it; use at most 125"
        ),
    ),
    (
        "nothing-to-apply",
        "intel_idle_uncore",
        {"cpus": "all"},
        {},
        "nothing to apply: give at least one of min_mhz, max_mhz, governor, epp, cstates, uncore, power_cap",
    ),
]


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 15
    assert len({case[0] for case in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize(
    ("case_id", "scenario", "request_kwargs", "controls", "message"), CATALOGUE, ids=[c[0] for c in CATALOGUE]
)
def test_controls_bad_input(make_node, case_id, scenario, request_kwargs, controls, message):
    node = make_node(scenario)
    before = node.digest()
    with pytest.raises(cf.ValidationError) as exc:
        cf.apply_controls(node.kernel, cf.Request(**request_kwargs), state_file=str(node.state_file), **controls)
    assert str(exc.value) == message
    assert node.kernel.writes == []
    assert node.digest() == before
