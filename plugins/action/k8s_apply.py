# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_apply: kubernetes.core.k8s, with a dry run that works on a new cluster.

The action runs the kubernetes.core.k8s module (ActionBase._execute_module) with the task's
options. What kubernetes.core's own action does before that, and the roles and users' plays rely
on, is done here with public interfaces (not by inheriting kubernetes.core's action, whose class is
no interface it promises): `template` is rendered on the controller, the play's module_defaults for
group/kubernetes.core.k8s apply, and a kubeconfig or `src` on the controller is found there
(plugin_utils/_k8s_action.py).

In check mode the module's server-side dry run cannot see what the run has not created: a
namespaced object in a namespace an earlier task would create, or a custom resource whose CRD an
earlier task would install, fails with NotFound. Here such an object is reported as "would
create", predicted (not dry-run) and said so, when this run applies that namespace or CRD; anything
else keeps the server's error. The namespaces and CRDs a dry run applies are remembered on the host
(fact `_poweraware_dry_run_creates`) for later tasks, so one mechanism serves every role
(docs/site.md, "Dry run").
"""

from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
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
from ansible_collections.poweraware.k8s.plugins.plugin_utils._k8s_action import (
    controller_kubeconfig,
    controller_src,
    kubernetes_core_missing,
    with_module_defaults,
)

display = Display()

_MODULE = "kubernetes.core.k8s"


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        missing = kubernetes_core_missing("k8s_apply")
        if missing:
            result.update(failed=True, msg=missing)
            return result
        module_args = self._module_args(task_vars)
        if module_args is None:
            # `template` rendered no object: nothing to apply (kubernetes.core 6.6's answer too)
            result["changed"] = False
            return result
        result.update(self._apply(module_args, task_vars))
        return result

    def _module_args(self, task_vars):
        """The module's arguments, as kubernetes.core's action makes them; None when `template`
        rendered no object."""
        args = with_module_defaults(self._task, self._templar, _MODULE)
        module_args = dict(args)
        if args.get("kubeconfig"):
            module_args["kubeconfig"] = controller_kubeconfig(self, args["kubeconfig"])
        if args.get("src"):
            module_args["src"] = controller_src(self, args["src"])
        if args.get("template"):
            self.load_template(args["template"], module_args, task_vars)
            if not module_args["definition"]:
                return None
        return module_args

    def load_template(self, template, new_module_args, task_vars):
        """Render `template` into `definition` as kubernetes.core 6.x does, through the templar's public API.

        kubernetes.core's own rendering reads and sets the templar's Jinja `environment`, which
        ansible-core 2.19 deprecates (an error from 2.23), and deep-copies every task variable for
        each file (which, through hostvars, also re-creates plugin loaders: a second deprecation).
        Here a copy of the templar renders each file with the file's overrides (trim_blocks on by
        default, as kubernetes.core and the template module have it). The arguments, the search
        path (the role's and play's templates/) and the result are kubernetes.core's: `definition`
        is the files' objects in order (empty documents dropped), and `template` is dropped unless a
        `definition` was given beside it.
        """
        if isinstance(template, (str, dict)):
            template = [template]
        elif not isinstance(template, list):
            raise AnsibleActionFail(
                f"template must be a template file name, a mapping with its path and Jinja options, or a "
                f"list of them, got {type(template).__name__}; fix: give, for example, "
                "template: [deployment.yml.j2] (files in the role's templates/ directory)."
            )
        items = [_template_item(element) for element in template]
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        definitions = []
        for item in items:
            overrides = _template_overrides(item)
            with self._template_text(item["path"]) as data:
                rendered = templar.template(
                    trust_as_template(data),
                    preserve_trailing_newlines=True,
                    escape_backslashes=False,
                    overrides=overrides,
                )
            definitions.extend(_as_list(rendered or ""))
        if not new_module_args.get("definition"):
            new_module_args.pop("template", None)
        new_module_args["definition"] = definitions

    @contextmanager
    def _template_text(self, path):
        """The text of template `path`, found in the role's and play's templates/ and, when
        vault-encrypted, decrypted to a temporary file removed at once."""
        try:
            source = self._find_needle("templates", path)
            real = self._loader.get_real_file(source)
        except AnsibleError:
            raise AnsibleActionFail(
                f"template {path}: cannot be found or read on the controller; fix: name a file of the "
                "role's or the playbook's templates/ directory, or give its absolute path."
            ) from None
        try:
            with open(real, "rb") as handle:
                raw = handle.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise AnsibleActionFail(
                    f"template {path} ({source}) is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                    "fix: save it as UTF-8, as kubernetes.core.k8s and the template module need."
                ) from None
            yield text
        finally:
            self._loader.cleanup_tmp_file(real)

    def _apply(self, module_args, task_vars):
        """The module's answer; a wait in steps with progress lines, or a dry run with predictions."""
        if not self._play_context.check_mode and truthy(module_args.get("wait")) and module_args.get("definition"):
            return self._wait_in_steps(_MODULE, module_args, task_vars)
        if (
            not self._play_context.check_mode
            or module_args.get("state", "present") != "present"
            or not module_args.get("definition")
        ):
            return self._execute_module(module_name=_MODULE, module_args=module_args, task_vars=task_vars)

        definitions = _as_list(module_args["definition"])
        own_continue = bool(module_args.get("continue_on_error"))
        result = self._execute_module(
            module_name=_MODULE,
            module_args=dict(module_args, definition=definitions, continue_on_error=True),
            task_vars=task_vars,
        )
        if result.get("failed"):
            return result
        # One definition: the module returns its result flat; several: under result.results.
        several = len(definitions) != 1
        results = result.get("result", {}).get("results", []) if several else [result]
        if len(results) != len(definitions):
            return result  # a List kind was expanded: nothing to map, the module's answer stands

        run = run_id()
        known = planned_in(_fact(task_vars), run)
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
            result = self._execute_module(
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
        return steps.final(labels, wanted, total, state, truthy(module_args.get("continue_on_error")))


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
# The text options of a `template` entry (kubernetes.core checks that they are text).
_TEXT_OPTIONS = _JINJA_OPTIONS[:5]


def _template_item(element):
    """One `template` entry as kubernetes.core reads it: its path and Jinja options, with
    kubernetes.core's defaults (a file name alone is the path)."""
    item = {key: None for key in _TEXT_OPTIONS}
    item.update(newline_sequence="\n", trim_blocks=True, lstrip_blocks=False)
    if isinstance(element, str):
        return dict(item, path=element)
    if not isinstance(element, dict):
        raise AnsibleActionFail(
            f"template: each entry must be a file name or a mapping with its path, got {type(element).__name__}; "
            "fix: give, for example, deployment.yml.j2 or {path: deployment.yml.j2, trim_blocks: false}."
        )
    path = element.get("path")
    if not path:
        raise AnsibleActionFail(
            f"template: the entry with options {sorted(element)} has no path; fix: add path, the template "
            "file's name (in the role's templates/ directory)."
        )
    item["path"] = path
    for key in _TEXT_OPTIONS:
        value = element.get(key)
        if value is not None and not isinstance(value, str):
            raise AnsibleActionFail(
                f"template {path}: {key} must be text, got {type(value).__name__} {value!r}; fix: quote it."
            )
        if value is not None:
            item[key] = value
    for key in ("trim_blocks", "lstrip_blocks"):
        if element.get(key) is None:
            continue
        try:
            item[key] = boolean(element[key], strict=False)
        except TypeError:
            raise AnsibleActionFail(
                f"template {path}: {key} must be true or false, got {type(element[key]).__name__}; fix: give a boolean."
            ) from None
    return item


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


def run_id():
    """This ansible-playbook run, named by its controller temporary directory (hashed).

    A fact can outlive its run (a fact cache), so the plan in the fact is used only by the run that
    wrote it. ansible-core makes that directory once per run: DEFAULT_LOCAL_TMP is a `tmppath`
    setting, a new directory with a random name (mkdtemp) under ANSIBLE_LOCAL_TEMP, made when the
    ansible-playbook process loads its configuration, before it forks the workers that run the
    tasks (they all share it: ansible-core keeps its module cache there), and removed when the run
    ends. Every task of one run sees the same name, and no other run has it. The parent PID used
    before is not that: ansible-playbook gets the same PID run after run where it starts among a
    container's first processes, which carried one run's cached plan into the next. The playbook's
    path, tags or limit name the command, not one run of it. Hashed: the fact says which run, not
    where the controller keeps its files.
    """
    return hashlib.sha256(C.DEFAULT_LOCAL_TMP.encode("utf-8")).hexdigest()[:16]


def truthy(value) -> bool:
    # A templated `wait:` arrives as a bool or as the string Jinja made of it ("True"/"False"):
    # read as the module's own bool option reads it (ansible's convert_bool; None is false).
    return boolean(value, strict=False)
