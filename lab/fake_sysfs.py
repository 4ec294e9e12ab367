"""Build realistic fake sysfs trees (cpufreq, cpuidle, uncore, powercap/RAPL, hwmon) for the lab and tests.

``build_tree(root, scenario, **shape)`` writes a plain directory tree shaped like
``/sys`` on a machine with the given CPU power driver. A plain tree cannot enforce the kernel's
rules (EINVAL, EBUSY, clamping, shared policies); the kernel model (lab/fake_kernel.py) does, on top
of it: the unit tests inject it as the sysfs accessor, and each lab node sees its tree through it
(served by FUSE, lab/components/node_kernel.py) at its ``/sys`` paths.

Layout written (paths relative to ``root``)::

    devices/system/cpu/{present,online,possible,kernel_max}
    devices/system/cpu/cpuN/online              (not for cpu0, as on most x86 machines)
    devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id,core_cpus_list,
        thread_siblings_list,package_cpus_list,core_siblings_list,die_cpus_list}   (online CPUs only)
    devices/system/node/{online,possible,has_cpu,has_memory,has_normal_memory}
    devices/system/node/nodeP/cpulist, nodeP/cpuN -> ../../cpu/cpuN   (one NUMA node per package)
    devices/system/cpu/cpuN/cpufreq -> ../cpufreq/policyX   (online CPUs only)
    devices/system/cpu/cpufreq/policyX/...      (scaling_*, cpuinfo_*, related_cpus, EPP ...)
    devices/system/cpu/intel_pstate/{status,no_turbo,...} | devices/system/cpu/amd_pstate/status
    devices/virtual/powercap/intel-rapl/intel-rapl:N/{name,energy_uj,max_energy_range_uj,constraint_0_*}
        (+ psys, and the dram sub-zone intel-rapl:N:0 inside its package)
    class/powercap/{intel-rapl,intel-rapl:N,intel-rapl:N:0} -> ../../devices/virtual/powercap/...

and, for the scenarios that ask for them (shape keys ``idle``, ``uncore``, ``powercap``, ``hwmon``)::

    devices/system/cpu/cpuidle/{current_driver,current_governor,...}
    devices/system/cpu/cpuN/cpuidle/stateK/{name,desc,latency,residency,disable,...}  (online CPUs only)
    devices/system/cpu/intel_uncore_frequency/package_XX_die_YY/...   (legacy)
    devices/system/cpu/intel_uncore_frequency/uncoreNN/...            (TPMI, + package_XX_die_00)
    class/powercap/intel-rapl:N/constraint_{0,1}_*  (locked: the kernel model refuses writes)
    class/hwmon/hwmonN -> ../../devices/<parent>/hwmon/hwmonN/{name,energyN_input,energyN_label |
                                                             powerN_input,powerN_label}

The shape key ``registration_order`` (package ids, default ascending) models a boot on which the
drivers registered the packages in another order: RAPL zone and TPMI ``uncoreNN`` numbers follow it
(only a zone's ``name`` and a domain's ``package_id``/``domain_id`` name the package).

CPUs are laid out as Linux numbers them on a multi-package x86 server: the first thread of every
core, package after package (``cpus / packages / threads_per_core`` cores each, ``core_id`` counted
within its package), then the second threads in the same order (cpuN and cpu(N + cores) are
siblings). The shape key ``threads_per_core`` (default 1: one thread per core, as every scenario
here) gives SMT. Only online CPUs have a ``topology`` directory and appear in the sibling lists
(drivers/base/topology.c: the attributes are added when a CPU comes online and removed when it goes);
the masks (``core_cpus``, ``package_cpus`` ...), ``cluster_*`` and ``ppin`` are not written. Each
package is a NUMA node, its directory with what drivers/base/node.c puts there for CPUs (``cpulist``,
a ``cpuN`` link per present CPU; no ``meminfo`` or ``distance``): kubelet's CPU manager reads them
as cAdvisor does (lab/kubelet/cpu_manager.py).

Command line: ``python lab/fake_sysfs.py ROOT SCENARIO [--cpus N] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys

MARKER = ".poweraware-fake-sysfs.json"


def built(root) -> tuple | None:
    """(inode, mtime) of the tree's marker: new whenever the tree is rebuilt (a power cycle); None
    while it is being built or where there is none. The node's kernel and the power meter compare it."""
    try:
        info = os.stat(os.path.join(root, MARKER))
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns)


EPP_PREFS = "default performance balance_performance balance_power power"
GENERIC_GOVERNORS = "conservative ondemand userspace powersave performance schedutil"

# scenario -> defaults for the shape keyword arguments
SCENARIOS = {
    "intel_pstate_active": {"cpus": 4, "offline": "", "driver": "intel_pstate"},
    "intel_cpufreq_passive": {"cpus": 4, "offline": "", "driver": "intel_cpufreq"},
    "acpi_cpufreq_shared": {"cpus": 8, "offline": "", "driver": "acpi-cpufreq", "policy_size": 2},
    "amd_pstate_epp": {"cpus": 8, "offline": "", "driver": "amd-pstate-epp"},
    "hybrid": {"cpus": 8, "offline": "", "driver": "intel_pstate", "p_cores": 4},
    "offline_cpus": {"cpus": 8, "offline": "6-7", "driver": "intel_pstate"},
    "no_cpufreq": {"cpus": 4, "offline": "", "driver": None},
    # C-states, uncore, power cap and power-reading flavours (docs/node-power.md, "The other controls")
    "intel_idle_uncore": {
        "cpus": 8, "offline": "", "driver": "intel_pstate", "packages": 2,
        "idle": "intel_idle", "uncore": "legacy", "powercap": "rapl_pl2",
    },
    "acpi_idle": {
        "cpus": 8, "offline": "7", "driver": "acpi-cpufreq", "policy_size": 2,
        "idle": "acpi_idle", "powercap": "rapl_pl2",
    },
    "uncore_tpmi": {
        "cpus": 8, "offline": "", "driver": "intel_pstate", "packages": 2,
        "idle": "intel_idle_spr", "uncore": "tpmi", "powercap": "rapl_pl2",
    },
    # more than ten packages (a 16-socket node): powercap numbers its zones in hex (intel-rapl:a is
    # the 11th), TPMI uncore domains run to uncore31
    "many_packages": {
        "cpus": 16, "offline": "", "driver": "intel_pstate", "packages": 16,
        "idle": "intel_idle_spr", "uncore": "tpmi", "powercap": "rapl_pl2",
    },
    "amd_no_uncore": {
        "cpus": 8, "offline": "", "driver": "amd-pstate-epp", "idle": "acpi_idle_amd", "powercap": "energy_only",
    },
    "powercap_locked": {
        "cpus": 4, "offline": "", "driver": "intel_pstate", "idle": "intel_idle", "uncore": "legacy",
        "powercap": "locked",
    },
    "hwmon_only": {
        "cpus": 4, "offline": "", "driver": None, "idle": "psci_idle", "powercap": None, "hwmon": "platform",
    },
    # an ARM64 server: CPPC frequency control, PSCI idle, no RAPL, the firmware's SCMI sensors
    "arm64_cppc": {
        "cpus": 8, "offline": "", "driver": "cppc_cpufreq", "packages": 2,
        "idle": "psci_idle", "powercap": None, "hwmon": "scmi",
    },
    "amd_energy_hwmon": {
        "cpus": 4, "offline": "", "driver": "acpi-cpufreq", "policy_size": 1, "packages": 2,
        "idle": "acpi_idle_amd", "powercap": None, "hwmon": "amd_energy",
    },
}  # fmt: skip

# cpuidle states per driver: (name, desc, exit latency us, target residency us). intel_idle tables
# from drivers/idle/intel_idle.c (skx_cstates, spr_cstates); acpi_idle latencies come from the
# firmware's _CST (typical values); state0 of the x86 drivers is the poll state
# (drivers/cpuidle/poll_state.c); psci_idle state0 is WFI (drivers/cpuidle/cpuidle-psci.c).
IDLE_STATES = {
    "intel_idle": [
        ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 2, 2),
        ("C1E", "MWAIT 0x01", 10, 20), ("C6", "MWAIT 0x20", 133, 600),
    ],
    "intel_idle_spr": [
        ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 1, 1),
        ("C1E", "MWAIT 0x01", 2, 4), ("C6", "MWAIT 0x20", 290, 800),
    ],
    "acpi_idle": [
        ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 1),
        ("C2", "ACPI FFH MWAIT 0x10", 41, 82), ("C3", "ACPI FFH MWAIT 0x20", 133, 266),
    ],
    "acpi_idle_amd": [
        ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2),
        ("C2", "ACPI IOPORT 0x814", 18, 36), ("C3", "ACPI IOPORT 0x815", 350, 700),
    ],
    "psci_idle": [("WFI", "ARM WFI", 1, 1), ("cpu-sleep", "cpu-sleep", 150, 2000),
                  ("cluster-sleep", "cluster-sleep", 800, 5000)],
}  # fmt: skip
IDLE_DRIVER = {"intel_idle_spr": "intel_idle", "acpi_idle_amd": "acpi_idle"}
# uncore ranges in kHz per domain: (initial_min, initial_max)
UNCORE_LEGACY = (800000, 2400000)
UNCORE_TPMI = [(800000, 2200000), (800000, 2500000)]  # compute and IO domains of each package

# per-driver CPU limits in kHz: (cpuinfo_min, cpuinfo_max, base or None)
LIMITS = {
    "intel_pstate": (800000, 3900000, 2100000),
    "intel_cpufreq": (800000, 3900000, 2100000),
    "acpi-cpufreq": (1200000, 2601000, None),
    "amd-pstate-epp": (400000, 3700000, None),
    # drivers/cpufreq/cppc_cpufreq.c: lowest and highest performance from the firmware's _CPC,
    # no frequency table (any value within the limits is kept), no EPP, the generic governors
    "cppc_cpufreq": (1000000, 3000000, None),
    "hybrid_p": (800000, 5000000, 2500000),
    "hybrid_e": (800000, 3800000, 1800000),
}


def _cpulist(cpus):
    cpus = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpulist(text):
    """A cpulist as the kernel writes it ("0-3,8"; "" for none) as CPU numbers (also lab/fake_procfs.py)."""
    out = []
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        lo, _sep, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_layout(cpus, packages=1, threads_per_core=1):
    """CPU number -> (package, core_id within the package, thread) in Linux's x86 enumeration: the
    first thread of every core, package after package, then the second threads in the same order.
    Cores that do not divide evenly leave the last packages shorter (a tree with more RAPL packages
    than cores has CPU-less ones)."""
    cores = cpus // threads_per_core
    if cores * threads_per_core != cpus:
        raise ValueError(f"{cpus} CPUs cannot make cores of {threads_per_core} threads")
    per_package = -(-cores // packages)
    return {
        thread * cores + core: (core // per_package, core % per_package, thread)
        for thread in range(threads_per_core)
        for core in range(cores)
    }


def _topology(root: pathlib.Path, layout, present, online):
    """Each online CPU's ``topology`` attributes (drivers/base/topology.c; a die per package) and a
    NUMA node per package with its CPUs (drivers/base/node.c: a link for every present CPU, and its
    ``cpulist`` of the online ones)."""
    cpu_dir = root / "devices" / "system" / "cpu"

    def siblings(cpu, same):
        return _cpulist(c for c in online if same(layout[c], layout[cpu]))

    for cpu in online:
        package, core, _thread = layout[cpu]
        tdir = cpu_dir / f"cpu{cpu}" / "topology"
        core_cpus = siblings(cpu, lambda a, b: a[:2] == b[:2])
        package_cpus = siblings(cpu, lambda a, b: a[0] == b[0])
        for name, value in (
            ("physical_package_id", package),
            ("die_id", 0),
            ("core_id", core),
            ("core_cpus_list", core_cpus),
            ("thread_siblings_list", core_cpus),
            ("package_cpus_list", package_cpus),
            ("core_siblings_list", package_cpus),
            ("die_cpus_list", package_cpus),
        ):
            _put(tdir / name, value, 0o444)
    nodes = sorted({layout[c][0] for c in present})
    node_dir = root / "devices" / "system" / "node"
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        _put(node_dir / name, _cpulist(nodes), 0o444)
    for node in nodes:
        _put(node_dir / f"node{node}" / "cpulist", _cpulist(c for c in online if layout[c][0] == node), 0o444)
        for cpu in present:
            if layout[cpu][0] == node:
                os.symlink(f"../../cpu/cpu{cpu}", node_dir / f"node{node}" / f"cpu{cpu}")


def _put(path: pathlib.Path, value, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")
    os.chmod(path, mode)


def _policy(pdir: pathlib.Path, driver, related, online, limits, governor, epp):
    lo, hi, base = limits
    _put(pdir / "related_cpus", " ".join(str(c) for c in related))
    _put(pdir / "affected_cpus", " ".join(str(c) for c in related if c in online))
    _put(pdir / "cpuinfo_min_freq", lo, 0o444)
    _put(pdir / "cpuinfo_max_freq", hi, 0o444)
    _put(pdir / "cpuinfo_transition_latency", 0 if driver in ("intel_pstate", "amd-pstate-epp") else 10000, 0o444)
    _put(pdir / "scaling_min_freq", lo)
    _put(pdir / "scaling_max_freq", hi)
    _put(pdir / "scaling_cur_freq", base or lo, 0o444)
    _put(pdir / "scaling_driver", driver, 0o444)
    _put(pdir / "scaling_governor", governor)
    if driver in ("intel_pstate", "amd-pstate-epp"):
        _put(pdir / "scaling_available_governors", "performance powersave", 0o444)
        _put(pdir / "energy_performance_preference", epp)
        _put(pdir / "energy_performance_available_preferences", EPP_PREFS, 0o444)
    else:
        _put(pdir / "scaling_available_governors", GENERIC_GOVERNORS, 0o444)
        _put(pdir / "scaling_setspeed", "<unsupported>")
    if base:
        _put(pdir / "base_frequency", base, 0o444)
    if driver == "acpi-cpufreq":
        # a turbo bin (max + 1 MHz, as acpi-cpufreq reports it) above 100 MHz P-state steps down to min
        steps = [hi] + list(range((hi // 100000) * 100000 - 100000, lo - 1, -100000))
        _put(pdir / "scaling_available_frequencies", " ".join(str(s) for s in steps), 0o444)


def _cpuidle(cpu_dir: pathlib.Path, kind, online):
    _put(cpu_dir / "cpuidle" / "current_driver", IDLE_DRIVER.get(kind, kind), 0o444)
    _put(cpu_dir / "cpuidle" / "current_governor", "menu")
    _put(cpu_dir / "cpuidle" / "current_governor_ro", "menu", 0o444)
    _put(cpu_dir / "cpuidle" / "available_governors", "ladder menu teo", 0o444)
    for cpu in online:  # a CPU that was never online has no cpuidle device
        for index, (name, desc, latency, residency) in enumerate(IDLE_STATES[kind]):
            sdir = cpu_dir / f"cpu{cpu}" / "cpuidle" / f"state{index}"
            _put(sdir / "name", name, 0o444)
            _put(sdir / "desc", desc, 0o444)
            _put(sdir / "latency", latency, 0o444)
            _put(sdir / "residency", residency, 0o444)
            _put(sdir / "power", 4294967295, 0o444)
            _put(sdir / "usage", 1000 * (index + 1), 0o444)
            _put(sdir / "time", 50000 * (index + 1), 0o444)
            _put(sdir / "disable", 0)
            _put(sdir / "default_status", "enabled", 0o444)


def _uncore_dir(udir: pathlib.Path, lo, hi, ids=None):
    _put(udir / "initial_min_freq_khz", lo, 0o444)
    _put(udir / "initial_max_freq_khz", hi, 0o444)
    _put(udir / "min_freq_khz", lo)
    _put(udir / "max_freq_khz", hi)
    _put(udir / "current_freq_khz", (lo + hi) // 200000 * 100000, 0o400)
    for key, value in (ids or {}).items():
        _put(udir / key, value, 0o400)


def _registration(packages, order):
    """The package ids in the order the drivers registered them on this boot (default ascending).
    powercap zone ids (powercap_sys.c, idr_alloc) and TPMI uncoreNN ids (uncore-frequency-common.c,
    ida_alloc) are handed out in that order, which follows probing and CPU onlining and may differ
    from one boot to the next: only a zone's ``name`` and a domain's ``package_id``/``domain_id``
    say which package it is."""
    if order is None:
        return list(range(packages))
    order = [int(p) for p in order]
    if sorted(order) != list(range(packages)):
        raise ValueError(f"registration_order {order} must list each of the {packages} package ids once")
    return order


def _uncore(cpu_dir: pathlib.Path, kind, packages, order=None):
    base = cpu_dir / "intel_uncore_frequency"
    index = 0
    for pkg in _registration(packages, order):
        if kind == "legacy":
            _uncore_dir(base / f"package_{pkg:02d}_die_00", *UNCORE_LEGACY)
            continue
        # TPMI: a package-level directory (writes apply to every cluster) and one per power domain
        _uncore_dir(base / f"package_{pkg:02d}_die_00", UNCORE_TPMI[0][0], max(hi for _lo, hi in UNCORE_TPMI))
        for domain, (lo, hi) in enumerate(UNCORE_TPMI):
            ids = {"package_id": pkg, "domain_id": domain, "fabric_cluster_id": 0}
            _uncore_dir(base / f"uncore{index:02d}", lo, hi, ids)
            index += 1


def _hwmon_chip(root: pathlib.Path, index, device, name):
    """A hwmon chip as drivers/hwmon/hwmon.c registers it: a ``hwmonN`` device below its parent
    device, and ``class/hwmon/hwmonN`` a symlink to it (N in registration order)."""
    chip = root / "devices" / device / "hwmon" / f"hwmon{index}"
    _put(chip / "name", name, 0o444)
    link = root / "class" / "hwmon" / f"hwmon{index}"
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(chip, link.parent), link)
    return chip


def _hwmon(root: pathlib.Path, kind, packages, cpus, energy_mode):
    if kind == "amd_energy":  # drivers/hwmon/amd_energy.c: Ecore%03u per core, then Esocket%u per socket
        base = _hwmon_chip(root, 0, "platform/amd_energy.0", "amd_energy")
        labels = [f"Ecore{c:03d}" for c in range(cpus)] + [f"Esocket{p}" for p in range(packages)]
        for channel, label in enumerate(labels, start=1):
            _put(base / f"energy{channel}_input", 5000000 * channel, energy_mode)
            _put(base / f"energy{channel}_label", label, 0o444)
        return
    if kind == "scmi":
        # drivers/hwmon/scmi-hwmon.c: one chip for every sensor the firmware describes, channels in
        # the firmware's order, labels its sensor names (here the per-socket rails of an ARM server:
        # the CPU sensor of a socket is not at channel 1, and socket 1's are in the same chip)
        base = _hwmon_chip(root, 0, "platform/firmware:scmi/scmi_dev.7", "scmi_sensors")
        for pkg in range(packages):
            _put(base / f"power{2 * pkg + 1}_input", 21500000 + 1000000 * pkg, 0o444)
            _put(base / f"power{2 * pkg + 1}_label", f"SysIO Power Socket {pkg}", 0o444)
            _put(base / f"power{2 * pkg + 2}_input", 61250000 + 2000000 * pkg, 0o444)
            _put(base / f"power{2 * pkg + 2}_label", f"CPU Power Socket {pkg}", 0o444)
            _put(base / f"temp{pkg + 1}_input", 40000 + 1000 * pkg, 0o444)
            _put(base / f"temp{pkg + 1}_label", f"SoC Temperature Socket {pkg}", 0o444)
        return
    # a platform driver (drivers/hwmon/xgene-hwmon.c): one chip per SoC, SoC power in microwatts
    for pkg in range(packages):
        base = _hwmon_chip(root, pkg, f"platform/APMC0D29:{pkg:02d}", "apm_xgene")
        _put(base / "power1_input", 14760000 + 1000000 * pkg, 0o444)
        _put(base / "power1_label", "CPU power", 0o444)
        _put(base / "power2_input", 31070000, 0o444)
        _put(base / "power2_label", "IO power", 0o444)
        _put(base / "temp1_input", 40000, 0o444)
        _put(base / "temp1_label", "SoC Temperature", 0o444)


def _rapl_constraints(zone: pathlib.Path, tdp_w, enabled):
    """PL1 (long_term) and PL2 (short_term) with their limits, as intel_rapl_common exposes them."""
    _put(zone / "constraint_0_min_time_window_us", 976, 0o444)
    _put(zone / "constraint_0_max_time_window_us", 40000000, 0o444)
    _put(zone / "constraint_1_name", "short_term", 0o444)
    _put(zone / "constraint_1_max_power_uw", int(tdp_w * 1_500_000), 0o444)
    _put(zone / "constraint_1_power_limit_uw", int(tdp_w * 1_250_000))
    _put(zone / "constraint_1_time_window_us", 2440)
    _put(zone / "enabled", enabled)


def _rapl(root: pathlib.Path, packages, tdp_w, energy_mode, kind="rapl", order=None):
    """The zones live where the kernel puts them, under the powercap control type's device
    (devices/virtual/powercap/intel-rapl/intel-rapl:N, sub-zones nested inside their package), and
    class/powercap holds symlinks to them (drivers/powercap/powercap_sys.c): readers of either path
    (the collectd role mounts devices/virtual/powercap) see the same files."""
    control = root / "devices" / "virtual" / "powercap" / "intel-rapl"
    control.mkdir(parents=True, exist_ok=True)
    _put(control / "enabled", 1)
    zones: list[pathlib.Path] = []
    # A zone's directory is "<parent>:%x" of the id the powercap class hands out in registration
    # order (powercap_sys.c powercap_register_zone: idr_alloc, then dev_set_name("%s:%x")): the 11th
    # top-level zone is intel-rapl:a. intel_rapl_common registers the packages first, then psys.
    for index, pkg in enumerate(_registration(packages, order)):
        zone = control / f"intel-rapl:{index:x}"
        zones.append(zone)
        _put(zone / "name", f"package-{pkg}", 0o444)
        _put(zone / "enabled", 1)
        _put(zone / "energy_uj", 123456789 + pkg * 1000, energy_mode)
        _put(zone / "max_energy_range_uj", 262143328850, 0o444)
        if kind == "energy_only":  # AMD: energy counters, no power-limit constraints
            continue
        _put(zone / "constraint_0_name", "long_term", 0o444)
        _put(zone / "constraint_0_max_power_uw", int(tdp_w * 1_000_000), 0o444)
        _put(zone / "constraint_0_power_limit_uw", int(tdp_w * 1_000_000))
        _put(zone / "constraint_0_time_window_us", 27983872)
        if kind in ("rapl_pl2", "locked"):
            # a BIOS-locked limit reads as disabled (intel_rapl_common.c get_domain_enable)
            _rapl_constraints(zone, tdp_w, 0 if kind == "locked" else 1)
        sub = zone / f"intel-rapl:{index:x}:0"
        zones.append(sub)
        _put(sub / "name", "dram", 0o444)
        _put(sub / "energy_uj", 4242 + pkg, energy_mode)
        _put(sub / "max_energy_range_uj", 65712999613, 0o444)
    if kind != "energy_only":
        psys = control / f"intel-rapl:{packages:x}"
        zones.append(psys)
        _put(psys / "name", "psys", 0o444)
        _put(psys / "energy_uj", 987654, energy_mode)
        _put(psys / "max_energy_range_uj", 262143328850, 0o444)
    links = root / "class" / "powercap"
    links.mkdir(parents=True, exist_ok=True)
    for device in (control, *zones):
        os.symlink(os.path.relpath(device, links), links / device.name)


def build_tree(root: pathlib.Path, scenario: str, rebuild: bool = False, **shape) -> pathlib.Path:
    """Write the sysfs tree for ``scenario`` under ``root`` and return ``root``.

    Shape keywords (all optional): ``cpus`` (number of present CPUs), ``offline`` (cpulist),
    ``policy_size`` (CPUs per policy, acpi-cpufreq), ``p_cores`` (hybrid), ``governor``, ``epp``,
    ``epp_values`` (the CPU model's EPP register value per preference name where it differs from the
    driver's defaults: intel_pstate.c ``intel_epp_default`` gives some models another
    ``balance_performance``), ``packages`` (CPU packages, each a NUMA node with its RAPL zone),
    ``threads_per_core`` (SMT, default 1), ``tdp_w``, ``energy_readable`` (True:
    energy_uj mode 0444, as before Linux 5.10; default mode 0400),
    ``idle`` (a key of ``IDLE_STATES``), ``uncore`` (``legacy`` / ``tpmi``), ``powercap`` (``rapl``
    (default), ``rapl_pl2``, ``locked``, ``energy_only`` or None), ``hwmon`` (``amd_energy``,
    ``platform``: an xgene-hwmon chip per package, or ``scmi``: one chip with every package's sensors).

    An existing tree built for the same scenario and shape is left as it is (it holds the state
    the roles applied); ``rebuild=True`` or a different scenario/shape replaces it.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(sorted(SCENARIOS))}")
    root = pathlib.Path(root)
    opts = dict(SCENARIOS[scenario])
    unknown = set(shape) - {
        "cpus",
        "offline",
        "policy_size",
        "p_cores",
        "governor",
        "epp",
        "epp_values",
        "packages",
        "tdp_w",
        "energy_readable",
        "idle",
        "uncore",
        "powercap",
        "hwmon",
        "registration_order",
        "threads_per_core",
    }
    if unknown:
        raise TypeError(f"unknown shape argument(s): {', '.join(sorted(unknown))}")
    opts.update(shape)
    signature = {"scenario": scenario, "shape": {k: opts[k] for k in sorted(opts)}}
    marker = root / MARKER
    if marker.is_file() and not rebuild:
        try:
            if json.loads(marker.read_text()) == signature:
                return root
        except ValueError:
            pass
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)

    n = int(opts["cpus"])
    present = list(range(n))
    offline = parse_cpulist(opts.get("offline") or "")
    if 0 in offline:
        raise ValueError("cpu0 cannot be offline in these scenarios (it has no online file)")
    online = [c for c in present if c not in offline]
    driver = opts["driver"]
    cpu_dir = root / "devices" / "system" / "cpu"
    _put(cpu_dir / "present", _cpulist(present), 0o444)
    _put(cpu_dir / "possible", _cpulist(present), 0o444)
    _put(cpu_dir / "online", _cpulist(online), 0o444)
    _put(cpu_dir / "offline", _cpulist(offline), 0o444)
    _put(cpu_dir / "kernel_max", 8191, 0o444)
    for cpu in present:
        cdir = cpu_dir / f"cpu{cpu}"
        cdir.mkdir(parents=True, exist_ok=True)
        if cpu != 0:  # cpu0 usually cannot be hot-unplugged and has no online file
            _put(cdir / "online", 1 if cpu in online else 0)
    packages = int(opts.get("packages") or 1)
    _topology(root, cpu_layout(n, packages, int(opts.get("threads_per_core") or 1)), present, online)

    if driver is not None:
        if scenario == "acpi_cpufreq_shared":
            size = int(opts.get("policy_size") or 1)
            groups = [present[i : i + size] for i in range(0, n, size)]
        else:
            groups = [[c] for c in present]
        if driver in ("intel_pstate", "intel_cpufreq"):
            status = "active" if driver == "intel_pstate" else "passive"
            ip = cpu_dir / "intel_pstate"
            _put(ip / "status", status)
            _put(ip / "no_turbo", 0)
            _put(ip / "max_perf_pct", 100)
            _put(ip / "min_perf_pct", 20)
            _put(ip / "num_pstates", 32, 0o444)
            _put(ip / "turbo_pct", 45, 0o444)
            if driver == "intel_pstate":
                _put(ip / "hwp_dynamic_boost", 0)
        if driver == "amd-pstate-epp":
            _put(cpu_dir / "amd_pstate" / "status", "active")
        default_gov = "powersave" if driver in ("intel_pstate", "amd-pstate-epp") else "schedutil"
        governor = opts.get("governor") or default_gov
        epp = opts.get("epp") or "balance_performance"
        if governor == "performance" and driver in ("intel_pstate", "amd-pstate-epp"):
            epp = "performance"
        p_cores = int(opts.get("p_cores") or 0)
        for group in groups:
            owner = group[0]
            if scenario == "hybrid":
                limits = LIMITS["hybrid_p"] if owner < p_cores else LIMITS["hybrid_e"]
            else:
                limits = LIMITS[driver]
            pdir = cpu_dir / "cpufreq" / f"policy{owner}"
            _policy(pdir, driver, group, online, limits, governor, epp)
            for cpu in group:
                if cpu in online:  # the kernel removes the link when a CPU goes offline
                    os.symlink(f"../cpufreq/policy{owner}", cpu_dir / f"cpu{cpu}" / "cpufreq")

    # root-only since the RAPL side-channel fix (CVE-2020-8694, Linux 5.10 and backports)
    energy_mode = 0o444 if opts.get("energy_readable", False) else 0o400
    if opts.get("idle"):
        _cpuidle(cpu_dir, opts["idle"], online)
    if opts.get("uncore"):
        _uncore(cpu_dir, opts["uncore"], packages, opts.get("registration_order"))
    powercap = opts.get("powercap", "rapl")
    if powercap:
        _rapl(root, packages, float(opts.get("tdp_w") or 125.0), energy_mode, powercap, opts.get("registration_order"))
    if opts.get("hwmon"):
        _hwmon(root, opts["hwmon"], packages, n, 0o400 if opts["hwmon"] == "amd_energy" else 0o444)
    marker.write_text(json.dumps(signature))
    return root


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--cpus", type=int)
    parser.add_argument("--offline")
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args(argv)
    shape = {k: v for k, v in (("cpus", args.cpus), ("offline", args.offline)) if v is not None}
    build_tree(args.root, args.scenario, rebuild=args.rebuild, **shape)
    print(f"built {args.scenario} sysfs tree under {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
