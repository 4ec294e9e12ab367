"""The cpu_power role's plan (filter poweraware.k8s.cpu_power_plan) and the argument
validation of its node-level controls.

The cpu_power_plan filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import pathlib

import ansible_collections.poweraware.k8s.plugins.filter.cpu_power_plan as f_cpu
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.filter.cpu_power_plan import cpu_power_plan
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_power_plan import (
    expand_cpus,
    plan_node,
    profile_frequency_mhz,
    reserved_choice,
)
from poweraware_testing import raises, role_defaults

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "cpu_power"
DEFAULTS = role_defaults(ROLE / "defaults" / "main.yml")  # as a site that sets nothing sees them
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]

# Two groups of CPUs with their own cpuinfo limits (a hybrid part), CPU 7 offline.
INFO = {
    "cpufreq_available": True,
    "epp_supported": True,
    "present": "0-7",
    "offline": "7",
    "available_governors": ["performance", "powersave"],
    "limit_groups": [
        {"cpus": [0, 1, 2, 3], "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 5000},
        {"cpus": [4, 5, 6, 7], "cpuinfo_min_mhz": 800, "cpuinfo_max_mhz": 3800},
    ],
    "messages": [],
}


KUBELET_CONFIG = {"path": "/var/lib/kubelet/config.yaml", "exists": True, "content": "reservedSystemCPUs: '0'\n"}


def plan(**kw):
    args = {
        "pools": [],
        "profiles": DEFAULTS["cpu_power_profiles"],
        "reserved": "0",
        "kubelet_config": KUBELET_CONFIG,
        "kubelet_config_path": "/var/lib/kubelet/config.yaml",
        "host": "w1",
    }
    args.update(kw)
    return cpu_power_plan(INFO, **args)


def test_expand_keeps_order_and_names_bad_parts():
    assert expand_cpus("3,1-2, ,1") == ([3, 1, 2], [])
    assert expand_cpus([5, "0-1", None]) == ([5, 0, 1], [])
    assert expand_cpus("x-3,1,7-4,9000") == ([1], ["x-3", "7-4", "9000"])


@pytest.mark.parametrize(("pct", "want"), [(0, 800), (-5, 800), (100, 5000), (150, 5000), (85, 4300), (1, 800)])
def test_profile_frequency(pct, want):
    assert profile_frequency_mhz(800, 5000, pct) == want


def test_pool_per_limit_group_with_cstates_and_slowdowns():
    profiles = dict(DEFAULTS["cpu_power_profiles"])
    profiles["lowlat"] = {"epp": "performance", "max_pct": 100, "min_pct": 100, "cstates": {"max_latency_us": 20}}
    result = plan(pools=[{"name": "dpdk", "cpus": "2-5", "profile": "lowlat"}], profiles=profiles,
                  shared_profile="shared")  # fmt: skip
    assert result["errors"] == []
    assert result["reserved"] == [0] and result["shared"] == [1, 6, 7]
    pools = [(a["pool"], a["cpus"], a["min_mhz"], a["max_mhz"], a.get("cstates")) for a in result["assignments"]]
    assert pools == [
        ("dpdk", [2, 3], 5000, 5000, {"max_latency_us": 20}),
        ("dpdk", [4, 5], 3800, 3800, {"max_latency_us": 20}),
        ("shared", [1], 800, 2480 // 100 * 100, None),
        ("shared", [6, 7], 800, 2000, None),
    ]
    assert result["slowdowns"] == [
        "pool shared (profile shared): CPUs 1 capped at 2400 MHz of 5000 MHz, EPP power",
        "pool shared (profile shared): CPUs 6,7 capped at 2000 MHz of 3800 MHz, EPP power",
    ]
    assert "pool shared: CPUs 7 are offline and skipped" in result["notes"]
    assert result["node"] is None


def test_defaults_change_nothing_beyond_pools():
    result = plan()
    assert result == {
        "errors": [],
        "notes": [],
        "slowdowns": [],
        "assignments": [],
        "reserved": [0],
        "shared": [1, 2, 3, 4, 5, 6, 7],
        "node": None,
        "apply": [],
        # no pool, no shared profile: every CPU's earlier settings (if any are recorded) are restored
        "unmanaged": [0, 1, 2, 3, 4, 5, 6, 7],
    }


def test_cpus_no_pool_manages_now_are_restored_first():
    """A pool removed from the inventory (or the shared profile switched off) leaves its CPUs to be
    restored from the journal, not applied for good; with a shared profile only the reserved remain."""
    pools = [{"name": "a", "cpus": "2-3", "profile": "performance"}]
    assert plan(pools=pools)["unmanaged"] == [0, 1, 4, 5, 6, 7]
    assert plan(pools=pools, shared_profile="shared")["unmanaged"] == [0]
    assert plan(pools=pools, reserved="99")["unmanaged"] == []  # errors: nothing restored either


def test_node_controls_become_one_request_for_all_cpus():
    result = plan(uncore={"min_pct": 50, "max_pct": 100}, power_cap={"watts": 150.0, "constraint": "long_term"})
    assert result["node"] == {
        "pool": "node",
        "profile": None,
        "cpus": "all",
        "uncore": {"min_pct": 50, "max_pct": 100},
        "power_cap": {"watts": 150.0, "constraint": "long_term"},
    }
    assert plan(uncore={"max_pct": 80}, reserved="99")["node"] is None  # errors: nothing planned


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"reserved": "0-1"},
         "cpu_power_reserved_cpus (0,1) does not match the kubelet reserved CPUs (0, from "
         "/var/lib/kubelet/config.yaml)"),
        ({"reserved": "0-1", "kubelet_reserved": "0"},
         "cpu_power_reserved_cpus (0,1) does not match the kubelet reserved CPUs (0, from "
         "cpu_power_kubelet_reserved_cpus)"),
        ({"reserved": "zz,0"}, "cpu_power_reserved_cpus zz,0 is not a CPU list (bad part: zz)"),
        ({"pools": [{"name": "a", "cpus": "7-4", "profile": "performance"}]},
         "pool a: cpus 7-4 is not a CPU list (bad part: 7-4)"),
        ({"pools": [{"name": "a", "cpus": "0-1", "profile": "performance"}]},
         "pool a overlaps the reserved CPUs on 0; exclusive pools must not use reserved CPUs"),
        ({"pools": [{"name": "a", "cpus": "1-2", "profile": "performance"},
                    {"name": "b", "cpus": "2", "profile": "performance"}]},
         "pools a and b overlap on CPU 2; each CPU belongs to one pool"),
        ({"pools": [{"name": "a", "cpus": "2", "profile": "performance"},
                    {"name": "b", "cpus": "3", "profile": "performance"},
                    {"name": "a", "cpus": "4", "profile": "shared"}]},
         "pool a is defined twice (cpu_power_pools entries 1 and 3); pool names must be unique: rename one, or "
         "merge their CPUs into one pool"),
        ({"pools": [{"name": "a", "cpus": "1", "profile": "fast"}]},
         "pool a: profile fast is not defined (cpu_power_profiles has: balance-performance, balance-power, "
         "performance, shared)"),
        ({"pools": [{"name": "a", "cpus": "8", "profile": "shared"}]},
         "pool a names CPUs 8 that are not present on w1 (present: 0-7)"),
        ({"shared_profile": "nope"}, "cpu_power_shared_profile nope is not defined in cpu_power_profiles"),
        ({"profiles": {"p": {"max_pct": 150}}}, "profile p: max_pct 150 is not a percentage within 0..100"),
        ({"profiles": {"p": {"min_pct": 90, "max_pct": 20}}}, "profile p: min_pct 90 is above max_pct 20"),
        ({"profiles": {"p": {"epp": "power", "cstate": {"disable": ["C6"]}}}},
         "profile p: unknown key(s) cstate; allowed: epp, governor, min_pct, max_pct, cstates"),
        ({"profiles": {"p": {"cstates": {"disabel": ["C6"]}}}},
         "profile p: cstates: unknown key(s) disabel; allowed: disable, enable, max_latency_us"),
        ({"profiles": {"p": {"cstates": {"disable": "C6"}}}},
         "profile p: cstates.disable 'C6' is not a list of state names, e.g. [C6] or [C1E, C6]"),
        ({"profiles": {"p": {"cstates": {"max_latency_us": -1}}}},
         "profile p: cstates.max_latency_us -1 is not a whole number of microseconds >= 0"),
    ],
)  # fmt: skip
def test_bad_settings_are_errors_and_nothing_is_planned(kw, message):
    result = plan(**kw)
    assert any(e.startswith(message) for e in result["errors"]), result["errors"]
    assert result["assignments"] == [] and result["node"] is None


def test_no_cpufreq_plans_nothing():
    info = dict(INFO, cpufreq_available=False, messages=["no cpufreq directory"])
    result = cpu_power_plan(info, pools=[], profiles={}, reserved="", host="w1")
    assert result["notes"][-1] == "no cpufreq on w1: no cpufreq directory - nothing applied"
    assert result["assignments"] == []


def _validate(**params):
    args = {k: DEFAULTS[k] for k in DEFAULTS}
    args.update(params)
    return ArgumentSpecValidator(SPEC).validate(args)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"cpu_power_uncore": {"max_pct": 150}}, "value of max_pct must be one of: 0, 1, 2"),
        ({"cpu_power_uncore": {"min_pct": -1}}, "value of min_pct must be one of"),
        ({"cpu_power_uncore": {"max_pct": 80, "maxpct": 90}}, "maxpct"),
        ({"cpu_power_uncore": {"min_pct": 10, "min_khz": 800000}}, "mutually exclusive: min_pct|min_khz"),
        ({"cpu_power_power_cap": {"time_window_us": 1000}}, "missing required arguments: watts"),
        ({"cpu_power_power_cap": {"watts": 100, "constraint": "peak"}}, "value of constraint must be one of"),
        ({"cpu_power_power_cap": {"watts": 100, "window": 5}}, "window"),
    ],
)
def test_node_controls_are_refused_by_argument_validation(params, fragment):
    result = _validate(**params)
    assert result.error_messages, "accepted"
    assert any(fragment in m for m in result.error_messages), result.error_messages


def test_defaults_pass_argument_validation():
    assert _validate().error_messages == []
    ok = _validate(cpu_power_uncore={"min_pct": 50, "max_pct": 100}, cpu_power_power_cap={"watts": 120})
    assert ok.error_messages == []
    assert ok.validated_parameters["cpu_power_power_cap"]["constraint"] == "long_term"


# --- the reserved CPUs: chosen by the plan from the raw settings ------------------------------------
# roles/cpu_power/tasks/present.yml before issue 46 chose them in Jinja; its expressions are the oracle,
# rendered with Ansible's own Templar over the registered cpu_power_info result.
ORACLE_DOC = (
    "{{ (_cpu_power_gathered.kubelet_config.content or '{}') | from_yaml"
    " if _cpu_power_gathered.kubelet_config is defined else {} }}"
)
ORACLE = {
    "kubelet_reserved": "{{ cpu_power_kubelet_reserved_cpus if cpu_power_kubelet_reserved_cpus is not none"
    " else (_cpu_power_kubelet_doc.reservedSystemCPUs | default(none)) }}",
    "kubelet_source": "{{ 'cpu_power_kubelet_reserved_cpus' if cpu_power_kubelet_reserved_cpus is not none"
    " else cpu_power_kubelet_config }}",
    "reserved": "{{ cpu_power_reserved_cpus if cpu_power_reserved_cpus is not none"
    " else (_cpu_power_kubelet_reserved if _cpu_power_kubelet_reserved is not none else '') }}",
    "reserved_given": "{{ cpu_power_reserved_cpus is not none }}",
}
KUBELET_PATH = "/var/lib/kubelet/config.yaml"
# what cpu_power_info returns for the kubelet's file (None: not asked, so no kubelet_config at all)
KUBELET_FILES = {
    "not read": None,
    "missing": {"path": KUBELET_PATH, "exists": False, "content": None},
    "empty": {"path": KUBELET_PATH, "exists": True, "content": ""},
    "no reservedSystemCPUs": {"path": KUBELET_PATH, "exists": True, "content": "kind: KubeletConfiguration\n"},
    "range": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: 0-1\n"},
    "quoted": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: '0'\n"},
    "number": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: 3\n"},
    "list": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: [0, 1]\n"},
    "null": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: null\n"},
    "empty string": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs: ''\n"},
    "null document": {"path": KUBELET_PATH, "exists": True, "content": "null\n"},
    "list document": {"path": KUBELET_PATH, "exists": True, "content": "- reservedSystemCPUs\n"},
    "text document": {"path": KUBELET_PATH, "exists": True, "content": "reservedSystemCPUs\n"},
}
# inventory values and -e strings (-e cpu_power_reserved_cpus= gives "", which is set: no CPUs)
GIVEN = [None, "", "0", "0-1", "1,0", [0, 1], 2, "zz"]
KUBELET_GIVEN = [None, "", "0", "0-1", 1]


def oracle(given, kubelet_given, kubelet_file, path=KUBELET_PATH):
    gathered = {"changed": False, "cpu_power": INFO}
    if kubelet_file is not None:
        gathered["kubelet_config"] = kubelet_file
    variables = {
        "cpu_power_reserved_cpus": given,
        "cpu_power_kubelet_reserved_cpus": kubelet_given,
        "cpu_power_kubelet_config": path,
        "_cpu_power_gathered": gathered,
        "_cpu_power_kubelet_doc": trust_as_template(ORACLE_DOC),
        "_cpu_power_kubelet_reserved": trust_as_template(ORACLE["kubelet_reserved"]),
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    return {key: templar.template(trust_as_template(text)) for key, text in ORACLE.items()}


@pytest.mark.parametrize("kubelet_given", KUBELET_GIVEN)
@pytest.mark.parametrize("given", GIVEN)
def test_the_plan_chooses_the_reserved_cpus_as_the_role_did_in_jinja(given, kubelet_given):
    pools = [{"name": "a", "cpus": "4-5", "profile": "performance"}]
    for name, kubelet_file in KUBELET_FILES.items():
        chosen = oracle(given, kubelet_given, kubelet_file)
        got = cpu_power_plan(INFO, pools=pools, profiles=DEFAULTS["cpu_power_profiles"], reserved=given,
                             kubelet_reserved=kubelet_given, kubelet_config=kubelet_file,
                             kubelet_config_path=KUBELET_PATH, host="w1")  # fmt: skip
        want = plan_node(INFO, pools, DEFAULTS["cpu_power_profiles"], host="w1", **chosen)
        assert got == want, (name, chosen)


@pytest.mark.parametrize(
    ("given", "kubelet_given", "document", "want"),
    [
        # given: used as given, cross-checked against the kubelet's
        ("0-1", None, {"reservedSystemCPUs": "0"}, ("0-1", True, "0", KUBELET_PATH)),
        ("", None, {"reservedSystemCPUs": "0"}, ("", True, "0", KUBELET_PATH)),
        ("0-1", "1", {"reservedSystemCPUs": "0"}, ("0-1", True, "1", "cpu_power_kubelet_reserved_cpus")),
        ("0-1", None, None, ("0-1", True, None, KUBELET_PATH)),
        # not given: the kubelet's, given or from its configuration
        (None, "2-3", {"reservedSystemCPUs": "0"}, ("2-3", False, "2-3", "cpu_power_kubelet_reserved_cpus")),
        (None, "", {"reservedSystemCPUs": "0"}, ("", False, "", "cpu_power_kubelet_reserved_cpus")),
        (None, None, {"reservedSystemCPUs": "0-1"}, ("0-1", False, "0-1", KUBELET_PATH)),
        (None, None, {"reservedSystemCPUs": ""}, ("", False, "", KUBELET_PATH)),
        # not given and the kubelet's unknown: none, not cross-checked
        (None, None, {"kind": "KubeletConfiguration"}, ("", False, None, KUBELET_PATH)),
        (None, None, {"reservedSystemCPUs": None}, ("", False, None, KUBELET_PATH)),
        (None, None, None, ("", False, None, KUBELET_PATH)),
        (None, None, ["reservedSystemCPUs"], ("", False, None, KUBELET_PATH)),
        (None, None, "reservedSystemCPUs", ("", False, None, KUBELET_PATH)),
    ],
)
def test_reserved_choice_each_branch(given, kubelet_given, document, want):
    got = reserved_choice(given, kubelet_given, document, KUBELET_PATH)
    assert (got["reserved"], got["reserved_given"], got["kubelet_reserved"], got["kubelet_source"]) == want


def test_the_role_passes_the_raw_settings_and_chooses_nothing_itself():
    tasks = (ROLE / "tasks" / "present.yml").read_text()
    for argument in (
        "reserved=cpu_power_reserved_cpus",
        "kubelet_reserved=cpu_power_kubelet_reserved_cpus",
        "kubelet_config=_cpu_power_gathered.kubelet_config | default(none)",
        "kubelet_config_path=cpu_power_kubelet_config",
    ):
        assert argument in tasks
    assert "reserved_given" not in tasks and "from_yaml" not in tasks


def test_cpu_power_plan_defaults(stub):
    choice = stub(f_cpu, "reserved_choice", result={"reserved": "r", "reserved_given": "g", "kubelet_reserved": "k",
                                                    "kubelet_source": "s"})  # fmt: skip
    plan = stub(f_cpu, "plan_node")
    info = {"cpus": []}
    assert f_cpu.cpu_power_plan(info) == "result"
    assert choice.calls == [((None, None, {}, ""), {})]
    assert plan.calls == [
        (
            (info, None, None),
            {
                "reserved": "r",
                "reserved_given": "g",
                "kubelet_reserved": "k",
                "kubelet_source": "s",
                "shared_profile": None,
                "fallback_governor": None,
                "host": "",
                "uncore": None,
                "power_cap": None,
            },
        )
    ]


def test_cpu_power_plan_passes_every_argument_on(stub):
    chosen = {"reserved": "0-1", "reserved_given": True, "kubelet_reserved": "0", "kubelet_source": "kubelet.yaml"}
    choice = stub(f_cpu, "reserved_choice", result=chosen)
    plan = stub(f_cpu, "plan_node")
    info = {"cpus": [0]}
    args = {
        "shared_profile": "shared",
        "fallback_governor": "powersave",
        "host": "node-1",
        "uncore": {"min": 1},
        "power_cap": {"watts": 200},
    }
    kubelet_config = {"path": "/k.yaml", "exists": True, "content": "reservedSystemCPUs: 0-3\n"}
    result = f_cpu.cpu_power_plan(
        info,
        ["pool"],
        ["profile"],
        reserved="0-1",
        kubelet_reserved="2",
        kubelet_config=kubelet_config,
        kubelet_config_path="kubelet.yaml",
        **args,
    )
    assert result == "result"
    assert choice.calls == [(("0-1", "2", {"reservedSystemCPUs": "0-3"}, "kubelet.yaml"), {})]
    assert plan.calls == [((info, ["pool"], ["profile"]), {**chosen, **args})]


@pytest.mark.parametrize("content", [None, ""])
def test_cpu_power_plan_reads_no_kubelet_file_as_an_empty_configuration(stub, content):
    choice = stub(f_cpu, "reserved_choice", result={"reserved": "", "reserved_given": False, "kubelet_reserved": None,
                                                    "kubelet_source": "k"})  # fmt: skip
    stub(f_cpu, "plan_node")
    f_cpu.cpu_power_plan({}, kubelet_config={"path": "/k", "exists": content is not None, "content": content})
    assert choice.calls == [((None, None, {}, ""), {})]


def test_cpu_power_plan_refuses_a_kubelet_file_that_is_not_yaml():
    with pytest.raises(AnsibleFilterError) as info:
        f_cpu.cpu_power_plan({}, kubelet_config={"content": "a: [1"}, kubelet_config_path="/k.yaml")
    message = str(info.value)
    assert message.startswith("cpu_power_plan: the kubelet configuration /k.yaml is not YAML ("), message
    assert message.endswith(
        "); point cpu_power_kubelet_config at the kubelet's configuration file, or give cpu_power_kubelet_reserved_cpus"
    ), message


@pytest.mark.parametrize(("bad", "kind"), [("text", "str"), ([], "list")])
def test_cpu_power_plan_wants_the_kubelet_config_result(bad, kind):
    raises(
        lambda: f_cpu.cpu_power_plan({}, kubelet_config=bad),
        f"cpu_power_plan: expected the kubelet_config result of cpu_power_info, got {kind}",
    )


@pytest.mark.parametrize(("bad", "kind"), [(None, "NoneType"), ([], "list"), ("facts", "str")])
def test_cpu_power_plan_wants_the_fact(bad, kind):
    raises(
        lambda: f_cpu.cpu_power_plan(bad),
        f"cpu_power_plan: expected the cpu_power fact of cpu_power_info, got {kind}",
    )
