"""The descheduler role's decisions: the release for a cluster, TAS's policy, and a policy of the
user's own refused, all problems at once, where the descheduler itself would crash-loop or never
evict (its checks at start in v0.36.0's policyconfig.go, profile.go and the plugins' validation)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import descheduler as ds

TAS_README = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "ProfileName",
            "pluginConfig": [
                {
                    "name": "RemovePodsViolatingNodeAffinity",
                    "args": {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]},
                }
            ],
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
        }
    ],
}


@pytest.mark.parametrize(
    ("version", "tag"),
    [("v1.36.3", "v0.36.0"), ("v1.30.14", "v0.30.2"), ("1.29", "v0.29.0"), ("v1.33.0-rc.1", "v0.33.0")],
)
def test_the_release_matches_the_kubernetes_minor(version, tag):
    assert ds.release_for(version) == (tag, None)


def test_a_cluster_outside_the_table_is_refused_naming_what_to_do():
    tag, old = ds.release_for("v1.28.9")
    assert tag is None and "older than 1.29" in old and "v0.29.0" in old and "poweraware_enable_descheduler" in old
    tag, new = ds.release_for("v1.37.0")
    assert tag is None and "newer than 1.36" in new and "descheduler_image_tag to v0.37.0" in new
    assert "not a version like v1.36.3" in ds.release_for("latest")[1]


def test_the_default_is_the_tas_readme_policy_and_valid():
    result = ds.plan({}, "v1.36.3")
    assert result == {
        "policy": ds.tas_policy(),
        "image_tag": "v0.36.0",
        "image_digest": "sha256:7ca92c0a7b4f1c51d306409da6b832005fcadb224e384795646376726734c6e5",
        "reads_metrics": False,
        "errors": [],
    }
    # the same plugin, arguments and extension point as the TAS README's policy
    readme = TAS_README["profiles"][0]
    ours = result["policy"]["profiles"][0]
    assert (ours["pluginConfig"], ours["plugins"]) == (readme["pluginConfig"], readme["plugins"])
    assert ds.policy_errors(TAS_README) == []


def test_namespaces_limit_the_default_policy():
    policy = ds.plan({}, "v1.36.3", namespaces=["power-demo"])["policy"]
    (config,) = policy["profiles"][0]["pluginConfig"]
    assert config["args"]["namespaces"] == {"include": ["power-demo"]}
    both = ds.plan(TAS_README, "v1.36.3", namespaces=["power-demo"])["errors"]
    assert any("descheduler_namespaces applies only to the policy this role writes" in e for e in both)


def test_an_explicit_tag_wins_over_the_cluster_version():
    assert ds.plan({}, "v1.40.0", image_tag="v0.36.0")["errors"] == []
    assert "not a descheduler release tag" in ds.plan({}, "v1.36.3", image_tag="latest")["errors"][0]


@pytest.mark.parametrize("interval", ["5m", "90s", "1h30m", "2.5m"])
def test_go_durations_are_accepted(interval):
    assert ds.plan({}, "v1.36.3", interval=interval)["errors"] == []


@pytest.mark.parametrize("interval", ["5", "0s", "-5m", "five minutes", ""])
def test_other_intervals_are_refused(interval):
    (error,) = ds.plan({}, "v1.36.3", interval=interval)["errors"]
    assert error.startswith(f"descheduler_interval={interval!r} is not a positive Go duration")


def test_every_problem_of_a_policy_at_once():
    bad = {
        "apiVersion": "descheduler/v1alpha1",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": -1,
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "RemovePodsViolatingNodeAffinity", "args": {"nodeAffinityType": ["requiredDuring"]}},
                    {"name": "NoSuchPlugin"},
                ],
                "plugins": {
                    "deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity", "LowNodeUtilization"]},
                    "balance": {"enabled": ["RemoveDuplicates"]},
                    "sort": {"enabled": []},
                },
            },
            {"name": "p", "plugins": {"filter": {"enabled": ["DefaultEvictor"]}}},
        ],
    }
    errors = ds.policy_errors(bad)
    expected = [
        "apiVersion='descheduler/v1alpha1'",
        "profile 'p': pluginConfig RemovePodsViolatingNodeAffinity: args.nodeAffinityType has requiredDuring",
        "profile 'p': pluginConfig[1] names plugin 'NoSuchPlugin'",
        "plugins.deschedule.enabled names LowNodeUtilization, which implements only balance",
        "RemoveDuplicates is enabled in plugins.balance but has no pluginConfig entry",
        "plugins.sort is not an extension point",
        "profile 'p': the name is used by another profile",
        "enables no plugin at the deschedule or balance extension point, so it evicts nothing",
        "maxNoOfPodsToEvictPerNode=-1",
    ]
    for text in expected:
        assert any(text in e for e in errors), (text, errors)
    assert len(errors) == len(expected), errors


def test_the_node_affinity_arguments():
    policy = copy.deepcopy(TAS_README)
    args = policy["profiles"][0]["pluginConfig"][0]["args"]
    args["namespaces"] = {"include": ["a"], "exclude": ["b"]}
    del args["nodeAffinityType"]
    errors = ds.policy_errors(policy)
    assert any("args.nodeAffinityType=None must list one or more" in e for e in errors), errors
    assert any("sets both include and exclude" in e for e in errors), errors


def test_the_default_evictor_needs_no_plugin_config():
    policy = copy.deepcopy(TAS_README)
    policy["profiles"][0]["plugins"]["filter"] = {"enabled": ["DefaultEvictor"]}
    assert ds.policy_errors(policy) == []


def test_a_policy_with_the_metrics_collector_reads_metrics():
    policy = copy.deepcopy(TAS_README)
    policy["metricsCollector"] = {"enabled": True}
    assert ds.plan(policy, "v1.36.3")["reads_metrics"] is True


def test_the_table_holds_the_newest_promoted_patch_of_each_minor():
    # v0.36.0's docs/user-guide.md image list, and the patches promoted to registry.k8s.io after it
    # (the promoter manifest, kubernetes/k8s.io registry.k8s.io/images/k8s-staging-descheduler/images.yaml)
    promoted = {"v0.36.0", "v0.35.0", "v0.34.0", "v0.33.0", "v0.32.2", "v0.31.0", "v0.30.2", "v0.29.0"}
    assert set(ds.RELEASES.values()) == promoted
    assert all(int(tag.split(".")[1]) == minor for minor, tag in ds.RELEASES.items())
    # a digest for every release but v0.34.0, whose promotion published none
    assert set(ds.DIGESTS) == promoted - {"v0.34.0"}
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", d) for d in ds.DIGESTS.values())


def test_the_published_digest_goes_only_with_the_release_the_table_chose():
    assert ds.plan({}, "v1.32.4")["image_digest"] == ds.DIGESTS["v0.32.2"]
    assert ds.plan({}, "v1.34.1")["image_digest"] == ""  # v0.34.0: none published
    mine = "sha256:" + "b" * 64
    assert ds.plan({}, "v1.36.3", image_digest=mine)["image_digest"] == mine
    # a tag of the user's: the table cannot vouch for that image, so no digest unless given
    assert ds.plan({}, "v1.36.3", image_tag="v0.36.0")["image_digest"] == ""
    assert ds.plan({}, "v1.36.3", image_tag="v0.36.0", image_digest=mine)["image_digest"] == mine
    # a cluster outside the table gets neither
    assert ds.plan({}, "v1.37.0")["image_digest"] == ""


def test_the_policy_written_is_yaml_the_descheduler_reads():
    text = yaml.safe_dump(ds.tas_policy(["x"]))
    assert yaml.safe_load(text)["apiVersion"] == "descheduler/v1alpha2"


def affinity_errors(args):
    policy = copy.deepcopy(TAS_README)
    policy["profiles"][0]["pluginConfig"][0]["args"] = args
    return ds.policy_errors(policy)


AFFINITY = "profile 'ProfileName': pluginConfig RemovePodsViolatingNodeAffinity: args."
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize("types", [None, [], "requiredDuringSchedulingIgnoredDuringExecution", [REQUIRED, ""], [1]])
def test_the_node_affinity_types_in_full(types):
    assert affinity_errors({"nodeAffinityType": types}) == [
        f"{AFFINITY}nodeAffinityType={types!r} must list one or more of {REQUIRED}, {PREFERRED} "
        f"(TAS's deschedule needs {REQUIRED})"
    ]


def test_unknown_node_affinity_types_are_named_in_full():
    assert affinity_errors({"nodeAffinityType": ["a", REQUIRED, "b"]}) == [
        f"{AFFINITY}nodeAffinityType has a, b, which the descheduler skips with an error and never evicts for; "
        f"use {REQUIRED} or {PREFERRED}"
    ]
    assert affinity_errors({"nodeAffinityType": [PREFERRED, REQUIRED]}) == []


@pytest.mark.parametrize(
    ("namespaces", "errors"),
    [
        ({"include": ["a"]}, []),
        ({"exclude": ["a"]}, []),
        ({}, []),
        ({"include": [], "exclude": ["b"]}, []),
        ({"include": ["a"], "exclude": []}, []),
        (
            {"include": ["a"], "exclude": ["b"]},
            ["namespaces sets both include and exclude; only one of them can be set"],
        ),
        (["a"], ["namespaces=['a'] must be a mapping with include or exclude"]),
        (
            {"include": ["a"], "other": 1},
            ["namespaces={'include': ['a'], 'other': 1} must be a mapping with include or exclude"],
        ),
        ({"include": "a"}, ["namespaces.include='a' must be a list of namespace names"]),
        ({"exclude": "a"}, ["namespaces.exclude='a' must be a list of namespace names"]),
        ({"exclude": [""]}, ["namespaces.exclude=[''] must be a list of namespace names"]),
        (
            {"include": None, "exclude": [1]},
            [
                "namespaces.include=None must be a list of namespace names",
                "namespaces.exclude=[1] must be a list of namespace names",
            ],
        ),
    ],
)
def test_the_namespaces_of_the_node_affinity_arguments_in_full(namespaces, errors):
    assert affinity_errors({"nodeAffinityType": [REQUIRED], "namespaces": namespaces}) == [AFFINITY + e for e in errors]


@pytest.mark.parametrize(
    ("name", "where"),
    [(None, "profiles[0]"), ("", "profiles[0]"), (7, "profiles[0]")],
)
def test_a_profile_without_a_name_is_named_by_its_index(name, where):
    policy = copy.deepcopy(TAS_README)
    policy["profiles"][0]["name"] = name
    assert ds.policy_errors(policy) == [f"{where}: name={name!r} must be a non-empty string"]


KNOWN_PLUGINS = (
    "DefaultEvictor, HighNodeUtilization, LowNodeUtilization, PodLifeTime, RemoveDuplicates, RemoveFailedPods, "
    "RemovePodsHavingTooManyRestarts, RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingNodeAffinity, "
    "RemovePodsViolatingNodeTaints, RemovePodsViolatingTopologySpreadConstraint"
)


def test_a_plugin_config_that_is_no_list_is_refused_in_full():
    policy = copy.deepcopy(TAS_README)
    policy["profiles"][0]["pluginConfig"] = "x"
    assert ds.policy_errors(policy) == [
        "profile 'ProfileName': pluginConfig='x' must be a list of {name, args}",
        "profile 'ProfileName': RemovePodsViolatingNodeAffinity is enabled in plugins.deschedule but has no "
        "pluginConfig entry, and the descheduler stops at start without one; add "
        "{name: RemovePodsViolatingNodeAffinity, args: ...} to pluginConfig",
    ]


def test_every_plugin_config_entry_is_checked_in_full():
    policy = copy.deepcopy(TAS_README)
    plugin = "RemovePodsViolatingNodeAffinity"
    policy["profiles"][0]["pluginConfig"] = [
        plugin,
        {"name": "X"},
        {"name": plugin, "args": "bad"},
        {"name": plugin},
        {"name": plugin, "args": None},
    ]
    where = "profile 'ProfileName': pluginConfig"
    no_types = (
        f"{where} {plugin}: args.nodeAffinityType=None must list one or more of {REQUIRED}, {PREFERRED} "
        f"(TAS's deschedule needs {REQUIRED})"
    )
    assert ds.policy_errors(policy) == [
        f"{where}[0] names plugin None, which the descheduler does not register; known plugins: {KNOWN_PLUGINS}",
        f"{where}[1] names plugin 'X', which the descheduler does not register; known plugins: {KNOWN_PLUGINS}",
        f"{where} {plugin} args='bad' must be a mapping",
        f"{where} configures {plugin} twice; keep one entry",
        no_types,
        f"{where} configures {plugin} twice; keep one entry",
        no_types,
    ]
