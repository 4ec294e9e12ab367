"""When a certificate is re-issued (module_utils/_cert_lifetime.renewal_due, filter
certificate_renewal_due): community.crypto's valid_at rule, decided on the controller.

The oracle for the filter is community.crypto's own x509_certificate_info module logic: the
certificate must be valid at now + renew_before (bounds included), an unreadable text is due.
"""

import datetime

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.certificate_renewal_due import FilterModule
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_lifetime import renewal_due
from poweraware_testing import self_signed_pem

due = FilterModule().filters()["certificate_renewal_due"]
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
