"""The lab kubelet's resource statistics (lab/kubelet/stats.py) on a /proc written by the test, by the
kernel's layouts (proc(5): a process's stat fields after its command name, /proc/stat's USER_HZ
times, /proc/meminfo's kB) and kubelet's rules (core-seconds, usageNanoCores from two samples,
the resource metrics' families, labels and timestamps)."""

from __future__ import annotations

import os
import pathlib

import pytest

from lab.kubelet import stats as kubelet_stats

HZ = kubelet_stats.CLK_TCK
PAGE = kubelet_stats.PAGE_SIZE


def process_stat(pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int, cstime: int, rss: int) -> str:
    # fields 3..24 of proc(5), the rest of the line as the kernel writes it (ignored)
    fields = ["S", ppid, pid, pid, 0, -1, 4194560, 100, 0, 0, 0, utime, stime, cutime, cstime, 20, 0, 1, 0, 1000]
    return (
        f"{pid} ({comm}) " + " ".join(str(f) for f in [*fields, 4096000, rss, "18446744073709551615", 1, 1, 0]) + "\n"
    )


def fake_proc(root: pathlib.Path, busy: int = 1500, idle: int = 9000) -> pathlib.Path:
    """A /proc: node CPU busy/idle in USER_HZ, 16 GiB of memory, container 41 with child 42, and a
    process of something else."""
    root.mkdir(parents=True, exist_ok=True)
    # user nice system idle iowait irq softirq steal guest guest_nice
    (root / "stat").write_text(
        f"cpu  {busy - 300} 0 200 {idle} 77 50 50 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\nbtime 1700000000\n"
    )
    (root / "meminfo").write_text(
        "MemTotal:       16777216 kB\nMemFree:         4194304 kB\nMemAvailable:    8388608 kB\n"
        "Inactive(file):  2097152 kB\nAnonPages:       1048576 kB\n"
    )
    (root / "uptime").write_text("1000.00 3000.00\n")
    for pid, comm, ppid, times, rss in (
        (41, "sh -c (x) y", 1, (HZ, HZ // 2, 0, 0), 10),
        (42, "python3", 41, (HZ // 2, HZ // 2, HZ // 4, HZ // 4), 5),
        (43, "other", 1, (5 * HZ, 0, 0, 0), 100),
    ):
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(process_stat(pid, comm, ppid, *times, rss))
    return root


def fake_sys(root: pathlib.Path, online: str = "0-3\n") -> pathlib.Path:
    cpu = root / "devices/system/cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "online").write_text(online)
    return root


def test_a_process_stat_is_read_after_the_last_parenthesis_of_its_name():
    process = kubelet_stats.parse_process_stat(process_stat(41, "sh -c (x) y", 7, 1, 2, 3, 4, 9))
    assert process == kubelet_stats.Process(41, 7, 10, 9)
    real = kubelet_stats.parse_process_stat(pathlib.Path(f"/proc/{os.getpid()}/stat").read_text())
    assert real.pid == os.getpid() and real.ppid == os.getppid() and real.rss_pages > 0


def test_a_container_is_its_process_and_every_descendant(tmp_path):
    processes = kubelet_stats.read_processes(fake_proc(tmp_path))
    assert kubelet_stats.tree_usage(processes, 41) == (3.0, 15 * PAGE)
    assert kubelet_stats.tree_usage(processes, 42) == (1.5, 5 * PAGE)
    assert kubelet_stats.tree_usage(processes, 99) == (0.0, 0)  # gone


def test_node_figures_as_the_root_cgroup_has_them():
    stat = "cpu  100 20 30 1000 40 5 6 7 0 0\n"
    assert kubelet_stats.node_cpu_seconds(stat) == pytest.approx((100 + 20 + 30 + 5 + 6 + 7) / 100)
    with pytest.raises(ValueError, match="no cpu line"):
        kubelet_stats.node_cpu_seconds("intr 1\n")
    memory = kubelet_stats.node_memory(
        "MemTotal: 1000 kB\nMemFree: 200 kB\nMemAvailable: 500 kB\nInactive(file): 300 kB\nAnonPages: 100 kB\n"
    )
    assert memory["usageBytes"] == 800 * 1024 and memory["workingSetBytes"] == 500 * 1024
    assert memory["availableBytes"] == 500 * 1024 and memory["rssBytes"] == 100 * 1024
    assert kubelet_stats.cpulist_count("0-3,8,10-11\n") == 7 and kubelet_stats.cpulist_count("\n") == 0


def _runs(stress=None):
    return [
        kubelet_stats.PodRun(
            "ns", "web", "u-1", 1000.0, [kubelet_stats.ContainerRun("app", 41, 1010.0, "img:1", stress_args=stress)]
        )
    ]


def test_the_summary_gives_nano_cores_from_the_second_sample_on(tmp_path):
    proc = fake_proc(tmp_path / "proc", busy=1500)
    agent = iter([0.5, 0.75])  # the kubelet's own CPU seconds at each sample
    stats = kubelet_stats.Stats("n1", proc=proc, sys=fake_sys(tmp_path / "sys"), agent_cpu=lambda: next(agent))
    first = stats.summary(_runs(), 2000.0)
    assert first["node"]["cpu"]["usageCoreNanoSeconds"] == 15.5 * 10**9  # the load's, and the agent's
    assert "usageNanoCores" not in first["node"]["cpu"]  # one sample is no rate
    container = first["pods"][0]["containers"][0]
    assert container["cpu"]["usageCoreNanoSeconds"] == 3 * 10**9
    assert container["memory"]["workingSetBytes"] == 15 * PAGE
    assert container["startTime"] == "1970-01-01T00:16:50Z"
    assert first["pods"][0]["cpu"]["usageCoreNanoSeconds"] == 3 * 10**9
    assert first["node"]["memory"]["workingSetBytes"] == (16 - 4 - 2) * 2**30
    fake_proc(proc, busy=1700)  # two more core-seconds over the next ten seconds, and the agent's 0.25
    second = stats.summary(_runs(), 2010.0)
    assert second["node"]["cpu"]["usageNanoCores"] == 225_000_000  # 0.225 cores
    assert second["pods"][0]["containers"][0]["cpu"]["usageNanoCores"] == 0


def test_a_stress_container_counts_the_cpus_its_arguments_stress(tmp_path):
    stats = kubelet_stats.Stats(
        "n1", proc=fake_proc(tmp_path / "proc"), sys=fake_sys(tmp_path / "sys", "0-3\n"), agent_cpu=lambda: 0.0
    )
    # two workers at 50 % for the 990 s since the container started, plus its processes' 3 s
    summary = stats.summary(_runs(["--cpu", "2", "--cpu-load", "50"]), 2000.0)
    assert summary["pods"][0]["containers"][0]["cpu"]["usageCoreNanoSeconds"] == (990 + 3) * 10**9
    # --cpu 0 is every online CPU of the node
    summary = stats.summary(_runs(["--cpu", "0"]), 2000.0)
    assert summary["pods"][0]["containers"][0]["cpu"]["usageCoreNanoSeconds"] == (4 * 990 + 3) * 10**9


def test_resource_metrics_as_kubelet_writes_them(tmp_path):
    stats = kubelet_stats.Stats(
        "n1", proc=fake_proc(tmp_path / "proc"), sys=fake_sys(tmp_path / "sys"), agent_cpu=lambda: 0.0
    )
    runs = _runs()
    runs[0].name = 'we"b'
    text = kubelet_stats.resource_metrics(stats.summary(runs, 2000.25), 2000.25)
    lines = text.splitlines()
    families = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert families == sorted(families) and "resource_scrape_error" in families
    assert (
        "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds" in lines
    )
    assert "# TYPE container_cpu_usage_seconds_total counter" in lines
    assert 'container_cpu_usage_seconds_total{container="app",namespace="ns",pod="we\\"b"} 3 2000250' in lines
    assert 'container_start_time_seconds{container="app",namespace="ns",pod="we\\"b"} 1010' in lines
    assert "node_cpu_usage_seconds_total 15 2000250" in lines
    assert "resource_scrape_error 0" in lines
    # no figures: only the error, as kubelet's collector reports a failed summary
    assert kubelet_stats.resource_metrics(None).splitlines()[-1] == "resource_scrape_error 1"
    assert "node_cpu" not in kubelet_stats.resource_metrics(None)
