"""The pod_power role's cluster side (module_utils/cluster/pod_power_objects.py): what it refuses before
anything is applied (another power manager, a host whose CPUs cpu_power owns, a malformed profile or
TimeOfDay), which hosts get an agent, the objects and their order, least-privilege RBAC, the CRDs' and the
admission policy's shape, and what the removal takes away, in which order.

The CRDs' validation rules and the admission policy's CEL were checked once, outside this suite, with the API
server's own libraries (k8s.io/apiextensions-apiserver's CRD validation with its cost estimate, k8s.io/apiserver's
CEL environment with the Kubernetes quantity library) on the cases below; these tests keep their text and shape,
and tests/integration/test_pod_power.py runs them on a real API server.
"""

from __future__ import annotations

import base64
import copy

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import pod_power_objects as pp

PROFILES = {
    "performance": {"min": "80%", "max": "100%", "epp": "performance"},
    "balance-performance": {"min": "50%", "max": "80%", "epp": "balance_performance"},
    "balance-power": {"min": "0%", "max": "60%", "epp": "balance_power"},
}


def host(name="w3", **extra):
    return {"host": name, "node": name, "labels": {}, "cpu_power_pools": [], "cpu_power_shared_profile": None, **extra}


def node(name, **labels):
    return {"metadata": {"name": name, "labels": labels}}


def crd(name):
    return {"metadata": {"name": name}}


def kinds(objects):
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_one_node_gets_its_identity_permissions_power_node_profiles_and_the_policy():
    plan = pp.plan([host()], {"nodes": [node("w3")]}, PROFILES, [], "poweraware-pod-power")
    assert plan["errors"] == [] and plan["notes"] == [] and plan["selected"] == {"w3": "w3"}
    assert kinds(plan["crds"]) == [
        ("CustomResourceDefinition", "powerprofiles.power.poweraware.io"),
        ("CustomResourceDefinition", "powernodes.power.poweraware.io"),
        ("CustomResourceDefinition", "timeofdays.power.poweraware.io"),
    ]
    assert kinds(plan["objects"]) == [
        ("ClusterRole", "poweraware:pod-power-agent"),
        ("ServiceAccount", "pod-power-w3"),
        ("Secret", "pod-power-w3-token"),
        ("ClusterRole", "poweraware:pod-power-agent:w3"),
        ("ClusterRoleBinding", "poweraware:pod-power-agent:w3"),
        ("ClusterRoleBinding", "poweraware:pod-power-agent"),
        ("PowerNode", "w3"),
        ("PowerProfile", "balance-performance"),
        ("PowerProfile", "balance-power"),
        ("PowerProfile", "performance"),
        ("ValidatingAdmissionPolicy", "poweraware-pod-power"),
        ("ValidatingAdmissionPolicyBinding", "poweraware-pod-power"),
    ]
    for obj in plan["crds"] + plan["objects"]:
        assert obj["metadata"]["labels"] == pp.LABELS, obj["metadata"]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in plan["objects"]}
    secret = by_name[("Secret", "pod-power-w3-token")]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["namespace"] == "poweraware-pod-power"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "pod-power-w3"}
    assert by_name[("PowerNode", "w3")]["spec"] == {"nodeName": "w3"}
    assert by_name[("PowerNode", "w3")]["apiVersion"] == "power.poweraware.io/v1"
    assert by_name[("ClusterRoleBinding", "poweraware:pod-power-agent")]["subjects"] == [
        {"kind": "ServiceAccount", "name": "pod-power-w3", "namespace": "poweraware-pod-power"}
    ]
    assert plan["secrets"] == {"w3": "pod-power-w3-token"}


def test_every_agent_may_read_pods_and_profiles_and_write_events_only():
    plan = pp.plan([host("w1"), host("w2")], {"nodes": [node("w1"), node("w2")]}, {}, [], "ns")
    shared = next(o for o in plan["objects"] if o["metadata"]["name"] == "poweraware:pod-power-agent")
    assert shared["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [pp.GROUP], "resources": ["powerprofiles", "timeofdays"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]  # fmt: skip


def test_each_agent_may_touch_its_own_node_and_power_node_only():
    plan = pp.plan([host("w1"), host("w2")], {"nodes": [node("w1"), node("w2")]}, {}, [], "ns")
    role = next(o for o in plan["objects"] if o["metadata"]["name"] == "poweraware:pod-power-agent:w2")
    assert all(rule["resourceNames"] == ["w2"] for rule in role["rules"])
    verbs = {
        (rule["apiGroups"][0], resource): rule["verbs"] for rule in role["rules"] for resource in rule["resources"]
    }
    assert verbs == {
        ("", "nodes"): ["get"],
        ("", "nodes/status"): ["get", "patch"],
        ("power.poweraware.io", "powernodes"): ["get"],
        ("power.poweraware.io", "powernodes/status"): ["get", "patch", "update"],
    }
    binding = next(
        o for o in plan["objects"] if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith(":w2")
    )
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "pod-power-w2", "namespace": "ns"}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }


@pytest.mark.parametrize(
    ("crds_found", "manager", "named"),
    [
        (["powerprofiles.power.intel.com"], "Kubernetes Power Manager", "powerprofiles.power.intel.com"),
        (["powerconfigs.power.intel.com"], "Kubernetes Power Manager", "powerconfigs.power.intel.com"),
        (
            ["powerprofiles.power.cluster-power-manager.github.io"],
            "Cluster Power Manager",
            "powerprofiles.power.cluster-power-manager.github.io",
        ),
    ],
)
def test_another_power_manager_stops_everything_with_what_was_found_and_the_fix(crds_found, manager, named):
    found = {"nodes": [node("w3")], "foreign_a": [crd(n) for n in crds_found], "foreign_b": []}
    plan = pp.plan([host()], found, PROFILES, [], "ns")
    (error,) = plan["errors"]
    assert error.startswith(f"the {manager} is installed (CustomResourceDefinition {named} found)"), error
    assert "uninstall it first" in error.lower() and "poweraware_enable_pod_power false" in error
    assert plan["objects"] == []


def test_a_host_with_cpu_power_pools_or_a_shared_profile_is_refused():
    hosts = [host("w1", cpu_power_pools=[{"name": "dpdk", "cpus": "4-7", "profile": "performance"}]),
             host("w2", cpu_power_shared_profile="shared"), host("w3", cpu_power_shared_profile="")]  # fmt: skip
    plan = pp.plan(hosts, {"nodes": [node("w1"), node("w2"), node("w3")]}, PROFILES, [], "ns")
    assert len(plan["errors"]) == 2 and plan["objects"] == []
    assert plan["errors"][0].startswith("host w1: cpu_power_pools (dpdk) set for this host")
    assert plan["errors"][1].startswith("host w2: cpu_power_shared_profile (shared) set for this host")
    assert "one owner per CPU" in plan["errors"][0] and "cpu_power_pools: []" in plan["errors"][0]


def test_a_host_whose_node_checks_failed_or_did_not_run_is_refused_unless_skipped():
    hosts = [host("w1", checks={"errors": ["the kubelet runs CPU manager policy 'none'"]}), host("w2", checks=None),
             host("w3", checks=None, labels={"power": "yes"}), host("w4", checks={"errors": []})]  # fmt: skip
    plan = pp.plan(hosts, {"nodes": [node(n) for n in ("w1", "w2", "w3", "w4")]}, {}, [], "ns")
    assert plan["errors"] == [
        "host w1: the kubelet runs CPU manager policy 'none'",
        "host w2: its node checks did not run in this play (unreachable, failed or left out by --limit): the kubelet "
        "and CPUs there are not known; run again with the host",
    ]
    assert plan["notes"][0].startswith("host w3 skipped: Node w3 lacks the labels pod_power_node_labels asks for")


def test_labels_select_the_nodes_and_the_others_are_skipped_with_the_command():
    hosts = [host("w1", labels={"power": "yes"}), host("w2", labels={"power": "yes"})]
    plan = pp.plan(hosts, {"nodes": [node("w1", power="yes"), node("w2", power="no")]}, {}, [], "ns")
    assert plan["errors"] == [] and plan["selected"] == {"w1": "w1"}
    assert plan["notes"] == [
        "host w2 skipped: Node w2 lacks the labels pod_power_node_labels asks for (power=yes); nothing of pod power is "
        "set up there (kubectl label node w2 power=yes to add it)"
    ]
    assert ("PowerNode", "w2") not in kinds(plan["objects"])


def test_node_names_and_their_nodes_are_checked():
    hosts = [host("w1", node="W1"), host("w2"), host("w3", node="w2"), host("w4", labels={"bad key!": "x"})]
    plan = pp.plan(hosts, {"nodes": [node("w2")]}, {}, [], "ns")
    assert plan["errors"][0] == "host w1: pod_power_node_name 'W1' is not a Kubernetes node name"
    assert plan["errors"][1] == "hosts w2 and w3 both name node w2: set pod_power_node_name apart"
    assert plan["errors"][2].startswith("host w4: pod_power_node_labels key 'bad key!' is not a label key")
    plan = pp.plan([host("w9")], {"nodes": []}, {}, [], "ns")
    assert plan["errors"] == [
        "host w9: the cluster has no Node 'w9' (kubectl get nodes lists them); set pod_power_node_name for this host "
        "to its Node's name, or take the host out of pod_power_nodes"
    ]
    long_node = "n" * 250
    plan = pp.plan([host(long_node)], {"nodes": [node(long_node)]}, {}, [], "ns")
    assert "too long for its ServiceAccount" in plan["errors"][0]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"min": "90%", "max": "10%"}, "pod_power_profiles['p']: min '90%' is above max '10%'; swap them"),
        ({"min": 3000, "max": 2000}, "pod_power_profiles['p']: min 3000 is above max 2000; swap them"),
        ({"min": "150%"}, "pod_power_profiles['p'].min '150%' must be a frequency in MHz"),
        ({"max": 0}, "pod_power_profiles['p'].max 0 must be a frequency in MHz"),
        ({"max": True}, "pod_power_profiles['p'].max True must be a frequency in MHz"),
        (
            {"epp": "fast"},
            "pod_power_profiles['p'].epp 'fast' must be one of default, performance, balance_performance",
        ),
        ({"governor": "Power Save"}, "pod_power_profiles['p'].governor 'Power Save' must be a cpufreq governor name"),
        ({"shared": "yes"}, "pod_power_profiles['p'].shared 'yes' must be true or false"),
        ({"name": "q"}, "pod_power_profiles['p'].name 'q' must be 'p' (the Power Manager repeats the name there)"),
        ({"pstates": {"max": 1}}, "pod_power_profiles['p'] has pstates: a profile's keys are name, shared, min, max"),
        ({"cstates": {"names": {"C6": False}}}, "pod_power_profiles['p'].cstates has names: the keys are disable"),
        ({"cstates": {"disable": ["C6"], "enable": ["C6"]}}, "pod_power_profiles['p'].cstates: C6 both disabled"),
        ({"cstates": {"max_latency_us": -1}}, "pod_power_profiles['p'].cstates.max_latency_us -1 must be a whole"),
        ({"cpuCapacity": "0%"}, "pod_power_profiles['p'].cpuCapacity '0%' must be a number of CPUs"),
        ({"nodeSelector": {"labelSelector": {}}}, "pod_power_profiles['p'].nodeSelector has labelSelector: only"),
    ],
)
def test_a_malformed_profile_is_refused_naming_the_field_the_value_and_the_fix(spec, expected):
    problems = pp.profile_problems("p", spec)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "p", "shared": True, "max": "40%", "epp": "power"},
        {"min": 1000, "max": 1000, "epp": "power", "governor": "powersave"},  # the Power Manager's shared example
        {"min": "2000", "max": "3000"},  # digits from -e are MHz
        {"min": 1200, "max": "50%", "epp": "balance-power"},  # MHz against a percentage: the agent's check
        {"cstates": {"disable": ["C6"], "enable": ["C1"], "max_latency_us": 20}, "cpuCapacity": "75%"},
        {"nodeSelector": {"matchLabels": {"power": "yes"}}, "cpuCapacity": 4},
    ],
)
def test_power_manager_profiles_are_taken(spec):
    assert pp.profile_problems("p", spec) == []


def test_profile_names_are_resource_names():
    assert pp.profile_problems("n" * 64, {})[0].startswith("pod_power_profiles['" + "n" * 64 + "']: the name must be")
    assert pp.profile_problems("Perf", {}) != [] and pp.profile_problems("perf.v2", {}) == []


def test_frequencies_given_as_digits_are_applied_as_integers():
    plan = pp.plan([], {}, {"p": {"min": "2000", "max": "40%"}}, [], "ns")
    (profile,) = [o for o in plan["objects"] if o["kind"] == "PowerProfile"]
    assert profile["spec"] == {"min": 2000, "max": "40%"}


def test_time_of_day_is_checked_against_the_power_manager_keys_and_the_shared_profiles():
    profiles = {"shared": {"shared": True, "max": "40%"}, "performance": PROFILES["performance"]}
    schedule = [{"time": "08:00", "powerProfile": "shared"}, {"time": "20:00:00", "powerProfile": "night"}]
    good = {"name": "day", "timeZone": "Europe/Dublin", "schedule": schedule}
    assert pp.time_of_day_problems(good, 0, profiles) == []
    bad = {"name": "tod", "reservedCPUs": [0, 1], "schedule": [
        {"time": "25:00", "powerProfile": "performance", "pods": [], "cState": {}},
        {"time": "08:00", "powerProfile": "shared"}, {"time": "08:00", "powerProfile": "shared"}]}  # fmt: skip
    problems = pp.time_of_day_problems(bad, 2, profiles)
    assert problems == [
        "pod_power_time_of_day[2] (tod) has reservedCPUs: the keys are name, timeZone, nodeSelector, schedule "
        "(reservedCPUs are the kubelet's reservedSystemCPUs: the agent reads them, never touches them)",
        "pod_power_time_of_day[2] (tod).schedule[0].cState: not supported (C-states go in the shared profile's "
        "cstates (disable, enable, max_latency_us))",
        "pod_power_time_of_day[2] (tod).schedule[0].pods: not supported (moving pods between profiles is not done: "
        "give the pod the profile it needs)",
        "pod_power_time_of_day[2] (tod).schedule[0].time '25:00' must be a time of day 'HH:MM' (00:00-23:59), quoted",
        "pod_power_time_of_day[2] (tod).schedule[0].powerProfile 'performance' is not a shared profile: a TimeOfDay "
        "chooses the shared pool's profile; set shared: true on it or name another",
        "pod_power_time_of_day[2] (tod).schedule[2].time '08:00' is given twice; one profile per time",
    ]
    assert pp.time_of_day_problems({"name": "x", "schedule": []}, 0, {}) == [
        "pod_power_time_of_day[0] (x).schedule must be a non-empty list of {time: 'HH:MM', powerProfile: <name>}"
    ]


def test_time_of_day_objects_and_names_given_twice():
    tod = {"name": "day", "schedule": [{"time": "08:00", "powerProfile": "shared"}]}
    plan = pp.plan([], {}, {}, [tod, dict(tod)], "ns")
    assert plan["errors"] == ["pod_power_time_of_day names day twice; give each TimeOfDay its own name"]
    plan = pp.plan([], {}, {}, [tod], "ns")
    (obj,) = [o for o in plan["objects"] if o["kind"] == "TimeOfDay"]
    assert obj["spec"] == {"schedule": [{"time": "08:00", "powerProfile": "shared"}]} and "name" not in obj["spec"]


def test_every_problem_is_reported_at_once():
    found = {"nodes": [], "foreign": [crd("powerprofiles.power.intel.com")]}
    plan = pp.plan([host("w1")], found, {"p": {"epp": "x"}}, "not a list", "Bad_NS")
    assert len(plan["errors"]) == 5, plan["errors"]
    assert plan["objects"] == [] and plan["prune"] == []


def test_profiles_and_time_of_day_of_ours_the_variables_dropped_are_pruned_and_old_power_nodes_named():
    found = {
        "nodes": [node("w3")],
        "profiles": [crd("performance"), crd("turbo")],
        "time_of_day": [crd("old-schedule")],
        "power_nodes": [crd("w3"), crd("w9")],
    }
    plan = pp.plan([host()], found, PROFILES, [], "ns")
    assert plan["prune"] == [
        {"apiVersion": "power.poweraware.io/v1", "kind": "PowerProfile", "metadata": {"name": "turbo"}},
        {"apiVersion": "power.poweraware.io/v1", "kind": "TimeOfDay", "metadata": {"name": "old-schedule"}},
    ]
    (note,) = plan["notes"]
    assert note.startswith("PowerNode w9 is ours but node w9 is no longer a pod power node")


def test_the_crds_are_cluster_scoped_with_the_power_manager_fields_and_the_short_name():
    profile, power_node, time_of_day = pp.crds()
    for obj in (profile, power_node, time_of_day):
        assert obj["spec"]["group"] == "power.poweraware.io" and obj["spec"]["scope"] == "Cluster"
        (version,) = obj["spec"]["versions"]
        assert version["name"] == "v1" and version["served"] and version["storage"]
    assert profile["spec"]["names"]["shortNames"] == ["pprof"]
    spec = profile["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"name", "shared", "min", "max", "epp", "governor"} <= set(spec["properties"])
    assert spec["properties"]["epp"]["enum"] == list(pp.EPP_VALUES)
    assert {"balance-performance", "balance-power"} <= set(pp.EPP_VALUES)
    assert spec["properties"]["max"]["x-kubernetes-int-or-string"] is True
    assert spec["properties"]["max"]["pattern"] == "^(100|[1-9]?[0-9])%$"
    rules = [rule["rule"] for rule in spec["x-kubernetes-validations"]]
    assert any("type(self.min) != int" in rule and "self.min <= self.max" in rule for rule in rules)
    node_version = power_node["spec"]["versions"][0]
    assert node_version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in node_version["additionalPrinterColumns"]}
    assert columns["Shared"] == ".status.sharedPool.profile" and columns["Active"] == ".status.activeProfiles"
    schedule = time_of_day["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert schedule["schedule"]["items"]["required"] == ["time", "powerProfile"]


def test_every_string_a_crd_rule_compares_has_a_bounded_length():
    """The API server refuses a CRD whose rules' estimated cost is too high; a string without maxLength is
    estimated at the largest request (3 MiB), so a rule that compares one in a loop is bounded here."""
    time_of_day = pp.crds()[2]
    spec = time_of_day["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["schedule"]["maxItems"] <= 96
    assert spec["properties"]["schedule"]["items"]["properties"]["time"]["maxLength"] == 8


def test_the_admission_policy_denies_pod_creations_that_ask_for_a_power_profile():
    policy, binding = pp.admission_policy()
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    (condition,) = spec["matchConditions"]
    assert "startsWith('power.intel.com/')" in condition["expression"]
    assert binding["spec"] == {"policyName": "poweraware-pod-power", "validationActions": ["Deny"]}
    messages = [v["message"] for v in spec["validations"]]
    assert [m.split(":")[1].strip() for m in messages] == [
        "two power profiles in one pod",
        "profile count differs from CPU count",
        "the pod is not Guaranteed",
    ]
    assert "as many power.intel.com/<profile> as whole CPUs" in messages[1]
    for validation in spec["validations"]:
        assert validation["messageExpression"].startswith("'refused: ")
    expressions = " ".join(v["expression"] for v in spec["variables"])
    assert "quantity(" in expressions and ".compareTo(" in expressions and ".isInteger()" in expressions


def test_the_removal_goes_policy_first_then_objects_permissions_identities_and_crds_last():
    found = {
        "power_nodes": [crd("w3"), crd("gone")],
        "profiles": [crd("performance")],
        "time_of_day": [crd("day")],
        "all_profiles": [crd("performance"), crd("shared")],
        "all_time_of_day": [crd("day")],
    }
    removal = pp.removal([host()], found, "ns")
    listed = kinds(removal["objects"])
    assert listed[:2] == [("ValidatingAdmissionPolicyBinding", "poweraware-pod-power"),
                          ("ValidatingAdmissionPolicy", "poweraware-pod-power")]  # fmt: skip
    assert listed[2:6] == [
        ("PowerNode", "gone"),
        ("PowerNode", "w3"),
        ("PowerProfile", "performance"),
        ("TimeOfDay", "day"),
    ]
    assert ("ServiceAccount", "pod-power-gone") in listed and ("Secret", "pod-power-w3-token") in listed
    assert listed[-3:] == [
        ("CustomResourceDefinition", f"{p}.power.poweraware.io") for p in ("powerprofiles", "powernodes", "timeofdays")
    ]
    namespaced = [o for o in removal["objects"] if o["kind"] in ("Secret", "ServiceAccount")]
    assert all(o["metadata"]["namespace"] == "ns" for o in namespaced)
    assert removal["notes"] == [
        "PowerProfile shared (not applied by the role) go with the power.poweraware.io CustomResourceDefinitions: "
        "nothing reads them once the agents are gone"
    ]


def test_tokens_are_decoded_and_unfilled_secrets_named():
    filled = {"data": {"token": base64.b64encode(b"jwt").decode(), "ca.crt": base64.b64encode(b"PEM").decode()}}
    out = pp.tokens({"w1": [filled], "w2": [{"data": {"ca.crt": "UEVN"}}], "w3": [], "w4": [{"data": {"token": "!!"}}]})
    assert out == {"tokens": {"w1": {"token": "jwt", "ca": "PEM"}}, "waiting": ["w2", "w3", "w4"]}


def test_the_inputs_are_not_modified():
    profiles = copy.deepcopy(PROFILES) | {"p": {"min": "2000"}}
    before = copy.deepcopy(profiles)
    pp.plan([host()], {"nodes": [node("w3")]}, profiles, [], "ns")
    assert profiles == before
