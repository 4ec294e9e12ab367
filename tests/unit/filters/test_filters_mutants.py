# ruff: noqa: E501 - exact, long messages
"""The filter plugins (plugins/filter/*.py) checked directly, without Ansible subprocesses.

Written against the mutants mutmut left alive (docs/development.md, "Mutation testing"). Each filter
is a thin wrapper: it checks its input with its own message, turns Ansible's values into what the
library takes (None into [] or {}, tuples into lists, numbers into text) and passes every argument
on, then turns the library's errors into AnsibleFilterError. The oracle for the passing on is a
stand-in library function that records its call (the library itself has its own tests); the
messages are compared exactly; every FilterModule registers exactly its names.
"""

from __future__ import annotations

import datetime
import types

import ansible_collections.poweraware.k8s.plugins.filter.api_server_peers as f_peers
import ansible_collections.poweraware.k8s.plugins.filter.certificate_lifetime_errors as f_lifetime
import ansible_collections.poweraware.k8s.plugins.filter.certificate_renewal_due as f_renewal
import ansible_collections.poweraware.k8s.plugins.filter.coexistence as f_coex
import ansible_collections.poweraware.k8s.plugins.filter.control_plane_label as f_cpl
import ansible_collections.poweraware.k8s.plugins.filter.cpu_power_plan as f_cpu
import ansible_collections.poweraware.k8s.plugins.filter.descheduler_plan as f_desched
import ansible_collections.poweraware.k8s.plugins.filter.image_reference as f_image
import ansible_collections.poweraware.k8s.plugins.filter.node_tolerations as f_tol
import ansible_collections.poweraware.k8s.plugins.filter.peaks_plan as f_peaks
import ansible_collections.poweraware.k8s.plugins.filter.pod_security_labels as f_psa
import ansible_collections.poweraware.k8s.plugins.filter.power_extender_errors as f_ext
import ansible_collections.poweraware.k8s.plugins.filter.power_model as f_model
import ansible_collections.poweraware.k8s.plugins.filter.power_score as f_score
import ansible_collections.poweraware.k8s.plugins.filter.prometheus_service_url as f_prom
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors as f_tas_errors
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labeling as f_tas_labeling
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labels as f_tas_labels
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_permissions as f_tas_permissions
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_normalized as f_tas_norm
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_objects as f_tas_objects
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import DEFAULT_KIND, PowerModelError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_score import PowerScoreError
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.coexistence import CoexistenceError
from poweraware_testing import self_signed_pem


class Recorder:
    """A stand-in library function: records each call, returns ``result`` or raises ``error``."""

    def __init__(self, result="result", error=None):
        self.calls = []
        self.result = result
        self.error = error

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def stub(monkeypatch):
    def install(module, name, result="result", error=None):
        recorder = Recorder(result, error)
        monkeypatch.setattr(module, name, recorder)
        return recorder

    return install


def raises(call, message):
    with pytest.raises(AnsibleFilterError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            f_peers,
            {
                "api_server_peers": "api_server_peers",
                "network_policy_control_plane_errors": "network_policy_control_plane_errors",
            },
        ),
        (f_lifetime, {"certificate_lifetime_errors": "certificate_lifetime_errors"}),
        (f_renewal, {"certificate_renewal_due": "certificate_renewal_due"}),
        (
            f_coex,
            {
                "coexistence": "coexistence",
                "scheduler_config_path": "scheduler_config_path_filter",
                "scheduler_extender_coexistence": "scheduler_extender_coexistence",
                "removal_plan": "removal_plan",
                "namespace_removal_plan": "namespace_removal_plan",
            },
        ),
        (f_cpl, {"control_plane_label": "control_plane_label"}),
        (f_cpu, {"cpu_power_plan": "cpu_power_plan"}),
        (f_desched, {"descheduler_plan": "descheduler_plan"}),
        (f_image, {"image_reference": "image_reference", "image_pull_secrets": "image_pull_secrets"}),
        (f_tol, {"node_tolerations": "node_tolerations"}),
        (f_peaks, {"peaks_plan": "peaks_plan"}),
        (f_psa, {"pod_security_labels": "pod_security_labels"}),
        (f_ext, {"power_extender_errors": "power_extender_errors"}),
        (
            f_model,
            {
                "power_model": "power_model",
                "power_model_fits": "power_model_fits",
                "power_model_promql": "power_model_promql",
                "power_model_annotations": "power_model_annotations",
                "power_model_peaks": "power_model_peaks",
            },
        ),
        (f_score, {"power_score": "power_score"}),
        (f_prom, {"prometheus_service_url": "prometheus_service_url"}),
        (f_tas_errors, {"tas_policy_errors": "tas_policy_errors"}),
        (f_tas_labeling, {"tas_policy_node_labeling": "tas_policy_node_labeling"}),
        (f_tas_labels, {"tas_policy_node_labels": "tas_policy_node_labels"}),
        (f_tas_permissions, {"tas_policy_node_permissions": "tas_policy_node_permissions"}),
        (f_tas_norm, {"tas_policy_normalized": "tas_policy_normalized"}),
        (f_tas_objects, {"tas_policy_objects": "tas_policy_objects"}),
    ],
)
def test_each_filter_module_registers_exactly_its_names(module, names):
    assert module.FilterModule().filters() == {name: getattr(module, attr) for name, attr in names.items()}


# --- api_server_peers ----------------------------------------------------------------------------
SLICE = {"kind": "EndpointSlice", "endpoints": []}
SERVICE = {"kind": "Service", "metadata": {"name": "kubernetes"}}


@pytest.mark.parametrize("bad", ["slices", b"slices", SLICE, [SLICE, "x"], [5]])
def test_api_server_peers_wants_a_list_of_slices(bad):
    raises(lambda: f_peers.api_server_peers(bad), "api_server_peers: the input must be a list of EndpointSlice objects")


@pytest.mark.parametrize("bad", ["kubernetes", ["x"], 5])
def test_api_server_peers_wants_a_service_object_or_null(bad):
    raises(
        lambda: f_peers.api_server_peers([SLICE], bad), "api_server_peers: service must be the Service object or null"
    )


def test_api_server_peers_passes_a_list_and_the_service_on(stub):
    peers = stub(f_peers, "_peers")
    assert f_peers.api_server_peers((SLICE,), SERVICE) == "result"
    assert f_peers.api_server_peers(None) == "result"
    assert f_peers.api_server_peers([SLICE], {}) == "result"
    assert f_peers.api_server_peers([SLICE], SERVICE, "api_servers", "10.0.0.1") == "result"
    assert peers.calls == [
        (([SLICE], SERVICE, "any", None), {}),
        (([], None, "any", None), {}),
        (([SLICE], None, "any", None), {}),
        (([SLICE], SERVICE, "api_servers", "10.0.0.1"), {}),
    ]
    assert isinstance(peers.calls[0][0][0], list)


# --- certificate_lifetime_errors -----------------------------------------------------------------
LIFETIME_MESSAGE = (
    "certificate_lifetime_errors: the input must map the variable names of the CA lifetime, the leaf "
    "lifetime, the leaf renewal window and optionally the CA renewal window to their values"
)


@pytest.mark.parametrize(
    "bad",
    [None, ["a", "b", "c"], ("a", "b", "c", "d"), {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}],
)
def test_certificate_lifetime_errors_wants_three_or_four_values(bad):
    raises(lambda: f_lifetime.certificate_lifetime_errors(bad), LIFETIME_MESSAGE)


def test_certificate_lifetime_errors_passes_a_dict_on(stub):
    errors = stub(f_lifetime, "lifetime_errors", result=[])
    three = types.MappingProxyType({"ca": "10y", "leaf": "1y", "renew": "30d"})
    four = {"ca": "10y", "leaf": "1y", "renew": "30d", "ca_renew": "1y"}
    assert f_lifetime.certificate_lifetime_errors(three) == []
    assert f_lifetime.certificate_lifetime_errors(four) == []
    assert errors.calls == [((dict(three),), {}), ((four,), {})]
    assert errors.calls[0][0][0].__class__ is dict  # exactly a dict, not the mapping type given


# --- certificate_renewal_due ---------------------------------------------------------------------


UTC = datetime.timezone.utc
BEFORE = datetime.datetime(2026, 1, 1, tzinfo=UTC)
AFTER = datetime.datetime(2099, 1, 1, tzinfo=UTC)
PEM = self_signed_pem(BEFORE, AFTER).encode()


@pytest.mark.parametrize("pem", [PEM, PEM.decode(), bytearray(PEM)])
def test_certificate_renewal_due_reads_text_and_bytes(stub, pem):
    due = stub(f_renewal, "renewal_due", result=False)
    assert f_renewal.certificate_renewal_due(pem, "+30d") is False
    ((args, kwargs),) = due.calls
    assert kwargs == {}
    assert args[:3] == (BEFORE, AFTER, "+30d")
    now = datetime.datetime.now(UTC)
    assert args[3].tzinfo is not None and abs((now - args[3]).total_seconds()) < 60


@pytest.mark.parametrize("pem", [None, "", b"", "not a certificate", b"-----BEGIN CERTIFICATE-----\nx\n"])
def test_certificate_renewal_due_unreadable_text_is_due(stub, pem):
    due = stub(f_renewal, "renewal_due", result=False)
    assert f_renewal.certificate_renewal_due(pem, "+30d") is True
    assert due.calls == []


@pytest.mark.parametrize(("pem", "kind"), [(5, "int"), ({"content": "x"}, "dict"), (["x"], "list")])
def test_certificate_renewal_due_refuses_what_is_not_text(stub, pem, kind):
    due = stub(f_renewal, "renewal_due", result=False)
    raises(
        lambda: f_renewal.certificate_renewal_due(pem, "+30d"),
        f"certificate_renewal_due: the input must be the certificate's PEM text, got {kind}; "
        "pass the decoded file content (slurp's content | b64decode)",
    )
    assert due.calls == []


def test_certificate_renewal_due_real_valid_and_bad_window():
    assert f_renewal.certificate_renewal_due(PEM, "+30d") is False
    assert f_renewal.certificate_renewal_due(PEM.decode(), "+36500d") is True


def test_certificate_renewal_due_names_a_bad_window(stub):
    stub(f_renewal, "renewal_due", error=ValueError("not a duration"))
    raises(
        lambda: f_renewal.certificate_renewal_due(PEM, "soon"),
        "certificate_renewal_due: renew_before='soon': not a duration",
    )


def test_certificate_renewal_due_without_cryptography(monkeypatch):
    monkeypatch.setattr(f_renewal, "x509", None)
    raises(
        lambda: f_renewal.certificate_renewal_due(PEM, "+30d"),
        "certificate_renewal_due needs the Python package cryptography on the controller "
        "(community.crypto needs it too): pip install cryptography",
    )


# --- coexistence, scheduler_config_path, scheduler_extender_coexistence --------------------------


def test_coexistence_passes_its_arguments_on(stub):
    decide = stub(f_coex, "decide")
    assert f_coex.coexistence(None, "collectd") == "result"
    assert f_coex.coexistence(({"kind": "DaemonSet"},), "tas", "adopt", {"selector": {"a": "b"}}) == "result"
    assert decide.calls == [
        (("collectd", "fail", []), {"expected": {}}),
        (("tas", "adopt", [{"kind": "DaemonSet"}]), {"expected": {"selector": {"a": "b"}}}),
    ]


def test_coexistence_errors_name_the_filter(stub):
    stub(f_coex, "decide", error=CoexistenceError("collectd_existing must be one of fail|adopt, got 'x'"))
    raises(
        lambda: f_coex.coexistence([], "collectd", "x"),
        "coexistence: collectd_existing must be one of fail|adopt, got 'x'",
    )


def test_scheduler_config_path_passes_text_on(stub):
    path = stub(f_coex, "scheduler_config_path")
    assert f_coex.scheduler_config_path_filter("kind: Pod") == "result"
    assert f_coex.scheduler_config_path_filter(None) == "result"
    assert path.calls == [(("kind: Pod",), {}), (("",), {})]


def test_scheduler_extender_coexistence_passes_its_arguments_on(stub):
    decide = stub(f_coex, "extender_coexistence")
    extenders = [{"url_prefix": "https://x"}]
    assert f_coex.scheduler_extender_coexistence(extenders) == "result"
    assert f_coex.scheduler_extender_coexistence(extenders, "adopt", "m", "c", "/etc/c.yaml", "/etc/m.yaml") == "result"
    assert f_coex.scheduler_extender_coexistence(extenders, "fail", None, None, None, None) == "result"
    assert decide.calls == [
        (("fail", "", "", "", extenders), {"manifest_path": ""}),
        (("adopt", "m", "c", "/etc/c.yaml", extenders), {"manifest_path": "/etc/m.yaml"}),
        (("fail", "", "", "", extenders), {"manifest_path": ""}),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"manifest_text": 1}, "scheduler_extender_coexistence: manifest_text must be text"),
        ({"config_text": b"x"}, "scheduler_extender_coexistence: config_text must be text"),
        ({"config_path": ["/etc/c.yaml"]}, "scheduler_extender_coexistence: config_path must be text"),
        ({"manifest_path": 5}, "scheduler_extender_coexistence: manifest_path must be text"),
    ],
)
def test_scheduler_extender_coexistence_wants_text(kwargs, message):
    raises(lambda: f_coex.scheduler_extender_coexistence([], "fail", **kwargs), message)


def test_scheduler_extender_coexistence_errors_name_the_filter(stub):
    stub(f_coex, "extender_coexistence", error=CoexistenceError("extenders must be a list"))
    raises(
        lambda: f_coex.scheduler_extender_coexistence("x"),
        "scheduler_extender_coexistence: extenders must be a list",
    )


# --- cpu_power_plan ------------------------------------------------------------------------------


def test_cpu_power_plan_defaults(stub):
    choice = stub(f_cpu, "reserved_choice", result={"reserved": "r", "reserved_given": "g", "kubelet_reserved": "k",
                                                    "kubelet_source": "s"})  # fmt: skip
    plan = stub(f_cpu, "plan_node")
    info = {"cpus": []}
    assert f_cpu.cpu_power_plan(info) == "result"
    assert choice.calls == [((None, None, {}, ""), {})]
    assert plan.calls == [
        (
            (info, None, None),
            {
                "reserved": "r",
                "reserved_given": "g",
                "kubelet_reserved": "k",
                "kubelet_source": "s",
                "shared_profile": None,
                "fallback_governor": None,
                "host": "",
                "uncore": None,
                "power_cap": None,
            },
        )
    ]


def test_cpu_power_plan_passes_every_argument_on(stub):
    chosen = {"reserved": "0-1", "reserved_given": True, "kubelet_reserved": "0", "kubelet_source": "kubelet.yaml"}
    choice = stub(f_cpu, "reserved_choice", result=chosen)
    plan = stub(f_cpu, "plan_node")
    info = {"cpus": [0]}
    args = {
        "shared_profile": "shared",
        "fallback_governor": "powersave",
        "host": "node-1",
        "uncore": {"min": 1},
        "power_cap": {"watts": 200},
    }
    kubelet_config = {"path": "/k.yaml", "exists": True, "content": "reservedSystemCPUs: 0-3\n"}
    assert f_cpu.cpu_power_plan(info, ["pool"], ["profile"], reserved="0-1", kubelet_reserved="2",
                                kubelet_config=kubelet_config, kubelet_config_path="kubelet.yaml", **args) == "result"  # fmt: skip
    assert choice.calls == [(("0-1", "2", {"reservedSystemCPUs": "0-3"}, "kubelet.yaml"), {})]
    assert plan.calls == [((info, ["pool"], ["profile"]), {**chosen, **args})]


@pytest.mark.parametrize("content", [None, ""])
def test_cpu_power_plan_reads_no_kubelet_file_as_an_empty_configuration(stub, content):
    choice = stub(f_cpu, "reserved_choice", result={"reserved": "", "reserved_given": False, "kubelet_reserved": None,
                                                    "kubelet_source": "k"})  # fmt: skip
    stub(f_cpu, "plan_node")
    f_cpu.cpu_power_plan({}, kubelet_config={"path": "/k", "exists": content is not None, "content": content})
    assert choice.calls == [((None, None, {}, ""), {})]


def test_cpu_power_plan_refuses_a_kubelet_file_that_is_not_yaml():
    with pytest.raises(AnsibleFilterError) as info:
        f_cpu.cpu_power_plan({}, kubelet_config={"content": "a: [1"}, kubelet_config_path="/k.yaml")
    message = str(info.value)
    assert message.startswith("cpu_power_plan: the kubelet configuration /k.yaml is not YAML ("), message
    assert message.endswith(
        "); point cpu_power_kubelet_config at the kubelet's configuration file, or give cpu_power_kubelet_reserved_cpus"
    ), message


@pytest.mark.parametrize(("bad", "kind"), [("text", "str"), ([], "list")])
def test_cpu_power_plan_wants_the_kubelet_config_result(bad, kind):
    raises(
        lambda: f_cpu.cpu_power_plan({}, kubelet_config=bad),
        f"cpu_power_plan: expected the kubelet_config result of cpu_power_info, got {kind}",
    )


@pytest.mark.parametrize(("bad", "kind"), [(None, "NoneType"), ([], "list"), ("facts", "str")])
def test_cpu_power_plan_wants_the_fact(bad, kind):
    raises(
        lambda: f_cpu.cpu_power_plan(bad),
        f"cpu_power_plan: expected the cpu_power fact of cpu_power_info, got {kind}",
    )


# --- descheduler_plan ----------------------------------------------------------------------------


def test_descheduler_plan_defaults_and_empty_values(stub):
    plan = stub(f_desched, "plan")
    assert f_desched.descheduler_plan(None, "1.30") == "result"
    assert f_desched.descheduler_plan({}, "1.31", None, [], "10m") == "result"
    policy = {"kind": "DeschedulerPolicy"}
    assert f_desched.descheduler_plan(policy, "1.29", "v0.30.1", ["default"], "1h") == "result"
    assert f_desched.descheduler_plan(policy, "1.29", "", None, "1h", None) == "result"
    assert f_desched.descheduler_plan(policy, "1.29", "", None, "1h", "sha256:x") == "result"
    assert plan.calls == [
        (({}, "1.30", "", None, "5m", ""), {}),
        (({}, "1.31", "", None, "10m", ""), {}),
        ((policy, "1.29", "v0.30.1", ["default"], "1h", ""), {}),
        ((policy, "1.29", "", None, "1h", ""), {}),
        ((policy, "1.29", "", None, "1h", "sha256:x"), {}),
    ]


@pytest.mark.parametrize(("bad", "kind"), [([], "list"), ("policy", "str"), (0, "int")])
def test_descheduler_plan_wants_a_mapping(bad, kind):
    raises(
        lambda: f_desched.descheduler_plan(bad, "1.30"),
        f"descheduler_plan: descheduler_policy must be a DeschedulerPolicy mapping or empty, not {kind}",
    )


# --- image_reference -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", None, 5])
def test_image_reference_wants_the_variable_name(bad):
    raises(
        lambda: f_image.image_reference("repo", "v1", "sha256:x", bad),
        "image_reference: variable must name the role's image variable, such as collectd_image",
    )


def test_image_reference_passes_whole_number_tags_as_text(stub):
    reference = stub(f_image, "_reference")
    for tag in ("v1.2", 3, 1.5, True, None):
        assert f_image.image_reference("repo", tag, "sha256:x", "collectd_image") == "result"
    assert reference.calls == [
        (("repo", "v1.2", "sha256:x", "collectd_image"), {}),
        (("repo", "3", "sha256:x", "collectd_image"), {}),
        (("repo", 1.5, "sha256:x", "collectd_image"), {}),  # refused there: YAML's 1.10 is 1.1
        (("repo", True, "sha256:x", "collectd_image"), {}),
        (("repo", None, "sha256:x", "collectd_image"), {}),
    ]


def test_image_reference_refuses_a_tag_yaml_read_as_a_float():
    # tag: 1.10 unquoted is the float 1.1; its text would pull another image. Quoted, it is the tag.
    assert f_image.image_reference("registry.k8s.io/x", "1.10", "", "x_image") == "registry.k8s.io/x:1.10"
    assert f_image.image_reference("registry.k8s.io/x", 2, "", "x_image") == "registry.k8s.io/x:2"
    for tag in (1.1, True):
        raises(
            lambda tag=tag: f_image.image_reference("registry.k8s.io/x", tag, "", "x_image"),
            f"Nothing was changed: x_image_tag={tag!r} is not an image tag: up to 128 letters, digits, '_', '.' "
            "or '-', not starting with '.' or '-' (quote a tag YAML would read as a number, such as \"0.7.0\")",
        )


def test_image_reference_errors_say_nothing_changed(stub):
    stub(f_image, "_reference", error=ValueError("collectd_image has no tag"))
    raises(
        lambda: f_image.image_reference("repo", "", "", "collectd_image"),
        "Nothing was changed: collectd_image has no tag",
    )


# --- control_plane_label -------------------------------------------------------------------------


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


# --- node_tolerations ----------------------------------------------------------------------------


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


# --- peaks_plan ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "kind"), [({}, "dict"), (None, "NoneType"), ("cm", "str")])
def test_peaks_plan_wants_the_lookup_list(bad, kind):
    raises(
        lambda: f_peaks.peaks_plan(bad, "models", "peaks", "http://w"),
        f"peaks_plan: expected the resources list of a ConfigMap lookup (k8s_info), not {kind}",
    )


def test_peaks_plan_passes_the_first_configmap_and_node_names(stub):
    plan = stub(f_peaks, "plan")
    first, second = {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}
    nodes = [{"metadata": {"name": "n1"}}, "n2", {"kind": "Node"}]
    assert f_peaks.peaks_plan([first, second], 7, "peaks", "http://w:8080", nodes, "ConfigMap x/y") == "result"
    assert f_peaks.peaks_plan([], "models", "peaks", "http://w") == "result"
    # a tag Ansible read as a number is a tag; "yes" from -e is the boolean it says
    assert f_peaks.peaks_plan([], "m", "p", "http://w", None, "C", 0.33, "v1.36.3", "yes") == "result"
    unchecked = {"image_tag": None, "server_version": None, "allow_skew": False}
    assert plan.calls == [
        ((first, "7", "peaks", "http://w:8080", ["n1", "n2", None], "ConfigMap x/y"), unchecked),
        ((None, "models", "peaks", "http://w", [], "ConfigMap"), unchecked),
        ((None, "m", "p", "http://w", [], "C"), {"image_tag": "0.33", "server_version": "v1.36.3", "allow_skew": True}),
    ]


def test_peaks_plan_refuses_an_allow_skew_that_is_no_boolean():
    raises(
        lambda: f_peaks.peaks_plan([], "m", "p", "http://w", allow_skew="maybe"),
        "peaks_plan: allow_skew must be a boolean, not 'maybe'",
    )


# --- pod_security_labels -------------------------------------------------------------------------
PSA = ("monitoring", "privileged", "collectd", "reads host files", "collectd_namespace")


def test_pod_security_labels_passes_its_arguments_on(stub):
    labels = stub(f_psa, "_labels")
    namespace = {"kind": "Namespace", "metadata": {"name": "monitoring"}}
    for existing in ("", None, {}, namespace):
        assert f_psa.pod_security_labels(existing, *PSA) == "result"
    assert f_psa.pod_security_labels(None, "ns", "baseline", "tas", "why", "tas_namespace") == "result"
    expected = [
        (("monitoring", None, "privileged", "collectd", "reads host files", "collectd_namespace"), {}),
    ] * 3
    expected += [
        (("monitoring", namespace, "privileged", "collectd", "reads host files", "collectd_namespace"), {}),
        (("ns", None, "baseline", "tas", "why", "tas_namespace"), {}),
    ]
    assert labels.calls == expected


@pytest.mark.parametrize("bad", [["ns"], "ns", 5])
def test_pod_security_labels_wants_a_namespace_object(bad):
    raises(
        lambda: f_psa.pod_security_labels(bad, *PSA),
        "pod_security_labels: the input must be the Namespace object or null",
    )


@pytest.mark.parametrize(
    ("index", "name"), [(0, "namespace"), (1, "level"), (2, "component"), (3, "reason"), (4, "variable")]
)
@pytest.mark.parametrize("bad", ["", None, 5])
def test_pod_security_labels_wants_non_empty_strings(index, name, bad):
    args = list(PSA)
    args[index] = bad
    raises(lambda: f_psa.pod_security_labels(None, *args), f"pod_security_labels: {name} must be a non-empty string")


# --- power_extender_errors -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, [], "power_extender_port=1"])
def test_power_extender_errors_wants_a_mapping(bad):
    raises(
        lambda: f_ext.power_extender_errors(bad),
        "power_extender_errors: the input must map the role's variable names to their values",
    )


def test_power_extender_errors_passes_a_dict_on(stub):
    errors = stub(f_ext, "config_errors", result=[])
    values = types.MappingProxyType({"power_extender_port": 9443})
    assert f_ext.power_extender_errors(values) == []
    assert errors.calls == [(({"power_extender_port": 9443},), {})]
    assert errors.calls[0][0][0].__class__ is dict  # exactly a dict, not the mapping type given


# --- power_model, power_model_fits, power_model_promql -------------------------------------------


def test_power_model_passes_piecewise_options_only_when_given(stub):
    fit = stub(f_model, "fit_model")
    samples = [{"util": 10, "watts": 100}]
    assert f_model.power_model(samples) == "result"
    assert f_model.power_model(samples, "linear", "node-1", robust=False) == "result"
    assert f_model.power_model(samples, "piecewise", "node-2", [30, 60], 0.5) == "result"
    assert f_model.power_model(samples, "piecewise", knots=0, smoothing=0) == "result"
    assert fit.calls == [
        ((samples,), {"kind": DEFAULT_KIND, "node": None, "robust": True}),
        ((samples,), {"kind": "linear", "node": "node-1", "robust": False}),
        ((samples,), {"kind": "piecewise", "node": "node-2", "robust": True, "knots": [30, 60], "smoothing": 0.5}),
        ((samples,), {"kind": "piecewise", "node": None, "robust": True, "knots": 0, "smoothing": 0}),
    ]


def test_power_model_fits_defaults_and_arguments(stub):
    fits = stub(f_model, "fit_nodes")
    by_node = {"n1": []}
    assert f_model.power_model_fits(by_node) == "result"
    assert f_model.power_model_fits(by_node, ["n1"], "linear", 5, 40.0, 2.5) == "result"
    assert fits.calls == [
        ((by_node, None, DEFAULT_KIND, 30, 20.0, 10.0), {}),
        ((by_node, ["n1"], "linear", 5, 40.0, 2.5), {}),
    ]


def test_power_model_promql_passes_its_arguments_on(stub):
    promql = stub(f_model, "power_jump_promql")
    model = {"kind": "linear"}
    assert f_model.power_model_promql(model, "util", "500m", "4", "node-1") == "result"
    assert f_model.power_model_promql(model, "util", 0.5, 4) == "result"
    assert promql.calls == [
        ((model, "util", "500m", "4"), {"node": "node-1"}),
        ((model, "util", 0.5, 4), {"node": None}),
    ]


@pytest.mark.parametrize(
    ("name", "call", "error"),
    [
        ("fit_model", lambda: f_model.power_model([]), PowerModelError("node n1: no samples")),
        ("fit_nodes", lambda: f_model.power_model_fits({}), PowerModelError("node n1: no samples")),
        (
            "power_jump_promql",
            lambda: f_model.power_model_promql({}, "u", 1, 1),
            PowerModelError("node n1: no samples"),
        ),
        (
            "power_jump_promql",
            lambda: f_model.power_model_promql({}, "u", "x", 1),
            QuantityError("node n1: no samples"),
        ),
    ],
)
def test_power_model_errors_keep_their_message(stub, name, call, error):
    stub(f_model, name, error=error)
    raises(call, "node n1: no samples")


# --- power_score ---------------------------------------------------------------------------------


def test_power_score_passes_its_arguments_on(stub):
    score = stub(f_score, "score_nodes")
    assert f_score.power_score(["n"], "500m") == "result"
    assert f_score.power_score(["n"], 250, 10) == "result"
    assert score.calls == [((["n"], "500m"), {"neutral_score": 50}), ((["n"], 250), {"neutral_score": 10})]


def test_power_score_errors_keep_their_message(stub):
    stub(f_score, "score_nodes", error=PowerScoreError("node a: no model"))
    raises(lambda: f_score.power_score([], 1), "node a: no model")


# --- prometheus_service_url ----------------------------------------------------------------------
SVC = {"kind": "Service", "metadata": {"name": "prometheus"}}


@pytest.mark.parametrize("bad", ["svc", b"svc", SVC, [SVC, 1], [None]])
def test_prometheus_service_url_wants_a_list_of_services(bad):
    raises(
        lambda: f_prom.prometheus_service_url(bad),
        "prometheus_service_url: the input must be a list of Service objects",
    )


@pytest.mark.parametrize("bad", ["", None, 9090])
def test_prometheus_service_url_wants_a_port_name(bad):
    raises(
        lambda: f_prom.prometheus_service_url([SVC], bad),
        f"prometheus_service_url: port_name must be a port name, got {bad!r}",
    )


def test_prometheus_service_url_passes_its_arguments_on(stub):
    url = stub(f_prom, "service_url")
    assert f_prom.prometheus_service_url((SVC,)) == "result"
    assert f_prom.prometheus_service_url(None, "web") == "result"
    assert url.calls == [(([SVC], "http"), {}), (([], "web"), {})]


# --- tas_policy_* --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["node_power", b"x", [1], ["a", None]])
def test_tas_policy_errors_wants_metric_names(bad):
    raises(
        lambda: f_tas_errors.tas_policy_errors({}, bad),
        "tas_policy_errors: known_metrics must be a list of metric names",
    )


@pytest.mark.parametrize("bad", [5, ["node_"]])
def test_tas_policy_errors_wants_a_text_prefix(bad):
    raises(lambda: f_tas_errors.tas_policy_errors({}, None, bad), "tas_policy_errors: stripped_prefix must be a string")


def test_tas_policy_errors_passes_normalized_policies_on(stub):
    normalize = stub(f_tas_errors, "normalize_policy", result="normalized")
    one = stub(f_tas_errors, "validate_policy", result=["one"])
    many = stub(f_tas_errors, "validate_policies", result=["many"])
    assert f_tas_errors.tas_policy_errors({"p": 1}) == ["one"]
    assert f_tas_errors.tas_policy_errors({"p": 2}, ["node_power"], None) == ["one"]
    assert f_tas_errors.tas_policy_errors([{"p": 3}, {"p": 4}], [], "x_") == ["many"]
    assert normalize.calls == [(({"p": n},), {}) for n in (1, 2, 3, 4)]
    assert one.calls == [
        (("normalized",), {"known_metrics": None, "stripped_prefix": "node_"}),
        (("normalized",), {"known_metrics": ["node_power"], "stripped_prefix": ""}),
    ]
    assert many.calls == [((["normalized", "normalized"],), {"known_metrics": [], "stripped_prefix": "x_"})]
    assert f_tas_errors.tas_policy_errors([{"p": 5}], None, None) == ["many"]
    assert many.calls[-1] == ((["normalized"],), {"known_metrics": None, "stripped_prefix": ""})


def test_tas_policy_node_labeling_and_normalized_pass_the_policy_on(stub):
    labeling = stub(f_tas_labeling, "node_labeling_strategies", result=["labeling"])
    normalize = stub(f_tas_norm, "normalize_policy", result={"n": 1})
    assert f_tas_labeling.tas_policy_node_labeling({"p": 1}) == ["labeling"]
    assert f_tas_norm.tas_policy_normalized({"p": 2}) == {"n": 1}
    assert labeling.calls == [(({"p": 1},), {})]
    assert normalize.calls == [(({"p": 2},), {})]


@pytest.mark.parametrize(("nodes", "policies"), [({}, []), ([], {}), (None, None)])
def test_tas_policy_node_labels_wants_lists(nodes, policies):
    raises(
        lambda: f_tas_labels.tas_policy_node_labels(nodes, policies),
        "tas_policy_node_labels: the input must be a list of Nodes and policies a list",
    )


def test_tas_policy_node_labels_passes_its_arguments_on(stub):
    labels = stub(f_tas_labels, "policy_node_labels")
    assert f_tas_labels.tas_policy_node_labels(["node"], ["policy"]) == "result"
    assert labels.calls == [((["node"], ["policy"]), {})]


@pytest.mark.parametrize("bad", ["", None, 5])
def test_tas_policy_objects_wants_a_namespace(bad):
    raises(
        lambda: f_tas_objects.tas_policy_objects({}, [], bad),
        "tas_policy_objects: default_namespace must be a non-empty string",
    )


def test_tas_policy_objects_passes_its_arguments_on(stub):
    objects = stub(f_tas_objects, "policy_objects", result=(["object"], []))
    assert f_tas_objects.tas_policy_objects({}, ["p"], "tas") == ["object"]
    assert f_tas_objects.tas_policy_objects({"power": 1}, [], "ns", "my_policies") == ["object"]
    assert objects.calls == [
        ((None, ["p"], "tas", "tas_policy_policies"), {}),
        (({"power": 1}, [], "ns", "my_policies"), {}),
    ]


def test_tas_policy_objects_problems_say_nothing_changed(stub):
    stub(f_tas_objects, "policy_objects", result=([], ["policy a: no name", "policy b: no rules"]))
    raises(
        lambda: f_tas_objects.tas_policy_objects(None, [], "tas"),
        "Nothing was changed: policy a: no name; policy b: no rules",
    )


# Mutants left alive on purpose (same observable behaviour), from the mutation run of these files:
# - certificate_renewal_due, `bytes(pem or b"")` -> `bytes(pem or b"XXXX")`: an empty or missing
#   certificate then reads b"XXXX", which is just as unparsable: due either way.
# - node_tolerations, `boolean(on_control_plane, strict=True)` -> `boolean(on_control_plane, )`:
#   strict=True is Ansible's default for boolean().
