# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""C-states per CPU pool: discovery, kernel rules and the planner (no writes here).

Kernel facts (Documentation/admin-guide/pm/cpuidle.rst, drivers/cpuidle/sysfs.c):

* ``/sys/devices/system/cpu/cpuidle/current_driver`` names the driver (``intel_idle``,
  ``acpi_idle``, ``psci_idle``, ... or ``none``); ``current_governor`` (or
  ``current_governor_ro``) the governor.
* Each CPU with a registered cpuidle device has ``cpuN/cpuidle/stateK/`` with ``name``, ``desc``,
  ``latency`` (exit latency, us), ``residency`` (target residency, us) - read-only - and
  ``disable`` (0644). ``store_state_disable`` parses with ``kstrtouint(buf, 0)`` (EINVAL
  otherwise; EPERM without CAP_SYS_ADMIN); any non-zero value disables the state for that CPU
  only, and a read shows 0 or 1 (``CPUIDLE_STATE_DISABLED_BY_USER``).
* CPUs that were never online have no ``cpuidle`` directory; the planner skips offline CPUs.
* state0 is ``POLL`` under intel_idle and acpi_idle on x86 (cpuidle_poll_state_init), ``WFI``
  under psci_idle. The kernel accepts disabling it; our policy: a profile never does.

Request (``cstates``): ``disable`` (state names), ``enable`` (state names), ``max_latency_us``
(every state above it is disabled, every state at or below it enabled). States not named and not
covered by ``max_latency_us`` are left as they are.

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

import re

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import CPU_DIR, read_optional

CONTROL = "cstates"
KEYS = ("disable", "enable", "max_latency_us")
_STATE_DIR = re.compile(r"^state(\d+)$")


def _int_or_none(text):
    return int(text) if text is not None and text.isdigit() else None


def read_cpu_states(acc, cpu):
    """The idle states of one CPU (None when it has no cpuidle directory)."""
    base = f"{CPU_DIR}/cpu{cpu}/cpuidle"
    if not acc.isdir(base):
        return None
    states = []
    for entry in acc.listdir(base):
        match = _STATE_DIR.match(entry)
        if not match:
            continue
        rel = f"{base}/{entry}"
        states.append(
            {
                "index": int(match.group(1)),
                "state": entry,
                "path": rel,
                "name": read_optional(acc, f"{rel}/name"),
                "desc": read_optional(acc, f"{rel}/desc"),
                "latency_us": _int_or_none(read_optional(acc, f"{rel}/latency")),
                "residency_us": _int_or_none(read_optional(acc, f"{rel}/residency")),
                "disable": read_optional(acc, f"{rel}/disable"),
            }
        )
    states.sort(key=lambda s: s["index"])
    return states


def read_cpuidle(acc, online):
    """Driver, governor and the states of every online CPU."""
    driver = read_optional(acc, f"{CPU_DIR}/cpuidle/current_driver")
    governor = read_optional(acc, f"{CPU_DIR}/cpuidle/current_governor") or read_optional(
        acc, f"{CPU_DIR}/cpuidle/current_governor_ro"
    )
    cpus = {}
    missing = []
    for cpu in online:
        states = read_cpu_states(acc, cpu)
        if states is None:
            missing.append(cpu)
        else:
            cpus[cpu] = states
    available = bool(cpus) and driver not in (None, "none")
    return {"driver": driver, "governor": governor, "available": available, "cpus": cpus, "missing": missing}


def cpuidle_facts(idle):
    """The ``cpuidle`` entry of cpu_power_info: states of the first CPU, and where each is disabled."""
    names = {}
    for cpu, states in sorted(idle["cpus"].items()):
        for st in states:
            entry = names.setdefault(
                st["state"],
                {
                    "state": st["state"],
                    "name": st["name"],
                    "desc": st["desc"],
                    "latency_us": st["latency_us"],
                    "residency_us": st["residency_us"],
                    "disabled_cpus": [],
                },
            )
            if st["disable"] == "1":
                entry["disabled_cpus"].append(cpu)
    states = sorted(names.values(), key=lambda e: int(e["state"][5:]))
    for entry in states:
        entry["disabled_cpus"] = format_cpulist(entry["disabled_cpus"])
    messages = []
    if not idle["available"]:
        messages.append(
            f"no cpuidle states (current_driver: {idle['driver'] or 'missing'}): C-state settings cannot be applied"
        )
    return {
        "available": idle["available"],
        "driver": idle["driver"],
        "governor": idle["governor"],
        "states": states,
        "cpus_without_cpuidle": format_cpulist(idle["missing"]),
        "messages": messages,
    }


# --- request validation ------------------------------------------------------------------------


def _names(spec, key, problems):
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append(
            f"cstates.{key}={value!r} is not a list of state names: give names as the kernel shows them "
            "(cpuN/cpuidle/stateK/name), e.g. [C6] or [C1E, C6]"
        )
        return []
    return [v.strip() for v in value]


def check_spec(spec):
    """Validate the shape of a ``cstates`` request. Returns (disable, enable, max_latency, problems)."""
    problems = []
    if not isinstance(spec, dict):
        return [], [], None, [f"cstates={spec!r} is not a mapping: give disable, enable and/or max_latency_us"]
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        problems.append(f"cstates has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
    if all(spec.get(k) in (None, []) for k in KEYS):
        problems.append("cstates is empty: give disable (state names), enable (state names) and/or max_latency_us")
    disable = _names(spec, "disable", problems)
    enable = _names(spec, "enable", problems)
    both = sorted(set(disable) & set(enable))
    if both:
        problems.append(f"cstates: {', '.join(both)} is in both disable and enable; name each state once")
    limit = spec.get("max_latency_us")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        problems.append(
            f"cstates.max_latency_us={limit!r} is not a latency: give a whole number of microseconds >= 0 "
            "(states with a larger exit latency are disabled; state0 never is)"
        )
        limit = None
    return disable, enable, limit, problems


def _desired(st, disable, enable, limit):
    """'1' (disable), '0' (enable) or None (leave alone) for one state; state0 is never disabled."""
    if st["index"] == 0:
        return "0" if st["name"] in enable else None
    if st["name"] in disable:
        return "1"
    if st["name"] in enable:
        return "0"
    if limit is not None and st["latency_us"] is not None:
        return "1" if st["latency_us"] > limit else "0"
    return None


def _check_names(idle, cpus, disable, enable, problems):
    known = {}
    for cpu in cpus:  # every CPU here has a cpuidle listing: plan_cstates refused the missing ones
        for st in idle["cpus"][cpu]:
            if st["name"] is not None:  # a state whose name cannot be read cannot be named in a profile
                known.setdefault(st["name"], st["index"])
    listing = " ".join(sorted(known, key=lambda n: (known[n], n)))
    for key, names in (("disable", disable), ("enable", enable)):
        for name in names:
            if name not in known:
                problems.append(
                    f"cstates.{key} names {name}, which no managed CPU has (driver {idle['driver']}; "
                    f"states: {listing}); use one of those names"
                )
            elif key == "disable" and known[name] == 0:
                problems.append(
                    f"cstates.disable names {name}, state0 of driver {idle['driver']}: a profile never disables "
                    "state0 (our policy, although the kernel would accept it); remove it"
                )


def plan_cstates(acc, idle, online, spec):
    """Validate ``spec`` for the managed online CPUs and return the control plan (no writes).

    ``idle`` is ``read_cpuidle(acc, topo.online)``. Returns ``{control, available, messages,
    writes, problems}``; each write is one ``stateK/disable`` attribute of one CPU.
    """
    disable, enable, limit, problems = check_spec(spec)
    plan = {"control": CONTROL, "available": idle["available"], "messages": [], "writes": [], "problems": problems}
    if problems or not online:  # no CPU to check names against (the CPU list itself was refused)
        return plan
    if not idle["available"]:
        plan["messages"].append(
            f"C-states: no cpuidle states on this machine (current_driver: {idle['driver'] or 'missing'}); "
            "cstates skipped, nothing changed"
        )
        return plan
    missing = [c for c in online if c in idle["missing"]]
    if missing:
        problems.append(
            f"CPU {format_cpulist(missing)} is online but has no cpuidle directory "
            f"({acc.path(CPU_DIR)}/cpu{missing[0]}/cpuidle is missing); remove it from cpus"
        )
        return plan
    _check_names(idle, online, disable, enable, problems)
    if problems:
        return plan
    for cpu in online:
        for st in idle["cpus"][cpu]:
            want = _desired(st, disable, enable, limit)
            if want is None:
                continue
            plan["writes"].append(
                {
                    "control": CONTROL,
                    "path": f"{st['path']}/disable",
                    "cpu": cpu,
                    "label": f"cpu{cpu} {st['state']} ({st['name'] or 'name unreadable'}) disable",
                    "current": st["disable"],
                    "target": want,
                    "compare": "exact",
                }
            )
    return plan
