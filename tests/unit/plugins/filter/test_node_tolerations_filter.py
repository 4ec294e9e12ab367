"""node_tolerations: a pod for every node tolerates kubeadm's control-plane taints on request.

The node_tolerations filter plugin(s) checked directly, without Ansible subprocesses: input checks, arguments
passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import json
import pathlib

import ansible_collections.poweraware.k8s.plugins.filter.node_tolerations as f_tol
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.filter.node_tolerations import node_tolerations
from poweraware_testing import raises

ROLES = pathlib.Path(__file__).resolve().parents[4] / "roles"
CONTROL_PLANE = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
]
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    """Kubernetes' ToleratesTaint (k8s.io/api core/v1 toleration.go), written independently of the filter."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


@pytest.mark.parametrize("switch", [True, "true", "yes", "True"])
def test_on_the_control_plane_both_kubeadm_taints_are_tolerated(switch):
    got = node_tolerations([], switch, "collectd_tolerations")
    for key in ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"):
        assert tolerates(got, {"key": key, "effect": "NoSchedule"}), got
    assert not tolerates(got, {"key": "nvidia.com/gpu", "effect": "NoSchedule"})


@pytest.mark.parametrize("switch", [False, "false", "no"])
def test_off_the_users_tolerations_only(switch):
    assert node_tolerations([GPU], switch, "collectd_tolerations") == [GPU]
    assert not tolerates(
        node_tolerations([], switch, "collectd_tolerations"), {"key": CONTROL_PLANE[0]["key"], "effect": "NoSchedule"}
    )


def test_users_tolerations_come_first_and_are_not_repeated():
    assert node_tolerations([GPU, CONTROL_PLANE[1]], True, "collectd_tolerations") == [
        GPU,
        CONTROL_PLANE[1],
        CONTROL_PLANE[0],
    ]


@pytest.mark.parametrize(
    ("extra", "switch", "message"),
    [
        ([], "maybe", r"switch for collectd_tolerations must be a boolean, got 'maybe'"),
        ("node-role", True, r"collectd_tolerations must be a list of tolerations.*fix collectd_tolerations"),
        (["key=x"], True, r"collectd_tolerations must be a list of tolerations"),
    ],
)
def test_bad_input_names_the_variable(extra, switch, message):
    with pytest.raises(AnsibleFilterError, match=message):
        node_tolerations(extra, switch, "collectd_tolerations")


def test_collectd_runs_on_every_node_by_default_as_in_the_tas_demo():
    """The default matches the TAS power demo (package power of every node) and the template uses the decision."""
    defaults = yaml.safe_load((ROLES / "collectd" / "defaults" / "main.yml").read_text())
    assert defaults["collectd_on_control_plane"] is True
    template = (ROLES / "collectd" / "templates" / "daemonset.yml.j2").read_text()
    assert "tolerations: {{ _collectd_tolerations | to_json }}" in template
    main = (ROLES / "collectd" / "tasks" / "main.yml").read_text()
    assert "node_tolerations(_collectd_on_control_plane, 'collectd_tolerations')" in main
    assert '_collectd_on_control_plane: "{{ collectd_on_control_plane | bool }}"' in main


# --- the TAS extender: the taint of its control-plane label, before the user's tolerations ---------
# roles/tas/templates/deployment.yml.j2 before issue 46, which built the list itself.
TAS_ORACLE = """{% set _tolerations = [] %}
{% if tas_schedule_on_control_plane | bool %}
{%   set _ = _tolerations.append({'key': _tas_cp_label, 'operator': 'Exists', 'effect': 'NoSchedule'}) %}
{% endif %}
{% set _tolerations = _tolerations + tas_extra_tolerations %}
{{ _tolerations | to_json }}"""
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "tas", "effect": "NoExecute"}


def tas_oracle(extra, switch, label):
    variables = {"tas_extra_tolerations": extra, "tas_schedule_on_control_plane": switch, "_tas_cp_label": label}
    return json.loads(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(TAS_ORACLE)))


@pytest.mark.parametrize("extra", [[], [GPU], [GPU, DEDICATED]])
@pytest.mark.parametrize("switch", [True, False, "true", "false", "yes", "no"])
@pytest.mark.parametrize("label", [CONTROL_PLANE[0]["key"], CONTROL_PLANE[1]["key"], "example.com/control"])
def test_tas_tolerations_are_the_ones_its_template_built(extra, switch, label):
    got = node_tolerations(extra, switch, "tas_extra_tolerations", taint_keys=[label], control_plane_first=True)
    assert got == tas_oracle(extra, switch, label)


def test_tas_a_listed_control_plane_toleration_is_not_repeated():
    """The one difference from the old template, which listed it twice."""
    own = {"key": "example.com/control", "operator": "Exists", "effect": "NoSchedule"}
    got = node_tolerations([GPU, own], True, "tas_extra_tolerations", ["example.com/control"], True)
    assert got == [GPU, own]
    assert tas_oracle([GPU, own], True, "example.com/control") == [own, GPU, own]


@pytest.mark.parametrize("keys", [[], "node-role.kubernetes.io/master", [""], [None]])
def test_bad_taint_keys_are_refused(keys):
    with pytest.raises(AnsibleFilterError, match=r"the control-plane taint keys for tas_extra_tolerations must be"):
        node_tolerations([], True, "tas_extra_tolerations", taint_keys=keys)


@pytest.mark.parametrize("extra", ["nvidia.com/gpu", ["key=x"], None])
def test_tas_extra_tolerations_are_checked_like_collectds(extra):
    with pytest.raises(AnsibleFilterError) as err:
        node_tolerations(extra, True, "tas_extra_tolerations", taint_keys=["x/y"], control_plane_first=True)
    assert str(err.value) == (
        "Nothing was changed: tas_extra_tolerations must be a list of tolerations (mappings with key, operator, "
        f"value, effect), got {extra!r}; fix tas_extra_tolerations in the inventory"
    )


@pytest.mark.parametrize("bad", ["", None, 1])
def test_node_tolerations_wants_the_variable_name(bad):
    raises(
        lambda: f_tol.node_tolerations([], True, bad),
        "node_tolerations: variable must name the role's tolerations variable",
    )


@pytest.mark.parametrize("bad", ["maybe", "", None, 2])
def test_node_tolerations_wants_a_boolean_switch(bad):
    raises(
        lambda: f_tol.node_tolerations([], bad, "collectd_tolerations"),
        f"node_tolerations: the on-control-plane switch for collectd_tolerations must be a boolean, got "
        f"{bad!r}; set it to true or false",
    )


def test_node_tolerations_passes_its_arguments_on(stub):
    tolerations = stub(f_tol, "_tolerations")
    extra = {"key": "a"}
    assert f_tol.node_tolerations((extra,), "false", "collectd_tolerations") == "result"
    assert f_tol.node_tolerations([extra], "yes", "tas_tolerations") == "result"
    assert f_tol.node_tolerations(None, True, "nfd_tolerations") == "result"
    assert f_tol.node_tolerations("junk", False, "nfd_tolerations") == "result"
    assert f_tol.node_tolerations([], True, "tas_extra_tolerations", ("a/b",), control_plane_first=True) == "result"
    assert f_tol.node_tolerations([], True, "tas_extra_tolerations", taint_keys="junk") == "result"
    kubeadm = {"keys": ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"],
               "control_plane_first": False}  # fmt: skip
    assert tolerations.calls == [
        (([extra], False, "collectd_tolerations"), kubeadm),
        (([extra], True, "tas_tolerations"), kubeadm),
        ((None, True, "nfd_tolerations"), kubeadm),
        (("junk", False, "nfd_tolerations"), kubeadm),
        (([], True, "tas_extra_tolerations"), {"keys": ["a/b"], "control_plane_first": True}),
        (([], True, "tas_extra_tolerations"), {"keys": "junk", "control_plane_first": False}),
    ]
    assert isinstance(tolerations.calls[0][0][0], list)
    assert isinstance(tolerations.calls[4][1]["keys"], list)


@pytest.mark.parametrize("bad", ["true", "yes", 1, None])
def test_node_tolerations_wants_a_boolean_order(bad):
    raises(
        lambda: f_tol.node_tolerations([], True, "tas_extra_tolerations", control_plane_first=bad),
        f"node_tolerations: control_plane_first for tas_extra_tolerations must be true or false, got {bad!r}",
    )


def test_node_tolerations_errors_say_nothing_changed(stub):
    stub(f_tol, "_tolerations", error=ValueError("collectd_tolerations must be a list"))
    raises(
        lambda: f_tol.node_tolerations("x", True, "collectd_tolerations"),
        "Nothing was changed: collectd_tolerations must be a list",
    )


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - node_tolerations, `boolean(on_control_plane, strict=True)` -> `boolean(on_control_plane, )`:
#   strict=True is Ansible's default for boolean().
