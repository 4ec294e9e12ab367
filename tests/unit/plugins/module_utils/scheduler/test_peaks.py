"""The peaks role's decisions: the scheduler configuration upstream Peaks reads, from the published
models, and what would make Peaks misplace pods refused before anything is applied.

The facts come from scheduler-plugins v0.33.5 (pkg/trimaran/peaks/peaks.go, apis/config/v1/types.go);
that the real scheduler-plugins kube-scheduler loads the configuration and places by it is shown in
the lab (tests/integration/test_peaks.py).
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.filter.peaks_plan import peaks_plan
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import peaks

WATCHER = "http://peaks-load-watcher.kube-system.svc:2020"
MODELS = {"worker-2": {"k0": 60.0, "k1": 12.5, "k2": 0.021}, "worker-1": {"k0": 40.0, "k1": 8.0, "k2": 0.03}}


def configmap(models, key="power_model"):
    return {"metadata": {"name": "peaks-node-power-model"}, "data": {key: json.dumps(models)}}


def test_one_profile_with_peaks_the_only_score_plugin_and_the_models_in_its_args():
    result = peaks.plan(configmap(MODELS), "power_model", "Peaks", WATCHER, ["worker-1", "worker-2"])
    assert result["errors"] == []
    config = result["config"]
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["leaderElection"] == {"leaderElect": False}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "Peaks"
    assert profile["plugins"]["score"] == {"enabled": [{"name": "Peaks"}], "disabled": [{"name": "*"}]}
    assert profile["plugins"]["preScore"] == {"disabled": [{"name": "*"}]}
    assert "filter" not in profile["plugins"]  # kube-scheduler's filters decide where a pod fits
    (plugin,) = profile["pluginConfig"]
    assert plugin["name"] == "Peaks"
    # PeaksArgs' malformed struct tags make the Go field names the keys: capitalised, exactly
    assert set(plugin["args"]) == {"WatcherAddress", "NodePowerModel"}
    assert plugin["args"]["WatcherAddress"] == WATCHER
    assert plugin["args"]["NodePowerModel"] == MODELS
    assert list(plugin["args"]["NodePowerModel"]) == ["worker-1", "worker-2"]  # sorted: same bytes each run
    assert result["nodes_without_model"] == []
    # what the ConfigMap holds survives a YAML round trip unchanged
    assert yaml.safe_load(yaml.safe_dump(config)) == config


def test_nodes_without_a_model_are_named():
    result = peaks.plan(configmap(MODELS), "power_model", "Peaks", WATCHER, ["cp", "worker-1", "worker-2", "worker-3"])
    assert result["errors"] == []
    assert result["nodes_without_model"] == ["cp", "worker-3"]


def test_integers_are_numbers_and_come_out_as_floats():
    result = peaks.plan(configmap({"n": {"k0": 50, "k1": 2, "k2": 0}}), "power_model", "Peaks", WATCHER)
    assert result["errors"] == []
    assert result["models"] == {"n": {"k0": 50.0, "k1": 2.0, "k2": 0.0}}
    assert all(isinstance(v, float) for v in result["models"]["n"].values())


@pytest.mark.parametrize(
    ("configmaps", "expected"),
    [
        (None, "ConfigMap kube-system/m: not found: the power_models role publishes it"),
        ({"data": {}}, "has no key 'power_model' (keys: none): set peaks_models_configmap_key"),
        ({"data": {"other": "{}"}}, "(keys: other)"),
        ({"data": {"power_model": "{"}}, "not JSON"),
        ({"data": {"power_model": "[]"}}, "expected a JSON object of node name -> {k0, k1, k2}, got list"),
        ({"data": {"power_model": "{}"}}, "no node has a Peaks model: without models Peaks scores every node alike"),
    ],
)
def test_a_missing_or_unreadable_configmap_is_refused(configmaps, expected):
    result = peaks.plan(configmaps, "power_model", "Peaks", WATCHER, where="ConfigMap kube-system/m")
    assert result["config"] == {}
    assert any(expected in e for e in result["errors"]), result["errors"]


def test_every_bad_model_is_named_at_once():
    models = {
        "a": {"k0": 1.0, "k1": 1.0},  # k2 missing
        "b": {"k0": 1.0, "k1": 1.0, "k2": 0.01, "k3": 1},  # unknown field: Peaks disallows them
        "c": {"k0": "<replace with node 1 k0>", "k1": True, "k2": float("nan")},  # upstream's sample's strings
        "d": [1, 2, 3],
        "ok": {"k0": 1.0, "k1": 1.0, "k2": 0.01},
    }
    result = peaks.plan(configmap(models), "power_model", "Peaks", WATCHER)
    assert result["config"] == {}
    errors = result["errors"]
    assert len(errors) == 4, errors
    assert "node 'a': missing k2" in errors[0]
    assert "node 'b': unknown k3" in errors[1]
    assert "node 'c': not finite numbers: k0='<replace with node 1 k0>', k1=True, k2=nan" in errors[2]
    assert errors[2].endswith("(Peaks reads float64)")
    assert "node 'd': expected {k0, k1, k2}" in errors[3]


def test_a_jump_peaks_cannot_hold_in_an_int64_is_refused_at_the_boundary():
    # |k1 (e^(100 k2) - 1)|: the most a pod can add, from 0 to 100 %
    k2 = 0.05
    limit_k1 = peaks.MAX_JUMP_W / (math.exp(100 * k2) - 1)
    fits = peaks.plan(configmap({"n": {"k0": 0.0, "k1": limit_k1 * 0.999, "k2": k2}}), "power_model", "Peaks", WATCHER)
    assert fits["errors"] == []
    over = peaks.plan(configmap({"n": {"k0": 0.0, "k1": limit_k1 * 1.001, "k2": k2}}), "power_model", "Peaks", WATCHER)
    assert len(over["errors"]) == 1 and "beyond the 9223 W Peaks can score" in over["errors"][0]
    # a negative slope counts by its size, and an exponent that overflows a float too
    for model in ({"k0": 0.0, "k1": -limit_k1 * 1.001, "k2": k2}, {"k0": 0.0, "k1": 1.0, "k2": 100.0}):
        assert peaks.plan(configmap({"n": model}), "power_model", "Peaks", WATCHER)["errors"], model
    # 1e15 W per watt times 9223 W is still an int64
    assert peaks.MAX_JUMP_W * 1e15 < 2**63


@pytest.mark.parametrize(
    ("name", "watcher", "expected"),
    [
        ("default-scheduler", WATCHER, "peaks_scheduler_name: default-scheduler is the cluster's kube-scheduler"),
        ("", WATCHER, "peaks_scheduler_name: empty"),
        (
            "Peaks",
            "peaks-load-watcher:2020",
            "load-watcher address 'peaks-load-watcher:2020': expected http(s)://host:port",
        ),
    ],
)
def test_the_name_and_the_address_are_checked(name, watcher, expected):
    result = peaks.plan(configmap(MODELS), "power_model", name, watcher)
    assert result["config"] == {}
    assert [e for e in result["errors"] if expected in e], result["errors"]


def test_all_problems_at_once():
    result = peaks.plan(None, "power_model", "default-scheduler", "nope")
    assert len(result["errors"]) == 3


def test_the_filter_takes_a_lookup_and_node_objects():
    nodes = [{"metadata": {"name": "worker-1"}}, {"metadata": {"name": "worker-9"}}]
    result = peaks_plan([configmap(MODELS)], "power_model", "Peaks", WATCHER, nodes)
    assert result["errors"] == [] and result["nodes_without_model"] == ["worker-9"]
    assert peaks_plan([], "power_model", "Peaks", WATCHER)["errors"][0].startswith("ConfigMap: not found")
    with pytest.raises(Exception, match="expected the resources list of a ConfigMap lookup"):
        peaks_plan({"data": {}}, "power_model", "Peaks", WATCHER)


NOT_FOUND = (
    "ConfigMap kube-system/m: not found: the power_models role publishes it (power_models_peaks_configmap_enabled); "
    "run the power models first, or point peaks_models_configmap at your own"
)
BAD_ADDRESS = (
    "load-watcher address {!r}: expected http(s)://host:port, for example http://load-watcher.kube-system.svc:2020"
)
WHERE = "ConfigMap kube-system/m key power_model"


@pytest.mark.parametrize(
    ("configmaps", "name", "watcher", "errors"),
    [
        (
            None,
            "default-scheduler",
            "nope",
            [
                "peaks_scheduler_name: default-scheduler is the cluster's kube-scheduler: two schedulers would race "
                "for every pod; choose another name (upstream's is Peaks)",
                BAD_ADDRESS.format("nope"),
                NOT_FOUND,
            ],
        ),
        (
            {"data": {"b": "{}", "a": "{}"}},
            "  ",
            None,
            [
                "peaks_scheduler_name: empty: pods opt in with this schedulerName; upstream's is Peaks",
                BAD_ADDRESS.format(None),
                "ConfigMap kube-system/m: has no key 'power_model' (keys: a, b): set peaks_models_configmap_key",
            ],
        ),
        (
            {"data": None},
            5,
            WATCHER,
            [
                "peaks_scheduler_name: empty: pods opt in with this schedulerName; upstream's is Peaks",
                "ConfigMap kube-system/m: has no key 'power_model' (keys: none): set peaks_models_configmap_key",
            ],
        ),
        (
            {"data": {"power_model": "[]"}},
            "Peaks",
            WATCHER,
            [f"{WHERE}: expected a JSON object of node name -> {{k0, k1, k2}}, got list"],
        ),
        (
            {"data": {"power_model": "{}"}},
            "Peaks",
            WATCHER,
            [
                f"{WHERE}: no node has a Peaks model: without models Peaks scores every node alike; fit them first "
                "(the power_models role with power_models_peaks_configmap_enabled)"
            ],
        ),
    ],
)
def test_the_messages_in_full(configmaps, name, watcher, errors):
    result = peaks.plan(configmaps, "power_model", name, watcher, ["n1"], where="ConfigMap kube-system/m")
    assert result == {"config": {}, "models": {}, "nodes_without_model": ["n1"], "errors": errors, "warnings": []}


def test_text_that_is_no_json_is_named_with_the_parser_s_reason():
    with pytest.raises(ValueError) as parse_error:
        json.loads("{")
    result = peaks.plan({"data": {"power_model": "{"}}, "power_model", "Peaks", WATCHER, where="CM")
    assert result["errors"] == [
        f"CM key power_model: not JSON ({parse_error.value}): publish it again with the power_models role"
    ]


def test_every_bad_model_in_full_in_node_order():
    models = {
        "g": {"k2": "z", "zz": 1, "a": 2},
        "a": {"k0": 1, "k1": 1},
        "d": [1],
        "f": {"k0": 0, "k1": -100, "k2": 0.05},
        "e": {"k0": 0, "k1": 1, "k2": 100.0},
        "ok": {"k0": 1, "k1": 1, "k2": 0.01},
    }
    result = peaks.plan(configmap(models), "power_model", "Peaks", WATCHER, where="CM")
    jump = "W, beyond the 9223 W Peaks can score (it multiplies watts by 1e15 into an int64): refit it"
    # f: |-100 (e^5 - 1)| = 14741.3 W
    assert result["errors"] == [
        "CM key power_model: node 'a': missing k2",
        "CM key power_model: node 'd': expected {k0, k1, k2}, got [1]",
        f"CM key power_model: node 'e': the model's jump from 0 to 100 % is inf {jump}",
        f"CM key power_model: node 'f': the model's jump from 0 to 100 % is 1.474e+04 {jump}",
        "CM key power_model: node 'g': missing k0, k1; unknown a, zz; not finite numbers: k2='z' (Peaks reads float64)",
    ]
    assert result["models"] == {"ok": {"k0": 1.0, "k1": 1.0, "k2": 0.01}}
    assert result["config"] == {}


def test_without_a_place_the_messages_name_the_configmap():
    assert peaks.plan(None, "power_model", "Peaks", WATCHER)["errors"] == [
        "ConfigMap: not found: the power_models role publishes it (power_models_peaks_configmap_enabled); run the "
        "power models first, or point peaks_models_configmap at your own"
    ]
    assert peaks.plan({"data": {"power_model": "[]"}}, "power_model", "Peaks", WATCHER)["errors"] == [
        "ConfigMap key power_model: expected a JSON object of node name -> {k0, k1, k2}, got list"
    ]


def test_a_jump_of_exactly_the_most_peaks_can_hold_is_accepted():
    # k2 = -10: e^(100 k2) underflows to 0.0, so the jump is |k1| exactly
    exact = peaks.plan(configmap({"n": {"k0": 0.0, "k1": 9223.0, "k2": -10.0}}), "power_model", "Peaks", WATCHER)
    assert exact["errors"] == [] and exact["models"] == {"n": {"k0": 0.0, "k1": 9223.0, "k2": -10.0}}
    above = peaks.plan(configmap({"n": {"k0": 0.0, "k1": -9223.5, "k2": -10.0}}), "power_model", "Peaks", WATCHER)
    assert above["errors"] == [
        "ConfigMap key power_model: node 'n': the model's jump from 0 to 100 % is 9224 W, beyond the 9223 W Peaks "
        "can score (it multiplies watts by 1e15 into an int64): refit it"
    ]


# Kubernetes' version skew policy: a kube-scheduler is at most one minor older than kube-apiserver and
# never newer; scheduler-plugins v0.N.x is built with Kubernetes 1.N (its README's compatibility matrix).
@pytest.mark.parametrize(
    ("tag", "server", "fits"),
    [
        ("v0.33.5", "v1.33.5", True),
        ("v0.33.5", "v1.34.0", True),  # one minor older: the policy's live-upgrade allowance
        ("v0.33.800", "v1.34.2-rke2r1", True),  # a plugin-only release; a distribution's version
        ("v0.33.5", "v1.35.0", False),
        ("v0.33.5", "v1.36.3", False),
        ("v0.34.7", "v1.33.1", False),  # newer than the API servers
    ],
)
def test_the_scheduler_release_is_held_to_the_version_skew_policy(tag, server, fits):
    error, warning = peaks.skew(tag, server)
    assert warning == ""
    assert (error == "") is fits, error


def test_outside_the_policy_is_refused_naming_both_versions_the_rule_and_both_fixes():
    error = peaks.skew("v0.33.5", "v1.36.3")[0]
    for part in (
        "peaks_image_tag v0.33.5",
        "built with Kubernetes 1.33",
        "3 minors older than the API servers (v1.36.3)",
        "at most one minor older than kube-apiserver and never newer",
        "a release for 1.36 or 1.35",
        "peaks_allow_version_skew: true",
    ):
        assert part in error, part
    assert "newer than the API servers (v1.33.1)" in peaks.skew("v0.34.7", "v1.33.1")[0]


def test_allowed_outside_the_policy_it_runs_with_a_warning_that_says_unsupported():
    assert peaks.skew("v0.33.5", "v1.36.3", allow=True) == (
        "",
        "peaks_image_tag v0.33.5 is the scheduler-plugins kube-scheduler built with Kubernetes 1.33, 3 minors older "
        "than the API servers (v1.36.3); Kubernetes' version skew policy lets a kube-scheduler be at most one minor "
        "older than kube-apiserver and never newer. Running it anyway because peaks_allow_version_skew is true: "
        "unsupported",
    )


def test_a_tag_that_is_no_release_cannot_be_checked_and_is_refused_unless_allowed():
    error, warning = peaks.skew("latest", "v1.36.3")
    assert warning == "" and "'latest': not a scheduler-plugins release tag" in error
    assert "set peaks_allow_version_skew: true to run it unchecked" in error
    error, warning = peaks.skew("my-build", "v1.36.3", allow=True)
    assert error == "" and warning.endswith("running it because peaks_allow_version_skew is true")


def test_an_unknown_server_version_is_a_warning_not_a_guess():
    error, warning = peaks.skew("v0.33.5", "")
    assert error == "" and "the scheduler's version skew is not checked" in warning


def test_the_plan_carries_the_skew_refusal_with_every_other_problem_and_no_config():
    refused = peaks.plan(None, "power_model", "Peaks", WATCHER, image_tag="v0.33.5", server_version="v1.36.3")
    assert len(refused["errors"]) == 2 and refused["errors"][0].startswith("peaks_image_tag v0.33.5")
    allowed = peaks.plan(
        configmap(MODELS),
        "power_model",
        "Peaks",
        WATCHER,
        image_tag="v0.33.5",
        server_version="v1.36.3",
        allow_skew=True,
    )
    assert allowed["errors"] == [] and allowed["config"] and "unsupported" in allowed["warnings"][0]
    unchecked = peaks.plan(configmap(MODELS), "power_model", "Peaks", WATCHER)
    assert unchecked["warnings"] == [] and unchecked["errors"] == []
