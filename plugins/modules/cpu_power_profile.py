#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cpu_power_profile
short_description: Apply or remove a CPU power profile (P-states, C-states, uncore, power cap) through sysfs
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
  - O(cstates) disables or enables idle states of the same CPUs through
    C(cpuN/cpuidle/stateK/disable); O(uncore) sets the uncore frequency range of every package/die
    (C(intel_uncore_frequency)); O(power_cap) sets a RAPL package power limit (powercap). They get
    the same guarantees - everything (P-states and these) is validated before the first write, every
    problem is reported at once, each value is read back, originals are journaled in O(state_file),
    a failure rolls back everything this run changed, and O(state=absent) restores them.
  - A control the machine does not have (no C(intel_uncore_frequency) on AMD and ARM, no RAPL power
    limits, no cpuidle driver) changes nothing and says so in RV(messages).
author:
  - poweraware.k8s contributors (@poweraware)
extends_documentation_fragment:
  - poweraware.k8s.attributes
  - poweraware.k8s.sysfs
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is a per-CPU before/after table (policy, min/max MHz, governor, EPP), followed by
        one line per C-state, uncore or power-cap attribute that changes.
  idempotent:
    support: full
options:
  assignments:
    description:
      - Several requests in one run, each for its own CPUs (a node's CPU pools and its node-level
        controls, as the C(cpu_power) role applies them). Mutually exclusive with O(cpus) and the
        settings (O(min_mhz), O(max_mhz), O(governor), O(epp), O(cstates), O(uncore), O(power_cap)).
      - Every assignment is validated against the node before the first write, and every problem of
        every assignment is reported at once, named by its pool. They are applied in order; when a
        write of a later one fails, what the earlier ones wrote is rolled back too, so the node ends as
        it was or as asked, never with some pools applied.
      - Only with O(state=present).
    type: list
    elements: dict
    suboptions:
      pool:
        description: Name of the pool, used in messages and in RV(assignments).
        type: str
      profile:
        description: Name of the pool's profile, used in messages and in RV(assignments).
        type: str
      cpus:
        description: The CPUs of this assignment, as O(cpus); O(reserved_cpus) are subtracted.
        type: raw
        required: true
      min_mhz:
        description: As O(min_mhz).
        type: raw
      max_mhz:
        description: As O(max_mhz).
        type: raw
      governor:
        description: As O(governor).
        type: str
      epp:
        description: As O(epp).
        type: str
      cstates:
        description: As O(cstates).
        type: dict
        suboptions:
          disable:
            description: As O(cstates.disable).
            type: list
            elements: str
          enable:
            description: As O(cstates.enable).
            type: list
            elements: str
          max_latency_us:
            description: As O(cstates.max_latency_us).
            type: int
      uncore:
        description: As O(uncore).
        type: dict
        suboptions:
          min_khz:
            description: As O(uncore.min_khz).
            type: int
          max_khz:
            description: As O(uncore.max_khz).
            type: int
          min_pct:
            description: As O(uncore.min_pct).
            type: int
          max_pct:
            description: As O(uncore.max_pct).
            type: int
          packages:
            description: As O(uncore.packages).
            type: list
            elements: int
      power_cap:
        description: As O(power_cap).
        type: dict
        suboptions:
          watts:
            description: As O(power_cap.watts).
            type: float
            required: true
          time_window_us:
            description: As O(power_cap.time_window_us).
            type: int
          packages:
            description: As O(power_cap.packages).
            type: list
            elements: int
          constraint:
            description: As O(power_cap.constraint).
            type: str
            choices: [long_term, short_term]
            default: long_term
          allow_below_floor:
            description: As O(power_cap.allow_below_floor).
            type: bool
            default: false
  cpus:
    description:
      - CPUs to manage, as a Linux CPU list string (V(2-5,8)), a list of CPU numbers, or V(all).
      - Required with O(state=present) unless O(assignments) is given. With O(state=absent), limits the
        restore to the policies of these CPUs; omitted restores everything recorded in O(state_file).
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
      - On intel_pstate also a raw register value V(0)-V(255). Which preference a number is differs by
        CPU model and kernel, so it is compared as the number it is; where the CPU names that value the
        kernel shows the name, and a re-run writes the number again - give the name instead.
      - An EPP the kernel shows as a number is a value with no name on that CPU, so it is never taken for
        a preference by a table (it does not equal V(balance_performance) because 128 does elsewhere).
    type: str
  cstates:
    description:
      - C-states of the O(cpus) (minus O(reserved_cpus)), through C(cpuidle/stateK/disable).
      - States not named and not covered by O(cstates.max_latency_us) are left as they are.
      - state0 (C(POLL) under intel_idle and acpi_idle, C(WFI) under psci_idle) is never disabled.
    type: dict
    suboptions:
      disable:
        description: Names of the states to disable, as in C(stateK/name) (V(C6), V(C1E), ...).
        type: list
        elements: str
      enable:
        description: Names of the states to enable.
        type: list
        elements: str
      max_latency_us:
        description:
          - Disable every state whose exit latency (C(stateK/latency), microseconds) is above this
            value and enable every state at or below it.
        type: int
  uncore:
    description:
      - Uncore frequency range of every package/die (or of O(uncore.packages)), through
        C(intel_uncore_frequency/package_XX_die_YY) (legacy) or C(uncoreNN) (TPMI; the
        package-level directory is left alone). Values must lie within each domain's
        C(initial_min_freq_khz)-C(initial_max_freq_khz) and be multiples of 100000 kHz.
    type: dict
    suboptions:
      min_khz:
        description: Minimum uncore frequency in kHz.
        type: int
      max_khz:
        description: Maximum uncore frequency in kHz.
        type: int
      min_pct:
        description:
          - Minimum as a percentage (0-100) of each domain's initial range, rounded down to 100 MHz.
          - Mutually exclusive with O(uncore.min_khz).
        type: int
      max_pct:
        description: Maximum as a percentage (0-100) of each domain's initial range.
        type: int
      packages:
        description: Package ids to set; default every package.
        type: list
        elements: int
  power_cap:
    description:
      - A RAPL package power limit through powercap (C(constraint_K_power_limit_uw),
        C(constraint_K_time_window_us), C(enabled)), within the constraint's C(max_power_uw).
      - A limit locked by the BIOS is refused by the kernel (EACCES) at the first write; the run
        then rolls back and fails.
    type: dict
    suboptions:
      watts:
        description:
          - The power limit in watts (finite; at least a quarter of C(max_power_uw) unless
            O(power_cap.allow_below_floor)).
        type: float
        required: true
      time_window_us:
        description: The averaging time window in microseconds (read back to the hardware's resolution).
        type: int
      packages:
        description: Package ids to cap; default every package zone.
        type: list
        elements: int
      constraint:
        description: The constraint to set.
        type: str
        choices: [long_term, short_term]
        default: long_term
      allow_below_floor:
        description:
          - Allow a limit under a quarter of the constraint's C(max_power_uw) on zones that report no
            C(min_power_uw) (intel_rapl's package zones); without it such a limit is refused, as it throttles the
            package far below its rating. A zone's own C(min_power_uw) is always the floor.
        type: bool
        default: false
  state:
    description:
      - V(present) applies the profile; V(absent) restores the original values recorded in O(state_file).
      - With O(state=absent) and O(cpus), only the P-states and C-states of those CPUs are restored;
        uncore and power-cap originals are restored when O(cpus) is omitted or V(all).
    type: str
    choices: [present, absent]
    default: present
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
  - Frequencies in sysfs are kHz; this module speaks MHz for P-states and kHz for the uncore
    (as C(intel_uncore_frequency) does).
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
  - name: CPU idle time management
    description: Documentation/admin-guide/pm/cpuidle.rst
    link: https://docs.kernel.org/admin-guide/pm/cpuidle.html
  - name: Intel uncore frequency scaling
    description: Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst
    link: https://docs.kernel.org/admin-guide/pm/intel_uncore_frequency_scaling.html
  - name: Power capping framework
    description: Documentation/power/powercap/powercap.rst
    link: https://docs.kernel.org/power/powercap/powercap.html
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

- name: Low-latency pool - no C6, nothing deeper than 20 us, uncore at 50-100 % of its range
  poweraware.k8s.cpu_power_profile:
    cpus: "4-7"
    cstates:
      disable: [C6]
      max_latency_us: 20
    uncore:
      min_pct: 50
      max_pct: 100

- name: Cap every package at 150 W over 1 s
  poweraware.k8s.cpu_power_profile:
    cpus: all
    power_cap:
      watts: 150
      time_window_us: 1000000

- name: Two pools and a package power cap in one run (all validated first, all or nothing)
  poweraware.k8s.cpu_power_profile:
    reserved_cpus: "0-1"
    assignments:
      - pool: node
        cpus: all
        power_cap:
          watts: 150
      - pool: latency
        profile: performance
        cpus: "2-3"
        min_mhz: max
        max_mhz: max
        epp: performance
      - pool: shared
        cpus: "4-7"
        max_mhz: 2000
        epp: power

- name: Restore the original settings of every CPU this module touched
  poweraware.k8s.cpu_power_profile:
    state: absent
"""

RETURN = r"""
cpus:
  description: Online CPUs managed by this call (a CPU list string).
  returned: unless O(assignments) is given
  type: str
  sample: "2-5"
skipped_offline:
  description: Requested CPUs that were offline and therefore skipped.
  returned: unless O(assignments) is given
  type: str
  sample: "6-7"
driver:
  description: The cpufreq scaling driver.
  returned: always
  type: str
  sample: intel_pstate
policies:
  description: One entry per cpufreq policy managed, with values before and after (read back).
  returned: unless O(assignments) is given
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
controls:
  description:
    - With O(state=present), one entry per requested control (C(cstates), C(uncore), C(power_cap)).
    - With O(state=absent), C(restored) and C(unchanged) list the attributes written back or already at their original.
  returned: unless O(assignments) is given
  type: dict
  sample:
    cstates:
      available: true
      changed: ["cpu4 state3 (C6) disable"]
      settings: [{attribute: "cpu4 state3 (C6) disable", before: "0", after: "1"}]
      messages: []
messages:
  description:
    - Controls this machine does not have (skipped, nothing changed), attributes gone since they were recorded.
    - With O(assignments), each message starts with the pool (or the assignment's position) it is about.
  returned: always
  type: list
  elements: str
  sample: ["uncore: no intel_uncore_frequency directory (...); uncore skipped, nothing changed"]
assignments:
  description:
    - With O(assignments), one entry per assignment in the order given - its O(assignments[].pool),
      O(assignments[].profile) and what the module returns for a single request (RV(cpus),
      RV(skipped_offline), RV(driver), RV(policies), RV(controls), RV(messages), C(changed)).
  returned: when O(assignments) is given
  type: list
  elements: dict
  sample:
    - {pool: shared, profile: null, changed: true, cpus: "4-7", skipped_offline: "", driver: intel_pstate,
       policies: [], controls: {}, messages: [], state_file: /var/lib/poweraware/cpu_power_state.json}
state_file:
  description: Path of the file holding the original values.
  returned: always
  type: str
  sample: /var/lib/poweraware/cpu_power_state.json
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_apply import (  # noqa: E402
    ApplyError,
    PowerError,
    Request,
    SysfsAccessor,
    ValidationError,
    apply_assignments,
    apply_controls,
    restore_controls,
)


def _given(spec):
    """A dict option without the sub-options the user left out (Ansible fills them with None)."""
    if spec is None:
        return None
    return {k: v for k, v in spec.items() if v is not None}


CSTATES = dict(
    type="dict",
    options=dict(
        disable=dict(type="list", elements="str"),
        enable=dict(type="list", elements="str"),
        max_latency_us=dict(type="int"),
    ),
)
UNCORE = dict(
    type="dict",
    options=dict(
        min_khz=dict(type="int"),
        max_khz=dict(type="int"),
        min_pct=dict(type="int"),
        max_pct=dict(type="int"),
        packages=dict(type="list", elements="int"),
    ),
)
POWER_CAP = dict(
    type="dict",
    options=dict(
        watts=dict(type="float", required=True),
        time_window_us=dict(type="int"),
        packages=dict(type="list", elements="int"),
        constraint=dict(type="str", choices=["long_term", "short_term"], default="long_term"),
        allow_below_floor=dict(type="bool", default=False),
    ),
)
# What one assignment sets: the options of a single request (an assignment's C-states, uncore and
# power cap are those options' own dicts).
SETTINGS = dict(
    min_mhz=dict(type="raw"),
    max_mhz=dict(type="raw"),
    governor=dict(type="str"),
    epp=dict(type="str"),
    cstates=CSTATES,
    uncore=UNCORE,
    power_cap=POWER_CAP,
)


def _assignment(item):
    """One entry of O(assignments) without what the user left out, its dicts likewise."""
    given = _given(item)
    given.update({name: _given(item[name]) for name in ("cstates", "uncore", "power_cap") if item[name] is not None})
    return given


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            cpus=dict(type="raw"),
            reserved_cpus=dict(type="raw", default=[]),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            sysfs_root=dict(type="path", default="/sys"),
            state_file=dict(type="path", default="/var/lib/poweraware/cpu_power_state.json"),
            tolerance_mhz=dict(type="int", default=100),
            assignments=dict(
                type="list",
                elements="dict",
                options=dict(
                    pool=dict(type="str"), profile=dict(type="str"), cpus=dict(type="raw", required=True), **SETTINGS
                ),
            ),
            **SETTINGS,
        ),
        required_if=[("state", "present", ["cpus", "assignments"], True)],
        mutually_exclusive=[("assignments", name) for name in ("cpus", *SETTINGS)],
        supports_check_mode=True,
    )
    p = module.params
    if p["tolerance_mhz"] < 0:
        module.fail_json(msg=f"tolerance_mhz={p['tolerance_mhz']} must be >= 0")
    if p["state"] == "absent" and p["assignments"] is not None:
        module.fail_json(
            msg="assignments is for state=present; state=absent restores by cpus (or everything when cpus is omitted)"
        )
    acc = SysfsAccessor(p["sysfs_root"])
    try:
        if p["state"] == "present" and p["assignments"] is not None:
            result = apply_assignments(
                acc,
                [_assignment(item) for item in p["assignments"]],
                reserved_cpus=p["reserved_cpus"],
                state_file=p["state_file"],
                check_mode=module.check_mode,
                tolerance_mhz=p["tolerance_mhz"],
            )
        elif p["state"] == "present":
            request = Request(
                cpus=p["cpus"],
                reserved_cpus=p["reserved_cpus"],
                min_mhz=p["min_mhz"],
                max_mhz=p["max_mhz"],
                governor=p["governor"],
                epp=p["epp"],
            )
            result = apply_controls(
                acc,
                request,
                cstates=_given(p["cstates"]),
                uncore=_given(p["uncore"]),
                power_cap=_given(p["power_cap"]),
                state_file=p["state_file"],
                check_mode=module.check_mode,
                tolerance_mhz=p["tolerance_mhz"],
            )
        else:
            result = restore_controls(
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
