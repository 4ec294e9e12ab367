# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the files of one certificate are what the certificate flow would issue (controller side).

The flow (roles/_common/tasks/certificate.yml) reads a certificate's files in one module run
(certificate_files_info) and asks this module what, if anything, differs from what it would issue.
Nothing differs: the files are kept and the six module runs of community.crypto's path (key, CA
lookup, read, CSR, signing, owner and mode) are skipped. Anything differs, or cannot be told: the
reasons are returned and community.crypto's path runs as before and decides for itself. So a wrong
answer here can only cost time when it says "differs"; it must never say "same" for files that
community.crypto would change. Hence every check is exact and every unknown is a reason:

* the key: present, readable, of the wanted type and size or curve, mode 0600 and the wanted owner
  and group (community.crypto's openssl_privatekey regenerates on type, size or curve, and sets
  mode, owner and group);
* the certificate: present, PEM, mode 0644 and the wanted owner and group, not due for renewal
  (community.crypto's valid_at, cert_lifetime.renewal_due), its public key the key's, its subject,
  SANs, basic constraints, key usage and extended key usage exactly the CSR's (openssl_csr_pipe's
  defaults: basic constraints and key usage critical, SANs and extended key usage not), no other
  extension than the key identifiers the signer adds, and issued by the CA: a CA by itself (its
  issuer its subject, its signature its own), a leaf by the CA certificate read on the CA's host
  (issuer, signature).

Pure apart from cryptography (which community.crypto needs on the controller too); Python 3.8.
"""

from __future__ import annotations

import datetime
import ipaddress

from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_files import public_key_pem
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_lifetime import renewal_due

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID
except ImportError:  # pragma: no cover - the filter says what is missing
    x509 = None

__all__ = ["reissue_reasons"]

# community.crypto's subject keys (its short and long names) that the roles use, to their OIDs.
_SUBJECT_KEYS = {
    "CN": "COMMON_NAME",
    "commonName": "COMMON_NAME",
    "O": "ORGANIZATION_NAME",
    "organizationName": "ORGANIZATION_NAME",
    "OU": "ORGANIZATIONAL_UNIT_NAME",
    "organizationalUnitName": "ORGANIZATIONAL_UNIT_NAME",
    "C": "COUNTRY_NAME",
    "countryName": "COUNTRY_NAME",
    "ST": "STATE_OR_PROVINCE_NAME",
    "stateOrProvinceName": "STATE_OR_PROVINCE_NAME",
    "L": "LOCALITY_NAME",
    "localityName": "LOCALITY_NAME",
}

# community.crypto's key usage names to cryptography's KeyUsage fields.
_KEY_USAGES = {
    "digitalSignature": "digital_signature",
    "keyEncipherment": "key_encipherment",
    "keyCertSign": "key_cert_sign",
    "cRLSign": "crl_sign",
    "dataEncipherment": "data_encipherment",
    "keyAgreement": "key_agreement",
    "nonRepudiation": "content_commitment",
}
_KEY_USAGE_FIELDS = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
)

_EXTENDED_KEY_USAGES = {"serverAuth": "SERVER_AUTH", "clientAuth": "CLIENT_AUTH"}

# Extensions the signer adds that the CSR does not carry (community.crypto's ownca and selfsigned
# providers: subject and authority key identifiers).
_SIGNER_EXTENSIONS = ("SUBJECT_KEY_IDENTIFIER", "AUTHORITY_KEY_IDENTIFIER")


def _file_reasons(what, facts, mode, owner, group):
    if not isinstance(facts, dict) or not facts.get("exists"):
        return [f"the {what} does not exist"]
    reasons = []
    if facts.get("mode") != mode:
        reasons.append(f"the {what}'s mode is {facts.get('mode')}, not {mode}")
    # a name, or a number as community.crypto's owner and group also take
    if owner and str(owner) not in (facts.get("owner"), str(facts.get("uid"))):
        reasons.append(f"the {what}'s owner is {facts.get('owner')}, not {owner}")
    if group and str(group) not in (facts.get("group"), str(facts.get("gid"))):
        reasons.append(f"the {what}'s group is {facts.get('group')}, not {group}")
    return reasons


def _key_reasons(key, want):
    reasons = _file_reasons("key", key, "0600", want.get("owner"), want.get("group"))
    if not isinstance(key, dict) or not key.get("exists"):
        return reasons
    if not key.get("public_key"):
        return reasons + ["the key could not be read on its host (" + str(key.get("error") or "no detail") + ")"]
    wanted_type = want.get("key_type", "ECC")
    if key.get("type") != wanted_type:
        reasons.append(f"the key is {key.get('type')}, not {wanted_type}")
    elif wanted_type == "RSA" and int(key.get("size") or 0) != int(want.get("key_size") or 0):
        reasons.append(f"the key has {key.get('size')} bits, not {want.get('key_size')}")
    elif wanted_type == "ECC" and key.get("curve") != want.get("key_curve"):
        reasons.append(f"the key's curve is {key.get('curve')}, not {want.get('key_curve')}")
    return reasons


def _wanted_subject(subject):
    pairs = set()
    for name, value in (subject or {}).items():
        oid_name = _SUBJECT_KEYS.get(str(name))
        if oid_name is None:
            return None
        pairs.add((getattr(NameOID, oid_name).dotted_string, str(value)))
    return pairs


def _name_pairs(name):
    return {(attribute.oid.dotted_string, attribute.value) for attribute in name}


def _san_text(general_name):
    if isinstance(general_name, x509.DNSName):
        return "DNS:" + general_name.value
    if isinstance(general_name, x509.IPAddress):
        return "IP:" + str(general_name.value)
    if isinstance(general_name, x509.UniformResourceIdentifier):
        return "URI:" + general_name.value
    if isinstance(general_name, x509.RFC822Name):
        return "email:" + general_name.value
    return None


def _wanted_sans(sans):
    wanted = set()
    for entry in sans or []:
        kind, _sep, value = str(entry).partition(":")
        if kind == "IP":
            try:
                value = str(ipaddress.ip_address(value))
            except ValueError:
                return None
        elif kind not in ("DNS", "URI", "email"):
            return None
        wanted.add(f"{kind}:{value}")
    return wanted


def _extension(certificate, oid):
    try:
        return certificate.extensions.get_extension_for_oid(oid)
    except x509.ExtensionNotFound:
        return None


def _extension_reasons(certificate, want):
    reasons = []
    is_ca = bool(want.get("is_ca"))
    known = {ExtensionOID.BASIC_CONSTRAINTS, ExtensionOID.KEY_USAGE}
    known.update(getattr(ExtensionOID, name) for name in _SIGNER_EXTENSIONS)

    basic = _extension(certificate, ExtensionOID.BASIC_CONSTRAINTS)
    wanted_path = 0 if is_ca else None
    if basic is None or not basic.critical or basic.value.ca != is_ca or basic.value.path_length != wanted_path:
        reasons.append("its basic constraints are not the CSR's")

    usage_names = list(
        want.get("key_usage") or (["keyCertSign", "cRLSign"] if is_ca else ["digitalSignature", "keyEncipherment"])
    )
    fields = {_KEY_USAGES.get(str(u)) for u in usage_names}
    usage = _extension(certificate, ExtensionOID.KEY_USAGE)
    if None in fields:
        reasons.append("its key usage cannot be compared here")
    elif usage is None or not usage.critical:
        reasons.append("its key usage is not the CSR's")
    else:
        have = {f for f in _KEY_USAGE_FIELDS if getattr(usage.value, f)}
        if usage.value.key_agreement:
            have |= {f for f in ("encipher_only", "decipher_only") if getattr(usage.value, f)}
        if have != fields:
            reasons.append("its key usage is not the CSR's")

    sans = _wanted_sans(want.get("sans"))
    san = _extension(certificate, ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    known.add(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    if sans is None:
        reasons.append("its SANs cannot be compared here")
    elif not sans:
        if san is not None:
            reasons.append("it has SANs the CSR has not")
    elif san is None or san.critical or {_san_text(n) for n in san.value} != sans:
        reasons.append("its SANs are not the CSR's")

    eku_names = list(want.get("extended_key_usage") or [])
    eku = _extension(certificate, ExtensionOID.EXTENDED_KEY_USAGE)
    known.add(ExtensionOID.EXTENDED_KEY_USAGE)
    wanted_eku = {_EXTENDED_KEY_USAGES.get(str(n)) for n in eku_names}
    if None in wanted_eku:
        reasons.append("its extended key usage cannot be compared here")
    elif not eku_names:
        if eku is not None:
            reasons.append("it has an extended key usage the CSR has not")
    elif eku is None or eku.critical or set(eku.value) != {getattr(ExtendedKeyUsageOID, n) for n in wanted_eku}:
        reasons.append("its extended key usage is not the CSR's")

    extra = [e.oid.dotted_string for e in certificate.extensions if e.oid not in known]
    if extra:
        reasons.append(f"it has extensions the CSR has not ({', '.join(extra)})")
    return reasons


def _issuer_reasons(certificate, want, files):
    if want.get("is_ca"):
        issuer = certificate
    else:
        # the CA key must be there too: community.crypto's path stops with a message when it is not
        if not (files.get("ca_privatekey") or {}).get("exists"):
            return ["the CA key is not on the CA's host"]
        ca_pem = (files.get("ca_certificate") or {}).get("content")
        if not ca_pem:
            return ["the CA certificate could not be read on the CA's host"]
        try:
            issuer = x509.load_pem_x509_certificate(ca_pem.encode() if isinstance(ca_pem, str) else bytes(ca_pem))
        except ValueError:
            return ["the CA certificate is not a PEM certificate"]
    if certificate.issuer != issuer.subject:
        return ["it was not issued by the CA (issuer)"]
    try:
        certificate.verify_directly_issued_by(issuer)
    except (InvalidSignature, ValueError, TypeError):  # a signature of another key, or of another algorithm
        return ["it was not signed by the CA"]
    return []


def reissue_reasons(files, want, now=None):
    """Why the flow must run community.crypto's path for these files; [] when they are kept as they are.

    ``files``: certificate_files_info's result (certificate, privatekey, ca_certificate).
    ``want``: is_ca, subject, sans, key_usage, extended_key_usage, key_type, key_size, key_curve,
    owner, group, renew_before, force.
    """
    if x509 is None:
        return ["the controller has no cryptography package to compare the certificate with"]
    if want.get("force"):
        return ["it is forced (its CA was re-issued)"]
    files = files or {}
    reasons = _key_reasons(files.get("privatekey"), want)
    cert_facts = files.get("certificate")
    reasons += _file_reasons("certificate", cert_facts, "0644", want.get("owner"), want.get("group"))
    if reasons:
        return reasons
    try:
        certificate = x509.load_pem_x509_certificate(str(cert_facts.get("content", "")).encode())
    except ValueError:
        return ["the certificate is not a PEM certificate"]
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        if renewal_due(
            certificate.not_valid_before_utc, certificate.not_valid_after_utc, want.get("renew_before", "+30d"), now
        ):
            reasons.append("it is due for renewal")
    except ValueError as err:
        reasons.append(f"its renewal window cannot be told ({err})")
    if public_key_pem(certificate.public_key()).strip() != str(files["privatekey"].get("public_key", "")).strip():
        reasons.append("its public key is not the key's")
    subject = _wanted_subject(want.get("subject"))
    if subject is None:
        reasons.append("its subject cannot be compared here")
    elif _name_pairs(certificate.subject) != subject:
        reasons.append("its subject is not the CSR's")
    reasons += _extension_reasons(certificate, want)
    reasons += _issuer_reasons(certificate, want, files)
    return reasons
