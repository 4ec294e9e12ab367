"""The certificate flow's keep decision (module_utils/cluster/cert_check.py, _cert_files.py, the
certificate_reissue_reasons filter): files that match what would be issued are kept; anything else,
or anything that cannot be compared, is a reason and community.crypto's modules run
(test_certificate_flow.py runs the whole flow with community.crypto's own certificates)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import stat

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.certificate_reissue_reasons import certificate_reissue_reasons
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_check import reissue_reasons
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_files import describe_key, read_files
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(**attrs):
    oids = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _public(key):
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def issue(
    subject, key, issuer_name, issuer_key, ca=False, sans=None, eku=None, days=365, extra=None, san_critical=False
):
    """A certificate as community.crypto's ownca/selfsigned providers make it from the flow's CSR."""
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=not ca, content_commitment=False, key_encipherment=not ca, data_encipherment=False,
                key_agreement=False, key_cert_sign=ca, crl_sign=ca, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )  # fmt: skip
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=san_critical)
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    for extension in extra or []:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def facts(cert, key, ca=None, key_mode="0600", cert_mode="0644", ca_key=True):
    owned = {"exists": True, "owner": "root", "group": "root", "uid": 0, "gid": 0}
    files = {
        "certificate": {**owned, "mode": cert_mode, "content": _pem(cert)},
        "privatekey": {**owned, "mode": key_mode, **describe_key(_key_pem(key))},
    }
    if ca is not None:
        files["ca_certificate"] = {"exists": True, "mode": "0644", "content": _pem(ca)}
        files["ca_privatekey"] = {"exists": ca_key, "mode": "0600"}
    return files


CA_KEY = ec.generate_private_key(ec.SECP256R1())
CA_NAME = _name(O="test", CN="test CA")
CA = issue(CA_NAME, CA_KEY, CA_NAME, CA_KEY, ca=True, days=1825)
LEAF_KEY = ec.generate_private_key(ec.SECP256R1())
LEAF_SANS = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


def server_leaf(key=LEAF_KEY, signer=CA_KEY, **options):
    """The server certificate WANT describes (CN and SANs localhost, serverAuth), CA_NAME as issuer."""
    return issue(
        _name(CN="localhost"), key, CA_NAME, signer, sans=LEAF_SANS, eku=[ExtendedKeyUsageOID.SERVER_AUTH], **options
    )


LEAF = server_leaf()
WANT = {
    "subject": {"CN": "localhost"},
    "sans": ["DNS:localhost", "IP:127.0.0.1"],
    "extended_key_usage": ["serverAuth"],
    "key_type": "ECC",
    "key_curve": "secp256r1",
    "renew_before": "+30d",
}
CA_WANT = {
    "is_ca": True,
    "subject": {"O": "test", "CN": "test CA"},
    "key_type": "ECC",
    "key_curve": "secp256r1",
    "renew_before": "+30d",
}


def test_what_matches_is_kept_a_ca_and_a_leaf():
    assert reissue_reasons(facts(CA, CA_KEY), CA_WANT) == []
    assert reissue_reasons(facts(LEAF, LEAF_KEY, CA), WANT) == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"sans": ["DNS:localhost"]}, "its SANs are not the CSR's"),
        ({"subject": {"CN": "other"}}, "its subject is not the CSR's"),
        ({"subject": {"CN": "localhost", "emailAddress": "x@y"}}, "its subject cannot be compared here"),
        ({"extended_key_usage": ["clientAuth"]}, "its extended key usage is not the CSR's"),
        ({"extended_key_usage": []}, "it has an extended key usage the CSR has not"),
        ({"extended_key_usage": ["codeSigning"]}, "its extended key usage cannot be compared here"),
        ({"key_usage": ["digitalSignature"]}, "its key usage is not the CSR's"),
        ({"key_curve": "secp384r1"}, "the key's curve is secp256r1, not secp384r1"),
        ({"key_type": "RSA", "key_size": 3072}, "the key is ECC, not RSA"),
        ({"owner": "appqos"}, "the key's owner is root, not appqos"),
        ({"renew_before": "+400d"}, "it is due for renewal"),
        ({"is_ca": True}, "its basic constraints are not the CSR's"),
        ({"force": True}, "it is forced (its CA was re-issued)"),
    ],
)
def test_each_difference_is_a_reason(change, reason):
    assert reason in reissue_reasons(facts(LEAF, LEAF_KEY, CA), {**WANT, **change})


def test_a_certificate_of_another_key_another_ca_or_an_unsigned_copy_is_not_kept():
    other_key = ec.generate_private_key(ec.SECP256R1())
    assert "its public key is not the key's" in reissue_reasons(facts(LEAF, other_key, CA), WANT)
    # another CA with the same name: the issuer matches, the signature does not
    impostor_key = ec.generate_private_key(ec.SECP256R1())
    forged = server_leaf(signer=impostor_key)
    assert reissue_reasons(facts(forged, LEAF_KEY, CA), WANT) == ["it was not signed by the CA"]
    other_ca = issue(_name(CN="other CA"), impostor_key, _name(CN="other CA"), impostor_key, ca=True)
    assert reissue_reasons(facts(LEAF, LEAF_KEY, other_ca), WANT) == ["it was not issued by the CA (issuer)"]
    # a "CA" signed by another key
    assert reissue_reasons(facts(issue(CA_NAME, CA_KEY, CA_NAME, impostor_key, ca=True), CA_KEY), CA_WANT) == [
        "it was not signed by the CA"
    ]


def test_extensions_the_csr_has_not_and_criticality_are_differences():
    extra = [x509.TLSFeature([x509.TLSFeatureType.status_request])]
    cert = server_leaf(extra=extra)
    assert any(
        r.startswith("it has extensions the CSR has not") for r in reissue_reasons(facts(cert, LEAF_KEY, CA), WANT)
    )
    critical = server_leaf(san_critical=True)
    assert reissue_reasons(facts(critical, LEAF_KEY, CA), WANT) == ["its SANs are not the CSR's"]


def test_missing_unreadable_or_loose_files_are_reasons_and_stop_the_comparison():
    files = facts(LEAF, LEAF_KEY, CA, key_mode="0640", cert_mode="0600")
    assert reissue_reasons(files, WANT) == [
        "the key's mode is 0640, not 0600",
        "the certificate's mode is 0600, not 0644",
    ]
    assert reissue_reasons({"privatekey": {"exists": False}, "certificate": {"exists": False}}, WANT) == [
        "the key does not exist",
        "the certificate does not exist",
    ]
    unreadable = facts(LEAF, LEAF_KEY, CA)
    unreadable["privatekey"] = {"exists": True, "mode": "0600", "error": "TypeError: Password was not given"}
    assert reissue_reasons(unreadable, WANT) == [
        "the key could not be read on its host (TypeError: Password was not given)"
    ]
    garbage = facts(LEAF, LEAF_KEY, CA)
    garbage["certificate"]["content"] = "not a certificate"
    assert reissue_reasons(garbage, WANT) == ["the certificate is not a PEM certificate"]
    assert reissue_reasons(facts(LEAF, LEAF_KEY, CA, ca_key=False), WANT) == ["the CA key is not on the CA's host"]
    no_ca = facts(LEAF, LEAF_KEY)
    assert reissue_reasons(no_ca, WANT) == ["the CA key is not on the CA's host"]


def test_owner_and_group_by_name_or_number():
    files = facts(LEAF, LEAF_KEY, CA)
    assert reissue_reasons(files, {**WANT, "owner": "root", "group": "0"}) == []
    assert reissue_reasons(files, {**WANT, "owner": 0}) == []
    assert reissue_reasons(files, {**WANT, "group": "1000"}) == [
        "the key's group is root, not 1000",
        "the certificate's group is root, not 1000",
    ]


def test_rsa_keys_are_compared_by_size():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = server_leaf(key=key)
    want = {**WANT, "key_type": "RSA", "key_size": 2048}
    assert reissue_reasons(facts(cert, key, CA), want) == []
    assert reissue_reasons(facts(cert, key, CA), {**want, "key_size": 3072}) == ["the key has 2048 bits, not 3072"]


def test_the_filter_validates_its_input_all_at_once_and_reads_string_flags():
    with pytest.raises(AnsibleFilterError) as info:
        certificate_reissue_reasons("text", {"subjct": {}})
    assert "got str" in str(info.value)
    with pytest.raises(AnsibleFilterError, match=r"unknown keys \['subjct'\]"):
        certificate_reissue_reasons({}, {"subjct": {}})
    assert certificate_reissue_reasons(facts(CA, CA_KEY), {**CA_WANT, "is_ca": "True", "force": "false"}) == []


def test_the_host_side_reads_files_and_never_returns_the_private_key(tmp_path):
    key_pem = LEAF_KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "leaf.key").write_bytes(key_pem)
    (tmp_path / "leaf.key").chmod(0o600)
    (tmp_path / "leaf.crt").write_text(_pem(LEAF))
    (tmp_path / "leaf.crt").chmod(0o644)
    (tmp_path / "dir").mkdir()
    got = read_files(
        {
            "certificate": str(tmp_path / "leaf.crt"),
            "privatekey": str(tmp_path / "leaf.key"),
            "ca_certificate": str(tmp_path / "missing.crt"),
            "ca_privatekey": str(tmp_path / "dir"),
        },
        os.stat,
        _read,
        lambda uid, gid: (f"u{uid}", f"g{gid}"),
    )
    assert got["certificate"]["content"] == _pem(LEAF) and got["certificate"]["mode"] == "0644"
    assert got["privatekey"]["mode"] == "0600" and got["privatekey"]["type"] == "ECC"
    assert got["privatekey"]["curve"] == "secp256r1" and got["privatekey"]["public_key"] == _public(LEAF_KEY)
    assert "PRIVATE KEY" not in repr(got)
    assert got["ca_certificate"] == {"exists": False}
    assert got["ca_privatekey"]["exists"] is False and "not a regular file" in got["ca_privatekey"]["error"]
    assert stat.S_IMODE((tmp_path / "leaf.key").stat().st_mode) == 0o600
    # a key that cannot be read is an error, not a failure of the run
    (tmp_path / "leaf.key").write_text("garbage")
    got = read_files({"privatekey": str(tmp_path / "leaf.key")}, os.stat, _read, lambda u, g: ("u", "g"))
    assert got["privatekey"]["exists"] and "error" in got["privatekey"] and "public_key" not in got["privatekey"]
