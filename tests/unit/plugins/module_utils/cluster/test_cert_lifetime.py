"""Certificate lifetimes checked before anything is issued (module_utils/cluster/cert_lifetime.py,
filter certificate_lifetime_errors): the CA outlives its leaves, renewal windows fit.

When a certificate is re-issued (module_utils/_cert_lifetime.renewal_due, filter
certificate_renewal_due): community.crypto's valid_at rule, decided on the controller.

The oracle for the filter is community.crypto's own x509_certificate_info module logic: the
certificate must be valid at now + renew_before (bounds included), an unreadable text is due.
"""

import datetime

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.certificate_lifetime_errors import (
    FilterModule as LifetimeFilters,
)
from ansible_collections.poweraware.k8s.plugins.filter.certificate_renewal_due import FilterModule as RenewalFilters
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_lifetime import (
    lifetime_errors,
    relative_seconds,
    renewal_due,
)
from poweraware_testing import self_signed_pem

lifetime = LifetimeFilters().filters()["certificate_lifetime_errors"]
DAY = 86400


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("+365d", 365 * DAY),
        ("+52w1d", 365 * DAY),
        ("+8760h", 365 * DAY),
        ("+1d2h3m4s", DAY + 2 * 3600 + 3 * 60 + 4),
        (" +30d ", 30 * DAY),
        ("20301231235959Z", None),
    ],
)
def test_relative_seconds(value, seconds):
    assert relative_seconds(value) == seconds


@pytest.mark.parametrize("value", ["365d", "+", "+0d", "-30d", "+1d1w", "+1y", "+1.5d", "", "tomorrow", 365])
def test_relative_seconds_refuses(value):
    with pytest.raises(ValueError, match="relative time|zero"):
        relative_seconds(value)


def test_the_roles_defaults_pass():
    for values in (
        {"tas_ca_validity": "+1825d", "tas_cert_validity": "+365d", "tas_cert_renew_before": "+30d"},
        {"a_ca": "+1825d", "a_cert": "+365d", "a_renew": "+30d", "a_ca_renew": "+90d"},
    ):
        assert lifetime(values) == []


def test_a_ca_that_does_not_outlive_its_leaves():
    values = {"tas_ca_validity": "+365d", "tas_cert_validity": "+52w1d", "tas_cert_renew_before": "+30d"}
    assert lifetime(values) == [
        "tas_ca_validity='+365d' does not outlive tas_cert_validity='+52w1d': a certificate valid beyond its CA stops "
        "verifying when the CA expires, and a CA renewed with its leaves re-issues all of them at once; "
        "make tas_ca_validity longer (for example +1825d) or tas_cert_validity shorter"
    ]


def test_the_suggested_ca_lifetime_outlives_a_long_leaf():
    # A leaf of ten years against the five-year default: suggesting +1825d again would not help.
    values = {"tas_ca_validity": "+1825d", "scheduler_extender_client_cert_validity": "+3650d", "renew": "+30d"}
    (error,) = lifetime(values)
    assert error.endswith(
        "make tas_ca_validity longer (for example +18250d) or scheduler_extender_client_cert_validity shorter"
    )


def test_renewal_windows_as_long_as_the_lifetime_all_at_once():
    values = {"ca": "+1825d", "leaf": "+30d", "renew": "+30d", "ca_renew": "+2000d"}
    errors = lifetime(values)
    assert len(errors) == 2
    assert errors[0].startswith("renew='+30d' is not shorter than leaf='+30d'")
    assert errors[1].startswith("ca_renew='+2000d' is not shorter than ca='+1825d'")
    assert all("make " in e for e in errors)


def test_the_ca_renewal_window_defaults_to_the_leaves():
    assert lifetime({"ca": "+20d", "leaf": "+10d", "renew": "+25d"}) == [
        "renew='+25d' is not shorter than leaf='+10d': the certificate would be inside its renewal window as soon "
        "as it is issued and every run would re-issue it; make renew shorter than leaf",
        "renew='+25d' is not shorter than ca='+20d': the certificate would be inside its renewal window as soon "
        "as it is issued and every run would re-issue it; make renew shorter than ca",
    ]


def test_malformed_values_reported_by_name_before_comparing():
    errors = lifetime({"ca": "5y", "leaf": "+365d", "renew": "30"})
    assert [e.split(":")[0] for e in errors] == ["ca='5y'", "renew='30'"]


def test_absolute_times_are_not_compared():
    assert lifetime({"ca": "20301231235959Z", "leaf": "+365d", "renew": "+30d"}) == []


@pytest.mark.parametrize(
    "values", [None, [], {"a": "+1d"}, {"a": "+1d", "b": "+1d", "c": "+1d", "d": "+1d", "e": "+1d"}]
)
def test_filter_input_shape(values):
    with pytest.raises(AnsibleFilterError, match="must map the variable names"):
        lifetime(values)


def test_lifetime_errors_needs_three_or_four():
    with pytest.raises(ValueError):
        lifetime_errors({"a": "+1d"})


def test_kube_schedulers_client_certificate_fits_the_tas_ca():
    """scheduler_extender checks its client certificate against the tas role's CA lifetime and
    renewal window (the variables and fallbacks its client_cert.yml passes), before issuing."""
    import pathlib

    import yaml

    roles = pathlib.Path(__file__).resolve().parents[5] / "roles"
    tas = yaml.safe_load((roles / "tas" / "defaults" / "main.yml").read_text())
    extender = yaml.safe_load((roles / "scheduler_extender" / "defaults" / "main.yml").read_text())
    tasks = (roles / "scheduler_extender" / "tasks" / "client_cert.yml").read_text()
    assert "'scheduler_extender_client_cert_validity': scheduler_extender_client_cert_validity" in tasks
    assert "tas_ca_validity | default('+1825d')" in tasks and "tas_cert_renew_before | default('+30d')" in tasks

    def check(client):
        return lifetime(
            {
                "tas_ca_validity": tas["tas_ca_validity"],
                "scheduler_extender_client_cert_validity": client,
                "tas_cert_renew_before": tas["tas_cert_renew_before"],
            }
        )

    assert check(extender["scheduler_extender_client_cert_validity"]) == []
    (outlives,) = check("+3650d")
    assert outlives.startswith(
        "tas_ca_validity='+1825d' does not outlive scheduler_extender_client_cert_validity='+3650d'"
    )
    (renews_always,) = check("+7d")
    assert renews_always.startswith(
        "tas_cert_renew_before='+30d' is not shorter than scheduler_extender_client_cert_validity"
    )


@pytest.mark.parametrize("value", ["+", "", "+1y"])
def test_relative_seconds_refuses_with_the_grammar(value):
    # "+" alone matches the pattern with no number in it: a missing span, not a lifetime of zero
    with pytest.raises(ValueError) as err:
        relative_seconds(value)
    assert str(err.value) == (
        f"{value!r} is not a relative time: write a '+' and whole numbers of weeks, days, hours, minutes or "
        "seconds in that order, such as +365d or +52w1d"
    )


@pytest.mark.parametrize("value", ["+0d", "+0w0d0h0m0s"])
def test_a_zero_span_is_refused_as_zero(value):
    with pytest.raises(ValueError) as err:
        relative_seconds(value)
    assert str(err.value) == f"{value!r} is a lifetime of zero"


def test_the_suggested_ca_lifetime_rounds_up_to_whole_days():
    # five leaf lifetimes of 3650 days and one second: 18250 days and five seconds, so 18251 days
    (error,) = lifetime({"ca": "+1825d", "leaf": "+3650d1s", "renew": "+30d"})
    assert error.endswith("make ca longer (for example +18251d) or leaf shorter")


@pytest.mark.parametrize("absolute", range(4))
def test_an_absolute_time_in_any_place_is_not_compared(absolute):
    names = ["ca", "leaf", "renew", "ca_renew"]
    values = {"ca": "+1d", "leaf": "+2d", "renew": "+3d", "ca_renew": "+4d"}  # every rule broken
    values[names[absolute]] = "20301231235959Z"
    errors = lifetime(values)
    # only the rules that do not involve the absolute value are reported (each error starts with the value it faults)
    expected = {0: ["renew"], 1: ["ca_renew"], 2: ["ca", "ca_renew"], 3: ["ca", "renew"]}[absolute]
    assert [e.split("=")[0] for e in errors] == expected


def test_lifetime_errors_says_what_it_needs():
    with pytest.raises(ValueError) as err:
        lifetime_errors({"a": "+1d", "b": "+1d"})
    assert str(err.value) == (
        "lifetime_errors needs the CA lifetime, the leaf lifetime, the leaf renewal window and optionally the CA "
        "renewal window"
    )


due = RenewalFilters().filters()["certificate_renewal_due"]
UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("days_left", "window", "expected"),
    [
        (365, "+30d", False),  # far from expiry: kept
        (31, "+30d", False),  # one day outside the window: kept
        (30, "+30d", False),  # exactly at the window's end: still valid there (bounds included)
        (29, "+30d", True),  # inside the window: re-issued
        (29, "+4w", False),  # 28 days: kept
        (-1, "+1s", True),  # already expired
    ],
)
def test_renewal_due_follows_valid_at(days_left, window, expected):
    not_after = NOW + datetime.timedelta(days=days_left)
    assert renewal_due(NOW - datetime.timedelta(days=1), not_after, window, NOW) is expected


def test_absolute_renewal_time():
    not_after = datetime.datetime(2030, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert renewal_due(NOW, not_after, "20301231235959Z", NOW) is False
    assert renewal_due(NOW, not_after, "20310101000000Z", NOW) is True


def test_not_yet_valid_at_the_moment_is_due():
    assert renewal_due(NOW + datetime.timedelta(days=60), NOW + datetime.timedelta(days=400), "+30d", NOW) is True


def test_bad_window_is_refused_with_the_rule():
    with pytest.raises(ValueError, match="is not a relative time"):
        renewal_due(NOW, NOW, "30d", NOW)
    now = datetime.datetime.now(UTC)
    with pytest.raises(AnsibleFilterError, match=r"renew_before='-30d'"):
        due(self_signed_pem(now, now + datetime.timedelta(days=90)), "-30d")


def test_filter_reads_the_certificate_text():
    now = datetime.datetime.now(UTC)
    fresh = self_signed_pem(now - datetime.timedelta(hours=1), now + datetime.timedelta(days=90))
    expiring = self_signed_pem(now - datetime.timedelta(days=80), now + datetime.timedelta(days=10))
    assert due(fresh, "+30d") is False
    assert due(expiring, "+30d") is True
    assert due(fresh.encode(), "+30d") is False


@pytest.mark.parametrize(
    "text", ["", "not a certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]
)
def test_unreadable_text_is_due(text):
    assert due(text, "+30d") is True


def test_valid_from_exactly_the_moment_is_not_due():
    # the window's end is the certificate's first valid instant: valid_at includes the bound
    not_before = NOW + datetime.timedelta(days=30)
    assert renewal_due(not_before, NOW + datetime.timedelta(days=400), "+30d", NOW) is False
    assert renewal_due(not_before + datetime.timedelta(seconds=1), NOW + datetime.timedelta(days=400), "+30d", NOW)
