"""control_plane_label: the node label of control-plane nodes, given or by the API server's release.

The oracle is the Jinja the tas role chose the label with before the table (issue 46), rendered
with Ansible's own Templar: the filter must give the same label for every cluster version result.

The control_plane_label filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import pathlib

import ansible_collections.poweraware.k8s.plugins.filter.control_plane_label as f_cpl
import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.poweraware.k8s.plugins.filter.control_plane_label import control_plane_label
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.control_plane import CONTROL_PLANE_LABELS
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_version import server_release
from poweraware_testing import raises

ROLES = pathlib.Path(__file__).resolve().parents[4] / "roles"
CONTROL_PLANE, MASTER = "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"

# roles/tas/tasks/deploy.yml before issue 46: the vars and the fact of "Choose the control-plane node label".
ORACLE_VARS = {
    "_tas_server": "{{ (_tas_cluster_info.version | default({})).server | default({}) }}",
    "_tas_major": "{{ ((_tas_server.kubernetes | default({})).major | default('1') | string"
    " | regex_search('[0-9]+')) | default('1', true) | int }}",
    "_tas_minor": "{{ ((_tas_server.kubernetes | default({})).minor | default('0') | string"
    " | regex_search('[0-9]+')) | default('0', true) | int }}",
}
ORACLE_LABEL = (
    "{{ tas_control_plane_label if tas_control_plane_label | length > 0"
    " else ('node-role.kubernetes.io/control-plane' if (_tas_major | int, _tas_minor | int) >= (1, 24)"
    " else 'node-role.kubernetes.io/master') }}"
)


def oracle(cluster_info, given):
    variables = {name: trust_as_template(text) for name, text in ORACLE_VARS.items()}
    variables.update({"_tas_cluster_info": cluster_info, "tas_control_plane_label": given})
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(ORACLE_LABEL))


def server(major, minor):
    kubernetes = {"major": major, "minor": minor}
    return {"changed": False, "version": {"client": "33.1.0", "server": {"kubernetes": kubernetes}}}


SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
CLUSTERS = {
    "1.18": server("1", "18"),
    "1.23": server("1", "23"),
    "1.24": server("1", "24"),
    "1.36": server("1", "36"),
    "managed 1.23+": server("1", "23+"),
    "managed 1.27+": server("1", "27+"),
    "numbers": server(1, 24),
    "2.0": server("2", "0"),
    "0.99": server("0", "99"),
    "unparsable": server("x", "y"),
    "empty fields": server("", ""),
    "null fields": server(None, None),
    "no minor": {"version": {"server": {"kubernetes": {"major": "1"}}}},
    "no kubernetes": {"version": {"server": {}}},
    "no server": {"version": {"client": "33.1.0"}},
    "null version": {"version": None},
    "text version": {"version": "v1.30.0"},
    "skipped": SKIPPED,
}


@pytest.mark.parametrize("given", ["", "example.com/control-plane"])
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_label_is_the_one_the_tas_role_chose_in_jinja(cluster, given):
    got = control_plane_label(CLUSTERS[cluster], given, "tas_control_plane_label")
    assert got == oracle(CLUSTERS[cluster], given)
    assert got == given or got in (CONTROL_PLANE, MASTER)


@pytest.mark.parametrize(
    ("release", "label"),
    [((0, 0), MASTER), ((1, 0), MASTER), ((1, 23), MASTER), ((1, 24), CONTROL_PLANE), ((1, 36), CONTROL_PLANE),
     ((2, 0), CONTROL_PLANE)],
)  # fmt: skip
def test_the_table_changes_label_at_1_24(release, label):
    info = server(str(release[0]), str(release[1]))
    assert control_plane_label(info, "", "tas_control_plane_label") == label
    starts = [since for since, _label in CONTROL_PLANE_LABELS]
    assert starts == sorted(starts, reverse=True)


@pytest.mark.parametrize(
    ("info", "release"),
    [
        (server("1", "27+"), (1, 27)),
        (server(1, 30), (1, 30)),
        (server("v1", "x29"), (1, 29)),
        (server("x", "y"), (1, 0)),
        (server(None, ""), (1, 0)),
        ({"version": {"server": {"kubernetes": {"minor": "25"}}}}, (1, 25)),
        ({"version": {"server": {"kubernetes": {"major": "2"}}}}, (2, 0)),
        (SKIPPED, (1, 0)),
        (None, (1, 0)),
        ("v1.30", (1, 0)),
    ],
)
def test_server_release_reads_the_first_number_of_each_field(info, release):
    assert server_release(info) == release


@pytest.mark.parametrize("given", [None, 5, ["node-role.kubernetes.io/master"]])
def test_a_given_label_that_is_not_text_is_refused_naming_the_variable(given):
    with pytest.raises(AnsibleFilterError) as err:
        control_plane_label(server("1", "30"), given, "tas_control_plane_label")
    assert str(err.value) == (
        "Nothing was changed: tas_control_plane_label must be a node label key such as "
        "node-role.kubernetes.io/control-plane, or empty to choose it by the cluster's version, got "
        f"{given!r}; fix tas_control_plane_label in the inventory"
    )


def test_the_tas_role_decides_through_the_filters_and_its_template_formats():
    deploy = (ROLES / "tas" / "tasks" / "deploy.yml").read_text()
    assert (
        "_tas_cluster_info | poweraware.k8s.control_plane_label(tas_control_plane_label, 'tas_control_plane_label')"
    ) in deploy
    assert (
        "tas_extra_tolerations | poweraware.k8s.node_tolerations(_tas_on_control_plane, 'tas_extra_tolerations',"
    ) in deploy
    assert "regex_search" not in deploy and "node-role.kubernetes.io" not in deploy
    template = (ROLES / "tas" / "templates" / "deployment.yml.j2").read_text()
    assert "tolerations: {{ _tas_tolerations | to_json }}" in template
    assert "- key: {{ _tas_cp_label }}" in template
    assert "append" not in template and "tas_extra_tolerations" not in template


@pytest.mark.parametrize("bad", ["", None, 1])
def test_control_plane_label_wants_the_variable_name(bad):
    raises(
        lambda: f_cpl.control_plane_label({}, "", bad),
        "control_plane_label: variable must name the role's label variable",
    )


def test_control_plane_label_passes_the_release_on(stub):
    label = stub(f_cpl, "_label")
    info = {"version": {"server": {"kubernetes": {"major": "1", "minor": "27+"}}}}
    assert f_cpl.control_plane_label(info, "", "tas_control_plane_label") == "result"
    assert f_cpl.control_plane_label({"skipped": True}, "a/b", "tas_control_plane_label") == "result"
    assert label.calls == [
        (((1, 27), "", "tas_control_plane_label"), {}),
        (((1, 0), "a/b", "tas_control_plane_label"), {}),
    ]


def test_control_plane_label_errors_say_nothing_changed(stub):
    stub(f_cpl, "_label", error=ValueError("tas_control_plane_label must be a node label key"))
    raises(
        lambda: f_cpl.control_plane_label({}, 5, "tas_control_plane_label"),
        "Nothing was changed: tas_control_plane_label must be a node label key",
    )
