"""scripts/integration.py: the lab tests and the standalone tests side by side (docs/development.md)."""

from __future__ import annotations

import ast
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
INTEGRATION = REPO_ROOT / "tests" / "integration"


def _fixtures(tree: ast.Module) -> set[str]:
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    }


# The lab's session fixtures: a standalone module may use none of them.
LAB_FIXTURES = _fixtures(ast.parse((INTEGRATION / "conftest.py").read_text()))


def _runner():
    spec = importlib.util.spec_from_file_location("integration_runner", REPO_ROOT / "scripts" / "integration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ({"lab": 0, "standalone": 0}, 0),
        ({"lab": 0, "standalone": 5}, 0),  # nothing selected in one group (PYTEST_ARGS=-k ...)
        ({"lab": 5, "standalone": 0}, 0),
        ({"lab": 5, "standalone": 5}, 5),  # nothing selected at all is not a pass
        ({"lab": 1, "standalone": 0}, 1),
        ({"lab": 0, "standalone": 1}, 1),
        ({"lab": 5, "standalone": 2}, 2),
        ({"lab": 3, "standalone": 1}, 3),
    ],
)
def test_verdict(codes, expected):
    assert _runner().verdict(codes) == expected


def test_both_groups_get_the_arguments_and_split_by_the_marker():
    runner = _runner()
    lab = runner.pytest_argv(runner.LAB_GROUP, ["-k", "x"])
    standalone = runner.pytest_argv("standalone", ["-k", "x"], pathlib.Path("/base"))
    assert lab[:3] == [sys.executable, "-m", "pytest"] and lab[-2:] == ["-k", "x"]
    assert lab[lab.index("-m", 3) + 1] == "not standalone and not lifecycle"  # make lifecycle runs those
    assert not any(a.startswith("--basetemp") for a in lab)
    assert standalone[standalone.index("-m", 3) + 1] == "standalone" and "--basetemp=/base" in standalone


def _standalone_modules() -> dict[str, ast.Module]:
    modules = {}
    for path in sorted(INTEGRATION.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        marks = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
        ]
        if any("standalone" in ast.unparse(m.value) for m in marks):
            modules[path.name] = tree
    return modules


def test_the_standalone_modules_are_the_ones_that_bring_their_own_hosts():
    assert sorted(_standalone_modules()) == [
        "test_collectd_rapl.py",
        "test_collection_build.py",
        "test_k8s_client_pythons.py",
        "test_node_power.py",
        "test_prometheus_rules.py",
        "test_scheduler_config_versions.py",
    ]


def test_standalone_modules_use_none_of_the_labs_fixtures():
    """They run while the lab tests change the lab: a lab fixture there would share (or start) it."""
    assert {"lab", "api", "site"} <= LAB_FIXTURES
    offenders = []
    for name, tree in _standalone_modules().items():
        own = _fixtures(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                used = {a.arg for a in node.args.args} & (LAB_FIXTURES - own)
                offenders += [f"{name}::{node.name} uses {sorted(used)}"] if used else []
            if isinstance(node, ast.FunctionDef) and node.name in own:
                used = {a.arg for a in node.args.args} & (LAB_FIXTURES - own)
                offenders += [f"{name}: fixture {node.name} uses {sorted(used)}"] if used else []
    assert not offenders, offenders


class _Process:
    """A stand-in for the lab group's Popen: running until ``ends`` polls have passed."""

    def __init__(self, ends: int | None):
        self.ends, self.polls = ends, 0

    def poll(self):
        self.polls += 1
        return 0 if self.ends is not None and self.polls > self.ends else None


def test_standalone_group_waits_for_the_release_file(tmp_path):
    runner = _runner()
    release = tmp_path / "release"
    lab = _Process(ends=None)
    seen = []

    def sleep(_s):
        seen.append(lab.polls)
        if len(seen) == 3:
            release.touch()  # the lab group's conftest, after the site converge

    runner.time.sleep, original = sleep, runner.time.sleep
    try:
        runner.wait_for_release(lab, release, poll_s=0)
    finally:
        runner.time.sleep = original
    assert seen == [1, 2, 3] and lab.polls == 4  # waited while neither happened, and no longer


def test_standalone_group_starts_when_the_lab_group_ends_without_a_release(tmp_path):
    runner = _runner()
    lab = _Process(ends=2)
    runner.wait_for_release(lab, tmp_path / "never", poll_s=0)
    assert lab.polls == 3


def test_the_lab_group_releases_after_the_site_converge_or_at_its_first_late_test():
    conftest = (INTEGRATION / "conftest.py").read_text()
    runner = (REPO_ROOT / "scripts" / "integration.py").read_text()
    assert f'"{_runner().RELEASE_ENV}"' in conftest and "RELEASE_ENV" in runner
    tree = ast.parse(conftest)
    site = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "site")
    hook = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "pytest_runtest_setup")
    # in a finally: a failed converge releases them too
    assert any(
        isinstance(n, ast.Try) and "release_standalone_tests()" in ast.unparse(n.finalbody) for n in ast.walk(site)
    )
    assert "release_standalone_tests()" in ast.unparse(hook) and "EARLY_MODULES" in ast.unparse(hook)


def test_checks_command_is_taken_from_the_front_only():
    runner = _runner()
    assert runner.parse(["--checks", "make lint", "-k", "x"]) == ("make lint", ["-k", "x"])
    assert runner.parse(["-k", "x", "--checks", "y"]) == (None, ["-k", "x", "--checks", "y"])
    with pytest.raises(SystemExit, match="--checks needs a command"):
        runner.parse(["--checks"])


def test_background_runs_the_standalone_tests_then_the_checks_at_the_lowest_priority(tmp_path, monkeypatch):
    runner = _runner()
    calls = []

    def call(argv, **_kwargs):
        calls.append(argv)
        return 0 if len(calls) == 1 else 2  # the standalone tests pass, the checks fail

    monkeypatch.setattr(runner.subprocess, "call", call)
    times = {}
    codes = runner.background([], tmp_path, "make lint", None, None, times)
    assert codes == {"standalone": 0, "checks": 2}
    assert calls[0][:3] == ["nice", "-n", "19"] and "standalone" in calls[0]
    assert calls[1] == ["nice", "-n", "19", "sh", "-c", "make lint"]
    assert times["standalone"] <= times["checks"] <= times["background_end"]
    calls.clear()
    assert runner.background([], tmp_path, None, None, None, {}) == {"standalone": 0}  # make integration: no checks
    assert len(calls) == 1


def test_the_background_cgroup_has_a_small_cpu_share_in_either_hierarchy(tmp_path):
    runner = _runner()
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir()
    v2.mkdir()
    (v2 / "cgroup.subtree_control").write_text("memory pids\n")
    assert runner.background_cgroup(v1, v2) is None  # no cpu controller: nice alone
    (v2 / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
    procs = runner.background_cgroup(v1, v2)
    assert procs == v2 / "poweraware-background" / "cgroup.procs"
    assert (procs.parent / "cpu.weight").read_text() == "12\n"  # of a session's 100
    (v1 / "cpu.shares").write_text("1024\n")  # cgroup v1's cpu controller is preferred where mounted
    procs = runner.background_cgroup(v1, v2)
    assert procs == v1 / "poweraware-background" / "cgroup.procs"
    assert (procs.parent / "cpu.shares").read_text() == "128\n"  # of a session's 1024
    assert runner.background_cgroup(v1, v2) == procs  # made once, reused
    (procs.parent / "cpu.shares").chmod(0o444)
    if os.geteuid() != 0:  # root writes a 0444 file: only a user meets the refusal
        assert runner.background_cgroup(v1, v2) is None
    assert runner.background_cgroup(tmp_path / "none", tmp_path / "none") is None


def test_a_confined_command_enters_the_cgroup_before_it_runs(tmp_path):
    runner = _runner()
    argv = [sys.executable, "-c", "import os; print(os.getppid(), os.getpid())"]
    assert runner.confined(argv, None) == argv
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    out = subprocess.run(runner.confined(argv, procs), capture_output=True, text=True, check=True)
    # the shell wrote its pid and then became the command (exec): the same process
    assert procs.read_text().strip() == out.stdout.split()[1]
    # a cgroup that refuses the write still runs the command, quietly
    gone = tmp_path / "gone" / "cgroup.procs"
    out = subprocess.run(runner.confined(argv, gone), capture_output=True, text=True, check=True)
    assert out.stderr == "" and len(out.stdout.split()) == 2


def test_background_runs_both_commands_in_the_cgroup(tmp_path, monkeypatch):
    runner = _runner()
    calls = []
    monkeypatch.setattr(runner.subprocess, "call", lambda argv, **_kw: calls.append(argv) or 0)
    procs = tmp_path / "cgroup.procs"
    assert runner.background([], tmp_path, "make lint", None, None, {}, procs) == {"standalone": 0, "checks": 0}
    assert [c[:4] for c in calls] == [["sh", "-c", runner._ENTER, str(procs)]] * 2
    assert calls[1][4:] == ["nice", "-n", "19", "sh", "-c", "make lint"]


def test_make_test_runs_the_checks_behind_the_integration_tests():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert 'scripts/integration.py --checks "$(CHECKS)"' in recipe
    assert "CHECKS = $(MAKE) --no-print-directory -j3 --output-sync=target lint sanity unit" in makefile


def test_the_older_schedulers_are_built_for_the_whole_suite_or_when_their_test_is_collected():
    runner = _runner()
    seen = []

    def collect(listing):
        def run(argv):
            seen.append(argv)
            return listing

        return run

    assert runner.older_schedulers_selected([], collect=collect("")) and not seen  # the whole suite: no collection
    some = "tests/integration/test_site.py::test_converge\n1 test collected"
    assert not runner.older_schedulers_selected(["-k", "site"], collect=collect(some))
    assert seen[-1][-2:] == ["-k", "site"]
    assert "--collect-only" in seen[-1] and runner.TESTS in seen[-1]
    versions = "tests/integration/test_scheduler_config_versions.py::test_x[v1.21]\n1 test collected"
    assert runner.older_schedulers_selected(["-k", "versions"], collect=collect(versions))


def test_the_older_schedulers_module_exists():
    assert (INTEGRATION / _runner().OLDER_SCHEDULERS_MODULE).is_file()


def test_each_parts_time_comes_from_the_runners_clock():
    """The lab group from the start to its end; the standalone group until the checks start behind
    it; the checks until the background ends; the binaries' build counts in the total."""
    times = {"standalone": 100.0, "lab_end": 1900.0, "checks": 500.0, "background_end": 800.0}
    seconds = _runner().part_seconds(times, started=100.0, built_s=20.0, elapsed=1810.0)
    assert seconds == {"binaries": 20.0, "total": 1830.0, "lab": 1800.0, "standalone": 400.0, "checks": 300.0}
    # make integration: no checks, the standalone group ends with the background
    seconds = _runner().part_seconds({"standalone": 0.0, "lab_end": 50.0, "background_end": 30.0}, 0.0, 1.0, 50.0)
    assert seconds == {"binaries": 1.0, "total": 51.0, "lab": 50.0, "standalone": 30.0}


def test_the_time_report_sets_each_part_against_its_budget():
    runner = _runner()
    budgets = (("lab", "lab group", 600), ("checks", "the checks", 60), ("total", "in all", 900))
    report = runner.time_report({"lab": 600.0, "total": 901.0}, budgets)
    assert report.splitlines() == [
        "| part | budget | measured | |",
        "|---|---:|---:|---|",
        "| lab group | 10 min | 600 s (10.0 min) |  |",  # at its budget is within it
        "| in all | 15 min | 901 s (15.0 min) | over budget |",  # a part that did not run is left out
    ]
    # the budgets are docs/development.md's: 35 minutes in all, 30 for the lab group
    assert dict((key, budget) for key, _label, budget in runner.BUDGETS)["total"] == 35 * 60
    assert "35 minutes" in (REPO_ROOT / "docs" / "development.md").read_text()
