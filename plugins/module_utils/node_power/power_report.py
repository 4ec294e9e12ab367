# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node power run reports: per-policy results in MHz, per-CPU diff tables, the other
controls' settings before and after.

Pure logic without Ansible imports; Python 3.9 compatible.
"""

from __future__ import annotations

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import (
    EPP,
    GOV,
    MAX,
    MIN,
    normalize_epp,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import khz_to_mhz
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.writes import step_after


def mhz(value):
    return khz_to_mhz(value)


def diff_table(topo, results, after_key="after"):
    """Per-CPU before/after tables (one line per CPU) for Ansible's diff output."""
    header = f"{'cpu':>4} {'policy':<10} {'min_mhz':>8} {'max_mhz':>8} {'governor':<12} epp"

    def line(cpu, name, values):
        epp = normalize_epp(values.get(EPP)) if values.get(EPP) is not None else "-"
        return (
            f"{cpu:>4} {name:<10} {str(mhz(values.get(MIN))):>8} {str(mhz(values.get(MAX))):>8} "
            f"{str(values.get(GOV) or '-'):<12} {epp}"
        )

    before = [header]
    after = [header]
    rows = []
    for res in results:
        item = res["item"]
        for cpu in item["cpus"]:
            rows.append((cpu, item["policy"]["name"], item["current"], res[after_key]))
    for cpu, name, cur, new in sorted(rows, key=lambda r: r[0]):
        before.append(line(cpu, name, cur))
        after.append(line(cpu, name, new))
    return {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}


def summarize(topo, results):
    """Per-policy result entries for the module's return value (MHz, names)."""
    out = []
    for res in results:
        item = res["item"]

        def view(values):
            return {
                "min_mhz": mhz(values.get(MIN)),
                "max_mhz": mhz(values.get(MAX)),
                "governor": values.get(GOV),
                "epp": normalize_epp(values.get(EPP)) if values.get(EPP) is not None else None,
            }

        out.append(
            {
                "policy": item["policy"]["name"],
                "cpus": format_cpulist(item["cpus"]),
                "changed": sorted(item["changes"]),
                "before": view(item["current"]),
                "after": view(res["after"]),
            }
        )
    return out


def control_summary(plan, changed_steps):
    changed = [s["label"] for s in plan["writes"] if s in changed_steps]
    return {
        "available": plan["available"],
        "changed": changed,
        "settings": [{"attribute": s["label"], "before": s["current"], "after": step_after(s)} for s in plan["writes"]],
        "messages": plan["messages"],
    }


def steps_diff(steps):
    before = [f"{s['label']}: {s['current']}" for s in steps]
    after = [f"{s['label']}: {step_after(s)}" for s in steps]
    return before, after


def combined_diff(topo, results, steps):
    diff = diff_table(topo, results) if results else {"before": "", "after": ""}
    if steps:
        before, after = steps_diff(steps)
        diff = {
            "before": diff["before"] + "\n".join(before) + "\n",
            "after": diff["after"] + "\n".join(after) + "\n",
        }
    return diff
