"""``systemctl`` for a lab node: the service manager these machines lack.

A lab node has no systemd as PID 1 (it is a mount namespace of one machine), so Debian's
``systemctl`` can edit unit files offline but cannot ``daemon-reload``, ``show`` or ``start``.
The lab installs this file as the node's ``/usr/local/sbin/systemctl`` (found before
``/usr/bin/systemctl`` on sudo's secure_path, as on any Debian host) and keeps systemd's rules
for what the roles use:

- ``enable``/``disable``/``is-enabled``/``list-unit-files``/``mask``/``unmask`` are Debian's own
  ``systemctl`` in offline mode: the ``[Install]`` section decides the ``.wants`` symlinks, exactly
  as on a real host;
- ``daemon-reload`` loads the unit files; ``show`` reports ``LoadState``, ``ActiveState``,
  ``UnitFileState`` and ``NeedDaemonReload`` (a unit file changed since the last reload);
- ``start``/``stop``/``restart``/``is-active`` run ``Type=oneshot`` units (``ExecStart`` lines in
  order; a ``-`` prefix ignores failure; ``ConditionPathExists`` is honoured; ``RemainAfterExit``
  keeps them active);
- ``--boot`` (run by lab/node_init.py) starts every unit enabled for ``multi-user.target`` in
  ``After=``/``Before=`` order, as systemd does when the node boots. The state lives in
  ``/run/lab-systemd`` (a tmpfs: gone after a reboot, like systemd's).

Only the standard library: it runs with the node's system interpreter.
"""

import hashlib
import json
import os
import pathlib
import shlex
import subprocess
import sys

REAL = "/usr/bin/systemctl"
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
STATE = pathlib.Path("/run/lab-systemd")
OFFLINE = {"enable", "disable", "is-enabled", "list-unit-files", "mask", "unmask", "reenable", "preset"}


def unit_path(unit):
    for directory in UNIT_DIRS:
        path = pathlib.Path(directory) / unit
        if path.exists():
            return path
    return None


def parse_unit(path):
    sections, current = {}, None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is not None and "=" in line:
            key, _sep, value = line.partition("=")
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path and path.exists() else ""


def _load_state():
    try:
        return json.loads((STATE / "state.json").read_text())
    except (OSError, ValueError):
        return {"loaded": {}, "active": {}}


def _save_state(state):
    STATE.mkdir(parents=True, exist_ok=True)
    tmp = STATE / ".state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, STATE / "state.json")


def daemon_reload(state):
    loaded = {}
    for directory in UNIT_DIRS:
        base = pathlib.Path(directory)
        if base.is_dir():
            for path in base.iterdir():
                if path.suffix in (".service", ".target", ".timer") and path.name not in loaded and path.is_file():
                    loaded[path.name] = _digest(path)
    state["loaded"] = loaded
    _save_state(state)


def _real(args):
    return subprocess.run([REAL, *args], check=False).returncode


def unit_file_state(unit):
    result = subprocess.run([REAL, "is-enabled", unit], capture_output=True, text=True, check=False)
    return result.stdout.strip() or "not-found"


def show(state, unit):
    path = unit_path(unit)
    props = {"Id": unit, "Names": unit}
    if path is None:
        props.update(LoadState="not-found", ActiveState="inactive", SubState="dead", UnitFileState="")
    else:
        sections = parse_unit(path)
        props.update(
            LoadState="loaded",
            Description=(sections.get("Unit", {}).get("Description") or [unit])[-1],
            FragmentPath=str(path),
            UnitFileState=unit_file_state(unit),
            NeedDaemonReload="yes" if state["loaded"].get(unit) != _digest(path) else "no",
        )
        active = state["active"].get(unit, "inactive")
        props.update(ActiveState=active, SubState={"active": "exited", "failed": "failed"}.get(active, "dead"))
    for key, value in props.items():
        print(f"{key}={value}")
    return 0


def run_unit(state, unit):
    path = unit_path(unit)
    if path is None:
        print(f"Failed to start {unit}: Unit {unit} not found.", file=sys.stderr)
        return 5
    if state["loaded"].get(unit) != _digest(path):
        print(f"Warning: The unit file of {unit} changed on disk. Run 'systemctl daemon-reload'.", file=sys.stderr)
    sections = parse_unit(path)
    for condition in sections.get("Unit", {}).get("ConditionPathExists", []):
        negate = condition.startswith("!")
        if os.path.exists(condition.lstrip("!")) == negate:
            print(f"{unit}: condition ConditionPathExists={condition} not met: skipped")
            state["active"][unit] = "inactive"
            return 0
    service = sections.get("Service", {})
    kind = (service.get("Type") or ["simple"])[-1]
    if kind != "oneshot":
        print(f"{unit}: Type={kind} is not supported by the lab's service manager (only oneshot)", file=sys.stderr)
        state["active"][unit] = "failed"
        return 1
    for command in service.get("ExecStart", []):
        ignore = command.startswith("-")
        argv = shlex.split(command.lstrip("-@+!"))
        rc = subprocess.run(argv, check=False).returncode
        if rc != 0 and not ignore:
            print(f"{unit}: {argv[0]} exited with status {rc}", file=sys.stderr)
            state["active"][unit] = "failed"
            return 1
    remain = (service.get("RemainAfterExit") or ["no"])[-1].lower() in ("yes", "true", "1", "on")
    state["active"][unit] = "active" if remain else "inactive"
    print(f"Finished {unit}")
    return 0


def boot(state):
    """Start what multi-user.target wants, in After=/Before= order (ties by name)."""
    daemon_reload(state)
    wants = pathlib.Path("/etc/systemd/system/multi-user.target.wants")
    units = sorted(p.name for p in wants.iterdir() if p.name.endswith(".service")) if wants.is_dir() else []
    after = {u: set() for u in units}
    for unit in units:
        sections = parse_unit(unit_path(unit)) if unit_path(unit) else {}
        for dep in " ".join(sections.get("Unit", {}).get("After", [])).split():
            if dep in after:
                after[unit].add(dep)
        for dep in " ".join(sections.get("Unit", {}).get("Before", [])).split():
            if dep in after:
                after[dep].add(unit)
    order, done = [], set()
    while len(order) < len(units):
        ready = [u for u in units if u not in done and after[u] <= done]
        if not ready:  # an ordering cycle: systemd breaks it too, here by name
            ready = [next(u for u in units if u not in done)]
        order.append(ready[0])
        done.add(ready[0])
    status = 0
    for unit in order:
        print(f"Starting {unit}")
        status |= run_unit(state, unit)
    _save_state(state)
    return 1 if status else 0


def main(argv):
    args = [a for a in argv[1:] if a not in ("--system", "--no-block", "--quiet", "-q", "--no-pager", "-l", "--full")]
    if not args:
        print("usage: systemctl COMMAND [UNIT...]", file=sys.stderr)
        return 1
    state = _load_state()
    command, units = args[0], args[1:]
    if command == "--boot":
        return boot(state)
    if command in OFFLINE:
        return _real(args)
    if command == "daemon-reload":
        daemon_reload(state)
        return 0
    if command == "show":
        return max((show(state, u) for u in units), default=0)
    if command == "is-active":
        states = [state["active"].get(u, "inactive") for u in units]
        print("\n".join(states))
        return 0 if states and all(s == "active" for s in states) else 3
    if command in ("start", "restart", "reload", "try-restart", "reload-or-restart"):
        rc = 0
        for unit in units:
            rc |= run_unit(state, unit)
        _save_state(state)
        return rc
    if command == "stop":
        for unit in units:
            state["active"][unit] = "inactive"
        _save_state(state)
        return 0
    print(f"systemctl {command}: not provided by the lab's service manager (lab/node_systemctl.py)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
