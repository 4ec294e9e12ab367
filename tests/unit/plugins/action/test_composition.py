# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_apply and k8s_info_many run kubernetes.core's modules, not its actions.

Each action is an ActionBase of its own that runs the module through ActionBase._execute_module
(replaced here by a recorder answering as the module does) after doing what kubernetes.core's
action did for it: the play's module_defaults, the kubeconfig and `src` found on the controller
when the module runs there, `template` rendered. The check-mode prediction and its run identity go
through the same run(). Against a real API server they run in every role (tests/integration).
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar
from ansible_collections.poweraware.k8s.plugins.action import k8s_apply, k8s_info_many
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.dry_run import FACT

NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tas"}}
SA = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tas", "namespace": "tas"}}
NOT_FOUND = {
    "error": {"msg": 'Failed to create object: b\'{"message":"namespaces \\"tas\\" not found","code":404}\''},
}


class Task:
    def __init__(self, args, module_defaults=None, action="poweraware.k8s.k8s_apply"):
        self.args = args
        self.module_defaults = module_defaults or []
        self.action = action
        self.async_val = 0
        self.check_mode = False


class Recorder:
    """ActionBase._execute_module's contract: the module's result for (module_name, module_args)."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        self.calls.append((module_name, module_args))
        return self.answer(module_args) if callable(self.answer) else dict(self.answer)


def _action(cls, args, *, transport="ssh", check_mode=False, answer=None, module_defaults=None, files=None):
    loader = DataLoader()
    connection = SimpleNamespace(transport=transport, _shell=SimpleNamespace(tmpdir=None))
    task = Task(args, module_defaults)
    task.check_mode = check_mode
    instance = cls(task, connection, SimpleNamespace(check_mode=check_mode), loader, Templar(loader=loader), None)
    instance._execute_module = Recorder(answer if answer is not None else {"changed": True})
    files = files or {}

    def find_needle(kind, name):
        """ActionBase._find_needle's contract: the file's path, or AnsibleError."""
        if name in files.get(kind, {}):
            return files[kind][name]
        if os.path.isabs(name) and os.path.exists(name):
            return name
        raise AnsibleError(f"Could not find or access '{name}' on the Ansible Controller.")

    instance._find_needle = find_needle
    return instance


def test_the_actions_are_ansible_core_actions_not_kubernetes_cores():
    for module in (k8s_apply, k8s_info_many):
        assert module.ActionModule.__bases__ == (ActionBase,)
        assert not any(
            base.__module__.startswith("ansible_collections.kubernetes") for base in module.ActionModule.__mro__
        )


def test_k8s_apply_runs_kubernetes_cores_module_with_the_tasks_options():
    instance = _action(k8s_apply.ActionModule, {"definition": NS, "apply": True, "kubeconfig": "/etc/k/admin.conf"})
    result = instance.run(task_vars={})
    assert result == {"changed": True}
    # on a remote host the module reads the kubeconfig there: the path as given
    assert instance._execute_module.calls == [
        ("kubernetes.core.k8s", {"definition": NS, "apply": True, "kubeconfig": "/etc/k/admin.conf"})
    ]
    assert instance._task.action == "poweraware.k8s.k8s_apply"  # never rewritten


def test_k8s_info_many_runs_its_own_module_with_k8s_infos_defaults():
    defaults = [{"group/kubernetes.core.k8s": {"kubeconfig": "/etc/k/group.conf", "context": "c1"}}]
    instance = _action(k8s_info_many.ActionModule, {"queries": {"a": {"kind": "Pod"}}}, module_defaults=defaults)
    instance.run(task_vars={})
    assert instance._execute_module.calls == [
        (
            "poweraware.k8s.k8s_info_many",
            {"queries": {"a": {"kind": "Pod"}}, "kubeconfig": "/etc/k/group.conf", "context": "c1"},
        )
    ]


def test_on_the_controller_a_relative_kubeconfig_and_src_are_found_in_files(tmp_path):
    config, manifest = tmp_path / "admin.conf", tmp_path / "objects.yml"
    config.write_text("apiVersion: v1\nkind: Config\n")
    manifest.write_text("kind: Namespace\n")
    files = {"files": {"admin.conf": str(config), "objects.yml": str(manifest)}}
    instance = _action(
        k8s_apply.ActionModule, {"src": "objects.yml", "kubeconfig": "admin.conf"}, transport="local", files=files
    )
    instance.run(task_vars={})
    ((_name, args),) = instance._execute_module.calls
    assert args == {"src": str(manifest), "kubeconfig": str(config)}
    # several kubeconfigs, kubernetes.core's ':' list; URLs and remote hosts: as given
    instance = _action(k8s_apply.ActionModule, {"kubeconfig": f"admin.conf:{config}"}, transport="local", files=files)
    instance.run(task_vars={})
    assert instance._execute_module.calls[0][1]["kubeconfig"] == f"{config}:{config}"
    for transport, src in (("local", "https://example.org/o.yml"), ("ssh", "objects.yml")):
        instance = _action(k8s_apply.ActionModule, {"src": src}, transport=transport, files=files)
        instance.run(task_vars={})
        assert instance._execute_module.calls[0][1]["src"] == src


def test_a_vault_encrypted_kubeconfig_on_the_controller_reaches_the_module_decrypted(tmp_path, monkeypatch):
    config = tmp_path / "admin.conf"
    config.write_text("$ANSIBLE_VAULT;1.1;AES256\n...")
    instance = _action(
        k8s_apply.ActionModule,
        {"kubeconfig": "admin.conf"},
        transport="local",
        files={"files": {"admin.conf": str(config)}},
    )
    seen = []
    monkeypatch.setattr(
        instance._loader, "get_real_file", lambda path, decrypt=True: seen.append((path, decrypt)) or "/tmp/decrypted"
    )
    instance.run(task_vars={})
    assert seen == [(str(config), True)]
    assert instance._execute_module.calls[0][1]["kubeconfig"] == "/tmp/decrypted"


@pytest.mark.parametrize("cls", [k8s_apply.ActionModule, k8s_info_many.ActionModule])
def test_a_kubeconfig_missing_on_the_controller_is_refused_naming_it_and_the_fix(cls):
    instance = _action(cls, {"kubeconfig": "/nonexistent/admin.conf", "queries": {}}, transport="local")
    with pytest.raises(AnsibleActionFail) as caught:
        instance.run(task_vars={})
    assert str(caught.value) == (
        "kubeconfig /nonexistent/admin.conf: cannot be found or read on the controller, where this task's module "
        "runs (a local connection); fix: give the path of an existing file, absolute or relative to the role's or "
        "the playbook's files/ directory."
    )
    assert instance._execute_module.calls == []


@pytest.mark.parametrize("value", [["a", "b"], 5])
def test_a_kubeconfig_that_is_no_path_or_mapping_is_refused(value):
    instance = _action(k8s_apply.ActionModule, {"kubeconfig": value})
    with pytest.raises(AnsibleActionFail, match=rf"kubeconfig must be the path .* got {type(value).__name__}; fix:"):
        instance.run(task_vars={})


def test_an_inline_kubeconfig_mapping_is_passed_on():
    inline = {"apiVersion": "v1", "kind": "Config"}
    instance = _action(k8s_apply.ActionModule, {"kubeconfig": inline}, transport="local")
    instance.run(task_vars={})
    assert instance._execute_module.calls[0][1]["kubeconfig"] == inline


def test_a_template_is_rendered_into_definition_and_one_that_renders_nothing_runs_no_module(tmp_path):
    (tmp_path / "ns.yml.j2").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ ns }}\n")
    (tmp_path / "none.yml.j2").write_text("{% if false %}\nkind: Nothing\n{% endif %}\n")
    templates = {"templates": {"ns.yml.j2": str(tmp_path / "ns.yml.j2"), "none.yml.j2": str(tmp_path / "none.yml.j2")}}
    instance = _action(k8s_apply.ActionModule, {"template": "ns.yml.j2", "apply": True}, files=templates)
    instance.run(task_vars={"ns": "tas"})
    assert instance._execute_module.calls == [
        (
            "kubernetes.core.k8s",
            {"apply": True, "definition": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tas"}}]},
        )
    ]
    instance = _action(k8s_apply.ActionModule, {"template": ["none.yml.j2"]}, files=templates)
    assert instance.run(task_vars={}) == {"changed": False}
    assert instance._execute_module.calls == []


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("missing.yml.j2", "template missing.yml.j2: cannot be found or read on the controller; fix: name a file"),
        (
            5,
            "template must be a template file name, a mapping with its path and Jinja options, or a list of "
            "them, got int",
        ),
        ([{"trim_blocks": False}], "template: the entry with options ['trim_blocks'] has no path; fix: add path"),
        (
            [{"path": "x.j2", "variable_start_string": 5}],
            "template x.j2: variable_start_string must be text, got int 5",
        ),
        ([7], "template: each entry must be a file name or a mapping with its path, got int"),
    ],
)
def test_a_bad_template_is_refused_naming_it_and_the_fix(template, message):
    instance = _action(k8s_apply.ActionModule, {"template": template})
    with pytest.raises(AnsibleActionFail) as caught:
        instance.run(task_vars={})
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_template_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "latin.yml.j2").write_bytes("kind: Caf\xe9\n".encode("latin-1"))
    files = {"templates": {"latin.yml.j2": str(tmp_path / "latin.yml.j2")}}
    instance = _action(k8s_apply.ActionModule, {"template": "latin.yml.j2"}, files=files)
    with pytest.raises(
        AnsibleActionFail, match=r"template latin.yml.j2 \(.*\) is not UTF-8 text .* fix: save it as UTF-8"
    ):
        instance.run(task_vars={})


def test_a_missing_kubernetes_core_is_named_with_the_fix(monkeypatch):
    from ansible_collections.poweraware.k8s.plugins.plugin_utils import _k8s_action

    monkeypatch.setattr(_k8s_action.importlib.util, "find_spec", lambda name: None)
    for cls, plugin in ((k8s_apply.ActionModule, "k8s_apply"), (k8s_info_many.ActionModule, "k8s_info_many")):
        instance = _action(cls, {"definition": NS})
        result = instance.run(task_vars={})
        assert result["failed"] and result["msg"].startswith(f"poweraware.k8s.{plugin} runs kubernetes.core's modules")
        assert "ansible-galaxy collection install kubernetes.core" in result["msg"]
        assert instance._execute_module.calls == []


# --- the check-mode prediction, through run() ----------------------------------------------------


def _dry_run(task_vars):
    instance = _action(
        k8s_apply.ActionModule,
        {"definition": [SA], "apply": True},
        check_mode=True,
        answer=lambda args: dict(NOT_FOUND, changed=False),
    )
    return instance, instance.run(task_vars=task_vars)


def test_a_dry_run_predicts_what_an_earlier_task_of_this_run_creates():
    earlier = {"run": k8s_apply.run_id(), "namespaces": ["tas"], "kinds": []}
    instance, result = _dry_run({"ansible_facts": {FACT: earlier}})
    assert not result.get("failed"), result
    assert result["changed"] and result["predicted"] == [
        "ServiceAccount tas/tas: would create (predicted, not dry-run: namespace tas is created by this run)"
    ]
    assert result["ansible_facts"] == {FACT: earlier}
    # the module was asked to continue past single objects, to find every prediction
    ((name, args),) = instance._execute_module.calls
    assert name == "kubernetes.core.k8s" and args["continue_on_error"] is True


def test_a_plan_left_by_another_run_is_ignored():
    _instance, result = _dry_run({"ansible_facts": {FACT: {"run": "another-run", "namespaces": ["tas"]}}})
    assert result["failed"]
    assert "no task of this run creates namespace tas" in result["msg"]
    assert result["ansible_facts"][FACT]["run"] == k8s_apply.run_id()


def test_a_dry_run_records_the_namespaces_it_applies_under_this_runs_identity():
    instance = _action(
        k8s_apply.ActionModule,
        {"definition": [NS, SA]},
        check_mode=True,
        answer={"changed": True, "result": {"results": [{"changed": True}, dict(NOT_FOUND, changed=False)]}},
    )
    result = instance.run(task_vars={})
    assert result["ansible_facts"] == {FACT: {"run": k8s_apply.run_id(), "namespaces": ["tas"], "kinds": []}}
    assert len(result["predicted"]) == 1


# --- the run identity ----------------------------------------------------------------------------


def test_the_run_identity_is_the_same_in_every_worker_of_a_run():
    # ansible-playbook runs each task in a worker forked from its own process (the fork start
    # method, which this test also pins): a forked child names the run as its parent does.
    from ansible.utils.multiprocessing import context

    assert context.get_start_method() == "fork"
    parent = k8s_apply.run_id()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's coverage is not collected
        os.write(write, k8s_apply.run_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        assert pipe.read() == parent
    assert k8s_apply.run_id() == parent


def test_each_run_has_its_own_identity_whatever_its_pid(monkeypatch):
    # Another ansible-playbook process: another controller temporary directory, another identity.
    code = "from ansible_collections.poweraware.k8s.plugins.action import k8s_apply; print(k8s_apply.run_id())"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    argv = [sys.executable, "-c", code]
    runs = [
        subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=120)  # noqa: S603
        for run in ("first", "second")
    ]
    others = {run.stdout.strip() for run in runs}
    assert len(others) == 2 and k8s_apply.run_id() not in others
    # The same PID (a container's ansible-playbook, run after run) with another run's directory:
    # another identity. The identity is 16 hex digits, not the controller's path.
    first = k8s_apply.run_id()
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", C.DEFAULT_LOCAL_TMP + "-next-run")
    assert k8s_apply.run_id() != first
    assert len(first) == 16 and int(first, 16) >= 0
