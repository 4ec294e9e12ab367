#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: certificate_files_info
short_description: Read a certificate, its private key's public half and its CA on a host, in one run
version_added: 0.1.0
description:
  - Reads what a host holds of one certificate, for the collection's certificate flow
    (C(poweraware.k8s._common), C(certificate.yml)) to decide on the controller, with the filter
    P(poweraware.k8s.certificate_reissue_reasons#filter), whether anything must be issued.
  - For each path given, whether the file exists, its mode, owner and group (names and numbers); for the certificates
    their PEM text; for the private key its type, size or curve and its public key. The private key
    itself is never returned.
  - A key that cannot be read (encrypted, another format, no C(cryptography) on the host) is
    reported with an C(error); the flow then runs community.crypto's modules, which decide.
author:
  - poweraware.k8s contributors (@poweraware)
options:
  certificate_path:
    description: The certificate (PEM).
    type: path
  privatekey_path:
    description: Its private key (unencrypted PEM, as the flow makes it).
    type: path
  ca_certificate_path:
    description: The CA certificate that signs it (on this host).
    type: path
  ca_privatekey_path:
    description: The CA's private key; only whether it exists is read.
    type: path
requirements:
  - cryptography (on the host; without it the key is reported with an error)
extends_documentation_fragment:
  - poweraware.k8s.attributes
  - poweraware.k8s.attributes.info_module
seealso:
  - module: community.crypto.x509_certificate_info
  - module: community.crypto.openssl_privatekey_info
"""

EXAMPLES = r"""
- name: Read the TAS serving certificate, its key and its CA
  poweraware.k8s.certificate_files_info:
    certificate_path: /etc/poweraware/pki/tas/tas.crt
    privatekey_path: /etc/poweraware/pki/tas/tas.key
    ca_certificate_path: /etc/poweraware/pki/tas/ca.crt
    ca_privatekey_path: /etc/poweraware/pki/tas/ca.key
  register: tas_files

- name: Say what would be re-issued
  ansible.builtin.debug:
    msg: >-
      {{ tas_files | poweraware.k8s.certificate_reissue_reasons({
           'subject': {'CN': 'tas.telemetry-aware-scheduling.svc'},
           'extended_key_usage': ['serverAuth'], 'renew_before': '+30d'}) }}
"""

RETURN = r"""
certificate:
  description: The certificate's facts (only when O(certificate_path) is given).
  returned: when asked for
  type: dict
  sample:
    {exists: true, mode: "0644", owner: root, group: root, uid: 0, gid: 0, content: "-----BEGIN CERTIFICATE-----..."}
privatekey:
  description: The key's facts, without the key (only when O(privatekey_path) is given).
  returned: when asked for
  type: dict
  sample: {exists: true, mode: "0600", owner: root, group: root, uid: 0, gid: 0, type: ECC, size: 256, curve: secp256r1,
           public_key: "-----BEGIN PUBLIC KEY-----..."}
ca_certificate:
  description: The CA certificate's facts (only when O(ca_certificate_path) is given).
  returned: when asked for
  type: dict
  sample:
    {exists: true, mode: "0644", owner: root, group: root, uid: 0, gid: 0, content: "-----BEGIN CERTIFICATE-----..."}
ca_privatekey:
  description: Whether the CA key exists, its mode, owner and group (only when O(ca_privatekey_path) is given).
  returned: when asked for
  type: dict
  sample: {exists: true, mode: "0600", owner: root, group: root, uid: 0, gid: 0}
"""

import grp  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.cert_files import read_files  # noqa: E402


def _names(uid, gid):
    try:
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        owner = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return owner, group


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            certificate_path=dict(type="path"),
            privatekey_path=dict(type="path"),
            ca_certificate_path=dict(type="path"),
            ca_privatekey_path=dict(type="path"),
        ),
        required_one_of=[["certificate_path", "privatekey_path", "ca_certificate_path", "ca_privatekey_path"]],
        supports_check_mode=True,
    )
    paths = {
        "certificate": module.params["certificate_path"],
        "privatekey": module.params["privatekey_path"],
        "ca_certificate": module.params["ca_certificate_path"],
        "ca_privatekey": module.params["ca_privatekey_path"],
    }
    try:
        facts = read_files(paths, os.stat, _read, _names)
    except OSError as error:
        module.fail_json(
            msg=f"cannot read {error.filename}: {error.strerror}; check the path and that the play runs with become"
        )
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
