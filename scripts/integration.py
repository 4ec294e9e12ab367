"""`make integration`: the lab's tests and the standalone tests, side by side.

Most integration tests share the session's lab (tests/integration/conftest.py) and run in one
pytest, in the order conftest.py gives them. The modules marked ``standalone`` bring their own
node hosts or processes (test_node_power's eight kernel flavours in 127.0.2.0/24, a real collectd
and Prometheus on ports of their own) and never touch the lab, so they run in a second pytest at
the same time: a lab test spends much of its time waiting for SSH round trips, kubelet and
Prometheus, which the node hosts' CPU-bound runs fill. What each part took, against its budget
(docs/development.md, "Test time"), is printed at the end and written to tests/output/time-report.md
(``time_report``): the measured figures are a run's report, not a table kept by hand.

The standalone group and the checks behind it run in a cpu cgroup of their own with a small share
(``background_cgroup``), so they take the CPU time the lab tests leave and little more, and they
start at once. nice alone does not hold them back: with the kernel's autogroups
(``kernel.sched_autogroup_enabled``) nice orders processes only within one session, and the
standalone tests' node hosts, SSH sessions and FUSE kernels each start a session as heavy as any of
the lab's (at nice 19 the standalone tests still made the fresh dry run 309 s instead of about
175 s). A cgroup holds every descendant whatever its session. Where this machine offers no cpu
cgroup (not root, no cpu controller), the group runs at nice 19 and starts only once the lab group
says so (conftest.py touches the file named by POWERAWARE_STANDALONE_RELEASE): after the fresh dry
run and the site converge, the lab tests that keep both cores busy, or when the lab group ends,
whichever comes first.

Arguments are passed to both pytests (PYTEST_ARGS); a group with nothing selected (pytest's exit
code 5) passes as long as the other ran something. The standalone group's output goes to a log
that is printed after the lab group's, so that each reads as one run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = "tests/integration"
NO_TESTS_COLLECTED = 5
STANDALONE_NICENESS = 19
LOG = REPO_ROOT / "tests" / "output" / "integration-standalone.log"
CHECKS_LOG = REPO_ROOT / "tests" / "output" / "checks.log"
TIME_REPORT = REPO_ROOT / "tests" / "output" / "time-report.md"
# Each part's budget in seconds on a 2-core machine, warm (docs/development.md, "Test time"): the
# lab group is the critical path; the standalone tests and the checks run beside it, in its gaps.
BUDGETS = (
    ("binaries", "Go binaries ready (a look at each recipe when warm)", 60),
    ("lab", "lab group (the critical path)", 30 * 60),
    ("standalone", "standalone group, beside the lab group", 15 * 60),
    ("checks", "lint, sanity and unit, behind the standalone group", 8 * 60),
    ("total", "make test's integration step in all", 35 * 60),
)
RELEASE_ENV = "POWERAWARE_STANDALONE_RELEASE"
# The lab group: every test not marked standalone, but not the lifecycle tests (the uninstall, the
# upgrade from the previous release: marker lifecycle), which make lifecycle runs on a lab of their
# own, for make test's time.
LAB_GROUP = "not standalone and not lifecycle"
POLL_S = 1.0
CGROUP_V1 = pathlib.Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller, where it is mounted
CGROUP_V2 = pathlib.Path("/sys/fs/cgroup")  # the unified hierarchy
CGROUP_NAME = "poweraware-background"
# An eighth of a session's weight (v1 1024, v2 100): the background runs on what the lab tests leave,
# and still gets a little under full load, so its own timeouts (an SSH handshake, a FUSE mount) hold.
V1_SHARES = 128
V2_WEIGHT = 12
# Puts the shell into the cgroup ($0), then runs the command ("$@") there: every descendant follows.
_ENTER = '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"'


def pytest_argv(marker: str, extra: list[str], basetemp: pathlib.Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "pytest", TESTS, "-m", marker, "--durations=25"]
    if basetemp is not None:
        argv.append(f"--basetemp={basetemp}")
    return argv + extra


def verdict(codes: dict[str, int]) -> int:
    """0 when every group passed or had nothing selected and at least one ran; else the first failure."""
    failed = [code for code in codes.values() if code not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return NO_TESTS_COLLECTED if all(c == NO_TESTS_COLLECTED for c in codes.values()) else 0


def background_cgroup(v1: pathlib.Path = CGROUP_V1, v2: pathlib.Path = CGROUP_V2) -> pathlib.Path | None:
    """The ``cgroup.procs`` file of a cpu cgroup with a small share for the background group, made
    (or reused) now; None where there is none this process may make (nice alone then)."""
    try:
        if (v1 / "cpu.shares").is_file():
            group, control, value = v1 / CGROUP_NAME, "cpu.shares", V1_SHARES
        elif "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
            group, control, value = v2 / CGROUP_NAME, "cpu.weight", V2_WEIGHT
        else:
            return None
        group.mkdir(exist_ok=True)
        (group / control).write_text(f"{value}\n")
    except OSError:
        return None
    return group / "cgroup.procs"


def confined(argv: list[str], procs: pathlib.Path | None) -> list[str]:
    """``argv`` run inside the cgroup whose ``cgroup.procs`` is ``procs`` (as it is without one)."""
    return argv if procs is None else ["sh", "-c", _ENTER, str(procs), *argv]


def wait_for_release(lab, release: pathlib.Path, poll_s: float = POLL_S) -> None:
    """Until the lab group releases the standalone group (or ends)."""
    while lab.poll() is None and not release.exists():
        time.sleep(poll_s)


def background(extra, basetemp, checks, log, checks_log, times, procs=None) -> dict[str, int]:
    """The standalone tests, then the checks (``make test``'s lint, sanity and unit), one after the
    other at the lowest CPU priority (in the cgroup of ``procs`` too, when there is one): what the
    lab tests leave of the machine."""
    codes = {}
    nice = ["nice", "-n", str(STANDALONE_NICENESS)]
    times["standalone"] = time.monotonic()
    codes["standalone"] = subprocess.call(
        confined([*nice, *pytest_argv("standalone", extra, basetemp)], procs),
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    if checks:
        times["checks"] = time.monotonic()
        codes["checks"] = subprocess.call(
            confined([*nice, "sh", "-c", checks], procs), cwd=REPO_ROOT, stdout=checks_log, stderr=subprocess.STDOUT
        )
    times["background_end"] = time.monotonic()
    return codes


def part_seconds(times: dict[str, float], started: float, built_s: float, elapsed: float) -> dict[str, float]:
    """Each part's seconds from the runner's clock readings (``times``: monotonic instants)."""
    seconds = {"binaries": built_s, "total": built_s + elapsed}
    if "lab_end" in times:
        seconds["lab"] = times["lab_end"] - started
    if "standalone" in times:
        seconds["standalone"] = times.get("checks", times.get("background_end", started)) - times["standalone"]
    if "checks" in times and "background_end" in times:
        seconds["checks"] = times["background_end"] - times["checks"]
    return seconds


def time_report(seconds: dict[str, float], budgets=BUDGETS) -> str:
    """A Markdown table of each part's time against its budget; a part that did not run (the checks
    of ``make integration``) is left out. A part over its budget is marked: a warm run over budget
    is a defect to fix, not to note (a cold run builds binaries and is expected to be over)."""
    rows = ["| part | budget | measured | |", "|---|---:|---:|---|"]
    for key, label, budget in budgets:
        if key not in seconds:
            continue
        measured = seconds[key]
        mark = "over budget" if measured > budget else ""
        rows.append(f"| {label} | {budget / 60:.0f} min | {measured:.0f} s ({measured / 60:.1f} min) | {mark} |")
    return "\n".join(rows) + "\n"


def parse(argv: list[str]) -> tuple[str | None, list[str]]:
    """``[--checks COMMAND] [pytest arguments...]``."""
    if argv[:1] == ["--checks"]:
        if len(argv) < 2:
            raise SystemExit("integration.py: --checks needs a command")
        return argv[1], argv[2:]
    return None, argv


# The one test module that runs the older kube-schedulers (lab.assets.SCHEDULER_RELEASES).
OLDER_SCHEDULERS_MODULE = "test_scheduler_config_versions.py"


def older_schedulers_selected(extra: list[str], collect=None) -> bool:
    """Whether the run selects a test that needs the older kube-schedulers: the whole suite does;
    with pytest arguments (a path, -k, -m) pytest's own collection says. Building them cold takes
    about 210 s on two cores, for a run of other tests that need none of them."""
    if not extra:
        return True
    if collect is None:

        def collect(argv):
            done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
            return done.stdout

    listed = collect([sys.executable, "-m", "pytest", TESTS, "--collect-only", "-q", *extra])
    return OLDER_SCHEDULERS_MODULE in listed


def build_binaries(extra: list[str]) -> float:
    """Every Go binary the selected tests use, before they start: a cold cache takes about 40
    minutes of builds on two cores, which would otherwise run inside the first lab test's timeout
    (and the standalone tests' builds beside it). Under the per-user build lock, as the lab's own.
    The older kube-schedulers are built only when their test is selected (the test would build
    them on first use anyway)."""
    started = time.monotonic()
    sys.path.insert(0, str(REPO_ROOT))
    from lab import assets

    older = older_schedulers_selected(extra)
    assets.build_all(log=lambda message: print(f"integration: {message}", flush=True), older_schedulers=older)
    skipped = "" if older else " (not the older kube-schedulers: no selected test runs them)"
    took = time.monotonic() - started
    print(f"integration: binaries ready in {took:.0f} s{skipped}", flush=True)
    return took


def main(argv: list[str]) -> int:
    checks, extra = parse(argv)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    built_s = build_binaries(extra)
    # Its own base temporary directory: two pytests in the default one would prune each other's.
    basetemp = pathlib.Path(tempfile.mkdtemp(prefix="poweraware-standalone-"))
    # Outside basetemp, which the standalone pytest empties when it starts.
    release_dir = pathlib.Path(tempfile.mkdtemp(prefix="poweraware-release-"))
    release = release_dir / "release"
    started = time.monotonic()
    times: dict[str, float] = {}
    with LOG.open("w") as log, CHECKS_LOG.open("w") as checks_log:
        lab = subprocess.Popen(
            pytest_argv(LAB_GROUP, extra), cwd=REPO_ROOT, env={**os.environ, RELEASE_ENV: str(release)}
        )
        procs = background_cgroup()
        print(f"integration: background group {'in cgroup ' + str(procs.parent) if procs else 'at nice 19 only'}")
        try:
            if procs is None:
                wait_for_release(lab, release)
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                behind = pool.submit(background, extra, basetemp, checks, log, checks_log, times, procs)
                lab_code = lab.wait()
                times["lab_end"] = time.monotonic()
                codes = {"lab": lab_code, **behind.result()}
        finally:
            if lab.poll() is None:
                lab.terminate()
                lab.wait()
            shutil.rmtree(release_dir, ignore_errors=True)
            if procs is not None:
                with contextlib.suppress(OSError):  # empty once the background ended; a stray process keeps it
                    procs.parent.rmdir()
    elapsed = time.monotonic() - started
    print(f"\n===== standalone tests (ran beside the lab tests; {LOG.relative_to(REPO_ROOT)}) =====", flush=True)
    sys.stdout.write(LOG.read_text())
    if checks:
        print(f"\n===== checks: {checks} (after the standalone tests; {CHECKS_LOG.relative_to(REPO_ROOT)}) =====")
        sys.stdout.write(CHECKS_LOG.read_text())
    at = {name: round(value - started) for name, value in times.items()}
    print(f"\nintegration: {codes} in {elapsed:.0f} s (background started at {at})", flush=True)
    report = time_report(part_seconds(times, started, built_s, elapsed))
    TIME_REPORT.write_text(report)
    print(f"\n===== time ({TIME_REPORT.relative_to(REPO_ROOT)}) =====\n{report}", flush=True)
    checks_code = codes.pop("checks", 0)
    code = verdict(codes) or checks_code
    if code == 0:
        shutil.rmtree(basetemp, ignore_errors=True)
    else:
        print(f"the standalone tests' temporary files are kept in {basetemp}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
