"""collectd python plugin: package power and TDP per CPU package (RAPL powercap, or hwmon).

Reads the powercap sysfs interface (Documentation/power/powercap/powercap.rst) and dispatches,
for every package zone, two gauges of collectd type ``power`` (watts):

* ``rapl/<zone>/power-package``: average package power since the previous read,
* ``rapl/<zone>/power-tdp``: the zone's TDP, ``constraint_0_max_power_uw``.

write_prometheus exports them as ``collectd_rapl_power{rapl="<zone>",type="package"|"tdp"}``.

With ``SeedSeriesNames true`` it also dispatches, per package, the series the TAS power demo's
plugin (barometer's pkgpower.py) dispatched and the demo's recording rules are written on: plugin
``package_<N>_power`` and ``package_<N>_TDP_power``, type ``power``, no instances, which
write_prometheus exports as ``collectd_package_<N>_power_power`` and
``collectd_package_<N>_TDP_power_power`` (``seed_series``).

Where RAPL powercap has no package zone (many AMD and ARM servers) the package power comes from
hwmon instead, under the same zone names (``package-N``): the ``amd_energy`` socket counters
(``Esocket<N>``), or a platform driver's ``energy1_input`` / ``power1_input`` labelled as the CPU
or SoC. Zone discovery and naming are the collection's ``plugins/module_utils/node_power/power_zones.py``,
the same code ``cpu_power_info`` uses, imported by its real name from the package tree the collectd
role ships under the plugin directory.

It fixes the known defects of the upstream power demo's plugin:

* packages are found by RAPL zone *name* (``package-N`` or ``package-N-die-M``), not by NUMA
  node id (NUMA nodes and packages are not the same thing: sub-NUMA clustering, CPU-less nodes);
* ``psys`` (platform) zones and anything that is not a package are skipped, as are the
  ``intel-rapl-mmio`` duplicates of the package zones;
* the energy counter wraps at ``max_energy_range_uj``: the delta across a wrap is
  ``energy + (max_energy_range_uj - previous)``;
* the first read of a zone is only a baseline: no power is reported until a second read;
* elapsed time comes from a monotonic clock, so wall-clock jumps do not produce bogus power;
* ``energy_uj`` is readable by root only since Linux 5.10 (CVE-2020-8694); when it cannot be
  read the plugin logs one clear error per zone naming the file and the privilege it needs
  (root, or the energy reader) instead of failing silently. With ``EnergySocket`` the plugin
  asks energy_reader.py (a separate root-owned process, same directory) for each ``energy_uj``,
  so collectd itself runs unprivileged; every other file is world-readable and read directly.

The measurement logic (``RaplReader``, ``energy_delta_uj``, ``discover_package_zones``) does not
import collectd, so it is unit-tested directly. The module must stay compatible with the Python
that collectd embeds, from 3.6 (an older image's) to Debian 12's 3.11: no
``from __future__ import annotations`` (a SyntaxError before 3.7), checked by the unit tests.

collectd configuration::

    <Plugin python>
      ModulePath "/dir/with/this/file"  # and ansible_collections/.../node_power/power_zones.py under it
      Import "rapl_power"
      <Module rapl_power>
        SysfsRoot "/sys/class/powercap"   # optional, for tests
        HwmonRoot "/sys/class/hwmon"      # optional; default: class/hwmon beside a .../class/powercap root
        EnergySocket "/run/poweraware-energy/energy.sock"  # optional: energy_uj through energy_reader.py
        SeedSeriesNames true              # optional (default false): the power demo's series too
        HwmonLabel "package" "CPU Power Socket (?P<package>\\d+)"  # optional, repeatable: label rules
                                          # tried before power_zones.DEFAULT_HWMON_LABELS
      </Module>
    </Plugin>
"""

import errno
import os
import time

# Zone discovery and naming are the collection's plugins/module_utils/node_power/power_zones.py, the same
# code cpu_power_info uses: the collectd role ships it in the same ConfigMap, as the package tree under
# the plugin directory, which collectd's python plugin puts on sys.path through ModulePath.
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import (
    FileSystem,
    discover_hwmon,
    discover_rapl_zones,
    energy_delta_uj,
    hwmon_label_rules,
    parse_rapl_zone_name,
    read_text,
)

PLUGIN_NAME = "rapl"
DEFAULT_SYSFS_ROOT = "/sys/class/powercap"

PRIVILEGE_HINT = (
    "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694): read it through the energy "
    "reader running as uid 0 (EnergySocket, the collectd role's default), or run collectd as root"
)


READER_HINT = (
    "the energy reader (uid 0 without capabilities) reads only the energy_uj files root owns, as the "
    "kernel makes them (CVE-2020-8694): check the file's owner on the node"
)


class PackageZone:
    """One package zone: a RAPL zone (a package, or one die of a multi-die package), or a hwmon sensor."""

    __slots__ = ("name", "path", "package", "die", "value_file", "kind")

    def __init__(self, name, path, package, die=None, value_file="energy_uj", kind="energy"):
        self.name = name
        self.path = path
        self.package = package
        self.die = die
        self.value_file = value_file
        self.kind = kind  # "energy" (a microjoule counter) or "power" (microwatts now)

    @property
    def counter(self):
        """The file read for the zone: a reading, and the key of its previous one."""
        return os.path.join(self.path, self.value_file)

    def __repr__(self):
        return "PackageZone(%r, %r)" % (self.name, self.path)


class Sample:
    """What one read produced for one zone. ``power_w`` is None for a baseline read."""

    __slots__ = ("zone", "power_w", "tdp_w")

    def __init__(self, zone, power_w, tdp_w):
        self.zone = zone
        self.power_w = power_w
        self.tdp_w = tdp_w

    def __repr__(self):
        return "Sample(%r, power_w=%r, tdp_w=%r)" % (self.zone, self.power_w, self.tdp_w)


_read_text = read_text


def _sorted(zones):
    zones.sort(key=lambda z: (z.package, -1 if z.die is None else z.die))
    return zones


def discover_package_zones(root, read_text=_read_text, hwmon_root=None, rules=None, ignored=None):
    """Package zones under ``root`` (RAPL powercap), by zone name, sorted by (package, die).

    Without RAPL package zones, the hwmon sensors under ``hwmon_root`` classified by ``rules``
    (``power_zones``); the sensors left out are appended to ``ignored`` when it is a list.
    """
    fs = FileSystem(read_text)
    zones, _skipped = discover_rapl_zones(fs, root)
    if zones:
        return _sorted([PackageZone(z["name"], z["path"], z["package"], z["die"]) for z in zones])
    if not hwmon_root:
        return []
    sensors, left_out = discover_hwmon(fs, hwmon_root, rules)
    if ignored is not None:
        ignored.extend(left_out)
    return _sorted([PackageZone(s["name"], s["path"], s["package"], None, s["attr"], s["kind"]) for s in sensors])


def default_hwmon_root(root):
    """``/sys/class/hwmon`` beside a ``.../class/powercap`` root; None for any other root (tests)."""
    parent, base = os.path.split(os.path.normpath(root))
    return os.path.join(parent, "hwmon") if base == "powercap" and parent.endswith("class") else None


class RaplReader:
    """Stateful reader: keeps the previous (energy, time) per zone and turns deltas into watts."""

    def __init__(
        self, root=DEFAULT_SYSFS_ROOT, clock=time.monotonic, log=None, read_text=_read_text, hwmon_root="", rules=None
    ):
        self.root = root
        self.rules = rules
        self.hwmon_root = default_hwmon_root(root) if hwmon_root == "" else hwmon_root
        self.clock = clock
        self.log = log or (lambda level, message: None)
        self.read_text = read_text
        # Keyed by the counter's file, not the zone's directory: one hwmon chip holds the counters
        # of several packages (amd_energy: Esocket0, Esocket1, ...), and keyed by the chip they
        # took each other's previous reading (one socket's power shrank, the other's grew by
        # kilowatts).
        self._previous = {}  # counter file -> (energy, timestamp)
        self._unreadable = set()  # counter files that could not be read (logged once)
        self._zones = None

    def zones(self):
        if self._zones is None:
            ignored = []
            self._zones = discover_package_zones(self.root, self.read_text, self.hwmon_root, self.rules, ignored)
            for sensor in ignored:
                self.log(
                    "info",
                    "hwmon %s (%s) %s %r left out: %s"
                    % (sensor["chip"], sensor["driver"], sensor["attr"], sensor["label"], sensor["reason"]),
                )
            if self._zones:
                where = self.root if self._zones[0].value_file == "energy_uj" else self.hwmon_root
                self.log("info", "package zones under %s: %s" % (where, ", ".join(z.name for z in self._zones)))
            else:
                self.log(
                    "warning",
                    "no RAPL package zones under %s and no hwmon package sensor (is the intel_rapl driver loaded?)"
                    % self.root,
                )
        return self._zones

    def _read_int(self, path):
        return int(self.read_text(path))

    def _value(self, zone):
        path = zone.counter
        try:
            value = self._read_int(path)
        except OSError as exc:
            if path not in self._unreadable:
                self._unreadable.add(path)
                if exc.errno in (errno.EACCES, errno.EPERM):
                    hint = READER_HINT if "energy reader" in str(exc) else PRIVILEGE_HINT
                    self.log("error", "cannot read %s (%s): %s" % (path, os.strerror(exc.errno), hint))
                else:
                    self.log("error", "cannot read %s: %s" % (path, exc))
            self._previous.pop(path, None)
            return None
        except ValueError:
            self.log("error", "unexpected content in %s" % path)
            self._previous.pop(path, None)
            return None
        if path in self._unreadable:
            self._unreadable.discard(path)
            self.log("info", "%s is readable again" % path)
        return value

    def _optional_int(self, path):
        try:
            return self._read_int(path)
        except (OSError, ValueError):
            return None

    def _power(self, zone, energy, now):
        previous = self._previous.get(zone.counter)
        self._previous[zone.counter] = (energy, now)
        if previous is None:
            return None
        prev_energy, prev_time = previous
        elapsed = now - prev_time
        max_range = self._optional_int(os.path.join(zone.path, "max_energy_range_uj")) or 0
        delta = energy_delta_uj(prev_energy, energy, max_range)
        if delta is None:
            self.log("warning", "%s: energy counter went backwards without a known range; new baseline" % zone.name)
            return None
        return delta / 1e6 / elapsed if elapsed > 0 else None

    def read(self):
        """One pass over all package zones; returns a list of Sample."""
        samples = []
        for zone in self.zones():
            tdp_uw = self._optional_int(os.path.join(zone.path, "constraint_0_max_power_uw"))
            tdp_w = tdp_uw / 1e6 if tdp_uw and zone.value_file == "energy_uj" else None
            value = self._value(zone)
            now = self.clock()
            if value is None:
                samples.append(Sample(zone.name, None, tdp_w))
            elif zone.kind == "power":  # hwmon power sensor: microwatts now, no baseline needed
                samples.append(Sample(zone.name, value / 1e6, tdp_w))
            else:
                samples.append(Sample(zone.name, self._power(zone, value, now), tdp_w))
        return samples


def seed_series(samples):
    """The TAS power demo's series for one read's ``samples``: ``[(plugin, watts)]``, package by
    package, ``package_<N>_power`` then ``package_<N>_TDP_power`` (collectd type ``power``).

    A package of several dies reports their sum (each die zone draws and is limited on its own);
    a package whose zones did not all give power this read (the first, baseline read; an unreadable
    counter) has no power series this time, and one whose zones do not all show a TDP has no TDP
    series: a part is never passed off as the whole package.
    """
    packages = {}
    for sample in samples:
        parsed = parse_rapl_zone_name(sample.zone)
        if parsed is not None:
            packages.setdefault(parsed[0], []).append(sample)
    series = []
    for package in sorted(packages):
        parts = packages[package]
        if all(part.power_w is not None for part in parts):
            series.append(("package_%d_power" % package, sum(part.power_w for part in parts)))
        if all(part.tdp_w is not None for part in parts):
            series.append(("package_%d_TDP_power" % package, sum(part.tdp_w for part in parts)))
    return series


def config_bool(value):
    """A collectd boolean option's value: ``true``/``false`` unquoted arrive as bool; quoted, as text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError("expected true or false, got %r" % (value,))


# --- collectd glue: only runs inside collectd's python plugin ---------------------------------
try:  # pragma: no cover - exercised by tests/integration/test_collectd_rapl.py with real collectd
    import collectd  # type: ignore[import-not-found]
except ImportError:  # imported by the unit tests
    collectd = None

_state = {
    "root": DEFAULT_SYSFS_ROOT,
    "hwmon_root": "",
    "energy_socket": "",
    "hwmon_labels": [],
    "seed_names": False,
    "config_problems": [],
    "reader": None,
}


def _collectd_log(level, message):
    getattr(collectd, level)("%s plugin: %s" % (PLUGIN_NAME, message))


def _configure(config):
    for child in config.children:
        key = child.key.lower()
        if key == "sysfsroot" and child.values:
            _state["root"] = str(child.values[0])
        elif key == "hwmonroot" and child.values:
            _state["hwmon_root"] = str(child.values[0])
        elif key == "hwmonlabel" and len(child.values) == 2:  # HwmonLabel "<class>" "<pattern>"
            _state["hwmon_labels"].append({"class": str(child.values[0]), "pattern": str(child.values[1])})
        elif key == "energysocket" and child.values:
            _state["energy_socket"] = str(child.values[0])
        elif key == "seedseriesnames" and len(child.values) == 1:
            try:
                _state["seed_names"] = config_bool(child.values[0])
            except ValueError as err:  # refused at init, as a bad HwmonLabel is
                _state["config_problems"].append("SeedSeriesNames: %s" % err)
        else:
            collectd.warning("%s plugin: unknown option %s" % (PLUGIN_NAME, child.key))


def _init():
    if _state["config_problems"]:
        raise ValueError("%s plugin: %s" % (PLUGIN_NAME, "; ".join(_state["config_problems"])))
    rules, problems = hwmon_label_rules(_state["hwmon_labels"])
    if problems:  # refuse to start rather than count the wrong sensors
        raise ValueError("%s plugin: HwmonLabel: %s" % (PLUGIN_NAME, "; ".join(problems)))
    read = _read_text
    if _state["energy_socket"]:
        from energy_reader import EnergyClient  # shipped beside this file

        read = EnergyClient(_state["energy_socket"], _read_text)
        _collectd_log("info", "energy_uj through the energy reader at %s" % _state["energy_socket"])
    _state["reader"] = RaplReader(
        _state["root"], log=_collectd_log, read_text=read, hwmon_root=_state["hwmon_root"], rules=rules
    )


def _dispatch(zone, type_instance, value):
    collectd.Values(
        plugin=PLUGIN_NAME, plugin_instance=zone, type="power", type_instance=type_instance, values=[value]
    ).dispatch()


def _read():
    samples = _state["reader"].read()
    for sample in samples:
        if sample.power_w is not None:
            _dispatch(sample.zone, "package", sample.power_w)
        if sample.tdp_w is not None:
            _dispatch(sample.zone, "tdp", sample.tdp_w)
    if _state["seed_names"]:
        for plugin, watts in seed_series(samples):
            collectd.Values(plugin=plugin, type="power", values=[watts]).dispatch()


if collectd is not None:  # pragma: no cover
    collectd.register_config(_configure)
    collectd.register_init(_init)
    collectd.register_read(_read)
