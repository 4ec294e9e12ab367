# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_apply: kubernetes.core.k8s, with a dry run that works on a new cluster.

Outside check mode this is kubernetes.core.k8s, unchanged: its action renders `template`, finds the
kubeconfig and runs the kubernetes.core.k8s module. In check mode the module's server-side dry run
cannot see what the run has not created: a namespaced object in a namespace an earlier task would
create, or a custom resource whose CRD an earlier task would install, fails with NotFound. Here
such an object is reported as "would create", predicted (not dry-run) and said so, when this run
applies that namespace or CRD; anything else keeps the server's error. The namespaces and CRDs a
dry run applies are remembered on the host (fact `_poweraware_dry_run_creates`) for later tasks,
so one mechanism serves every role (docs/site.md, "Dry run").
"""

from __future__ import annotations

import os
import time

from ansible_collections.poweraware.k8s.plugins.plugin_utils._k8s_action import (
    missing_kubernetes_core,
    with_group_defaults,
)

try:
    from ansible_collections.kubernetes.core.plugins.action.k8s import ActionModule as _K8sAction
except ImportError:  # kubernetes.core is not installed: say so when the action runs
    from ansible.plugins.action import ActionBase as _K8sAction

    _MISSING = missing_kubernetes_core("k8s_apply")
else:
    _MISSING = ""

try:  # ansible-core 2.19+: template text is rendered only when marked as trusted
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older cores render kubernetes.core's way
    trust_as_template = None

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.display import Display
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.dry_run import (
    FACT,
    classify,
    plan_from,
    planned_in,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.wait_progress import (
    REPORT_EVERY,
    Steps,
    goal,
    label,
    progress_line,
    step_length,
)

display = Display()

_MODULE = "kubernetes.core.k8s"


class ActionModule(_K8sAction):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        if _MISSING:
            return {"failed": True, "msg": _MISSING}
        # kubernetes.core's action renders templates only for, and runs the module named by, its
        # own action name.
        action, args = self._task.action, self._task.args
        self._task.action = _MODULE
        self._dry_run_vars = task_vars
        try:
            # The play's module_defaults for group/kubernetes.core.k8s (the kubeconfig) apply here as
            # they do to kubernetes.core.k8s: user plays written for the roles keep working.
            self._task.args = with_group_defaults(_MODULE, self._task, args, self._templar)
            return super().run(tmp, task_vars)
        finally:
            self._task.action, self._task.args = action, args

    def load_template(self, template, new_module_args, task_vars):
        """Render `template` as kubernetes.core 6.x does, through the templar's public API.

        kubernetes.core's own load_template reads and sets the templar's Jinja `environment`, which
        ansible-core 2.19 deprecates (an error from 2.23), and deep-copies every task variable for
        each file (which, through hostvars, also re-creates plugin loaders: a second deprecation).
        Here a copy of the templar renders each file with the file's overrides (trim_blocks on by
        default, as kubernetes.core and the template module have it); the arguments, the search path
        and the result (definition; template dropped when no definition was given) are
        kubernetes.core's, by its own helpers.
        """
        if trust_as_template is None:  # pragma: no cover - ansible-core < 2.19
            return super().load_template(template, new_module_args, task_vars)
        if isinstance(template, (str, dict)):
            template = [template]
        elif not isinstance(template, list):
            return super().load_template(template, new_module_args, task_vars)  # its own message
        items = [self.get_template_args(element) for element in template]
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        definitions = []
        for item in items:
            overrides = _template_overrides(item)
            with self.get_template_data(item["path"]) as data:
                rendered = templar.template(
                    trust_as_template(data),
                    preserve_trailing_newlines=True,
                    escape_backslashes=False,
                    overrides=overrides,
                )
            definitions.extend(_as_list(rendered or ""))
        if not self._task.args.get("definition"):
            new_module_args.pop("template", None)
        new_module_args["definition"] = definitions

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        module_args = module_args if module_args is not None else dict(self._task.args)
        if (
            module_name == _MODULE
            and not self._play_context.check_mode
            and _truthy(module_args.get("wait"))
            and module_args.get("definition")
        ):
            return self._wait_in_steps(module_name, module_args, task_vars, **kwargs)
        if (
            module_name != _MODULE
            or not self._play_context.check_mode
            or module_args.get("state", "present") != "present"
            or not module_args.get("definition")
        ):
            return super()._execute_module(
                module_name=module_name, module_args=module_args, task_vars=task_vars, **kwargs
            )

        definitions = _as_list(module_args["definition"])
        own_continue = bool(module_args.get("continue_on_error"))
        result = super()._execute_module(
            module_name=module_name,
            module_args=dict(module_args, definition=definitions, continue_on_error=True),
            task_vars=task_vars,
            **kwargs,
        )
        if result.get("failed"):
            return result
        # One definition: the module returns its result flat; several: under result.results.
        several = len(definitions) != 1
        results = result.get("result", {}).get("results", []) if several else [result]
        if len(results) != len(definitions):
            return result  # a List kind was expanded: nothing to map, the module's answer stands

        run = _run_id()
        known = planned_in(_fact(self._dry_run_vars), run)
        plan = plan_from(definitions, module_args.get("namespace"), known)
        outcome = classify(definitions, results, module_args.get("namespace"), plan)

        merged = dict(result) if not several else {k: v for k, v in result.items() if k != "result"}
        if several:
            merged["result"] = {"results": outcome.results}
        else:
            merged.update(outcome.results[0])
            merged.pop("error", None)
        merged["changed"] = any(r.get("changed") for r in outcome.results)
        diffs = [r["diff"] for r in outcome.results if r.get("diff")]
        if diffs:
            merged["diff"] = diffs if several else diffs[0]
        if outcome.predicted:
            merged["predicted"] = outcome.predicted
        merged["ansible_facts"] = {FACT: {"run": run, **plan}}
        if outcome.errors and not own_continue:
            merged["failed"] = True
            merged["msg"] = "; ".join(outcome.errors)
        return merged

    def _wait_in_steps(self, module_name, module_args, task_vars, **kwargs):
        """The module's apply and wait, in steps of REPORT_EVERY seconds with a report after each."""
        definitions = _as_list(module_args["definition"])
        total = int(module_args.get("wait_timeout") or 120)
        state = module_args.get("state") or "present"
        wanted = goal(module_args.get("wait_condition"), state)
        host = (task_vars or {}).get("inventory_hostname", "")
        labels = [label(d, module_args.get("namespace")) for d in definitions]
        # Without a condition the task waits for readiness, which for a Deployment is its rollout.
        steps = Steps(len(definitions), rollout=state == "present" and not module_args.get("wait_condition"))
        pause = max(1, int(module_args.get("wait_sleep") or 5))
        started = time.monotonic()
        reported = 0.0
        while True:
            step_started = time.monotonic()
            remaining = total - (step_started - started)
            run = [definitions[i] for i in steps.pending]
            result = super()._execute_module(
                module_name=module_name,
                module_args=dict(
                    module_args,
                    definition=run,
                    continue_on_error=True,
                    wait_timeout=step_length(remaining),
                ),
                task_vars=task_vars,
                **kwargs,
            )
            if result.get("failed"):
                return result  # the module could not start (client, kubeconfig): its own message
            results = result.get("result", {}).get("results", []) if len(run) != 1 else [result]
            if len(results) != len(run):
                return result  # a List kind was expanded: the module's answer stands
            waiting = steps.record(results)
            elapsed = time.monotonic() - started
            if not waiting or elapsed >= total:
                break
            if time.monotonic() - step_started < pause:
                # the module called it ready at once (a rollout kubectl would still wait for): its poll
                # interval before asking again, not a loop of module runs
                time.sleep(min(pause, max(0.0, total - elapsed)))
            if elapsed - reported < REPORT_EVERY:
                continue  # one line per REPORT_EVERY seconds, however short the steps
            reported = elapsed
            for index in waiting:
                line = progress_line(
                    labels[index],
                    wanted,
                    steps.results[index],
                    elapsed,
                    total,
                    state,
                )
                display.display(f"{host}: {line}" if host else line)
        return steps.final(labels, wanted, total, state, _truthy(module_args.get("continue_on_error")))


def _as_list(definition):
    if isinstance(definition, str):
        import yaml

        return [d for d in yaml.safe_load_all(definition) if d is not None]
    if isinstance(definition, dict):
        return [definition]
    return [d for d in definition if d is not None]


# The per-file options of kubernetes.core's `template` that are Jinja settings (path is not).
_JINJA_OPTIONS = (
    "newline_sequence",
    "variable_start_string",
    "variable_end_string",
    "block_start_string",
    "block_end_string",
    "trim_blocks",
    "lstrip_blocks",
)
_NEWLINES = {"\\n": "\n", "\\r": "\r", "\\r\\n": "\r\n"}


def _template_overrides(item):
    """The Jinja overrides of one `template` entry; an escaped newline_sequence read as the newline."""
    overrides = {key: item[key] for key in _JINJA_OPTIONS if item.get(key) is not None}
    newline = _NEWLINES.get(overrides.get("newline_sequence"), overrides.get("newline_sequence"))
    if newline is not None and newline not in ("\n", "\r", "\r\n"):
        raise AnsibleActionFail(
            f"template {item['path']}: newline_sequence {newline!r} is not a line break; "
            "use \\n, \\r or \\r\\n (as in kubernetes.core.k8s)."
        )
    if newline is not None:
        overrides["newline_sequence"] = newline
    return overrides


def _fact(task_vars):
    facts = task_vars.get("ansible_facts") or {}
    return facts.get(FACT) or task_vars.get(FACT)


def _run_id():
    # Facts can outlive the run (a fact cache): the plan belongs to this ansible-playbook process,
    # the parent of the worker that runs this action.
    return str(os.getppid())


def _truthy(value) -> bool:
    # A templated `wait:` arrives as a bool or as the string Jinja made of it ("True"/"False"):
    # read as the module's own bool option reads it (ansible's convert_bool; None is false).
    return boolean(value, strict=False)
