"""Helpers shared by unit and integration tests (tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import multiprocessing
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import yaml

CPUFREQ_SETTINGS = (
    "scaling_min_freq",
    "scaling_max_freq",
    "energy_performance_preference",
    "cpuinfo_min_freq",
    "cpuinfo_max_freq",
)


def cpu_cpufreq(sysfs: pathlib.Path, cpu: int) -> dict:
    """One CPU's cpufreq settings as its node's sysfs holds them (attributes it lacks left out)."""
    base = sysfs / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
    return {n: (base / n).read_text().strip() for n in CPUFREQ_SETTINGS if (base / n).exists()}


def at_profile(setting: dict, min_pct: float, max_pct: float, epp: str) -> bool:
    """A CPU's cpufreq settings (cpu_cpufreq) are a profile's: its percentages of the CPU's own cpuinfo
    range as the planner places them (rounded down to 100 MHz, never below cpuinfo_min), and its EPP."""
    lo, hi = int(setting["cpuinfo_min_freq"]) // 1000, int(setting["cpuinfo_max_freq"]) // 1000

    def place(pct):
        if pct >= 100:
            return hi
        return max(int((lo + (hi - lo) * pct / 100) / 100) * 100, lo) if pct > 0 else lo

    return (
        int(setting["scaling_min_freq"]) // 1000 == place(min_pct)
        and int(setting["scaling_max_freq"]) // 1000 == place(max_pct)
        and setting.get("energy_performance_preference") == epp
    )


def wait_until(check, timeout: float, what: str, interval: float = 0.5):
    """``check()``'s first truthy value within ``timeout`` seconds, else an AssertionError naming
    ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}")


def _racer(start, done, count, runs, stagger):
    """One side of ``race``: ``runs()`` (called once, in this process) gives the run of each trial,
    prepared before the start; a failure breaks the barriers so that the other side stops too."""
    try:
        next_run = runs()
        for trial in range(count):
            run = next_run()
            start.wait(60)
            time.sleep(stagger * (trial % 8))
            run()
            done.wait(60)
    except BaseException:
        start.abort()
        done.abort()
        raise


def race(count, check, *sides):
    """``count`` trials of runs started together in forked processes, one per side; returns the
    problems ``check()`` names after each trial (it also resets what the next trial starts from).

    A side is ``(runs, stagger)``: ``runs()`` is called once in its process and returns a function
    giving each trial's run; that run starts ``stagger * (trial % 8)`` seconds after the others, so a
    short run meets a longer one at every point of it. Concurrency bugs show as problems, not as
    flaky failures: without the serialization under test, most trials name one.
    """
    fork = multiprocessing.get_context("fork")
    start, done = fork.Barrier(len(sides) + 1), fork.Barrier(len(sides) + 1)
    procs = [fork.Process(target=_racer, args=(start, done, count, runs, stagger)) for runs, stagger in sides]
    for proc in procs:
        proc.start()
    problems = []
    try:
        for trial in range(count):
            start.wait(60)
            done.wait(60)
            problems.extend(f"trial {trial}: {problem}" for problem in check())
    except BaseException:
        start.abort()
        done.abort()
        raise
    finally:
        for proc in procs:
            proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * len(procs), "a racing run failed (its traceback is above)"
    return problems


def stop_process(process: subprocess.Popen, timeout: float = 15) -> None:
    """Stop a process a test started: SIGTERM, then SIGKILL if it is still there after ``timeout``
    seconds; reaped either way."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tree_digest(root: pathlib.Path, mtimes: bool = False) -> str:
    """Hash a tree: paths, modes, contents, symlink targets and, with ``mtimes``, modification times.

    Tests use it to prove that a failed or check-mode run changed nothing (mtimes=True also proves
    that nothing was rewritten with the same content).
    """
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(root).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} -> {os.readlink(path)}\n".encode())
        elif path.is_file():
            stat = path.stat()
            digest.update(f"F {rel} {stat.st_mode:o} {stat.st_mtime_ns if mtimes else ''}\n".encode())
            digest.update(path.read_bytes())
        else:
            digest.update(f"D {rel} {path.stat().st_mode:o}\n".encode())
    return digest.hexdigest()


@contextlib.contextmanager
def as_target_process():
    """Run a module's main() in this process as if it were the module process on a target.

    Once controller code has been imported (a test that renders role templates), ansible-core sends
    module warnings to the controller's display instead of the module result, and it de-duplicates
    warnings process-wide; a real module process starts with neither."""
    from ansible.module_utils import _internal
    from ansible.module_utils.common import warnings

    saved_controller, saved_warnings = _internal.is_controller, dict(warnings._global_warnings)
    _internal.is_controller = False
    warnings._global_warnings.clear()
    try:
        yield
    finally:
        _internal.is_controller = saved_controller
        warnings._global_warnings.clear()
        warnings._global_warnings.update(saved_warnings)


def load_module(name: str, path: pathlib.Path):
    """Import the file at ``path`` as module ``name`` (registered in sys.modules, so it can be imported
    by that name: a collectd plugin's neighbour, a lab script that is not a package module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The shape of the TAS README's "Policy definition" example: all four strategies on its placeholder
# metric node_metric (which the collection's adapter would serve as "metric").
TAS_README_POLICY = {
    "apiVersion": "telemetry.intel.com/v1alpha1",
    "kind": "TASPolicy",
    "metadata": {"name": "scheduling-policy", "namespace": "health-metric-demo"},
    "spec": {
        "strategies": {
            "deschedule": {"rules": [{"metricname": "node_metric", "operator": "Equals", "target": -1}]},
            "dontschedule": {"rules": [{"metricname": "node_metric", "operator": "LessThan", "target": 10}]},
            "scheduleonmetric": {"rules": [{"metricname": "node_metric", "operator": "GreaterThan"}]},
            "labeling": {
                "rules": [
                    {
                        "metricname": "node_metric",
                        "operator": "GreaterThan",
                        "target": 100,
                        "labels": ["label1=foo", "label2=bar"],
                    }
                ]
            },
        }
    },
}

# The TAS extender as BMRA and TAS's own deploy/extender-configuration register it in a hand-written
# KubeSchedulerConfiguration (tests that need a foreign extender managing telemetry/scheduling).
TAS_SERVICE_URL = "https://tas-service.telemetry-aware-scheduling.svc:9001"


def tas_extenders_block(url: str = TAS_SERVICE_URL, cert_file: str | None = None, key_file: str | None = None) -> str:
    """The ``extenders:`` list with TAS as its only entry; with ``cert_file``/``key_file`` the
    ``tlsConfig`` BMRA's blockinfile adds."""
    text = f"""extenders:
  - urlPrefix: "{url}"
    prioritizeVerb: "scheduler/prioritize"
    filterVerb: "scheduler/filter"
    weight: 1
    enableHTTPS: true
    managedResources:
      - name: "telemetry/scheduling"
        ignoredByScheduler: true
    ignorable: true
"""
    if cert_file or key_file:
        text += f"""    tlsConfig:
      insecure: false
      certFile: "{cert_file}"
      keyFile: "{key_file}"
"""
    return text


def tas_extender_config(version: str = "v1") -> str:
    """A scheduler configuration (apiVersion kubescheduler.config.k8s.io/``version``) whose only
    extender is TAS as BMRA registers it."""
    return f"""apiVersion: kubescheduler.config.k8s.io/{version}
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
""" + tas_extenders_block()


def role_defaults(path: pathlib.Path, **site) -> dict:
    """A role's ``defaults/main.yml`` as a site without overrides sees it: the image repositories,
    whose registry host is ``poweraware_image_registry``'s when set (``default('quay.io', true)``),
    the pull secrets and the state (``poweraware_state``) are rendered with ``site``'s values (none
    by default); the rest as written."""
    import jinja2

    values = yaml.safe_load(path.read_text()) or {}
    env = jinja2.Environment(autoescape=False)  # noqa: S701 - YAML values, not HTML
    for name, value in values.items():
        if isinstance(value, str) and (
            "poweraware_image_registry" in value
            or "poweraware_image_pull_secrets" in value
            or "poweraware_state" in value
        ):
            rendered = env.from_string(value).render(**site)
            values[name] = yaml.safe_load(rendered) if name.endswith("_pull_secrets") else rendered
    return values


def documented_images(repo: pathlib.Path | None = None) -> dict[str, tuple[str, str]]:
    """docs/security.md's Images table: repository -> (its digest, or 'none', and the source or the
    reason). The unit test holds the roles' defaults to it, the site test the containers that run."""
    repo = repo or pathlib.Path(__file__).resolve().parents[1]
    text = (repo / "docs" / "security.md").read_text()
    section = text.split("## Images", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([^`]+)` \(([^)]+)[^|]*\| (?:`(sha256:[0-9a-f]{64})`[^|]*|none) \| (.+) \|$", line)
        if match:
            repository, _tag, digest, why = match.groups()
            rows[repository] = (digest or "none", why.strip())
    return rows


def self_signed_pem(not_before, not_after) -> str:
    """A self-signed EC certificate (CN test) valid from ``not_before`` to ``not_after``, as PEM text."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# The power_extender role's settings as its defaults give them, resolved (the power extender's
# config_errors takes them whole): the tests of its checks and of the prefix check both roles share.
EXTENDER_SETTINGS = {
    "power_extender_state": "present",
    "power_extender_port": 10290,
    "power_extender_address": "127.0.0.1",
    "power_extender_allowed_clients": ["kube-scheduler-tas-client"],
    "power_extender_api_user": "poweraware:scheduler-extender",
    "power_extender_annotation_prefix": "poweraware.io",
    "power_extender_stale_after": 30,
    "power_extender_default_pod_cpu_m": 100,
    "power_extender_run_as_user": 10290,
    "power_extender_http_timeout": 1,
    "power_extender_wait_timeout": 120,
    "power_extender_code_dir": "/opt/poweraware/scheduler-extender",
    "power_extender_manifest_path": "/etc/kubernetes/manifests/poweraware-scheduler-extender.yaml",
    "power_extender_pki_dir": "/etc/kubernetes/pki/poweraware-extender",
}


class Recorder:
    """A stand-in library function: records each call, returns ``result`` or raises ``error``."""

    def __init__(self, result="result", error=None):
        self.calls = []
        self.result = result
        self.error = error

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if self.error is not None:
            raise self.error
        return self.result


def raises(call, message):
    """``call()`` raises AnsibleFilterError with exactly ``message`` (what a filter plugin reports)."""
    # imported here: the helpers that do not touch ansible-core leave a test out of make unit-oldest
    # (tests/conftest.py, reaches_ansible)
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError) as info:
        call()
    assert str(info.value) == message
