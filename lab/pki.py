"""Per-lab certificates, keys and kubeconfigs: made fresh for every lab, never committed.

Layout follows kubeadm's /etc/kubernetes/pki: a cluster CA for serving and client certificates, a
separate front-proxy CA for the aggregation layer, and a service-account key pair. ECDSA P-256
keys keep start-up fast; every private key and every kubeconfig is written 0600.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
import os
import pathlib
import tempfile

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
# The service cluster IP range's first address is the `kubernetes` Service (its certificate's SAN).
KUBERNETES_SERVICE_IP = "10.96.0.1"


def atomic_write(path: pathlib.Path, data: bytes | str, mode: int = 0o644) -> None:
    """Write through a temporary file in the same directory and rename it over ``path``."""
    if isinstance(data, str):
        data = data.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


@dataclasses.dataclass
class KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return _cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    def write(self, directory: pathlib.Path, stem: str) -> tuple[pathlib.Path, pathlib.Path]:
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        atomic_write(key, self.key_pem, 0o600)
        atomic_write(crt, self.cert_pem, 0o644)
        return crt, key


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def make_ca(common_name: str) -> KeyPair:
    key = _new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def make_cert(
    ca: KeyPair,
    common_name: str,
    organization: str | None = None,
    server_names: tuple[str, ...] = (),
    client: bool = True,
) -> KeyPair:
    """A leaf certificate: client auth, plus server auth when ``server_names`` (DNS or IP) are given."""
    key = _new_key()
    usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + (
        [ExtendedKeyUsageOID.SERVER_AUTH] if server_names else []
    )
    builder = (
        _builder(_name(common_name, organization), ca.cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    if server_names:
        alt_names: list[x509.GeneralName] = []
        for name in server_names:
            try:
                alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alt_names.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def kubeconfig(server: str, ca_pem: bytes, client: KeyPair, user: str, cluster: str = "poweraware-lab") -> str:
    """A kubeconfig with everything embedded, so it works from any directory and any node root."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    context = f"{user}@{cluster}"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(client.cert_pem),
                        "client-key-data": b64(client.key_pem),
                    },
                }
            ],
            "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
            "current-context": context,
            "preferences": {},
        },
        sort_keys=False,
    )


@dataclasses.dataclass(frozen=True)
class LabPki:
    """The directory of everything the control plane reads; created by :func:`create`."""

    directory: pathlib.Path

    def path(self, name: str) -> pathlib.Path:
        return self.directory / name


def create(
    directory: pathlib.Path,
    server_url: str,
    kubeconfigs: dict[pathlib.Path, tuple[str, str | None]],
    advertise_address: str,
) -> LabPki:
    """Create the lab PKI in ``directory`` and one kubeconfig per entry ``path -> (user, group)``;
    the API server's certificate names ``advertise_address`` too, as kubeadm's does."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = make_ca("poweraware-lab-ca")
    ca.write(directory, "ca")
    serving_names = (
        "127.0.0.1",
        "localhost",
        advertise_address,
        KUBERNETES_SERVICE_IP,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    make_cert(ca, "kube-apiserver", server_names=serving_names, client=False).write(directory, "apiserver")
    # kubeadm's client certificate of kube-apiserver towards the kubelets (logs, exec, port-forward)
    kubelet_client = make_cert(ca, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins")
    kubelet_client.write(directory, "apiserver-kubelet-client")
    front_proxy_ca = make_ca("poweraware-lab-front-proxy-ca")
    front_proxy_ca.write(directory, "front-proxy-ca")
    make_cert(front_proxy_ca, "front-proxy-client").write(directory, "front-proxy-client")
    sa_key = _new_key()
    atomic_write(directory / "sa.key", _key_pem(sa_key), 0o600)
    atomic_write(
        directory / "sa.pub",
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    for path, (user, group) in kubeconfigs.items():
        client = make_cert(ca, user, group)
        atomic_write(path, kubeconfig(server_url, ca.cert_pem, client, user), 0o600)
    return LabPki(directory)


def load_ca(cluster_pki: LabPki, stem: str = "ca") -> KeyPair:
    cert = x509.load_pem_x509_certificate(cluster_pki.path(f"{stem}.crt").read_bytes())
    key = serialization.load_pem_private_key(cluster_pki.path(f"{stem}.key").read_bytes(), password=None)
    return KeyPair(cert, key)  # type: ignore[arg-type] - the lab's CAs are ECDSA


def write_kubeconfigs(
    cluster_pki: LabPki, server_url: str, kubeconfigs: dict[pathlib.Path, tuple[str, str | None]]
) -> None:
    """One kubeconfig (0600) per entry ``path -> (user, group)``, signed by the lab's cluster CA."""
    ca = load_ca(cluster_pki)
    for path, (user, group) in kubeconfigs.items():
        atomic_write(path, kubeconfig(server_url, ca.cert_pem, make_cert(ca, user, group), user), 0o600)


def write_kubelet_serving(cluster_pki: LabPki, directory: pathlib.Path, node_name: str, address: str) -> None:
    """The kubelet's serving certificate and key (``kubelet.crt``, ``kubelet.key`` 0600), signed by the
    cluster CA and naming the node's address and name, as kube-apiserver reaches the kubelet."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    make_cert(load_ca(cluster_pki), f"{node_name}@kubelet", server_names=(address, node_name), client=False).write(
        directory, "kubelet"
    )
