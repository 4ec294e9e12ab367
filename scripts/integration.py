"""`make integration`: the lab's tests and the standalone tests, side by side.

Most integration tests share the session's lab (tests/integration/conftest.py) and run in one
pytest, in the order conftest.py gives them. The modules marked ``standalone`` bring their own
node hosts or processes (test_node_power's eight kernel flavours in 127.0.2.0/24, a real collectd
and Prometheus on ports of their own) and never touch the lab, so they run in a second pytest at
the same time: a lab test spends much of its time waiting for SSH round trips, kubelet and
Prometheus (the machine is about 60 % busy during a site.yml run), which the node hosts' CPU-bound
runs fill. Measured side by side: docs/development.md, "Test time".

Arguments are passed to both pytests (PYTEST_ARGS); a group with nothing selected (pytest's exit
code 5) passes as long as the other ran something. The standalone group's output goes to a log
that is printed after the lab group's, so that each reads as one run.
"""

from __future__ import annotations

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


def main(extra: list[str]) -> int:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    # Its own base temporary directory: two pytests in the default one would prune each other's.
    basetemp = pathlib.Path(tempfile.mkdtemp(prefix="poweraware-standalone-"))
    started = time.monotonic()
    with LOG.open("w") as log:
        # At the lowest CPU priority: the lab group's CPU-bound runs (the fresh dry run, the converge)
        # then keep the machine, and the standalone tests take the time the lab tests spend waiting.
        # Beside them at equal priority, the fresh dry run took 330 s instead of about 172 s.
        standalone = subprocess.Popen(
            ["nice", "-n", str(STANDALONE_NICENESS), *pytest_argv("standalone", extra, basetemp)],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            lab_code = subprocess.call(pytest_argv("not standalone", extra), cwd=REPO_ROOT)
        finally:
            standalone_code = standalone.wait()
    elapsed = time.monotonic() - started
    print(f"\n===== standalone tests (ran beside the lab tests; {LOG.relative_to(REPO_ROOT)}) =====", flush=True)
    sys.stdout.write(LOG.read_text())
    codes = {"lab": lab_code, "standalone": standalone_code}
    print(f"\nintegration: {codes} in {elapsed:.0f} s", flush=True)
    code = verdict(codes)
    if code == 0:
        shutil.rmtree(basetemp, ignore_errors=True)
    else:
        print(f"the standalone tests' temporary files are kept in {basetemp}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
