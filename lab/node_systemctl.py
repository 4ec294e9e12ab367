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
- a service's sandboxing (systemd.exec(5)) is applied to its processes as systemd applies it, in a
  mount namespace of their own: ``ProtectSystem=`` (``strict``: every mount read-only but the API
  file systems ``/dev``, ``/proc`` and ``/sys``; ``full``/``yes``: ``/usr``, ``/boot``, ``/efi``, and
  ``/etc`` for ``full``), ``ReadWritePaths=`` (writable again; a missing path fails the unit with
  status 226/NAMESPACE unless prefixed with ``-``), ``PrivateTmp=``, ``ProtectHome=`` and
  ``NoNewPrivileges=``; so a unit that writes where its sandbox forbids fails here as on a host;
- ``--boot`` (run by lab/node_init.py) starts every unit enabled for ``multi-user.target`` in
  ``After=``/``Before=`` order, as systemd does when the node boots. The state lives in
  ``/run/lab-systemd`` (a tmpfs: gone after a reboot, like systemd's).

Only the standard library: it runs with the node's system interpreter.
"""

import ctypes
import ctypes.util
import errno
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


# systemd.exec(5) sandboxing: what the lab applies (flags from <linux/mount.h>, <linux/sched.h>, <linux/prctl.h>)
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18
)  # fmt: skip
PR_SET_NO_NEW_PRIVS = 38
EXIT_NAMESPACE = 226  # systemd's exit status when a service's namespace cannot be set up
API_FILE_SYSTEMS = ("/dev", "/proc", "/sys")
PROTECTED = {
    "yes": ("/usr", "/boot", "/efi"),
    "true": ("/usr", "/boot", "/efi"),
    "full": ("/usr", "/boot", "/efi", "/etc"),
}
HOMES = ("/home", "/root", "/run/user")
_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}


def _last(service, key, default=""):
    return (service.get(key) or [default])[-1].strip().lower()


def _yes(service, key):
    return _last(service, key, "no") in ("yes", "true", "1", "on")


def sandbox_paths(service):
    """The service's ReadWritePaths= as (path, may be missing) pairs."""
    out = []
    for line in service.get("ReadWritePaths", []):
        for word in line.split():
            out.append((word.lstrip("-"), word.startswith("-")))
    return out


def _under(path, roots):
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _encoded(value):
    return None if value is None else value.encode()


def _mount(libc, source, target, fstype, flags, data=None):
    if libc.mount(_encoded(source), _encoded(target), _encoded(fstype), flags, _encoded(data)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def enter_sandbox(service):
    """Apply the service's sandboxing to this process (after fork, before exec), as systemd does."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if _yes(service, "NoNewPrivileges") and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    protect = _last(service, "ProtectSystem", "no")
    writable = [path for path, _optional in sandbox_paths(service) if os.path.exists(path)]
    private_tmp, protect_home = _yes(service, "PrivateTmp"), _last(service, "ProtectHome", "no")
    if protect in ("", "no", "false") and not writable and not private_tmp and protect_home in ("", "no", "false"):
        return
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    for path in writable:  # bound onto themselves first: their own mounts stay writable below
        _mount(libc, path, path, None, MS_BIND | MS_REC)
    own = list(writable)
    if private_tmp:
        for path in ("/tmp", "/var/tmp"):  # noqa: S108 - the service's own, empty
            if os.path.isdir(path):
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
                own.append(path)
    if protect_home in ("yes", "true", "read-only", "tmpfs"):
        for path in HOMES:
            if os.path.isdir(path):
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0755")
                own.append(path)
    if protect in ("strict", *PROTECTED):
        roots = ("/",) if protect == "strict" else PROTECTED[protect]
        with open("/proc/self/mountinfo") as handle:
            mounts = [(line.split()[4], line.split()[5]) for line in handle]
        for point, options in mounts:
            if not _under(point, roots) or _under(point, API_FILE_SYSTEMS) or _under(point, own):
                continue
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY
            for option in options.split(","):
                flags |= _OPTION_FLAGS.get(option, 0)
            try:
                _mount(libc, "none", point, None, flags)
            except OSError as exc:
                # A mount another one covers (a node's hidden controller checkout has the lab's
                # own mounts below it) cannot be reached by its path: ENOENT where the covering file
                # system lacks the path, EINVAL where the path there is no mount point. Nothing in
                # the service can write through it (nor reach it), so it is skipped.
                if exc.errno not in (errno.ENOENT, errno.EINVAL):
                    raise


def _sandboxed(unit, service):
    """enter_sandbox in the service's process; a namespace that cannot be set up ends it as systemd does."""
    try:
        enter_sandbox(service)
    except OSError as exc:
        os.write(2, f"{unit}: Failed to set up mount namespacing: {exc}\n".encode())
        os._exit(EXIT_NAMESPACE)


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
    missing = [path for path, optional in sandbox_paths(service) if not optional and not os.path.exists(path)]
    if missing:
        print(f"{unit}: Failed to set up mount namespacing: {missing[0]}: No such file or directory", file=sys.stderr)
        print(f"{unit}: Main process exited, code=exited, status={EXIT_NAMESPACE}/NAMESPACE", file=sys.stderr)
        state["active"][unit] = "failed"
        return 1
    for command in service.get("ExecStart", []):
        ignore = command.startswith("-")
        argv = shlex.split(command.lstrip("-@+!"))
        rc = subprocess.run(argv, check=False, preexec_fn=lambda: _sandboxed(unit, service)).returncode  # noqa: PLW1509
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
