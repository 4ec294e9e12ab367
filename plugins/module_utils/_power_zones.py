# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where package power can be read: RAPL powercap zones, or hwmon where RAPL is missing.

The one implementation of zone naming and discovery, used by ``cpu_power_info`` (through
``_cpu_topology.read_rapl`` and ``_power_apply.gather_info``) and by the collectd plugin
``roles/collectd/files/rapl_power.py``, which imports this file as ``_power_zones``: the collectd
role ships it beside the plugin. So it imports nothing but the standard library.

Sources, in order of preference (``find_power_source``):

* RAPL powercap (Documentation/power/powercap/powercap.rst): top-level zones
  ``intel-rapl:N`` (``N`` hexadecimal, in registration order) whose ``name`` is ``package-N``
  or ``package-N-die-M``; ``psys`` and other non-package zones are skipped, as are sub-zones
  (``intel-rapl:N:M``: core, uncore, dram) and the ``intel-rapl-mmio:N`` duplicates of the
  package zones. ``energy_uj`` wraps at
  ``max_energy_range_uj``; it is root-only since Linux 5.10 (CVE-2020-8694).
* hwmon ``amd_energy`` (drivers/hwmon/amd_energy.c, Linux 5.8-5.12, and AMD's out-of-tree
  module): ``energyN_input`` in microjoules with labels ``Esocket<N>`` (one per socket) and
  ``Ecore<NNN>`` (one per core); the socket counters are the package energy.
* hwmon of a platform driver (ARM servers and others, Documentation/hwmon/sysfs-interface.rst):
  ``energy1_input`` (microjoules) or ``power1_input`` / ``power1_average`` (microwatts) of a
  chip whose label names the CPU or SoC (xgene-hwmon: ``power1_input`` labelled ``CPU power``).

Pure logic without Ansible imports; Python 3.9 compatible. Everything takes ``fs``, an object
with ``listdir(path)``, ``read(path)`` and ``isdir(path)`` (``SysfsAccessor`` with paths relative
to the sysfs root, or ``FileSystem`` below with absolute paths).
"""

import os
import re

# Top-level RAPL control zones only: "intel-rapl:0", not sub-zones ("intel-rapl:0:1", core/uncore/
# dram) and not the MMIO interface ("intel-rapl-mmio:0"), which reports the same package again.
# The id is hexadecimal: powercap_sys.c names each zone "%s:%x" of the id it hands out in
# registration order, so the 11th top-level zone is "intel-rapl:a" (nodes with over ten packages
# or dies). Which package a zone measures is its ``name``, never its number.
RAPL_ZONE_DIR = re.compile(r"^intel-rapl:([0-9a-f]+)$")
RAPL_PACKAGE_NAME = re.compile(r"^package-(\d+)(?:-die-(\d+))?$")
AMD_ENERGY_SOCKET = re.compile(r"^Esocket(\d+)$")
# Labels of platform hwmon sensors that measure the CPU / SoC package (case-insensitive).
PLATFORM_CPU_LABEL = re.compile(r"^(cpu|soc|package|socket)\b", re.IGNORECASE)
HWMON_PLATFORM_ATTRS = ("energy1_input", "power1_input", "power1_average")


def read_text(path):
    with open(path) as handle:
        return handle.read().strip()


class FileSystem:
    """Plain file access on absolute paths (what the collectd plugin uses); ``read`` is injectable."""

    def __init__(self, read=read_text):
        self.read = read

    def listdir(self, path):
        return sorted(os.listdir(path))

    def isdir(self, path):
        return os.path.isdir(path)


def _read_or_none(fs, path):
    try:
        return fs.read(path)
    except (OSError, ValueError):
        return None


def parse_rapl_zone_name(name):
    """``package-1-die-0`` -> (1, 0); ``package-0`` -> (0, None); anything else -> None."""
    match = RAPL_PACKAGE_NAME.match(name or "")
    if not match:
        return None
    return int(match.group(1)), (int(match.group(2)) if match.group(2) is not None else None)


def zone_label(package, die=None):
    """The name every consumer uses for a package zone: ``package-N`` or ``package-N-die-M``."""
    return f"package-{package}" if die is None else f"package-{package}-die-{die}"


def discover_rapl_zones(fs, powercap_dir):
    """RAPL zones under ``powercap_dir``: (package zones by package and die, skipped zones).

    Each package zone is a dict ``{zone, path, name, package, die}``; skipped zones (``psys``
    and anything not named like a package) are ``{zone, name}``. Zones whose ``name`` cannot
    be read are ignored.
    """
    zones = []
    skipped = []
    try:
        entries = fs.listdir(powercap_dir)
    except OSError:
        return zones, skipped
    for entry in entries:
        if not RAPL_ZONE_DIR.match(entry):
            continue
        path = os.path.join(powercap_dir, entry)
        name = _read_or_none(fs, os.path.join(path, "name"))
        if name is None:
            continue
        parsed = parse_rapl_zone_name(name)
        if parsed is None:
            skipped.append({"zone": entry, "name": name})
            continue
        zones.append({"zone": entry, "path": path, "name": name, "package": parsed[0], "die": parsed[1]})
    # by package and die, not by directory: listing order puts intel-rapl:10 (the 17th) before :2
    zones.sort(key=lambda zone: (zone["package"], -1 if zone["die"] is None else zone["die"]))
    return zones, skipped


def _hwmon_label(fs, path, prefix):
    return _read_or_none(fs, os.path.join(path, prefix + "_label")) or ""


def discover_hwmon_sensors(fs, hwmon_dir):
    """Package power sensors under ``hwmon_dir`` (``/sys/class/hwmon``), sorted by package.

    Returns dicts ``{name, path, attr, kind, driver, label, package}``: ``kind`` is ``energy``
    (microjoules, a counter) or ``power`` (microwatts, an instantaneous reading); ``name`` is
    ``zone_label(package)``, the same name a RAPL zone of that package has.
    """
    sensors = []
    try:
        chips = fs.listdir(hwmon_dir)
    except OSError:
        return sensors
    platform_package = 0
    for chip in chips:
        path = os.path.join(hwmon_dir, chip)
        driver = _read_or_none(fs, os.path.join(path, "name"))
        if driver is None:
            continue
        try:
            files = fs.listdir(path)
        except OSError:
            continue
        if driver == "amd_energy":
            for attr in files:
                if not (attr.startswith("energy") and attr.endswith("_input")):
                    continue
                label = _hwmon_label(fs, path, attr[: -len("_input")])
                match = AMD_ENERGY_SOCKET.match(label)
                if match:
                    package = int(match.group(1))
                    sensors.append(
                        {
                            "name": zone_label(package),
                            "path": path,
                            "attr": attr,
                            "kind": "energy",
                            "driver": driver,
                            "label": label,
                            "package": package,
                        }
                    )
            continue
        for attr in HWMON_PLATFORM_ATTRS:
            if attr not in files:
                continue
            label = _hwmon_label(fs, path, attr.split("_", maxsplit=1)[0])
            if not PLATFORM_CPU_LABEL.match(label):
                continue
            sensors.append(
                {
                    "name": zone_label(platform_package),
                    "path": path,
                    "attr": attr,
                    "kind": "energy" if attr.startswith("energy") else "power",
                    "driver": driver,
                    "label": label,
                    "package": platform_package,
                }
            )
            platform_package += 1
            break
    sensors.sort(key=lambda s: (s["package"], s["name"]))
    return sensors


def find_power_source(fs, powercap_dir, hwmon_dir):
    """The package power source: RAPL if it has package zones, else hwmon, else none.

    Returns ``{source: "rapl"|"hwmon"|None, zones: [...], skipped: [...]}``; ``zones`` are the
    dicts of ``discover_rapl_zones`` or ``discover_hwmon_sensors``.
    """
    zones, skipped = discover_rapl_zones(fs, powercap_dir)
    if zones:
        return {"source": "rapl", "zones": zones, "skipped": skipped}
    sensors = discover_hwmon_sensors(fs, hwmon_dir)
    if sensors:
        return {"source": "hwmon", "zones": sensors, "skipped": skipped}
    return {"source": None, "zones": [], "skipped": skipped}


def energy_delta_uj(previous, current, max_range):
    """Energy used between two counter reads, allowing for one wrap at ``max_range``.

    Returns None when the delta cannot be known: the counter went backwards and the range is
    unknown (0), or the values make no sense (outside the range).
    """
    if current >= previous:
        return current - previous
    if max_range <= 0 or previous > max_range:
        return None
    return (max_range - previous) + current
