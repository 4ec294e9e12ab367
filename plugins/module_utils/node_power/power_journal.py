# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 3 of the node power library: the state journal (original values, recorded once).

The JSON state file holds, per cpufreq policy, the original value of every attribute a profile
changed (``policies``), and, per sysfs attribute of the other controls (C-states, uncore, power
cap), its original value and the order in which the originals were recorded (``attributes``).
An original is recorded once, before its first change, and never overwritten; the file is
replaced atomically (temporary file in the same directory, fsync, rename).

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time

from ansible_collections.poweraware.k8s.plugins.module_utils.node_files.files import (
    LOCK_WAIT_S,
    atomic_write,
    lock_directory,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import MANAGED_ATTRS
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import CPU_DIR, POWERCAP_DIR, PowerError

DEFAULT_STATE_FILE = "/var/lib/poweraware/cpu_power_state.json"
STATE_VERSION = 1
# how a state file that cannot be used is to be handled, said by every refusal of one
REPAIR = "it holds the original CPU settings: repair it or move it away (originals then become the current values)"


# The sysfs directories whose attributes the journal may name (cpufreq policies, cpuidle states and the
# uncore under devices/system/cpu; RAPL zones under class/powercap), and the controls that record them.
# A restore writes a recorded original back as root: a path outside these, absolute or with "..",
# would make it write anywhere.
JOURNAL_DIRS = (CPU_DIR + "/", POWERCAP_DIR + "/")
CONTROLS = ("cstates", "uncore", "power_cap")


def _sysfs_path_problem(path):
    """Why ``path`` is not a root-relative attribute under JOURNAL_DIRS (None when it is)."""
    if not isinstance(path, str) or not path:
        return f"{path!r} is not a path"
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in path:
        return f"{path!r} is not a plain path relative to the sysfs root"
    if not path.startswith(JOURNAL_DIRS):
        return f"{path!r} is outside {' and '.join(d.rstrip('/') for d in JOURNAL_DIRS)}"
    return None


def _original_problem(value):
    return None if value is None or isinstance(value, str) else f"original is {value!r}, not a sysfs value (a string)"


def _attribute_problems(attributes):
    """What is wrong with the ``attributes`` of a loaded state file (every problem, [] when none)."""
    if not isinstance(attributes, dict):
        return [f"attributes is {type(attributes).__name__}, not a mapping of sysfs path to its original"]
    problems = []
    for path, entry in sorted(attributes.items(), key=lambda kv: str(kv[0])):
        where = f"attribute {path!r}"
        bad_path = _sysfs_path_problem(path)
        if bad_path:
            problems.append(f"{where}: path {bad_path}")
        if not isinstance(entry, dict):
            problems.append(f"{where} is {type(entry).__name__}, not a mapping")
            continue
        if entry.get("control") not in CONTROLS:
            problems.append(f"{where}: control is {entry.get('control')!r}, not one of {', '.join(CONTROLS)}")
        if not isinstance(entry.get("label"), str):
            problems.append(f"{where}: label is {entry.get('label')!r}, not a string")
        seq, cpu = entry.get("seq"), entry.get("cpu")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            problems.append(f"{where}: seq is {seq!r}, not the order number (1, 2, ...) it was recorded in")
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0):
            problems.append(f"{where}: cpu is {cpu!r}, not a CPU number or null")
        original = _original_problem(entry.get("original"))
        if original:
            problems.append(f"{where}: {original}")
        identity = entry.get("identity")
        if identity is not None and (not isinstance(identity, str) or not identity):
            problems.append(f"{where}: identity is {identity!r}, not the name of a RAPL zone or uncore domain")
    return problems


def _policy_problems(policies):
    """What is wrong with the ``policies`` of a loaded state file (every problem, [] when none)."""
    if not isinstance(policies, dict):
        return [f"policies is {type(policies).__name__}, not a mapping of policy name to its originals"]
    problems = []
    for name, entry in sorted(policies.items()):
        if not isinstance(entry, dict):
            problems.append(f"policy {name} is {type(entry).__name__}, not a mapping")
            continue
        cpus = entry.get("cpus")
        if not isinstance(cpus, str):
            problems.append(
                f"policy {name}: cpus is {cpus!r}, not a CPU list such as '0-3' (the form this module writes)"
            )
        else:
            try:
                parse_cpulist(cpus)
            except CpuListError as exc:
                problems.append(f"policy {name}: cpus: {exc}")
        path = entry.get("path")
        bad_path = _sysfs_path_problem(path) if path is not None else None
        if bad_path or (path is not None and not path.startswith(CPU_DIR + "/")):
            problems.append(f"policy {name}: path {bad_path or repr(path) + ' is not a cpufreq policy directory'}")
        original = entry.get("original")
        if not isinstance(original, dict):
            problems.append(f"policy {name}: original is not a mapping of attribute to value")
            continue
        for attr, value in sorted(original.items(), key=lambda kv: str(kv[0])):
            # the restore writes <policy directory>/<attr>: only the attributes this module changes
            if attr not in MANAGED_ATTRS:
                problems.append(f"policy {name}: original names {attr!r}, not one of {', '.join(MANAGED_ATTRS)}")
            elif _original_problem(value):
                problems.append(f"policy {name}: {attr}: {_original_problem(value)}")
        order = entry.get("order", [])
        if not isinstance(order, list) or any(attr not in original for attr in order):
            problems.append(f"policy {name}: order is {order!r}, not a list of the attributes in original")
    return problems


def check_state_path(path):
    """Refuse a state file path that is not absolute."""
    if not isinstance(path, str) or not os.path.isabs(path):
        # relative to whatever directory the run starts in: the boot unit and the next run would
        # not find the originals this run records
        raise PowerError(
            f"state_file {path!r} is not an absolute path: the boot unit and later runs start elsewhere and "
            "would not find the originals recorded there; give an absolute path such as "
            f"{DEFAULT_STATE_FILE}"
        )


def _missing_dirs(directory):
    """The directories ``os.makedirs(directory)`` would create, deepest first."""
    missing = []
    while not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing


def _lock_error(path, directory, reason):
    return PowerError(f"state file {path}: cannot lock its directory {directory}: {reason}; nothing was changed")


@contextlib.contextmanager
def state_lock(path, exclusive=True, wait=LOCK_WAIT_S, clock=time.monotonic, sleep=time.sleep):
    """Hold the state file's lock for a whole read-plan-write-save (the module and the boot unit).

    Without it two runs at once (the boot unit during a play, two plays) each load the journal, record
    their own originals and save: the later save drops the other's originals, and state=absent can
    never restore them. The lock is flock(2) on the state file's directory, so there is no lock file
    to clean up. A writing run (``exclusive``) creates the directory when missing and removes what it
    created when it leaves it empty (a refused or no-change first run leaves nothing behind); a run
    waiting meanwhile finds its locked directory gone and locks the new one. A reading run (check
    mode: shared lock) takes no lock where the directory does not exist yet: there is nothing to read.
    Waits at most ``wait`` seconds, then refuses with nothing changed.
    """
    check_state_path(path)
    directory = os.path.dirname(path)
    created = []
    deadline = clock() + wait
    while True:
        try:
            fd = lock_directory(directory, exclusive, deadline, clock, sleep)
        except TimeoutError:
            raise PowerError(
                f"state file {path}: another run has held its lock (on {directory}) for more than {wait:g} s - a "
                "cpu_power_profile task or the boot unit that re-applies the profiles; nothing was changed: let it "
                "finish, then run again"
            ) from None
        except OSError as exc:
            raise _lock_error(path, directory, exc) from exc
        if fd is not None:
            break
        created = []  # none of what is at the path now was made by this run
        if os.path.isdir(directory):
            continue  # replaced while this run waited: lock the one there now
        if not exclusive:
            break  # a reading run: nothing recorded yet, nothing to create
        missing = _missing_dirs(directory)
        try:
            os.makedirs(directory, mode=0o755)
            created = missing
        except FileExistsError:
            pass  # another first run made it first: lock that one
        except OSError as exc:
            raise _lock_error(path, directory, exc) from exc
    try:
        yield
    finally:
        if fd is not None:
            for made in created:  # deepest first; only what this run created, only when left empty
                try:
                    os.rmdir(made)
                except OSError:
                    break
            os.close(fd)


class StateStore:
    """Original values, recorded once per attribute, in a JSON file replaced atomically."""

    def __init__(self, path):
        check_state_path(path)
        self.path = path
        self.data = {"version": STATE_VERSION, "policies": {}}
        if os.path.exists(path):
            try:
                with open(path) as handle:
                    loaded = json.load(handle)
            except (OSError, ValueError) as exc:
                raise PowerError(f"state file {path} cannot be read ({exc}); {REPAIR}") from exc
            if not isinstance(loaded, dict) or loaded.get("version") != STATE_VERSION:
                raise PowerError(f"state file {path} has an unknown format (expected version {STATE_VERSION})")
            loaded.setdefault("policies", {})
            problems = _policy_problems(loaded["policies"]) + _attribute_problems(loaded.get("attributes", {}))
            if problems:
                # refused on load, before any plan reads a policy's CPUs: nothing is written
                raise PowerError(f"state file {path} is damaged: {'; '.join(problems)}; {REPAIR}")
            self.data = loaded
        self.saved = copy.deepcopy(self.data)

    @property
    def policies(self):
        return self.data["policies"]

    def record(self, policy, attr, value):
        """Record ``value`` as the original of ``attr`` unless one is already recorded."""
        entry = self.policies.setdefault(
            policy["name"],
            {"path": policy["path"], "cpus": format_cpulist(policy["related_cpus"]), "original": {}, "order": []},
        )
        if attr in entry["original"]:
            return False
        entry["original"][attr] = value
        entry["order"].append(attr)
        return True

    def forget(self, name):
        self.policies.pop(name, None)

    @property
    def attributes(self):
        """Originals of the other controls' attributes: sysfs path -> {control, cpu, label, original, seq}."""
        return self.data.get("attributes", {})

    def record_attribute(self, step, value):
        """Record ``value`` as the original of ``step["path"]`` unless one is already recorded."""
        attributes = self.data.setdefault("attributes", {})
        if step["path"] in attributes:
            return False
        seq = 1 + max([a["seq"] for a in attributes.values()] or [0])
        attributes[step["path"]] = {
            "control": step["control"],
            "cpu": step.get("cpu"),
            "label": step["label"],
            "original": value,
            "seq": seq,
        }
        if step.get("identity"):
            attributes[step["path"]]["identity"] = step["identity"]
        return True

    def relocate(self, directories):
        """Move every original recorded with an ``identity`` (a RAPL zone, a TPMI uncore domain) to
        the directory that identity has now (``directories``: identity -> directory). The kernel
        numbers those directories in registration order, which may change across boots: without
        this, state=absent would write one package's original into another's zone, and a run would
        take the other zone's value for recorded. Returns the paths whose identity is not present now
        (kept, never written: their directory may be another zone's by now). Originals recorded
        without an identity (by earlier releases, or where the directory name is stable) stay put."""
        attributes = self.attributes
        owners = {directory: identity for identity, directory in directories.items()}
        moved, absent = {}, []
        for path, entry in sorted(attributes.items(), key=lambda kv: kv[1]["seq"]):
            identity, new = entry.get("identity"), path
            if identity:
                directory = directories.get(identity)
                if directory is None:
                    absent.append(path)
                    owner = owners.get(path.rsplit("/", 1)[0])
                    if owner is not None:
                        raise PowerError(
                            f"state file {self.path}: the original of {entry['label']} ({identity}, not present now) "
                            f"is recorded at {path}, which is {owner}'s now; restore {identity}'s value by hand when "
                            f"it is back, then remove that entry from the file; {REPAIR}"
                        )
                else:
                    new = f"{directory}/{path.rsplit('/', 1)[1]}"
            if new in moved:
                raise PowerError(
                    f"state file {self.path}: two originals ({moved[new]['label']}, {entry['label']}) belong at "
                    f"{new}; {REPAIR}"
                )
            moved[new] = entry
        if moved != attributes or list(moved) != list(attributes):
            self.data["attributes"] = moved
        return absent

    def forget_attribute(self, path):
        self.data.get("attributes", {}).pop(path, None)

    def dirty(self):
        return self.data != self.saved

    def save(self):
        """Write atomically: temp file in the same directory, fsync, rename."""
        text = json.dumps(self.data, indent=2, sort_keys=True) + "\n"
        atomic_write(self.path, text, mode=0o644, prefix=".cpu_power_state.", fsync=True)
        self.saved = copy.deepcopy(self.data)

    def rewind(self, snapshot, keep_policies=(), keep_paths=()):
        """Go back to ``snapshot`` (the file before a failed run), keeping the originals this run
        recorded for what it could not write back: ``keep_policies`` ((policy name, attribute)) and
        ``keep_paths`` (attribute paths). Those stay changed, so their originals must stay for
        state=absent (a plain snapshot would forget them for good). Writes only when that differs."""
        kept = copy.deepcopy(snapshot)
        for name, attr in keep_policies:
            entry = self.policies.get(name)
            if not entry or attr not in entry["original"]:
                continue
            target = kept.setdefault("policies", {}).setdefault(
                name, {"path": entry["path"], "cpus": entry["cpus"], "original": {}, "order": []}
            )
            if attr not in target["original"]:
                target["original"][attr] = entry["original"][attr]
                target["order"].append(attr)
        for path in keep_paths:
            if path in self.attributes:
                kept.setdefault("attributes", {}).setdefault(path, copy.deepcopy(self.attributes[path]))
        if self.data != kept:
            self.restore_saved(kept)

    def restore_saved(self, snapshot):
        self.data = copy.deepcopy(snapshot)
        self.save()
