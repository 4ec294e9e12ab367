"""Unit tests of the collectd RAPL plugin's measurement logic (no collectd needed)."""

from __future__ import annotations

import errno
import os
import pathlib
import re

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_zones as pz
from poweraware_testing import load_module

REPO = pathlib.Path(__file__).resolve().parents[3]
PLUGIN = REPO / "roles" / "collectd" / "files" / "rapl_power.py"
ZONES_KEY = "ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones.py"

# As in the collectd pod, the plugin imports the collection's power_zones by its real name.
zones = pz
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


def test_discovery_finds_zones_the_kernel_numbers_in_hex(tmp_path):
    # powercap_sys.c names a zone "%s:%x" of its registration order: a 16-package node has
    # intel-rapl:0 .. intel-rapl:f (and psys intel-rapl:10), the lab's kernel model likewise.
    from lab import fake_sysfs

    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "intel_idle_uncore", packages=16)
    zones = rapl.discover_package_zones(str(sysfs / "devices/virtual/powercap/intel-rapl"))
    assert [(z.package, pathlib.Path(z.path).name) for z in zones] == [(p, f"intel-rapl:{p:x}") for p in range(16)]


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


# --- the TAS power demo's series (SeedSeriesNames) -------------------------------------------------
def test_seed_series_per_package_from_a_real_read(tmp_path):
    """Zones found by name, in the kernel's hex numbering: package 10 (intel-rapl:a) sorts after 2."""
    for index, directory in enumerate(("intel-rapl:0", "intel-rapl:1", "intel-rapl:2", "intel-rapl:a")):
        package = 10 if directory.endswith("a") else index
        make_zone(tmp_path, directory, f"package-{package}", tdp_uw=(index + 1) * 50_000_000)
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path), clock=clock)
    baseline = reader.read()
    # the first read is a baseline: TDP only, as ours
    assert rapl.seed_series(baseline) == [
        ("package_0_TDP_power", 50.0),
        ("package_1_TDP_power", 100.0),
        ("package_2_TDP_power", 150.0),
        ("package_10_TDP_power", 200.0),
    ]
    for directory, joules in (("intel-rapl:0", 30), ("intel-rapl:1", 40), ("intel-rapl:2", 50), ("intel-rapl:a", 60)):
        set_energy(tmp_path / directory, joules * 1_000_000)
    clock.now += 1
    assert rapl.seed_series(reader.read()) == [
        ("package_0_power", 30.0),
        ("package_0_TDP_power", 50.0),
        ("package_1_power", 40.0),
        ("package_1_TDP_power", 100.0),
        ("package_2_power", 50.0),
        ("package_2_TDP_power", 150.0),
        ("package_10_power", 60.0),
        ("package_10_TDP_power", 200.0),
    ]


def test_seed_series_sums_the_dies_of_a_package_and_never_reports_a_part():
    sample = rapl.Sample
    samples = [
        sample("package-0-die-0", 30.0, 100.0),
        sample("package-0-die-1", 20.0, 100.0),
        sample("package-1-die-0", 25.0, 100.0),
        sample("package-1-die-1", None, 100.0),  # unreadable or a baseline: package 1 has no power
        sample("package-2", 10.0, None),  # no TDP shown: no TDP series
        sample("psys", 99.0, 99.0),  # not a package
    ]
    assert rapl.seed_series(samples) == [
        ("package_0_power", 50.0),
        ("package_0_TDP_power", 200.0),
        ("package_1_TDP_power", 200.0),
        ("package_2_power", 10.0),
    ]
    assert rapl.seed_series([]) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        (" Yes ", True),
        ("on", True),
        ("1", True),
        ("false", False),
        ("OFF", False),
        ("0", False),
    ],
)
def test_config_bool(value, expected):
    assert rapl.config_bool(value) is expected


@pytest.mark.parametrize("value", ["maybe", "", "2", 2.5])
def test_config_bool_refuses_what_is_not_a_boolean(value):
    with pytest.raises(ValueError, match="expected true or false, got"):
        rapl.config_bool(value)


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
    """No copy: the plugin's discovery functions are power_zones' own objects."""
    for name in (
        "FileSystem",
        "discover_rapl_zones",
        "discover_hwmon",
        "hwmon_label_rules",
        "energy_delta_uj",
        "read_text",
    ):
        assert getattr(rapl, name) is getattr(zones, name), name
    assert "def discover_rapl_zones" not in PLUGIN.read_text()


def test_collectd_role_ships_the_code_the_plugin_imports():
    import yaml
    from ansible_collections.poweraware.k8s.plugins.filter.module_utils_closure import module_utils_closure

    deploy = yaml.safe_load((REPO / "roles/collectd/tasks/deploy.yml").read_text())
    facts = next(
        t["ansible.builtin.set_fact"] for t in deploy if "_collectd_plugin" in t.get("ansible.builtin.set_fact", {})
    )
    assert "'rapl_power.py', rstrip=false) | poweraware.k8s.module_utils_closure(" in facts["_collectd_code"]
    assert [f["path"].replace("/", ".") for f in module_utils_closure(PLUGIN.read_text())] == [ZONES_KEY]
    apply = next(t for t in deploy if t.get("name", "").startswith("Apply the collectd ConfigMap"))
    assert "'configmap.yml.j2'" in apply["poweraware.k8s.k8s_apply"]["template"]
    configmap = (REPO / "roles/collectd/templates/configmap.yml.j2").read_text()
    data = re.findall(r"^  ([\w.]+): \{\{", configmap.split("\ndata:\n", 1)[1], re.M)
    assert set(data) == {"collectd.conf", "rapl_power.py", "energy_reader.py"}
    assert "{% for file in _collectd_code %}\n  {{ file.path | replace('/', '.') }}: {{ file.content" in configmap
    daemonset = (REPO / "roles/collectd/templates/daemonset.yml.j2").read_text()
    assert (
        "{% for file in _collectd_code %}\n              - key: {{ file.path | replace('/', '.') }}\n"
        "                path: plugins/{{ file.path }}" in daemonset
    )
    assert "- key: energy_reader.py\n                path: plugins/energy_reader.py" in daemonset


def test_plugin_and_cpu_power_info_name_the_same_zones(tmp_path):
    from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import read_rapl
    from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import SysfsAccessor

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


def test_two_sockets_of_one_amd_energy_chip_keep_their_own_baselines(tmp_path):
    """amd_energy puts every socket's counter in one chip: each counter is its own baseline. Keyed by
    the chip's directory, the second socket's reading became the first's previous one (the real
    collectd showed 58.8 W for 61.5 and 23629 W for 73.25)."""
    chip = make_hwmon(
        tmp_path / "hwmon",
        "amd_energy",
        {"energy1_input": 5_000_000_000, "energy1_label": "Esocket0", "energy2_input": 9_000_000_000,
         "energy2_label": "Esocket1"},
    )  # fmt: skip
    clock = Clock()
    reader = rapl.RaplReader(str(tmp_path / "powercap"), clock=clock, hwmon_root=str(tmp_path / "hwmon"))
    assert [s.power_w for s in reader.read()] == [None, None]
    for _second in range(3):
        for attr, watts in (("energy1_input", 61.5), ("energy2_input", 73.25)):
            (chip / attr).write_text(f"{int((chip / attr).read_text()) + int(watts * 1e6)}\n")
        clock.now += 1.0
        assert [(s.zone, s.power_w) for s in reader.read()] == [("package-0", 61.5), ("package-1", 73.25)]


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


# --- power_zones called directly, as cpu_power_info calls it -----------------------------------------


@pytest.mark.parametrize(
    ("previous", "current", "max_range", "expected"),
    [
        (100, 350, 1000, 250),
        (5, 5, 1000, 0),  # unchanged is no wrap
        (900, 50, 1000, 150),
        (1000, 0, 1000, 0),  # previous at the top of the range is still inside it
        (1001, 0, 1000, None),
        (900, 50, 0, None),
        (900, 50, -1, None),
        (1, 0, 1, 0),  # the smallest known range
    ],
)
def test_power_zones_energy_delta(previous, current, max_range, expected):
    assert pz.energy_delta_uj(previous, current, max_range) == expected


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("package-0", (0, None)),
        ("package-12", (12, None)),
        ("package-1-die-0", (1, 0)),
        ("package-3-die-11", (3, 11)),
        ("psys", None),
        ("package-", None),
        ("package-0-die-", None),
        ("core", None),
        ("", None),
        (None, None),
    ],
)
def test_power_zones_parse_rapl_zone_name(name, parsed):
    assert pz.parse_rapl_zone_name(name) == parsed


def test_power_zones_zone_label_names_the_die_only_when_there_is_one():
    assert pz.zone_label(1) == "package-1"
    assert pz.zone_label(1, 0) == "package-1-die-0"
    assert pz.zone_label(0, 2) == "package-0-die-2"


def test_power_zones_file_system_reads_stripped_text_and_lists_sorted(tmp_path):
    (tmp_path / "b").write_text("  package-0 \n")
    (tmp_path / "a").mkdir()
    fs = pz.FileSystem()
    assert fs.listdir(str(tmp_path)) == ["a", "b"]
    assert fs.read(str(tmp_path / "b")) == "package-0"
    assert (fs.isdir(str(tmp_path / "a")), fs.isdir(str(tmp_path / "b"))) == (True, False)
    assert pz.FileSystem(read=str.upper).read("x") == "X"


def test_power_zones_discover_rapl_zones_in_directory_order(tmp_path):
    make_zone(tmp_path, "intel-rapl:1", "package-1-die-0")
    make_zone(tmp_path, "intel-rapl:0", "package-0")
    make_zone(tmp_path, "intel-rapl:2", "psys")
    make_zone(tmp_path, "intel-rapl:0:0", "core")
    make_zone(tmp_path, "intel-rapl-mmio:0", "package-0")
    (tmp_path / "intel-rapl:3").mkdir()  # no name: ignored
    (tmp_path / "intel-rapl").mkdir()
    zones, skipped = pz.discover_rapl_zones(pz.FileSystem(), str(tmp_path))
    assert zones == [
        {
            "zone": "intel-rapl:0",
            "path": str(tmp_path / "intel-rapl:0"),
            "name": "package-0",
            "package": 0,
            "die": None,
        },
        {
            "zone": "intel-rapl:1",
            "path": str(tmp_path / "intel-rapl:1"),
            "name": "package-1-die-0",
            "package": 1,
            "die": 0,
        },
    ]
    assert skipped == [{"zone": "intel-rapl:2", "name": "psys"}]
    assert pz.discover_rapl_zones(pz.FileSystem(), str(tmp_path / "absent")) == ([], [])


class FakeFs:
    """``fs`` from a dict of path -> text (a directory is a list of names); errors as values."""

    def __init__(self, files):
        self.files = files

    def listdir(self, path):
        value = self.files.get(path, FileNotFoundError(path))
        if isinstance(value, Exception):
            raise value
        if not isinstance(value, list):
            raise NotADirectoryError(path)
        return value

    def read(self, path):
        if path not in self.files:
            raise FileNotFoundError(path)
        value = self.files[path]
        if isinstance(value, Exception):
            raise value
        return value

    def isdir(self, path):
        return isinstance(self.files.get(path), list)


def test_power_zones_a_name_that_cannot_be_decoded_is_like_a_missing_one():
    fs = FakeFs(
        {
            "pc": ["intel-rapl:0", "intel-rapl:1", "intel-rapl:2"],
            "pc/intel-rapl:0/name": ValueError("not UTF-8"),
            "pc/intel-rapl:1/name": "psys",
            "pc/intel-rapl:2/name": "package-1",
        }
    )
    zones, skipped = pz.discover_rapl_zones(fs, "pc")
    assert [z["zone"] for z in zones] == ["intel-rapl:2"]
    assert skipped == [{"zone": "intel-rapl:1", "name": "psys"}]


def test_power_zones_amd_energy_sockets_sorted_by_package():
    fs = FakeFs(
        {
            "hw": ["hwmon0"],
            "hw/hwmon0": [
                "energy1_input",
                "energy1_label",
                "energy17_input",
                "energy17_label",
                "energy2_input",
                "energy2_label",
                "energy3_input",
                "temp1_input",
                "temp1_label",
                "name",
            ],
            "hw/hwmon0/name": "amd_energy",
            "hw/hwmon0/energy1_label": "Ecore000",
            "hw/hwmon0/energy17_label": "Esocket1",
            "hw/hwmon0/energy2_label": "Esocket0",
            "hw/hwmon0/temp1_label": "Esocket0",
        }
    )
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    assert sensors == [
        {
            "name": "package-0",
            "chip": "hwmon0",
            "path": "hw/hwmon0",
            "attr": "energy2_input",
            "kind": "energy",
            "driver": "amd_energy",
            "label": "Esocket0",
            "package": 0,
        },
        {
            "name": "package-1",
            "chip": "hwmon0",
            "path": "hw/hwmon0",
            "attr": "energy17_input",
            "kind": "energy",
            "driver": "amd_energy",
            "label": "Esocket1",
            "package": 1,
        },
    ]
    assert [(e["attr"], e["reason"]) for e in ignored] == [
        ("energy1_input", "class core (default rule), not package power"),
        ("energy3_input", "no label says what it measures; add a rule to count it as package power"),
    ]


def _by_package(sensors):
    return [(s["package"], s["chip"], s["attr"], s["label"]) for s in sensors]


def test_power_zones_every_sensor_of_one_chip_counts_each_socket():
    # SCMI (drivers/hwmon/scmi-hwmon.c) puts every firmware sensor in one chip, under the firmware's
    # names; a 2-socket node has one CPU sensor per socket, and not at channel 1 (the old discovery
    # read power1 only: socket 0, package power halved, no warning)
    fs = FakeFs(
        {
            "hw": ["hwmon0"],
            "hw/hwmon0": ["name"] + [f"power{n}_{f}" for n in range(1, 5) for f in ("input", "label")],
            "hw/hwmon0/name": "scmi_sensors",
            "hw/hwmon0/power1_label": "SysIO Power Socket 0",
            "hw/hwmon0/power2_label": "CPU Power Socket 0",
            "hw/hwmon0/power3_label": "SysIO Power Socket 1",
            "hw/hwmon0/power4_label": "CPU Power Socket 1",
        }
    )
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    assert _by_package(sensors) == [
        (0, "hwmon0", "power2_input", "CPU Power Socket 0"),
        (1, "hwmon0", "power4_input", "CPU Power Socket 1"),
    ]
    assert [s["name"] for s in sensors] == ["package-0", "package-1"]
    assert [(e["attr"], e["reason"]) for e in ignored] == [
        ("power1_input", "class io (default rule), not package power"),
        ("power3_input", "class io (default rule), not package power"),
    ]


def test_power_zones_unnumbered_sensors_count_packages_by_chip_number():
    # xgene-hwmon: one chip per socket, both labelled "CPU power"; hwmon10 comes after hwmon2
    chips = ["hwmon10", "hwmon2"]
    files = {"hw": chips}
    for chip in chips:
        files[f"hw/{chip}"] = ["name", "power1_input", "power1_label", "power2_input", "power2_label"]
        files[f"hw/{chip}/name"] = "apm_xgene"
        files[f"hw/{chip}/power1_label"] = "CPU power"
        files[f"hw/{chip}/power2_label"] = "IO power"
    sensors, ignored = pz.discover_hwmon(FakeFs(files), "hw")
    assert _by_package(sensors) == [
        (0, "hwmon2", "power1_input", "CPU power"),
        (1, "hwmon10", "power1_input", "CPU power"),
    ]
    assert [e["chip"] for e in ignored] == ["hwmon2", "hwmon10"]


def test_power_zones_one_sensor_per_package_energy_first_and_the_rest_named():
    fs = FakeFs(
        {
            "hw": ["hwmon0", "hwmon1", "hwmon2", "hwmon3", "hwmon4", "hwmon5"],
            # first chip: the energy counter wins over the power reading of the same package
            "hw/hwmon0": ["power1_input", "power1_label", "energy1_input", "energy1_label"],
            "hw/hwmon0/name": "xgene",
            "hw/hwmon0/power1_label": "CPU power",
            "hw/hwmon0/energy1_label": "SoC energy",
            "hw/hwmon1": ["name"],  # no name file content below: skipped
            "hw/hwmon2": OSError("gone"),
            "hw/hwmon2/name": "vanished",
            "hw/hwmon3": ["power1_average", "power1_label", "power1_input"],  # _input over _average
            "hw/hwmon3/name": "acpi_power",
            "hw/hwmon3/power1_label": "package",
            "hw/hwmon4": ["power1_input", "power1_label"],
            "hw/hwmon4/name": "other",
            "hw/hwmon4/power1_label": "CPUs",  # not the word cpu
            "hw/hwmon5": ["power1_input"],
            "hw/hwmon5/name": "nolabel",
        }
    )
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    assert _by_package(sensors) == [
        (0, "hwmon0", "energy1_input", "SoC energy"),
        (1, "hwmon3", "power1_input", "package"),
    ]
    assert [(e["chip"], e["attr"], e["reason"]) for e in ignored] == [
        ("hwmon0", "power1_input", "package 0 is read from hwmon0 energy1_input (SoC energy)"),
        ("hwmon4", "power1_input", "the label matches no hwmon_labels rule; add a rule to count it as package power"),
        ("hwmon5", "power1_input", "no label says what it measures; add a rule to count it as package power"),
    ]
    assert pz.discover_hwmon(fs, "absent") == ([], [])
    assert pz.discover_hwmon(FakeFs({"hw": OSError("no hwmon")}), "hw") == ([], [])


def test_power_zones_power_average_and_the_acpi_meter_oem_info():
    fs = FakeFs(
        {
            "hw": ["hwmon0", "hwmon1"],
            "hw/hwmon0": ["power1_average", "power1_label"],
            "hw/hwmon0/name": "acpi_power",
            "hw/hwmon0/power1_label": "Socket 1",
            # ACPI power meter (drivers/hwmon/acpi_power_meter.c): no label, the firmware's oem_info
            "hw/hwmon1": ["power1_average", "power1_oem_info", "power1_is_battery"],
            "hw/hwmon1/name": "power_meter",
            "hw/hwmon1/power1_oem_info": "CPU Power Socket 0",
        }
    )
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    assert [(s["package"], s["attr"], s["kind"], s["label"]) for s in sensors] == [
        (0, "power1_average", "power", "CPU Power Socket 0"),
        (1, "power1_average", "power", "Socket 1"),
    ]
    assert ignored == []


def test_power_zones_user_rules_go_first_and_bad_rules_are_all_named():
    fs = FakeFs(
        {
            "hw": ["hwmon0"],
            "hw/hwmon0": ["name", "power1_input", "power1_label", "power2_input", "power2_label"],
            "hw/hwmon0/name": "scmi_sensors",
            "hw/hwmon0/power1_label": "Grace Power Socket 0",
            "hw/hwmon0/power2_label": "CPU Power Socket \u00b2",  # not an ASCII digit: no socket number
        }
    )
    rules, problems = pz.hwmon_label_rules(
        [
            {"class": "package", "pattern": r"grace power socket (?P<package>\d+)"},
            {"class": "ignored_cpu", "pattern": "CPU Power.*"},
        ]
    )
    assert problems == []
    sensors, ignored = pz.discover_hwmon(fs, "hw", rules)
    assert _by_package(sensors) == [(0, "hwmon0", "power1_input", "Grace Power Socket 0")]
    assert [e["reason"] for e in ignored] == ["class ignored_cpu (hwmon_labels entry 2), not package power"]
    # a user's rule beats a default one for the same package, whatever the channel order
    fs.files["hw/hwmon0/power2_label"] = "CPU power"
    sensors, ignored = pz.discover_hwmon(fs, "hw", rules[:1] + pz.hwmon_label_rules()[0])
    assert _by_package(sensors) == [(0, "hwmon0", "power1_input", "Grace Power Socket 0")]
    assert [e["reason"] for e in ignored] == ["package 0 is read from hwmon0 power1_input (Grace Power Socket 0)"]
    fs.files["hw/hwmon0/power1_label"], fs.files["hw/hwmon0/power2_label"] = "CPU power", "Grace Power Socket 0"
    sensors, ignored = pz.discover_hwmon(fs, "hw", rules[:1] + pz.hwmon_label_rules()[0])
    assert _by_package(sensors) == [(0, "hwmon0", "power2_input", "Grace Power Socket 0")]
    fs.files["hw/hwmon0/power1_label"] = "Grace Power Socket 0"
    fs.files["hw/hwmon0/power2_label"] = "CPU Power Socket \u00b2"
    # the defaults alone: Grace module power is not package power, and "²" is no socket number
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    assert pz.classify_hwmon_label(pz.hwmon_label_rules()[0], "CPU Power Socket \u00b2") is None
    assert sensors == [] and [e["reason"] for e in ignored] == [
        "class module (default rule), not package power",
        "the label matches no hwmon_labels rule; add a rule to count it as package power",
    ]
    _rules, problems = pz.hwmon_label_rules(
        [
            {"class": "Package", "pattern": "("},
            {"pattern": "x"},
            {"class": "package", "pattern": r"(?P<socket>\d)"},
            "x",
        ]
    )
    example = r"{class: package, pattern: 'CPU Power Socket (?P<package>\d+)'}"
    assert problems == [
        "hwmon_labels entry 1: class 'Package' is not a lower-case word; use 'package' for package power, any other "
        "word (io, memory, ...) to leave the sensor out",
        "hwmon_labels entry 1: pattern '(' is not a regular expression (missing ), unterminated subpattern at "
        "position 0); fix or quote it",
        "hwmon_labels entry 2: {'pattern': 'x'} is not a mapping of exactly 'class' and 'pattern'; write e.g. "
        + example,
        r"hwmon_labels entry 3: pattern '(?P<socket>\\d)' has the named group(s) socket; the only named group "
        "read is (?P<package>...)",
        "hwmon_labels entry 4: 'x' is not a mapping of exactly 'class' and 'pattern'; write e.g. " + example,
    ]


def test_power_zones_find_power_source_prefers_rapl_then_hwmon():
    hwmon = {
        "hw": ["hwmon0"],
        "hw/hwmon0": ["power1_input", "power1_label"],
        "hw/hwmon0/name": "xgene",
        "hw/hwmon0/power1_label": "cpu",
    }
    psys = {"pc": ["intel-rapl:0"], "pc/intel-rapl:0/name": "psys"}
    package = {"pc": ["intel-rapl:0"], "pc/intel-rapl:0/name": "package-0"}
    rapl_found = pz.find_power_source(FakeFs({**package, **hwmon}), "pc", "hw")
    assert (rapl_found["source"], [z["name"] for z in rapl_found["zones"]], rapl_found["skipped"]) == (
        "rapl",
        ["package-0"],
        [],
    )
    assert rapl_found["ignored"] == []
    hwmon_found = pz.find_power_source(FakeFs({**psys, **hwmon}), "pc", "hw")
    assert (hwmon_found["source"], [z["path"] for z in hwmon_found["zones"]], hwmon_found["skipped"]) == (
        "hwmon",
        ["hw/hwmon0"],
        [{"zone": "intel-rapl:0", "name": "psys"}],
    )
    assert pz.find_power_source(FakeFs({**psys, "hw": []}), "pc", "hw") == {
        "source": None,
        "zones": [],
        "skipped": [{"zone": "intel-rapl:0", "name": "psys"}],
        "ignored": [],
    }


def test_power_zones_every_chip_is_looked_at_and_a_cpu_label_found_on_any_attribute():
    fs = FakeFs(
        {
            "hw": ["hwmon0", "hwmon1", "hwmon2", "hwmon3"],
            "hw/hwmon0": ["energy1_input", "energy1_label"],
            "hw/hwmon0/name": "amd_energy",
            "hw/hwmon0/energy1_label": "Esocket0",
            # the energy counter measures something else: the power reading labelled CPU is taken
            "hw/hwmon1": ["energy1_input", "energy1_label", "power1_input", "power1_label"],
            "hw/hwmon1/name": "soc_a",
            "hw/hwmon1/energy1_label": "IO energy",
            "hw/hwmon1/power1_label": "CPU power",
            "hw/hwmon2": ["power1_input", "power1_label"],
            "hw/hwmon2/name": "soc_b",
            "hw/hwmon2/power1_label": "SoC",
            "hw/hwmon3": ["power1_input", "power1_label"],
            "hw/hwmon3/name": "soc_c",
            "hw/hwmon3/power1_label": "socket 3",
        }
    )
    sensors, ignored = pz.discover_hwmon(fs, "hw")
    # unnumbered sensors count packages by chip (hwmon1, hwmon2); a numbered one keeps its number;
    # two claims on package 0: the energy counter wins and the other is named, not added twice
    assert [(s["path"], s["attr"], s["name"]) for s in sensors] == [
        ("hw/hwmon0", "energy1_input", "package-0"),
        ("hw/hwmon2", "power1_input", "package-1"),
        ("hw/hwmon3", "power1_input", "package-3"),
    ]
    assert [(e["chip"], e["reason"]) for e in ignored] == [
        ("hwmon1", "class io (default rule), not package power"),
        ("hwmon1", "package 0 is read from hwmon0 energy1_input (Esocket0)"),
    ]


class _FakeCollectd:
    """The calls rapl_power's collectd glue makes (collectd's python plugin API)."""

    def __init__(self):
        self.registered = {}
        self.logged = []

    def register_config(self, callback):
        self.registered["config"] = callback

    def register_init(self, callback):
        self.registered["init"] = callback

    def register_read(self, callback):
        self.registered["read"] = callback

    def __getattr__(self, level):  # info, warning, error
        return lambda message: self.logged.append((level, message))


class _Node:
    def __init__(self, key, *values):
        self.key, self.values, self.children = key, values, ()


def _glue(monkeypatch, *children):
    fake = _FakeCollectd()
    monkeypatch.setitem(__import__("sys").modules, "collectd", fake)
    plugin = load_module("rapl_power_glue", PLUGIN)
    config = _Node("Module")
    config.children = children
    fake.registered["config"](config)
    return plugin, fake


def test_collectd_hwmon_label_option_counts_and_refuses(monkeypatch, tmp_path):
    hwmon = tmp_path / "hwmon"
    make_hwmon(hwmon, "scmi_sensors", {"power1_input": 5000000, "power1_label": "Grace Power Socket 0",
                                       "power2_input": 7000000, "power2_label": "CPU Power Socket 0"})  # fmt: skip
    plugin, fake = _glue(
        monkeypatch,
        _Node("SysfsRoot", str(tmp_path / "powercap")),
        _Node("HwmonRoot", str(hwmon)),
        _Node("HwmonLabel", "package", r"grace power socket (?P<package>\d+)"),
    )
    fake.registered["init"]()
    ((sample),) = plugin._state["reader"].read()
    assert (sample.zone, sample.power_w) == ("package-0", 5.0)
    assert ("info", "rapl plugin: hwmon hwmon0 (scmi_sensors) power2_input 'CPU Power Socket 0' left out: package 0 "
            "is read from hwmon0 power1_input (Grace Power Socket 0)") in fake.logged  # fmt: skip
    plugin, fake = _glue(monkeypatch, _Node("HwmonLabel", "Package", "("))
    with pytest.raises(ValueError, match=r"^rapl plugin: HwmonLabel: hwmon_labels entry 1: class 'Package' is not"):
        fake.registered["init"]()


def test_a_sixteen_package_node_is_read_whole_by_the_plugin_and_the_facts(tmp_path):
    """lab/fake_sysfs.py many_packages: zones intel-rapl:0..f (hex, as powercap_sys.c names them) and
    psys registered last as intel-rapl:10; every package found, in package order, psys left out."""
    from lab import fake_sysfs

    sysfs = fake_sysfs.build_tree(tmp_path / "sys", "many_packages")
    powercap = sysfs / "class" / "powercap"
    plugin = rapl.discover_package_zones(str(powercap))
    assert [z.name for z in plugin] == [f"package-{n}" for n in range(16)]
    assert [os.path.basename(z.path) for z in plugin][10:12] == ["intel-rapl:a", "intel-rapl:b"]
    found = pz.find_power_source(pz.FileSystem(), str(powercap), str(sysfs / "class" / "hwmon"))
    assert found["source"] == "rapl" and [z["package"] for z in found["zones"]] == list(range(16))
    assert found["skipped"] == [{"zone": "intel-rapl:10", "name": "psys"}]
