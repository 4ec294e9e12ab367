"""site.yml converged once per test session: the session fixture ``site`` (conftest.py) runs it.

The fixture converges the whole site (node power, cluster stack, scheduler extender, power
models: whatever site.yml imports) into the lab, then runs it again and in check mode, the two side
by side, and records the three durations. The converge and re-run times and their ratio are printed and written
to tests/output/site_timings.json for the report. test_site.py checks the runs and what they made;
test_cluster_stack.py and test_telemetry_roles.py check their components on the same converge
instead of converging them again.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import pathlib
import sys
import time

from ansible_run import REPO_ROOT, run_playbook
from cluster_snapshot import snapshot

SITE = REPO_ROOT / "site.yml"
IMPORTED = [
    "playbooks/node_power.yml",
    "playbooks/cluster_stack.yml",
    "playbooks/scheduler_extender.yml",
    "playbooks/power_models.yml",
    "playbooks/peaks.yml",
    "playbooks/pod_power.yml",
]
TIMINGS = REPO_ROOT / "tests" / "output" / "site_timings.json"


# At converge time the lab's Prometheus holds minutes of samples, not the day power_models_window
# asks for, so the converge fits the power models from a samples file: a synthetic linear curve per
# worker (not measured data), enough to pass the quality gate. The fit from the stack's own
# Prometheus, after a load sweep, is test_site.py's test_power_models_are_fitted_from_the_stacks_own_prometheus.
SITE_VARS: dict = {}


def run_site(lab, extra_vars=None, **kwargs):
    return run_playbook(
        SITE,
        inventory=lab.inventory / "hosts.yml",
        extra_vars={**SITE_VARS, **(extra_vars or {})},
        timeout=1800,
        **kwargs,
    )


def prepare_site_vars(lab, tmp_path_factory) -> dict:
    """SITE_VARS as the lab's site runs with them (the user's choices below), returned too."""
    samples = tmp_path_factory.mktemp("power-models") / "samples.json"
    curve = {
        node: [{"util": u, "watts": 90 + 1.5 * u + 5 * i} for u in range(0, 101, 2)]
        for i, node in enumerate(lab.worker_nodes)
    }
    samples.write_text(json.dumps(curve))
    SITE_VARS.update(
        {
            "poweraware_enable_power_models": True,
            "power_models_source": "file",
            "power_models_samples_file": str(samples),
            # Peaks as a second scheduler (off by default): the lab plays a user who built load-watcher,
            # which publishes no image, and pushed it to a local registry (lab/images.py)
            "poweraware_enable_peaks": True,
            "peaks_load_watcher_image": "localhost:5000/load-watcher",
            # and runs it beside Kubernetes 1.36 although no scheduler-plugins release is within the version
            # skew policy there (the newest, v0.34.7, is built with 1.34; the lab builds v0.33.5): the user's
            # choice the role refuses unless it is made (test_site.py shows the refusal)
            "peaks_allow_version_skew": True,
            # per-pod power profiles (off by default) on the inventory's pod_power_nodes: test_pod_power.py
            "poweraware_enable_pod_power": True,
        }
    )
    return SITE_VARS


def converge_site(lab, tmp_path_factory):
    """The site fixture's three runs (tests/integration/conftest.py), their results and timings."""
    missing = [p for p in IMPORTED if not (REPO_ROOT / p).is_file()]
    assert not missing, f"site.yml imports playbooks that do not exist yet: {missing}"
    prepare_site_vars(lab, tmp_path_factory)
    controller_before = controller_digest()
    runs, seconds = {}, {}

    def timed(name, **kwargs):
        start = time.monotonic()
        runs[name] = run_site(lab, **kwargs)
        seconds[name] = time.monotonic() - start

    timed("converge")
    # The re-run and the check-mode run start together on the converged cluster: each must change
    # nothing (a run that did would fail its own test, whatever the other saw), and a playbook run
    # mostly waits on round trips, so the two take little longer than one. "Nothing" is judged by
    # the cluster and the nodes too (cluster_snapshot.py), not by the recaps alone.
    snapshot_before = snapshot(lab)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(timed, "rerun"), pool.submit(timed, "check", check=True, diff=True)]
        for future in futures:
            future.result()
    runs["snapshot"] = (snapshot_before, snapshot(lab))
    timings = {
        "converge_s": round(seconds["converge"], 1),
        "rerun_s": round(seconds["rerun"], 1),
        "check_s": round(seconds["check"], 1),
        "rerun_and_check_side_by_side": True,
        "rerun_to_converge_ratio": round(seconds["rerun"] / seconds["converge"], 3),
        "converge_changed": runs["converge"].changed,
        "k8s_version": lab.k8s_version,
        "nodes": 1 + len(lab.worker_nodes),
    }
    runs["controller"] = (controller_before, controller_digest())
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(timings, indent=2) + "\n")
    # Each run's whole output next to the timings (a failure message shows only its tail; the rest
    # is in tests/output): which task failed, and with profile_tasks enabled which took the time.
    for name in ("converge", "rerun", "check"):
        (TIMINGS.parent / f"site-{name}.log").write_text(runs[name].stdout + runs[name].stderr)
    print(f"\nsite.yml timings: {json.dumps(timings)}", file=sys.stderr)
    return runs


def controller_digest() -> dict[str, str]:
    """The controller's own /etc and CPU sysfs (its writable attributes): a converge over SSH must
    change neither."""
    digests = {}
    for root in ("/etc", "/sys/devices/system/cpu"):
        digest = hashlib.sha256()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                try:
                    info = os.lstat(path)
                    if root.startswith("/sys") and not info.st_mode & 0o200:
                        continue  # read-only attributes (cpuidle time/usage counters) move by themselves
                    data = os.readlink(path).encode() if os.path.islink(path) else pathlib.Path(path).read_bytes()
                except OSError:
                    data = b"<unreadable>"
                    info = None
                digest.update(f"{path} {info.st_mode if info else ''}\n".encode() + data)
        digests[root] = digest.hexdigest()
    return digests
