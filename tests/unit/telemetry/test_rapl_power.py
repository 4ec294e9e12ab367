"""Unit tests of the collectd RAPL plugin's measurement logic (no collectd needed)."""

from __future__ import annotations

import errno
import pathlib

import pytest
from poweraware_testing import load_module

REPO = pathlib.Path(__file__).resolve().parents[3]
PLUGIN = REPO / "roles" / "collectd" / "files" / "rapl_power.py"
ZONES = REPO / "plugins" / "module_utils" / "_power_zones.py"


# As in the collectd pod: _power_zones.py sits beside the plugin and imports as a top-level module.
zones = load_module("_power_zones", ZONES)
rapl = load_module("rapl_power", PLUGIN)

BIG = 262_143_328_850


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make_zone(root: pathlib.Path, directory: str, name: str, energy: int = 0, tdp_uw=150_000_000, max_range=BIG):
    d = root / directory
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    if tdp_uw is not None:
        (d / "constraint_0_max_power_uw").write_text(f"{tdp_uw}\n")
    return d


def set_energy(zone_dir: pathlib.Path, value: int):
    (zone_dir / "energy_uj").write_text(f"{value}\n")


class Log:
    def __init__(self):
        self.lines = []

    def __call__(self, level, message):
        self.lines.append((level, message))


# --- energy_delta_uj ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("previous", "current", "max_range", "expected"),
    [
        (100, 350, 1000, 250),  # no wrap
        (900, 50, 1000, 150),  # wrap: 100 to the top, 50 after it
        (1000, 0, 1000, 0),  # exactly at the top, then zero
        (5, 5, 1000, 0),
        (900, 50, 0, None),  # went backwards, range unknown
        (2000, 50, 1000, None),  # previous outside the range: nonsense
    ],
)
def test_energy_delta(previous, current, max_range, expected):
    assert rapl.energy_delta_uj(previous, current, max_range) == expected


# --- discovery --------------------------------------------------------------------------------------
def test_discovery_by_zone_name_not_directory_index(tmp_path):
    make_zone(tmp_path, "intel-rapl:0", "package-1")
    make_zone(tmp_path, "intel-rapl:1", "package-0")
    make_zone(tmp_path, "intel-rapl:2", "psys")
    make_zone(tmp_path, "intel-rapl:0:0", "core")
    make_zone(tmp_path, "intel-rapl:0:1", "dram")
    make_zone(tmp_path, "intel-rapl-mmio:0", "package-0")
    (tmp_path / "intel-rapl").mkdir()  # the control type directory itself
    zones = rapl.discover_package_zones(str(tmp_path))
    assert [(z.name, pathlib.Path(z.path).name, z.package, z.die) for z in zones] == [
        ("package-0", "intel-rapl:1", 0, None),
        ("package-1", "intel-rapl:0", 1, None),
    ]


def test_discovery_multi_die_and_many_packages(tmp_path):
    index = 0
    for pkg in range(4):
        for die in range(2):
            make_zone(tmp_path, f"intel-rapl:{index}", f"package-{pkg}-die-{die}")
            index += 1
    zones = rapl.discover_package_zones(str(tmp_path))
    assert len(zones) == 8
    assert [(z.package, z.die) for z in zones] == [(p, d) for p in range(4) for d in range(2)]


def test_discovery_missing_root_is_empty(tmp_path):
    assert rapl.discover_package_zones(str(tmp_path / "absent")) == []


def test_no_zones_logs_a_warning(tmp_path):
    log = Log()
    assert rapl.RaplReader(str(tmp_path), log=log).read() == []
    assert log.lines[0][0] == "warning" and "no RAPL package zones" in log.lines[0][1]


# --- reader -----------------------------------------------------------------------------------------
def test_first_read_is_baseline_then_power(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0", energy=5_000_000, tdp_uw=165_000_000)
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock)
    (first,) = reader.read()
    assert first.zone == "package-0" and first.power_w is None and first.tdp_w == 165.0
    set_energy(z0, 5_000_000 + 120_000_000)  # 120 J in 2 s
    clock.now += 2.0
    (second,) = reader.read()
    assert second.power_w == pytest.approx(60.0)
    assert second.tdp_w == 165.0


def test_power_across_wrap(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0", energy=990_000, max_range=1_000_000)
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock)
    reader.read()
    set_energy(z0, 40_000)  # 10_000 to the top + 40_000 = 0.05 J
    clock.now += 0.001
    (sample,) = reader.read()
    assert sample.power_w == pytest.approx(50.0)


def test_backwards_without_range_is_a_new_baseline(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0", energy=990_000, max_range=0)
    clock, log = Clock(), Log()
    reader = rapl.RaplReader(str(tmp_path), clock=clock, log=log)
    reader.read()
    set_energy(z0, 40_000)
    clock.now += 1
    assert reader.read()[0].power_w is None
    assert any("new baseline" in m for _lvl, m in log.lines)
    set_energy(z0, 1_040_000)
    clock.now += 1
    assert reader.read()[0].power_w == pytest.approx(1.0)


def test_zero_elapsed_gives_no_power(tmp_path):
    make_zone(tmp_path, "intel-rapl:0", "package-0", energy=1)
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock)
    reader.read()
    assert reader.read()[0].power_w is None


def test_uses_the_monotonic_clock_by_default():
    import time

    assert rapl.RaplReader().clock is time.monotonic


def test_missing_tdp_is_none(tmp_path):
    make_zone(tmp_path, "intel-rapl:0", "package-0", tdp_uw=None)
    assert rapl.RaplReader(str(tmp_path), clock=Clock()).read()[0].tdp_w is None


def test_four_packages_each_measured(tmp_path):
    dirs = [make_zone(tmp_path, f"intel-rapl:{i}", f"package-{i}", energy=0) for i in range(4)]
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock)
    reader.read()
    for i, d in enumerate(dirs):
        set_energy(d, (i + 1) * 10_000_000)
    clock.now += 1
    assert [round(s.power_w, 6) for s in reader.read()] == [10.0, 20.0, 30.0, 40.0]


def _denying_reader(denied_path, err=errno.EACCES):
    def read_text(path):
        if path == denied_path:
            raise PermissionError(err, "Permission denied", path)
        return rapl._read_text(path)

    return read_text


def test_unreadable_energy_is_logged_once_with_the_privilege_needed(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0", energy=10)
    denied = str(z0 / "energy_uj")
    log = Log()
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock, log=log, read_text=_denying_reader(denied))
    for _attempt in range(3):
        clock.now += 1
        (sample,) = reader.read()
        assert sample.power_w is None
        assert sample.tdp_w == 150.0  # TDP is world-readable and still exported
    errors = [m for lvl, m in log.lines if lvl == "error"]
    assert len(errors) == 1
    assert denied in errors[0]
    assert "CVE-2020-8694" in errors[0] and "energy reader" in errors[0] and "root" in errors[0]


def test_readable_again_restarts_from_a_baseline(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0", energy=10)
    denied = {"path": str(z0 / "energy_uj")}

    def read_text(path):
        if path == denied["path"]:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return rapl._read_text(path)

    log, clock = Log(), Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock, log=log, read_text=read_text)
    reader.read()
    denied["path"] = None
    clock.now += 1
    assert reader.read()[0].power_w is None  # baseline again, not a delta against stale data
    set_energy(z0, 1_000_010)
    clock.now += 1
    assert reader.read()[0].power_w == pytest.approx(1.0)
    assert any("readable again" in m for _lvl, m in log.lines)


def test_other_read_errors_are_logged_plainly(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0")
    denied = str(z0 / "energy_uj")

    def read_text(path):
        if path == denied:
            raise OSError(errno.ENODATA, "No data available", path)
        return rapl._read_text(path)

    log = Log()
    rapl.RaplReader(str(tmp_path), clock=Clock(), log=log, read_text=read_text).read()
    errors = [m for lvl, m in log.lines if lvl == "error"]
    assert len(errors) == 1 and "No data available" in errors[0] and "CVE" not in errors[0]


def test_garbage_counter_is_reported(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", "package-0")
    (z0 / "energy_uj").write_text("garbage\n")
    log = Log()
    (sample,) = rapl.RaplReader(str(tmp_path), clock=Clock(), log=log).read()
    assert sample.power_w is None
    assert any(lvl == "error" and "unexpected content" in m for lvl, m in log.lines)


# --- one implementation of zone discovery, shared with cpu_power_info ---------------------------
def test_plugin_uses_the_module_utils_discovery_itself():
    """No copy: the plugin's discovery functions are _power_zones' own objects."""
    for name in ("FileSystem", "discover_rapl_zones", "discover_hwmon_sensors", "energy_delta_uj", "read_text"):
        assert getattr(rapl, name) is getattr(zones, name), name
    assert "def discover_rapl_zones" not in PLUGIN.read_text()


def test_collectd_role_ships_power_zones_beside_the_plugin():
    import yaml

    deploy = yaml.safe_load((REPO / "roles/collectd/tasks/deploy.yml").read_text())
    facts = next(
        t["ansible.builtin.set_fact"] for t in deploy if "_collectd_plugin" in t.get("ansible.builtin.set_fact", {})
    )
    assert "plugins/module_utils/_power_zones.py" in facts["_collectd_power_zones"]
    configmap = next(t for t in deploy if t.get("name", "").startswith("Apply the collectd ConfigMap"))
    data = configmap["poweraware.k8s.k8s_apply"]["definition"]["data"]
    assert set(data) == {"collectd.conf", "rapl_power.py", "_power_zones.py", "energy_reader.py"}
    daemonset = (REPO / "roles/collectd/templates/daemonset.yml.j2").read_text()
    assert "- key: _power_zones.py\n                path: plugins/_power_zones.py" in daemonset
    assert "- key: energy_reader.py\n                path: plugins/energy_reader.py" in daemonset


def test_plugin_and_cpu_power_info_name_the_same_zones(tmp_path):
    from ansible_collections.poweraware.k8s.plugins.module_utils._cpu_topology import read_rapl
    from ansible_collections.poweraware.k8s.plugins.module_utils._sysfs import SysfsAccessor

    powercap = tmp_path / "class" / "powercap"
    make_zone(powercap, "intel-rapl:0", "package-1-die-0")
    make_zone(powercap, "intel-rapl:1", "package-0")
    make_zone(powercap, "intel-rapl:2", "psys")
    facts = read_rapl(SysfsAccessor(str(tmp_path)))
    plugin = rapl.discover_package_zones(str(powercap))
    assert sorted(z["name"] for z in facts["zones"]) == sorted(z.name for z in plugin)
    assert facts["skipped"] == [{"zone": "intel-rapl:2", "name": "psys"}]


def make_hwmon(root: pathlib.Path, name: str, files: dict):
    d = root / "hwmon0"
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    for attr, value in files.items():
        (d / attr).write_text(f"{value}\n")
    return d


def test_amd_energy_sockets_without_rapl(tmp_path):
    powercap = tmp_path / "class" / "powercap"
    powercap.mkdir(parents=True)
    chip = make_hwmon(
        tmp_path / "class" / "hwmon",
        "amd_energy",
        {"energy1_input": 10, "energy1_label": "Ecore000", "energy2_input": 0, "energy2_label": "Esocket0"},
    )
    clock = Clock()
    reader = rapl.RaplReader(str(powercap), clock=clock)  # hwmon found beside class/powercap
    assert reader.hwmon_root == str(tmp_path / "class" / "hwmon")
    assert [s.power_w for s in reader.read()] == [None]  # baseline
    (chip / "energy2_input").write_text("90000000\n")
    clock.now += 1.0
    (sample,) = reader.read()
    assert (sample.zone, sample.power_w, sample.tdp_w) == ("package-0", 90.0, None)


def test_platform_power_sensor_without_rapl(tmp_path):
    hwmon = tmp_path / "hwmon"
    make_hwmon(hwmon, "apm_xgene", {"power1_input": 14760000, "power1_label": "CPU power", "power2_input": 1,
                                    "power2_label": "IO power"})  # fmt: skip
    reader = rapl.RaplReader(str(tmp_path / "powercap"), clock=Clock(), hwmon_root=str(hwmon))
    (sample,) = reader.read()
    assert (sample.zone, sample.power_w) == ("package-0", 14.76)  # instantaneous: no baseline


def test_rapl_wins_over_hwmon(tmp_path):
    powercap = tmp_path / "class" / "powercap"
    make_zone(powercap, "intel-rapl:0", "package-0")
    make_hwmon(tmp_path / "class" / "hwmon", "apm_xgene", {"power1_input": 1, "power1_label": "CPU power"})
    assert [
        z.value_file for z in rapl.discover_package_zones(str(powercap), hwmon_root=str(tmp_path / "class/hwmon"))
    ] == ["energy_uj"]
