"""k8s_names against apimachinery's own cases (k8s.io/apimachinery pkg/util/validation/validation_test.go:
TestIsDNS1123Label, TestIsDNS1123Subdomain, TestIsQualifiedName, TestIsValidLabelValue,
TestIsFullyQualifiedDomainName), copied value for value, so the collection refuses what the API server
refuses and takes what it takes."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils import k8s_names

LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63]
LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
]  # fmt: skip
SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a",
    "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1",
    "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2",
    "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
    "a" * 253,
]  # fmt: skip
SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a..b", "1.", ".1", "1..2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "A.a", "aB.a", "ab.A", "A1.a", "a1.A",
    "A.1", "aB.1", "A1.1", "1A.1",
    "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
    "a@b", "a,b", "a_b", "a;b",
    "a:b", "a%b", "a?b", "a$b",
    "a" * 254,
]  # fmt: skip
QUALIFIED_GOOD = [
    "simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple", "1-num.2-num/3-num",
    "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123", "requests.storage-foo",
    "a" * 63, "a" * 253 + "/" + "b" * 63,
]  # fmt: skip
QUALIFIED_BAD = [
    "nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash", "Example.com/abc",
    "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc",
]  # fmt: skip
LABEL_VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
LABEL_VALUE_BAD = [
    "nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts-with-dash",
    "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64,
]  # fmt: skip
# IsFullyQualifiedDomainName's cases; "com" is the one its two-label minimum refuses and a host name takes.
HOST_GOOD = [
    "a.com", "k8s.io", "dev.k8s.io", "dev.k8s.io.", "foo.example.com", "this.is.a.really.long.fqdn", "bbc.co.uk",
    "10.0.0.1", "hyphens-are-good.k8s.io", "a" * 63 + ".k8s.io",
    "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 54 + ".k8s.io", "com",
]  # fmt: skip
HOST_BAD = [
    ".", "...", ".io", ".com", "Dev.k8s.io", ".foo.example.com", "*.example.com", "*.bar.com", "*.foo.bar.com",
    "underscores_are_bad.k8s.io", "foo@bar.example.com", "http://foo.example.com", "a" * 64 + ".k8s.io",
    "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 55 + ".k8s.io",
]  # fmt: skip
NOT_TEXT = [None, 5, ["a"], b"a"]


@pytest.mark.parametrize("value", LABEL_GOOD)
def test_dns1123_labels_apimachinery_takes(value):
    assert k8s_names.is_dns1123_label(value)


@pytest.mark.parametrize("value", LABEL_BAD + ["a\n"] + NOT_TEXT)
def test_dns1123_labels_apimachinery_refuses(value):
    assert not k8s_names.is_dns1123_label(value)


@pytest.mark.parametrize("value", SUBDOMAIN_GOOD)
def test_dns1123_subdomains_apimachinery_takes(value):
    assert k8s_names.is_dns1123_subdomain(value)


@pytest.mark.parametrize("value", SUBDOMAIN_BAD + ["a.b\n"] + NOT_TEXT)
def test_dns1123_subdomains_apimachinery_refuses(value):
    assert not k8s_names.is_dns1123_subdomain(value)


@pytest.mark.parametrize("value", QUALIFIED_GOOD)
def test_qualified_names_apimachinery_takes(value):
    assert k8s_names.qualified_name_problems(value) == []


@pytest.mark.parametrize("value", QUALIFIED_BAD)
def test_qualified_names_apimachinery_refuses(value):
    assert k8s_names.qualified_name_problems(value) != []


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("only/one/slash", ["it has more than one '/' (a qualified name is [<DNS subdomain>/]<name>)"]),
        ("/simple", ["its prefix part is empty"]),
        ("example.com/", ["its name part is empty"]),
        (
            "Example.com/abc",
            ["its prefix part 'Example.com' is not a lower-case DNS subdomain of at most 253 characters"],
        ),
        ("a" * 64, ["its name part is longer than 63 characters"]),
        (
            "-x-",
            [
                "its name part '-x-' must consist of alphanumerics, '-', '_' or '.' and start and end with an "
                "alphanumeric"
            ],
        ),
        ("/", ["its prefix part is empty", "its name part is empty"]),  # every problem at once
    ],
)
def test_qualified_name_problems_say_which_part_is_wrong(value, problems):
    assert k8s_names.qualified_name_problems(value) == problems


@pytest.mark.parametrize("value", LABEL_VALUE_GOOD)
def test_label_values_apimachinery_takes(value):
    assert k8s_names.is_label_value(value)


@pytest.mark.parametrize("value", LABEL_VALUE_BAD + ["x\n", None, 1])
def test_label_values_apimachinery_refuses(value):
    assert not k8s_names.is_label_value(value)


@pytest.mark.parametrize("value", HOST_GOOD)
def test_host_names_fully_qualified_domain_names_take(value):
    labels = k8s_names.dns_name_labels(value)
    assert labels == value.rstrip(".").split(".")


@pytest.mark.parametrize("value", HOST_BAD + [None])
def test_host_names_fully_qualified_domain_names_refuse(value):
    assert k8s_names.dns_name_labels(value) is None


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("example.com/dongle", []),
        ("intel.com/power", []),
        ("power.intel.com/performance-node1", []),
        ("dongle", ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"]),
        (
            "kubernetes.io/dongle",
            ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"],
        ),
        (
            "node.kubernetes.io/dongle",
            ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"],
        ),
        (
            "requests.example.com/dongle",
            ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"],
        ),
        # the domain fits a qualified name's 253 characters, but not once quota prefixes it with "requests."
        ("a" * 253 + "/x", ["its domain is too long to be an extended resource name"]),
        ("a" * 244 + "/x", []),
        (
            "Example.com/x",
            ["its prefix part 'Example.com' is not a lower-case DNS subdomain of at most 253 characters"],
        ),
    ],
)
def test_extended_resource_names(name, problems):
    assert k8s_names.extended_resource_name_problems(name) == problems
