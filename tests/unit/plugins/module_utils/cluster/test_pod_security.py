"""pod_security_labels: the Pod Security labels of the namespaces the roles write into."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.pod_security_labels import pod_security_labels
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.pod_security import LEVELS, PREFIX

ARGS = ("monitoring", "restricted", "prometheus", "its pods run as non-root", "prometheus_namespace")


def ns(**labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring", "labels": labels}}


@pytest.mark.parametrize("level", LEVELS)
def test_a_new_namespace_enforces_what_its_pods_need_and_audits_and_warns_at_restricted(level):
    got = pod_security_labels(None, "monitoring", level, "c", "why", "v")
    assert got["errors"] == [] and got["note"] == ""
    assert got["labels"] == {
        PREFIX + "enforce": level,
        PREFIX + "enforce-version": "latest",
        PREFIX + "audit": "restricted",
        PREFIX + "audit-version": "latest",
        PREFIX + "warn": "restricted",
        PREFIX + "warn-version": "latest",
    }


def test_a_namespace_that_was_there_without_a_level_keeps_its_labels_and_says_what_would_fit():
    existing = ns(**{"team": "obs", PREFIX + "warn": "baseline"})
    got = pod_security_labels(existing, *ARGS)
    assert got["errors"] == []
    # only the Pod Security labels are repeated (the server-side apply must not drop them); others are not ours
    assert got["labels"] == {PREFIX + "warn": "baseline"}
    assert "monitoring was there before us" in got["note"] and f"{PREFIX}enforce=restricted" in got["note"]


@pytest.mark.parametrize("enforced", ["privileged", "baseline", "restricted"])
def test_a_level_at_least_as_loose_as_needed_is_kept_never_tightened(enforced):
    existing = ns(**{PREFIX + "enforce": enforced, PREFIX + "enforce-version": "v1.31"})
    got = pod_security_labels(existing, *ARGS)
    assert got == {
        "labels": {PREFIX + "enforce": enforced, PREFIX + "enforce-version": "v1.31"},
        "note": "",
        "errors": [],
    }


def test_a_stricter_level_is_refused_naming_namespace_levels_reason_and_fix():
    existing = ns(**{PREFIX + "enforce": "restricted"})
    got = pod_security_labels(
        existing, "monitoring", "privileged", "collectd", "it mounts the powercap tree", "collectd_namespace"
    )
    (msg,) = got["errors"]
    for part in (
        "namespace monitoring",
        "'restricted'",
        "collectd needs 'privileged'",
        "it mounts the powercap tree",
        "Set collectd_namespace",
        f"{PREFIX}enforce=privileged",
    ):
        assert part in msg, part


def test_baseline_is_stricter_than_privileged_and_looser_than_restricted():
    base = ns(**{PREFIX + "enforce": "baseline"})
    assert pod_security_labels(base, "m", "privileged", "c", "r", "v")["errors"]
    assert not pod_security_labels(base, "m", "restricted", "c", "r", "v")["errors"]
    assert not pod_security_labels(base, "m", "baseline", "c", "r", "v")["errors"]


def test_a_label_that_is_no_level_is_an_error():
    got = pod_security_labels(ns(**{PREFIX + "enforce": "Restricted"}), *ARGS)
    assert "'Restricted' is not a Pod Security level" in got["errors"][0]


def test_an_unknown_needed_level_is_an_error():
    assert (
        "is not one of privileged, baseline, restricted"
        in pod_security_labels(None, "m", "strict", "c", "r", "v")["errors"][0]
    )


@pytest.mark.parametrize("existing", [{}, ""])
def test_an_empty_read_means_absent(existing):
    assert pod_security_labels(existing, *ARGS)["labels"][PREFIX + "enforce"] == "restricted"


@pytest.mark.parametrize(
    ("args", "message"), [(("x",) + ARGS, "the input must be"), ((None, "", *ARGS[1:]), "namespace must be")]
)
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        pod_security_labels(*args)


def test_an_unknown_needed_level_declares_no_labels_and_says_which_levels_there_are():
    assert pod_security_labels(None, "m", "strict", "collectd", "r", "v") == {
        "labels": {},
        "note": "",
        "errors": ["collectd: pod security level 'strict' is not one of privileged, baseline, restricted"],
    }


def test_a_label_that_is_no_level_is_refused_in_full():
    got = pod_security_labels(ns(**{PREFIX + "enforce": "Restricted"}), *ARGS)
    assert got == {
        "labels": {PREFIX + "enforce": "Restricted"},
        "note": "",
        "errors": [
            "namespace monitoring: label pod-security.kubernetes.io/enforce='Restricted' is not a Pod Security level "
            "(privileged, baseline, restricted); the API server rejects every pod there. Fix the label, or set "
            "prometheus_namespace to another namespace."
        ],
    }


@pytest.mark.parametrize("metadata", [{"name": "monitoring", "labels": ["team=obs"]}, {"name": "monitoring"}, None])
def test_a_namespace_without_a_label_mapping_is_one_without_labels(metadata):
    got = pod_security_labels({"kind": "Namespace", "metadata": metadata}, *ARGS)
    assert got["labels"] == {} and got["errors"] == []
    assert got["note"] == (
        "namespace monitoring was there before us and enforces no Pod Security level; its labels are left as they "
        "are (prometheus runs at 'restricted': label it pod-security.kubernetes.io/enforce=restricted if everything "
        "in it may)"
    )
