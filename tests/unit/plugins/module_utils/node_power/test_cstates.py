"""_cstates directly: reading cpuidle, validating a cstates request, the planned writes.

test_controls.py / test_controls_bad_inputs.py run the same code through apply_controls against the kernel
model; these tests call the module's functions with plain data, fast enough for mutation testing.
"""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import cstates as cs
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor

CPU = "devices/system/cpu"
# (name, exit latency in us) of intel_idle's states 0..3
STATES = (("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 133))


def states(cpu, disabled=(), table=STATES):
    return [
        {
            "index": k,
            "state": f"state{k}",
            "path": f"{CPU}/cpu{cpu}/cpuidle/state{k}",
            "name": name,
            "desc": f"desc {name}",
            "latency_us": latency,
            "residency_us": 2 * latency,
            "disable": "1" if name in disabled else "0",
        }
        for k, (name, latency) in enumerate(table)
    ]


def idle(cpus=(0, 1), missing=(), driver="intel_idle", available=True, **disabled):
    return {
        "driver": driver,
        "governor": "menu",
        "available": available,
        "cpus": {c: states(c, disabled.get(f"cpu{c}", ())) for c in cpus},
        "missing": list(missing),
    }


def write(cpu, k, name, current, target):
    return {
        "control": "cstates",
        "path": f"{CPU}/cpu{cpu}/cpuidle/state{k}/disable",
        "cpu": cpu,
        "label": f"cpu{cpu} state{k} ({name}) disable",
        "current": current,
        "target": target,
        "compare": "exact",
    }


class NoTree:
    def path(self, rel):
        return "/sys/" + rel


def plan(spec, info=None, online=(0, 1)):
    return cs.plan_cstates(NoTree(), info or idle(), list(online), spec)


def test_a_latency_limit_disables_the_slower_states_and_enables_the_others():
    assert plan({"max_latency_us": 10}, online=[1]) == {
        "control": "cstates",
        "available": True,
        "messages": [],
        "problems": [],
        # state0 is left alone; 10 us is within the limit (inclusive)
        "writes": [write(1, 1, "C1", "0", "0"), write(1, 2, "C1E", "0", "0"), write(1, 3, "C6", "0", "1")],
    }
    assert plan({"max_latency_us": 0}, online=[0])["writes"] == [
        write(0, 1, "C1", "0", "1"),
        write(0, 2, "C1E", "0", "1"),
        write(0, 3, "C6", "0", "1"),
    ]


def test_names_win_over_the_latency_limit_and_state0_can_only_be_enabled():
    info = idle(cpu0=("POLL", "C1E"))
    writes = plan({"disable": [" C1 "], "enable": ["C6", "POLL"], "max_latency_us": 5}, info, online=[0])["writes"]
    assert writes == [
        write(0, 0, "POLL", "1", "0"),
        write(0, 1, "C1", "0", "1"),
        write(0, 2, "C1E", "1", "1"),  # by the limit
        write(0, 3, "C6", "0", "0"),
    ]
    # a state without a known latency is left alone by the limit
    unknown = idle(cpus=(0,))
    unknown["cpus"][0][3]["latency_us"] = None
    assert plan({"max_latency_us": 5}, unknown, online=[0])["writes"] == [
        write(0, 1, "C1", "0", "0"),
        write(0, 2, "C1E", "0", "1"),
    ]
    assert plan({"disable": ["C6"]}, online=[0, 1])["writes"] == [
        write(0, 3, "C6", "0", "1"),
        write(1, 3, "C6", "0", "1"),
    ]


def test_unknown_names_and_state0_in_disable_are_refused():
    result = plan({"disable": ["C9", "POLL"], "enable": ["C7"]}, online=[0])
    assert result["writes"] == []
    assert result["problems"] == [
        "cstates.disable names C9, which no managed CPU has (driver intel_idle; states: POLL C1 C1E C6); "
        "use one of those names",
        "cstates.disable names POLL, state0 of driver intel_idle: a profile never disables state0 "
        "(our policy, although the kernel would accept it); remove it",
        "cstates.enable names C7, which no managed CPU has (driver intel_idle; states: POLL C1 C1E C6); "
        "use one of those names",
    ]
    # the listing is by state index, then name, over the managed CPUs only
    mixed = idle(cpus=(0,))
    mixed["cpus"][1] = states(1, table=(("WFI", 1), ("B", 5), ("A", 5)))
    mixed["cpus"][1][2]["index"] = 1
    assert plan({"enable": ["X"]}, mixed, online=[1])["problems"] == [
        "cstates.enable names X, which no managed CPU has (driver intel_idle; states: WFI A B); use one of those names"
    ]


def test_a_state_whose_name_cannot_be_read_is_left_to_the_latency_limit():
    """A state without a readable ``name`` cannot be named in a profile: it is not in the listing,
    the names of the others still work, and only the latency limit reaches it."""
    info = idle(cpus=(0,))
    info["cpus"][0][2]["name"] = None
    assert plan({"enable": ["C1E"]}, info, online=[0])["problems"] == [
        "cstates.enable names C1E, which no managed CPU has (driver intel_idle; states: POLL C1 C6); "
        "use one of those names"
    ]
    assert plan({"disable": ["C6"]}, info, online=[0])["writes"] == [write(0, 3, "C6", "0", "1")]
    unnamed = {**write(0, 2, "C1E", "0", "1"), "label": "cpu0 state2 (name unreadable) disable"}
    assert plan({"max_latency_us": 5}, info, online=[0])["writes"] == [
        write(0, 1, "C1", "0", "0"),
        unnamed,
        write(0, 3, "C6", "0", "1"),
    ]


def test_an_online_cpu_without_cpuidle_is_refused():
    result = plan({"max_latency_us": 5}, idle(cpus=(0,), missing=(3, 4)), online=[0, 3, 4])
    assert result["writes"] == []
    assert result["problems"] == [
        "CPU 3-4 is online but has no cpuidle directory (/sys/devices/system/cpu/cpu3/cpuidle is missing); "
        "remove it from cpus"
    ]


def test_no_cpu_or_no_cpuidle_changes_nothing():
    assert plan({"max_latency_us": 5}, online=[]) == {
        "control": "cstates",
        "available": True,
        "messages": [],
        "writes": [],
        "problems": [],
    }
    off = plan({"max_latency_us": 5}, idle(driver=None, available=False))
    assert off["messages"] == [
        "C-states: no cpuidle states on this machine (current_driver: missing); cstates skipped, nothing changed"
    ]
    assert off["writes"] == [] and off["problems"] == [] and off["available"] is False
    none = plan({"max_latency_us": 5}, idle(driver="none", available=False))["messages"]
    assert none == [
        "C-states: no cpuidle states on this machine (current_driver: none); cstates skipped, nothing changed"
    ]
    refused = plan({"max_latency_us": -1}, idle(available=False))
    assert refused["messages"] == [] and len(refused["problems"]) == 1


NAMES = (
    "is not a list of state names: give names as the kernel shows them (cpuN/cpuidle/stateK/name), "
    "e.g. [C6] or [C1E, C6]"
)
LATENCY = (
    "is not a latency: give a whole number of microseconds >= 0 "
    "(states with a larger exit latency are disabled; state0 never is)"
)


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        ("C6", ["cstates='C6' is not a mapping: give disable, enable and/or max_latency_us"]),
        (
            {"max_latency_us": 5, "limit": 1, "disabel": []},
            ["cstates has unknown key(s) disabel, limit; allowed: disable, enable, max_latency_us"],
        ),
        (
            {"disable": [], "enable": None},
            ["cstates is empty: give disable (state names), enable (state names) and/or max_latency_us"],
        ),
        ({"disable": "C6"}, [f"cstates.disable='C6' {NAMES}"]),
        ({"enable": ["C6", " "]}, [f"cstates.enable=['C6', ' '] {NAMES}"]),
        ({"enable": [6]}, [f"cstates.enable=[6] {NAMES}"]),
        (
            {"disable": ["C6", "C1", "C1E"], "enable": ["C1E", " C6"]},
            ["cstates: C1E, C6 is in both disable and enable; name each state once"],
        ),
        ({"max_latency_us": -1}, [f"cstates.max_latency_us=-1 {LATENCY}"]),
        ({"max_latency_us": 1.5}, [f"cstates.max_latency_us=1.5 {LATENCY}"]),
        ({"max_latency_us": False}, [f"cstates.max_latency_us=False {LATENCY}"]),
    ],
)
def test_check_spec_refuses_with_the_exact_message(spec, problems):
    assert cs.check_spec(spec)[3] == problems


def test_check_spec_fields():
    assert cs.check_spec({"disable": (" C6",), "enable": ["C1"], "max_latency_us": 0}) == (["C6"], ["C1"], 0, [])
    assert cs.check_spec({"max_latency_us": 20}) == ([], [], 20, [])
    assert cs.check_spec({"disable": "C6", "max_latency_us": -5})[:3] == ([], [], None)


def test_read_cpuidle_of_the_kernel_model(make_node):
    node = make_node("intel_idle_uncore", cpus=2)
    state3 = node.sys / CPU / "cpu1/cpuidle/state3"
    (state3 / "disable").write_text("1\n")
    (node.sys / CPU / "cpu1/cpuidle/state2/latency").write_text("n/a\n")
    (node.sys / CPU / "cpu1/cpuidle/driver").mkdir(exist_ok=True)  # not a state directory
    info = cs.read_cpuidle(SysfsAccessor(str(node.sys)), [1, 0, 7])
    assert info["driver"] == "intel_idle" and info["governor"] == "menu" and info["available"] is True
    assert info["missing"] == [7] and list(info["cpus"]) == [1, 0]
    assert [s["state"] for s in info["cpus"][1]] == ["state0", "state1", "state2", "state3"]
    assert info["cpus"][1][2] == {
        "index": 2,
        "state": "state2",
        "path": f"{CPU}/cpu1/cpuidle/state2",
        "name": "C1E",
        "desc": "MWAIT 0x01",
        "latency_us": None,
        "residency_us": 20,
        "disable": "0",
    }
    assert info["cpus"][1][3]["disable"] == "1" and info["cpus"][1][3]["latency_us"] == 133
    facts = cs.cpuidle_facts(info)
    assert facts["cpus_without_cpuidle"] == "7" and facts["messages"] == []
    assert facts["states"][3] == {
        "state": "state3",
        "name": "C6",
        "desc": "MWAIT 0x20",
        "latency_us": 133,
        "residency_us": 600,
        "disabled_cpus": "1",
    }


def test_read_cpuidle_governor_fallback_and_no_driver(make_node):
    node = make_node("intel_idle_uncore", cpus=2)
    (node.sys / CPU / "cpuidle/current_governor").unlink()
    (node.sys / CPU / "cpuidle/current_governor_ro").write_text("ladder\n")
    (node.sys / CPU / "cpuidle/current_driver").write_text("none\n")
    info = cs.read_cpuidle(SysfsAccessor(str(node.sys)), [0])
    assert info["governor"] == "ladder" and info["driver"] == "none" and info["available"] is False
    assert cs.cpuidle_facts(info)["messages"] == [
        "no cpuidle states (current_driver: none): C-state settings cannot be applied"
    ]
    assert cs.read_cpuidle(SysfsAccessor(str(node.sys)), [5])["available"] is False  # no CPU has states


def test_cpuidle_facts_lists_states_in_index_order_and_where_each_is_disabled():
    info = idle(cpus=(0, 1, 2, 3), cpu1=("C6",), cpu2=("C6", "C1"), cpu3=("C6",))
    for cpu in (0, 1, 2, 3):  # as many states as state10 and beyond
        info["cpus"][cpu] += [dict(info["cpus"][cpu][1], index=10, state="state10", name="C10", disable="0")]
    info["cpus"][0] = list(reversed(info["cpus"][0]))
    facts = cs.cpuidle_facts(dict(info, missing=[5, 6, 8]))
    assert [(s["state"], s["name"], s["disabled_cpus"]) for s in facts["states"]] == [
        ("state0", "POLL", ""),
        ("state1", "C1", "2"),
        ("state2", "C1E", ""),
        ("state3", "C6", "1-3"),
        ("state10", "C10", ""),
    ]
    assert facts["cpus_without_cpuidle"] == "5-6,8"
    assert facts["driver"] == "intel_idle" and facts["governor"] == "menu" and facts["available"] is True
    assert facts["states"][3]["latency_us"] == 133 and facts["states"][3]["residency_us"] == 266
    assert facts["states"][3]["desc"] == "desc C6"
    missing = cs.cpuidle_facts(dict(idle(cpus=()), driver=None, available=False))
    assert missing["messages"] == ["no cpuidle states (current_driver: missing): C-state settings cannot be applied"]
    assert missing["states"] == [] and missing["cpus_without_cpuidle"] == ""
