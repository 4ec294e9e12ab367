# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where package power can be read: RAPL powercap zones, or hwmon where RAPL is missing.

The one implementation of zone naming and discovery, used by ``cpu_power_info`` (through
``cpu_topology.read_rapl`` and ``power_apply.gather_info``) and by the collectd plugin
``roles/collectd/files/rapl_power.py``, which imports this file as ``power_zones``: the collectd
role ships it beside the plugin. So it imports nothing but the standard library.

Sources, in order of preference (``find_power_source``):

* RAPL powercap (Documentation/power/powercap/powercap.rst): top-level zones
  ``intel-rapl:N`` (``N`` hexadecimal, in registration order) whose ``name`` is ``package-N``
  or ``package-N-die-M``; ``psys`` and other non-package zones are skipped, as are sub-zones
  (``intel-rapl:N:M``: core, uncore, dram) and the ``intel-rapl-mmio:N`` duplicates of the
  package zones. ``energy_uj`` wraps at
  ``max_energy_range_uj``; it is root-only since Linux 5.10 (CVE-2020-8694).
* hwmon (Documentation/hwmon/sysfs-interface.rst), where RAPL is missing: every
  ``energyN_input`` (microjoules, a counter) and ``powerN_input`` / ``powerN_average``
  (microwatts) of every chip, whatever N. A sensor says what it measures only through its label
  (``energyN_label`` / ``powerN_label``; the ACPI power meter's ``powerN_oem_info``), which the
  firmware or the driver chooses: ``amd_energy`` (drivers/hwmon/amd_energy.c, Linux 5.8-5.12)
  labels ``Esocket<N>`` and ``Ecore<NNN>``; xgene-hwmon ``CPU power`` and ``IO power``, one chip
  per socket; SCMI (drivers/hwmon/scmi-hwmon.c) puts every firmware sensor of the platform in
  one chip under the firmware's names, e.g. ``CPU Power Socket 1``. So labels are classified by
  an ordered rule list (``DEFAULT_HWMON_LABELS``; a user's rules go first, see
  ``hwmon_label_rules``), and every sensor not used is reported with the reason.

Pure logic without Ansible imports; Python 3.6 compatible (the collectd plugin's floor). Everything
takes ``fs``, an object with ``listdir(path)``, ``read(path)`` and ``isdir(path)``
(``SysfsAccessor`` with paths relative to the sysfs root, or ``FileSystem`` below with absolute paths).
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
# How a hwmon sensor's label is classified: the first rule whose pattern matches the whole label
# (case-insensitive) gives its class; only class "package" is package power, and the rule's named
# group "package" (when it has one and it matched) is the socket number. Without a number, the
# chips with an unnumbered package sensor count the packages in chip order (xgene-hwmon: one chip
# per socket). Documented in docs/node-power.md ("Where package power is read"); users put their
# own rules first (cpu_power_info hwmon_labels, collectd_hwmon_labels).
DEFAULT_HWMON_LABELS = (
    ("package", r"Esocket(?P<package>\d+)"),  # amd_energy: one counter per socket
    ("core", r"Ecore\d+"),  # amd_energy: one counter per core
    ("package", r"(?:cpu|soc|package)(?:\s+(?:power|energy))?(?:\s+(?:socket|package)\s*(?P<package>\d+))?"),
    ("package", r"(?:socket|package)\s*(?P<package>\d+)(?:\s+(?:power|energy))?"),
    ("io", r"(?:sys)?io\b.*"),
    ("memory", r"(?:dram|dimm|mem|memory)\b.*"),
    ("module", r"(?:module|grace)\b.*"),
    ("system", r"(?:system|platform|total|ac input)\b.*"),
)
HWMON_LABEL_CLASS = re.compile(r"^[a-z][a-z0-9_]*$")
HWMON_SENSOR = re.compile(r"^(energy|power)([1-9][0-9]*)_(input|average)$")
HWMON_CHIP = re.compile(r"^hwmon([0-9]+)$")
_DIGITS = re.compile(r"^[0-9]+$")
# Which reading of a package wins when several sensors claim it: a counter integrates every
# instant, an instantaneous reading does not, an average lags.
_HWMON_PREFERENCE = {("energy", "input"): 0, ("power", "input"): 1, ("power", "average"): 2}


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


def hwmon_label_rules(user_rules=None):
    """The label rules to apply: ``user_rules`` (``[{class, pattern}]``) first, then the defaults.

    Returns ``(rules, problems)``: ``rules`` are ``(class, compiled pattern, source)``; each problem
    names the entry, the value, the reason and the fix. Nothing is applied when there are problems.
    """
    rules = []
    problems = []
    for index, rule in enumerate(user_rules or [], start=1):
        where = "hwmon_labels entry %d" % index
        if not isinstance(rule, dict) or set(rule) - {"class", "pattern"} or not {"class", "pattern"} <= set(rule):
            problems.append(
                "%s: %r is not a mapping of exactly 'class' and 'pattern'; write e.g. "
                "{class: package, pattern: 'CPU Power Socket (?P<package>\\d+)'}" % (where, rule)
            )
            continue
        klass, pattern = rule["class"], rule["pattern"]
        if not isinstance(klass, str) or not HWMON_LABEL_CLASS.match(klass):
            problems.append(
                "%s: class %r is not a lower-case word; use 'package' for package power, "
                "any other word (io, memory, ...) to leave the sensor out" % (where, klass)
            )
        if not isinstance(pattern, str):
            problems.append("%s: pattern %r is not a string; quote it" % (where, pattern))
            continue
        try:
            compiled = re.compile(pattern, re.IGNORECASE | re.ASCII)
        except re.error as exc:
            problems.append("%s: pattern %r is not a regular expression (%s); fix or quote it" % (where, pattern, exc))
            continue
        if set(compiled.groupindex) - {"package"}:
            problems.append(
                "%s: pattern %r has the named group(s) %s; the only named group read is (?P<package>...)"
                % (where, pattern, ", ".join(sorted(set(compiled.groupindex) - {"package"})))
            )
            continue
        rules.append((klass, compiled, where))
    for klass, pattern in DEFAULT_HWMON_LABELS:
        rules.append((klass, re.compile(pattern, re.IGNORECASE | re.ASCII), "default rule"))
    return rules, problems


def classify_hwmon_label(rules, label):
    """``(class, package or None, rule source, rule index)`` of the first rule matching all of ``label``, or None."""
    for index, (klass, pattern, source) in enumerate(rules):
        match = pattern.fullmatch(label.strip())
        if match:
            number = match.groupdict().get("package")
            return klass, (int(number) if number is not None and _DIGITS.match(number) else None), source, index
    return None


def _hwmon_label(fs, path, prefix):
    # the ACPI power meter has no label; its firmware describes the meter in powerN_oem_info
    for suffix in ("_label", "_oem_info"):
        label = _read_or_none(fs, os.path.join(path, prefix + suffix))
        if label:
            return label
    return ""


def _chip_order(chip):
    match = HWMON_CHIP.match(chip)
    return (0, int(match.group(1)), chip) if match else (1, 0, chip)


def _chip_sensors(files):
    """``{(type, channel): attr}`` of the readings in a chip's files: ``powerN_input`` over ``_average``."""
    found = {}
    for attr in files:
        match = HWMON_SENSOR.match(attr)
        if not match or (match.group(1), match.group(3)) not in _HWMON_PREFERENCE:
            continue
        key = (match.group(1), int(match.group(2)))
        kept = found.get(key)
        if kept is None or _HWMON_PREFERENCE[(key[0], match.group(3))] < _HWMON_PREFERENCE[(key[0], kept[1])]:
            found[key] = (attr, match.group(3))
    return {key: attr for key, (attr, _reading) in sorted(found.items())}


def discover_hwmon(fs, hwmon_dir, rules=None):
    """Every energy and power sensor under ``hwmon_dir`` (``/sys/class/hwmon``), classified by label.

    ``rules`` are ``hwmon_label_rules()[0]`` (the defaults when None). Returns ``(sensors,
    ignored)``: one package power sensor per package, sorted by package, as dicts ``{name, chip,
    path, attr, kind, driver, label, package}`` (``kind`` ``energy``: microjoules, a counter;
    ``power``: microwatts now; ``name`` is ``zone_label(package)``, the name a RAPL zone of that
    package has); and every other sensor as ``{chip, driver, attr, label, reason}``.
    """
    if rules is None:
        rules = hwmon_label_rules()[0]
    ignored = []
    # (package or None, (reading preference, rule index, chip index, channel), sensor): when several
    # sensors claim a package, a counter beats a reading, then a user's rule beats a default one
    claims = []
    try:
        chips = sorted(fs.listdir(hwmon_dir), key=_chip_order)
    except OSError:
        return [], ignored
    for chip_index, chip in enumerate(chips):
        path = os.path.join(hwmon_dir, chip)
        driver = _read_or_none(fs, os.path.join(path, "name"))
        if driver is None:
            continue
        try:
            files = fs.listdir(path)
        except OSError:
            continue
        for (kind, channel), attr in _chip_sensors(files).items():
            label = _hwmon_label(fs, path, "%s%d" % (kind, channel))
            found = classify_hwmon_label(rules, label)
            entry = {"chip": chip, "driver": driver, "attr": attr, "label": label}
            if found is None:
                reason = "the label matches no hwmon_labels rule" if label else "no label says what it measures"
                ignored.append(dict(entry, reason=reason + "; add a rule to count it as package power"))
                continue
            klass, package, source, rule_index = found
            if klass != "package":
                ignored.append(dict(entry, reason="class %s (%s), not package power" % (klass, source)))
                continue
            reading = attr.split("_", maxsplit=1)[1]
            sensor = dict(entry, path=path, kind=kind, package=package)
            claims.append((package, (_HWMON_PREFERENCE[(kind, reading)], rule_index, chip_index, channel), sensor))
    # unnumbered package sensors: the chips that have one count the packages, in chip order
    unnumbered_chips = sorted({order[2] for package, order, _sensor in claims if package is None})
    chosen = {}
    for package, order, sensor in sorted(claims, key=lambda claim: claim[1]):
        if package is None:
            package = unnumbered_chips.index(order[2])
            sensor["package"] = package
        kept = chosen.get(package)
        if kept is not None:
            ignored.append(
                dict(
                    {k: sensor[k] for k in ("chip", "driver", "attr", "label")},
                    reason="package %d is read from %s %s (%s)" % (package, kept["chip"], kept["attr"], kept["label"]),
                )
            )
            continue
        chosen[package] = sensor
    sensors = []
    for package in sorted(chosen):
        sensor = chosen[package]
        sensors.append(
            {
                "name": zone_label(package),
                "chip": sensor["chip"],
                "path": sensor["path"],
                "attr": sensor["attr"],
                "kind": sensor["kind"],
                "driver": sensor["driver"],
                "label": sensor["label"],
                "package": package,
            }
        )
    ignored.sort(key=lambda e: (_chip_order(e["chip"]), e["attr"]))
    return sensors, ignored


def find_power_source(fs, powercap_dir, hwmon_dir, rules=None):
    """The package power source: RAPL if it has package zones, else hwmon, else none.

    Returns ``{source: "rapl"|"hwmon"|None, zones: [...], skipped: [...], ignored: [...]}``;
    ``zones`` are the dicts of ``discover_rapl_zones`` or ``discover_hwmon``; ``ignored`` are the
    hwmon sensors not used and why (empty when RAPL is the source: hwmon is not looked at).
    """
    zones, skipped = discover_rapl_zones(fs, powercap_dir)
    if zones:
        return {"source": "rapl", "zones": zones, "skipped": skipped, "ignored": []}
    sensors, ignored = discover_hwmon(fs, hwmon_dir, rules)
    return {"source": "hwmon" if sensors else None, "zones": sensors, "skipped": skipped, "ignored": ignored}


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
