"""cpu_power and appqos_certs converge on fake per-node roots (no Kubernetes API needed).

Every driver scenario of lab/fake_sysfs.py is one inventory host with its own root
(poweraware_node_root), using the lab's group variables (inventory/lab/group_vars/all/node_power.yml).
The tests run in order on the same roots: check mode first, converge, re-run (changed=0), check
mode again, certificate permissions and (no) regeneration, boot re-apply, bad inventories, removal.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml
from ansible_run import REPO_ROOT, run_playbook
from poweraware_testing import tree_digest

PLAYBOOK = REPO_ROOT / "playbooks" / "node_power.yml"
LAB_VARS = REPO_ROOT / "inventory" / "lab" / "group_vars" / "all" / "node_power.yml"
HOSTS = {
    "np-intel": ("intel_pstate_active", {"cpus": 8}),
    "np-passive": ("intel_cpufreq_passive", {"cpus": 6}),
    "np-acpi": ("acpi_cpufreq_shared", {}),
    "np-amd": ("amd_pstate_epp", {}),
    "np-hybrid": ("hybrid", {}),
    "np-offline": ("offline_cpus", {}),
    "np-none": ("no_cpufreq", {}),
}
CERT_FILES = ("ca", "appqos", "client")

pytestmark = pytest.mark.slow


def _fake_sysfs():
    spec = importlib.util.spec_from_file_location("poweraware_lab_fake_sysfs_it", REPO_ROOT / "lab" / "fake_sysfs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Lab:
    def __init__(self, base: pathlib.Path):
        self.base = base
        self.fake_sysfs = _fake_sysfs()
        for host, (scenario, shape) in HOSTS.items():
            self.fake_sysfs.build_tree(base / host / "sys", scenario, **shape)
        group_vars = yaml.safe_load(LAB_VARS.read_text())
        group_vars.update({"ansible_connection": "local", "ansible_python_interpreter": sys.executable})
        inventory = {
            "all": {
                "children": {
                    "kube_node": {"hosts": {h: {"poweraware_node_root": str(base / h)} for h in HOSTS}},
                },
                "vars": group_vars,
            }
        }
        self.inventory = base / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(inventory))
        self.pristine_sys = {h: tree_digest(self.sys(h)) for h in HOSTS}

    def root(self, host):
        return self.base / host

    def sys(self, host):
        return self.base / host / "sys"

    def policy(self, host, name, attr):
        return (self.sys(host) / "devices/system/cpu/cpufreq" / name / attr).read_text().strip()

    def certs(self, host):
        return self.root(host) / "etc" / "certs" / "public"

    def everything(self):
        return {h: tree_digest(self.root(h), mtimes=True) for h in HOSTS}

    def run(self, **kwargs):
        return run_playbook(PLAYBOOK, inventory=self.inventory, **kwargs)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return Lab(tmp_path_factory.mktemp("node_power"))


def test_check_mode_on_fresh_nodes_changes_nothing(lab):
    before = lab.everything()
    result = lab.run(check=True, diff=True)
    assert result.rc == 0, str(result)
    assert result.changed > 0, str(result)
    assert lab.everything() == before


def test_converge(lab):
    result = lab.run()
    assert result.rc == 0, str(result)
    assert result.failed == 0
    # intel_pstate, 8 CPUs: pool 2-3 performance (800-3900 MHz: 85%..100%), shared 4-7 (EPP power, 0%..40%)
    assert lab.policy("np-intel", "policy2", "scaling_min_freq") == "3400000"
    assert lab.policy("np-intel", "policy3", "scaling_max_freq") == "3900000"
    assert lab.policy("np-intel", "policy3", "energy_performance_preference") == "performance"
    assert lab.policy("np-intel", "policy5", "energy_performance_preference") == "power"
    assert lab.policy("np-intel", "policy5", "scaling_max_freq") == "2000000"
    # reserved CPUs 0-1 untouched
    for host in ("np-intel", "np-amd", "np-hybrid"):
        assert lab.policy(host, "policy0", "energy_performance_preference") == "balance_performance"
        assert lab.policy(host, "policy1", "scaling_min_freq") == lab.policy(host, "policy1", "cpuinfo_min_freq")
    # hybrid: each core type gets a range from its own limits
    assert lab.policy("np-hybrid", "policy2", "scaling_max_freq") == "5000000"  # P-core pool, performance
    assert lab.policy("np-hybrid", "policy3", "scaling_min_freq") == "4300000"  # 800 + 4200 * 0.85 = 4370 -> 4300
    assert lab.policy("np-hybrid", "policy4", "scaling_max_freq") == "2000000"  # E-core shared: 800+3000*.4
    # no EPP on passive / acpi: fallback governor, frequencies only
    assert lab.policy("np-passive", "policy4", "scaling_governor") == "schedutil"
    assert lab.policy("np-passive", "policy4", "scaling_max_freq") == "2000000"  # 800 + 3100 * 0.4 = 2040 -> 2000
    assert not (lab.sys("np-passive") / "devices/system/cpu/cpufreq/policy4/energy_performance_preference").exists()
    assert lab.policy("np-acpi", "policy2", "scaling_max_freq") == "2601000"
    assert lab.policy("np-acpi", "policy4", "scaling_max_freq") == "1700000"  # 1200+1401*.4 = 1760 -> 1700
    # offline CPUs skipped, not touched
    assert lab.policy("np-offline", "policy6", "scaling_max_freq") == "3900000"
    assert lab.policy("np-offline", "policy5", "energy_performance_preference") == "power"
    # no cpufreq: nothing to do, said so
    assert "no cpufreq on np-none" in result.stdout
    # boot re-apply: unit written under the node root (not enabled in the lab)
    unit = (lab.root("np-intel") / "etc/systemd/system/poweraware-cpu-power.service").read_text()
    assert f"ExecStart=/usr/bin/python3 {lab.root('np-intel')}/usr/local/lib/poweraware/cpu_power_apply.py" in unit
    config = json.loads((lab.root("np-intel") / "etc/poweraware/cpu_power.json").read_text())
    assert [(a["pool"], a["cpus"]) for a in config["assignments"]] == [
        ("lab-exclusive", [2, 3]),
        ("shared", [4, 5, 6, 7]),
    ]


def test_second_run_reports_no_change(lab):
    before = lab.everything()
    result = lab.run()
    assert result.rc == 0, str(result)
    assert result.changed == 0, str(result)
    assert lab.everything() == before


def test_check_mode_after_converge_changes_nothing(lab):
    before = lab.everything()
    result = lab.run(check=True, diff=True)
    assert result.rc == 0, str(result)
    assert result.changed == 0, str(result)
    assert lab.everything() == before


def test_certificate_permissions(lab):
    for host in HOSTS:
        certs = lab.certs(host)
        assert stat.S_IMODE(certs.stat().st_mode) == 0o700
        for name in CERT_FILES:
            assert stat.S_IMODE((certs / f"{name}.key").stat().st_mode) == 0o600, name
            assert stat.S_IMODE((certs / f"{name}.crt").stat().st_mode) == 0o644, name
        assert not list(certs.glob("*.csr"))
        conf = json.loads((certs / "appqos.conf").read_text())
        assert conf == {"apps": [], "sstbf": {"configured": False}, "pools": [], "power_profiles_expert_mode": True}


def _cert_state(lab, host):
    certs = lab.certs(host)
    return {f"{n}.{ext}": (certs / f"{n}.{ext}").stat().st_mtime_ns for n in CERT_FILES for ext in ("key", "crt")} | {
        f"{n}.crt#": hashlib.sha256((certs / f"{n}.crt").read_bytes()).hexdigest() for n in CERT_FILES
    }


def test_certificates_signed_by_ca_with_sans(lab):
    from cryptography import x509

    certs = lab.certs("np-intel")
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    server = x509.load_pem_x509_certificate((certs / "appqos.crt").read_bytes())
    client = x509.load_pem_x509_certificate((certs / "client.crt").read_bytes())
    assert server.issuer == ca.subject and client.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    client.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(v) for v in sans.get_values_for_type(x509.DNSName)] == ["localhost"]
    assert [str(v) for v in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert server.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == "localhost"


def test_no_regeneration_unless_needed(lab):
    host = "np-intel"
    before = _cert_state(lab, host)
    assert lab.run(limit=host, tags=["appqos_certs"]).changed == 0
    assert _cert_state(lab, host) == before

    # expiring within the renewal window (365-day certificates, 400-day window): server and client
    # are re-issued, keys and the CA (1825 days) stay
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_renew_days": 400})
    assert result.rc == 0, str(result)
    after = _cert_state(lab, host)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"appqos.crt", "appqos.crt#", "client.crt", "client.crt#"}

    # a changed parameter (server SANs) re-issues only the server certificate
    sans = ["DNS:localhost", "IP:127.0.0.1", "DNS:appqos.node.local"]
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans})
    assert result.rc == 0, str(result)
    again = _cert_state(lab, host)
    assert {k for k in after if after[k] != again[k]} == {"appqos.crt", "appqos.crt#"}
    assert lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans}).changed == 0

    # a missing file is recreated, nothing else
    (lab.certs(host) / "client.crt").unlink()
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans})
    assert result.rc == 0, str(result)
    final = _cert_state(lab, host)
    assert {k for k in again if again[k] != final[k]} == {"client.crt", "client.crt#"}
    # back to the default SANs for the tests that follow
    assert lab.run(limit=host, tags=["appqos_certs"]).rc == 0


def test_keys_never_logged(lab):
    result = lab.run(limit="np-intel", tags=["appqos_certs"], diff=True)
    key = (lab.certs("np-intel") / "appqos.key").read_text()
    assert "PRIVATE KEY" in key
    assert "PRIVATE KEY" not in result.stdout + result.stderr


def test_boot_unit_reapplies_after_reboot(lab):
    host = "np-intel"
    state_before = (lab.root(host) / "var/lib/poweraware/cpu_power_state.json").read_text()
    lab.fake_sysfs.build_tree(lab.sys(host), "intel_pstate_active", rebuild=True, cpus=8)  # "reboot"
    assert lab.policy(host, "policy5", "energy_performance_preference") == "balance_performance"
    runner = lab.root(host) / "usr/local/lib/poweraware/cpu_power_apply.py"
    config = lab.root(host) / "etc/poweraware/cpu_power.json"
    proc = subprocess.run(
        [sys.executable, "-I", str(runner), str(config)], capture_output=True, text=True, check=False, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    assert "shared (shared): CPUs 4-7 changed" in proc.stdout
    assert lab.policy(host, "policy5", "energy_performance_preference") == "power"
    assert lab.policy(host, "policy2", "scaling_min_freq") == "3400000"
    # originals were recorded once and are not overwritten by the boot run
    assert (lab.root(host) / "var/lib/poweraware/cpu_power_state.json").read_text() == state_before
    assert lab.run(limit=host).changed == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {
                "cpu_power_pools": [
                    {"name": "a", "cpus": "2-4", "profile": "performance"},
                    {"name": "b", "cpus": "4-5", "profile": "balance-power"},
                ]
            },
            "pools a and b overlap on CPU 4; each CPU belongs to one pool",
        ),
        (
            {"cpu_power_kubelet_reserved_cpus": "0-3"},
            "cpu_power_reserved_cpus (0,1) does not match the kubelet reserved CPUs (0,1,2,3, from "
            "cpu_power_kubelet_reserved_cpus)",
        ),
        (
            {"cpu_power_pools": [{"name": "a", "cpus": "1-2", "profile": "performance"}]},
            "pool a overlaps the reserved CPUs on 1; exclusive pools must not use reserved CPUs",
        ),
        (
            {"cpu_power_pools": [{"name": "a", "cpus": "2-3", "profile": "turbo"}]},
            "pool a: profile turbo is not defined (cpu_power_profiles has: balance-performance, balance-power, "
            "performance, shared)",
        ),
        (
            {"cpu_power_pools": [{"name": "big", "cpus": "2-63", "profile": "performance"}]},
            "pool big names CPUs 8,9,10",
        ),
    ],
    ids=["overlapping-pools", "kubelet-mismatch", "pool-on-reserved", "unknown-profile", "cpu-not-present"],
)
def test_bad_inventory_fails_before_changing_anything(lab, extra, message):
    before = lab.everything()
    result = lab.run(limit="np-intel", tags=["cpu_power"], extra_vars=extra)
    assert result.rc != 0
    assert message in result.stdout, str(result)
    assert lab.everything() == before


def test_reserved_cpus_checked_against_kubelet_config(lab):
    host = "np-intel"
    kubelet = lab.root(host) / "var/lib/kubelet/config.yaml"
    kubelet.parent.mkdir(parents=True, exist_ok=True)
    kubelet.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreservedSystemCPUs: 0-2\n"
    )
    try:
        before = lab.everything()
        result = lab.run(limit=host, tags=["cpu_power"], extra_vars={"cpu_power_kubelet_reserved_cpus": None})
        assert result.rc != 0
        assert f"does not match the kubelet reserved CPUs (0,1,2, from {kubelet})" in result.stdout, str(result)
        assert lab.everything() == before
        kubelet.write_text("kind: KubeletConfiguration\nreservedSystemCPUs: 0,1\n")
        result = lab.run(limit=host, tags=["cpu_power"], extra_vars={"cpu_power_kubelet_reserved_cpus": None})
        assert result.rc == 0, str(result)
        assert result.changed == 0, str(result)
    finally:
        kubelet.unlink()


def test_absent_restores_originals(lab):
    result = lab.run(extra_vars={"cpu_power_state": "absent"})
    assert result.rc == 0, str(result)
    for host in HOSTS:
        if host != "np-intel":  # restored values are written again: compare contents, not mtimes
            assert tree_digest(lab.sys(host)) == lab.pristine_sys[host], host
        assert not (lab.root(host) / "etc/systemd/system/poweraware-cpu-power.service").exists()
    # np-intel was "rebooted" (rebuilt) above, so compare values rather than timestamps
    for cpu in range(8):
        assert lab.policy("np-intel", f"policy{cpu}", "energy_performance_preference") == "balance_performance"
        assert lab.policy("np-intel", f"policy{cpu}", "scaling_min_freq") == "800000"
        assert lab.policy("np-intel", f"policy{cpu}", "scaling_max_freq") == "3900000"
    again = lab.run(extra_vars={"cpu_power_state": "absent"})
    assert again.rc == 0, str(again)
    assert again.changed == 0, str(again)
