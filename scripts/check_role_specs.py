"""Fail when a role's defaults/main.yml and meta/argument_specs.yml disagree.

Every variable in defaults must be declared in the options of an entry point (`main`, or the
entry point of the tasks file that uses it, for roles included with tasks_from), every option that
is not required must have a default in defaults/main.yml with the same value (when the spec states
one), and an option declared by two entry points must be declared alike.
"""

import pathlib
import sys

import yaml


def check_role(role: pathlib.Path) -> list[str]:
    problems = []
    defaults_file = role / "defaults" / "main.yml"
    spec_file = role / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        return [f"{role.name}: missing meta/argument_specs.yml"]
    defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.is_file() else {}
    defaults = defaults or {}
    spec = yaml.safe_load(spec_file.read_text()) or {}
    options: dict = {}
    for entry, entry_spec in (spec.get("argument_specs") or {}).items():
        for name, opt in ((entry_spec or {}).get("options") or {}).items():
            if name in options and options[name] != opt:
                problems.append(f"{role.name}: {name!r} is declared differently in entry point {entry!r}")
            options.setdefault(name, opt)
    for name in defaults:
        if name not in options:
            problems.append(f"{role.name}: defaults/main.yml has {name!r}, argument_specs does not")
    for name, opt in options.items():
        opt = opt or {}
        if opt.get("required"):
            if name in defaults:
                problems.append(f"{role.name}: {name!r} is required but has a default")
            continue
        if name not in defaults:
            problems.append(f"{role.name}: option {name!r} has no value in defaults/main.yml")
        elif "default" in opt and opt["default"] != defaults[name]:
            problems.append(
                f"{role.name}: {name!r} default differs: spec {opt['default']!r} vs defaults {defaults[name]!r}"
            )
    return problems


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent / "roles"
    roles = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    problems = [msg for role in roles for msg in check_role(role)]
    for msg in problems:
        print(msg, file=sys.stderr)
    print(f"checked {len(roles)} roles: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
