"""The lab's power meter (lab/components/node_power.py): servers per worker, utilisation from the
pods' requests, energy counters the node's kernel counts when they are read (lab/fake_kernel.py), that
wrap and keep their mode, on the lab's real layout."""

from __future__ import annotations

import os
import stat

import pytest

from lab import fake_kernel, fake_sysfs
from lab import specpower as _specpower
from lab.components import node_power


def server(server_id: str, chips: int, watts: tuple[float, ...]) -> _specpower.Server:
    return _specpower.Server(server_id, "V", "S", "P", chips, 8, 2, 32, "2024", watts)


FLAT = tuple(float(100 + 10 * i) for i in range(11))  # 100 W idle .. 200 W at 100 %
ZONES = ("intel-rapl:0", "intel-rapl:1", "intel-rapl:2")  # the packages and psys of a 2-package tree


def test_servers_are_spread_over_idle_power_and_match_the_packages():
    pool = [server(f"s{i}", 1, tuple(float(10 * i + k) for k in range(11))) for i in range(10)]
    pool.append(server("two-chips", 2, FLAT))
    chosen = node_power.choose_servers(pool, 3, 1)
    assert [s.id for s in chosen] == ["s1", "s5", "s8"]  # quantiles 1/6, 3/6, 5/6 of ten
    assert [s.id for s in node_power.choose_servers(pool, 1, 2)] == ["two-chips"]
    # no server with as many chips: the whole set
    assert len(node_power.choose_servers(pool, 2, 4)) == 2


def test_server_types_make_a_fleet_of_a_few_models_bought_in_bulk():
    pool = [server(f"s{i}", 1, tuple(float(10 * i + k) for k in range(11))) for i in range(10)]
    # three models at the quantiles for three, dealt round-robin over eight workers
    chosen = [s.id for s in node_power.choose_servers(pool, 8, 1, 3)]
    assert chosen == ["s1", "s5", "s8", "s1", "s5", "s8", "s1", "s5"]
    # as many types as workers or more, or 0: every worker its own model (the default lab)
    assert [s.id for s in node_power.choose_servers(pool, 3, 1, 5)] == ["s1", "s5", "s8"]
    assert node_power.choose_servers(pool, 4, 1, 0) == node_power.choose_servers(pool, 4, 1, 4)
    with pytest.raises(ValueError, match="server types must be >= 0"):
        node_power.choose_servers(pool, 3, 1, -1)


def test_the_control_plane_is_a_server_too_and_leaves_the_workers_choice_alone():
    pool = [server(f"s{i}", 1, tuple(float(10 * i + k) for k in range(11))) for i in range(10)]
    pool.append(server("two-chips", 2, FLAT))
    assert node_power.choose_control_plane_server(pool, 1).id == "s5"  # the median of ten by idle power
    assert node_power.choose_control_plane_server(pool, 2).id == "two-chips"
    assert [s.id for s in node_power.choose_servers(pool, 3, 1)] == ["s1", "s5", "s8"]


class FoundFile:
    """A data set path that exists (the pool is injected)."""

    def is_file(self) -> bool:
        return True


def test_every_lab_node_is_metered(monkeypatch):
    """The lab's nodes, control plane included, carry a server and its TDP (collectd meters them all)."""
    from lab import config

    pool = [server(f"s{i}", 1, tuple(float(10 * i + k) for k in range(11))) for i in range(10)]
    monkeypatch.setattr(_specpower, "load_servers", lambda _path: pool)
    monkeypatch.setattr(node_power, "servers_csv", FoundFile)
    node_power.lab_servers.cache_clear()
    try:
        nodes = config.LabConfig(workers=3).nodes
    finally:
        node_power.lab_servers.cache_clear()
    assert [(n.name, n.control_plane, n.power_server) for n in nodes] == [
        ("lab-control-plane", True, "s5"),
        ("lab-worker-1", False, "s1"),
        ("lab-worker-2", False, "s5"),
        ("lab-worker-3", False, "s8"),
    ]
    assert all(n.tdp_w for n in nodes)


def test_package_tdp_covers_the_peak_shared_by_packages():
    assert node_power.package_tdp_w(server("a", 2, FLAT), 2) == 100.0
    assert node_power.package_tdp_w(server("b", 1, FLAT[:10] + (201.0,)), 1) == 205.0


def test_utilisation_counts_running_pods_requests_per_node():
    def pod(node, cpu, phase="Running"):
        return {
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}, {}]},
            "status": {"phase": phase},
        }

    pods = [pod("w1", "500m"), pod("w1", "1.5"), pod("w2", "4"), pod("w2", "8", "Pending"), pod("w3", "64")]
    assert node_power.utilisation(pods, {"w1": 4.0, "w2": 16.0, "w3": 32.0}) == {"w1": 50.0, "w2": 25.0, "w3": 100.0}


STRESS = "docker.io/alexeiled/stress-ng:0.12.05"


def stress_pod(node, args, state="running", image=STRESS, command=None, request="12"):
    container = {"name": "stress-ng", "image": image, "args": args, "resources": {"requests": {"cpu": request}}}
    if command:
        container["command"] = command
    return {
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "stress-ng", "state": {state: {}}}]},
    }


def test_a_stress_container_uses_what_its_arguments_stress_while_it_runs():
    allocatable = {"w1": 32.0}
    running = stress_pod("w1", ["--cpu", "12", "--timeout", "300s"])
    assert node_power.utilisation([running], allocatable) == {"w1": 37.5}
    # between two runs (the timeout ended it, kubelet's back-off): nothing, though the pod requests 12
    assert node_power.utilisation([stress_pod("w1", ["--cpu", "12"], state="terminated")], allocatable) == {"w1": 0.0}
    # not its request: what it stresses (--cpu-load is per worker; 0 workers: every CPU)
    assert node_power.utilisation([stress_pod("w1", ["--cpu", "8", "--cpu-load=50"], request="1")], allocatable) == {
        "w1": 12.5
    }
    assert node_power.utilisation([stress_pod("w1", ["-c", "0"])], allocatable) == {"w1": 100.0}
    # arguments stress-ng refuses: the process never ran
    assert node_power.utilisation([stress_pod("w1", ["--cpu", "x"])], allocatable) == {"w1": 0.0}
    # a digest after the tag is the same image; a command that is not stress-ng runs no load
    pinned = stress_pod("w1", ["--cpu", "4"], image=STRESS + "@sha256:" + "a" * 64)
    assert node_power.utilisation([pinned], allocatable) == {"w1": 12.5}
    assert node_power.utilisation([stress_pod("w1", ["60"], command=["sleep"])], allocatable) == {"w1": 0.0}
    # another tag of the image is not the lab's load process: kwok's pod, its request counts
    assert node_power.utilisation(
        [stress_pod("w1", ["--cpu", "4"], image="docker.io/alexeiled/stress-ng:0.13")], allocatable
    ) == {"w1": 37.5}


def test_energy_is_counted_when_read_split_over_packages_and_wraps(tmp_path):
    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "intel_idle_uncore", energy_readable=False)  # 2 packages
    control = sysfs / node_power.POWERCAP
    clock = [1000.0]
    kernel = fake_kernel.FakeKernel(sysfs, clock=lambda: clock[0])  # what the node's kernel shows

    def counters():
        return {z: int(kernel.show(f"{node_power.POWERCAP}/{z}/energy_uj")) for z in ZONES}

    meter = node_power.Meter("w1", server("s", 2, FLAT), sysfs, util=50.0)
    before = counters()  # nothing published yet: the files' values
    assert before == {z: int((control / z / "energy_uj").read_text()) for z in ZONES}
    dram = kernel.show(f"{node_power.POWERCAP}/intel-rapl:0/intel-rapl:0:0/energy_uj")
    meter.advance(0.1, now=1000.0)  # publishes 150 W: 75 W per package, psys all of it
    assert counters() == before
    clock[0] = 1002.0  # 2 s later, with nothing written since: 300 J, 150 J per package
    after = counters()
    assert after["intel-rapl:0"] - before["intel-rapl:0"] == 150_000_000
    assert after["intel-rapl:1"] - before["intel-rapl:1"] == 150_000_000
    assert after["intel-rapl:2"] - before["intel-rapl:2"] == 300_000_000  # psys
    clock[0] = 1002.001  # a millisecond's energy, not a tick's
    assert counters()["intel-rapl:2"] - after["intel-rapl:2"] == 150_000
    assert kernel.show(f"{node_power.POWERCAP}/intel-rapl:0/intel-rapl:0:0/energy_uj") == dram  # not metered
    # the class links and the accessor interface show the same counter
    assert int(kernel.read("class/powercap/intel-rapl:0/energy_uj")) == counters()["intel-rapl:0"]

    # the same power again publishes nothing; a new power continues from the counter at that instant
    published = (sysfs / fake_kernel.METER).stat().st_mtime_ns
    meter.advance(0.1, now=1003.0)
    assert (sysfs / fake_kernel.METER).stat().st_mtime_ns == published
    meter.util = 0.0  # 100 W: 50 W per package
    meter.advance(0.1, now=1004.0)
    at_change = {z: int((control / z / "energy_uj").read_text()) for z in ZONES}  # the files follow each publication
    assert at_change["intel-rapl:0"] - before["intel-rapl:0"] == 300_000_000
    clock[0] = 1006.0
    assert counters()["intel-rapl:0"] - at_change["intel-rapl:0"] == 100_000_000
    # root-only counters stay root-only
    assert stat.S_IMODE(os.stat(control / "intel-rapl:0" / "energy_uj").st_mode) == 0o400
    assert not list(control.glob("**/.energy_uj.new"))

    # near the top of the range the counter wraps as the kernel's does
    limit = int((control / "intel-rapl:1" / "max_energy_range_uj").read_text())
    (control / "intel-rapl:1" / "energy_uj").write_text(f"{limit - 1_000_000}\n")
    fresh = node_power.Meter("w1", server("s", 2, FLAT), sysfs, util=50.0)  # a new meter reads the files
    fresh.advance(0.1, now=2000.0)
    clock[0] = 2000.1  # 7.5 J on each package
    assert counters()["intel-rapl:1"] == 7_500_000 - 1_000_000 - 1
    status = meter.status()  # what tests compare package_power_avg against: 50 W of a 100 W TDP each
    assert (status["packages"], status["package_tdp_w"], status["watts"], status["tdp_percent"]) == (
        2,
        100.0,
        100.0,
        50.0,
    )


def test_a_power_cycle_continues_from_the_rebuilt_counters(tmp_path):
    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "intel_idle_uncore")
    clock = [10.0]
    kernel = fake_kernel.FakeKernel(sysfs, clock=lambda: clock[0])
    rel = f"{node_power.POWERCAP}/intel-rapl:0/energy_uj"
    meter = node_power.Meter("w1", server("s", 2, FLAT), sysfs, util=100.0)  # 200 W, 100 W per package
    meter.advance(0.1, now=10.0)
    clock[0] = 100.0
    assert int(kernel.show(rel)) > int((sysfs / rel).read_text())  # 90 s counted, nothing written
    fake_sysfs.build_tree(sysfs, "intel_idle_uncore", rebuild=True)  # power-on values, no record
    fresh = int((sysfs / rel).read_text())
    assert int(kernel.show(rel)) == fresh
    meter.advance(0.1, now=100.0)  # same power, but a new tree: published from its counters
    clock[0] = 101.0
    assert int(kernel.show(rel)) - fresh == 100_000_000


def test_a_missing_data_set_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARED_DATA", str(tmp_path))
    node_power.lab_servers.cache_clear()
    try:
        with pytest.raises(node_power.NoData, match="SHARED_DATA"):
            node_power.lab_servers(3, 1)
    finally:
        node_power.lab_servers.cache_clear()
