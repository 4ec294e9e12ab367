#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cpu_power_info
short_description: Gather CPU frequency scaling, EPP, C-state, uncore, power cap and power-reading facts from sysfs
version_added: 0.1.0
description:
  - Reports the cpufreq scaling driver and the intel_pstate / amd_pstate mode, the available
    governors and EPP values, per-CPU cpuinfo minimum / maximum / base frequency, online and
    offline CPUs, the cpufreq policies and the CPUs that share them, CPU groups with identical
    limits (hybrid P/E cores), and the RAPL package zones (name, package, TDP, whether
    C(energy_uj) is readable).
  - Also reports the cpuidle driver, governor and states (with the CPUs where each is disabled),
    the uncore frequency domains (C(intel_uncore_frequency), legacy or TPMI), the powercap package
    zones with their power-limit constraints, and where package power can be read (RAPL powercap,
    or hwmon - C(amd_energy) or a platform driver - where RAPL is missing).
  - Works on a machine without cpufreq; RV(cpu_power.cpufreq_available) is then V(false) and
    RV(cpu_power.messages) says why nothing can be applied.
author:
  - poweraware.k8s contributors (@poweraware)
extends_documentation_fragment:
  - poweraware.k8s.attributes
  - poweraware.k8s.attributes.info_module
  - poweraware.k8s.attributes.facts
  - poweraware.k8s.sysfs
attributes:
  facts:
    support: full
options:
  hwmon_labels:
    description:
      - Rules that classify hwmon energy and power sensors by label, tried before the default rules
        (docs/node-power.md, "Where package power is read"); used only where RAPL is missing.
      - Each rule is C(class) (a lower-case word; V(package) counts the sensor as package power, any
        other word leaves it out) and C(pattern), a Python regular expression that must match the
        whole label, case-insensitive, with an optional named group C(package) for the socket number.
      - Firmware chooses the labels (SCMI, ACPI power meter C(powerN_oem_info), vendor drivers); add a
        rule when a sensor you need shows up in the C(ignored) list of RV(cpu_power.power_reading).
    type: list
    elements: dict
    default: []
  kubelet_config:
    description:
      - The kubelet's configuration file (KubeletConfiguration YAML) to read as well, in the same module run;
        its text is returned in RV(kubelet_config) for the controller to parse (the host needs no YAML
        library). The C(cpu_power) role takes C(reservedSystemCPUs) from it.
      - A missing file is reported (RV(kubelet_config.exists) V(false)), not an error; one that cannot be
        read is an error.
    type: path
notes:
  - C(energy_uj) is readable by root only since Linux 5.10 (CVE-2020-8694);
    the C(energy_readable) flag of each zone in RV(cpu_power.rapl) tells whether this run could read it.
seealso:
  - module: poweraware.k8s.cpu_power_profile
"""

EXAMPLES = r"""
- name: Gather CPU power facts
  poweraware.k8s.cpu_power_info:

- name: Show the driver and the per-policy limits
  ansible.builtin.debug:
    msg: "{{ ansible_facts.poweraware_cpu_power.driver }}: {{ ansible_facts.poweraware_cpu_power.policies }}"

- name: Count the firmware's socket sensors of an ARM server as package power
  poweraware.k8s.cpu_power_info:
    hwmon_labels:
      - class: package
        pattern: 'SoC Power Socket (?P<package>\d+)'

- name: Stop here on machines without cpufreq
  ansible.builtin.assert:
    that: ansible_facts.poweraware_cpu_power.cpufreq_available
    fail_msg: "{{ ansible_facts.poweraware_cpu_power.messages | join('; ') }}"
"""

RETURN = r"""
cpu_power:
  description: The CPU power facts, also set as the fact C(poweraware_cpu_power).
  returned: always
  type: dict
  contains:
    cpufreq_available:
      description: Whether any online CPU has a cpufreq policy.
      type: bool
      sample: true
    driver:
      description:
        - The scaling driver (V(intel_pstate), V(intel_cpufreq), V(acpi-cpufreq), V(amd-pstate-epp), ...).
        - Null without cpufreq.
      type: str
      sample: intel_pstate
    intel_pstate_status:
      description: Content of C(intel_pstate/status) (V(active), V(passive), V(off)), null if absent.
      type: str
      sample: active
    amd_pstate_status:
      description: Content of C(amd_pstate/status), null if absent.
      type: str
      sample: null
    hwp:
      description: Whether intel_pstate runs with HWP (null for other drivers).
      type: bool
      sample: true
    epp_supported:
      description: Whether the policies expose C(energy_performance_preference).
      type: bool
      sample: true
    epp_refused_under_performance:
      description:
        - Whether the driver refuses an EPP other than V(performance) under the performance governor (active mode).
      type: bool
      sample: true
    present:
      description: Present CPUs (CPU list string).
      type: str
      sample: "0-7"
    online:
      description: Online CPUs.
      type: str
      sample: "0-5"
    offline:
      description: Present but offline CPUs.
      type: str
      sample: "6-7"
    available_governors:
      description: Union of the policies' available governors.
      type: list
      elements: str
      sample: [performance, powersave]
    available_epp:
      description: Available EPP strings.
      type: list
      elements: str
      sample: [default, performance, balance_performance, balance_power, power]
    policies:
      description: One entry per cpufreq policy with its CPUs, limits (MHz) and current values.
      type: list
      elements: dict
      sample:
        - name: policy0
          cpus: "0"
          online_cpus: "0"
          shared: false
          cpuinfo_min_mhz: 800
          cpuinfo_max_mhz: 3900
          base_mhz: 2100
          scaling_min_mhz: 800
          scaling_max_mhz: 3900
          governor: powersave
          available_governors: [performance, powersave]
          epp: balance_performance
          epp_raw: balance_performance
          available_epp: [default, performance, balance_performance, balance_power, power]
    cpus:
      description: Per-CPU entries keyed by CPU number (as a string).
      type: dict
      sample: {"0": {online: true, policy: policy0, cpuinfo_min_mhz: 800, cpuinfo_max_mhz: 3900, base_mhz: 2100}}
    limit_groups:
      description: Online CPUs grouped by identical cpuinfo limits (P-cores and E-cores on hybrid CPUs).
      type: list
      elements: dict
      sample: [{cpus: [0, 1, 2, 3], cpulist: "0-3", cpuinfo_min_mhz: 800, cpuinfo_max_mhz: 5000, base_mhz: 2500}]
    rapl:
      description: RAPL package zones (C(psys) is listed under C(skipped)).
      type: dict
      sample:
        available: true
        zones: [{zone: "intel-rapl:0", name: package-0, package: 0, die: null, tdp_w: 125.0,
                 max_energy_range_uj: 262143328850, energy_readable: true}]
        skipped: [{zone: "intel-rapl:1", name: psys}]
    cpuidle:
      description: The cpuidle driver and governor, and the idle states (per state, the CPUs where it is disabled).
      type: dict
      sample:
        available: true
        driver: intel_idle
        governor: menu
        states:
          - {state: state0, name: POLL, desc: CPUIDLE CORE POLL IDLE, latency_us: 0, residency_us: 0, disabled_cpus: ""}
          - {state: state3, name: C6, desc: MWAIT 0x20, latency_us: 133, residency_us: 600, disabled_cpus: "4-7"}
        cpus_without_cpuidle: ""
        messages: []
    uncore:
      description:
        - Uncore frequency domains (kHz).
        - C(interface) is V(legacy), V(tpmi) or null (AMD, ARM, driver not loaded).
      type: dict
      sample:
        available: true
        interface: legacy
        domains: [{name: package_00_die_00, package: 0, die: 0, domain_id: null, min_khz: 800000, max_khz: 2400000,
                   initial_min_khz: 800000, initial_max_khz: 2400000, current_khz: 1600000,
                   path: devices/system/cpu/intel_uncore_frequency/package_00_die_00}]
        package_dirs: []
        messages: []
    powercap:
      description:
        - RAPL package zones with C(enabled) and their power-limit constraints (microwatts, microseconds).
        - C(available) is false without constraints (AMD exposes energy counters only) or without powercap.
        - A BIOS-locked limit cannot be seen here (C(enabled) reads 0); a write to it fails with EACCES.
      type: dict
      sample:
        available: true
        zones: [{zone: "intel-rapl:0", name: package-0, package: 0, die: null, enabled: "1",
                 constraints: [{index: 0, name: long_term, power_limit_uw: 125000000, time_window_us: 27983872,
                                max_power_uw: 125000000, min_power_uw: null, max_time_window_us: 40000000,
                                min_time_window_us: 976}]}]
        messages: []
    power_reading:
      description:
        - Where package power can be read, the same discovery the collectd plugin uses.
        - C(source) is V(rapl) (powercap zones), V(hwmon) (every C(energyN_input), C(powerN_input) or
          C(powerN_average) of every chip whose label a rule classes V(package)) or null.
        - C(zones) has one sensor per package; C(ignored) lists every other hwmon energy or power sensor
          with the reason it is not package power (another class, no rule matched, no label, or its
          package is read from a better sensor, an energy counter before a power reading).
      type: dict
      sample:
        source: hwmon
        zones: [{name: package-0, chip: hwmon0, attr: power1_input, kind: power, driver: apm_xgene,
                 label: CPU power, package: 0}]
        ignored: [{chip: hwmon0, driver: apm_xgene, attr: power2_input, label: IO power,
                   reason: "class io (default rule), not package power"}]
        messages: ["no RAPL powercap package zone: package power is read from hwmon",
                   "1 hwmon energy/power sensor(s) are not package power (see ignored); hwmon_labels classifies labels"]
    messages:
      description: Human-readable notes (no cpufreq, offline CPUs).
      type: list
      elements: str
      sample: ["CPUs 6-7 are offline and are skipped by cpu_power_profile"]
kubelet_config:
  description: The kubelet configuration file asked for with O(kubelet_config), as read.
  returned: when O(kubelet_config) is given
  type: dict
  contains:
    path:
      description: The path read.
      type: str
    exists:
      description: Whether the file exists.
      type: bool
    content:
      description: Its text (null when it does not exist).
      type: str
  sample:
    {path: /var/lib/kubelet/config.yaml, exists: true, content: "kind: KubeletConfiguration\nreservedSystemCPUs: 0-1\n"}
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_apply import (  # noqa: E402
    PowerError,
    SysfsAccessor,
    gather_info,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import hwmon_label_rules  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            hwmon_labels=dict(type="list", elements="dict", default=[]),
            kubelet_config=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    rules, problems = hwmon_label_rules(module.params["hwmon_labels"])
    if problems:
        module.fail_json(msg="invalid hwmon_labels, nothing was read: " + "; ".join(problems), problems=problems)
    try:
        info = gather_info(SysfsAccessor(module.params["sysfs_root"]), rules)
    except (PowerError, OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot read CPU power information under {module.params['sysfs_root']}: {exc}")
    result = dict(changed=False, cpu_power=info, ansible_facts={"poweraware_cpu_power": info})
    path = module.params["kubelet_config"]
    if path:
        try:
            with open(path, "rb") as handle:
                content = handle.read().decode("utf-8")
        except FileNotFoundError:
            content = None
        except (OSError, UnicodeDecodeError) as exc:
            module.fail_json(
                msg=f"kubelet_config={path}: cannot be read ({getattr(exc, 'strerror', None) or exc}); fix: run the "
                "task with become, point cpu_power_kubelet_config at the kubelet's configuration file, or give "
                "cpu_power_kubelet_reserved_cpus"
            )
        result["kubelet_config"] = {"path": path, "exists": content is not None, "content": content}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
