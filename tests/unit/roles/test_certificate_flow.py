"""The one certificate flow (``poweraware.k8s._common``, ``tasks_from: certificate.yml``).

appqos_certs, tas, prometheus_adapter and scheduler_extender issue every key and certificate with
it. It only touches files, so ``ansible-playbook`` runs it here against localhost
(``ansible_connection=local``) into ``tmp_path``: a CA, a server and a client certificate as the
roles issue them, and one more client certificate signed through another inventory host (the
scheduler_extender case: the CSR goes to the CA host, the CA key stays there).

Shown once, end to end: first issue, a re-run that rewrites nothing (mtimes), a renewal window that
re-issues the leaves but keeps their keys and the CA, a changed SAN that re-issues only the server
certificate, a deleted certificate that is re-created alone, check mode that writes nothing (on a
fresh directory and with a pending change) but reports what would change, keys 0600, certificates
0644, no CSR file anywhere and no key material in the output (the runs use --diff).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest
from cryptography import x509

REPO = pathlib.Path(__file__).resolve().parents[3]
COLLECTIONS_DIR = REPO / ".cache" / "collections"

CERTS = ("ca", "server", "client", "remote")
SANS = ("DNS:localhost", "IP:127.0.0.1")

# The roles' pattern: the CA first, its re-issue forces the leaves; each caller copies the result fact.
PLAYBOOK = """
- hosts: node
  gather_facts: false
  vars:
    common: &common
      _common_certificate_not_after: +365d
      _common_certificate_renew_before: "{{ renew_before }}"
      _common_certificate_ca_path: "{{ pki }}/ca.crt"
      _common_certificate_ca_key_path: "{{ pki }}/ca.key"
  tasks:
    - name: CA
      ansible.builtin.include_role:
        name: poweraware.k8s._common
        tasks_from: certificate.yml
      vars:
        _common_certificate_path: "{{ pki }}/ca.crt"
        _common_certificate_key_path: "{{ pki }}/ca.key"
        _common_certificate_subject: {O: test, CN: test CA}
        _common_certificate_is_ca: true
        _common_certificate_not_after: +1825d
        _common_certificate_renew_before: "{{ renew_before }}"
    - ansible.builtin.set_fact:
        results: "{{ {'ca': _common_certificate_result} }}"
    - name: server
      ansible.builtin.include_role:
        name: poweraware.k8s._common
        tasks_from: certificate.yml
      vars:
        <<: *common
        _common_certificate_path: "{{ pki }}/server.crt"
        _common_certificate_key_path: "{{ pki }}/server.key"
        _common_certificate_subject: {CN: localhost}
        _common_certificate_sans: "{{ server_sans }}"
        _common_certificate_extended_key_usage: [serverAuth]
        _common_certificate_force: "{{ results.ca.changed }}"
    - ansible.builtin.set_fact:
        results: "{{ results | combine({'server': _common_certificate_result}) }}"
    - name: client
      ansible.builtin.include_role:
        name: poweraware.k8s._common
        tasks_from: certificate.yml
      vars:
        <<: *common
        _common_certificate_path: "{{ pki }}/client.crt"
        _common_certificate_key_path: "{{ pki }}/client.key"
        _common_certificate_subject: {CN: test-client}
        _common_certificate_extended_key_usage: [clientAuth]
        _common_certificate_force: "{{ results.ca.changed }}"
    - ansible.builtin.set_fact:
        results: "{{ results | combine({'client': _common_certificate_result}) }}"
    - name: remote
      ansible.builtin.include_role:
        name: poweraware.k8s._common
        tasks_from: certificate.yml
      vars:
        <<: *common
        _common_certificate_path: "{{ pki }}/node/remote.crt"
        _common_certificate_key_path: "{{ pki }}/node/remote.key"
        _common_certificate_subject: {CN: test-remote}
        _common_certificate_extended_key_usage: [clientAuth]
        _common_certificate_ca_host: ca-host
    - ansible.builtin.set_fact:
        results: "{{ results | combine({'remote': _common_certificate_result}) }}"
    - name: Report
      ansible.builtin.debug:
        var: results
"""


class Pki:
    def __init__(self, tmp_path: pathlib.Path):
        self.tmp = tmp_path
        self.dir = tmp_path / "pki"
        self.dir.mkdir(mode=0o700)
        (tmp_path / "play.yml").write_text(PLAYBOOK)
        (tmp_path / "hosts.ini").write_text(
            f"node ansible_connection=local ansible_python_interpreter={sys.executable}\n"
            f"ca-host ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        )

    def run(self, check=False, server_sans=SANS, renew_before="+30d"):
        extra = {"pki": str(self.dir), "server_sans": server_sans, "renew_before": renew_before}
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
        env.update(
            ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_DIR),
            ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
            ANSIBLE_LOCAL_TEMP=str(self.tmp / "tmp"),
            ANSIBLE_HOME=str(self.tmp / "home"),
            ANSIBLE_NOCOLOR="1",
        )
        argv = [str(pathlib.Path(sys.executable).with_name("ansible-playbook")), "-i", "hosts.ini", "--diff"]
        argv += ["-e", json.dumps(extra), *(["--check"] if check else []), "play.yml"]
        proc = subprocess.run(argv, cwd=self.tmp, env=env, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        # Nothing that carries key material reaches the output (the keys are PEM "PRIVATE KEY" blocks).
        assert "PRIVATE KEY" not in proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        tasks = report["plays"][0]["tasks"]
        last = next(t for t in reversed(tasks) if t["task"]["name"] == "Report")
        results = last["hosts"]["node"]["results"]
        return report["stats"]["node"]["changed"], results

    def path(self, name):
        return self.dir / "node" / name if name.startswith("remote.") else self.dir / name

    def state(self):
        """{file name: (mtime_ns, sha256)} of every file under the directory."""
        return {
            p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(self.dir.rglob("*"))
            if p.is_file()
        }

    def cert(self, name):
        return x509.load_pem_x509_certificate(self.path(f"{name}.crt").read_bytes())


def _differs(before, after):
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def _changed(results):
    return {name for name, result in results.items() if result["changed"]}


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path)


@pytest.mark.slow  # seven ansible-playbook runs
def test_one_flow_issues_keeps_renews_and_reissues_only_what_changed(pki):
    # check mode on a fresh directory, and for "remote" before its directory exists (the caller
    # creates it): reports every certificate, writes nothing
    changed, results = pki.run(check=True)
    assert changed > 0 and _changed(results) == set(CERTS)
    assert not any(r["complete"] for r in results.values())
    assert list(pki.dir.iterdir()) == []

    # first issue
    (pki.dir / "node").mkdir(mode=0o700)
    changed, results = pki.run()
    assert _changed(results) == set(CERTS) and all(r["complete"] for r in results.values())
    first = pki.state()
    assert set(first) == {f"{n}.{ext}" for n in CERTS for ext in ("key", "crt")}  # no .csr anywhere
    assert not list(pki.tmp.rglob("*.csr"))
    for name in CERTS:
        assert stat.S_IMODE(pki.path(f"{name}.key").stat().st_mode) == 0o600, name
        assert stat.S_IMODE(pki.path(f"{name}.crt").stat().st_mode) == 0o644, name
    ca = pki.cert("ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in ("server", "client", "remote"):
        leaf = pki.cert(name)
        assert leaf.issuer == ca.subject
        leaf.verify_directly_issued_by(ca)
        assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    sans = pki.cert("server").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(v) for v in sans.get_values_for_type(x509.DNSName)] == ["localhost"]
    assert [str(v) for v in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    eku = pki.cert("client").extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]

    # re-run: nothing changes, nothing is rewritten; every certificate is kept by the one-read
    # comparison (no reason), so none of community.crypto's modules ran for it
    changed, results = pki.run()
    assert changed == 0 and _changed(results) == set()
    assert {name: r["reasons"] for name, r in results.items()} == {name: [] for name in CERTS}
    assert pki.state() == first
    # ...and so does a dry run, which says each is complete
    changed, results = pki.run(check=True)
    assert changed == 0 and all(r["complete"] and r["reasons"] == [] for r in results.values())

    # renewal window longer than the leaves' validity (365 d) but not the CA's (1825 d): the leaf
    # certificates are re-issued, their keys and the CA stay
    changed, results = pki.run(renew_before="+400d")
    assert _changed(results) == {"server", "client", "remote"}
    assert results["ca"]["reasons"] == [] and results["server"]["reasons"] == ["it is due for renewal"]
    assert not any(r["key_changed"] for r in results.values())
    renewed = pki.state()
    assert _differs(first, renewed) == {"server.crt", "client.crt", "remote.crt"}

    # a changed SAN re-issues only the server certificate (check mode first: nothing written)
    sans = [*SANS, "DNS:appqos.node.local"]
    changed, results = pki.run(check=True, server_sans=sans)
    assert changed > 0 and _changed(results) == {"server"}
    assert results["server"]["reasons"] == ["its SANs are not the CSR's"]
    assert pki.state() == renewed
    # one run, three certificates each with its own reason, each re-issued or repaired alone:
    # - the changed SAN re-issues only the server certificate (its key stays);
    # - a deleted certificate is re-created alone, with the key it had;
    # - a key whose mode drifted is not kept as it is: community.crypto's path restores the mode and
    #   keeps the key and its certificate
    (pki.dir / "client.crt").unlink()
    pki.path("remote.key").chmod(0o644)
    changed, results = pki.run(server_sans=sans)
    assert _changed(results) == {"server", "client", "remote"}
    assert {name: r["reasons"] for name, r in results.items()} == {
        "ca": [],
        "server": ["its SANs are not the CSR's"],
        "client": ["the certificate does not exist"],
        "remote": ["the key's mode is 0644, not 0600"],
    }
    # the remote key's file changed (its mode), not its bytes
    assert {name: r["key_changed"] for name, r in results.items()} == {
        "ca": False,
        "server": False,
        "client": False,
        "remote": True,
    }
    assert stat.S_IMODE(pki.path("remote.key").stat().st_mode) == 0o600
    final = pki.state()
    # by content: the two re-issued certificates only (the remote key's mode changed, not its bytes)
    assert {k for k in final if final[k][1] != renewed[k][1]} == {"server.crt", "client.crt"}
    pki.cert("client").verify_directly_issued_by(pki.cert("ca"))
    assert not list(pki.tmp.rglob("*.csr"))
