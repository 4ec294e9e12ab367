"""The lab's stress-ng (lab/stress_ng.py): the arguments the power demo gives it, read as stress-ng
reads them, refused as stress-ng refuses them, and a process that runs for its timeout."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pytest

from lab import images, stress_ng
from lab.stress_ng import Load


@pytest.mark.parametrize(
    ("argv", "load"),
    [
        (["--cpu", "12", "--timeout", "300s"], Load(12, 100.0, 300.0)),
        (["--cpu=2", "--timeout=5m"], Load(2, 100.0, 300.0)),
        (["-c", "4", "-l", "25", "-t", "1h"], Load(4, 25.0, 3600.0)),
        (["--cpu", "1", "--timeout", "0", "--metrics-brief"], Load(1, 100.0, 0.0)),
        (["--cpu", "3", "--timeout", "2"], Load(3, 100.0, 2.0)),
        (["--cpu", "0"], Load(0, 100.0, 0.0)),
    ],
)
def test_arguments_as_stress_ng_reads_them(argv, load):
    assert stress_ng.parse(argv) == load


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cpu", "-1"], "must be 0 or more"),
        (["--cpu", "two"], "invalid number of cpu stressors"),
        (["--cpu"], "requires an argument"),
        (["--vm", "1"], "unrecognized option '--vm'"),
        (["--cpu", "1", "--timeout", "5x"], "invalid timeout value '5x'"),
        (["--cpu", "1", "--cpu-load", "101"], "0 to 100"),
        ([], "no stress workers"),
    ],
)
def test_arguments_stress_ng_refuses(argv, message):
    with pytest.raises(stress_ng.UsageError, match=message):
        stress_ng.parse(argv)
    assert stress_ng.cpus(argv, 32.0) == 0.0


def test_cpus_are_capped_by_the_node_and_scaled_by_the_load():
    assert stress_ng.cpus(["--cpu", "64"], 32.0) == 32.0
    assert stress_ng.cpus(["--cpu", "0", "--cpu-load", "50"], 32.0) == 16.0


def test_the_process_runs_for_its_timeout_and_refuses_bad_arguments():
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, stress_ng.__file__, "--cpu", "12", "--timeout", "1s"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and time.monotonic() - started >= 1.0
    assert "dispatching hogs: 12 cpu" in done.stdout and "successful run completed" in done.stdout
    bad = subprocess.run(
        [sys.executable, stress_ng.__file__, "--cpu", "x"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1 and "invalid number of cpu stressors 'x'" in bad.stderr


def test_sigterm_stops_it_cleanly():
    proc = subprocess.Popen([sys.executable, stress_ng.__file__, "--cpu", "1"], stdout=subprocess.PIPE, text=True)
    assert "dispatching" in proc.stdout.readline()
    proc.terminate()
    # generous: make test runs the unit tests in a cgroup with a small CPU share beside the lab, where
    # a process can wait seconds for the CPU (10 s once ran out); a process that ignores SIGTERM never ends
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "stopped by signal" in out


def test_the_images_dir_runs_it_with_the_nodes_python(tmp_path):
    target = images.prepare_images_dir({}, tmp_path / "images")
    executable = target / "stress-ng"
    assert executable.stat().st_mode & 0o777 == 0o755
    assert executable.read_text() == "#!/usr/bin/python3\n" + pathlib.Path(stress_ng.__file__).read_text()
    assert json.loads((target / images.MAP_FILE).read_text())["docker.io/alexeiled/stress-ng:0.12.05"][
        "entrypoint"
    ] == ["stress-ng"]
    inode = executable.stat().st_ino
    images.prepare_images_dir({}, target)
    assert executable.stat().st_ino == inode  # unchanged: not rewritten
