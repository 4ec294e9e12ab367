"""The roles that reach TAS find it where the tas role puts it.

The scheduler extender's URL and CA, and the service account tas_policy grants node labelling to,
are derived from the tas role's variables (tas_service_name, tas_namespace, tas_cluster_domain,
tas_port, tas_pki_dir): set one in the inventory and kube-scheduler calls the new address. Outside
the tas role those variables are not defined unless the inventory sets them, so each use falls back
to a literal, which must be the tas role's default.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = pathlib.Path(__file__).resolve().parents[3] / "roles"
# the tas role's variables (tas_policy_* are the tas_policy role's: test_the_demo_follows_the_policys_namespace)
FALLBACK = re.compile(r"\b(tas_(?!policy_)[a-z_]+)\s*\|\s*default\(([^()]*)\)")


def defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def render(variables: dict, text: str):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


def extender_url(variables: dict) -> str:
    return render(variables, defaults("scheduler_extender")["scheduler_extender_tas_extender"]["url_prefix"])


def with_role_vars(variables: dict, service: str = "tas") -> dict:
    """The scheduler_extender role's scope: its vars/main.yml rendered over the defaults and the inventory."""
    scope = {**defaults("scheduler_extender"), **variables, "scheduler_extender_service": service}
    role_vars = yaml.safe_load((ROLES / "scheduler_extender" / "vars" / "main.yml").read_text())
    return {**scope, **{key: render(scope, value) for key, value in role_vars.items()}}


def test_the_extender_calls_the_service_the_tas_role_makes():
    tas = defaults("tas")
    assert extender_url({}) == (
        f"https://{tas['tas_service_name']}.{tas['tas_namespace']}.svc.{tas['tas_cluster_domain']}:{tas['tas_port']}"
    )


@pytest.mark.parametrize("port", [9443, "9443"])  # inventory YAML, and -e tas_port=9443
def test_a_moved_tas_moves_the_extender_url_ca_and_the_labelling_grant(port):
    moved = {
        "tas_namespace": "scheduling",
        "tas_service_name": "tas",
        "tas_cluster_domain": "k8s.example",
        "tas_port": port,
        "tas_pki_dir": "/etc/pki/tas",
    }
    assert extender_url(moved) == "https://tas.scheduling.svc.k8s.example:9443"
    extender = defaults("scheduler_extender")
    scope = with_role_vars(moved)
    assert render(scope, extender["scheduler_extender_ca_cert"]) == "/etc/pki/tas/ca.crt"
    assert render(scope, extender["scheduler_extender_ca_key"]) == "/etc/pki/tas/ca.key"
    assert render(moved, defaults("tas_policy")["tas_policy_tas_namespace"]) == "scheduling"


def test_every_fallback_is_the_tas_roles_default():
    tas = defaults("tas")
    found = []
    for path in sorted([*ROLES.glob("*/defaults/main.yml"), *ROLES.glob("*/tasks/*.yml")]):
        if path.parts[-3] == "tas":
            continue
        for name, literal in FALLBACK.findall(path.read_text()):
            found.append(name)
            assert name in tas, f"{path}: {name} is not a variable of the tas role"
            assert yaml.safe_load(literal) == tas[name], (
                f"{path}: {name} falls back to {literal}, the tas role has {tas[name]!r}"
            )
    assert {"tas_service_name", "tas_namespace", "tas_cluster_domain", "tas_port", "tas_pki_dir"} <= set(found)
    assert {"tas_ca_validity", "tas_cert_renew_before"} <= set(found)  # scheduler_extender's client certificate


def test_with_our_extender_kube_scheduler_calls_it_where_the_power_extender_role_serves():
    ours = defaults("power_extender")
    extender = defaults("scheduler_extender")
    scope = with_role_vars({}, "poweraware")
    registration = extender["scheduler_extender_poweraware_extender"]
    assert (
        render(scope, registration["url_prefix"])
        == f"https://{ours['power_extender_address']}:{ours['power_extender_port']}"
    )
    assert render(scope, registration["http_timeout"]) == f"{ours['power_extender_http_timeout']}s"
    assert render(scope, extender["scheduler_extender_ca_cert"]) == f"{ours['power_extender_pki_dir']}/ca.crt"
    assert render(scope, extender["scheduler_extender_extenders"])[0]["filter_verb"] == "filter"
    # kube-scheduler's client certificate is one our extender accepts.
    assert extender["scheduler_extender_client_common_name"] in ours["power_extender_allowed_clients"]
    moved = with_role_vars({"power_extender_port": "10300", "power_extender_pki_dir": "/etc/pki/ours"}, "poweraware")
    assert render(moved, registration["url_prefix"]) == "https://127.0.0.1:10300"
    assert render(moved, extender["scheduler_extender_ca_key"]) == "/etc/pki/ours/ca.key"
    assert render(with_role_vars({}), extender["scheduler_extender_extenders"])[0]["filter_verb"] == "scheduler/filter"


@pytest.mark.parametrize("demo", [True, "true"])  # inventory YAML, and -e poweraware_enable_power_demo=true
def test_the_demo_follows_the_policys_namespace(demo):
    """The power demo's pods must live in the TAS policy's namespace: with the demo on both are the demo's
    power-demo, whether the play sees the tas_policy role's default (its roles are imported in one play) or
    not; a tas_policy_namespace the inventory gives is followed."""
    policy_default = defaults("tas_policy")["tas_policy_namespace"]
    demo_default = defaults("power_demo")["power_demo_namespace"]
    on = {"poweraware_enable_power_demo": demo}
    policy_namespace = render(on, policy_default)
    assert policy_namespace == "power-demo"
    assert render({**on, "tas_policy_namespace": policy_namespace}, demo_default) == policy_namespace
    assert render(on, demo_default) == policy_namespace  # the tas_policy role not in the play
    assert render({**on, "tas_policy_namespace": "team-a"}, demo_default) == "team-a"
    assert render({}, policy_default) == "default"
