"""The descheduler role's decisions: the release for a cluster, TAS's policy, and a policy of the
user's own refused, all problems at once, where the descheduler itself would crash-loop or never
evict (its checks at start in v0.36.0's policyconfig.go, profile.go and the plugins' validation).

descheduler's checks one by one: whole messages, the
order of checks, defaults of missing keys, boundaries, and ``plan`` with a policy of the user's own.

Every expectation is written out here from the descheduler's rules (v0.36.0: policyconfig.go,
profile.go, setupplugins.go), not taken from the code under test.
"""

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


AFFINITY_ARGS = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}


def profile(plugins, configs=None, name="p"):
    result = {"name": name, "plugins": plugins}
    if configs is not None:
        result["pluginConfig"] = configs
    return result


def policy(*profiles, **top):
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": list(profiles), **top}


DESCHEDULE = {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}}
AFFINITY_CONFIG = [{"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY_ARGS}]
GOOD = policy(profile(DESCHEDULE, AFFINITY_CONFIG))
NOTHING = (
    "profile 'p': enables no plugin at the deschedule or balance extension point, so it evicts nothing; "
    "enable RemovePodsViolatingNodeAffinity under plugins.deschedule for TAS's deschedule strategy"
)


def test_tas_policy_is_the_readme_policy_under_our_profile_name():
    assert ds.tas_policy() == {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "tas-deschedule",
                "pluginConfig": [{"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY_ARGS}],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            }
        ],
    }


def test_release_messages_say_what_to_do():
    assert ds.release_for("latest") == (
        None,
        "the cluster's Kubernetes version 'latest' is not a version like v1.36.3; "
        "set descheduler_image_tag to the descheduler release to deploy",
    )
    assert ds.release_for("v1.28.0") == (
        None,
        "Kubernetes 1.28 is older than 1.29, the oldest release whose descheduler (v0.29.0) reads the "
        "descheduler/v1alpha2 policy this role writes; upgrade the cluster, or deploy a descheduler of your "
        "own and set poweraware_enable_descheduler to false",
    )
    assert ds.release_for("v1.29.0") == ("v0.29.0", None)  # the oldest known minor itself is served


def test_policy_level_messages_in_full():
    assert ds.policy_errors([]) == ["the descheduler policy must be a DeschedulerPolicy mapping, not list"]
    assert ds.policy_errors({**GOOD, "apiVersion": "descheduler/v1alpha1"}) == [
        "apiVersion='descheduler/v1alpha1': the policy must be apiVersion descheduler/v1alpha2 "
        "(v1alpha1 is no longer read since descheduler v0.30)"
    ]
    assert ds.policy_errors({**GOOD, "kind": "Policy"}) == ["kind='Policy': the policy must be kind DeschedulerPolicy"]


@pytest.mark.parametrize("profiles", [None, [], "p", {"name": "p"}])
def test_profiles_must_be_a_non_empty_list(profiles):
    assert ds.policy_errors({**GOOD, "profiles": profiles}) == [
        f"profiles={profiles!r}: the policy needs a list of one or more profiles"
    ]


@pytest.mark.parametrize(
    "key", ["maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"]
)
def test_eviction_limits_are_whole_numbers_from_zero(key):
    for good in (0, 1, 25):
        assert ds.policy_errors({**GOOD, key: good}) == [], good
    for bad in (-1, True, 1.5, "3"):
        assert ds.policy_errors({**GOOD, key: bad}) == [f"{key}={bad!r} must be a whole number of pods, 0 or more"]


def test_a_profile_with_only_a_balance_plugin_evicts_and_is_accepted():
    balance = profile({"balance": {"enabled": ["LowNodeUtilization"]}}, [{"name": "LowNodeUtilization", "args": {}}])
    assert ds.policy_errors(policy(balance)) == []


def test_a_profile_enabling_nothing_gets_the_whole_message():
    assert ds.policy_errors(policy({"name": "p"})) == [NOTHING]  # no plugins key: the same as {}
    assert ds.policy_errors(policy(profile({"deschedule": {}}))) == [NOTHING]  # no enabled: the same as []


def test_a_plugin_at_a_point_it_lacks_names_the_points_it_has():
    p = profile({**DESCHEDULE, "filter": {"enabled": ["DefaultEvictor"]}, "balance": {"enabled": ["PodLifeTime"]}})
    p["pluginConfig"] = [*AFFINITY_CONFIG, {"name": "PodLifeTime", "args": {}}]
    assert ds.policy_errors(policy(p)) == [
        "profile 'p': plugins.balance.enabled names PodLifeTime, which implements only deschedule; "
        "the descheduler would stop at start"
    ]
    q = profile({**DESCHEDULE, "deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity", "DefaultEvictor"]}})
    q["pluginConfig"] = AFFINITY_CONFIG
    assert ds.policy_errors(policy(q)) == [
        "profile 'p': plugins.deschedule.enabled names DefaultEvictor, which implements only filter, "
        "preEvictionFilter; the descheduler would stop at start"
    ]


def test_bad_plugin_sections_are_reported_and_the_next_points_still_checked():
    # Each bad point comes first in the mapping; a later good point is still read (no early stop),
    # so the profile evicts and "enables no plugin" is not reported.
    cases = {
        "bogus": (
            {"bogus": {"enabled": []}},
            "profile 'p': plugins.bogus is not an extension point; use deschedule, balance, filter, preEvictionFilter",
        ),
        "a list": (
            {"balance": ["LowNodeUtilization"]},
            "profile 'p': plugins.balance=['LowNodeUtilization'] must be {enabled: [plugin names]}",
        ),
        "enabled not a list": (
            {"balance": {"enabled": "LowNodeUtilization"}},
            "profile 'p': plugins.balance={'enabled': 'LowNodeUtilization'} must be {enabled: [plugin names]}",
        ),
        "unknown plugin": (
            {"balance": {"enabled": ["Bogus"]}},
            "profile 'p': plugins.balance.enabled names 'Bogus', which the descheduler does not register",
        ),
    }
    for what, (bad, message) in cases.items():
        plugins = {**bad, **DESCHEDULE}
        assert ds.policy_errors(policy(profile(plugins, AFFINITY_CONFIG))) == [message], what


@pytest.mark.parametrize("plugins", ["deschedule", ["deschedule"], 3])
def test_plugins_that_are_not_a_mapping(plugins):
    assert ds.policy_errors(policy(profile(plugins))) == [
        f"profile 'p': plugins={plugins!r} must map extension points to {{enabled: [...]}}",
        NOTHING,
    ]


def test_plugin_config_without_args_is_an_empty_mapping():
    configs = [{"name": "PodLifeTime"}, {"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY_ARGS}]
    p = profile({"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity", "PodLifeTime"]}}, configs)
    assert ds.policy_errors(policy(p)) == []


# plan(): the role's one call.
def test_plan_checks_a_policy_of_the_users_own_and_prefixes_its_problems():
    result = ds.plan(copy.deepcopy(GOOD), "v1.36.3")
    assert result == {
        "policy": GOOD,
        "image_tag": "v0.36.0",
        "image_digest": ds.DIGESTS["v0.36.0"],
        "reads_metrics": False,
        "errors": [],
    }
    bad = ds.plan({**GOOD, "kind": "Policy"}, "v1.36.3")
    assert bad["errors"] == ["descheduler_policy: kind='Policy': the policy must be kind DeschedulerPolicy"]
    assert ds.plan(["not", "a", "policy"], "v1.36.3")["errors"] == [
        "descheduler_policy: the descheduler policy must be a DeschedulerPolicy mapping, not list"
    ]
    assert ds.plan(["x"], "v1.36.3")["reads_metrics"] is False


def test_plan_namespaces():
    assert ds.plan({}, "v1.36.3", namespaces=["power-demo", "default"])["errors"] == []
    assert ds.plan({}, "v1.36.3", namespaces=[])["errors"] == []
    assert ds.plan(GOOD, "v1.36.3", namespaces=["power-demo"])["errors"] == [
        "descheduler_namespaces applies only to the policy this role writes; with descheduler_policy set, "
        "put args.namespaces in its RemovePodsViolatingNodeAffinity pluginConfig instead"
    ]
    assert ds.plan({}, "v1.36.3", namespaces="power-demo")["errors"] == [
        "descheduler_namespaces='power-demo' must be a list of namespace names"
    ]
    assert ds.plan({}, "v1.36.3", namespaces=["ok", "", "Power", "x" * 64, "a\n"])["errors"] == [
        "descheduler_namespaces has '', 'Power', '" + "x" * 64 + "', 'a\\n', which no namespace can be named: "
        "a namespace name is a DNS label (lower-case letters, digits and '-', at most 63 characters)"
    ]
    assert ds.plan({}, "v1.36.3", namespaces=["x" * 63])["errors"] == []


def test_plan_image_tag_and_release_problems():
    assert ds.plan({}, "v1.36.3", image_tag=None)["image_tag"] == "v0.36.0"
    assert ds.plan({}, "v1.36.3", image_tag=" v0.35.0 ")["image_tag"] == "v0.35.0"
    old = ds.plan({}, "v1.20.0")
    assert old["image_tag"] == "" and old["errors"] == [ds.release_for("v1.20.0")[1]]
    assert old["errors"][0].startswith("Kubernetes 1.20 is older than 1.29")


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - _profile_errors: config.get("args", None) / get("args"): a missing args becomes {} on the next line.
# - _profile_errors: enabled_any = None: only ever read as `not enabled_any`, where None is False's twin.
# - release_for: `minor <= oldest`: the oldest minor is in RELEASES and returned before this line.
