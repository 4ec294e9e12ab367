"""The sample inventory says what the code reads: its role files are what the roles' specs give
(scripts/sample_inventory.py), and every variable its hand-kept all.yml names is read by a playbook,
a role or a plugin, or is one of Ansible's connection variables."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "sample_inventory.py"
SAMPLE = ROOT / "inventory" / "sample" / "group_vars" / "all"
CONNECTION = {"ansible_user", "ansible_ssh_private_key_file", "ansible_python_interpreter"}


def test_the_role_files_are_what_the_specs_give():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_variable_of_the_roles_is_in_the_sample_with_its_default():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import sample_inventory
    finally:
        sys.path.remove(str(SCRIPT.parent))
    compared = 0
    for name, (_what, roles) in sample_inventory.FILES.items():
        lines = (SAMPLE / name).read_text().splitlines()
        for role in roles:
            defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
            for variable, option in sample_inventory.options(role).items():
                starts = [i for i, line in enumerate(lines) if line.startswith(f"# {variable}:")]
                assert len(starts) == 1, (name, variable)
                if option.get("required"):
                    continue
                block = []
                for line in lines[starts[0] :]:
                    if not line.startswith("# "):
                        break
                    block.append(line[2:])
                # the commented-out default reads back as the role's default
                assert yaml.safe_load("\n".join(block)) == {variable: defaults[variable]}, (name, variable)
                compared += 1
    assert compared > 300  # every role's every default, not a few
    every_role = {p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    covered = {role for _what, roles in sample_inventory.FILES.values() for role in roles}
    assert every_role - covered == {"_common"}  # the private role's variables are the roles' own


def test_every_variable_all_yml_names_is_read_somewhere():
    text = (SAMPLE / "all.yml").read_text()
    named = set(re.findall(r"^#?\s*([a-z][a-z0-9_]*):", text, re.M))
    sources = [
        p.read_text()
        for d in ("playbooks", "roles", "plugins")
        for p in (ROOT / d).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts  # a used checkout has compiled files there
    ]
    unread = sorted(v for v in named - CONNECTION if not any(re.search(rf"\b{v}\b", s) for s in sources))
    assert unread == [], f"all.yml names variables nothing reads: {unread}"
