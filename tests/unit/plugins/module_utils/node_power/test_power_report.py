# ruff: noqa: E501 - exact, long messages
"""power_report: what a node power run reports: the per-policy summary in MHz and names, the per-CPU
diff tables (one line per CPU, sorted, dashes for what a CPU lacks) and the other controls'
settings before and after.
"""

from __future__ import annotations

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_report as report
from power_machine import (
    HEADER,
    step,
)

# --- reports -------------------------------------------------------------------------------------


def test_control_summary():
    a, b, c = step("a", "2", "1", "A"), step("b", "3", "3", "B"), step("c", "9", "8", "C")
    a["after"] = "1999"
    plan = {"available": True, "writes": [a, b, c], "messages": ["note"]}
    assert report.control_summary(plan, [c, a]) == {
        "available": True,
        "changed": ["A", "C"],
        "settings": [
            {"attribute": "A", "before": "1", "after": "1999"},
            {"attribute": "B", "before": "3", "after": "3"},
            {"attribute": "C", "before": "8", "after": "9"},
        ],
        "messages": ["note"],
    }


def test_steps_diff():
    a, b = step("a", "2", "1", "A"), step("b", "3", None, "B")
    a["after"] = "2000"
    assert report.steps_diff([a, b]) == (["A: 1", "B: None"], ["A: 2000", "B: 3"])


class Topo:
    def __init__(self, driver="intel_pstate"):
        self.driver = driver


def policy_item(name, cpus, current, changes=(), target=None):
    return {
        "policy": {"name": name, "path": f"devices/system/cpu/cpufreq/{name}"},
        "cpus": cpus,
        "current": current,
        "changes": dict.fromkeys(changes, None),
        "target": target or {},
    }


def test_diff_table_one_line_per_cpu_sorted_with_names_and_dashes():
    p1 = policy_item(
        "policy2",
        [3, 2],
        {
            "scaling_min_freq": "800000",
            "scaling_max_freq": "3500999",
            "scaling_governor": "powersave",
            "energy_performance_preference": "balance_performance",
        },
        ["scaling_max_freq"],
    )
    p0 = policy_item("policy0", [0], {"scaling_min_freq": "x"})
    results = [
        {
            "item": p1,
            "after": {**p1["current"], "scaling_max_freq": "2000000", "energy_performance_preference": "power"},
            "other": {},
        },
        {
            "item": p0,
            "after": {"scaling_governor": "performance", "energy_performance_preference": " power "},
            "other": {},
        },
    ]
    assert report.diff_table(Topo(), results) == {
        "before": "\n".join(
            [
                HEADER,
                "   0 policy0        None     None -            -",
                "   2 policy2         800     3500 powersave    balance_performance",
                "   3 policy2         800     3500 powersave    balance_performance",
            ]
        )
        + "\n",
        "after": "\n".join(
            [
                HEADER,
                "   0 policy0        None     None performance  power",
                "   2 policy2         800     2000 powersave    power",
                "   3 policy2         800     2000 powersave    power",
            ]
        )
        + "\n",
    }
    other = report.diff_table(Topo("acpi-cpufreq"), results, after_key="other")
    assert other["after"].splitlines()[1] == "   0 policy0        None     None -            -"
    assert other["before"].splitlines()[2] == "   2 policy2         800     3500 powersave    balance_performance"


def test_diff_table_without_results_is_the_header():
    assert report.diff_table(Topo(), []) == {"before": HEADER + "\n", "after": HEADER + "\n"}


def test_summarize():
    item = policy_item(
        "policy0",
        [0, 1, 2],
        {
            "scaling_min_freq": "800000",
            "scaling_max_freq": "3000000",
            "scaling_governor": "powersave",
            "energy_performance_preference": "performance",
        },
        ["scaling_max_freq", "energy_performance_preference"],
    )
    after = {
        "scaling_min_freq": "800000",
        "scaling_max_freq": "2000000",
        "scaling_governor": "powersave",
        "energy_performance_preference": "power",
    }
    bare = policy_item("policy3", [3], {})
    assert report.summarize(Topo(), [{"item": item, "after": after}, {"item": bare, "after": {}}]) == [
        {
            "policy": "policy0",
            "cpus": "0-2",
            "changed": ["energy_performance_preference", "scaling_max_freq"],
            "before": {"min_mhz": 800, "max_mhz": 3000, "governor": "powersave", "epp": "performance"},
            "after": {"min_mhz": 800, "max_mhz": 2000, "governor": "powersave", "epp": "power"},
        },
        {
            "policy": "policy3",
            "cpus": "3",
            "changed": [],
            "before": {"min_mhz": None, "max_mhz": None, "governor": None, "epp": None},
            "after": {"min_mhz": None, "max_mhz": None, "governor": None, "epp": None},
        },
    ]


def test_mhz():
    assert report.mhz("2400999") == 2400
    assert report.mhz(None) is None
    assert report.mhz("n/a") is None


def test_combined_diff():
    item = policy_item("policy0", [0], {"scaling_max_freq": "3000000", "energy_performance_preference": "power"})
    results = [
        {"item": item, "after": {"scaling_max_freq": "2000000", "energy_performance_preference": "balance_performance"}}
    ]
    a = step("a", "2", "1", "A")
    table = report.diff_table(Topo(), results)
    assert table["after"].splitlines()[1] == "   0 policy0        None     2000 -            balance_performance"
    assert report.combined_diff(Topo(), results, []) == table
    assert report.combined_diff(Topo(), [], []) == {"before": "", "after": ""}
    assert report.combined_diff(Topo(), [], [a]) == {"before": "A: 1\n", "after": "A: 2\n"}
    assert report.combined_diff(Topo(), results, [a, step("b", "4", "3", "B")]) == {
        "before": table["before"] + "A: 1\nB: 3\n",
        "after": table["after"] + "A: 2\nB: 4\n",
    }


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - diff_table, `sorted(rows, key=lambda r: r[0])` -> `sorted(rows)` / `key=None`: a CPU belongs to
#   one cpufreq policy, so no two rows share a CPU and the tuple order is the CPU order.
# - summarize, `normalize_epp(...) if values.get(EPP) is not None` -> `or True`: normalize_epp
#   returns None for None, as the else branch does.
