#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cpu_power_profile
short_description: Apply or remove a CPU frequency / governor / EPP profile through sysfs
version_added: 0.1.0
description:
  - Sets C(scaling_min_freq), C(scaling_max_freq), C(scaling_governor) and
    C(energy_performance_preference) for a list of CPUs, the way the Kubernetes Power Manager
    does through App QoS, but directly through cpufreq sysfs.
  - The whole request is validated before the first write. Frequencies must lie within each
    CPU's own C(cpuinfo_min_freq)/C(cpuinfo_max_freq) (hybrid CPUs differ), O(min_mhz) <= O(max_mhz),
    the governor must be listed in C(scaling_available_governors), the EPP in
    C(energy_performance_available_preferences) and allowed with the governor (intel_pstate and
    amd-pstate-epp refuse any EPP but C(performance) under the C(performance) governor), every CPU
    must be present, and a CPU list must cover whole cpufreq policies. A bad request changes
    nothing and the message names the CPU and the value.
  - Each cpufreq policy is written once, in the safe order (raising a range writes max then min,
    lowering writes min then max; governor before EPP). Every value is read back; idempotence is
    judged on the read-back values with a tolerance (O(tolerance_mhz)).
  - Offline CPUs are skipped and reported in RV(skipped_offline). C(intel_pstate/status) is never written.
  - Before the first change of an attribute its original value is recorded once in O(state_file)
    (JSON, replaced atomically). O(state=absent) restores those originals and forgets them.
  - If a write or read-back fails midway, the values this run changed are restored and the module fails.
author:
  - poweraware.k8s contributors (@poweraware)
extends_documentation_fragment:
  - poweraware.k8s.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff is a per-CPU before/after table (policy, min/max MHz, governor, EPP).
  idempotent:
    support: full
options:
  cpus:
    description:
      - CPUs to manage, as a Linux CPU list string (V(2-5,8)), a list of CPU numbers, or V(all).
      - Required with O(state=present). With O(state=absent), limits the restore to the policies of
        these CPUs; omitted restores everything recorded in O(state_file).
    type: raw
  reserved_cpus:
    description:
      - CPUs that must never be touched (the kubelet's reserved CPUs); subtracted from O(cpus).
    type: raw
    default: []
  min_mhz:
    description:
      - Minimum frequency in MHz (written as kHz to C(scaling_min_freq)), or V(min) / V(max) for each
        CPU's own C(cpuinfo_min_freq) / C(cpuinfo_max_freq).
    type: raw
  max_mhz:
    description:
      - Maximum frequency in MHz (written to C(scaling_max_freq)), or V(min) / V(max).
    type: raw
  governor:
    description:
      - Scaling governor, for example V(powersave), V(performance), V(schedutil).
    type: str
  epp:
    description:
      - Energy-performance preference, for example V(performance), V(balance_performance),
        V(balance_power), V(power). V(default) is refused because it cannot be verified on read-back.
    type: str
  state:
    description:
      - V(present) applies the profile; V(absent) restores the original values recorded in O(state_file).
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description:
      - Where sysfs is mounted. Tests and the lab point this at a fake tree.
    type: path
    default: /sys
  state_file:
    description:
      - JSON file holding the original values (recorded once, never overwritten).
    type: path
    default: /var/lib/poweraware/cpu_power_state.json
  tolerance_mhz:
    description:
      - Read-back tolerance for frequencies. Drivers round to P-states or table frequencies
        (acpi-cpufreq resolves C(max) down to the next available frequency).
    type: int
    default: 100
notes:
  - Frequencies in sysfs are kHz; this module speaks MHz.
  - A CPU list that splits a cpufreq policy shared by several CPUs (C(related_cpus)) is refused,
    because one write changes every CPU of the policy.
seealso:
  - module: poweraware.k8s.cpu_power_info
  - name: Linux CPU performance scaling (cpufreq)
    description: Documentation/admin-guide/pm/cpufreq.rst
    link: https://docs.kernel.org/admin-guide/pm/cpufreq.html
  - name: intel_pstate
    description: Documentation/admin-guide/pm/intel_pstate.rst
    link: https://docs.kernel.org/admin-guide/pm/intel_pstate.html
"""

EXAMPLES = r"""
- name: Shared pool - every CPU but the reserved ones, power-saving EPP
  poweraware.k8s.cpu_power_profile:
    cpus: all
    reserved_cpus: "0-1"
    governor: powersave
    epp: power

- name: Exclusive pool with a performance profile, frequencies from each CPU's own limits
  poweraware.k8s.cpu_power_profile:
    cpus: "4-7"
    min_mhz: 2000
    max_mhz: max
    governor: powersave
    epp: performance

- name: Restore the original settings of every CPU this module touched
  poweraware.k8s.cpu_power_profile:
    state: absent
"""

RETURN = r"""
cpus:
  description: Online CPUs managed by this call (a CPU list string).
  returned: always
  type: str
  sample: "2-5"
skipped_offline:
  description: Requested CPUs that were offline and therefore skipped.
  returned: always
  type: str
  sample: "6-7"
driver:
  description: The cpufreq scaling driver.
  returned: always
  type: str
  sample: intel_pstate
policies:
  description: One entry per cpufreq policy managed, with values before and after (read back).
  returned: always
  type: list
  elements: dict
  contains:
    policy:
      description: Policy name.
      type: str
      sample: policy2
    cpus:
      description: The managed CPUs of this policy.
      type: str
      sample: "2-3"
    changed:
      description: Attributes that were (or in check mode would be) written.
      type: list
      elements: str
      sample: [scaling_max_freq, energy_performance_preference]
    before:
      description: Values before this run (MHz, governor, EPP name).
      type: dict
      sample: {min_mhz: 800, max_mhz: 3900, governor: powersave, epp: balance_performance}
    after:
      description: Values after this run, read back from sysfs (predicted in check mode).
      type: dict
      sample: {min_mhz: 800, max_mhz: 3000, governor: powersave, epp: power}
state_file:
  description: Path of the file holding the original values.
  returned: always
  type: str
  sample: /var/lib/poweraware/cpu_power_state.json
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils._cpufreq import (  # noqa: E402
    ApplyError,
    PowerError,
    Request,
    SysfsAccessor,
    ValidationError,
    apply_profile,
    restore_profile,
)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            cpus=dict(type="raw"),
            reserved_cpus=dict(type="raw", default=[]),
            min_mhz=dict(type="raw"),
            max_mhz=dict(type="raw"),
            governor=dict(type="str"),
            epp=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            sysfs_root=dict(type="path", default="/sys"),
            state_file=dict(type="path", default="/var/lib/poweraware/cpu_power_state.json"),
            tolerance_mhz=dict(type="int", default=100),
        ),
        required_if=[("state", "present", ["cpus"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["tolerance_mhz"] < 0:
        module.fail_json(msg=f"tolerance_mhz={p['tolerance_mhz']} must be >= 0")
    acc = SysfsAccessor(p["sysfs_root"])
    try:
        if p["state"] == "present":
            request = Request(
                cpus=p["cpus"],
                reserved_cpus=p["reserved_cpus"],
                min_mhz=p["min_mhz"],
                max_mhz=p["max_mhz"],
                governor=p["governor"],
                epp=p["epp"],
            )
            result = apply_profile(
                acc, request, state_file=p["state_file"], check_mode=module.check_mode, tolerance_mhz=p["tolerance_mhz"]
            )
        else:
            result = restore_profile(
                acc,
                cpus=p["cpus"],
                state_file=p["state_file"],
                check_mode=module.check_mode,
                tolerance_mhz=p["tolerance_mhz"],
            )
    except ValidationError as exc:
        module.fail_json(msg=f"invalid request, nothing was changed: {exc}", changed=False)
    except ApplyError as exc:
        module.fail_json(msg=str(exc), changed=False)
    except PowerError as exc:
        module.fail_json(msg=str(exc), changed=False)
    except OSError as exc:
        module.fail_json(msg=f"sysfs access under {p['sysfs_root']} failed before any write: {exc}", changed=False)
    diff = result.pop("diff")
    if module._diff and result["changed"]:
        result["diff"] = diff
    module.exit_json(**result)


def main():
    run_module()


if __name__ == "__main__":
    main()
