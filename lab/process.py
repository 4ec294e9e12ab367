"""Process lifecycle for the lab: start in a process group tagged with the lab's state directory,
tell a live process from a reused pid, stop a group (SIGTERM, then SIGKILL), find leftovers."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

STATE_ENV = "POWERAWARE_LAB_STATE"
LOG_TAIL_LINES = 25
# Processes this Python process started (the pytest fixture runs the lab in-process): kept so they
# are reaped when stopped instead of lingering as zombies.
_CHILDREN: dict[int, subprocess.Popen] = {}


@dataclasses.dataclass
class LabProcess:
    """A process of the lab: its command line, how to tell it is healthy, extra environment."""

    name: str
    argv: list[str]
    health: Callable[[], bool] | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)


def python_module(name: str, module: str, args: list[str], health: Callable[[], bool] | None = None) -> LabProcess:
    """A lab process that is one of the lab's own Python modules, run by the controller's Python."""
    return LabProcess(
        name,
        [sys.executable, "-m", module, *args],
        health=health,
        env={"PYTHONPATH": str(pathlib.Path(__file__).resolve().parent.parent)},
    )


def spawn(
    argv: list[str], log_path: pathlib.Path, cwd: pathlib.Path, state_dir: pathlib.Path, env: dict | None = None
) -> dict:
    """Start ``argv`` in its own process group, output appended to ``log_path``; returns its record."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env[STATE_ENV] = str(state_dir)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=full_env,
            start_new_session=True,  # own process group: `down` signals the whole group
        )
    _CHILDREN[proc.pid] = proc
    return {"pid": proc.pid, "start_time": process_start_time(proc.pid), "log": str(log_path), "argv": argv}


def process_start_time(pid: int) -> int | None:
    """Clock ticks since boot at which ``pid`` started: tells a live process from a reused pid."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of proc(5), counted after pid and comm


def process_alive(pid: int, start_time: int | None) -> bool:
    current = process_start_time(pid)
    if current is None or (start_time is not None and current != start_time):
        return False
    with contextlib.suppress(OSError):
        state = pathlib.Path(f"/proc/{pid}/stat").read_text()
        if state[state.rindex(")") + 2] == "Z":
            return False
    return True


def tagged_processes(state_dir: pathlib.Path) -> list[int]:
    """Pids of live processes started for the lab in ``state_dir`` (by their environment tag)."""
    tag = f"{STATE_ENV}={state_dir}".encode()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if tag in environ.split(b"\0") and process_alive(int(entry.name), None):
            found.append(int(entry.name))
    return sorted(found)


def log_tail(path: pathlib.Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(f"    {line}" for line in text[-lines:])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_process_group(pid: int, group: bool = True, grace: float = 10.0) -> None:
    """SIGTERM the process (group), wait ``grace`` seconds, then SIGKILL what is left."""
    start_time = process_start_time(pid)

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not process_alive(pid, start_time) and (not group or not _group_alive(pid)):
            break
        time.sleep(0.1)
    else:
        send(signal.SIGKILL)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); a group of only zombies is gone for our purposes.
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
