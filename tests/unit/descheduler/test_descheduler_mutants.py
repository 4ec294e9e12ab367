"""_descheduler against the mutants the plan tests let live (issue 17 item 6): whole messages, the
order of checks, defaults of missing keys, boundaries, and ``plan`` with a policy of the user's own.

Every expectation is written out here from the descheduler's rules (v0.36.0: policyconfig.go,
profile.go, setupplugins.go), not taken from the code under test.
"""

from __future__ import annotations

import copy

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import descheduler as ds

AFFINITY = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}


def profile(plugins, configs=None, name="p"):
    result = {"name": name, "plugins": plugins}
    if configs is not None:
        result["pluginConfig"] = configs
    return result


def policy(*profiles, **top):
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": list(profiles), **top}


DESCHEDULE = {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}}
AFFINITY_CONFIG = [{"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY}]
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
                "pluginConfig": [{"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY}],
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
    configs = [{"name": "PodLifeTime"}, {"name": "RemovePodsViolatingNodeAffinity", "args": AFFINITY}]
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


# Mutants left alive on purpose (same observable behaviour):
# - _profile_errors: config.get("args", None) / get("args"): a missing args becomes {} on the next line.
# - _profile_errors: enabled_any = None: only ever read as `not enabled_any`, where None is False's twin.
# - release_for: `minor <= oldest`: the oldest minor is in RELEASES and returned before this line.
