"""cpu_power and appqos_certs converge over SSH on node hosts with eight kernel flavours.

Each driver scenario of lab/fake_sysfs.py is a node host of its own (lab/nodes.py: a mount and UTS
namespace with its own address in 127.0.2.0/24, sshd, a sudo login, kubeadm's kubelet configuration
with reservedSystemCPUs 0-1 and its fake kernel at /sys). No Kubernetes API is needed. The tests run
in order on the same hosts: check mode first, the defaults (which must slow nothing), converge with
the lab's pools (App QoS certificates on two hosts, switched off on the others), re-run
(changed=0), check mode again, certificate permissions and (no) regeneration, a power cycle that
runs the boot unit, bad inventories, removal. The module is standalone: `make integration` runs it
beside the lab's tests (scripts/integration.py).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import stat
import subprocess

import pytest
import yaml
from ansible_run import REPO_ROOT, run_playbook
from poweraware_testing import tree_digest

from lab import fake_sysfs, nodes, pki, process

PLAYBOOK = REPO_ROOT / "playbooks" / "node_power.yml"
LAB_POOLS = REPO_ROOT / "inventory" / "lab" / "group_vars" / "kube_node" / "node_power.yml"
HOSTS = {
    "np-intel": ("intel_pstate_active", 8),
    "np-passive": ("intel_cpufreq_passive", 6),
    "np-acpi": ("acpi_cpufreq_shared", None),
    "np-amd": ("amd_pstate_epp", None),
    "np-hybrid": ("hybrid", None),
    "np-offline": ("offline_cpus", None),
    "np-none": ("no_cpufreq", None),
    # C-states (intel_idle), legacy uncore directories and RAPL package limits: the other controls
    "np-idle": ("intel_idle_uncore", None),
}
# The fleet the general tests converge; np-idle is driven by its own test (its own inventory), which
# keeps the seven-host runs as they were.
IDLE_HOST = "np-idle"
FLEET = tuple(h for h in HOSTS if h != IDLE_HOST)
# App QoS certificates do not depend on the kernel: two hosts of the fleet switch them on as a user
# running an App QoS agent does (poweraware_enable_appqos_certs), the others keep the default (off) -
# which each fleet run proves leaves those hosts without certificates.
CERT_HOSTS = ("np-intel", "np-amd")
CERT_FILES = ("ca", "appqos", "client")
# What the roles write on a node (its disk, as this machine sees it), besides the kernel.
NODE_PATHS = ("etc/certs", "etc/poweraware", "etc/systemd/system", "usr/local/lib/poweraware", "var/lib/poweraware")

pytestmark = [pytest.mark.slow, pytest.mark.standalone]


class Hosts:
    def __init__(self, base: pathlib.Path):
        self.base = base
        self.node_list = [
            nodes.Node(name, f"127.0.2.{i}", False, scenario, cpus)
            for i, (name, (scenario, cpus)) in enumerate(HOSTS.items(), 1)
        ]
        self.hosts = nodes.NodeHosts(base, self.node_list, "intel_pstate_active", None, log=lambda _m: None)
        self.running: dict[str, dict] = {}
        (base / "logs").mkdir(parents=True, exist_ok=True)
        self.hosts.create_login_key()
        cluster_pki = pki.create(base / "pki", "https://127.0.0.1:6443", {}, "10.0.0.2")
        try:
            for node in self.node_list:
                self.hosts.prepare(node.name, cluster_pki, "https://127.0.0.1:6443")
                self.boot(node.name)
        except BaseException:
            self.stop()  # nothing of a failed set-up may outlive the test
            raise
        self.pristine_sys = {h: tree_digest(self.sys(h)) for h in HOSTS}
        self.pools = yaml.safe_load(LAB_POOLS.read_text())
        self.inventory = self.write_inventory("hosts.yml", {**self.pools, "cpu_power_shared_profile": "shared"})
        self.defaults_inventory = self.write_inventory("defaults.yml", {})
        self.idle_inventory = self.write_inventory("idle.yml", self.pools, names=(IDLE_HOST,))

    def spawn(self, name: str, argv: list[str]) -> dict:
        info = process.spawn(argv, self.base / "logs" / f"{name.replace('/', '-')}.log", self.base, self.base)
        self.running[name] = info
        return info

    def boot(self, host: str) -> None:
        self.hosts.start(host, pathlib.Path("/usr/lib"), None, self.spawn)
        self.hosts.write_ssh_files()

    def power_cycle(self, host: str, **firmware) -> None:
        self.hosts.stop(host, self.running[f"node/{host}"])
        self.hosts.power_on_kernel(host, **firmware)
        self.boot(host)

    def stop(self) -> None:
        for name, info in self.running.items():
            self.hosts.stop(name.split("/", 1)[1], info)

    def write_inventory(self, name: str, group_vars: dict, names: tuple[str, ...] = FLEET) -> pathlib.Path:
        ssh = self.hosts.ssh_dir
        inventory = {
            "all": {
                "children": {
                    "kube_node": {
                        "hosts": {
                            n.name: {"ansible_host": n.address}
                            | ({"poweraware_enable_appqos_certs": True} if n.name in CERT_HOSTS else {})
                            for n in self.node_list
                            if n.name in names
                        }
                    }
                },
                "vars": {
                    "ansible_user": nodes.LOGIN_USER,
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_ssh_private_key_file": str(ssh / "id_ed25519"),
                    "ansible_ssh_common_args": f"-o UserKnownHostsFile={ssh / 'known_hosts'} -o IdentitiesOnly=yes",
                    **group_vars,
                },
            }
        }
        path = self.base / name
        path.write_text(yaml.safe_dump(inventory))
        return path

    def disk(self, host):
        return self.hosts.disk(host)

    def sys(self, host):
        return self.hosts.sysfs(host)

    def policy(self, host, name, attr):
        return (self.sys(host) / "devices/system/cpu/cpufreq" / name / attr).read_text().strip()

    def certs(self, host):
        return self.disk(host) / "etc" / "certs" / "public"

    def ca_key(self, host):
        return self.disk(host) / "etc" / "poweraware" / "pki" / "appqos" / "ca.key"

    def everything(self):
        return {
            h: [tree_digest(self.sys(h), mtimes=True)]
            + [tree_digest(self.disk(h) / p, mtimes=True) if (self.disk(h) / p).exists() else None for p in NODE_PATHS]
            for h in HOSTS
        }

    def cpufreq(self):
        return {h: tree_digest(self.sys(h) / "devices/system/cpu") for h in HOSTS}

    def run(self, inventory=None, **kwargs):
        return run_playbook(PLAYBOOK, inventory=inventory or self.inventory, **kwargs)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    hosts = Hosts(tmp_path_factory.mktemp("node_power"))
    try:
        yield hosts
    finally:
        hosts.stop()


def test_check_mode_on_fresh_nodes_changes_nothing(lab):
    before = lab.everything()
    result = lab.run(check=True, diff=True)
    assert result.rc == 0, str(result)
    assert result.changed > 0, str(result)
    assert lab.everything() == before


def test_defaults_slow_nothing(lab):
    """With no pools and the defaults, no CPU is touched (issue: a first run capped every CPU at 40 %)."""
    cpufreq = lab.cpufreq()
    result = lab.run(inventory=lab.defaults_inventory, tags=["cpu_power"])
    assert result.rc == 0, str(result)
    assert lab.cpufreq() == cpufreq
    assert "capped at" not in result.stdout
    # the kubelet's reservedSystemCPUs were found and used
    assert "reserved CPUs 0,1 from /var/lib/kubelet/config.yaml" in result.stdout, str(result)


def test_converge(lab):
    # with --diff: the run that makes the App QoS keys shows no key material
    result = lab.run(diff=True)
    assert result.rc == 0, str(result)
    assert result.failed == 0
    for host in CERT_HOSTS:
        assert "PRIVATE KEY" in (lab.certs(host) / "appqos.key").read_text()
    assert "PRIVATE KEY" not in result.stdout + result.stderr
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
    # every slowdown is printed
    assert "pool shared (profile shared): CPUs 4,5,6,7 capped at 2000 MHz of 3900 MHz, EPP power" in result.stdout
    # boot re-apply: the unit is installed and enabled on the node, as systemd would have it
    unit = (lab.disk("np-intel") / "etc/systemd/system/poweraware-cpu-power.service").read_text()
    assert (
        "ExecStart=/usr/bin/python3 /usr/local/lib/poweraware/cpu_power_apply.py /etc/poweraware/cpu_power.json" in unit
    )
    wants = lab.disk("np-intel") / "etc/systemd/system/multi-user.target.wants/poweraware-cpu-power.service"
    assert wants.is_symlink()
    config = json.loads((lab.disk("np-intel") / "etc/poweraware/cpu_power.json").read_text())
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
    for host in set(FLEET) - set(CERT_HOSTS):  # the default, the role off: nothing of it on the node
        assert not (lab.disk(host) / "etc/certs").exists(), host
        assert not (lab.disk(host) / "etc/poweraware/pki").exists(), host
    for host in CERT_HOSTS:
        certs = lab.certs(host)
        assert stat.S_IMODE(certs.stat().st_mode) == 0o700
        for name in CERT_FILES:
            key = lab.ca_key(host) if name == "ca" else certs / f"{name}.key"
            assert stat.S_IMODE(key.stat().st_mode) == 0o600, name
            assert stat.S_IMODE((certs / f"{name}.crt").stat().st_mode) == 0o644, name
        # The pod mounts the certificate directory: the key that signs its certificates is elsewhere.
        assert not (certs / "ca.key").exists()
        assert stat.S_IMODE(lab.ca_key(host).parent.stat().st_mode) == 0o700
        assert lab.ca_key(host).parent.stat().st_uid == 0
        assert not list(certs.glob("*.csr"))
        conf = json.loads((certs / "appqos.conf").read_text())
        assert conf == {"apps": [], "sstbf": {"configured": False}, "pools": [], "power_profiles_expert_mode": True}


def _cert_state(lab, host):
    certs = lab.certs(host)

    def path(name, ext):
        return lab.ca_key(host) if (name, ext) == ("ca", "key") else certs / f"{name}.{ext}"

    return {f"{n}.{ext}": path(n, ext).stat().st_mtime_ns for n in CERT_FILES for ext in ("key", "crt")} | {
        f"{n}.crt#": hashlib.sha256((certs / f"{n}.crt").read_bytes()).hexdigest() for n in CERT_FILES
    }


def test_ca_key_left_in_the_mounted_directory_moves_out(lab):
    host = "np-intel"
    old, new = "/etc/certs/public/ca.key", "/etc/poweraware/pki/appqos/ca.key"
    key = lab.ca_key(host).read_bytes()
    certs = {n: (lab.certs(host) / f"{n}.crt").read_bytes() for n in CERT_FILES}
    # where earlier versions kept it
    _run_on_node(lab, host, f"sudo -n mv {new} {old}")
    result = lab.run(limit=host, tags=["appqos_certs"])
    assert result.rc == 0, str(result)
    assert not (lab.certs(host) / "ca.key").exists()
    assert lab.ca_key(host).read_bytes() == key
    assert stat.S_IMODE(lab.ca_key(host).stat().st_mode) == 0o600
    # the same CA: nothing it signed is re-issued
    assert {n: (lab.certs(host) / f"{n}.crt").read_bytes() for n in CERT_FILES} == certs

    # a different key in the old place is a conflict: refused, nothing touched
    _run_on_node(lab, host, f"sudo -n cp -p {new} {old} && sudo -n sh -c 'echo tampered >> {old}'")
    result = lab.run(limit=host, tags=["appqos_certs"])
    assert result.rc != 0 and "Two different App QoS CA keys exist" in result.stdout, str(result)
    assert lab.ca_key(host).read_bytes() == key and (lab.certs(host) / "ca.key").exists()
    _run_on_node(lab, host, f"sudo -n rm {old}")
    assert lab.run(limit=host, tags=["appqos_certs"]).changed == 0


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
    before = _cert_state(lab, host)  # unchanged by the fleet's second run (test_second_run_reports_no_change)

    # expiring within the renewal window (365 days left, a 400-day window for 800-day certificates):
    # server and client are re-issued, keys and the CA (1825 days) stay
    longer = {"appqos_certs_valid_days": 800, "appqos_certs_renew_days": 400}
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars=longer)
    assert result.rc == 0, str(result)
    after = _cert_state(lab, host)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"appqos.crt", "appqos.crt#", "client.crt", "client.crt#"}

    # a renewal window as long as the lifetime would re-issue on every run: refused up front
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_renew_days": 365})
    assert result.rc != 0 and "appqos_certs_renew_days='+365d' is not shorter than" in result.stdout, str(result)
    assert _cert_state(lab, host) == after

    # a changed parameter (server SANs) re-issues only the server certificate
    sans = ["DNS:localhost", "IP:127.0.0.1", "DNS:appqos.node.local"]
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans})
    assert result.rc == 0, str(result)
    again = _cert_state(lab, host)
    assert {k for k in after if after[k] != again[k]} == {"appqos.crt", "appqos.crt#"}
    assert lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans}).changed == 0

    # a missing file is recreated, nothing else
    _run_on_node(lab, host, "sudo -n rm /etc/certs/public/client.crt")
    result = lab.run(limit=host, tags=["appqos_certs"], extra_vars={"appqos_certs_server_sans": sans})
    assert result.rc == 0, str(result)
    final = _cert_state(lab, host)
    assert {k for k in again if again[k] != final[k]} == {"client.crt", "client.crt#"}
    # back to the default SANs for the tests that follow
    assert lab.run(limit=host, tags=["appqos_certs"]).rc == 0


def test_boot_unit_reapplies_after_reboot(lab):
    host = "np-intel"
    state_before = (lab.disk(host) / "var/lib/poweraware/cpu_power_state.json").read_text()
    # The kernel comes back at power-on values: the profile is gone until the boot unit runs.
    power_on = tree_digest(fake_sysfs.build_tree(lab.base / "power-on", "intel_pstate_active", cpus=8))
    assert tree_digest(lab.sys(host)) != power_on
    lab.power_cycle(host)
    boot_log = (lab.base / "logs" / f"node-{host}.log").read_text()
    assert "boot: Starting poweraware-cpu-power.service" in boot_log
    assert "boot: shared (shared): CPUs 4-7 changed" in boot_log, boot_log[-3000:]
    assert "boot: Finished poweraware-cpu-power.service" in boot_log
    assert lab.policy(host, "policy5", "energy_performance_preference") == "power"
    assert lab.policy(host, "policy2", "scaling_min_freq") == "3400000"
    # originals were recorded once and are not overwritten by the boot run
    assert (lab.disk(host) / "var/lib/poweraware/cpu_power_state.json").read_text() == state_before
    assert lab.run(limit=host).changed == 0


# The profiles of the lab's pools with idle states added, a node uncore range and a package power cap
# (intel_idle_uncore: 8 CPUs on 2 packages, states POLL/C1/C1E/C6 with exit latencies 0/2/10/133 us,
# uncore 800-2400 MHz per package, RAPL long_term max 125 W, time window 976 us-40 s).
OTHER_CONTROLS = {
    "cpu_power_profiles": {
        "performance": {
            "epp": "performance", "governor": "powersave", "max_pct": 100, "min_pct": 85,
            "cstates": {"max_latency_us": 20},
        },
        "shared": {
            "epp": "power", "governor": "powersave", "max_pct": 40, "min_pct": 0,
            "cstates": {"disable": ["C6", "C1E"]},
        },
    },
    "cpu_power_uncore": {"min_pct": 0, "max_pct": 50},
    "cpu_power_power_cap": {"watts": 100, "time_window_us": 1000000},
    "cpu_power_shared_profile": "shared",
}  # fmt: skip


def _other_controls(lab, host, root=None):
    cpu = (root or lab.sys(host)) / "devices/system/cpu"
    rapl = (root or lab.sys(host)) / "class/powercap"

    def read(path):
        return path.read_text().strip()

    return {
        "disabled": {n: [int(read(cpu / f"cpu{n}/cpuidle/state{k}/disable")) for k in range(4)] for n in range(8)},
        "uncore": {
            d.name: (read(d / "min_freq_khz"), read(d / "max_freq_khz"))
            for d in sorted((cpu / "intel_uncore_frequency").iterdir())
        },
        "cap": {
            z: (read(rapl / z / "constraint_0_power_limit_uw"), read(rapl / z / "constraint_0_time_window_us"))
            for z in ("intel-rapl:0", "intel-rapl:1")
        },
    }


APPLIED = {
    # reserved CPUs 0-1 keep every state; the performance pool (2-3) loses C6 (133 us > 20 us);
    # the shared CPUs (4-7) lose C1E and C6; POLL is never disabled
    "disabled": {0: [0, 0, 0, 0], 1: [0, 0, 0, 0], 2: [0, 0, 0, 1], 3: [0, 0, 0, 1]}
    | {n: [0, 0, 1, 1] for n in range(4, 8)},
    "uncore": {"package_00_die_00": ("800000", "1600000"), "package_01_die_00": ("800000", "1600000")},
    # the node's kernel encodes the time window as 2^Y * (1 + F/4) units of 976 us: 1000000 us is
    # stored as 2^10 units and reads back 999424, as on an Intel server (intel_rapl_common.c)
    "cap": {"intel-rapl:0": ("100000000", "999424"), "intel-rapl:1": ("100000000", "999424")},
}


def _idle_run(lab, **kwargs):
    """cpu_power on the np-idle host only (its own inventory: the lab's pools, no shared profile)."""
    return lab.run(inventory=lab.idle_inventory, tags=["cpu_power"], **kwargs)


def test_cstates_uncore_and_power_cap_over_ssh(lab):
    """Idle states per pool, the uncore range and a package cap on a worker reached over SSH: check mode
    first, apply, re-apply (changed=0), a refused cap that changes nothing, a power cycle after which
    the boot unit restores all three, and `state: absent` back to the node's power-on tree."""
    host = IDLE_HOST
    converged = lab.everything()
    result = _idle_run(lab, check=True, diff=True, extra_vars=OTHER_CONTROLS)
    assert result.rc == 0 and result.changed > 0, str(result)
    assert lab.everything() == converged

    result = _idle_run(lab, extra_vars=OTHER_CONTROLS)
    assert result.rc == 0, str(result)
    assert _other_controls(lab, host) == APPLIED
    assert (lab.sys(host) / "class/powercap/intel-rapl:0/enabled").read_text().strip() == "1"
    config = json.loads((lab.disk(host) / "etc/poweraware/cpu_power.json").read_text())
    node_level = [a for a in config["assignments"] if "uncore" in a or "power_cap" in a]
    assert len(node_level) == 1 and node_level[0]["uncore"] and node_level[0]["power_cap"], config
    applied = lab.everything()
    again = _idle_run(lab, extra_vars=OTHER_CONTROLS)
    assert again.rc == 0 and again.changed == 0, str(again)
    assert lab.everything() == applied

    over = {**OTHER_CONTROLS, "cpu_power_power_cap": {"watts": 400}}
    refused = _idle_run(lab, extra_vars=over)
    assert refused.rc != 0
    assert "power_cap.watts=400 is above intel-rapl:0 (package-0)'s long_term max_power_uw 125 W" in refused.stdout, (
        str(refused)
    )
    assert lab.everything() == applied

    lab.power_cycle(host)  # the kernel comes back at power-on values; the boot unit applies all three
    boot_log = (lab.base / "logs" / f"node-{host}.log").read_text()
    assert "boot: Finished poweraware-cpu-power.service" in boot_log, boot_log[-3000:]
    assert _other_controls(lab, host) == APPLIED
    assert _idle_run(lab, extra_vars=OTHER_CONTROLS).changed == 0

    result = lab.run(
        inventory=lab.idle_inventory, tags=["cpu_power"], extra_vars={**OTHER_CONTROLS, "cpu_power_state": "absent"}
    )
    assert result.rc == 0, str(result)
    assert tree_digest(lab.sys(host)) == lab.pristine_sys[host]
    assert not (lab.disk(host) / "etc/systemd/system/poweraware-cpu-power.service").exists()


LOCKED_HINT = "the RAPL power limit is locked by the BIOS/firmware"


def test_the_nodes_kernel_refuses_what_a_kernel_refuses_through_the_role_and_the_boot_unit(lab):
    """Each node's /sys is served by the kernel model through FUSE (lab/components/node_kernel.py):
    over SSH an EPP write under the performance governor is EBUSY and a read-only attribute EACCES
    for root; a firmware-locked RAPL limit fails the boot unit (its failure path: the node-level
    controls rolled back, the pools applied, the unit failed) and the role (the run's message names
    the lock, the node-level controls are rolled back), as on hardware."""
    host = IDLE_HOST
    policy = "/sys/devices/system/cpu/cpufreq/policy2"
    epp_at_power_on = lab.policy(host, "policy2", "energy_performance_preference")
    shown = _run_on_node(
        lab,
        host,
        f"echo performance | sudo -n tee {policy}/scaling_governor >/dev/null; "
        f"echo power | sudo -n tee {policy}/energy_performance_preference 2>&1 >/dev/null; echo epp=$?; "
        f"cat {policy}/energy_performance_preference; "
        f"echo 1 | sudo -n tee {policy}/cpuinfo_max_freq 2>&1 >/dev/null; echo read-only=$?; "
        "cat /sys/class/powercap/intel-rapl:0/energy_uj 2>&1 >/dev/null; echo energy-as-user=$?; "
        "echo 12x | sudo -n tee /sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw 2>&1 >/dev/null; "
        f"echo powersave | sudo -n tee {policy}/scaling_governor >/dev/null; "
        f"cat {policy}/energy_performance_preference",
    ).splitlines()
    assert shown == [
        f"tee: {policy}/energy_performance_preference: Device or resource busy",
        "epp=1",
        "performance",  # the performance governor forces EPP 0
        f"tee: {policy}/cpuinfo_max_freq: Permission denied",
        "read-only=1",
        "cat: '/sys/class/powercap/intel-rapl:0/energy_uj': Permission denied",  # cat quotes a name with ':'
        "energy-as-user=1",
        "tee: '/sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw': Invalid argument",
        epp_at_power_on,  # back under powersave, the kernel restores the EPP it had
    ], shown
    assert tree_digest(lab.sys(host)) == lab.pristine_sys[host]

    # converge on an unlocked kernel: the boot unit will re-apply the cap
    result = _idle_run(lab, extra_vars=OTHER_CONTROLS)
    assert result.rc == 0, str(result)
    assert _other_controls(lab, host) == APPLIED

    # a power cycle after which the firmware has locked the RAPL power limits (the MSR lock bit):
    # nothing in sysfs says so until a limit is written, which the kernel refuses (EACCES)
    lab.power_cycle(host, powercap="locked")
    power_on = _other_controls(
        lab, host, fake_sysfs.build_tree(lab.base / "locked-power-on", HOSTS[host][0], powercap="locked")
    )
    boot_log = (lab.base / "logs" / f"node-{host}.log").read_text()
    last_boot = boot_log.rsplit("boot: Starting poweraware-cpu-power.service", 1)[-1]
    assert LOCKED_HINT in last_boot, boot_log[-3000:]
    assert "poweraware-cpu-power.service: /usr/bin/python3 exited with status 1" in last_boot, boot_log[-3000:]
    assert "Finished poweraware-cpu-power.service" not in last_boot, boot_log[-3000:]
    # the pools' assignments were applied; the node-level one (uncore and cap) was rolled back
    assert _other_controls(lab, host) == {**power_on, "disabled": APPLIED["disabled"]}

    # a run that would also change the profiles (the shared pool keeps C1E): the locked limit is found
    # first (the node-level controls go before the profiles), so the refused run changes nothing
    before = lab.everything()
    kernel_before = tree_digest(lab.sys(host))
    journal = lab.disk(host) / "var/lib/poweraware"
    journal_before = tree_digest(journal)
    profiles = OTHER_CONTROLS["cpu_power_profiles"]
    changed_profiles = {**profiles, "shared": {**profiles["shared"], "cstates": {"disable": ["C6"]}}}
    refused = _idle_run(lab, extra_vars={**OTHER_CONTROLS, "cpu_power_profiles": changed_profiles})
    assert refused.rc != 0, str(refused)
    assert "EACCES" in refused.stdout and LOCKED_HINT in refused.stdout, str(refused)
    assert "pool node: writing" in refused.stdout, str(refused)  # the node-level assignment, before any pool
    assert _other_controls(lab, host) == {**power_on, "disabled": APPLIED["disabled"]}
    assert tree_digest(lab.sys(host)) == kernel_before
    # the boot files as they were; the journal rewritten (the run's write-ahead record) with what it held
    assert lab.everything()[host][1:5] == before[host][1:5]
    assert tree_digest(journal) == journal_before

    lab.power_cycle(host)  # the firmware unlocked again: the boot unit applies all three
    assert _other_controls(lab, host) == APPLIED
    result = _idle_run(lab, extra_vars={**OTHER_CONTROLS, "cpu_power_state": "absent"})
    assert result.rc == 0, str(result)
    assert tree_digest(lab.sys(host)) == lab.pristine_sys[host]


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
            {"cpu_power_reserved_cpus": "0-3"},
            "cpu_power_reserved_cpus (0,1,2,3) does not match the kubelet reserved CPUs (0,1, from "
            "/var/lib/kubelet/config.yaml)",
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
        # the node refuses the second pool (intel_pstate has no ondemand governor): the first pool,
        # which would change its CPUs, is not applied either (issue 45 item 9)
        (
            {
                "cpu_power_profiles": {
                    "balance-power": {"epp": "balance_power", "governor": "powersave", "max_pct": 50, "min_pct": 35},
                    "eco": {"epp": "power", "governor": "ondemand", "max_pct": 40, "min_pct": 0},
                    "shared": {"epp": "power", "governor": "powersave", "max_pct": 40, "min_pct": 0},
                },
                "cpu_power_pools": [
                    {"name": "a", "cpus": "2-3", "profile": "balance-power"},
                    {"name": "b", "cpus": "4-5", "profile": "eco"},
                ],
            },
            "invalid request, nothing was changed: pool b (profile eco): governor 'ondemand' is not available for "
            "CPU 4 (policy4, driver intel_pstate); scaling_available_governors: performance powersave",
        ),
    ],
    ids=[
        "overlapping-pools",
        "kubelet-mismatch",
        "pool-on-reserved",
        "unknown-profile",
        "cpu-not-present",
        "second-pool-refused-by-the-node",
    ],
)
def test_bad_inventory_fails_before_changing_anything(lab, extra, message):
    before = lab.everything()
    result = lab.run(limit="np-intel", tags=["cpu_power"], extra_vars=extra)
    assert result.rc != 0
    assert message in result.stdout, str(result)
    assert lab.everything() == before


def test_reserved_cpus_checked_against_kubelet_config(lab):
    host = "np-intel"
    config = "/var/lib/kubelet/config.yaml"
    original = (lab.disk(host) / config.lstrip("/")).read_text()
    try:
        _write_on_node(lab, host, config, original.replace("reservedSystemCPUs: 0-1", "reservedSystemCPUs: 0-2"))
        before = lab.everything()
        result = lab.run(limit=host, tags=["cpu_power"], extra_vars={"cpu_power_reserved_cpus": "0-1"})
        assert result.rc != 0
        assert f"does not match the kubelet reserved CPUs (0,1,2, from {config})" in result.stdout, str(result)
        assert lab.everything() == before
        # Taken from the kubelet (the default): CPU 2 is reserved now, so the pool on 2-3 is refused.
        result = lab.run(limit=host, tags=["cpu_power"])
        assert result.rc != 0
        assert "pool lab-exclusive overlaps the reserved CPUs on 2" in result.stdout, str(result)
        assert lab.everything() == before
    finally:
        _write_on_node(lab, host, config, original)
    result = lab.run(limit=host, tags=["cpu_power"])
    assert result.rc == 0, str(result)
    assert result.changed == 0, str(result)


def _run_on_node(lab, host: str, command: str, stdin: str | None = None) -> str:
    """Run a shell command on the node over SSH, as an operator would."""
    node = next(n for n in lab.node_list if n.name == host)
    ssh = lab.hosts.ssh_dir
    argv = ["ssh", "-i", str(ssh / "id_ed25519"), "-o", f"UserKnownHostsFile={ssh / 'known_hosts'}"]
    argv += ["-o", "BatchMode=yes", f"{nodes.LOGIN_USER}@{node.address}", command]
    return subprocess.run(argv, input=stdin, text=True, check=True, capture_output=True, timeout=60).stdout


def _write_on_node(lab, host: str, path: str, text: str) -> None:
    _run_on_node(lab, host, f"sudo -n tee {path} >/dev/null", text)


def test_cpus_no_pool_manages_now_go_back_to_their_originals(lab):
    """Pools removed from the inventory and the shared profile switched off: the next run restores the
    CPUs they managed (what the journal recorded), instead of leaving them capped for good with the run
    saying nothing (issue 45 item 13). The old role restored only CPUs that had become reserved."""
    host = "np-amd"
    if tree_digest(lab.sys(host)) == lab.pristine_sys[host]:  # run alone: apply the inventory's pools first
        assert lab.run(limit=host, tags=["cpu_power"]).rc == 0
    assert tree_digest(lab.sys(host)) != lab.pristine_sys[host]
    result = lab.run(
        limit=host, tags=["cpu_power"], extra_vars={"cpu_power_pools": [], "cpu_power_shared_profile": None}
    )
    assert result.rc == 0, str(result)
    assert tree_digest(lab.sys(host)) == lab.pristine_sys[host]
    again = lab.run(
        limit=host, tags=["cpu_power"], extra_vars={"cpu_power_pools": [], "cpu_power_shared_profile": None}
    )
    assert again.rc == 0 and again.changed == 0, str(again)


def test_absent_restores_originals(lab):
    result = lab.run(tags=["cpu_power"], extra_vars={"cpu_power_state": "absent"})
    assert result.rc == 0, str(result)
    for host in FLEET:
        if host != "np-intel":  # restored values are written again: compare contents, not mtimes
            assert tree_digest(lab.sys(host)) == lab.pristine_sys[host], host
        assert not (lab.disk(host) / "etc/systemd/system/poweraware-cpu-power.service").exists()
        assert not (lab.disk(host) / "etc/systemd/system/multi-user.target.wants/poweraware-cpu-power.service").exists()
    # np-intel was "rebooted" (rebuilt) above, so compare values rather than timestamps
    for cpu in range(8):
        assert lab.policy("np-intel", f"policy{cpu}", "energy_performance_preference") == "balance_performance"
        assert lab.policy("np-intel", f"policy{cpu}", "scaling_min_freq") == "800000"
        assert lab.policy("np-intel", f"policy{cpu}", "scaling_max_freq") == "3900000"
    again = lab.run(tags=["cpu_power"], extra_vars={"cpu_power_state": "absent"})
    assert again.rc == 0, str(again)
    assert again.changed == 0, str(again)
