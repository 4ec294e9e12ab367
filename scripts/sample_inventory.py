"""The sample inventory's role variables, generated from the roles' meta/argument_specs.yml.

Each file of ``inventory/sample/group_vars/all`` but ``all.yml`` (the site's own settings, kept by
hand) lists, for the roles of one playbook in the order the playbook runs them, every option of
every entry point: its description, then its default, commented out, so a user uncomments what they
change and a default that moves later still reaches everyone else. The specs are the one source:
``--check`` fails when a file differs from what they give (``make sample-inventory`` writes them).

    python scripts/sample_inventory.py          # write the files
    python scripts/sample_inventory.py --check  # exit 1 and name the stale files
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import textwrap

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "inventory" / "sample" / "group_vars" / "all"
WIDTH = 100

# file -> (what runs the roles and where, the roles in the order the playbook runs them)
FILES = {
    "node_power.yml": (
        "Node power (playbooks/node_power.yml, docs/node-power.md): runs on kube_node.",
        ("appqos_certs", "cpu_power"),
    ),
    "cluster_stack.yml": (
        "Cluster stack (playbooks/cluster_stack.yml, docs/cluster-stack.md, docs/telemetry.md): runs once on "
        "kube_control_plane[0].",
        (
            "nfd",
            "collectd",
            "kube_state_metrics",
            "prometheus",
            "prometheus_adapter",
            "tas",
            "tas_policy",
            "descheduler",
            "power_demo",
        ),
    ),
    "scheduler_extender.yml": (
        "Scheduler extenders (playbooks/scheduler_extender.yml, docs/scheduler-extender.md): every "
        "kube_control_plane node, one at a time.",
        ("power_extender", "scheduler_extender"),
    ),
    "power_models.yml": (
        "Power models (playbooks/power_models.yml, docs/power-models.md): on the controller.",
        ("power_models",),
    ),
    "peaks.yml": (
        "Peaks, the energy-aware scheduler plugin (playbooks/peaks.yml, docs/peaks.md): off unless "
        "poweraware_enable_peaks is true.",
        ("peaks",),
    ),
    "pod_power.yml": (
        "Per-pod power profiles (playbooks/pod_power.yml, docs/pod-power.md): off unless poweraware_enable_pod_power "
        "is true; the cluster objects once on kube_control_plane[0], the agents on the hosts of pod_power_nodes.",
        ("pod_power",),
    ),
}

# Ansible's documentation markup, as plain text in a YAML comment
_MARKUP = re.compile(r"\b([CIBMOVERU])\(([^()]*)\)")
_LINK = re.compile(r"\bL\(([^,()]*),[^()]*\)")


def plain(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    return _MARKUP.sub(lambda m: f"`{m[2]}`" if m[1] in "CV" else m[2], text)


def comment(text: str, prefix: str = "# ") -> list[str]:
    lines = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(paragraph, WIDTH - len(prefix), break_on_hyphens=False) or [""]
    return [(prefix + line).rstrip() for line in lines]


def specs(role: str) -> dict:
    return yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def options(role: str, entries: dict | None = None) -> dict[str, dict]:
    """Every entry point's options, ``main``'s first, each once (check_role_specs.py makes sure an
    option two entry points declare is declared alike)."""
    entries = entries if entries is not None else specs(role)
    found: dict[str, dict] = {}
    for entry in sorted(entries, key=lambda name: name != "main"):
        for name, option in ((entries[entry] or {}).get("options") or {}).items():
            found.setdefault(name, option or {})
    return found


def role_block(role: str) -> list[str]:
    entries = specs(role)
    main = entries["main"]
    lines = [f"# ---- {role} " + "-" * (WIDTH - 8 - len(role))]
    lines += comment(plain(main["short_description"].rstrip(".") + "."))
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    for name, option in options(role, entries).items():
        description = option.get("description") or ""
        if isinstance(description, list):
            description = " ".join(description)
        lines.append("")
        lines += comment(plain(" ".join(description.split())))
        if option.get("required"):
            lines.append(f"# {name}:   # required: no default")
            continue
        value = defaults.get(name, option.get("default"))
        dumped = yaml.safe_dump({name: value}, default_flow_style=False, sort_keys=False, width=WIDTH - 2)
        lines += [f"# {line}" for line in dumped.rstrip("\n").split("\n")]
    return lines


def render(name: str) -> str:
    what, roles = FILES[name]
    lines = ["---"]
    lines += comment(what)
    lines += [
        "# Generated from each role's meta/argument_specs.yml (scripts/sample_inventory.py; make sample-inventory):",
        "# every variable with its description and its default, commented out. Uncomment what you change.",
    ]
    for role in roles:
        lines += ["", *role_block(role)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is not what the specs give")
    args = parser.parse_args(argv)
    stale = []
    for name in FILES:
        path = SAMPLE / name
        text = render(name)
        current = path.read_text() if path.is_file() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(
            f"stale: {', '.join(stale)} differ from the roles' meta/argument_specs.yml; "
            "run `make sample-inventory` and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
