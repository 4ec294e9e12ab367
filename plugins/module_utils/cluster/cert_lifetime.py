# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lifetimes of a CA and the leaf certificates it signs, checked before anything is issued.

Pure logic, no Ansible imports, Python 3.9 compatible.

The values are community.crypto's relative times (``+365d``, ``+52w1d``, ``+8760h``: a sign and
whole numbers of weeks, days, hours, minutes and seconds, in that order). Three rules, each one a
failure a user would otherwise meet months later:

* the CA outlives its leaves: a leaf valid beyond its CA stops verifying the day the CA expires,
  and a CA renewed together with its leaves re-issues every leaf it signed (kube-scheduler's
  client certificates on every control-plane node among them) at once;
* each renewal window is shorter than the lifetime it belongs to, or every run re-issues that
  certificate (and restarts what reads it).

An absolute time (ASN.1 ``20301231235959Z``) cannot be compared with a relative one without a
clock, so such a value is checked for form only by community.crypto and skipped here.
"""

from __future__ import annotations

import datetime
import re

__all__ = ["lifetime_errors", "relative_seconds", "renewal_due"]

_UNITS = (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_RELATIVE = re.compile(r"^\+(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_ABSOLUTE = re.compile(r"^\d{14}Z$")


def relative_seconds(value):
    """Seconds of a positive community.crypto relative time (``+365d``), None for an absolute time.

    Raises ValueError for anything else (a negative or empty span, an unknown unit, a number alone).
    """
    text = str(value).strip()
    if _ABSOLUTE.fullmatch(text):
        return None
    match = _RELATIVE.fullmatch(text)
    if not match or not any(match.groups()):
        raise ValueError(
            f"{value!r} is not a relative time: write a '+' and whole numbers of weeks, days, hours, "
            "minutes or seconds in that order, such as +365d or +52w1d"
        )
    seconds = sum(int(n) * unit for n, (_name, unit) in zip(match.groups(), _UNITS) if n)
    if seconds == 0:
        raise ValueError(f"{value!r} is a lifetime of zero")
    return seconds


def _longer_span(leaf_seconds):
    """A CA lifetime to suggest: five leaf lifetimes in whole days, and never under five years.

    Five lifetimes leave room for the leaves issued late in the CA's life; five years is the
    roles' own default (+1825d), so the hint never suggests less than a fresh install gets.
    """
    days = max(1825, -(-5 * leaf_seconds // 86400))
    return f"+{days}d"


def lifetime_errors(values):
    """Problems with the lifetimes in ``values``, all at once; an empty list when there are none.

    ``values`` maps a role's variable names to their values, in this order of meaning: the CA's
    lifetime, the leaves' lifetime, the leaves' renewal window, and optionally the CA's renewal
    window (the roles that renew the CA in the same window as the leaves pass three).
    """
    names = list(values)
    if len(names) not in (3, 4):
        raise ValueError(
            "lifetime_errors needs the CA lifetime, the leaf lifetime, the leaf renewal window "
            "and optionally the CA renewal window"
        )
    errors, seconds = [], {}
    for name in names:
        try:
            seconds[name] = relative_seconds(values[name])
        except ValueError as err:
            errors.append(f"{name}={values[name]!r}: {err}")
    if errors:
        return errors
    ca, leaf, renew = names[0], names[1], names[2]
    ca_renew = names[3] if len(names) == 4 else renew

    def known(*keys):
        return all(seconds[k] is not None for k in keys)

    if known(ca, leaf) and seconds[ca] <= seconds[leaf]:
        errors.append(
            f"{ca}={values[ca]!r} does not outlive {leaf}={values[leaf]!r}: a certificate valid beyond its CA stops "
            f"verifying when the CA expires, and a CA renewed with its leaves re-issues all of them at once; "
            f"make {ca} longer (for example {_longer_span(seconds[leaf])}) or {leaf} shorter"
        )
    for lifetime, window in ((leaf, renew), (ca, ca_renew)):
        if known(lifetime, window) and seconds[window] >= seconds[lifetime]:
            errors.append(
                f"{window}={values[window]!r} is not shorter than {lifetime}={values[lifetime]!r}: the certificate "
                f"would be inside its renewal window as soon as it is issued and every run would re-issue it; "
                f"make {window} shorter than {lifetime}"
            )
    return errors


def renewal_due(not_before, not_after, renew_before, now):
    """Whether a certificate valid from ``not_before`` to ``not_after`` must be re-issued now.

    community.crypto's ``valid_at`` rule, decided on the controller: the certificate must still be
    valid at ``renew_before`` (a relative time from ``now``, ``+30d``, or an absolute ASN.1 time,
    ``20301231235959Z``), bounds included. All datetimes are timezone-aware (UTC). Raises
    ValueError for a ``renew_before`` that is neither.
    """
    seconds = relative_seconds(renew_before)
    if seconds is None:
        moment = datetime.datetime.strptime(str(renew_before).strip(), "%Y%m%d%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
    else:
        moment = now + datetime.timedelta(seconds=seconds)
    return not (not_before <= moment <= not_after)
