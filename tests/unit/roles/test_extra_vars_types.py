"""Booleans and numbers behave the same from ``-e name=value``, inventory YAML and role defaults.

``-e name=value`` gives every value as a string: ``-e collectd_wait=false`` is the non-empty, so
true, string ``"false"``, and ``-e tas_policy_max_tdp_percent=70`` reached the CRD as ``"70"``.
Each role's argument spec refuses strings that are not numbers or booleans, but it does not
convert the ones it accepts, so every use of an option of type bool, int or float has to.

For every role listed in ROLES and every such option of ``meta/argument_specs.yml``:

* every template in ``templates/`` and every templated value and condition in ``tasks/`` that
  names the option is rendered with Ansible's own Templar twice, once with the YAML-typed values
  (``false``, ``70``) and once with the strings ``-e`` gives (``"false"``, ``"no"``, ``"70"``), with
  the defaults and with every option changed (booleans flipped, numbers moved), and the results
  must be identical;
* statically, every reference in a Jinja context is followed by ``| bool``, ``| int`` or ``| float``;
* end to end, ``ansible-playbook -e`` with the documented ``tas_policy_max_tdp_percent=70`` builds
  and validates the policy with integer targets.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml
from ansible.errors import AnsibleValueOmittedError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = pathlib.Path(__file__).resolve().parents[3]
ROLES_DIR = REPO / "roles"
COLLECTIONS_DIR = REPO / ".cache" / "collections"

# Every role with user-facing options but power_models, whose templates call collection filters
# this harness cannot load (its typed options pass through | bool / | int at every use too).
ROLES = [
    "cpu_power",
    "scheduler_extender",
    "nfd",
    "collectd",
    "kube_state_metrics",
    "prometheus",
    "prometheus_adapter",
    "tas",
    "tas_policy",
    "power_demo",
    "descheduler",
    "peaks",
    "appqos_certs",
]
FILTER_OF_TYPE = {"bool": "bool", "int": "int", "float": "float"}
CONDITIONAL_KEYS = ("when", "that", "failed_when", "changed_when", "until")

# Values the tasks compute (set_fact) or register before the templates and conditions use them.
# They are the same in both renderings; only the user-facing options change type.
STUBS: dict[str, dict] = {
    "collectd": {
        "_collectd_config_checksum": "c0ffee",
        "_collectd_tolerations": [],
        "_collectd_hwmon_label_lines": [],
        "_collectd_code": [{"path": "ansible_collections/x.py", "content": ""}],
    },
    "nfd": {"_nfd_master_tolerations": []},
    "tas_policy": {"_tas_policy_left": [{"node": "worker-1", "label": "power-sensitive-scheduling-policy=violating"}]},
    "kube_state_metrics": {"_kube_state_metrics_rules": {"": ["nodes", "pods"]}},
    "descheduler": {
        "_descheduler_plan": {"policy": {}, "image_tag": "v0.36.0", "reads_metrics": False, "errors": []},
        "_descheduler_policy_yaml": "kind: DeschedulerPolicy\n",
    },
    "peaks": {
        "_peaks_plan": {"config": {"kind": "KubeSchedulerConfiguration"}, "nodes_without_model": [], "errors": []},
        "_peaks_config_yaml": "kind: KubeSchedulerConfiguration\n",
        "_peaks_load_watcher_image_reference": "registry.example/load-watcher:v0.2.4",
        "_peaks_prometheus_url": "http://prometheus.monitoring.svc:9090",
        "_common_api_server": {"egress": [], "ingress": {"from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]}, "errors": []},
    },
    "prometheus": {
        "_prometheus_reloader_image_reference": "quay.io/prometheus-operator/prometheus-config-reloader:v0.92.0",
        "_prometheus_target_namespace": "monitoring",
        "_prometheus_scrape_configs_text": "- job_name: x\n",
        "_prometheus_ns": "monitoring",
        "_common_api_server": {"egress": [], "ingress": {"from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]}, "errors": []},
    },
    "prometheus_adapter": {
        "_prometheus_adapter_checksum": "c0ffee",
        "_prometheus_adapter_ca_b64": "Q0E=",
        "_prometheus_adapter_ns": "custom-metrics",
    },
    "appqos_certs": {"_appqos_certs_conf_file": {"path": "/etc/certs/public/appqos.conf", "content": "{}\n"}},
    "tas": {
        "_tas_cp_label": "node-role.kubernetes.io/control-plane",
        "_tas_tolerations": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ],
        "_tas_tls_checksum": "c0ffee",
    },
    "scheduler_extender": {
        "_scheduler_extender_result": {
            "backup_manifest": "/var/lib/poweraware/backups/kube-scheduler/m.bak",
            "backup_config": "",
            "config_path": "/etc/kubernetes/scheduler-extender.yaml",
            "config_existed": False,
            "annotation": "",
            "record": {},
        },
    },
}
REGISTERED_STUB = {"changed": False, "failed": False, "skipped": False, "resources": [{}], "results": []}


def typed_options(role_dir: pathlib.Path) -> dict[str, tuple[str, object]]:
    """{option: (type, default)} for the bool/int/float options of the role's main entry point."""
    spec = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    return {
        name: (opt["type"], opt.get("default")) for name, opt in options.items() if opt.get("type") in FILTER_OF_TYPE
    }


def _load(path: pathlib.Path):
    """YAML as Ansible loads it: strings from the file are trusted templates (lazily rendered)."""
    return DataLoader().load_from_file(str(path)) if path.is_file() else None


def _changed(kind: str, value):
    if kind == "bool":
        return not value
    if kind == "int":
        return value + 1
    return value + 0.5


def _as_strings(kind: str, value, style: int) -> str:
    """The string ``-e name=<value>`` gives: style 0 ``false``/``70``, style 1 ``no``/`` 70``."""
    if kind == "bool":
        return ("true" if value else "false") if style == 0 else ("yes" if value else "no")
    return str(value)


def _references(text: str, names) -> set[str]:
    return {n for n in names if re.search(r"(?<![\w.'\"])%s\b" % re.escape(n), text)}


# --- what the role renders ---------------------------------------------------------------------
def _task_expressions(node, conditional=False):
    """(kind, text) for every string in a task list: 'cond' for conditions, 'tmpl' for values."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _task_expressions(value, conditional=key in CONDITIONAL_KEYS)
    elif isinstance(node, list):
        for item in node:
            yield from _task_expressions(item, conditional=conditional)
    elif isinstance(node, str):
        if conditional:
            yield "cond", node
        elif "{{" in node or "{%" in node:
            yield "tmpl", node


def role_expressions(role_dir: pathlib.Path, names) -> list[tuple[str, str, str]]:
    """(where, kind, text) of every template and every task expression that names an option."""
    found = []
    for template in sorted((role_dir / "templates").glob("*.j2")):
        text = template.read_text()
        if _references(text, names):
            found.append((f"templates/{template.name}", "file", text))
    for tasks in sorted((role_dir / "tasks").glob("*.yml")):
        for kind, text in _task_expressions(_load(tasks)):
            if _references(text, names):
                found.append((f"tasks/{tasks.name}: {text.strip()[:60]}", kind, text))
    return found


def _registered(role_dir: pathlib.Path) -> set[str]:
    names = set()
    for tasks in (role_dir / "tasks").glob("*.yml"):
        names.update(re.findall(r"^\s*register:\s*(\w+)", tasks.read_text(), flags=re.M))
    return names


def base_variables(role_dir: pathlib.Path) -> dict:
    variables = {name: dict(REGISTERED_STUB) for name in _registered(role_dir)}
    variables.update(_load(role_dir / "defaults" / "main.yml") or {})
    variables.update(_load(role_dir / "vars" / "main.yml") or {})
    variables.update(STUBS.get(role_dir.name, {}))
    for name in list(variables):  # set by the role's first task (filters image_reference, image_pull_secrets)
        if name.startswith(f"{role_dir.name}_") and name.endswith("_image"):
            variables.setdefault(f"_{name}_reference", "registry.example/image:v1")
        if name.startswith(f"{role_dir.name}_") and name.endswith("_image_pull_secrets"):
            variables.setdefault(f"_{name}", ["registry-mirror"])
    variables.update({"ansible_check_mode": False, "inventory_hostname": "worker-1", "poweraware_node_root": "/"})
    return variables


def render(variables: dict, kind: str, text: str):
    """What Ansible makes of ``text``: a rendered template, a value, or a condition's result."""
    templar = Templar(loader=DataLoader(), variables=variables)
    try:
        if kind == "cond":
            return templar.evaluate_conditional(trust_as_template(text))
        return templar.template(trust_as_template(text))
    except AnsibleValueOmittedError:
        return "<omitted>"
    except Exception as exc:  # noqa: BLE001 - the error itself is the result to compare
        return f"<error {type(exc).__name__}: {exc}>"


def _difference(expected, got) -> str:
    """The first differing line of two rendered templates, or both values."""
    if isinstance(expected, str) and isinstance(got, str) and "\n" in expected:
        for want, have in zip(expected.splitlines(), got.splitlines() + [""] * len(expected), strict=False):
            if want != have:
                return f"{want.strip()!r} from YAML, {have.strip()[:200]!r} from -e"
    return f"{expected!r} from YAML, {got!r} from -e"[:400]


def coercion_differences(role_dir: pathlib.Path) -> list[str]:
    """Every expression of the role whose result changes when its typed options come as strings."""
    options = typed_options(role_dir)
    differences = []
    for scenario in ("defaults", "changed"):
        typed = {
            name: (default if scenario == "defaults" else _changed(kind, default))
            for name, (kind, default) in options.items()
        }
        for check_mode in (False, True):
            base = base_variables(role_dir) | {"ansible_check_mode": check_mode}
            for where, kind, text in role_expressions(role_dir, options):
                expected = render(base | typed, kind, text)
                assert not str(expected).startswith("<error"), f"{role_dir.name} {where}: {expected}"
                for style in (0, 1):
                    strings = {name: _as_strings(options[name][0], value, style) for name, value in typed.items()}
                    got = render(base | strings, kind, text)
                    if got != expected or type(got) is not type(expected):
                        differences.append(
                            f"{role_dir.name} {where} ({scenario}, check_mode={check_mode}, "
                            f"-e {' '.join(f'{k}={v}' for k, v in sorted(strings.items()) if k in text)}): "
                            + _difference(expected, got)
                        )
    return differences


@pytest.mark.parametrize("role", ROLES)
def test_role_has_typed_options(role):
    assert typed_options(ROLES_DIR / role), f"{role}: no bool/int/float options to check"


@pytest.mark.parametrize("role", ROLES)
def test_extra_vars_strings_render_like_yaml_values(role):
    differences = coercion_differences(ROLES_DIR / role)
    assert not differences, "\n".join(differences)


# --- static: every use goes through | bool / | int / | float ---------------------------------------
def uncoerced_references(role_dir: pathlib.Path) -> list[str]:
    options = typed_options(role_dir)
    problems = []

    def scan(where: str, expression: str):
        for name, (kind, _default) in options.items():
            pattern = r"(?<![\w.'\"])%s\b(?!\s*\|\s*%s\b)" % (re.escape(name), FILTER_OF_TYPE[kind])
            if re.search(pattern, expression):
                problems.append(
                    f"{role_dir.name} {where}: {name} without | {FILTER_OF_TYPE[kind]}: {expression.strip()}"
                )

    jinja = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", flags=re.S)
    for template in sorted((role_dir / "templates").glob("*.j2")):
        for block in jinja.findall(template.read_text()):
            scan(f"templates/{template.name}", block)
    for tasks in sorted((role_dir / "tasks").glob("*.yml")):
        for kind, text in _task_expressions(yaml.safe_load(tasks.read_text())):
            for block in [text] if kind == "cond" else jinja.findall(text):
                scan(f"tasks/{tasks.name}", block)
    return problems


@pytest.mark.parametrize("role", ROLES)
def test_every_reference_is_coerced(role):
    problems = uncoerced_references(ROLES_DIR / role)
    assert not problems, "\n".join(problems)


# --- end to end: ansible-playbook -e -----------------------------------------------------------------
def test_documented_extra_vars_build_an_integer_policy(tmp_path):
    """``-e tas_policy_max_tdp_percent=70`` (docs/cluster-stack.md) gives target 70, switches obey "false".

    The play stops at the first task that needs the API server (no cluster here); the policy has
    been built and validated before that.
    """
    playbook = tmp_path / "play.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: poweraware.k8s.tas_policy\n")
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_DIR),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "K8S_AUTH_KUBECONFIG": str(tmp_path / "no-kubeconfig"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
    }
    extra = [
        "tas_policy_max_tdp_percent=70",
        "tas_policy_scheduleonmetric_enabled=false",
        "tas_policy_deschedule_enabled=yes",
        "tas_policy_deschedule_tdp_percent=85",
    ]
    argv = [str(pathlib.Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local"]
    for item in extra:
        argv += ["-e", item]
    result = subprocess.run(  # noqa: S603
        [*argv, "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(result.stdout)
    tasks = {t["task"]["name"].split(" : ", 1)[-1]: t["hosts"]["localhost"] for t in report["plays"][0]["tasks"]}
    (built,) = tasks["Build the TAS policies from their parameters"]["ansible_facts"]["_tas_policy_objects"]
    assert built["spec"]["strategies"] == {
        "dontschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": 70}]},
        "deschedule": {"rules": [{"metricname": "package_power_avg", "operator": "GreaterThan", "target": 85}]},
    }, built
    validated = tasks["Validate the TAS policies against the CRD's rules before applying any"]
    assert not validated.get("failed"), validated
    # The filters copy the policies as plain data: a deep copy of ansible-core's lazy containers
    # clones the templar's plugin loaders, which ansible-core 2.19+ reports as deprecated.
    # (the json callback reports them per task, under "deprecations")
    deprecations = [d for t in tasks.values() for d in t.get("deprecations", [])]
    assert not deprecations and "DEPRECATION" not in result.stderr, deprecations or result.stderr[-3000:]
