"""The lab kubelet's API (lab/kubelet_api.py) by kubelet's rules: the SubjectAccessReview attributes a
path and method are authorised as (pkg/kubelet/server/auth.go), the user a client certificate
names, containerLogs' query, and the server itself over real TLS with a certificate from a CA of
the test's own, the API server's reviews answered by a stub that records what it was asked."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time

import pytest

from lab import kubelet_api, pki

NODE = "lab-worker-1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/containerLogs/ns/p/c", [("get", "proxy")]),
        ("POST", "/exec/ns/p/c", [("create", "proxy")]),
        ("GET", "/stats/summary", [("get", "stats")]),
        ("GET", "/metrics/resource", [("get", "metrics")]),
        ("GET", "/metrics", [("get", "metrics")]),
        ("GET", "/logs/syslog", [("get", "log")]),
        ("POST", "/checkpoint/ns/p/c", [("create", "checkpoint")]),
        ("GET", "/pods", [("get", "pods"), ("get", "proxy")]),
        ("GET", "/healthz", [("get", "healthz"), ("get", "proxy")]),
        ("GET", "/statsx", [("get", "proxy")]),  # a sub*path*, not a prefix of the name
    ],
)
def test_the_attributes_kubelet_authorises_a_request_as(method, path, expected):
    attributes = kubelet_api.authorization_attributes(method, path, NODE)
    assert [(a["verb"], a["subresource"]) for a in attributes] == expected
    assert all(a["resource"] == "nodes" and a["name"] == NODE and a["version"] == "v1" for a in attributes)


def test_a_certificate_names_its_cn_and_organizations():
    cert = {
        "subject": (
            (("organizationName", "kubeadm:cluster-admins"),),
            (("commonName", "kube-apiserver-kubelet-client"),),
        )
    }
    assert kubelet_api.certificate_user(cert) == ("kube-apiserver-kubelet-client", ["kubeadm:cluster-admins"])
    assert kubelet_api.certificate_user({}) is None  # no certificate: a token, or nobody
    assert kubelet_api.certificate_user({"subject": ((("organizationName", "x"),),)}) is None


def test_tail_lines_then_limit_bytes():
    data = b"one\ntwo\nthree\n"
    assert kubelet_api.tail(data, None, None) == data
    assert kubelet_api.tail(data, 2, None) == b"two\nthree\n"
    assert kubelet_api.tail(data, 0, None) == b""
    assert kubelet_api.tail(data, 10, 5) == b"one\nt"
    assert kubelet_api.tail(b"no newline at the end", 1, None) == b"no newline at the end"


def test_log_query_as_kubelet_checks_it_and_what_the_lab_does_not_serve():
    assert kubelet_api.log_options({}) == {"follow": False, "tail_lines": None, "limit_bytes": None}
    assert kubelet_api.log_options({"follow": ["true"], "tailLines": ["10"], "limitBytes": ["500"]}) == {
        "follow": True,
        "tail_lines": 10,
        "limit_bytes": 500,
    }
    assert kubelet_api.log_options({"tailLines": ["-1"]})["tail_lines"] is None  # kubectl's "all"
    for query, words in (
        ({"tailLines": ["ten"]}, 'tailLines: invalid value "ten": must be an integer'),
        ({"limitBytes": ["-5"]}, "limitBytes: Invalid value: -5: must be greater than or equal to 0"),
        ({"timestamps": ["true"]}, "without per-line timestamps"),
        ({"sinceSeconds": ["60"]}, "without per-line timestamps"),
        ({"previous": ["true"]}, "previous is not served"),
    ):
        with pytest.raises(kubelet_api.LogRequestError, match=words) as err:
            kubelet_api.log_options(query)
        assert err.value.status == 400


class StubApi:
    """The API server's reviews: tokens in ``tokens`` are valid, users in ``allowed`` may do
    anything; every review asked for is recorded."""

    def __init__(self, tokens, allowed):
        self.tokens, self.allowed, self.asked = tokens, allowed, []

    def request(self, method, path, body):
        self.asked.append((path.rsplit("/", 1)[-1], body["spec"]))
        if path.endswith("tokenreviews"):
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": {"username": user, "groups": ["g"]}}}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


@pytest.fixture
def kubelet(tmp_path):
    ca = pki.make_ca("test-ca")
    ca.write(tmp_path, "ca")
    pki.make_cert(ca, NODE, server_names=("127.0.0.1",), client=False).write(tmp_path, "kubelet")
    pki.make_cert(ca, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins").write(tmp_path, "client")
    pki.make_cert(ca, "stranger").write(tmp_path, "stranger")
    logs = tmp_path / "log"
    container = logs / "pods" / f"ns_web_{'u' * 8}" / "app"
    container.mkdir(parents=True)
    (container / "0.log").write_bytes(b"".join(b"line %d\n" % n for n in range(1, 21)))
    api = StubApi({"good-token": "system:serviceaccount:ns:reader"}, {"kube-apiserver-kubelet-client"})
    server = kubelet_api.KubeletApi(
        NODE,
        "127.0.0.1",
        tmp_path / "kubelet.crt",
        tmp_path / "kubelet.key",
        tmp_path / "ca.crt",
        api,
        logs,
        lambda: [{"metadata": {"name": "web", "namespace": "ns"}}],
        port=0,
    )
    server.start()
    yield server, api, tmp_path, container / "0.log"
    server.stop()


def _get(kubelet, path, cert=None, token=None, stream=False):
    server, _api, files, _log = kubelet
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    if cert:
        context.load_cert_chain(str(files / f"{cert}.crt"), str(files / f"{cert}.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.server.server_address[1], context=context, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    response = conn.getresponse()
    return response if stream else (response.status, response.read().decode())


def test_the_api_server_reads_a_log_with_its_kubelet_client_certificate(kubelet):
    _server, api, _files, _log = kubelet
    status, body = _get(kubelet, "/containerLogs/ns/web/app?tailLines=2", cert="client")
    assert (status, body) == (200, "line 19\nline 20\n")
    # authorised as kubelet asks: nodes/proxy of this node, for the certificate's user and groups
    assert api.asked == [
        (
            "subjectaccessreviews",
            {
                "user": "kube-apiserver-kubelet-client",
                "groups": ["kubeadm:cluster-admins"],
                "extra": {},
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "nodes",
                    "name": NODE,
                    "version": "v1",
                    "subresource": "proxy",
                },
            },
        )
    ]
    assert _get(kubelet, "/containerLogs/ns/web/app?limitBytes=7", cert="client") == (200, "line 1\n")
    assert _get(kubelet, "/containerLogs/ns/web/db", cert="client") == (
        404,
        'container "db" in pod "web" is not available',
    )
    assert _get(kubelet, "/containerLogs/ns/gone/app", cert="client") == (
        404,
        f'pod "gone" in namespace "ns" is not running on node "{NODE}"',
    )
    assert _get(kubelet, "/healthz", cert="client") == (200, "ok")
    status, body = _get(kubelet, "/pods", cert="client")
    assert status == 200 and json.loads(body)["items"][0]["metadata"]["name"] == "web"


def test_nobody_without_credentials_and_a_refused_user_gets_kubelets_403(kubelet):
    _server, api, _files, _log = kubelet
    assert _get(kubelet, "/healthz") == (401, "Unauthorized")
    assert _get(kubelet, "/healthz", token="forged") == (401, "Unauthorized")
    assert _get(kubelet, "/containerLogs/ns/web/app", cert="stranger") == (
        403,
        "Forbidden (user=stranger, verb=get, resource=nodes, subresource=proxy)",
    )
    # a reviewed token is a user like any other: authorised by a SubjectAccessReview, refused here
    api.asked.clear()
    assert _get(kubelet, "/pods", token="good-token") == (
        403,
        "Forbidden (user=system:serviceaccount:ns:reader, verb=get, resource=nodes, subresource=proxy)",
    )
    assert [kind for kind, _spec in api.asked] == ["tokenreviews", "subjectaccessreviews", "subjectaccessreviews"]


def test_a_followed_log_streams_what_the_container_writes_next(kubelet):
    _server, _api, _files, log = kubelet
    response = _get(kubelet, "/containerLogs/ns/web/app?follow=true&tailLines=1", cert="client", stream=True)
    assert response.status == 200
    assert response.read1(100) == b"line 20\n"
    received = []
    reader = threading.Thread(target=lambda: received.append(response.read1(100)))
    reader.start()
    time.sleep(0.3)
    with open(log, "ab") as out:
        out.write(b"line 21\n")
    reader.join(5)
    assert received == [b"line 21\n"]
    log.unlink()  # the pod is gone: the stream ends
    assert response.read() == b""
