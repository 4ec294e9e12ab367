"""The small machines the node power stage tests run on: in-memory sysfs trees (memory_sysfs.py) with
cpufreq policies, uncore and C-states, writes that fail on cue, and the state files they leave."""

from __future__ import annotations

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import Topology
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpufreq_plan import Request, plan_present
from memory_sysfs import MemorySysfs, machine

LIMIT = "class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
WINDOW = "class/powercap/intel-rapl:0/constraint_0_time_window_us"
UNCORE = "devices/system/cpu/intel_uncore_frequency/package_00_die_00"


def Acc(files=None, write_errors=None, read_errors=None, clamp=None):  # noqa: N802 - reads like a class
    """memory_sysfs.MemorySysfs under the short name these tests use."""
    return MemorySysfs(files, write_errors=write_errors, clamp=clamp, read_errors=read_errors)


def step(path, target, current=None, label=None, **extra):
    return {"control": "test", "path": path, "target": target, "current": current, "label": label or path, **extra}


CPU = "devices/system/cpu"
P0 = f"{CPU}/cpufreq/policy0"
P2 = f"{CPU}/cpufreq/policy2"
MIN, MAX, GOV, EPP = "scaling_min_freq", "scaling_max_freq", "scaling_governor", "energy_performance_preference"
UNC = f"{CPU}/intel_uncore_frequency/package_00_die_00"


class Sysfs(MemorySysfs):
    """MemorySysfs whose n-th write of a path fails (``fail``: {path: {n: exception}}), after ``hook``."""

    def __init__(self, base, fail=None, hook=None):
        super().__init__(base.files, base.links)
        self.fail = fail or {}
        self.hook = hook
        self.count = {}

    def write(self, rel, value):
        self.count[rel] = self.count.get(rel, 0) + 1
        exc = self.fail.get(rel, {}).get(self.count[rel])
        if exc is not None:
            if self.hook is not None:
                self.hook()
            raise exc
        super().write(rel, value)


def cstate_files(cpus=(0, 1, 2, 3), disabled=()):
    files = {f"{CPU}/cpuidle/current_driver": "intel_idle", f"{CPU}/cpuidle/current_governor": "menu"}
    for cpu in cpus:
        for k, (name, latency) in enumerate((("POLL", 0), ("C1", 2), ("C6", 170))):
            rel = f"{CPU}/cpu{cpu}/cpuidle/state{k}"
            files.update(
                {
                    f"{rel}/name": name,
                    f"{rel}/desc": f"{name} idle",
                    f"{rel}/latency": latency,
                    f"{rel}/residency": latency * 3,
                    f"{rel}/disable": "1" if (cpu, name) in disabled else "0",
                }
            )
    return files


UNCORE_FILES = {
    f"{UNC}/min_freq_khz": "800000",
    f"{UNC}/max_freq_khz": "2400000",
    f"{UNC}/initial_min_freq_khz": "800000",
    f"{UNC}/initial_max_freq_khz": "2400000",
    f"{UNC}/current_freq_khz": "1800000",
}


def node(online=None, extra=None, values0=None, values2=None, epp="balance_performance", **kw):
    """policy0: CPUs 0-1, policy2: CPUs 2-3; 800-3900 MHz, current 800-3900, powersave, EPP."""
    return Sysfs(
        machine(
            online=online,
            policies=[
                ("policy0", [0, 1], {"epp": epp, "values": values0}),
                ("policy2", [2, 3], {"epp": epp, "values": values2}),
            ],
            extra=extra,
        ),
        **kw,
    )


def state_file(tmp_path):
    return str(tmp_path / "state" / "cpu_power_state.json")


def text(path):
    with open(path) as handle:
        return handle.read()


STATE_MAX_EPP = """{
  "policies": {
    "policy0": {
      "cpus": "0-1",
      "order": [
        "scaling_max_freq",
        "energy_performance_preference"
      ],
      "original": {
        "energy_performance_preference": "balance_performance",
        "scaling_max_freq": "3900000"
      },
      "path": "devices/system/cpu/cpufreq/policy0"
    },
    "policy2": {
      "cpus": "2-3",
      "order": [
        "scaling_max_freq",
        "energy_performance_preference"
      ],
      "original": {
        "energy_performance_preference": "balance_performance",
        "scaling_max_freq": "3900000"
      },
      "path": "devices/system/cpu/cpufreq/policy2"
    }
  },
  "version": 1
}
"""

EMPTY_STATE = '{\n  "policies": {},\n  "version": 1\n}\n'


# the diff tables' first line (power_report.diff_table)
HEADER = " cpu policy      min_mhz  max_mhz governor     epp"


def planned(acc, **request):
    """The topology and the P-state plan of ``request`` on ``acc``."""
    topo = Topology(acc)
    return topo, plan_present(topo, Request(**request))


def rollback_item(acc, name, current, changes):
    """A policy item as execute journals it: ``changes`` written over ``current``."""
    topo = Topology(acc)
    pol = topo.policies[name]
    return topo, {"policy": pol, "cpus": [], "current": current, "target": dict(changes), "changes": dict(changes)}
