"""The lab kubelet's CPU manager (lab/kubelet/cpu_manager.py) against Kubernetes v1.36.3's own tests
(pkg/kubelet/cm/cpumanager: cpu_assignment_test.go, policy_static_test.go, policy_test.go's
topologies, state/state_checkpoint_test.go), checkpoints written by kubelet's own code for the same
steps, and the fake kernel's topology (lab/fake_sysfs.py, lab/fake_kernel.py) read as kubelet reads it.

The checkpoint vectors marked "kubelet 1.36.3" were written by k8s.io/kubernetes v1.36.3's
cpumanager.NewStaticPolicy, Allocate and RemoveContainer over state.NewCheckpointState, driven
step by step as below; the module's random differential run against that code is in the commit
that added it."""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pytest

from lab import fake_kernel, fake_sysfs
from lab.kubelet import cpu_manager, pods
from lab.kubelet.sandbox import PodNetwork


# --- topologies of pkg/kubelet/cm/cpumanager/policy_test.go: cpu -> (CoreID, SocketID, NUMANodeID) --
def topology(rows: dict) -> cpu_manager.Topology:
    return cpu_manager.Topology({cpu: (numa, socket, core) for cpu, (core, socket, numa) in rows.items()})


TOPO_SINGLE_SOCKET_HT = topology({cpu: (cpu % 4, 0, 0) for cpu in range(8)})
TOPO_DUAL_SOCKET_HT = topology({cpu: (cpu % 6, cpu % 2, cpu % 2) for cpu in range(12)})
TOPO_DUAL_SOCKET_NO_HT = topology({cpu: (cpu, cpu // 4, cpu // 4) for cpu in range(8)})
TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT = topology(
    {cpu: (cpu % 40, (cpu % 40) // 20, (cpu % 40) // 10) for cpu in range(80)}
)


def cpus(text: str) -> frozenset:
    return cpu_manager.parse_cpuset(text)


def test_the_topologies_are_the_go_tests_tables():
    """A spot check of the comprehensions above against policy_test.go's rows."""
    assert TOPO_DUAL_SOCKET_HT.details[7] == (1, 1, 1) and TOPO_DUAL_SOCKET_HT.details[10] == (0, 0, 4)
    assert TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT.details[63] == (2, 1, 23)
    assert TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT.details[50] == (1, 0, 10)
    assert (TOPO_DUAL_SOCKET_HT.cpus_per_core, TOPO_DUAL_SOCKET_HT.cpus_per_socket) == (2, 6)


@pytest.mark.parametrize(
    ("text", "listed", "canonical"),
    [
        ("", [], ""),
        ("0", [0], "0"),
        ("0-1", [0, 1], "0-1"),
        ("2,0,1", [0, 1, 2], "0-2"),
        ("1-1,3-4,7", [1, 3, 4, 7], "1,3-4,7"),
    ],
)
def test_cpusets_read_and_print_as_k8s_utils_cpuset(text, listed, canonical):
    """cpuset.Parse and CPUSet.String (k8s.io/utils/cpuset): what the checkpoint holds."""
    assert sorted(cpu_manager.parse_cpuset(text)) == listed
    assert cpu_manager.format_cpuset(listed) == canonical


@pytest.mark.parametrize(
    ("text", "error"),
    [("1.3", 'strconv.Atoi: parsing "1.3": invalid syntax'), ("3-1", 'invalid range "3-1" (3 > 1)')],
)
def test_a_cpuset_that_does_not_parse_says_so_in_gos_words(text, error):
    with pytest.raises(ValueError) as raised:
        cpu_manager.parse_cpuset(text)
    assert str(raised.value) == error


# --- cpu_assignment_test.go: commonTakeByTopologyTestCases and TestTakeByTopologyNUMAPacked ---------
TOO_MANY = "not enough cpus available to satisfy request: requested=5, available=4"


@pytest.mark.parametrize(
    ("description", "topo", "available", "count", "expected"),
    [
        (
            "take more cpus than are available from single socket with HT",
            TOPO_SINGLE_SOCKET_HT,
            "0,2,4,6",
            5,
            TOO_MANY,
        ),
        ("take zero cpus from single socket with HT", TOPO_SINGLE_SOCKET_HT, "0-7", 0, ""),
        ("take one cpu from single socket with HT", TOPO_SINGLE_SOCKET_HT, "0-7", 1, "0"),
        ("take one cpu from single socket with HT, some cpus are taken", TOPO_SINGLE_SOCKET_HT, "1,3,5-7", 1, "6"),
        ("take two cpus from single socket with HT", TOPO_SINGLE_SOCKET_HT, "0-7", 2, "0,4"),
        ("take all cpus from single socket with HT", TOPO_SINGLE_SOCKET_HT, "0-7", 8, "0-7"),
        (
            "take two cpus from single socket with HT, only one core totally free",
            TOPO_SINGLE_SOCKET_HT,
            "0-3,6",
            2,
            "2,6",
        ),
        ("take a socket of cpus from dual socket with HT", TOPO_DUAL_SOCKET_HT, "0-11", 6, "0,2,4,6,8,10"),
        (
            "take a socket of cpus from dual socket with multi-numa-per-socket with HT",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "0-79",
            40,
            "0-19,40-59",
        ),
        (
            "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "0-79",
            20,
            "0-9,40-49",
        ),
        (
            "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already "
            "taken",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "10-39,50-79",
            20,
            "10-19,50-59",
        ),
        (
            "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "0-79",
            60,
            "0-29,40-69",
        ),
        (
            "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "1-39,41-79",
            60,
            "10-39,50-79",
        ),
        ("take one cpu from dual socket with HT - core from Socket 0", TOPO_DUAL_SOCKET_HT, "1-5,7-11", 1, "2"),
        (
            "allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second "
            "NUMA node",
            TOPO_DUAL_SOCKET_HT,
            "0-11",
            8,
            "0,6,2,8,4,10,1,7",
        ),
        (
            "allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the "
            "fourth NUMA node",
            TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
            "0-79",
            64,
            "0-29,40-69,30,31,70,71",
        ),
    ],
)
def test_take_by_topology_packed(description, topo, available, count, expected):
    try:
        taken = cpu_manager.take_by_topology(topo, cpus(available), count)
    except cpu_manager.AllocationError as exc:
        assert str(exc) == expected, description
        return
    assert taken == cpus(expected), description


# --- policy_static_test.go ---------------------------------------------------------------------------
def pod(uid: str, containers: list, init: list | None = None) -> dict:
    """makePod / makeMultiContainerPod: each container (name, cpu request, cpu limit[, restartPolicy]),
    memory 1G requested and limited."""

    def made(name, request, limit, restart=None):
        made = {"name": name, "resources": {"requests": {"cpu": request, "memory": "1G"}}}
        made["resources"]["limits"] = {"cpu": limit, "memory": "1G"}
        if restart:
            made["restartPolicy"] = restart
        return made

    spec = {"containers": [made(*c) for c in containers]}
    if init:
        spec["initContainers"] = [made(*c) for c in init]
    return {"metadata": {"uid": uid, "name": uid, "namespace": "ns"}, "spec": spec}


def state(tmp_path: pathlib.Path, default: str, assignments: dict | None = None) -> cpu_manager.CheckpointState:
    """mockState: a checkpoint state holding ``default`` and ``assignments`` (pod -> container -> cpus)."""
    made = cpu_manager.CheckpointState(tmp_path, cpu_manager.STATIC)
    made.default = cpus(default)
    made.assignments = {p: {c: cpus(s) for c, s in cs.items()} for p, cs in (assignments or {}).items()}
    return made


@pytest.mark.parametrize(
    ("description", "topo", "reserved", "assignments", "default", "expected", "error"),
    [
        ("non-corrupted state", TOPO_DUAL_SOCKET_HT, 0, {"fakePod": {"0": "0"}}, "1-11", "1-11", None),
        ("empty cpuset", TOPO_DUAL_SOCKET_HT, 1, {}, "", "0-11", None),
        (
            "reserved cores 0 & 6 are not present in available cpuset",
            TOPO_DUAL_SOCKET_HT,
            2,
            {},
            "0-1",
            None,
            'not all reserved cpus: "0,6" are present in defaultCpuSet: "0-1"',
        ),
        (
            "assigned core 2 is still present in available cpuset",
            TOPO_DUAL_SOCKET_HT,
            0,
            {"fakePod": {"0": "0-2"}},
            "2-11",
            None,
            'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"',
        ),
        (
            "core 12 is not present in topology but is in state cpuset",
            TOPO_DUAL_SOCKET_HT,
            0,
            {"fakePod": {"0": "0-2", "1": "3-4"}},
            "5-12",
            None,
            'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-12"',
        ),
        (
            "core 11 is present in topology but is not in state cpuset",
            TOPO_DUAL_SOCKET_HT,
            0,
            {"fakePod": {"0": "0-2", "1": "3-4"}},
            "5-10",
            None,
            'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-10"',
        ),
    ],
)
def test_static_policy_start(tmp_path, description, topo, reserved, assignments, default, expected, error):
    """TestStaticPolicyStart (the cases without policy options)."""
    policy = cpu_manager.StaticPolicy(topo, reserved)
    st = state(tmp_path, default, assignments)
    if error:
        with pytest.raises(cpu_manager.CPUManagerError) as raised:
            policy.start(st)
        assert str(raised.value) == error, description
        return
    policy.start(st)
    assert st.default == cpus(expected), description


# TestStaticPolicyAdd: optionsInsensitiveTestCases and defaultOptionsTestCases (not those of
# topoQuadSocketFourWayHT, a 288-CPU table); (topology, reserved count, assignments, default, pod,
# expected cpuset or error)
ADD_CASES = {
    "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "2-3,6-7"}},
        "0-1,4-5",
        ("fakeContainer3", "2000m", "2000m"),
        "1,5",
    ),
    "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket": (
        TOPO_DUAL_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "2"}},
        "0-1,3-11",
        ("fakeContainer3", "6000m", "6000m"),
        "1,3,5,7,9,11",
    ),
    "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores": (
        TOPO_DUAL_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "1,5"}},
        "0,2-4,6-11",
        ("fakeContainer3", "6000m", "6000m"),
        "2-4,8-10",
    ),
    "GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket": (
        TOPO_DUAL_SOCKET_NO_HT,
        1,
        {"fakePod": {"fakeContainer100": ""}},
        "0-1,3-7",
        ("fakeContainer1", "4000m", "4000m"),
        "4-7",
    ),
    "GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores": (
        TOPO_DUAL_SOCKET_NO_HT,
        1,
        {"fakePod": {"fakeContainer100": "4-5"}},
        "0-1,3,6-7",
        ("fakeContainer1", "4000m", "4000m"),
        "1,3,6-7",
    ),
    "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore": (
        TOPO_DUAL_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "2"}},
        "0-1,3-11",
        ("fakeContainer3", "8000m", "8000m"),
        "1,3-5,7,9-11",
    ),
    "NonGuPod, SingleSocketHT, NoAlloc": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {},
        "0-7",
        ("fakeContainer1", "1000m", "2000m"),
        None,
    ),
    "GuPodNonIntegerCore, SingleSocketHT, NoAlloc": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {},
        "0-7",
        ("fakeContainer4", "977m", "977m"),
        None,
    ),
    # expect sibling of partial core
    "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {},
        "0-7",
        ("fakeContainer2", "1000m", "1000m"),
        "4",
    ),
    "GuPodSingleCore, SingleSocketHT, ExpectError": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {},
        "0-7",
        ("fakeContainer2", "8000m", "8000m"),
        "not enough cpus available to satisfy request: requested=8, available=7",
    ),
    "GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer3": "2-3,6-7"}},
        "0-1,4-5",
        ("fakeContainer3", "4000m", "4000m"),
        "2-3,6-7",
    ),
    "GuPodMultipleCores, DualSocketHT, NoAllocExpectError": (
        TOPO_DUAL_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "1-3"}},
        "0,4-11",
        ("fakeContainer5", "10000m", "10000m"),
        "not enough cpus available to satisfy request: requested=10, available=8",
    ),
    "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError": (
        TOPO_SINGLE_SOCKET_HT,
        1,
        {"fakePod": {"fakeContainer100": "1-6"}},
        "0,7",
        ("fakeContainer5", "2000m", "2000m"),
        "not enough cpus available to satisfy request: requested=2, available=1",
    ),
}


@pytest.mark.parametrize("description", list(ADD_CASES))
def test_static_policy_add(tmp_path, description):
    """runStaticPolicyTestCase: Allocate for the pod's container; its cpuset, disjoint from the shared
    pool, or the error and no assignment."""
    topo, reserved, assignments, default, container, expected = ADD_CASES[description]
    policy = cpu_manager.StaticPolicy(topo, reserved)
    st = state(tmp_path, default, assignments)
    the_pod = pod("fakePod", [container])
    if expected is not None and expected.startswith("not enough"):
        with pytest.raises(cpu_manager.AllocationError) as raised:
            policy.allocate(st, the_pod, the_pod["spec"]["containers"][0])
        assert str(raised.value) == expected
        assert st.get("fakePod", container[0]) is None
        return
    policy.allocate(st, the_pod, the_pod["spec"]["containers"][0])
    got = st.get("fakePod", container[0])
    if expected is None:
        assert got is None
        return
    assert got == cpus(expected)
    assert not got & st.default


def test_an_init_containers_cpus_are_reused_then_released(tmp_path):
    """TestStaticPolicyReuseCPUs: the app container takes CPUs of the init container before it;
    removing the init container releases only those no other container holds."""
    policy = cpu_manager.StaticPolicy(TOPO_SINGLE_SOCKET_HT, 0)
    st = state(tmp_path, "0-7")
    the_pod = pod("podUID", [("appContainer-0", "2000m", "2000m")], [("initContainer-0", "4000m", "4000m")])
    for container in [*the_pod["spec"]["initContainers"], *the_pod["spec"]["containers"]]:
        policy.allocate(st, the_pod, container)
    assert st.default == cpus("2-3,6-7")
    policy.remove_container(st, "podUID", "initContainer-0")
    assert st.default == cpus("1-3,5-7")
    assert st.get("podUID", "initContainer-0") is None


def test_a_sidecars_cpus_are_not_reused(tmp_path):
    """TestStaticPolicyDoNotReuseCPUs: a restartable init container runs beside the app containers."""
    policy = cpu_manager.StaticPolicy(TOPO_SINGLE_SOCKET_HT, 0)
    st = state(tmp_path, "0-7")
    the_pod = pod("podUID", [("appContainer-0", "2000m", "2000m")], [("initContainer-0", "4000m", "4000m", "Always")])
    for container in [*the_pod["spec"]["initContainers"], *the_pod["spec"]["containers"]]:
        policy.allocate(st, the_pod, container)
    assert st.default == cpus("3,7")


@pytest.mark.parametrize(
    ("description", "container", "assignments", "default", "expected"),
    [
        ("SingleSocketHT, DeAllocOneContainer", "fakeContainer1", {"fakeContainer1": "1-3"}, "4-7", "1-7"),
        (
            "SingleSocketHT, DeAllocOneContainer, BeginEmpty",
            "fakeContainer1",
            {"fakeContainer1": "1-3", "fakeContainer2": "4-7"},
            "",
            "1-3",
        ),
        (
            "SingleSocketHT, DeAllocTwoContainer",
            "fakeContainer1",
            {"fakeContainer1": "1,3,5", "fakeContainer2": "2,4"},
            "6-7",
            "1,3,5-7",
        ),
        ("SingleSocketHT, NoDeAlloc", "fakeContainer2", {"fakeContainer1": "1,3,5"}, "2,4,6-7", "2,4,6-7"),
    ],
)
def test_static_policy_remove(tmp_path, description, container, assignments, default, expected):
    """TestStaticPolicyRemove."""
    policy = cpu_manager.StaticPolicy(TOPO_SINGLE_SOCKET_HT, 0)
    st = state(tmp_path, default, {"fakePod": assignments})
    policy.remove_container(st, "fakePod", container)
    assert st.default == cpus(expected), description
    assert st.get("fakePod", container) is None


def test_reserved_cpus_are_taken_from_the_lowest_cores():
    """NewStaticPolicy's example: 8 CPUs with HT, 2 reserved -> {0,4}; a given set is kept, and one
    of the wrong size is refused with kubelet's message."""
    assert cpu_manager.StaticPolicy(TOPO_SINGLE_SOCKET_HT, 2).reserved == {0, 4}
    assert cpu_manager.StaticPolicy(TOPO_DUAL_SOCKET_HT, 2, cpus("0,6")).reserved == {0, 6}
    with pytest.raises(cpu_manager.CPUManagerError) as raised:
        cpu_manager.StaticPolicy(TOPO_SINGLE_SOCKET_HT, 9)
    assert str(raised.value) == (
        "new static policy error: [cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 9)"
    )


@pytest.mark.parametrize(
    ("resources", "qos", "exclusive"),
    [
        ({"requests": {"cpu": "2", "memory": "1G"}, "limits": {"cpu": "2", "memory": "1G"}}, "Guaranteed", 2),
        ({"limits": {"cpu": "2000m", "memory": "1G"}}, "Guaranteed", 2),  # requests default to limits
        ({"requests": {"cpu": "1500m", "memory": "1G"}, "limits": {"cpu": "1500m", "memory": "1G"}}, "Guaranteed", 0),
        ({"requests": {"cpu": "2", "memory": "1G"}, "limits": {"cpu": "3", "memory": "1G"}}, "Burstable", 0),
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}, "Burstable", 0),  # no memory limit
        ({"requests": {"cpu": "2"}}, "Burstable", 0),
        ({}, "BestEffort", 0),
    ],
)
def test_only_guaranteed_pods_integer_cpus_are_exclusive(resources, qos, exclusive):
    """qos.go ComputePodQOS and guaranteedCPUs (isIntegralCPUAmount)."""
    container = {"name": "c", "resources": resources}
    the_pod = {"metadata": {"uid": "u"}, "spec": {"containers": [container]}}
    assert cpu_manager.pod_qos(the_pod) == qos
    assert cpu_manager.guaranteed_cpus(the_pod, container) == exclusive


def test_an_init_container_without_limits_makes_the_pod_burstable():
    """ComputePodQOS counts init containers: every one needs cpu and memory limits."""
    the_pod = pod("u", [("app", "2", "2")])
    the_pod["spec"]["initContainers"] = [{"name": "init"}]
    assert cpu_manager.pod_qos(the_pod) == "Burstable"
    assert cpu_manager.pod_qos({**the_pod, "status": {"qosClass": "Guaranteed"}}) == "Guaranteed"  # GetPodQOS


# --- state/state_checkpoint_test.go TestCheckpointStateRestore: checksums and kubelet's errors --------
@pytest.mark.parametrize(
    ("policy", "default", "entries", "version", "expected"),
    [
        ("none", "4-6", {}, 2, 354655845),  # Restore default cpu set
        ("none", "1-3", {"pod": {"container1": "4-6", "container2": "1-3"}}, 2, 3610638499),  # Restore valid
        ("other", "1-3", {}, 2, 1394507217),  # Restore checkpoint with invalid policy name
        ("none", "1.3", {}, 2, 3021697696),  # Restore checkpoint with unparsable default cpu set
        ("none", "1-3", {"pod": {"container1": "4-6", "container2": "asd"}}, 2, 962272150),
        ("none", "1-3", {}, 1, 1694838852),  # Restore checkpoint from checkpoint with v1 checksum
        ("none", "1-3", {"containerID1": "4-6", "containerID2": "1-3"}, 1, 3680390589),  # with migration
    ],
)
def test_checksums_are_kubelets(policy, default, entries, version, expected):
    assert cpu_manager.checksum(policy, default, entries, version) == expected


CORRUPTED = "checkpoint is corrupted"


@pytest.mark.parametrize(
    ("content", "error", "default", "assignments"),
    [
        ('{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}', None, "4-6", {}),
        (
            '{"policyName": "none", "defaultCPUSet": "1-3", '
            '"entries": {"pod": {"container1": "4-6", "container2": "1-3"}}, "checksum": 3610638499}',
            None,
            "1-3",
            {"pod": {"container1": "4-6", "container2": "1-3"}},
        ),
        (
            '{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}',
            "checkpoint is corrupted",
            0,
            0,
        ),
        (
            '{"policyName": "other", "defaultCPUSet": "1-3", "entries": {}, "checksum": 1394507217}',
            'configured policy "none" differs from state checkpoint policy "other"',
            0,
            0,
        ),
        (
            '{"policyName": "none", "defaultCPUSet": "1.3", "entries": {}, "checksum": 3021697696}',
            'could not parse default cpu set "1.3": strconv.Atoi: parsing "1.3": invalid syntax',
            0,
            0,
        ),
        (
            '{"policyName": "none", "defaultCPUSet": "1-3", '
            '"entries": {"pod": {"container1": "4-6", "container2": "asd"}}, "checksum": 962272150}',
            'could not parse cpuset "asd" for container "container2" in pod "pod": strconv.Atoi: parsing "asd": '
            "invalid syntax",
            0,
            0,
        ),
        ('{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 1694838852}', None, "1-3", {}),
        (
            # kubelet migrates it with the container ids its runtime reports; the lab's runtime has none
            '{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"containerID1": "4-6", "containerID2": "1-3"},'
            ' "checksum": 3680390589}',
            "failed to migrate checkpoint from v1 to v2: containerID 'containerID1' not found in initial containers "
            "list",
            0,
            0,
        ),
    ],
)
def test_checkpoints_are_restored_or_refused_as_kubelet_does(content, error, default, assignments):
    """TestCheckpointStateRestore (the cases of 1.36's default gates)."""
    if error:
        with pytest.raises(ValueError) as raised:
            cpu_manager.read_checkpoint(content.encode(), "none")
        assert str(raised.value) == error
        return
    restored = cpu_manager.read_checkpoint(content.encode(), "none")
    assert restored == (cpus(default), {p: {c: cpus(s) for c, s in cs.items()} for p, cs in assignments.items()})


# Written by kubelet 1.36.3 (above) on TOPO_DUAL_SOCKET_HT with reservedSystemCPUs 0,6, after each step.
DUAL_SOCKET_STEPS = [
    ("start", None, '{"policyName":"static","defaultCpuSet":"0-11","checksum":1227076877}'),
    (
        "admit a",
        None,
        '{"policyName":"static","defaultCpuSet":"0-1,3-7,9-11","entries":{"pod-a":{"app":"2,8"}},"checksum":1404086321}',
    ),
    (
        "admit b",
        None,
        '{"policyName":"static","defaultCpuSet":"0,3,5-6,9,11","entries":{"pod-a":{"app":"2,8"},'
        '"pod-b":{"app":"4,10","init":"1,4,7,10"}},"checksum":3477004001}',
    ),
    (
        "admit c",
        "not enough cpus available to satisfy request: requested=6, available=4",
        '{"policyName":"static","defaultCpuSet":"0,3,5-6,9,11","entries":{"pod-a":{"app":"2,8"},'
        '"pod-b":{"app":"4,10","init":"1,4,7,10"}},"checksum":3477004001}',
    ),
    (
        "remove b/init",
        None,
        '{"policyName":"static","defaultCpuSet":"0-1,3,5-7,9,11","entries":{"pod-a":{"app":"2,8"},'
        '"pod-b":{"app":"4,10"}},"checksum":2702113809}',
    ),
    (
        "remove a/app",
        None,
        '{"policyName":"static","defaultCpuSet":"0-3,5-9,11","entries":{"pod-b":{"app":"4,10"}},"checksum":1553479401}',
    ),
    (
        "remove a/sidecar",
        None,
        '{"policyName":"static","defaultCpuSet":"0-3,5-9,11","entries":{"pod-b":{"app":"4,10"}},"checksum":1553479401}',
    ),
    (
        "admit c",
        None,
        '{"policyName":"static","defaultCpuSet":"0,2,6,8","entries":{"pod-b":{"app":"4,10"},'
        '"pod-c":{"big":"1,3,5,7,9,11"}},"checksum":2748896516}',
    ),
]


def test_the_checkpoint_is_byte_for_byte_what_kubelet_writes(tmp_path):
    """The same steps kubelet 1.36.3 took: the file after each, the error of the one that failed,
    the file's mode (os.CreateTemp's 0600) and no temporary file left beside it."""
    manager = cpu_manager.CPUManager(cpu_manager.StaticPolicy(TOPO_DUAL_SOCKET_HT, 2, cpus("0,6")), tmp_path)
    a = pod("pod-a", [("app", "2", "2"), ("sidecar", "500m", "500m")])
    b = pod("pod-b", [("app", "2", "2")], [("init", "4", "4")])
    c = pod("pod-c", [("big", "6", "6")])
    steps = [
        lambda: None,
        lambda: manager.admit(a),
        lambda: manager.admit(b),
        lambda: manager.admit(c),
        lambda: manager.policy.remove_container(manager.state, "pod-b", "init"),
        lambda: manager.policy.remove_container(manager.state, "pod-a", "app"),
        lambda: manager.policy.remove_container(manager.state, "pod-a", "sidecar"),
        lambda: manager.admit(c),
    ]
    path = tmp_path / "cpu_manager_state"
    for step, (name, error, written) in zip(steps, DUAL_SOCKET_STEPS, strict=True):
        message = step()
        assert message == (f"Allocate failed due to {error}, which is unexpected" if error else None), name
        assert path.read_text() == written, name
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu_manager_state"]


def test_the_none_policys_checkpoint_is_kubelets(tmp_path):
    """Policy none: kubelet 1.36.3 accepts this file (NewCheckpointState verified its checksum)."""
    cpu_manager.CPUManager(cpu_manager.NonePolicy(), tmp_path)
    written = (tmp_path / "cpu_manager_state").read_text()
    assert written == '{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'


def test_a_checkpoint_of_another_policy_stops_the_kubelet(tmp_path):
    """restoreState: kubelet refuses to start, with its message, and leaves the file as it was."""
    cpu_manager.CPUManager(cpu_manager.NonePolicy(), tmp_path)
    before = (tmp_path / "cpu_manager_state").read_bytes()
    with pytest.raises(cpu_manager.CPUManagerError) as raised:
        cpu_manager.CPUManager(cpu_manager.StaticPolicy(TOPO_DUAL_SOCKET_HT, 2), tmp_path)
    assert str(raised.value) == (
        'start cpu manager error: could not restore state from checkpoint: configured policy "static" differs from '
        'state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file '
        f'"{tmp_path / "cpu_manager_state"}" before restarting Kubelet'
    )
    assert (tmp_path / "cpu_manager_state").read_bytes() == before


def test_a_restart_keeps_the_assignments_and_reconcile_releases_pods_gone(tmp_path):
    """A kubelet restart restores the checkpoint: a container already there keeps its CPUs
    (Allocate skips it); removeStaleState gives back the CPUs of pods no longer active."""
    policy = cpu_manager.StaticPolicy(TOPO_DUAL_SOCKET_HT, 2, cpus("0,6"))
    first = cpu_manager.CPUManager(policy, tmp_path)
    a, b = pod("pod-a", [("app", "2", "2")]), pod("pod-b", [("app", "4", "4")])
    assert first.admit(a) is None and first.admit(b) is None
    again = cpu_manager.CPUManager(cpu_manager.StaticPolicy(TOPO_DUAL_SOCKET_HT, 2, cpus("0,6")), tmp_path)
    assert again.admit(a) is None
    assert again.exclusive("pod-a") == first.exclusive("pod-a") == {"app": cpus("2,8")}
    assert again.reconcile([a]) == [("pod-b", "app")]
    assert again.state.default == cpus("0-1,3-7,9-11")
    assert again.reconcile([a]) == []


# --- cpu_manager.go NewManager and cmd/kubelet/app/server.go from a KubeletConfiguration ------------
@pytest.fixture
def lab_worker_sysfs(tmp_path):
    """A lab worker's kernel: the default scenario with the lab's 32 CPUs."""
    return fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active", cpus=32)


def test_a_lab_worker_reserves_its_reserved_system_cpus(tmp_path, lab_worker_sysfs):
    """The workers' config.yaml (lab/nodes.py): 2 exclusive CPUs for a Guaranteed cpu "2" pod, none
    for a Burstable one, the pool back to 0-31 once the pod is gone; each file as kubelet 1.36.3 wrote it."""
    config = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}
    manager = cpu_manager.from_config(config, lab_worker_sysfs, tmp_path / "kubelet")
    path = tmp_path / "kubelet/cpu_manager_state"
    assert path.read_text() == '{"policyName":"static","defaultCpuSet":"0-31","checksum":3540042759}'
    assert manager.policy.allocatable_cpus() == cpus("2-31")
    uid = "7f6c1f0e-3b9a-4d2e-9c41-2a5b8e0d1c3f"
    guaranteed = {"metadata": {"uid": uid}, "spec": {"containers": [{"name": "stress-ng"}]}}
    guaranteed["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2", "memory": "64Mi"},
        "limits": {"cpu": "2", "memory": "64Mi"},
    }
    burstable = {
        "metadata": {"uid": "b"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
    }
    assert manager.admit(guaranteed) is None and manager.admit(burstable) is None
    assert path.read_text() == (
        '{"policyName":"static","defaultCpuSet":"0-1,4-31","entries":{"' + uid + '":{"stress-ng":"2-3"}},'
        '"checksum":2963729548}'
    )
    manager.reconcile([burstable])
    assert path.read_text() == '{"policyName":"static","defaultCpuSet":"0-31","checksum":3540042759}'


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"cpuManagerPolicy": "fancy"}, 'unknown policy: "fancy"'),
        (
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "30-33"},
            "reserved-cpus: 30-33 is not a subset of online-cpus: 0-31",
        ),
        ({"cpuManagerPolicy": "static"}, "[cpumanager] unable to determine reserved CPU resources for static policy"),
        (
            {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "0"}},
            "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
        ),
        (
            {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}, "cpuManagerPolicyOptions": {"a": "b"}},
            "the lab's kubelet does not model cpuManagerPolicyOptions",
        ),
    ],
)
def test_a_configuration_kubelet_refuses_is_refused(tmp_path, lab_worker_sysfs, config, error):
    with pytest.raises(cpu_manager.CPUManagerError) as raised:
        cpu_manager.from_config(config, lab_worker_sysfs, tmp_path)
    assert str(raised.value) == error


def test_the_reservation_without_reserved_cpus_is_taken_by_topology(tmp_path, lab_worker_sysfs):
    """kubeReserved + systemReserved cpu, rounded up (NewManager), taken from the lowest cores."""
    config = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}, "systemReserved": {"cpu": "1"}}
    assert cpu_manager.from_config(config, lab_worker_sysfs, tmp_path).policy.reserved == {0, 1}
    assert cpu_manager.from_config({}, lab_worker_sysfs, tmp_path / "none").policy.name == "none"


# --- the topology kubelet reads from a (fake) kernel ------------------------------------------------
def test_a_dual_socket_ht_machine_is_read_as_go_tests_topology(tmp_path):
    """topoDualSocketHT as Linux would show it: sockets alternating, each core's second thread six
    CPUs on, core_id counted within a package, a NUMA node per socket. cAdvisor and Discover make
    the Go table of it (each core numbered by its lowest CPU)."""
    root = tmp_path / "sys"
    for cpu in range(12):
        topo = root / f"devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{cpu % 2}\n")
        (topo / "core_id").write_text(f"{(cpu % 6) // 2}\n")
        node = root / f"devices/system/node/node{cpu % 2}"
        node.mkdir(parents=True, exist_ok=True)
        (node / f"cpu{cpu}").symlink_to(f"../../cpu/cpu{cpu}")
    (root / "devices/system/cpu/online").write_text("0-11\n")
    assert cpu_manager.discover(root).details == TOPO_DUAL_SOCKET_HT.details
    # without NUMA node directories, a node per physical package (cAdvisor's getCPUTopology)
    for node in (root / "devices/system/node").iterdir():
        for link in node.iterdir():
            link.unlink()
        node.rmdir()
    assert cpu_manager.discover(root).details == TOPO_DUAL_SOCKET_HT.details


def test_the_fake_kernel_has_the_topology_files_linux_has(tmp_path):
    """Two packages of four 2-thread cores: cpuN and cpuN+8 are siblings, package 1 numbers its
    cores from 0 again; offline CPUs have no topology directory and leave every list."""
    root = fake_sysfs.build_tree(tmp_path, "intel_idle_uncore", cpus=16, threads_per_core=2, offline="15")
    topo = root / "devices/system/cpu/cpu5/topology"
    files = {p.name: p.read_text().strip() for p in topo.iterdir()}
    assert files == {
        "physical_package_id": "1",
        "die_id": "0",
        "core_id": "1",
        "core_cpus_list": "5,13",
        "thread_siblings_list": "5,13",
        "package_cpus_list": "4-7,12-14",
        "core_siblings_list": "4-7,12-14",
        "die_cpus_list": "4-7,12-14",
    }
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in topo.iterdir())
    assert not (root / "devices/system/cpu/cpu15/topology").exists()
    assert (root / "devices/system/node/node1/cpulist").read_text() == "4-7,12-14\n"
    assert os.readlink(root / "devices/system/node/node1/cpu15") == "../../cpu/cpu15"
    found = cpu_manager.discover(root)
    # CPUsPerCore is NumCPUs / NumCores in whole numbers: 15 online CPUs on 8 cores make it 1
    assert (found.num_sockets, found.num_numa, found.cpus_per_core, found.cpus) == (2, 2, 1, cpus("0-14"))
    assert found.details[13] == (1, 1, 5) and found.details[7] == (1, 1, 7)  # NUMA node, socket, core
    # the kernel model: topology files are read-only, a CPU taken offline leaves its siblings' lists
    kernel = fake_kernel.FakeKernel(root)
    with pytest.raises(PermissionError):
        kernel.write("devices/system/cpu/cpu5/topology/core_id", "3")
    kernel.take_offline(13)
    assert not (root / "devices/system/cpu/cpu13/topology").exists()
    assert (topo / "core_cpus_list").read_text() == "5\n"
    assert (root / "devices/system/node/node1/cpulist").read_text() == "4-7,12,14\n"
    assert cpu_manager.discover(root).cpus == cpus("0-12,14")


def test_every_scenario_keeps_one_thread_per_core():
    """Existing scenarios: one thread per core (core_id unchanged on one package), CPUs spread over
    the packages a scenario has."""
    assert fake_sysfs.cpu_layout(4) == {0: (0, 0, 0), 1: (0, 1, 0), 2: (0, 2, 0), 3: (0, 3, 0)}
    assert fake_sysfs.cpu_layout(8, packages=2)[5] == (1, 1, 0)
    assert fake_sysfs.cpu_layout(8, packages=16)[7] == (7, 0, 0)  # more RAPL packages than cores


# --- the lab kubelet's pods (pods.py): admission over every pod bound to the node -------------------
PAUSE = "registry.k8s.io/pause:3.10"


def bound(uid, cpu, *, created, phase="Pending", image="registry.k8s.io/kwok-runs-it:1", mirror=False):
    made = pod(uid, [("c", cpu, cpu)])
    made["metadata"]["creationTimestamp"] = created
    made["spec"]["containers"][0]["image"] = image
    made["status"] = {"phase": phase}
    if mirror:
        made["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    return made


class FakeApi:
    """kube-apiserver as the node's kubelet calls it (static_pods.KubeApi.request): the node's pods,
    and the status patches it sends."""

    def __init__(self):
        self.listed: list[dict] = []
        self.patches: list[tuple[str, dict]] = []

    def request(self, method, path, body=None, missing_ok=False, patch=False):
        if method == "GET" and path.startswith("/api/v1/pods?"):
            return {"items": self.listed}
        assert (method, patch) == ("PATCH", True), (method, path)
        self.patches.append((path, body))
        return {}


def test_the_kubelet_admits_every_pod_of_its_node_oldest_first(tmp_path, lab_worker_sysfs):
    """pods.py: kwok's pods too; a pod of this kubelet whose Allocate fails is refused as kubelet
    refuses it (Failed, UnexpectedAdmissionError, rejectPod's message) and never runs; terminal
    pods and mirror pods are not admitted; a pod gone gives its CPUs back."""
    manager = cpu_manager.from_config(
        {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}, lab_worker_sysfs, tmp_path / "kubelet"
    )
    (tmp_path / "map.json").write_text(json.dumps({PAUSE: {"executable": "sleep"}}))
    api = FakeApi()
    network = PodNetwork("10.244.11.0/24", "10.96.0.10", "cluster.local")
    kubelet = pods.ApiPods(api, "w", "10.0.1.11", tmp_path / "map.json", tmp_path, network, manager)

    def sync(listed):
        api.listed = listed
        kubelet.next_list = 0.0  # list now
        kubelet.sync()

    listed = [
        bound("young", "28", created="2026-01-01T00:00:02Z", image=PAUSE),
        bound("old", "4", created="2026-01-01T00:00:01Z"),
        bound("done", "8", created="2026-01-01T00:00:00Z", phase="Succeeded"),
        bound("mirror", "8", created="2026-01-01T00:00:00Z", mirror=True),
    ]
    sync(listed)
    message = (
        "Pod was rejected: Allocate failed due to not enough cpus available to satisfy request: "
        "requested=28, available=26, which is unexpected"
    )
    path, body = api.patches[-1]
    assert path == "/api/v1/namespaces/ns/pods/young/status"
    assert {k: body["status"][k] for k in ("phase", "reason", "message")} == {
        "phase": "Failed",
        "reason": "UnexpectedAdmissionError",
        "message": message,
    }
    assert kubelet.pods["young"].sandbox is None and not any(c.process for c in kubelet.pods["young"].containers)
    assert manager.state.assignments == {"old": {"c": cpus("2-5")}}
    # admitted once: the refused pod, now Failed in the API, stays refused and takes nothing
    listed[0]["status"] = body["status"]
    sync(listed)
    assert manager.state.assignments == {"old": {"c": cpus("2-5")}}
    sync(listed[:1])
    assert manager.state.default == cpus("0-31") and manager.state.assignments == {}


def test_the_kubelet_refuses_to_start_on_a_checkpoint_of_another_policy(tmp_path, capsys):
    """main.py --config: kubelet's log line, exit code 1 (the node's service manager restarts it)."""
    from lab.kubelet import main

    (tmp_path / "cpu_manager_state").write_text('{"policyName":"static","defaultCpuSet":"0-31","checksum":3540042759}')
    config = tmp_path / "config.yaml"
    config.write_text("kind: KubeletConfiguration\n")  # cpuManagerPolicy none, kubelet's default
    argv = ["--node-root", str(tmp_path), "--bin-dir", str(tmp_path), "--log-dir", str(tmp_path)]
    argv += ["--run-dir", str(tmp_path), "--config", str(config), "--root-dir", str(tmp_path)]
    assert main.main(argv) == 1
    expected = (
        '"Failed to start ContainerManager" err="start cpu manager error: could not restore state from checkpoint: '
        'configured policy \\"none\\" differs from state checkpoint policy \\"static\\", please drain this node and '
        f'delete the CPU manager checkpoint file \\"{tmp_path}/cpu_manager_state\\" before restarting Kubelet"'
    )
    assert expected in capsys.readouterr().out
