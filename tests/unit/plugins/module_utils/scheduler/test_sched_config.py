"""Extender validation, rendering and merging (pure logic)."""

from __future__ import annotations

import pathlib
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils import k8s_names
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import typed  # noqa: E402


def _one(**kw):
    """One extender through the argument spec (types, defaults) and then the semantic checks, as in the module."""
    base = {"url_prefix": "https://ext.ns.svc:9001", "filter_verb": "filter"}
    base.update(kw)
    extenders, spec_errors = typed([base])
    assert spec_errors == []
    return sc.normalize_extenders(extenders)


def test_valid_minimal_defaults():
    exts, errors = _one(url_prefix="http://127.0.0.1:9001/scheduler")
    assert errors == []
    assert exts[0]["weight"] == 1 and exts[0]["enable_https"] is False and exts[0]["tls"] is None
    exts, errors = _one(tls={"ca_file": "/etc/kubernetes/pki/tas/ca.crt"})
    assert errors == [] and exts[0]["enable_https"] is True
    assert exts[0]["tls"] == {"ca_file": "/etc/kubernetes/pki/tas/ca.crt", "insecure": False}


# kube-scheduler's transport rules (pkg/scheduler/extender.go makeTransport; client-go's
# transport.TLSConfigFor): each refused here is what kube-scheduler refuses at start-up or does silently.
@pytest.mark.parametrize(
    ("tls", "message"),
    [
        (
            None,
            "extenders[0] is https without tls.ca_file: kube-scheduler would then call it without verifying its "
            "certificate; fix: set tls.ca_file to the CA that signed the extender's serving certificate, or set "
            "tls.insecure: true to accept an unverified extender",
        ),
        (
            {"cert_file": "/p/c.crt", "key_file": "/p/c.key"},
            "extenders[0] is https without tls.ca_file: kube-scheduler would then call it without verifying its "
            "certificate; fix: set tls.ca_file to the CA that signed the extender's serving certificate, or set "
            "tls.insecure: true to accept an unverified extender",
        ),
        (
            {"ca_file": "/p/ca.crt", "insecure": True},
            "extenders[0].tls has both insecure and ca_file, which kube-scheduler refuses at start-up (client-go: "
            "'specifying a root certificates file with the insecure flag is not allowed'); fix: drop insecure to "
            "verify the extender with ca_file, or drop ca_file",
        ),
        (
            {"ca_file": "/p/ca.crt", "server_name": "https://tas.ns.svc:9001"},
            "extenders[0].tls.server_name 'https://tas.ns.svc:9001' is not a host name or IP address (Go's TLS "
            "client verifies the certificate against it and sends it as SNI); fix: give the name in the extender's "
            "certificate, such as 'tas-service.telemetry-aware-scheduling.svc', without scheme, port or path",
        ),
    ],
)
def test_tls_that_kube_scheduler_refuses_or_would_not_verify_is_refused(tls, message):
    _exts, errors = _one(**({"tls": tls} if tls else {}))
    assert errors == [message]


@pytest.mark.parametrize(
    "tls",
    [
        {"insecure": True},  # explicit: the user accepts an unverified extender
        {"insecure": True, "server_name": "tas.ns.svc"},
        {"ca_file": "/p/ca.crt", "server_name": "tas-service.telemetry-aware-scheduling.svc."},
        {"ca_file": "/p/ca.crt", "server_name": "10.96.0.10"},
        {"ca_file": "/p/ca.crt", "server_name": "fd00::a"},
    ],
)
def test_verified_or_explicitly_unverified_https_is_accepted(tls):
    assert _one(tls=tls)[1] == []


@pytest.mark.parametrize(
    "name", ["a b", "tas.ns.svc\n", "tas.ns.svc:9001", "-tas.ns", "tas..ns", "x" * 64 + ".ns", "tas/ns", "ü.ns"]
)
def test_server_names_go_could_not_verify_are_refused(name):
    errors = _one(tls={"ca_file": "/p/ca.crt", "server_name": name})[1]
    assert len(errors) == 1 and errors[0].startswith(f"extenders[0].tls.server_name {name!r} is not a host name")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"url_prefix": "ftp://x"}, "url_prefix must be an http:// or https:// URL"),
        ({"url_prefix": "https://x:99999/a"}, "invalid port"),
        ({"filter_verb": None}, "needs at least one of"),
        ({"filter_verb": "a b"}, "filter_verb must be a URL path"),
        ({"weight": 0}, "weight must be a positive integer"),
        ({"weight": -3}, "weight must be a positive integer"),
        ({"http_timeout": "5"}, "http_timeout must be a positive Go duration"),
        ({"http_timeout": "0s"}, "http_timeout must be a positive Go duration"),
        ({"enable_https": False}, "enable_https is False but url_prefix uses https"),
        ({"managed_resources": [{"name": "cpu"}]}, "is not an extended resource name"),
        ({"managed_resources": [{"name": "kubernetes.io/foo"}]}, "is not an extended resource name"),
        ({"tls": {"cert_file": "/a/c.crt"}}, "needs both cert_file and key_file"),
        ({"tls": {"cert_file": "rel/c.crt", "key_file": "/a/k"}}, "must be an absolute path"),
    ],
)
def test_invalid_inputs_say_what_to_fix(kw, message):
    _exts, errors = _one(**kw)
    assert any(message in e for e in errors), errors


def test_all_errors_reported_at_once():
    _exts, errors = sc.normalize_extenders(
        [{"url_prefix": "nope", "weight": 0}, {"url_prefix": "http://a", "filter_verb": "f", "tls": {"ca_file": "/ca"}}]
    )
    assert len(errors) >= 4
    assert any("extenders[1].tls is set but the extender is not https" in e for e in errors)


def test_duplicates_and_two_binders():
    _exts, errors = sc.normalize_extenders(
        [
            {"url_prefix": "http://a/x", "bind_verb": "bind"},
            {"url_prefix": "http://a/x", "bind_verb": "bind"},
        ]
    )
    assert any("listed twice" in e for e in errors)
    assert any("only one extender may set bind_verb" in e for e in errors)


def test_empty_list():
    assert sc.normalize_extenders([])[1] == [
        "extenders must be a non-empty list of extender definitions (each needs at least url_prefix)"
    ]


def test_render_config_and_policy_forms():
    exts, _errors = _one(http_timeout="1m30s", node_cache_capable=True, tls={"ca_file": "/p/ca.crt", "insecure": False})
    config = sc.render_extender(exts[0])
    policy = sc.render_extender(exts[0], policy=True)
    assert config["enableHTTPS"] is True and "enableHttps" not in config
    assert config["httpTimeout"] == "1m30s"
    assert policy["enableHttps"] is True and policy["httpTimeout"] == 90_000_000_000
    assert config["tlsConfig"] == {"caFile": "/p/ca.crt"}
    assert config["nodeCacheCapable"] is True


@pytest.mark.parametrize(
    ("host", "cluster"),
    [
        ("tas-service.telemetry-aware-scheduling.svc.cluster.local", True),
        ("tas-service.tas.svc", True),
        ("tas-service.tas.svc.example.internal", True),
        ("127.0.0.1", False),
        ("extender.example.com", False),
        ("svc.example.com", False),
    ],
)
def test_cluster_dns_detection(host, cluster):
    assert sc.is_cluster_dns_name(host) is cluster


def test_entries_equal_ignores_defaults_and_key_case():
    assert sc.entries_equal({"urlPrefix": "u", "weight": 1, "ignorable": False}, {"urlPrefix": "u"})
    assert sc.entries_equal({"urlPrefix": "u", "enableHttps": True}, {"urlPrefix": "u", "enableHTTPS": True})
    assert not sc.entries_equal({"urlPrefix": "u", "weight": 2}, {"urlPrefix": "u"})


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        # kube-scheduler's defaults: false, empty, zero weight (defaulted to 1)
        ({"urlPrefix": "u", "filterVerb": "", "nodeCacheCapable": False, "weight": 0}, {"urlPrefix": "u"}),
        ({"urlPrefix": "u", "weight": None}, {"urlPrefix": "u", "weight": 1}),
        # nested mappings and lists are compared the same way
        (
            {"urlPrefix": "u", "tlsConfig": {"insecure": False, "caFile": "/ca"}},
            {"urlPrefix": "u", "tlsConfig": {"cafile": "/ca"}},
        ),
        (
            {"urlPrefix": "u", "managedResources": [{"name": "a/b", "ignoredByScheduler": False}]},
            {"urlPrefix": "u", "managedResources": [{"name": "a/b"}]},
        ),
    ],
)
def test_entries_equal_up_to_defaults(ours, theirs):
    assert sc.entries_equal(ours, theirs)
    assert sc.entries_equal(theirs, ours)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({"urlPrefix": "u", "enableHTTPS": True}, {"urlPrefix": "u"}),
        ({"urlPrefix": "u", "ignorable": True}, {"urlPrefix": "u", "ignorable": False}),
        # a default before a field that differs does not end the comparison
        ({"urlPrefix": "u", "ignorable": False, "weight": 2}, {"urlPrefix": "u"}),
        ({"urlPrefix": "u", "ignorable": False, "filterVerb": "f"}, {"urlPrefix": "u"}),
        # an empty string is not kube-scheduler's default weight (it cannot even decode it)
        ({"urlPrefix": "u", "weight": ""}, {"urlPrefix": "u"}),
        ({"urlPrefix": "u", "tlsConfig": {"caFile": "/a"}}, {"urlPrefix": "u", "tlsConfig": {"caFile": "/b"}}),
        ({"urlPrefix": "u", "tlsConfig": {"caFile": "/a"}}, {"urlPrefix": "u"}),
        (
            {"urlPrefix": "u", "managedResources": [{"name": "a/b"}]},
            {"urlPrefix": "u", "managedResources": [{"name": "a/c"}]},
        ),
        (
            {"urlPrefix": "u", "managedResources": [{"name": "a/b", "ignoredByScheduler": True}]},
            {"urlPrefix": "u", "managedResources": [{"name": "a/b"}]},
        ),
    ],
)
def test_entries_differ_beyond_defaults(ours, theirs):
    assert not sc.entries_equal(ours, theirs)
    assert not sc.entries_equal(theirs, ours)


def test_same_content_ignores_the_order_of_extenders_only():
    a, b = {"urlPrefix": "http://a"}, {"urlPrefix": "http://b", "weight": 2}
    doc = {"kind": "KubeSchedulerConfiguration", "extenders": [a, b]}
    assert sc.same_content(doc, dict(doc, extenders=[b, a]))
    assert not sc.same_content(doc, dict(doc, extenders=[a, dict(b, weight=3)]))
    assert not sc.same_content(doc, dict(doc, extenders=[a]))
    assert not sc.same_content(doc, dict(doc, kind="Policy"))
    # entries that are not mappings (refused elsewhere) are compared too, not a crash
    assert sc.same_content({"extenders": ["x", a]}, {"extenders": [a, "x"]})
    assert not sc.same_content({"extenders": ["x", a]}, {"extenders": [a, "y"]})
    assert sc.same_content({"extenders": "odd"}, {"extenders": "odd"})
    assert sc.same_content(None, None) and not sc.same_content(None, {})


CONFIG_V1 = {"kind": "KubeSchedulerConfiguration", "apiVersion": "kubescheduler.config.k8s.io/v1", "extenders": []}


@pytest.mark.parametrize(
    ("doc", "errors"),
    [
        ({}, []),  # a Policy file may leave kind out
        ({"kind": "Policy", "extenders": None}, []),
        ({"kind": "KubeSchedulerConfiguration"}, ["/p has kind 'KubeSchedulerConfiguration', expected Policy"]),
        ({"kind": "Policy", "extenders": {"urlPrefix": "u"}}, ["/p: extenders must be a list"]),
        (
            "kind: Policy",
            ["/p does not hold a YAML/JSON mapping; fix or remove the file (or the flag that points to it)"],
        ),
    ],
)
def test_check_existing_policy(doc, errors):
    assert sc.check_existing_document(doc, 22, True, "/p") == errors


@pytest.mark.parametrize(
    ("doc", "minor", "errors"),
    [
        (CONFIG_V1, 29, []),
        (dict(CONFIG_V1, apiVersion="kubescheduler.config.k8s.io/v1beta3"), 25, []),
        (
            dict(CONFIG_V1, kind="Policy"),
            29,
            ["/c has kind 'Policy', expected KubeSchedulerConfiguration"],
        ),
        (
            {"kind": "KubeSchedulerConfiguration"},
            25,
            [
                "/c uses apiVersion '', which kube-scheduler 1.25 does not serve (it serves "
                "kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3, "
                "kubescheduler.config.k8s.io/v1beta2); migrate the file to kubescheduler.config.k8s.io/v1 first"
            ],
        ),
        (
            dict(CONFIG_V1, apiVersion="kubescheduler.config.k8s.io/v1/v1", extenders="x"),
            29,
            [
                "/c uses apiVersion 'kubescheduler.config.k8s.io/v1/v1', which kube-scheduler 1.29 does not serve (it "
                "serves kubescheduler.config.k8s.io/v1); migrate the file to kubescheduler.config.k8s.io/v1 first",
                "/c: extenders must be a list",
            ],
        ),
    ],
)
def test_check_existing_config(doc, minor, errors):
    assert sc.check_existing_document(doc, minor, False, "/c") == errors


def test_new_documents_hold_copies_of_the_entries_and_loopback_only_when_asked():
    entries = [{"urlPrefix": "u", "managedResources": [{"name": "a/b"}]}]
    config = sc.new_config("kubescheduler.config.k8s.io/v1", entries)
    assert config == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "extenders": entries,
    }
    policy = sc.new_policy(entries)
    assert policy == {"kind": "Policy", "apiVersion": "v1", "extenders": entries}
    config["extenders"][0]["urlPrefix"] = "changed"
    policy["extenders"][0]["managedResources"].clear()
    assert entries == [{"urlPrefix": "u", "managedResources": [{"name": "a/b"}]}]
    loopback = sc.new_config("kubescheduler.config.k8s.io/v1beta1", entries, "/etc/k.conf", insecure_loopback=True)
    assert {k: v for k, v in loopback.items() if k != "extenders"} == {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/k.conf"},
        "healthzBindAddress": "127.0.0.1:10251",
        "metricsBindAddress": "127.0.0.1:10251",
    }


def test_strict_decoding_messages_are_exact():
    assert sc.validate_extenders([{"urlPrefix": 5, "ignorable": "yes", "tlsConfig": {"insecure": 1}}]) == [
        "extenders[0].urlPrefix (urlPrefix 5): 5 must be a string; kube-scheduler cannot decode it and exits at start; "
        "fix the value",
        "extenders[0].ignorable (urlPrefix 5): 'yes' must be true or false; kube-scheduler cannot decode it and exits "
        "at start; fix the value",
        "extenders[0].tlsConfig.insecure (urlPrefix 5): 1 must be true or false; kube-scheduler cannot decode it and "
        "exits at start; fix the value",
    ]


def test_duration_parsing_and_its_errors():
    assert sc.duration_to_ns("1m30s") == 90 * 10**9
    assert sc.duration_to_ns("1h1m1s1ms1us1\u00b5s1ns") == 3661 * 10**9 + 10**6 + 2001
    for empty in ("", None, 5):
        with pytest.raises(ValueError, match="^empty duration$"):
            sc.duration_to_ns(empty)
    with pytest.raises(ValueError, match="^not a Go duration: '5s 1m'$"):
        sc.duration_to_ns("5s 1m")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://tas.ns.svc:9001/x", "tas.ns.svc"),
        ("http://[::1]:9001", "[::1]"),
        ("ftp://tas", None),
        ("", None),
        (None, None),
    ],
)
def test_url_host(url, host):
    assert sc.url_host(url) == host


def test_normalize_extenders_messages_name_the_entry_and_the_fix():
    ok = {"url_prefix": "https://a.ns.svc:1", "filter_verb": "f", "tls": {"ca_file": "/ca.crt"}}
    bad = {
        "url_prefix": "https://b.ns.svc:65536",
        "enable_https": False,
        "filter_verb": "",
        "weight": 0,
        "http_timeout": "5",
        "managed_resources": [{"name": None}, {"name": "Foo/-x"}],
        "tls": {"ca_file": "/ca\n", "cert_file": "/c"},
    }
    normalized, errors = sc.normalize_extenders([ok, bad])
    assert errors == [
        "extenders[1].url_prefix has an invalid port: 'https://b.ns.svc:65536'; fix: use a port from 1 to 65535",
        "extenders[1].enable_https is False but url_prefix uses https://; make them agree (kube-scheduler builds the "
        "URL from enableHTTPS, not from the scheme)",
        "extenders[1] needs at least one of filter_verb, prioritize_verb, preempt_verb, bind_verb; fix: set "
        "filter_verb or prioritize_verb",
        "extenders[1].weight must be a positive integer (kube-scheduler rejects 0 and negatives), got 0; fix: set it "
        "to 1 or more",
        "extenders[1].http_timeout must be a positive Go duration string such as '5s', '750ms' or '1m', got '5'",
        "extenders[1].managed_resources[0].name '' is not an extended resource name (its name part is empty); fix: "
        "use <domain>/<name> outside kubernetes.io, for example 'telemetry/scheduling'",
        "extenders[1].managed_resources[1].name 'Foo/-x' is not an extended resource name (its prefix part 'Foo' is "
        "not a lower-case DNS subdomain of at most 253 characters; its name part '-x' must consist of alphanumerics, "
        "'-', '_' or '.' and start and end with an alphanumeric); fix: use <domain>/<name> outside kubernetes.io, "
        "for example 'telemetry/scheduling'",
        "extenders[1].tls.ca_file must be an absolute path on the control-plane node, got '/ca\\n'",
        "extenders[1].tls needs both cert_file and key_file (a client certificate and its key) or neither",
        "extenders[1].tls is set but the extender is not https; use an https:// url_prefix",
    ]
    assert normalized[0]["enable_https"] is True and normalized[1]["filter_verb"] is None


def test_normalize_extenders_fills_the_absent_values():
    given = {"url_prefix": "http://a:65535", "prioritize_verb": "p", "http_timeout": "", "tls": {"ca_file": ""}}
    normalized, errors = sc.normalize_extenders([given, dict(given, url_prefix="http://b", http_timeout="1ns")])
    assert errors == []
    assert normalized[0] == {
        "url_prefix": "http://a:65535",
        "enable_https": False,
        "filter_verb": None,
        "prioritize_verb": "p",
        "preempt_verb": None,
        "bind_verb": None,
        "http_timeout": None,
        "managed_resources": [],
        "tls": None,
    }
    assert normalized[1]["http_timeout"] == "1ns"
    two = [dict(given, url_prefix=f"http://{h}", bind_verb="b") for h in "abc"]
    assert sc.normalize_extenders(two)[1] == [
        "only one extender may set bind_verb (kube-scheduler allows a single binder), found 3: extenders[0], "
        "extenders[1], extenders[2]; fix: keep bind_verb on one of them"
    ]


@pytest.mark.parametrize(("port", "valid"), [("0", False), ("1", True), ("65535", True), ("65536", False)])
def test_url_port_bounds(port, valid):
    errors = sc.normalize_extenders([{"url_prefix": f"http://a:{port}", "filter_verb": "f"}])[1]
    assert (errors == []) is valid, errors


def test_tls_directories():
    exts = [{"tls": {"ca_file": "/ca.crt", "cert_file": "/etc/pki/c.crt", "key_file": "/etc/pki/"}}, {"tls": None}]
    assert sc.tls_directories(exts) == ["/", "/etc", "/etc/pki"]
    assert sc.tls_directories([{"tls": {"ca_file": "/srv/X"}}]) == ["/srv"]  # only slashes are trimmed


def test_render_extender_every_field():
    ext = {
        "url_prefix": "https://a",
        "filter_verb": "f",
        "preempt_verb": "pe",
        "prioritize_verb": "pr",
        "bind_verb": "b",
        "weight": 3,
        "enable_https": True,
        "tls": {"insecure": True, "server_name": "s", "cert_file": "/c", "key_file": "/k", "ca_file": "/ca"},
        "http_timeout": "2s",
        "node_cache_capable": True,
        "managed_resources": [{"name": "a/b", "ignored_by_scheduler": True}, {"name": "a/c"}],
        "ignorable": True,
    }
    assert sc.render_extender(ext) == {
        "urlPrefix": "https://a",
        "filterVerb": "f",
        "preemptVerb": "pe",
        "prioritizeVerb": "pr",
        "weight": 3,
        "bindVerb": "b",
        "enableHTTPS": True,
        "tlsConfig": {"insecure": True, "serverName": "s", "certFile": "/c", "keyFile": "/k", "caFile": "/ca"},
        "httpTimeout": "2s",
        "nodeCacheCapable": True,
        "managedResources": [{"name": "a/b", "ignoredByScheduler": True}, {"name": "a/c", "ignoredByScheduler": False}],
        "ignorable": True,
    }
    assert sc.render_extender({"url_prefix": "http://a", "weight": 0}, policy=True) == {
        "urlPrefix": "http://a",
        "weight": 1,
        "enableHttps": False,
        "ignorable": False,
    }


def test_validate_extenders_messages_and_where():
    def origin(index, entry):
        return f"entry {index} of {entry.get('filterVerb')}" if index else None

    extenders = [
        "x",
        {"urlPrefix": "http://a", "filterVerb": "f", "prioritizeVerb": "p", "weight": 0, "tlsConfig": {"keyfile": 1}},
        {"filterVerb": "f", "managedResources": [5, {"name": 7}, {"name": None, "ignoredbyScheduler": "no"}]},
        {"managedResources": [{"name": "t/s"}], "tlsConfig": {"serverName": 1}},
        {"managedResources": [{"name": "t/s"}]},
    ]
    assert sc.validate_extenders(extenders, origin=origin) == [
        "extenders[0]: 'x' is not a mapping; fix: make it an extender entry with urlPrefix",
        "extenders[1].tlsConfig.keyfile (urlPrefix http://a, entry 1 of f): unknown field; kube-scheduler decodes its "
        "configuration strictly and exits on unknown fields; fix: rename it to keyFile (field names are "
        "case-sensitive) (known fields: insecure, serverName, certFile, keyFile, caFile, certData, keyData, caData)",
        "extenders[1].weight (urlPrefix http://a, entry 1 of f): 0: kube-scheduler refuses it, an extender with a "
        "prioritizeVerb must have a positive weight applied to it; fix: set weight to 1 or more (or drop "
        "prioritizeVerb)",
        "extenders[2].managedResources[0] (entry 2 of f): 5 must be a mapping {name, ignoredByScheduler}",
        "extenders[2].managedResources[1].name (entry 2 of f): 7 must be a string; kube-scheduler cannot decode it "
        "and exits at start; fix the value",
        "extenders[2].managedResources[1].name (entry 2 of f): '7': it is not an extended resource name (those are "
        "<domain>/<name> outside kubernetes.io); kube-scheduler refuses it; fix: use an extended resource name such "
        "as 'telemetry/scheduling'",
        "extenders[2].managedResources[2].ignoredbyScheduler (entry 2 of f): unknown field; kube-scheduler decodes "
        "its configuration strictly and exits on unknown fields; fix: rename it to ignoredByScheduler (field names "
        "are case-sensitive) (known fields: name, ignoredByScheduler)",
        "extenders[2].managedResources[2].name (entry 2 of f): '': its name part is empty; kube-scheduler refuses "
        "it; fix: use an extended resource name such as 'telemetry/scheduling'",
        "extenders[3].tlsConfig.serverName (entry 3 of None): 1 must be a string; kube-scheduler cannot decode it "
        "and exits at start; fix the value",
        "extenders[4].managedResources[0].name (entry 4 of None): 't/s' is already managed by "
        "extenders[3].managedResources[0] (entry 3 of None): kube-scheduler refuses a duplicate extender managed "
        "resource name; fix: keep the resource in one extender only (if the other is an existing TAS extender, "
        "remove it from the scheduler configuration first, or do not register a second one)",
    ]
    # nothing to say where: no url, no origin
    assert sc.validate_extenders([{"weight": "1"}]) == [
        "extenders[0].weight: '1' must be an integer; kube-scheduler cannot decode it and exits at start; fix the value"
    ]


def test_unknown_fields_do_not_hide_the_next_ones():
    assert sc.validate_extenders([{"colour": 1, "urlPrefix": "u", "weight": True}]) == [
        "extenders[0].colour (urlPrefix u): unknown field; kube-scheduler decodes its configuration strictly and exits "
        "on unknown fields; fix: remove it (known fields: urlPrefix, filterVerb, preemptVerb, prioritizeVerb, weight, "
        "bindVerb, enableHTTPS, tlsConfig, httpTimeout, nodeCacheCapable, managedResources, ignorable)",
        "extenders[0].weight (urlPrefix u): True must be an integer; kube-scheduler cannot decode it and exits at "
        "start; fix the value",
    ]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("weight", -(2**63), None),
        ("weight", 2**63 - 1, None),
        ("weight", -(2**63) - 1, "does not fit in a 64-bit integer"),
        ("httpTimeout", "+5s", None),
        ("httpTimeout", "-0", None),
        ("httpTimeout", "0", None),
        ("httpTimeout", 5, "must be a Go duration string such as '5s' (a number is the legacy Policy's nanoseconds)"),
        ("httpTimeout", "X0", "is not a Go duration such as '5s', '750ms' or '1m'"),
        ("httpTimeout", "X5s", "is not a Go duration such as '5s', '750ms' or '1m'"),
        ("tlsConfig", [], "must be a mapping"),
        ("managedResources", {}, "must be a list of {name, ignoredByScheduler}"),
    ],
)
def test_strict_decoding_of_each_kind(field, value, problem):
    errors = sc.validate_extenders([{"urlPrefix": "u", field: value}])
    suffix = "; kube-scheduler cannot decode it and exits at start; fix the value"
    assert errors == ([f"extenders[0].{field} (urlPrefix u): {value!r} {problem}{suffix}"] if problem else [])


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("a.b/" + "x" * 63, []),
        ("a.b/" + "x" * 64, ["its name part is longer than 63 characters"]),
        ("a/b/c", ["it has more than one '/' (a qualified name is [<DNS subdomain>/]<name>)"]),
        ("/x", ["its prefix part is empty"]),
        ("a.b/", ["its name part is empty"]),
        ("kubernetes.io/x", ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"]),
        # a 253-character prefix is a DNS subdomain, but not once 'requests.' is put before it
        ("a" * 61 + ("." + "a" * 63) * 3 + "/x", ["its domain is too long to be an extended resource name"]),
        (
            "a" * 62 + ("." + "a" * 63) * 3 + "/x",
            [
                f"its prefix part '{'a' * 62}{'.' + 'a' * 63}{'.' + 'a' * 63}{'.' + 'a' * 63}' is not a lower-case DNS "
                "subdomain of at most 253 characters"
            ],
        ),
    ],
)
def test_extended_resource_name_messages(name, problems):
    assert k8s_names.extended_resource_name_problems(name) == problems


def test_an_extender_whose_managed_resources_are_not_a_list_does_not_end_the_checks():
    assert sc.validate_extenders([{"managedResources": "x"}, {"weight": "1"}], strict=False) == []
    assert sc.validate_extenders([{"managedResources": "x"}, {"prioritizeVerb": "p", "weight": -1}], strict=False) == [
        "extenders[1].weight: -1: kube-scheduler refuses it, an extender with a prioritizeVerb must have a positive "
        "weight applied to it; fix: set weight to 1 or more (or drop prioritizeVerb)"
    ]
