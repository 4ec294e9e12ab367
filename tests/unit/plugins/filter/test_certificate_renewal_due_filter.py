"""The certificate_renewal_due filter plugin(s) checked directly, without Ansible subprocesses: input checks,
arguments passed on to the library (a recorder stands in for it), errors turned into AnsibleFilterError.
"""

from __future__ import annotations

import datetime

import ansible_collections.poweraware.k8s.plugins.filter.certificate_renewal_due as f_renewal
import pytest
from poweraware_testing import raises, self_signed_pem

UTC = datetime.timezone.utc
BEFORE = datetime.datetime(2026, 1, 1, tzinfo=UTC)
AFTER = datetime.datetime(2099, 1, 1, tzinfo=UTC)
PEM = self_signed_pem(BEFORE, AFTER).encode()


@pytest.mark.parametrize("pem", [PEM, PEM.decode(), bytearray(PEM)])
def test_certificate_renewal_due_reads_text_and_bytes(stub, pem):
    due = stub(f_renewal, "renewal_due", result=False)
    assert f_renewal.certificate_renewal_due(pem, "+30d") is False
    ((args, kwargs),) = due.calls
    assert kwargs == {}
    assert args[:3] == (BEFORE, AFTER, "+30d")
    now = datetime.datetime.now(UTC)
    assert args[3].tzinfo is not None and abs((now - args[3]).total_seconds()) < 60


@pytest.mark.parametrize("pem", [None, "", b"", "not a certificate", b"-----BEGIN CERTIFICATE-----\nx\n"])
def test_certificate_renewal_due_unreadable_text_is_due(stub, pem):
    due = stub(f_renewal, "renewal_due", result=False)
    assert f_renewal.certificate_renewal_due(pem, "+30d") is True
    assert due.calls == []


@pytest.mark.parametrize(("pem", "kind"), [(5, "int"), ({"content": "x"}, "dict"), (["x"], "list")])
def test_certificate_renewal_due_refuses_what_is_not_text(stub, pem, kind):
    due = stub(f_renewal, "renewal_due", result=False)
    raises(
        lambda: f_renewal.certificate_renewal_due(pem, "+30d"),
        f"certificate_renewal_due: the input must be the certificate's PEM text, got {kind}; "
        "pass the decoded file content (slurp's content | b64decode)",
    )
    assert due.calls == []


def test_certificate_renewal_due_real_valid_and_bad_window():
    assert f_renewal.certificate_renewal_due(PEM, "+30d") is False
    assert f_renewal.certificate_renewal_due(PEM.decode(), "+36500d") is True


def test_certificate_renewal_due_names_a_bad_window(stub):
    stub(f_renewal, "renewal_due", error=ValueError("not a duration"))
    raises(
        lambda: f_renewal.certificate_renewal_due(PEM, "soon"),
        "certificate_renewal_due: renew_before='soon': not a duration",
    )


def test_certificate_renewal_due_without_cryptography(monkeypatch):
    monkeypatch.setattr(f_renewal, "x509", None)
    raises(
        lambda: f_renewal.certificate_renewal_due(PEM, "+30d"),
        "certificate_renewal_due needs the Python package cryptography on the controller "
        "(community.crypto needs it too): pip install cryptography",
    )


# Equivalent mutants (mutmut; the same observable behaviour, so no test can kill them; a number is mutmut's
# x_<function>__mutmut_<n>):
# - certificate_renewal_due, `bytes(pem or b"")` -> `bytes(pem or b"XXXX")`: an empty or missing
#   certificate then reads b"XXXX", which is just as unparsable: due either way.
