# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_apply renders `template` as kubernetes.core.k8s does, without its deprecations.

kubernetes.core 6.x's action reads and sets the templar's Jinja `environment` (deprecated in
ansible-core 2.19, removed in 2.23) and deep-copies the task variables per file. The collection's
action (which runs kubernetes.core's module, not its action) renders through the templar's public
API instead; these tests render the same files both ways with ansible's real Templar, ours and
kubernetes.core's installed action, and compare, and fail on any deprecation our path emits.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.utils.display import Display
from ansible_collections.kubernetes.core.plugins.action.k8s import ActionModule as KubernetesCoreAction
from ansible_collections.poweraware.k8s.plugins.action import k8s_apply

TEMPLATES = {
    # trim_blocks (on by default in kubernetes.core): the {% %} lines leave no empty line behind.
    "blocks.yml.j2": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}\n  namespace: {{ ns }}\ndata:\n"
        "{% for key, value in entries.items() %}\n  {{ key }}: {{ value | to_json }}\n{% endfor %}\n"
    ),
    # Two documents, one of them empty (skipped), and a list of objects.
    "two.yml.j2": (
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ ns }}\n---\n"
        "{% if false %}\nkind: Nothing\n{% endif %}\n---\napiVersion: v1\nkind: Service\n"
        "metadata: {name: s, namespace: {{ ns }}}\nspec: {ports: [{port: {{ port | int }}}]}\n"
    ),
    # Other delimiters for a file whose text holds {{ }} of its own (a Prometheus rule, say).
    "square.yml.j2": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '[[ name ]]', namespace: '[[ ns ]]'}\n"
        "data: {rule: '{{ $labels.node }} is [[ port ]]'}\n"
    ),
    "empty.yml.j2": "{% if false %}\nkind: Nothing\n{% endif %}\n",
}
VARS = {"name": "power", "ns": "monitoring", "entries": {"a": 1, "b": "two words"}, "port": "9100"}


class _Task:
    def __init__(self, args):
        self.args = args
        self.action = "kubernetes.core.k8s"


def _action(tmp_path, args, cls=k8s_apply.ActionModule):
    for name, text in TEMPLATES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    loader = DataLoader()
    instance = object.__new__(cls)
    instance._loader = loader
    instance._templar = Templar(loader=loader, variables=VARS)
    instance._task = _Task(args)
    instance._find_needle = lambda kind, name: str(tmp_path / name)
    return instance


def _render(cls, instance, template):
    args = {"template": template, "apply": True}
    cls.load_template(instance, template, args, dict(VARS))
    return args


@pytest.fixture
def deprecations(monkeypatch):
    seen = []
    monkeypatch.setattr(Display, "deprecated", lambda self, msg, *a, **k: seen.append(msg))
    return seen


@pytest.mark.parametrize(
    "template",
    [
        "blocks.yml.j2",
        ["blocks.yml.j2", "two.yml.j2"],
        [{"path": "square.yml.j2", "variable_start_string": "[[", "variable_end_string": "]]"}],
        [{"path": "blocks.yml.j2", "trim_blocks": False, "newline_sequence": "\\n"}],
    ],
    ids=["one-file", "several-files", "own-delimiters", "no-trim"],
)
def test_renders_what_kubernetes_core_renders_without_a_deprecation(tmp_path, deprecations, template):
    ours = _render(k8s_apply.ActionModule, _action(tmp_path, {"template": template}), template)
    assert deprecations == []
    theirs = _render(KubernetesCoreAction, _action(tmp_path, {"template": template}, KubernetesCoreAction), template)
    # kubernetes.core 6.2 (ansible 12's) also passes an empty YAML document on as None; 6.6
    # (ansible 14's) drops it, as this action does with either.
    theirs["definition"] = [d for d in theirs["definition"] if d is not None]
    assert ours == theirs
    assert "template" not in ours  # the module is given definitions, as kubernetes.core does


def test_a_file_that_renders_empty_gives_no_object(tmp_path, deprecations):
    # (kubernetes.core 6.2's own path fails here: "'NoneType' object has no attribute 'read'".)
    args = _render(k8s_apply.ActionModule, _action(tmp_path, {}), ["empty.yml.j2", "blocks.yml.j2"])
    assert [d["kind"] for d in args["definition"]] == ["ConfigMap"]
    assert _render(k8s_apply.ActionModule, _action(tmp_path, {}), "empty.yml.j2")["definition"] == []


def test_the_rendered_objects_are_the_files_documents(tmp_path, deprecations):
    args = _render(k8s_apply.ActionModule, _action(tmp_path, {}), ["blocks.yml.j2", "two.yml.j2"])
    assert args["definition"] == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "power", "namespace": "monitoring"},
            "data": {"a": 1, "b": "two words"},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s", "namespace": "monitoring"},
            "spec": {"ports": [{"port": 9100}]},
        },
    ]
    square = _render(
        k8s_apply.ActionModule,
        _action(tmp_path, {}),
        {"path": "square.yml.j2", "variable_start_string": "[[", "variable_end_string": "]]"},
    )
    assert square["definition"][0]["data"] == {"rule": "{{ $labels.node }} is 9100"}


def test_a_definition_given_beside_the_template_is_kept_as_kubernetes_core_keeps_it(tmp_path, deprecations):
    instance = _action(tmp_path, {"template": "two.yml.j2", "definition": {"kind": "Given"}})
    args = {"template": "two.yml.j2", "definition": {"kind": "Given"}}
    k8s_apply.ActionModule.load_template(instance, "two.yml.j2", args, dict(VARS))
    assert args["template"] == "two.yml.j2"
    assert [d["kind"] for d in args["definition"]] == ["Namespace", "Service"]


def test_a_newline_sequence_that_is_no_line_break_is_refused_with_the_file_and_the_fix(tmp_path, deprecations):
    with pytest.raises(AnsibleActionFail, match=r"blocks.yml.j2: newline_sequence '\\\\t' is not a line break"):
        _render(
            k8s_apply.ActionModule,
            _action(tmp_path, {}),
            [{"path": "blocks.yml.j2", "newline_sequence": "\\t"}],
        )
