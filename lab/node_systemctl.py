"""``systemctl`` for a lab node: the service manager these machines lack.

A lab node has no systemd as PID 1 (it is a mount namespace of one machine), so Debian's
``systemctl`` can edit unit files offline but cannot ``daemon-reload``, ``show`` or ``start``.
The lab installs this file as the node's ``/usr/local/sbin/systemctl`` (found before
``/usr/bin/systemctl`` on sudo's secure_path, as on any Debian host), with
``/usr/local/bin/journalctl`` linked to it, and keeps systemd's rules for what the roles use:

- ``enable``/``disable``/``is-enabled``/``list-unit-files``/``mask``/``unmask`` are Debian's own
  ``systemctl`` in offline mode: the ``[Install]`` section decides the ``.wants`` symlinks, exactly
  as on a real host;
- ``daemon-reload`` loads the unit files; ``show`` reports ``LoadState``, ``ActiveState``,
  ``SubState``, ``UnitFileState`` and ``NeedDaemonReload`` (a unit file changed since the last
  reload), for a long-running service also ``MainPID``, ``NRestarts``, ``Result``,
  ``ExecMainCode`` and ``ExecMainStatus`` (``-p``/``--property=`` and ``--value`` as systemctl
  reads them); ``is-active``, ``is-failed``, ``reset-failed`` and a short ``status`` as
  systemctl(1) has them;
- ``Type=oneshot`` units: ``start``/``restart`` run their ``ExecStart`` lines in order (a ``-``
  prefix ignores failure; ``ConditionPathExists`` is honoured; ``RemainAfterExit`` keeps them
  active), their output on systemctl's own;
- ``Type=simple`` and ``Type=exec`` units run as long-running services, by the rules of
  systemd.service(5), systemd.unit(5) and systemd.kill(5):

  * ``start`` forks a supervisor for the service (a new session, forked twice: it outlives the
    ``systemctl`` that ran it over SSH), which forks the main process in the service's sandbox
    (below) and environment: systemd's ``PATH`` and nothing of the caller's, ``Environment=``,
    ``EnvironmentFile=`` (``-`` for an optional one), ``$VAR``/``${VAR}`` in ``ExecStart=``,
    ``WorkingDirectory=``, ``User=``/``Group=``. ``start`` returns once the process is forked
    (``simple``: a missing binary then fails the unit with status 203/EXEC) or once its binary was
    executed (``exec``: a missing binary fails the start itself, exit status 1, as systemctl
    reports it). ``ConditionPathExists=`` not met skips the start; a running unit's start does
    nothing;
  * the supervisor is a child subreaper: every process the service starts stays its descendant
    (a daemon that double-forks comes back to it), and its descendants are the service's
    control group. When the main process exits it records ``ExecMainCode``/``ExecMainStatus``
    and what systemd calls the result, ends what is left of the group as ``stop`` does, and
    applies ``Restart=`` by systemd.service(5)'s table (``no``, ``on-success``, ``on-failure``,
    ``on-abnormal``, ``on-abort``, ``always``; a clean exit is status 0, SIGHUP, SIGINT, SIGTERM
    or SIGPIPE, or one of ``SuccessExitStatus=``; ``RestartPreventExitStatus=`` and
    ``RestartForceExitStatus=`` win): after ``RestartSec=`` (default 100ms), in
    ``activating``/``auto-restart``, ``NRestarts`` counted. Every start, manual ones too, counts
    against the start limit of systemd.unit(5) (``StartLimitIntervalSec=`` default 10s,
    ``StartLimitBurst=`` default 5, in ``[Unit]``): a start beyond it is refused ("Start request
    repeated too quickly") and the unit is ``failed``; ``reset-failed`` clears the count;
  * ``stop`` (systemd.kill(5)): ``KillSignal=`` (SIGTERM), then SIGCONT (and SIGHUP with
    ``SendSIGHUP=``), to every process of the service (``KillMode=control-group``; ``mixed``,
    ``process`` and ``none`` as documented), ``FinalKillSignal=`` (SIGKILL) to those left after
    ``TimeoutStopSec=`` (or ``TimeoutSec=``; default 90s; ``infinity``), unless ``SendSIGKILL=no``;
    the unit is ``inactive`` (``failed`` with result ``timeout`` when it needed SIGKILL, as
    systemd has it) and is not restarted. ``restart`` is stop then start, ``try-restart`` only
    of an active unit, ``reload`` runs ``ExecReload=`` (with ``$MAINPID``), ``kill [-s SIG]
    [--kill-whom=main|all]`` signals its processes (the restart logic applies as to any exit);
  * what the service writes on stdout and stderr, and the manager's lines about it ("Main
    process exited, code=killed, status=9/KILL", "Scheduled restart job, restart counter is at
    1."), go where systemd sends them to the journal: the unit's journal file
    ``/run/lab-systemd/journal/<unit>.log``, which ``journalctl -u UNIT [-n N] [-f]`` prints
    (other uses of ``journalctl`` are the real one's);
- a service's sandboxing (systemd.exec(5)) is applied to its processes, a long-running one's as a
  oneshot's, as systemd applies it, in a mount namespace of their own: ``ProtectSystem=``
  (``strict``: every mount read-only but the API file systems ``/dev``, ``/proc`` and ``/sys``;
  ``full``/``yes``: ``/usr``, ``/boot``, ``/efi``, and ``/etc`` for ``full``), ``ReadWritePaths=``
  (writable again; a missing path fails the unit with status 226/NAMESPACE unless prefixed with
  ``-``), ``PrivateTmp=``, ``ProtectHome=`` and ``NoNewPrivileges=``; so a unit that writes where
  its sandbox forbids fails here as on a host;
- ``--boot`` (run by lab/node_init.py) starts every unit enabled for ``multi-user.target``,
  oneshot and long-running, in ``After=``/``Before=`` order, as systemd does when the node boots;
  ``--shutdown`` (lab/node_init.py, when the node is stopped) stops the running services in the
  reverse order. The state lives in ``/run/lab-systemd`` (a tmpfs: gone after a reboot, like
  systemd's). A node's power-off ends what is left with the node: lab/nodes.py kills every process
  of the node's mount namespace and their descendants, so the services in their sandboxes'
  namespaces and their supervisors die with it, as on a real reboot.

``$SYSTEMD_UNIT_PATH`` (systemd's own variable: where units are looked up; a trailing ``:`` adds
the usual directories) and ``$LAB_SYSTEMD_STATE`` (the state directory) let the unit tests run this
file against directories of their own. Only the standard library: it runs with the node's system
interpreter.
"""

import ctypes
import ctypes.util
import errno
import fcntl
import grp
import hashlib
import json
import os
import pathlib
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback

REAL = "/usr/bin/systemctl"
REAL_JOURNALCTL = "/usr/bin/journalctl"
DEFAULT_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
OFFLINE = {"enable", "disable", "is-enabled", "list-unit-files", "mask", "unmask", "reenable", "preset"}


def _unit_dirs():
    value = os.environ.get("SYSTEMD_UNIT_PATH", "")
    if not value:
        return DEFAULT_UNIT_DIRS
    dirs = tuple(d for d in value.split(":") if d)
    return dirs + DEFAULT_UNIT_DIRS if value.endswith(":") else dirs


UNIT_DIRS = _unit_dirs()
STATE = pathlib.Path(os.environ.get("LAB_SYSTEMD_STATE", "/run/lab-systemd"))


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


def _atomic_write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _save_state(state):
    _atomic_write(STATE / "state.json", json.dumps(state, indent=1, sort_keys=True))


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
    try:
        result = subprocess.run([REAL, "is-enabled", unit], capture_output=True, text=True, check=False)
    except OSError:
        return "not-found"
    return result.stdout.strip() or "not-found"


def service_type(sections):
    """Type= as systemd.service(5) defaults it: simple with an ExecStart=, oneshot without."""
    service = sections.get("Service", {})
    kind = (service.get("Type") or [""])[-1].strip()
    return kind or ("simple" if service.get("ExecStart") else "oneshot")


LONG_RUNNING = ("simple", "exec")
RUNNING_STATES = ("active", "activating", "deactivating", "reloading")


def show(state, unit, properties=(), value_only=False):
    path = unit_path(unit)
    props = {"Id": unit, "Names": unit}
    if path is None:
        props.update(LoadState="not-found", ActiveState="inactive", SubState="dead", UnitFileState="")
    else:
        sections = parse_unit(path)
        kind = service_type(sections)
        props.update(
            Type=kind,
            LoadState="loaded",
            Description=(sections.get("Unit", {}).get("Description") or [unit])[-1],
            FragmentPath=str(path),
            UnitFileState=unit_file_state(unit),
            NeedDaemonReload="yes" if state["loaded"].get(unit) != _digest(path) else "no",
        )
        if kind in LONG_RUNNING:
            runtime = unit_runtime(unit) or {}
            props.update(
                Restart=_last(sections.get("Service", {}), "Restart", "no"),
                ActiveState=runtime.get("ActiveState", "inactive"),
                SubState=runtime.get("SubState", "dead"),
                Result=runtime.get("Result", "success"),
                MainPID=runtime.get("MainPID", 0),
                ExecMainPID=runtime.get("ExecMainPID", 0),
                ExecMainCode=runtime.get("ExecMainCode", 0),
                ExecMainStatus=runtime.get("ExecMainStatus", 0),
                NRestarts=runtime.get("NRestarts", 0),
            )
        else:
            active = state["active"].get(unit, "inactive")
            props.update(ActiveState=active, SubState={"active": "exited", "failed": "failed"}.get(active, "dead"))
    for key in properties or props:
        if key in props:
            print(props[key] if value_only else f"{key}={props[key]}")
    return 0


# systemd.exec(5) sandboxing: what the lab applies (flags from <linux/mount.h>, <linux/sched.h>, <linux/prctl.h>)
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18
)  # fmt: skip
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
# systemd's exit statuses for a service process that failed before its binary ran (systemd.exec(5))
EXIT_CHDIR, EXIT_EXEC, EXIT_USER, EXIT_GROUP, EXIT_NAMESPACE = 200, 203, 217, 216, 226
EXIT_NAMES = {
    0: "SUCCESS",
    1: "FAILURE",
    2: "INVALIDARGUMENT",
    3: "NOTIMPLEMENTED",
    4: "NOPERMISSION",
    5: "NOTINSTALLED",
    6: "NOTCONFIGURED",
    7: "NOTRUNNING",
    EXIT_CHDIR: "CHDIR",
    EXIT_EXEC: "EXEC",
    EXIT_GROUP: "GROUP",
    EXIT_USER: "USER",
    EXIT_NAMESPACE: "NAMESPACE",
}
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


def _yes(service, key, default="no"):
    return _last(service, key, default) in ("yes", "true", "1", "on")


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


# --- what systemd.exec(5) and systemd.service(5) give a service's processes -------------------------
# systemd's PATH for the services of the system manager; ":/sbin:/bin" where /usr is not merged
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin" + ("" if os.path.islink("/bin") else ":/sbin:/bin")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WORD_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class ServiceError(Exception):
    """A service that cannot be started as configured: the message says why (systemd's words)."""


def service_environment(service):
    """The environment of a service's processes: systemd's PATH, then ``Environment=`` (an empty
    assignment resets the list), then ``EnvironmentFile=`` (its settings win; ``-`` for a file that
    may be missing). Nothing of the caller's environment."""
    env = {}
    for line in service.get("Environment", []):
        if not line.strip():
            env.clear()
            continue
        for word in shlex.split(line):
            key, sep, value = word.partition("=")
            if sep and key:
                env[key] = value
    for line in service.get("EnvironmentFile", []):
        optional, name = line.startswith("-"), line.lstrip("-").strip()
        try:
            text = pathlib.Path(name).read_text()
        except OSError as exc:
            if optional:
                continue
            raise ServiceError(f"Failed to load environment files: {exc.strerror}: {name}") from exc
        for raw in text.splitlines():
            entry = raw.strip()
            if not entry or entry.startswith(("#", ";")) or "=" not in entry:
                continue
            key, _sep, value = entry.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[key.strip()] = value
    return {"PATH": DEFAULT_PATH, **env}


def command_line(line, env):
    """An ``Exec*=`` line as systemd.service(5) reads it: its prefixes (``-`` a failure counts as
    success, ``@`` the second word is argv[0]), words quoted as in a shell, ``$VAR`` a variable's
    words, ``${VAR}`` its value inside a word. Returns (executable, argv, failure ignored)."""
    prefixes = ""
    while line and line[0] in "-@+!:|":
        prefixes, line = prefixes + line[0], line[1:]
    words = []
    for word in shlex.split(line):
        whole = _WORD_VARIABLE.fullmatch(word)
        if whole:
            words.extend(env.get(whole.group(1), "").split())
        else:
            words.append(_VARIABLE.sub(lambda match: env.get(match.group(1), ""), word))
    if not words:
        raise ServiceError("Service has no ExecStart= command line. Refusing.")
    argv = words[1:] if "@" in prefixes else words
    return words[0], argv or words[:1], "-" in prefixes


def _exec_commands(service):
    """The ``ExecStart=`` lines; an empty assignment resets the list (systemd.service(5))."""
    commands = []
    for line in service.get("ExecStart", []):
        commands = [] if not line.strip() else [*commands, line]
    return commands


def timespan(text, default):
    """A time span of systemd.time(7) in seconds: ``90``, ``100ms``, ``1min 30s``; None for
    ``infinity`` (and 0, which disables a timeout too). ``default`` when unset or unreadable."""
    text = (text or "").strip().lower()
    if not text:
        return default
    if text == "infinity":
        return None
    units = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "": 1, "s": 1, "sec": 1, "second": 1}
    units.update(seconds=1, m=60, min=60, minute=60, minutes=60, h=3600, hr=3600, hour=3600, hours=3600)
    units.update(d=86400, day=86400, days=86400)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([a-z]*)|\s", "", text) or any(u not in units for _n, u in parts):
        return default
    return sum(float(number) * units[unit] for number, unit in parts)


def _signal_number(name):
    name = name.strip().upper()
    if name.isdigit():
        return int(name)
    return signal.Signals[name if name.startswith("SIG") else "SIG" + name].value


def exit_statuses(service, key):
    """``SuccessExitStatus=``-like lists: exit codes and signal names (an empty one resets)."""
    codes, signals = set(), set()
    for line in service.get(key, []):
        if not line.strip():
            codes, signals = set(), set()
        for word in line.split():
            if word.isdigit():
                codes.add(int(word))
            else:
                try:
                    signals.add(_signal_number(word))
                except (KeyError, ValueError):
                    continue
    return codes, signals


# systemd.service(5), table 1 of Restart=: the exit causes each setting restarts on ("signal"
# includes a core dump; a clean exit is "success").
RESTART_ON = {
    "no": set(),
    "always": {"success", "exit-code", "signal", "timeout", "watchdog"},
    "on-success": {"success"},
    "on-failure": {"exit-code", "signal", "timeout", "watchdog"},
    "on-abnormal": {"signal", "timeout", "watchdog"},
    "on-abort": {"signal"},
    "on-watchdog": {"watchdog"},
}
CLEAN_SIGNALS = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE}
CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3  # ExecMainCode, as waitid(2)'s si_code


def describe_status(status):
    """A wait status as systemd logs and shows it: (ExecMainCode, ExecMainStatus, words)."""
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return CLD_EXITED, code, f"code=exited, status={code}/{EXIT_NAMES.get(code, code)}"
    number = os.WTERMSIG(status)
    try:
        name = signal.Signals(number).name[3:]
    except ValueError:
        name = str(number)
    kind = "dumped" if os.WCOREDUMP(status) else "killed"
    return (CLD_DUMPED if kind == "dumped" else CLD_KILLED), number, f"code={kind}, status={number}/{name}"


# --- processes --------------------------------------------------------------------------------------
def _stat(pid):
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_start_time(pid):
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def process_alive(pid, start_time=None):
    fields = _stat(pid) if pid else None
    if not fields or fields[0] == "Z":
        return False
    return start_time is None or int(fields[19]) == start_time


def descendants(root):
    """Every live process below ``root`` (by parent pid, as /proc has them now)."""
    return below([root])


def below(roots):
    """Every live process below any of ``roots`` and not one of them, from one reading of /proc
    (lab/nodes.py walks a node's whole tree with it at power-off)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields and fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    seen = set(roots)
    found, queue = [], [c for root in roots for c in children.get(root, [])]
    while queue:
        pid = queue.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _comm(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _kill(pid, number):
    try:
        os.kill(pid, number)
        return True
    except ProcessLookupError:
        return False


# --- long-running services: their runtime state and journal -------------------------------------------
def _runtime_path(unit):
    return STATE / "units" / f"{unit}.json"


def journal_path(unit):
    """Where a long-running service's output and the manager's lines about it go (the journal's place)."""
    return STATE / "journal" / f"{unit}.log"


def _read_runtime(unit):
    try:
        return json.loads(_runtime_path(unit).read_text())
    except (OSError, ValueError):
        return None


def _supervisor_alive(runtime):
    return bool(runtime) and process_alive(runtime.get("Supervisor", 0), runtime.get("SupervisorStart"))


def unit_runtime(unit):
    """The unit's state as its supervisor last wrote it; a unit whose supervisor is gone (killed:
    nothing watches its processes any more) is failed."""
    runtime = _read_runtime(unit)
    if runtime and runtime.get("ActiveState") in RUNNING_STATES and not _supervisor_alive(runtime):
        runtime.update(ActiveState="failed", SubState="failed", MainPID=0)
    return runtime


class _UnitLock:
    """One start/stop of a unit at a time (flock on a file beside its state)."""

    def __init__(self, unit):
        self.path = STATE / "units" / f"{unit}.lock"

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def _job_failed(unit, why):
    return [
        f"Job for {unit} failed because {why}.",
        f'See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.',
    ]


class Supervisor:
    """The service manager's part for one long-running service, in a process of its own: starts
    the main process, waits for it, restarts it, stops it; records the unit's state for ``show``."""

    WATCHED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}

    def __init__(self, unit, sections, report_fd, previous):
        self.unit, self.report_fd = unit, report_fd
        unit_section, service = sections.get("Unit", {}), sections.get("Service", {})
        self.sections, self.service, self.kind = sections, service, service_type(sections)
        self.description = (unit_section.get("Description") or [unit])[-1]
        self.restart = _last(service, "Restart", "no")
        self.restart_sec = timespan(_last(service, "RestartSec"), 0.1) or 0.0
        both = timespan(_last(service, "TimeoutSec"), 90.0)
        self.timeout_stop = timespan(_last(service, "TimeoutStopSec"), both)
        interval = _last(unit_section, "StartLimitIntervalSec") or _last(unit_section, "StartLimitInterval")
        interval = interval or _last(service, "StartLimitIntervalSec") or _last(service, "StartLimitInterval")
        self.limit_interval = timespan(interval, 10.0) or 0.0
        burst = _last(unit_section, "StartLimitBurst") or _last(service, "StartLimitBurst") or "5"
        self.limit_burst = int(burst) if burst.isdigit() else 5
        self.kill_mode = _last(service, "KillMode", "control-group")
        self.kill_signal = _signal_number(_last(service, "KillSignal", "SIGTERM"))
        self.final_signal = _signal_number(_last(service, "FinalKillSignal", "SIGKILL"))
        self.send_sighup, self.send_sigkill = _yes(service, "SendSIGHUP"), _yes(service, "SendSIGKILL", "yes")
        self.success = exit_statuses(service, "SuccessExitStatus")
        self.prevent = exit_statuses(service, "RestartPreventExitStatus")
        self.force = exit_statuses(service, "RestartForceExitStatus")
        previous = previous or {}
        self.state = {
            "Type": self.kind,
            "ActiveState": previous.get("ActiveState", "inactive"),
            "SubState": previous.get("SubState", "dead"),
            "Result": previous.get("Result", "success"),
            "MainPID": 0,
            "ExecMainPID": previous.get("ExecMainPID", 0),
            "ExecMainCode": previous.get("ExecMainCode", 0),
            "ExecMainStatus": previous.get("ExecMainStatus", 0),
            "NRestarts": 0,  # a manual start begins a new count (systemd flushes it)
            "StartLimit": previous.get("StartLimit"),
            "TimeoutStopSec": self.timeout_stop,
            "Supervisor": os.getpid(),
            "SupervisorStart": process_start_time(os.getpid()),
        }
        self.main, self.main_status, self.ignore_failure = None, None, False
        self.stop_requested = False
        journal = journal_path(unit)
        journal.parent.mkdir(parents=True, exist_ok=True)
        self.journal = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)

    # --- bookkeeping ------------------------------------------------------------------------------
    def log(self, message):
        stamp = time.strftime("%b %d %H:%M:%S")
        os.write(self.journal, f"{stamp} {os.uname().nodename} systemd[{os.getpid()}]: {message}\n".encode())

    def set_state(self, active, sub, **more):
        self.state.update(ActiveState=active, SubState=sub, **more)
        _atomic_write(_runtime_path(self.unit), json.dumps(self.state, indent=1, sort_keys=True))

    def report(self, rc, messages=()):
        """Tell the ``systemctl start`` that forked us how the start went (once)."""
        if self.report_fd is None:
            return
        try:
            os.write(self.report_fd, json.dumps({"rc": rc, "messages": list(messages)}).encode())
        except OSError:  # that systemctl is gone (killed): the service runs on all the same
            pass
        finally:
            os.close(self.report_fd)
            self.report_fd = None

    def fail_result(self, result):
        """systemd keeps the first failure of a run as the unit's result."""
        if self.state["Result"] == "success":
            self.state["Result"] = result

    # --- waiting ----------------------------------------------------------------------------------
    def wait(self, timeout):
        """Sleep until a signal (a child's exit, a stop request) or ``timeout`` seconds (None: no limit)."""
        if timeout is None:
            info = signal.sigwaitinfo(self.WATCHED)
        else:
            info = signal.sigtimedwait(self.WATCHED, max(timeout, 0.0))
        if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
            self.stop_requested = True
        self.reap()

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.main:
                self.main, self.main_status = None, status

    def processes(self):
        """The service's control group: every live process below this supervisor."""
        self.reap()
        return descendants(os.getpid())

    # --- the main process -------------------------------------------------------------------------
    def condition_met(self):
        for condition in self.sections.get("Unit", {}).get("ConditionPathExists", []):
            if os.path.exists(condition.lstrip("!")) == condition.startswith("!"):
                self.log(f"{self.unit}: Condition check resulted in {self.description} being skipped.")
                return False, f"{self.unit}: condition ConditionPathExists={condition} not met: skipped"
        return True, ""

    def start_allowed(self):
        """systemd.unit(5)'s start rate limit: at most StartLimitBurst= starts in a window of
        StartLimitIntervalSec= (0 disables it), every start counted."""
        if self.limit_interval <= 0 or self.limit_burst <= 0:
            return True
        now = time.monotonic()
        begin, count = self.state["StartLimit"] or (None, 0)
        if begin is None or now - begin > self.limit_interval:
            begin, count = now, 0
        count += 1
        self.state["StartLimit"] = (begin, count)
        return count <= self.limit_burst

    def spawn(self):
        """Fork the main process; for Type=exec wait until its binary runs. Returns an error message
        for the start job or ''."""
        commands = _exec_commands(self.service)
        if len(commands) != 1:
            raise ServiceError(
                f"{self.unit}: Service has {'no' if not commands else 'more than one'} ExecStart= setting, "
                "which is only allowed for Type=oneshot services. Refusing."
            )
        env = service_environment(self.service)
        executable, argv, self.ignore_failure = command_line(commands[0], env)
        self.log(f"Starting {self.description}...")
        error_read, error_write = os.pipe2(os.O_CLOEXEC)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the main process
            try:
                self.exec_main(executable, argv, env, error_write)
            finally:
                os._exit(EXIT_EXEC)
        os.close(error_write)
        self.main, self.main_status = pid, None
        self.state.update(Result="success", MainPID=pid, ExecMainPID=pid, ExecMainCode=0, ExecMainStatus=0)
        if self.kind == "exec":
            self.set_state("activating", "start")
            with os.fdopen(error_read, "rb") as pipe:
                failed = pipe.read()
        else:
            os.close(error_read)
            failed = b""
        if failed:
            return "the control process exited with error code"
        self.set_state("active", "running")
        self.log(f"Started {self.description}.")
        return ""

    def exec_main(self, executable, argv, env, error_write):
        """In the forked child: systemd's steps before execve (signals, session, output to the
        journal, sandbox, user, working directory); a failed step exits with systemd's status."""
        status = EXIT_EXEC
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            for number in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
                signal.signal(number, signal.SIG_DFL)
            if not _yes(self.service, "IgnoreSIGPIPE", "yes"):
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(self.journal, 1)
            os.dup2(self.journal, 2)
            for entry in os.listdir("/proc/self/fd"):
                if int(entry) > 2 and int(entry) != error_write:
                    try:
                        os.close(int(entry))
                    except OSError:
                        continue
            os.umask(0o022)
            status = EXIT_NAMESPACE
            missing = [p for p, optional in sandbox_paths(self.service) if not optional and not os.path.exists(p)]
            if missing:
                raise OSError(
                    errno.ENOENT, f"Failed to set up mount namespacing: {missing[0]}: No such file or directory"
                )
            try:
                enter_sandbox(self.service)
            except OSError as exc:
                raise OSError(exc.errno, f"Failed to set up mount namespacing: {exc}") from exc
            home = "/"
            user = _last(self.service, "User")
            group = _last(self.service, "Group")
            if user:
                status = EXIT_USER
                entry = pwd.getpwnam(user) if not user.isdigit() else pwd.getpwuid(int(user))
                home = entry.pw_dir
                env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name, SHELL=entry.pw_shell)
                status = EXIT_GROUP
                gid = (grp.getgrnam(group).gr_gid if not group.isdigit() else int(group)) if group else entry.pw_gid
                os.initgroups(entry.pw_name, gid)
                os.setgid(gid)
                status = EXIT_USER
                os.setuid(entry.pw_uid)
            elif group:
                status = EXIT_GROUP
                os.setgid(grp.getgrnam(group).gr_gid if not group.isdigit() else int(group))
            status = EXIT_CHDIR
            workdir = (self.service.get("WorkingDirectory") or [""])[-1].strip()
            if workdir:
                optional, workdir = workdir.startswith("-"), workdir.lstrip("-")
                try:
                    os.chdir(home if workdir == "~" else workdir)
                except OSError:
                    if not optional:
                        raise
                    os.chdir("/")
            else:
                os.chdir("/")
            status = EXIT_EXEC
            path = executable if "/" in executable else shutil.which(executable, path=env["PATH"])
            if path is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), executable)
            try:
                os.execve(path, argv, env)  # noqa: S606 - the service's binary, as systemd runs it
            except OSError as exc:
                raise OSError(exc.errno, f"Failed at step EXEC spawning {path}: {exc.strerror}") from exc
        except (OSError, KeyError, ValueError) as exc:
            step = {EXIT_USER: "USER", EXIT_GROUP: "GROUP", EXIT_CHDIR: "CHDIR"}.get(status)
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            message = f"Failed at step {step}: {text}" if step else text
            if isinstance(exc, FileNotFoundError) and status == EXIT_EXEC and exc.filename:
                message = f"Failed at step EXEC spawning {exc.filename}: No such file or directory"
            os.write(2, f"{self.unit}: {message}\n".encode())
            os.write(error_write, str(status).encode())
            os._exit(status)

    def main_exited(self):
        """Record how the main process ended and the result it makes; returns (code, status)."""
        code, number, words = describe_status(self.main_status)
        self.main_status = None
        self.state.update(MainPID=0, ExecMainCode=code, ExecMainStatus=number)
        self.log(f"{self.unit}: Main process exited, {words}")
        codes, signals = self.success
        if code == CLD_EXITED:
            clean = number == 0 or number in codes
            cause = "success" if clean or self.ignore_failure else "exit-code"
        else:
            clean = number in CLEAN_SIGNALS or number in signals
            cause = "success" if clean or self.ignore_failure else ("core-dump" if code == CLD_DUMPED else "signal")
        if cause != "success":
            self.fail_result(cause)
        return code, number

    def should_restart(self, code, number):
        if self.stop_requested:
            return False
        listed = (lambda lists: number in lists[0]) if code == CLD_EXITED else (lambda lists: number in lists[1])
        if listed(self.prevent):
            return False
        if listed(self.force):
            return True
        cause = {"core-dump": "signal"}.get(self.state["Result"], self.state["Result"])
        return cause in RESTART_ON.get(self.restart, set())

    # --- stopping ---------------------------------------------------------------------------------
    def terminate(self):
        """systemd.kill(5): KillSignal= (then SIGCONT, SIGHUP with SendSIGHUP=) to the processes
        KillMode= names, FinalKillSignal= to those left after TimeoutStopSec=. The result is
        ``timeout`` when that was needed."""
        mode, timed_out = self.kill_mode, False
        if mode == "none" or not self.processes():
            return
        first = self.processes() if mode == "control-group" else [self.main] if self.main else []
        self.set_state("deactivating", "stop-sigterm")
        for number in (self.kill_signal, *((signal.SIGHUP,) if self.send_sighup else ()), signal.SIGCONT):
            for pid in first:
                _kill(pid, number)
        deadline = None if self.timeout_stop is None else time.monotonic() + self.timeout_stop
        while True:
            left = self.processes()
            if not left or (mode != "control-group" and self.main is None):
                break
            if deadline is not None and time.monotonic() >= deadline:
                self.log(f"{self.unit}: State 'stop-sigterm' timed out. Killing.")
                self.fail_result("timeout")
                timed_out = True
                break
            self.wait(0.05 if deadline is None else min(0.05, deadline - time.monotonic()))
        left = self.processes()
        if mode == "process":
            left = [self.main] if self.main else []
        if left and self.send_sigkill and (mode == "mixed" or timed_out):
            self.set_state("deactivating", "stop-sigkill")
            for pid in left:
                name = signal.Signals(self.final_signal).name
                self.log(f"{self.unit}: Killing process {pid} ({_comm(pid)}) with signal {name}.")
                _kill(pid, self.final_signal)
            deadline = time.monotonic() + max(self.timeout_stop or 0.0, 5.0)
            while self.processes() and time.monotonic() < deadline:
                self.wait(0.05)

    def finish(self):
        if self.state["Result"] == "success":
            self.set_state("inactive", "dead", MainPID=0)
            self.log(f"{self.unit}: Deactivated successfully.")
        else:
            self.set_state("failed", "failed", MainPID=0)
            self.log(f"{self.unit}: Failed with result '{self.state['Result']}'.")

    # --- the life of the service ------------------------------------------------------------------
    def run(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.WATCHED)
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # the service's orphans come back to us
        restarting = False
        while True:
            met, why = self.condition_met()
            if not met:
                if restarting:
                    self.set_state("inactive", "dead", MainPID=0)
                self.report(0, [why])
                return
            if not self.start_allowed():
                self.log(f"{self.unit}: Start request repeated too quickly.")
                self.fail_result("start-limit-hit")
                self.finish()
                self.log(f"Failed to start {self.description}.")
                self.report(
                    1,
                    [
                        *_job_failed(self.unit, "start of the service was attempted too often"),
                        f'To force a start use "systemctl reset-failed {self.unit}" followed by '
                        f'"systemctl start {self.unit}" again.',
                    ],
                )
                return
            try:
                error = self.spawn()
            except ServiceError as exc:
                self.log(str(exc))
                self.fail_result("resources")
                self.finish()
                self.report(1, [str(exc), *_job_failed(self.unit, "of unavailable resources or another system error")])
                return
            if not error:
                self.report(0)
            while self.main is not None and not self.stop_requested:
                self.wait(None)
            if self.stop_requested:
                self.log(f"Stopping {self.description}...")
            code, number = None, None
            if self.main is None and self.main_status is not None:
                code, number = self.main_exited()
            self.terminate()  # a stop's signals, or what the main process left of the group
            settle = time.monotonic() + 1.0  # a killed main process is reaped here
            while self.main is not None and self.main_status is None and time.monotonic() < settle:
                if process_alive(self.main):
                    break
                self.wait(0.01)
            if code is None and self.main is None and self.main_status is not None:
                code, number = self.main_exited()
            if self.stop_requested:
                self.finish()
                self.log(f"Stopped {self.description}.")
                return
            if code is None or not self.should_restart(code, number):
                self.finish()
                self.report(1, _job_failed(self.unit, error))  # a failed Type=exec start, once it is recorded
                return
            self.set_state("activating", "auto-restart", MainPID=0)
            self.report(1, _job_failed(self.unit, error))
            deadline = time.monotonic() + self.restart_sec
            while not self.stop_requested and time.monotonic() < deadline:
                self.wait(deadline - time.monotonic())
            if self.stop_requested:
                self.set_state("inactive", "dead", MainPID=0)
                self.log(f"Stopped {self.description}.")
                return
            self.state["NRestarts"] += 1
            self.log(f"{self.unit}: Scheduled restart job, restart counter is at {self.state['NRestarts']}.")
            restarting = True


def _start_supervisor(unit, sections, previous):
    """Fork the unit's supervisor (twice, in a session of its own: it outlives this command and
    the SSH session that ran it) and wait for its report of the start."""
    report_read, report_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_read)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            for entry in os.listdir("/proc/self/fd"):  # the unit's lock, the caller's pipes
                if int(entry) > 2 and int(entry) != report_write:
                    try:
                        os.close(int(entry))
                    except OSError:
                        continue
            os.chdir("/")
            os.umask(0o022)
            try:
                supervisor = Supervisor(unit, sections, report_write, previous)
            except (OSError, KeyError, ValueError) as exc:  # a setting it cannot read
                os.write(report_write, json.dumps({"rc": 1, "messages": [f"{unit}: {exc!r}"]}).encode())
                os._exit(1)
            try:
                supervisor.run()
            except BaseException:  # noqa: BLE001 - the reason goes to the unit's journal, the unit fails
                supervisor.log(f"{unit}: the lab's service manager failed: {traceback.format_exc()}")
                supervisor.fail_result("resources")
                supervisor.finish()
                supervisor.report(1, [f"{unit}: the lab's service manager failed; see journalctl -u {unit}"])
        finally:
            os._exit(0)
    os.close(report_write)
    os.waitpid(pid, 0)
    with os.fdopen(report_read, "rb") as pipe:
        data = pipe.read()
    report = json.loads(data) if data else {"rc": 1, "messages": [f"{unit}: its supervisor ended before starting it"]}
    for message in report["messages"]:
        print(message, file=sys.stderr)
    return report["rc"]


def start_service(unit, sections):
    with _UnitLock(unit):
        current = unit_runtime(unit)
        if current and current.get("ActiveState") in RUNNING_STATES and _supervisor_alive(current):
            return 0  # already running (or restarting): nothing to do, as for systemd
        return _start_supervisor(unit, sections, current)


def stop_service(unit):
    """Ask the unit's supervisor to stop it and wait until it has (a stop job)."""
    with _UnitLock(unit):
        runtime = _read_runtime(unit)
        if not _supervisor_alive(runtime):
            return 0
        _kill(runtime["Supervisor"], signal.SIGTERM)
        timeout = runtime.get("TimeoutStopSec", 90.0)
        deadline = None if timeout is None else time.monotonic() + 2 * timeout + 10.0
        while _supervisor_alive(runtime):
            if deadline is not None and time.monotonic() > deadline:
                print(f"Job for {unit} timed out.", file=sys.stderr)
                return 1
            time.sleep(0.01)
    return 0


def kill_service(unit, number, whom):
    runtime = unit_runtime(unit)
    if not _supervisor_alive(runtime):
        return 0
    pids = [runtime["MainPID"]] if whom == "main" else descendants(runtime["Supervisor"])
    if whom == "main" and not runtime.get("MainPID"):
        print(f"Failed to kill unit {unit}: No main process to kill", file=sys.stderr)
        return 1
    for pid in pids:
        _kill(pid, number)
    return 0


def reload_service(unit, sections):
    service = sections.get("Service", {})
    runtime = unit_runtime(unit)
    if not service.get("ExecReload"):
        print(f"Failed to reload {unit}: Job type reload is not applicable for unit {unit}.", file=sys.stderr)
        return 1
    if not runtime or runtime.get("ActiveState") != "active":
        print(f"{unit} is not active, cannot reload.", file=sys.stderr)
        return 1
    env = {**service_environment(service), "MAINPID": str(runtime.get("MainPID", 0))}
    with open(journal_path(unit), "ab") as journal:
        for line in service["ExecReload"]:
            executable, argv, ignore = command_line(line, env)
            done = subprocess.run(
                argv, executable=executable, env=env, stdout=journal, stderr=journal, check=False,
                preexec_fn=lambda: _sandboxed(unit, service),  # noqa: PLW1509
            )  # fmt: skip
            if done.returncode != 0 and not ignore:
                print(*_job_failed(unit, "the control process exited with error code"), sep="\n", file=sys.stderr)
                return 1
    return 0


def reset_failed(state, unit):
    if state["active"].get(unit) == "failed":
        state["active"][unit] = "inactive"
    with _UnitLock(unit):
        runtime = _read_runtime(unit)
        if runtime and not _supervisor_alive(runtime):
            if runtime.get("ActiveState") == "failed":
                runtime.update(ActiveState="inactive", SubState="dead")
            runtime.update(Result="success", StartLimit=None, NRestarts=0)
            _atomic_write(_runtime_path(unit), json.dumps(runtime, indent=1, sort_keys=True))


# --- starting a unit of either kind ------------------------------------------------------------------
def run_unit(state, unit):
    path = unit_path(unit)
    if path is None:
        print(f"Failed to start {unit}: Unit {unit} not found.", file=sys.stderr)
        return 5
    if state["loaded"].get(unit) != _digest(path):
        print(f"Warning: The unit file of {unit} changed on disk. Run 'systemctl daemon-reload'.", file=sys.stderr)
    sections = parse_unit(path)
    kind = service_type(sections)
    if kind in LONG_RUNNING:
        return start_service(unit, sections)
    for condition in sections.get("Unit", {}).get("ConditionPathExists", []):
        negate = condition.startswith("!")
        if os.path.exists(condition.lstrip("!")) == negate:
            print(f"{unit}: condition ConditionPathExists={condition} not met: skipped")
            state["active"][unit] = "inactive"
            return 0
    service = sections.get("Service", {})
    if kind != "oneshot":
        print(
            f"{unit}: Type={kind} is not supported by the lab's service manager (only oneshot, simple and exec)",
            file=sys.stderr,
        )
        state["active"][unit] = "failed"
        return 1
    missing = [path for path, optional in sandbox_paths(service) if not optional and not os.path.exists(path)]
    if missing:
        print(f"{unit}: Failed to set up mount namespacing: {missing[0]}: No such file or directory", file=sys.stderr)
        print(f"{unit}: Main process exited, code=exited, status={EXIT_NAMESPACE}/NAMESPACE", file=sys.stderr)
        state["active"][unit] = "failed"
        return 1
    try:
        env = service_environment(service)
        commands = [command_line(line, env) for line in _exec_commands(service)]
    except (ServiceError, ValueError) as exc:
        print(f"{unit}: {exc}", file=sys.stderr)
        state["active"][unit] = "failed"
        return 1
    for executable, argv, ignore in commands:
        try:
            rc = subprocess.run(
                argv, executable=executable, env=env, check=False,
                preexec_fn=lambda: _sandboxed(unit, service),  # noqa: PLW1509
            ).returncode  # fmt: skip
        except OSError as exc:
            print(f"{unit}: Failed at step EXEC spawning {executable}: {exc.strerror}", file=sys.stderr)
            rc = EXIT_EXEC
        if rc != 0 and not ignore:
            print(f"{unit}: {executable} exited with status {rc}", file=sys.stderr)
            state["active"][unit] = "failed"
            return 1
    remain = (service.get("RemainAfterExit") or ["no"])[-1].lower() in ("yes", "true", "1", "on")
    state["active"][unit] = "active" if remain else "inactive"
    print(f"Finished {unit}")
    return 0


def stop_unit(state, unit):
    path = unit_path(unit)
    if path is not None and service_type(parse_unit(path)) in LONG_RUNNING:
        return stop_service(unit)
    state["active"][unit] = "inactive"
    return 0


def start_order(units):
    """``units`` in After=/Before= order among themselves (ties by name), as systemd orders jobs."""
    units = sorted(units)
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
    return order


def boot(state):
    """Start what multi-user.target wants, in After=/Before= order (ties by name)."""
    daemon_reload(state)
    wants = pathlib.Path(UNIT_DIRS[0]) / "multi-user.target.wants"
    units = [p.name for p in wants.iterdir() if p.name.endswith(".service")] if wants.is_dir() else []
    status = 0
    for unit in start_order(units):
        print(f"Starting {unit}")
        status |= run_unit(state, unit)
        _save_state(state)
    return 1 if status else 0


def shutdown():
    """Stop every running service in the reverse of the start order, as systemd does when the
    machine goes down (lab/node_init.py, when the node is stopped)."""
    directory = STATE / "units"
    units = [p.name[: -len(".json")] for p in directory.glob("*.json")] if directory.is_dir() else []
    running = [u for u in units if _supervisor_alive(_read_runtime(u))]
    for unit in reversed(start_order(running)):
        print(f"Stopping {unit}")
        stop_service(unit)
    return 0


# --- journalctl -u -----------------------------------------------------------------------------------
def journalctl(argv):
    """``journalctl -u UNIT [-n N] [-f] [-b] [-e] [-x] [-q] [--no-pager]``: the journal files of
    long-running units (above). Anything else is the real journalctl's."""
    units, lines, follow, args, unknown = [], None, False, list(argv), False
    while args and not unknown:
        arg = args.pop(0)
        if arg.startswith("--unit=") or arg.startswith("--lines="):
            key, _sep, value = arg.partition("=")
            if key == "--unit":
                units.append(value)
            else:
                lines = int(value)
        elif arg in ("--unit", "--lines") and args:
            if arg == "--unit":
                units.append(args.pop(0))
            else:
                lines = int(args.pop(0))
        elif arg in ("--follow", "--no-pager", "--boot", "--quiet", "--catalog", "--pager-end", "--no-hostname"):
            follow = follow or arg == "--follow"
            lines = 1000 if arg == "--pager-end" and lines is None else lines
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            for index, flag in enumerate(arg[1:]):
                rest = arg[index + 2 :]
                if flag == "u":
                    units.append(rest or (args.pop(0) if args else ""))
                    break
                if flag == "n":
                    if rest.isdigit():
                        lines = int(rest)
                    elif not rest and args and args[0].isdigit():
                        lines = int(args.pop(0))
                    else:
                        lines = 10
                    break
                if flag in "fbqxe":
                    follow = follow or flag == "f"
                    lines = 1000 if flag == "e" and lines is None else lines
                else:
                    unknown = True
                    break
        else:
            unknown = True
    if unknown or not units or not all(units):
        os.execv(REAL_JOURNALCTL, ["journalctl", *argv])  # noqa: S606 - the real one, for the rest
    paths = [journal_path(u if "." in u else f"{u}.service") for u in units]
    offsets = {}
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        except PermissionError:
            print(f"No journal files were opened due to insufficient permissions ({path}).", file=sys.stderr)
            return 1
        shown = text.splitlines()[-lines:] if lines else ([] if lines == 0 else text.splitlines())
        for line in shown:
            print(line)
        offsets[path] = len(text.encode())
    if not any(offsets.values()) and not follow:
        print("-- No entries --")
    sys.stdout.flush()
    try:
        while follow:
            time.sleep(0.2)
            for path in paths:
                if path.exists() and path.stat().st_size > offsets[path]:
                    with open(path, "rb") as handle:
                        handle.seek(offsets[path])
                        data = handle.read()
                    offsets[path] += len(data)
                    sys.stdout.write(data.decode(errors="replace"))
                    sys.stdout.flush()
    except KeyboardInterrupt:
        return 0
    return 0


# --- the command line --------------------------------------------------------------------------------
IGNORED_OPTIONS = {"--system", "--no-block", "--quiet", "-q", "--no-pager", "-l", "--full", "--no-ask-password"}


def _unit_name(name):
    return name if "." in name else f"{name}.service"


def main(argv):
    if pathlib.Path(argv[0]).name == "journalctl":
        return journalctl(argv[1:])
    args, properties, value_only, kill_signal, whom = [], [], False, signal.SIGTERM, "all"
    rest = [a for a in argv[1:] if a not in IGNORED_OPTIONS]
    while rest:
        arg = rest.pop(0)
        if arg in ("-p", "--property", "-s", "--signal", "--kill-whom", "--kill-who") and rest:
            arg = f"{arg}={rest.pop(0)}"
        key, _sep, value = arg.partition("=")
        if key in ("-p", "--property") or (arg.startswith("-p") and not arg.startswith("--")):
            properties.extend(p for p in (value or arg[2:]).split(",") if p)
        elif key in ("-s", "--signal"):
            kill_signal = _signal_number(value)
        elif key in ("--kill-whom", "--kill-who"):
            whom = value
        elif arg == "--value":
            value_only = True
        else:
            args.append(arg)
    if not args:
        print("usage: systemctl COMMAND [UNIT...]", file=sys.stderr)
        return 1
    state = _load_state()
    command, units = args[0], [_unit_name(u) for u in args[1:]]
    if command == "--boot":
        return boot(state)
    if command == "--shutdown":
        return shutdown()
    if command in OFFLINE:
        return _real(args)
    if command == "daemon-reload":
        daemon_reload(state)
        return 0
    if command == "show":
        return max((show(state, u, properties, value_only) for u in units), default=0)
    if command in ("is-active", "is-failed"):
        states = [_active_state(state, u) for u in units]
        print("\n".join(states))
        if command == "is-failed":
            return 0 if any(s == "failed" for s in states) else 1
        return 0 if states and all(s == "active" for s in states) else 3
    if command == "status":
        return max((status(state, u) for u in units), default=0)
    if command == "reset-failed":
        for unit in units:
            reset_failed(state, unit)
        _save_state(state)
        return 0
    if command == "kill":
        return max((kill_service(u, kill_signal, whom) for u in units), default=0)
    if command in ("start", "restart", "reload", "try-restart", "reload-or-restart"):
        rc = 0
        for unit in units:
            rc |= _start_command(state, command, unit)
        _save_state(state)
        return rc
    if command == "stop":
        rc = 0
        for unit in units:
            rc |= stop_unit(state, unit)
        _save_state(state)
        return rc
    print(f"systemctl {command}: not provided by the lab's service manager (lab/node_systemctl.py)", file=sys.stderr)
    return 1


def status(state, unit):
    """``systemctl status UNIT``, short: what it is, its state, its main process, the end of its
    journal. Exit status 0 when active, 3 when not, 4 for no such unit (systemctl(1))."""
    path = unit_path(unit)
    if path is None:
        print(f"Unit {unit} could not be found.", file=sys.stderr)
        return 4
    sections = parse_unit(path)
    description = (sections.get("Unit", {}).get("Description") or [unit])[-1]
    active = _active_state(state, unit)
    print(f"* {unit} - {description}")
    print(f"     Loaded: loaded ({path}; {unit_file_state(unit)})")
    if service_type(sections) in LONG_RUNNING:
        runtime = unit_runtime(unit) or {}
        sub, result = runtime.get("SubState", "dead"), runtime.get("Result", "success")
        print(f"     Active: {active} ({sub})" + (f" (Result: {result})" if result != "success" else ""))
        if runtime.get("MainPID"):
            print(f"   Main PID: {runtime['MainPID']} ({_comm(runtime['MainPID'])})")
        try:
            lines = journal_path(unit).read_text(errors="replace").splitlines()[-10:]
        except OSError:
            lines = []
        print("", *lines, sep="\n")
    else:
        print(f"     Active: {active}")
    return 0 if active == "active" else 3


def _active_state(state, unit):
    path = unit_path(unit)
    if path is not None and service_type(parse_unit(path)) in LONG_RUNNING:
        return (unit_runtime(unit) or {}).get("ActiveState", "inactive")
    return state["active"].get(unit, "inactive")


def _start_command(state, command, unit):
    path = unit_path(unit)
    if path is None or service_type(parse_unit(path)) not in LONG_RUNNING:
        return run_unit(state, unit)  # a oneshot unit runs again for each of them
    sections = parse_unit(path)
    active = _active_state(state, unit) in RUNNING_STATES
    if command == "start":
        return run_unit(state, unit)
    if command == "try-restart" and not active:
        return 0
    if command == "reload" or (command == "reload-or-restart" and sections.get("Service", {}).get("ExecReload")):
        return reload_service(unit, sections)
    stop_service(unit)
    return run_unit(state, unit)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
