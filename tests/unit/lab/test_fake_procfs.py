"""A lab node's /proc/stat (lab/fake_procfs.py): the kernel's format and rules, CPU time that follows
the meter's utilisation, online CPUs from the node's fake sysfs, a rebuilt file continued."""

from __future__ import annotations

import os
import stat

from test_node_power import FLAT, server

from lab import fake_procfs, fake_sysfs
from lab.components import node_power


def node(tmp_path, cpus=4):
    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active", cpus=cpus)
    path = fake_procfs.stat_path(sysfs)
    fake_procfs.power_on(path, sysfs, uptime_s=1000.0)
    return sysfs, path


def read_lines(path) -> dict[str, list[int]]:
    """An exporter's reading (collectd's cpu plugin, node_exporter): split on white space."""
    out = {}
    for line in path.read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu"):
            out[name] = [int(v) for v in values]
    return out


def busy_percent(before, after, name="cpu") -> float:
    """Utilisation as exporters compute it: 100 * (1 - delta idle / delta total)."""
    total = sum(after[name]) - sum(before[name])
    return 100.0 * (1 - (after[name][3] - before[name][3]) / total)


def test_power_on_is_the_kernels_format_all_idle_since_boot(tmp_path):
    _sysfs, path = node(tmp_path)
    text = path.read_text()
    assert text.startswith("cpu  ")  # the kernel pads the sum line's name to five characters
    lines = read_lines(path)
    assert sorted(lines) == ["cpu", "cpu0", "cpu1", "cpu2", "cpu3"]
    assert all(len(v) == 10 for v in lines.values())  # user .. guest_nice
    assert lines["cpu0"] == [0, 0, 0, 100_000, 0, 0, 0, 0, 0, 0]  # 1000 s at USER_HZ 100
    assert lines["cpu"][3] == 4 * 100_000
    assert "\nbtime " in text and "\nctxt " in text and text.endswith("\n")  # this machine's
    assert stat.S_IMODE(path.stat().st_mode) == 0o444


def test_cpu_time_follows_the_utilisation_on_every_online_cpu(tmp_path):
    sysfs, path = node(tmp_path)
    times = fake_procfs.CpuTimes(path, sysfs)
    before = read_lines(path)
    for _tick in range(100):  # 10 s at 25 %, in the meter's ticks
        times.advance(0.1, 25.0)
    after = read_lines(path)
    assert busy_percent(before, after) == 25.0
    for cpu in ("cpu0", "cpu3"):
        assert after[cpu][0] - before[cpu][0] == 250 and after[cpu][3] - before[cpu][3] == 750
    assert after["cpu"] == [sum(after[f"cpu{i}"][k] for i in range(4)) for k in range(10)]


def test_fractions_of_a_jiffy_are_kept_not_lost(tmp_path):
    sysfs, path = node(tmp_path)
    times = fake_procfs.CpuTimes(path, sysfs)
    before = read_lines(path)
    for _tick in range(1000):  # 0.001 s each: a tenth of a jiffy, 1 s in all at 70 %
        times.advance(0.001, 70.0)
    after = read_lines(path)
    assert after["cpu0"][0] - before["cpu0"][0] == 70 and after["cpu0"][3] - before["cpu0"][3] == 30


def test_an_offline_cpu_leaves_its_line_but_not_the_sum(tmp_path):
    sysfs, path = node(tmp_path)
    times = fake_procfs.CpuTimes(path, sysfs)
    times.advance(10.0, 50.0)
    kept = read_lines(path)["cpu3"]
    (sysfs / "devices/system/cpu/online").write_text("0-2\n")
    times.advance(10.0, 50.0)
    lines = read_lines(path)
    assert "cpu3" not in lines  # fs/proc/stat.c prints online CPUs only ...
    assert lines["cpu"] == [sum(v[k] for v in (lines["cpu0"], lines["cpu1"], lines["cpu2"], kept)) for k in range(10)]
    assert path.read_text() == fake_procfs.render(
        {**{i: lines[f"cpu{i}"] for i in range(3)}, 3: kept}, [0, 1, 2], fake_procfs.parse(path.read_text())[1]
    )  # ... and sums every CPU; the shorter text left no stale tail


def test_a_file_rebuilt_at_power_on_is_continued_from_its_new_values(tmp_path):
    sysfs, path = node(tmp_path)
    times = fake_procfs.CpuTimes(path, sysfs)
    times.advance(100.0, 100.0)
    assert read_lines(path)["cpu0"][0] == 10_000
    fake_procfs.power_on(path, sysfs, uptime_s=5.0)  # a reboot: a new file, counters from boot
    times.advance(1.0, 100.0)
    assert read_lines(path)["cpu0"][:4] == [100, 0, 0, 500]


def test_the_meter_counts_cpu_time_at_the_utilisation_it_draws_power_for(tmp_path):
    sysfs, path = node(tmp_path)
    meter = node_power.Meter("w1", server("s", 1, FLAT), sysfs, util=40.0)
    before = read_lines(path)
    for _tick in range(50):
        meter.advance(0.1)
    assert busy_percent(before, read_lines(path)) == 40.0


def test_no_file_no_writes(tmp_path):
    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "intel_pstate_active", cpus=2)
    times = fake_procfs.CpuTimes(fake_procfs.stat_path(sysfs), sysfs)
    times.advance(1.0, 50.0)
    assert not os.path.exists(fake_procfs.stat_path(sysfs))
