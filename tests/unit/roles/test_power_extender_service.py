"""The extender service's HTTPS side (roles/power_extender/files/poweraware_extender.py), on loopback.

Real TLS with client certificates; the API server it would watch is a closed port, so its view never
syncs: /readyz says so and prioritize scores every node it has not seen neutrally. The API side (list,
watch, RBAC) is proven on the lab (tests/integration/test_power_extender.py).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import pathlib
import socket
import ssl
import sys
import threading

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "integration"))
from extender_server import issue_client, issue_server, make_ca  # noqa: E402

SERVICE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "power_extender" / "files" / "poweraware_extender.py"


def _load():
    spec = importlib.util.spec_from_file_location("poweraware_extender", SERVICE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    directory = tmp_path_factory.mktemp("extender-service")
    ca = make_ca(directory)
    server = issue_server(ca, directory)
    allowed = issue_client(ca, directory, "kube-scheduler-tas-client")
    stranger = issue_client(ca, directory, "someone-else")
    module = _load()
    # Its watch threads retry the closed API port every 10 s for the rest of the session (daemon
    # threads, no stop): their log lines went to whatever sys.stdout was then, once into a module
    # test's captured output, which then was not JSON. Kept here instead.
    module.log = [].append
    port, api_port = _free_port(), _free_port()  # nothing listens on api_port
    argv = [
        f"--port={port}", f"--tls-cert={server.cert}", f"--tls-key={server.key}", f"--client-ca={ca.cert}",
        "--allowed-client=kube-scheduler-tas-client", f"--api-server=https://127.0.0.1:{api_port}",
        f"--api-ca={ca.cert}", f"--api-cert={allowed.cert}", f"--api-key={allowed.key}", "--config-digest=abc123",
    ]  # fmt: skip
    server = module.build(module.options(argv))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"port": port, "ca": ca.cert, "allowed": allowed, "stranger": stranger}
    server.shutdown()
    server.server_close()


def _request(service, method, path, body=None, client=None):
    context = ssl.create_default_context(cafile=str(service["ca"]))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    conn = http.client.HTTPSConnection("127.0.0.1", service["port"], context=context, timeout=5)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


ARGS = {
    "Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}},
    "NodeNames": ["a", "b"],
}


def test_verbs_need_an_allowed_client_certificate(service):
    status, body = _request(service, "POST", "/prioritize", ARGS)
    assert status == 403 and "no client certificate" in body
    status, body = _request(service, "POST", "/prioritize", ARGS, service["stranger"])
    assert status == 403 and "someone-else" in body and "not allowed" in body


def test_prioritize_answers_with_scores_even_before_its_view_syncs(service):
    status, body = _request(service, "POST", "/prioritize", ARGS, service["allowed"])
    assert status == 200
    assert json.loads(body) == [{"Host": "a", "Score": 5}, {"Host": "b", "Score": 5}]
    status, body = _request(service, "POST", "/filter", ARGS, service["allowed"])
    assert status == 200 and json.loads(body) == {"FailedNodes": {}, "Error": "", "NodeNames": ["a", "b"]}


def test_bad_requests_say_what_is_wrong(service):
    status, body = _request(service, "POST", "/prioritize", {"Pod": {}}, service["allowed"])
    assert status == 400 and "neither Nodes nor NodeNames" in body
    status, body = _request(service, "POST", "/bind", ARGS, service["allowed"])
    assert status == 404 and "filter and prioritize" in body


def test_probes_and_metrics_need_no_certificate(service):
    assert _request(service, "GET", "/healthz") == (200, "ok")
    status, body = _request(service, "GET", "/readyz")
    assert status == 503 and "not synced" in body and "abc123" in body
    status, body = _request(service, "GET", "/metrics")
    assert status == 200
    assert 'poweraware_extender_requests_total{verb="prioritize",code="200"}' in body
    assert 'poweraware_extender_requests_total{verb="prioritize",code="403"}' in body
    assert 'poweraware_extender_watch_up{resource="nodes"} 0' in body
    assert 'poweraware_extender_neutral_scores_total{reason="unknown-node"}' in body
