# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 2 of the node power library: topology and discovery (CPUs, cpufreq policies, facts).

Facts this follows (Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst):

* ``cpuN/cpufreq`` links to ``cpufreq/policyX``; CPUs in ``related_cpus`` share one policy, so
  every policy is written once. Frequencies are kHz in sysfs.
* EPP reads may return a raw integer: a value with no name on this CPU (``normalize_epp``).
* Offline CPUs are skipped and reported; ``cpu0`` may have no ``online`` file; CPUs are
  enumerated from the ``present`` / ``online`` cpulists.

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import os

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist, parse_cpulist
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import discover_rapl_zones
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import (
    CPU_DIR,
    POWERCAP_DIR,
    PowerError,
    khz_to_mhz,
    read_optional,
)

MIN = "scaling_min_freq"
MAX = "scaling_max_freq"
GOV = "scaling_governor"
EPP = "energy_performance_preference"
MANAGED_ATTRS = (MIN, MAX, GOV, EPP)

# Drivers whose EPP is refused (EBUSY) while the governor is "performance" (active mode).
ACTIVE_EPP_DRIVERS = ("intel_pstate", "amd-pstate-epp")


def normalize_epp(raw):
    """An EPP as the kernel shows it: a name, or a raw register value (a number).

    The drivers show a number exactly when the register value matches none of the CPU model's named
    values (intel_pstate.c show_energy_performance_preference, with the per-model table
    intel_epp_default: balance_performance is 128 on some models, 32 or 102 on others), so a number
    never names a preference, and no fixed table (none per driver either) may turn one into a name."""
    return None if raw is None else raw.strip()


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


def read_policy(acc, rel, name):
    """Read one cpufreq policy directory into a plain dict (sysfs strings, kHz)."""

    def opt(attr):
        return read_optional(acc, f"{rel}/{attr}")

    def cpus(attr):
        text = opt(attr)
        return parse_cpulist(text.replace(" ", ",")) if text else []

    pol = {
        "name": name,
        "path": rel,
        "related_cpus": cpus("related_cpus"),
        "affected_cpus": cpus("affected_cpus"),
        "driver": opt("scaling_driver"),
        "cpuinfo_min_freq": opt("cpuinfo_min_freq"),
        "cpuinfo_max_freq": opt("cpuinfo_max_freq"),
        "base_frequency": opt("base_frequency"),
        "available_governors": (opt("scaling_available_governors") or "").split(),
        "has_epp": acc.exists(f"{rel}/{EPP}"),
        "available_epp": (opt("energy_performance_available_preferences") or "").split(),
        "values": {},
    }
    for attr in MANAGED_ATTRS:
        if attr == EPP and not pol["has_epp"]:
            continue
        pol["values"][attr] = opt(attr)
    return pol


class Topology:
    """CPUs, policies and driver of one machine, read once per module run."""

    def __init__(self, acc):
        self.acc = acc
        present_text = read_optional(acc, f"{CPU_DIR}/present")
        if present_text is None:
            raise PowerError(
                f"{acc.path(CPU_DIR + '/present')} is missing: this is not a Linux sysfs tree (check sysfs_root)"
            )
        self.present = parse_cpulist(present_text)
        online_text = read_optional(acc, f"{CPU_DIR}/online")
        self.online = parse_cpulist(online_text) if online_text is not None else list(self.present)
        self.offline = [c for c in self.present if c not in self.online]
        self.intel_pstate_status = read_optional(acc, f"{CPU_DIR}/intel_pstate/status")
        self.amd_pstate_status = read_optional(acc, f"{CPU_DIR}/amd_pstate/status")
        self.policies = {}
        self.cpu_policy = {}
        for cpu in self.online:
            link = f"{CPU_DIR}/cpu{cpu}/cpufreq"
            if not acc.exists(link):
                continue
            rel = acc.resolve(link)
            name = os.path.basename(rel)
            if name == "cpufreq":  # pre-4.7 layout: a real directory under the owner CPU
                name = os.path.basename(os.path.dirname(rel))
            if name not in self.policies:
                self.policies[name] = read_policy(acc, rel, name)
            self.cpu_policy[cpu] = name
        drivers = sorted({p["driver"] for p in self.policies.values() if p["driver"]})
        if not drivers:
            drivers = [read_optional(acc, f"{CPU_DIR}/cpufreq/policy0/scaling_driver") or ""]
        self.driver = drivers[0] or None

    @property
    def epp_active_mode(self):
        return self.driver in ACTIVE_EPP_DRIVERS

    def policy_order(self, names):
        """Policies sorted by their first CPU (policy2 before policy10)."""
        return sorted(names, key=lambda n: (min(self.policies[n]["related_cpus"] or [0]), n))


def read_rapl(acc):
    """RAPL package zones (psys is skipped: it is the platform, not a package).

    Discovery and naming are ``power_zones.discover_rapl_zones``, shared with the collectd plugin.
    """
    if not acc.isdir(POWERCAP_DIR):
        return {"available": False, "zones": [], "skipped": []}
    found, skipped = discover_rapl_zones(acc, POWERCAP_DIR)
    zones = []
    for zone in found:
        rel = zone["path"]
        tdp_uw = read_optional(acc, f"{rel}/constraint_0_max_power_uw")
        max_range = read_optional(acc, f"{rel}/max_energy_range_uj")
        try:
            acc.read(f"{rel}/energy_uj")
            readable = True
        except OSError:
            readable = False
        zones.append(
            {
                "zone": zone["zone"],
                "name": zone["name"],
                "package": zone["package"],
                "die": zone["die"],
                "tdp_w": round(int(tdp_uw) / 1e6, 3) if tdp_uw and tdp_uw.isdigit() else None,
                "max_energy_range_uj": int(max_range) if max_range and max_range.isdigit() else None,
                "energy_readable": readable,
            }
        )
    return {"available": bool(zones), "zones": zones, "skipped": skipped}


def _policy_settings(topo, pol):
    """Limits and current settings of one cpufreq policy, as reported per CPU and per policy."""
    return {
        "cpuinfo_min_mhz": khz_to_mhz(pol["cpuinfo_min_freq"]),
        "cpuinfo_max_mhz": khz_to_mhz(pol["cpuinfo_max_freq"]),
        "base_mhz": khz_to_mhz(pol["base_frequency"]),
        "scaling_min_mhz": khz_to_mhz(pol["values"].get(MIN)),
        "scaling_max_mhz": khz_to_mhz(pol["values"].get(MAX)),
        "governor": pol["values"].get(GOV),
        "epp": normalize_epp(pol["values"].get(EPP)),
    }


def _cpu_entries(topo):
    """Per-CPU entries, and the CPUs grouped by identical (cpuinfo min, max, base) limits."""
    cpus = {}
    groups = {}
    for cpu in topo.present:
        entry = {"online": cpu in topo.online, "policy": topo.cpu_policy.get(cpu)}
        pol = topo.policies.get(entry["policy"]) if entry["policy"] else None
        if pol:
            entry.update(_policy_settings(topo, pol))
            key = (entry["cpuinfo_min_mhz"], entry["cpuinfo_max_mhz"], entry["base_mhz"])
            groups.setdefault(key, []).append(cpu)
        cpus[str(cpu)] = entry
    limit_groups = [
        {
            "cpus": members,
            "cpulist": format_cpulist(members),
            "cpuinfo_min_mhz": key[0],
            "cpuinfo_max_mhz": key[1],
            "base_mhz": key[2],
        }
        for key, members in sorted(groups.items(), key=lambda kv: kv[1][0])
    ]
    return cpus, limit_groups


def _policy_entries(topo):
    policies = []
    for name in topo.policy_order(topo.policies):
        pol = topo.policies[name]
        policies.append(
            {
                "name": name,
                "cpus": format_cpulist(pol["related_cpus"]),
                "online_cpus": format_cpulist(c for c in pol["related_cpus"] if c in topo.online),
                "shared": len(pol["related_cpus"]) > 1,
                **_policy_settings(topo, pol),
                "available_governors": pol["available_governors"],
                "epp_raw": pol["values"].get(EPP),
                "available_epp": pol["available_epp"],
            }
        )
    return policies


def _cpufreq_messages(topo):
    messages = []
    if not topo.policies:
        messages.append(
            "no cpufreq policy found for any online CPU: the kernel exposes no CPU frequency scaling "
            "(no driver loaded, intel_pstate=disable, or a virtual machine); cpu_power_profile cannot apply profiles"
        )
    if topo.offline:
        messages.append(f"CPUs {format_cpulist(topo.offline)} are offline and are skipped by cpu_power_profile")
    return messages


def gather_cpufreq_info(acc, topo=None):
    """The cpufreq and RAPL part of the cpu_power_info facts."""
    topo = topo or Topology(acc)
    cpus, limit_groups = _cpu_entries(topo)
    available_epp = []
    for pol in topo.policies.values():
        for value in pol["available_epp"]:
            if value not in available_epp:
                available_epp.append(value)
    hwp = None
    if topo.driver in ("intel_pstate", "intel_cpufreq"):
        hwp = any(p["has_epp"] for p in topo.policies.values()) or acc.exists(
            f"{CPU_DIR}/intel_pstate/hwp_dynamic_boost"
        )
    return {
        "cpufreq_available": bool(topo.policies),
        "driver": topo.driver,
        "intel_pstate_status": topo.intel_pstate_status,
        "amd_pstate_status": topo.amd_pstate_status,
        "hwp": hwp,
        "epp_supported": any(p["has_epp"] for p in topo.policies.values()),
        "epp_refused_under_performance": topo.epp_active_mode,
        "present": format_cpulist(topo.present),
        "online": format_cpulist(topo.online),
        "offline": format_cpulist(topo.offline),
        "available_governors": sorted({g for p in topo.policies.values() for g in p["available_governors"]}),
        "available_epp": available_epp,
        "policies": _policy_entries(topo),
        "cpus": cpus,
        "limit_groups": limit_groups,
        "rapl": read_rapl(acc),
        "messages": _cpufreq_messages(topo),
    }
