# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The play's module_defaults reach k8s_apply and k8s_info_many by two roads.

- `group/poweraware.k8s.k8s` (meta/runtime.yml's action group: both actions, and kubernetes.core's
  group through extend_group): ansible-core itself puts the defaults into the task's arguments.
- `group/kubernetes.core.k8s`, which the roles' documentation and users' plays name: kubernetes.core's
  group cannot list another collection's actions, so the actions read those defaults from the task's
  module_defaults (plugin_utils/_k8s_action.with_module_defaults), as ansible-core would for
  kubernetes.core.k8s and kubernetes.core.k8s_info.

The first tests check the merge (precedence, templating) in process; the last one runs
ansible-playbook on the controller, with no cluster: each task's kubeconfig is a file that does not
exist, which the action, finding it on the controller (a local connection), refuses by name, so the
message says which default reached which task.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.plugin_utils._k8s_action import with_module_defaults

REPO_ROOT = pathlib.Path(__file__).resolve().parents[4]
COLLECTIONS_DIR = REPO_ROOT / ".cache" / "collections"


class Task:
    def __init__(self, args, module_defaults):
        self.args, self.module_defaults = args, module_defaults


def _merge(args, module_defaults, module="kubernetes.core.k8s", variables=None):
    templar = Templar(loader=DataLoader(), variables=variables or {})
    return with_module_defaults(Task(args, module_defaults), templar, module)


def test_the_task_wins_over_the_modules_own_defaults_which_win_over_the_groups():
    layers = [
        {"group/kubernetes.core.k8s": {"kubeconfig": "/play.conf", "context": "play", "validate_certs": False}},
        {"kubernetes.core.k8s": {"context": "module"}, "group/kubernetes.core.k8s": {"kubeconfig": "/block.conf"}},
    ]
    merged = _merge({"definition": {"kind": "Namespace"}, "validate_certs": True}, layers)
    # the inner layer (a block's) replaces the play's entry for the group, as ansible-core does
    assert merged == {
        "kubeconfig": "/block.conf",
        "context": "module",
        "definition": {"kind": "Namespace"},
        "validate_certs": True,
    }


def test_the_legacy_group_k8s_and_k8s_infos_own_defaults_apply():
    layers = [
        {"group/ansible.builtin.k8s": {"kubeconfig": "/legacy.conf"}, "kubernetes.core.k8s_info": {"context": "i"}}
    ]
    assert _merge({}, layers, module="kubernetes.core.k8s_info") == {"kubeconfig": "/legacy.conf", "context": "i"}
    # another module's own defaults do not apply, nor does this collection's group (ansible-core put those in the args)
    layers = [{"kubernetes.core.k8s_info": {"context": "i"}, "group/poweraware.k8s.k8s": {"context": "ours"}}]
    assert _merge({}, layers) == {}


def test_defaults_are_rendered_and_one_the_task_overrides_is_not():
    layers = [
        {
            "group/kubernetes.core.k8s": {
                "kubeconfig": trust_as_template("{{ where }}/admin.conf"),
                "context": trust_as_template("{{ undefined_here }}"),
            }
        }
    ]
    merged = _merge({"context": "given"}, layers, variables={"where": "/etc/kubernetes"})
    assert merged == {"kubeconfig": "/etc/kubernetes/admin.conf", "context": "given"}
    # the whole entry as one template, as module_defaults allows
    layers = [{"group/kubernetes.core.k8s": trust_as_template("{{ k8s_auth }}")}]
    assert _merge({}, layers, variables={"k8s_auth": {"kubeconfig": "/x.conf"}}) == {"kubeconfig": "/x.conf"}


def test_a_default_that_is_no_mapping_is_refused_naming_the_entry():
    with pytest.raises(
        AnsibleActionFail, match=r"module_defaults group/kubernetes.core.k8s: must be a mapping .* got list"
    ):
        _merge({}, [{"group/kubernetes.core.k8s": ["kubeconfig"]}])


PLAYBOOK = """
- name: The roles' group, kubernetes.core's
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s: {kubeconfig: /nonexistent/core-group.conf}
  tasks:
    - {name: apply, poweraware.k8s.k8s_apply: {definition: {kind: Namespace}}, ignore_errors: true}
    - {name: info many, poweraware.k8s.k8s_info_many: {queries: {n: {kind: Namespace}}}, ignore_errors: true}
    - name: the task's own kubeconfig wins
      poweraware.k8s.k8s_apply: {definition: {kind: Namespace}, kubeconfig: /nonexistent/task.conf}
      ignore_errors: true

- name: This collection's group
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/poweraware.k8s.k8s: {kubeconfig: /nonexistent/our-group.conf}
  tasks:
    - {name: apply, poweraware.k8s.k8s_apply: {definition: {kind: Namespace}}, ignore_errors: true}
    - {name: info many, poweraware.k8s.k8s_info_many: {queries: {n: {kind: Namespace}}}, ignore_errors: true}
    - {name: kubernetes.core's own module, kubernetes.core.k8s_info: {kind: Namespace}, ignore_errors: true}

- name: A role's tasks, as the collection's playbooks include them, under a block's own defaults
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s: {kubeconfig: /nonexistent/core-group.conf}
  tasks:
    - {name: role, ansible.builtin.include_role: {name: applies}}
    - name: block
      module_defaults:
        group/kubernetes.core.k8s: {kubeconfig: /nonexistent/block.conf}
      block:
        - {name: role in block, ansible.builtin.include_role: {name: applies}}
"""
INCLUDES = ("role", "role in block")  # the include_role tasks themselves
ROLE_TASKS = """
- {name: apply, poweraware.k8s.k8s_apply: {definition: {kind: Namespace}}, ignore_errors: true}
"""


def test_group_defaults_reach_both_actions_through_ansible_playbook(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    (tmp_path / "roles" / "applies" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "applies" / "tasks" / "main.yml").write_text(ROLE_TASKS)
    env = {
        **os.environ,
        # this checkout; kubernetes.core from the `ansible` package beside ansible-core (sys.path)
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_DIR),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
    }
    playbook_cli = str(pathlib.Path(sys.executable).with_name("ansible-playbook"))
    argv = [
        playbook_cli,
        "-i",
        "localhost,",
        "-c",
        "local",
        "--check",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    result = subprocess.run(  # noqa: S603
        [*argv, str(playbook)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    report = json.loads(result.stdout)
    messages = [
        [
            (t["task"]["name"], t["hosts"]["localhost"].get("msg", ""))
            for t in play["tasks"]
            if t["task"]["name"] not in INCLUDES
        ]
        for play in report["plays"]
    ]
    expected = [
        [("apply", "core-group"), ("info many", "core-group"), ("the task's own kubeconfig wins", "task")],
        [("apply", "our-group"), ("info many", "our-group"), ("kubernetes.core's own module", "our-group")],
        [("applies : apply", "core-group"), ("applies : apply", "block")],
    ]
    for play, wanted in zip(messages, expected, strict=True):
        for (name, msg), (wanted_name, conf) in zip(play, wanted, strict=True):
            assert name == wanted_name
            assert f"/nonexistent/{conf}.conf" in msg, (name, msg, result.stderr[-2000:])
    ours = [msg for play in messages for name, msg in play if name != "kubernetes.core's own module"]
    assert all("cannot be found or read on the controller" in msg for msg in ours), ours
