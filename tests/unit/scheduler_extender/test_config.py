"""Extender validation, rendering and merging (pure logic)."""

from __future__ import annotations

import pathlib
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils import _sched_config as sc

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
    exts, errors = _one()
    assert errors == []
    assert exts[0]["weight"] == 1 and exts[0]["enable_https"] is True and exts[0]["tls"] is None


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
