# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host holds of one certificate: the certificate, its key's public half, its CA (host side).

Read in one module run (certificate_files_info) for the certificate flow's decision on the
controller (cert_check). Private key material never leaves this module: of the key only its type,
size or curve and its public key are returned. I/O is injected (``stat``, ``read``, ``load_key``)
so the rules are tested without files. Python 3.8 and the cryptography of the node's distribution.
"""

from __future__ import annotations

import stat as stat_module

__all__ = ["describe_key", "public_key_pem", "read_files"]

# cryptography's curve names to community.crypto's ``curve`` choices (the same strings for the
# curves it offers, checked for the ones the roles use).
_CURVES = {"secp256r1": "secp256r1", "secp384r1": "secp384r1", "secp521r1": "secp521r1"}


def public_key_pem(public_key):
    """A public key as PEM SubjectPublicKeyInfo text: the form the key and its certificate are
    compared in (describe_key on the host, cert_check on the controller)."""
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def describe_key(pem):
    """Type, size or curve and the public key (PEM) of an unencrypted PEM private key."""
    from cryptography.hazmat.backends import default_backend
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    # the backend argument: required by the cryptography of older distributions (before 3.1), ignored since
    key = serialization.load_pem_private_key(pem, password=None, backend=default_backend())
    public = public_key_pem(key.public_key())
    if isinstance(key, rsa.RSAPrivateKey):
        return {"type": "RSA", "size": key.key_size, "curve": None, "public_key": public}
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {
            "type": "ECC",
            "size": key.curve.key_size,
            "curve": _CURVES.get(key.curve.name, key.curve.name),
            "public_key": public,
        }
    return {"type": type(key).__name__, "size": None, "curve": None, "public_key": public}


def _file_facts(path, stat, names):
    try:
        st = stat(path)
    except FileNotFoundError:
        return {"exists": False}
    if not stat_module.S_ISREG(st.st_mode):
        return {"exists": False, "error": f"{path} is not a regular file"}
    owner, group = names(st.st_uid, st.st_gid)
    return {
        "exists": True,
        "mode": "%04o" % stat_module.S_IMODE(st.st_mode),
        "owner": owner,
        "group": group,
        "uid": st.st_uid,
        "gid": st.st_gid,
    }


def read_files(paths, stat, read, names, load_key=describe_key):
    """``paths``: certificate, privatekey, ca_certificate, ca_privatekey (each may be empty).

    Each present path gives its facts: exists, mode, owner, group; the certificates their PEM text
    (``content``); the key its description (``describe_key``) or, when it cannot be read, ``error``;
    the CA key only whether it exists.
    """
    result = {}
    for name in ("certificate", "privatekey", "ca_certificate", "ca_privatekey"):
        path = paths.get(name)
        if not path:
            continue
        facts = _file_facts(path, stat, names)
        if facts.get("exists") and name in ("certificate", "ca_certificate"):
            facts["content"] = read(path).decode("utf-8", "replace")
        elif facts.get("exists") and name == "privatekey":
            try:
                facts.update(load_key(read(path)))
            except Exception as error:  # noqa: BLE001 - unreadable, encrypted, no cryptography: the full path decides
                facts["error"] = f"{type(error).__name__}: {error}"
        result[name] = facts
    return result
