# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.certificate_renewal_due filter; documented in certificate_renewal_due.yml."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_lifetime import renewal_due

try:
    from cryptography import x509
except ImportError:  # pragma: no cover - community.crypto needs it on the controller too
    x509 = None


def certificate_renewal_due(pem, renew_before):
    """True when the PEM certificate ``pem`` is unreadable, or no longer valid at ``renew_before``.

    Decided on the controller from the certificate's text (read with slurp), so the certificate
    flow needs no x509_certificate_info run on the host: one SSH round trip less per certificate.
    An empty or unparsable text is due (it is re-issued, as a missing certificate is).
    """
    if x509 is None:
        raise AnsibleFilterError(
            "certificate_renewal_due needs the Python package cryptography on the controller "
            "(community.crypto needs it too): pip install cryptography"
        )
    if pem is not None and not isinstance(pem, (str, bytes, bytearray)):
        # bytes(5) would be five NUL bytes, unparsable, and the certificate re-issued for a caller's mistake
        raise AnsibleFilterError(
            f"certificate_renewal_due: the input must be the certificate's PEM text, got {pem.__class__.__name__}; "
            "pass the decoded file content (slurp's content | b64decode)"
        )
    text = pem.encode() if isinstance(pem, str) else bytes(pem or b"")
    try:
        certificate = x509.load_pem_x509_certificate(text)
    except ValueError:
        return True
    try:
        return renewal_due(
            certificate.not_valid_before_utc,
            certificate.not_valid_after_utc,
            renew_before,
            datetime.datetime.now(datetime.timezone.utc),
        )
    except ValueError as err:
        raise AnsibleFilterError(f"certificate_renewal_due: renew_before={renew_before!r}: {err}") from err


class FilterModule:
    """Certificate renewal."""

    def filters(self) -> dict[str, Callable]:
        return {"certificate_renewal_due": certificate_renewal_due}
