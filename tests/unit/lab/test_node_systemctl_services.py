"""The lab's service manager runs long-running services as systemd does (lab/node_systemctl.py).

``Type=simple`` and ``Type=exec`` units run under a supervisor that outlives ``systemctl``; their
exits are restarted by systemd.service(5)'s ``Restart=`` table after ``RestartSec=``, up to the start
limit of systemd.unit(5); ``stop`` follows systemd.kill(5) (SIGTERM to every process of the service,
SIGKILL after ``TimeoutStopSec=``); their output and the manager's lines go to the unit's journal
file; and a node's power-off (lab/nodes.py) ends them with the node, sandboxed ones included. The
node's own script runs against a unit directory and a state directory of each test's own, with the
node's interpreter; the units use short RestartSec=/TimeoutStopSec= values to stay fast."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from lab import node_systemctl, nodes

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "lab" / "node_systemctl.py"
# The interpreter a lab node runs it with (the script keeps to its version), else this one.
PYTHON = nodes.NODE_PYTHON if os.path.exists(nodes.NODE_PYTHON) else sys.executable
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")


class Manager:
    """The node's systemctl (and journalctl) over a unit directory and a state directory."""

    def __init__(self, root: pathlib.Path):
        self.root, self.units, self.state = root, root / "units", root / "state"
        self.units.mkdir()
        self.env = {**os.environ, "SYSTEMD_UNIT_PATH": str(self.units), "LAB_SYSTEMD_STATE": str(self.state)}
        self.journalctl = root / "journalctl"  # the node links its journalctl to its systemctl
        self.journalctl.symlink_to(SCRIPT)

    def unit(self, name: str, text: str) -> str:
        (self.units / name).write_text(text)
        return name

    def run(self, *args: str, command: list[str] | None = None, timeout: float = 30.0):
        argv = command or [PYTHON, str(SCRIPT)]
        return subprocess.run(
            [*argv, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def systemctl(self, *args: str):
        done = self.run(*args)
        assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
        return done

    def show(self, unit: str) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.systemctl("show", unit).stdout.splitlines())

    def wait(self, unit: str, predicate, timeout: float = 10.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            props = self.show(unit)
            if predicate(props):
                return props
            assert time.monotonic() < deadline, props
            time.sleep(0.02)

    def journal(self, unit: str) -> str:
        path = node_systemctl.journal_path(unit).relative_to(node_systemctl.STATE)
        return (self.state / path).read_text() if (self.state / path).exists() else ""

    def wait_journal(self, unit: str, text: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.journal(unit):
            assert time.monotonic() < deadline, self.journal(unit)
            time.sleep(0.02)
        return self.journal(unit)

    def supervisor(self, unit: str) -> int:
        return json.loads((self.state / "units" / f"{unit}.json").read_text())["Supervisor"]

    def cleanup(self) -> None:
        for path in sorted((self.state / "units").glob("*.json")):
            self.run("stop", path.name[: -len(".json")], timeout=10)
            pid = json.loads(path.read_text()).get("Supervisor", 0)
            if pid and node_systemctl.process_alive(pid):  # a test that failed half-way
                for other in [*node_systemctl.descendants(pid), pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGKILL)


@pytest.fixture
def manager(tmp_path):
    handle = Manager(tmp_path)
    yield handle
    handle.cleanup()


def _until(condition, timeout: float = 5.0) -> None:
    """Poll ``condition`` every 20 ms; the test fails if it is not true within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while node_systemctl.process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _cmdline(pid: int) -> list[str]:
    """The process's argv; [] when it exited between the walk that found it and this read."""
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")
    except OSError:
        return []


def test_a_simple_service_outlives_systemctl_with_its_main_pid_environment_and_journal(manager, tmp_path):
    (tmp_path / "agent.env").write_text('# the role writes it\nNAME="lab node"\n')
    unit = manager.unit(
        "agent.service",
        "[Unit]\nDescription=Node agent\n[Service]\nType=simple\n"
        'Environment=GREETING=hello "SPACED=two words"\n'
        f"EnvironmentFile=-{tmp_path}/missing.env\nEnvironmentFile={tmp_path}/agent.env\n"
        "ExecStart=/bin/sh -c 'echo \"$GREETING $NAME / $SPACED / $PATH / ${HOME:-no home}\"; exec sleep 300'\n",
    )
    started = time.monotonic()
    manager.systemctl("start", "agent")  # the name without its suffix, as systemctl takes it
    assert time.monotonic() - started < 5.0  # it returned while the service runs
    props = manager.show(unit)
    assert (props["ActiveState"], props["SubState"], props["Type"]) == ("active", "running", "simple")
    pid = int(props["MainPID"])
    assert _cmdline(pid) == ["sleep", "300"] and props["ExecMainPID"] == str(pid)
    assert os.getsid(pid) == pid  # a session of its own, below a supervisor outside ours
    supervisor = manager.supervisor(unit)
    assert os.getsid(supervisor) not in (os.getsid(0), pid)
    assert pid in node_systemctl.descendants(supervisor)
    journal = manager.wait_journal(unit, "hello")
    assert "hello lab node / two words / /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin" in journal
    assert "no home" in journal  # nothing of the caller's environment
    assert "Started Node agent." in journal
    assert manager.run("is-active", unit).stdout == "active\n"
    assert manager.systemctl("show", unit, "-p", "MainPID", "--value").stdout == f"{pid}\n"
    status = manager.run("status", unit)
    assert status.returncode == 0 and "Active: active (running)" in status.stdout
    assert f"Main PID: {pid} (sleep)" in status.stdout and "Started Node agent." in status.stdout
    manager.systemctl("start", unit)  # already running: nothing happens
    assert manager.show(unit)["MainPID"] == str(pid)
    # journalctl -u, as the node has it
    tail = manager.run("-u", "agent", "-n", "1", "--no-pager", command=[PYTHON, str(manager.journalctl)])
    assert tail.returncode == 0 and tail.stdout == journal.splitlines()[-1] + "\n"
    whole = manager.run("-xeu", unit, command=[PYTHON, str(manager.journalctl)])
    assert "hello lab node" in whole.stdout


def test_restart_always_brings_a_killed_service_back(manager):
    unit = manager.unit("agent.service", "[Service]\nExecStart=/bin/sleep 300\nRestart=always\nRestartSec=0.1\n")
    manager.systemctl("start", unit)
    first = int(manager.show(unit)["MainPID"])
    os.kill(first, signal.SIGKILL)
    props = manager.wait(unit, lambda p: p["NRestarts"] == "1" and p["SubState"] == "running")
    assert props["ActiveState"] == "active" and int(props["MainPID"]) not in (0, first)
    assert props["ExecMainPID"] == props["MainPID"]
    journal = manager.journal(unit)
    assert "agent.service: Main process exited, code=killed, status=9/KILL" in journal
    assert "agent.service: Scheduled restart job, restart counter is at 1." in journal


@pytest.mark.parametrize(
    ("restart", "ending", "restarted", "final", "result"),
    [
        ("no", "SIGKILL", False, "failed", "signal"),
        ("no", "exit 0", False, "inactive", "success"),
        ("on-failure", "exit 0", False, "inactive", "success"),
        ("on-failure", "exit 3", True, "", ""),
        ("on-failure", "SIGTERM", False, "inactive", "success"),  # SIGTERM is a clean exit
        ("on-abnormal", "exit 3", False, "failed", "exit-code"),
        ("on-abnormal", "SIGKILL", True, "", ""),
        ("on-abort", "SIGKILL", True, "", ""),
        ("on-success", "exit 0", True, "", ""),
        ("always", "exit 3", True, "", ""),
    ],
)
def test_restart_follows_systemd_s_table(manager, tmp_path, restart, ending, restarted, final, result):
    trigger = tmp_path / "end"
    exit_code = ending.split()[-1] if ending.startswith("exit") else "0"
    unit = manager.unit(
        "agent.service",
        f"[Service]\nRestart={restart}\nRestartSec=0.1\n"
        f"ExecStart=/bin/sh -c 'while [ ! -e {trigger} ]; do sleep 0.02; done; rm -f {trigger}; exit {exit_code}'\n",
    )
    manager.systemctl("start", unit)
    pid = int(manager.show(unit)["MainPID"])
    if ending.startswith("SIG"):
        os.kill(pid, getattr(signal, ending))
    else:
        trigger.touch()
    if restarted:
        props = manager.wait(unit, lambda p: p["NRestarts"] == "1" and p["SubState"] == "running")
        assert int(props["MainPID"]) != pid
        return
    props = manager.wait(unit, lambda p: p["ActiveState"] in ("inactive", "failed"))
    time.sleep(0.3)  # longer than RestartSec=: no restart came
    props = manager.show(unit)
    assert (props["ActiveState"], props["Result"], props["NRestarts"], props["MainPID"]) == (final, result, "0", "0")
    expected = ("2", str(getattr(signal, ending).value)) if ending.startswith("SIG") else ("1", exit_code)
    assert (props["ExecMainCode"], props["ExecMainStatus"]) == expected
    assert manager.run("is-active", unit).returncode == 3


def test_the_start_limit_fails_a_unit_that_keeps_failing(manager):
    # StartLimitBurst=3 in 30 s: the first start and 3 restarts are asked, the 4th start is refused
    limited = manager.unit(
        "limited.service",
        "[Unit]\nStartLimitIntervalSec=30\nStartLimitBurst=3\n"
        "[Service]\nExecStart=/bin/sh -c 'exit 3'\nRestart=on-failure\nRestartSec=0\n",
    )
    manager.systemctl("start", limited)
    props = manager.wait(limited, lambda p: p["ActiveState"] == "failed")
    assert (props["NRestarts"], props["Result"], props["ExecMainStatus"]) == ("3", "exit-code", "3")
    journal = manager.journal(limited)
    assert journal.count("Main process exited, code=exited, status=3/NOTIMPLEMENTED") == 3
    assert "limited.service: Start request repeated too quickly." in journal
    refused = manager.run("start", limited)  # a manual start counts too
    assert refused.returncode == 1 and "start of the service was attempted too often" in refused.stderr
    manager.systemctl("reset-failed", limited)
    assert manager.show(limited)["ActiveState"] == "inactive"
    manager.systemctl("start", limited)
    manager.wait(limited, lambda p: p["ActiveState"] == "failed")
    assert manager.journal(limited).count("Main process exited") == 6

    # systemd's defaults: RestartSec=100ms, 5 starts in 10 s
    defaults = manager.unit("defaults.service", "[Service]\nExecStart=/bin/false\nRestart=always\n")
    started = time.monotonic()
    manager.systemctl("start", defaults)
    props = manager.wait(defaults, lambda p: p["ActiveState"] == "failed")
    assert time.monotonic() - started >= 0.4  # four waits of 100 ms between five starts
    assert (props["NRestarts"], props["Result"]) == ("5", "exit-code")
    assert manager.journal(defaults).count("Started defaults.service.") == 5


def test_stop_sends_sigterm_to_every_process_and_does_not_restart(manager):
    unit = manager.unit(
        "agent.service",
        "[Service]\nRestart=always\nRestartSec=0.1\n"
        'ExecStart=/bin/sh -c \'trap "echo got TERM; exit 0" TERM; setsid sleep 301 & '
        "while :; do sleep 0.02; done'\n",
    )
    manager.systemctl("start", unit)
    supervisor = manager.supervisor(unit)
    _until(lambda: "sleep 301" in [" ".join(_cmdline(p)) for p in node_systemctl.descendants(supervisor)])
    processes = node_systemctl.descendants(supervisor)  # the main process, its own session's sleep
    started = time.monotonic()
    manager.systemctl("stop", unit)
    assert time.monotonic() - started < 3.0
    assert all(_gone(pid) for pid in [*processes, supervisor])
    props = manager.show(unit)
    assert (props["ActiveState"], props["SubState"], props["Result"], props["MainPID"]) == (
        "inactive",
        "dead",
        "success",
        "0",
    )
    assert (props["ExecMainCode"], props["ExecMainStatus"]) == ("1", "0")  # its trap's exit 0
    journal = manager.journal(unit)
    assert "got TERM" in journal and "Stopped agent.service." in journal
    time.sleep(0.3)
    assert manager.show(unit)["ActiveState"] == "inactive"  # Restart= never follows a stop
    manager.systemctl("stop", unit)  # stopping a stopped unit is no error


def test_stop_sends_sigkill_after_timeout_stop_sec(manager):
    unit = manager.unit(
        "stubborn.service",
        "[Service]\nTimeoutStopSec=0.5\nExecStart=/bin/sh -c 'trap \"\" TERM; sleep 301 & sleep 302'\n",
    )
    manager.systemctl("start", unit)
    supervisor = manager.supervisor(unit)
    _until(lambda: len(node_systemctl.descendants(supervisor)) >= 3)
    processes = node_systemctl.descendants(supervisor)
    started = time.monotonic()
    manager.systemctl("stop", unit)
    assert 0.5 <= time.monotonic() - started < 3.0
    assert all(_gone(pid, 1.0) for pid in processes)
    props = manager.show(unit)
    # systemd: a stop that needed SIGKILL leaves the unit failed, result 'timeout'
    assert (props["ActiveState"], props["Result"], props["ExecMainCode"], props["ExecMainStatus"]) == (
        "failed",
        "timeout",
        "2",
        "9",
    )
    journal = manager.journal(unit)
    assert "stubborn.service: State 'stop-sigterm' timed out. Killing." in journal
    assert journal.count("with signal SIGKILL.") == 3


def test_exec_start_of_a_missing_binary_fails_and_simple_start_does_not(manager):
    missing = manager.unit("missing.service", "[Service]\nType=exec\nExecStart=/nonexistent/agent --serve\n")
    done = manager.run("start", missing)
    assert done.returncode == 1
    assert "Job for missing.service failed because the control process exited with error code." in done.stderr
    props = manager.show(missing)  # recorded by the time start returns
    assert (props["ActiveState"], props["SubState"], props["Result"], props["ExecMainStatus"]) == (
        "failed",
        "failed",
        "exit-code",
        "203",
    )
    assert "Failed at step EXEC spawning /nonexistent/agent: No such file or directory" in manager.journal(missing)

    simple = manager.unit("simple.service", "[Service]\nType=simple\nExecStart=/nonexistent/agent --serve\n")
    assert manager.run("start", simple).returncode == 0  # forked: systemctl reports success
    props = manager.wait(simple, lambda p: p["ActiveState"] == "failed")
    assert props["ExecMainStatus"] == "203"

    present = manager.unit("present.service", "[Service]\nType=exec\nExecStart=sleep 300\n")  # found on PATH
    manager.systemctl("start", present)
    props = manager.show(present)
    assert props["ActiveState"] == "active" and _cmdline(int(props["MainPID"])) == ["sleep", "300"]


def test_a_condition_not_met_skips_the_start_and_restart_replaces_the_process(manager, tmp_path):
    skipped = manager.unit(
        "skipped.service", f"[Unit]\nConditionPathExists={tmp_path}/absent\n[Service]\nExecStart=/bin/sleep 300\n"
    )
    done = manager.systemctl("start", skipped)
    assert "not met: skipped" in done.stdout + done.stderr
    assert (manager.show(skipped)["ActiveState"], manager.show(skipped)["MainPID"]) == ("inactive", "0")

    unit = manager.unit("agent.service", "[Service]\nExecStart=/bin/sleep 300\n")
    manager.systemctl("start", unit)
    first = int(manager.show(unit)["MainPID"])
    manager.systemctl("restart", unit)
    props = manager.show(unit)
    assert props["ActiveState"] == "active" and int(props["MainPID"]) != first and _gone(first, 1.0)
    manager.systemctl("kill", "-s", "SIGKILL", unit)  # Restart=no: the unit ends failed
    assert manager.wait(unit, lambda p: p["ActiveState"] == "failed")["ExecMainStatus"] == "9"


def test_boot_starts_enabled_units_in_order_and_shutdown_stops_them_in_reverse(manager, tmp_path):
    order = tmp_path / "order"
    wants = manager.units / "multi-user.target.wants"
    wants.mkdir()
    units = {
        "prep.service": f"[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo prep >> {order}'\n",
        "agent.service": "[Unit]\nAfter=prep.service\n[Service]\nExecStart=/bin/sh -c "
        f'\'trap "echo agent stopped >> {order}; exit 0" TERM; echo agent >> {order}; '
        "while :; do sleep 0.02; done'\n",
        "late.service": "[Unit]\nAfter=agent.service\n[Service]\nType=exec\nExecStart=/bin/sh -c "
        f'\'trap "echo late stopped >> {order}; exit 0" TERM; sleep 0.1; echo late >> {order}; '
        "while :; do sleep 0.02; done'\n",
    }
    for name, text in units.items():
        manager.unit(name, text)
        (wants / name).symlink_to(manager.units / name)
    done = manager.run("--boot", timeout=10)  # returns although its services run on (their pipes are not ours)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["Starting prep.service", "Finished prep.service", "Starting agent.service"]
    for name in ("agent.service", "late.service"):
        assert manager.show(name)["ActiveState"] == "active"
    _until(lambda: order.read_text().count("\n") >= 3)
    manager.systemctl("--shutdown")
    assert order.read_text().splitlines() == ["prep", "agent", "late", "late stopped", "agent stopped"]
    assert {manager.show(n)["ActiveState"] for n in ("agent.service", "late.service")} == {"inactive"}


@needs_root
def test_the_sandbox_applies_to_the_long_running_process(manager, tmp_path):
    writable, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    writable.mkdir()
    elsewhere.mkdir()
    unit = manager.unit(
        "sandboxed.service",
        f"[Service]\nProtectSystem=strict\nReadWritePaths={writable} -/nonexistent/poweraware\n"
        "ProtectHome=yes\nNoNewPrivileges=yes\n"
        f"ExecStart=/bin/sh -c 'echo x > {writable}/ok && echo written; echo x > {elsewhere}/no || echo refused; "
        "grep NoNewPrivs /proc/self/status; exec sleep 300'\n",
    )
    manager.systemctl("start", unit)
    journal = manager.wait_journal(unit, "NoNewPrivs")
    assert "written" in journal and "Read-only file system" in journal and "refused" in journal
    assert "NoNewPrivs:\t1" in journal
    assert (writable / "ok").exists() and not (elsewhere / "no").exists()
    pid = int(manager.show(unit)["MainPID"])
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")

    broken = manager.unit(
        "broken.service", "[Service]\nType=exec\nReadWritePaths=/nonexistent/poweraware\nExecStart=/bin/sleep 300\n"
    )
    assert manager.run("start", broken).returncode == 1
    assert manager.show(broken)["ExecMainStatus"] == "226"
    assert "Failed to set up mount namespacing: /nonexistent/poweraware" in manager.journal(broken)


@needs_root
def test_a_node_power_off_ends_its_services_in_their_own_namespaces(manager):
    """A node is a mount namespace (lab/nodes.py); a sandboxed service has one of its own below it,
    so the node's namespace alone does not name it: its power-off ends the namespace's processes and
    every descendant of one, the supervisors and their services with them, as a reboot does."""
    unit = manager.unit(
        "agent.service",
        "[Service]\nProtectSystem=strict\nRestart=always\nExecStart=/bin/sh -c 'sleep 301 & exec sleep 302'\n",
    )
    node = ["unshare", "--mount", "--propagation", "private", PYTHON, str(SCRIPT)]
    done = manager.run("start", unit, command=node)
    assert done.returncode == 0, done.stderr
    supervisor = manager.supervisor(unit)
    _until(lambda: len(node_systemctl.descendants(supervisor)) >= 2)
    service = node_systemctl.descendants(supervisor)
    namespace = os.readlink(f"/proc/{supervisor}/ns/mnt")
    assert namespace != os.readlink("/proc/self/ns/mnt")
    assert not set(service) & set(nodes.pids_in_namespace(namespace))  # sandboxed: in a namespace below
    assert set(service) | {supervisor} <= set(nodes.node_processes(namespace))
    killed = nodes.power_off(namespace)
    assert set(service) | {supervisor} <= set(killed)
    assert all(_gone(pid, 2.0) for pid in [*service, supervisor])
    assert nodes.pids_in_namespace(namespace) == []
    assert manager.show(unit)["ActiveState"] == "failed"  # nothing watches it any more
