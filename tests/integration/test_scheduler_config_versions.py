"""Every configuration the scheduler-extender module generates, loaded by a REAL kube-scheduler of a release
that serves its API version (issue 17, item 2): an oracle independent of the golden files.

The unit goldens (tests/unit/plugins/module_utils/scheduler/golden) are regenerated from the
implementation. Here one kube-scheduler per configuration API version is built from the Kubernetes Go
modules (lab/go/kube-scheduler-v1.*, cached like the lab's binaries by ``lab.assets.scheduler_release``,
built on first use):

| release | serves | loads here |
|---|---|---|
| v1.21.14 | v1beta1, Policy | the module's v1beta1 files (1.19 - 1.21) and its Policy files (1.18 - 1.22) |
| v1.22.17 | v1beta2, v1beta1, Policy | v1beta2 (1.22) and v1beta1 files, Policy files |
| v1.24.17 | v1beta3, v1beta2 | v1beta3 (1.23, 1.24) and v1beta2 files |
| v1.36.3 (the lab's) | v1 | v1 files (1.25+) |

Which versions a release serves is the module's table (``sched_version.served_versions``), itself
checked here against each real scheduler (every version it does not serve must be refused).

For every case - each unit golden case, the v1 test's cases, and ours-alone cases at 1.21, 1.22 and 1.24
- the configuration is computed as the module computes it (scheduler_config_cases.py: ``plan_present``,
the kubeconfig and TLS files in its INPUTS replaced by real files on this machine, its output loaded
untouched) and started as ``kube-scheduler --config=FILE --write-config-to=OUT``: the scheduler decodes
the file strictly, defaults and validates it, builds the scheduler (every extender included:
NewHTTPExtender reads the TLS files), writes the configuration it runs with and exits 0, without an API
server. OUT is then compared with the INTENT, the inputs the test gave the module (the extender
arguments, the user's own entries, the manifest's --kubeconfig), never with the module's bytes:

* each extender's urlPrefix, verbs, weight, enableHTTPS, nodeCacheCapable, ignorable, httpTimeout,
  managedResources and tlsConfig files, and no other extender;
* clientConnection.kubeconfig;
* the scheduler's own use of the extenders: every resource an extender manages with
  ignoredByScheduler is in each profile's NodeResourcesFit ignoredResources.

A Policy file (1.18 - 1.22, ``--policy-config-file``) has no place in the written configuration: it is
started with ``-v=2`` until the scheduler is built ("Starting Kubernetes Scheduler"), and the extenders
are read from its own "Creating extender" log lines.

REFUSED: the configurations the module refuses (scheduler_config_cases.refused_cases, in each release's
newest version) must make that release exit non-zero with its own validation message.

kube-scheduler 1.21 opens the insecure 0.0.0.0:10251 for a v1beta1 file even with --port=0 (its
healthzBindAddress default): every run is in a private network namespace (``unshare``) when one can be
made, so nothing it opens collides with, or is reachable from, the machine.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shutil
import subprocess
import time

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv
from extender_server import make_ca
from poweraware_testing import stop_process
from scheduler_config_cases import (
    GOLDEN,
    GOLDEN_CASES,
    LOADS,
    OURS_ALONE,
    Case,
    plan,
    refused_cases,
    tls_files,
    unchecked_config,
)

from lab import assets  # the repository root is on sys.path (conftest.py)

pytestmark = [pytest.mark.standalone, pytest.mark.slow]

GROUP = "kubescheduler.config.k8s.io"
CONFIG_VERSIONS = ("v1beta1", "v1beta2", "v1beta3", "v1")
RUN_TIMEOUT = 60
# An extender without httpTimeout: the configuration API defaults it to 5 s (every version), and for a
# Policy's 0 NewHTTPExtender takes the same DefaultExtenderTimeout.
DEFAULT_EXTENDER_TIMEOUT_NS = 5 * 10**9
POLICY_START_TIMEOUT = 30


@dataclasses.dataclass(frozen=True)
class Release:
    build: str  # lab.assets.scheduler_release name
    version: str  # what `kube-scheduler --version` reports

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])

    @property
    def serves(self) -> tuple[str, ...]:
        return tuple(v for v in sv.served_versions(self.minor) if v in CONFIG_VERSIONS)

    @property
    def serves_policy(self) -> bool:
        return self.minor <= sv.LAST_POLICY_MINOR


RELEASES = [Release(c.name, c.version) for c in assets.SCHEDULER_RELEASES]
RELEASES.append(Release("lab", assets.kubernetes_version()))


# --- the cases ----------------------------------------------------------------------------------------


def _from_unit(case) -> Case:
    return Case(
        case.name,
        case.manifest,
        case.extenders,
        files={node: (GOLDEN / rel).read_text() for node, rel in case.files.items()},
        kubernetes_version=case.kubernetes_version,
        legacy_policy=case.legacy_policy,
    )


def _all_cases() -> list[Case]:
    """Every golden case, the v1 test's cases (at the lab's release, as there), ours alone at the releases
    of each older configuration version."""
    out = [_from_unit(c) for c in GOLDEN_CASES]
    out += [
        dataclasses.replace(c, kubernetes_version=c.kubernetes_version or assets.kubernetes_version()) for c in LOADS
    ]
    out += [
        dataclasses.replace(c, name=f"{c.name}-1.{minor}", kubernetes_version=f"1.{minor}")
        for c in OURS_ALONE
        for minor in (21, 22, 24)
    ]
    return out


# --- running a scheduler ------------------------------------------------------------------------------


def _isolation() -> list[str]:
    """A prefix that runs a command in a new network namespace, or [] when none can be made here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    for prefix in ([unshare, "--net"], [unshare, "--map-root-user", "--net"]):
        if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0:
            return prefix
    return []


@dataclasses.dataclass
class Run:
    code: int | None
    log: str
    written: dict | None


def _write_config(binary: pathlib.Path, prefix: list[str], directory: pathlib.Path, config_text: str) -> Run:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(config_text)
    out = directory / "written.yaml"
    command = [*prefix, str(binary), f"--config={config}", f"--write-config-to={out}", "--secure-port=0"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    log = proc.stdout + proc.stderr
    (directory / "kube-scheduler.log").write_text(log)
    written = yaml.safe_load(out.read_text()) if proc.returncode == 0 and out.exists() else None
    return Run(proc.returncode, log, written)


def _start_with_policy(binary: pathlib.Path, prefix: list[str], directory: pathlib.Path, policy: str, kubeconfig):
    """Start the scheduler on a Policy file until it is built, then stop it: its exit code if it exited."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "policy.json"
    path.write_text(policy)
    log_path = directory / "kube-scheduler.log"
    command = [
        *prefix,
        str(binary),
        f"--policy-config-file={path}",
        f"--kubeconfig={kubeconfig}",
        "--secure-port=0",
        "--port=0",
        "--leader-elect=false",
        # factory.go logs the extenders at 2, server.go "Starting" at 1; not -v=2 for all: 1.22 then also
        # encodes its configuration for the log, which fails for a Policy's plugins and exits
        # (no kind "NodeResourcesLeastAllocatedArgs" is registered for version "...v1beta2").
        "--vmodule=factory=2,server=1",
    ]
    with log_path.open("wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + POLICY_START_TIMEOUT
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if "Starting Kubernetes Scheduler" in log_path.read_text(errors="replace"):
                break
            time.sleep(0.1)
        code = process.poll()
    finally:
        stop_process(process)
    return code, log_path.read_text(errors="replace")


# --- the intent and what the scheduler holds, in one shape ----------------------------------------------

_GO_DURATION = re.compile(r"([0-9.]+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _ns(duration) -> int:
    """A Go duration string ("5s", "1m30s", "750ms", "0s") in nanoseconds (a number is already ns)."""
    if duration is None or isinstance(duration, int):
        return duration or 0
    parts = _GO_DURATION.findall(duration)
    assert "".join(n + u for n, u in parts) == duration, f"not a Go duration: {duration!r}"
    return round(sum(float(n) * _GO_UNITS[u] for n, u in parts))


def _canonical(entry: dict) -> dict:
    """An extender as kube-scheduler's types hold it: zero values (omitempty) dropped, durations in ns,
    no httpTimeout the same as kube-scheduler's default."""
    out = {"httpTimeout": DEFAULT_EXTENDER_TIMEOUT_NS}
    for key, value in entry.items():
        if key == "httpTimeout":
            value = _ns(value) or DEFAULT_EXTENDER_TIMEOUT_NS
        elif key == "managedResources":
            value = [{k: v for k, v in r.items() if v not in (False, "", None)} for r in value or []]
        elif key == "tlsConfig" and isinstance(value, dict):
            value = {k: v for k, v in (value or {}).items() if v not in (False, "", None)}
        if value in (None, False, "", 0, [], {}):
            continue
        out[key] = value
    return out


def _intended(ext: dict) -> dict:
    """What one extender the test gave the module must be in kube-scheduler, from the module's documented
    arguments (weight 1 and enable_https from the URL's scheme when not given)."""
    url = ext["url_prefix"]
    out = {"urlPrefix": url, "weight": ext.get("weight") or 1}
    https = ext.get("enable_https")
    out["enableHTTPS"] = url.startswith("https://") if https is None else https
    for arg, field in (
        ("filter_verb", "filterVerb"),
        ("prioritize_verb", "prioritizeVerb"),
        ("preempt_verb", "preemptVerb"),
        ("bind_verb", "bindVerb"),
        ("http_timeout", "httpTimeout"),
        ("node_cache_capable", "nodeCacheCapable"),
        ("ignorable", "ignorable"),
    ):
        out[field] = ext.get(arg)
    out["managedResources"] = [
        {"name": r["name"], "ignoredByScheduler": bool(r.get("ignored_by_scheduler"))}
        for r in ext.get("managed_resources") or []
    ]
    tls = ext.get("tls") or {}
    out["tlsConfig"] = {
        field: tls.get(arg)
        for arg, field in (
            ("cert_file", "certFile"),
            ("key_file", "keyFile"),
            ("ca_file", "caFile"),
            ("server_name", "serverName"),
            ("insecure", "insecure"),
        )
    }
    return _canonical(out)


def _intent(case: Case, pki: dict, file_path: str) -> dict[str, dict]:
    """urlPrefix -> extender: ours, and the entries of the user's file that are not ours, as they were."""
    ours = {e["url_prefix"]: _intended(tls_files(e, pki)) for e in case.extenders}
    user_text = case.files.get(file_path)
    user = yaml.safe_load(user_text) if user_text else {}
    theirs = {e["urlPrefix"]: _canonical(e) for e in (user or {}).get("extenders") or []}
    return {**{url: e for url, e in theirs.items() if url not in ours}, **ours}


_POLICY_EXTENDER = re.compile(
    r'"Creating extender" extender=\{URLPrefix:(?P<urlPrefix>\S*) FilterVerb:(?P<filterVerb>\S*) '
    r"PreemptVerb:(?P<preemptVerb>\S*) PrioritizeVerb:(?P<prioritizeVerb>\S*) Weight:(?P<weight>-?\d+) "
    r"BindVerb:(?P<bindVerb>\S*) EnableHTTPS:(?P<enableHTTPS>true|false) TLSConfig:(?P<tlsConfig>\S+) "
    r"HTTPTimeout:\{Duration:(?P<httpTimeout>\S+)\} NodeCacheCapable:(?P<nodeCacheCapable>true|false) "
    r"ManagedResources:\[(?P<managedResources>[^\]]*)\] Ignorable:(?P<ignorable>true|false)\}"
)
_POLICY_RESOURCE = re.compile(r"\{Name:(\S+) IgnoredByScheduler:(true|false)\}")


def _policy_extenders(log: str) -> dict[str, dict]:
    """The extenders kube-scheduler built from a Policy file, from its "Creating extender" lines (Go's %+v of
    the internal Extender: tlsConfig is a pointer there, so only whether it is set can be compared)."""
    found = {}
    for match in _POLICY_EXTENDER.finditer(log):
        entry = match.groupdict()
        entry["weight"] = int(entry["weight"])
        for key in ("enableHTTPS", "nodeCacheCapable", "ignorable"):
            entry[key] = entry[key] == "true"
        entry["tlsConfig"] = entry["tlsConfig"] != "<nil>"
        entry["managedResources"] = [
            {"name": name, "ignoredByScheduler": ignored == "true"}
            for name, ignored in _POLICY_RESOURCE.findall(entry["managedResources"])
        ]
        found[entry["urlPrefix"]] = _canonical(entry)
    return found


def _ignored_resources(written: dict) -> list[tuple[str, list[str]]]:
    """(profile, NodeResourcesFit ignoredResources) for each profile of a written configuration."""
    out = []
    for profile in written.get("profiles") or []:
        for plugin in profile.get("pluginConfig") or []:
            if plugin.get("name") == "NodeResourcesFit":
                out.append((profile.get("schedulerName"), (plugin.get("args") or {}).get("ignoredResources") or []))
    return out


def _diff(expected: dict, actual: dict) -> list[str]:
    problems = []
    for url in sorted(set(expected) | set(actual)):
        if url not in actual:
            problems.append(f"extender {url} is missing")
        elif url not in expected:
            problems.append(f"extender {url} was not asked for: {actual[url]}")
        elif expected[url] != actual[url]:
            keys = sorted(set(expected[url]) | set(actual[url]))
            changes = [
                f"{k}: intended {expected[url].get(k)!r}, scheduler holds {actual[url].get(k)!r}"
                for k in keys
                if expected[url].get(k) != actual[url].get(k)
            ]
            problems.append(f"extender {url}: {'; '.join(changes)}")
    return problems


# --- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scheduler-versions")
    ca = make_ca(directory)
    kubeconfig = directory / "kubeconfig"
    # An API server that is never reached: --write-config-to exits before any request.
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "none", "user": {"token": "none"}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        )
    )
    return {
        "dir": directory,
        "pki": {"cert": str(ca.cert), "key": str(ca.key), "ca": str(ca.cert)},
        "kubeconfig": str(kubeconfig),
        "isolation": _isolation(),
    }


@pytest.fixture(scope="module")
def binaries():
    """Release build name -> its kube-scheduler, built (and timed) on first use."""
    found = {}
    for release in RELEASES:
        started = time.monotonic()
        found[release.build] = assets.scheduler_release(release.build)
        took = time.monotonic() - started
        if took > 5:
            print(f"\nbuilt {release.build} ({release.version}) in {took:.0f} s: {found[release.build]}")
    return found


# --- the tests ----------------------------------------------------------------------------------------

IDS = [f"{r.version}" for r in RELEASES]


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_release_reports_its_version(binaries, release):
    out = subprocess.run([str(binaries[release.build]), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"Kubernetes {release.version}"


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_release_serves_the_versions_the_module_table_says(binaries, workdir, release, tmp_path):
    """sched_version's table, which routes the cases below, against the real scheduler: it loads a
    minimal configuration in every version the table says it serves and refuses every other one."""
    loads = {}
    for version in CONFIG_VERSIONS:
        text = (
            f"apiVersion: {GROUP}/{version}\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection:\n  kubeconfig: {workdir['kubeconfig']}\n"
        )
        run = _write_config(binaries[release.build], workdir["isolation"], tmp_path / version, text)
        loads[version] = run.code == 0
        if not loads[version]:
            assert "no kind" in run.log and "is registered for version" in run.log, run.log[-2000:]
    assert [v for v in CONFIG_VERSIONS if loads[v]] == sorted(release.serves, key=CONFIG_VERSIONS.index)


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_every_generated_config_loads_as_intended_and_refusals_are_refused(
    binaries, workdir, release, tmp_path, capsys
):
    binary, prefix, pki, kubeconfig = (
        binaries[release.build],
        workdir["isolation"],
        workdir["pki"],
        workdir["kubeconfig"],
    )
    problems: list[str] = []
    loaded: dict[str, list[str]] = {}
    for case in _all_cases():
        result = plan(case, pki, None, kubeconfig=kubeconfig)
        if result.mode == "policy":
            if not release.serves_policy:
                continue
            code, log = _start_with_policy(binary, prefix, tmp_path / case.name, result.file_after, kubeconfig)
            if code is not None or "Starting Kubernetes Scheduler" not in log:
                problems.append(f"{case.name} (Policy): kube-scheduler did not start (exit {code}):\n{log[-3000:]}")
                continue
            intended = {
                url: _canonical(dict(e, tlsConfig=bool(e.get("tlsConfig"))))
                for url, e in _intent(case, pki, result.file_path).items()
            }
            problems += [f"{case.name} (Policy): {p}" for p in _diff(intended, _policy_extenders(log))]
            loaded.setdefault("Policy", []).append(case.name)
            continue
        version = result.api_version.rpartition("/")[2]
        if version not in release.serves:
            continue
        if release.minor > 22 and "healthzBindAddress" in (yaml.safe_load(result.file_after) or {}):
            # a 1.22 file binding the plain-HTTP port to loopback (1.23+ refuse any port but 0 there:
            # the field is for 1.19 - 1.22 only, which is what the module writes it for)
            continue
        run = _write_config(binary, prefix, tmp_path / case.name, result.file_after)
        if run.code != 0 or run.written is None:
            problems.append(f"{case.name} ({version}): refused (exit {run.code}):\n{run.log[-3000:]}")
            continue
        intended = _intent(case, pki, result.file_path)
        held = {e["urlPrefix"]: _canonical(e) for e in run.written.get("extenders") or []}
        problems += [f"{case.name} ({version}): {p}" for p in _diff(intended, held)]
        client = (run.written.get("clientConnection") or {}).get("kubeconfig")
        if client != kubeconfig:
            problems.append(f"{case.name} ({version}): clientConnection.kubeconfig {client!r}, intended {kubeconfig!r}")
        # kubeadm's --port=0 turned the plain-HTTP port off; kube-scheduler 1.19 - 1.22 ignores it once
        # --config is given and takes the address from the file: what it holds must not be a wildcard
        if release.minor <= 22 and result.file_created and "--port=0" in (GOLDEN / case.manifest).read_text():
            for field in ("healthzBindAddress", "metricsBindAddress"):
                held_address = run.written.get(field)
                if held_address is not None and not str(held_address).startswith("127.0.0.1:"):
                    problems.append(
                        f"{case.name} ({version}): the manifest passes --port=0 and kube-scheduler "
                        f"holds {field} {held_address!r} (plain HTTP beyond loopback)"
                    )
        ignored = sorted(
            r["name"] for e in intended.values() for r in e.get("managedResources", []) if r.get("ignoredByScheduler")
        )
        for profile, names in _ignored_resources(run.written):
            if not set(ignored) <= set(names):
                problems.append(
                    f"{case.name} ({version}): profile {profile} ignores {names} in NodeResourcesFit, not {ignored}"
                )
        loaded.setdefault(version, []).append(case.name)

    newest = release.serves[0]
    refused = []
    for case in refused_cases(newest):
        case = dataclasses.replace(case, kubernetes_version=f"1.{release.minor}")
        # the module refuses in its argument checks (normalize_extenders) or in its plan
        _extenders, errors = sc.normalize_extenders([tls_files(e, pki) for e in case.extenders])
        if errors:
            message = "; ".join(errors)
        else:
            with pytest.raises(ms.ManifestError) as info:
                plan(case, pki, None, kubeconfig=kubeconfig)
            message = str(info.value)
        if case.refused_by_module not in message:
            problems.append(f"refused {case.name}: the module's message lacks {case.refused_by_module!r}: {message}")
        run = _write_config(binary, prefix, tmp_path / f"refused-{case.name}", unchecked_config(case, pki, kubeconfig))
        if run.code == 0:
            problems.append(f"refused {case.name} ({newest}): kube-scheduler {release.version} loaded it")
        elif case.refused_by_scheduler not in run.log:
            problems.append(f"refused {case.name}: kube-scheduler's message lacks {case.refused_by_scheduler!r}")
        else:
            refused.append(case.name)

    count = sum(len(names) for names in loaded.values())
    detail = ", ".join(f"{v}: {len(loaded[v])}" for v in [*CONFIG_VERSIONS, "Policy"] if v in loaded)
    with capsys.disabled():
        print(
            f"\nPROOF kube-scheduler {release.version} (serves {', '.join(release.serves)}"
            f"{', Policy' if release.serves_policy else ''}): loaded {count} generated configurations as intended "
            f"({detail}); refused {len(refused)} of {len(refused_cases(newest))} the module refuses ({newest})"
        )
    assert not problems, "\n".join(problems)
    assert count > 0
