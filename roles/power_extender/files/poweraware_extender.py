# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware scheduler extender: kube-scheduler asks it where a pod costs the fewest watts.

Runs on a stock Python image (standard library only) as a static pod next to kube-scheduler on
each control-plane node; the power_extender role puts this file and the collection's module_utils
it imports in one host directory (docs/power-extender.md).

- Serves k8s.io/kube-scheduler/extender/v1 ``filter`` and ``prioritize`` over HTTPS on
  ``--address`` (127.0.0.1): a verb needs a client certificate from ``--client-ca`` whose common
  name is one of ``--allowed-client``; ``/healthz`` (alive), ``/readyz`` (both watches synced)
  and ``/metrics`` (Prometheus text) need none, as kubelet probes them without one.
- Keeps its view of nodes (capacity, the power model annotation) and of the pods bound to them
  (requests) from list + watch on the API server with its own client certificate (``--api-*``);
  no API call per request. A watch that breaks is re-listed; while it has been down for longer
  than ``--stale-after`` seconds every node is scored neutrally and the log says why.
- Decisions are ``extender`` over ``placement_score.rank_nodes`` (module_utils).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The collection's module_utils sit next to this file (ansible_collections/poweraware/k8s/...).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.poweraware.k8s.plugins.module_utils.placement.extender import (  # noqa: E402
    DEFAULT_POD_CPU_M,
    ClusterState,
    ExtenderError,
    filter_result,
    parse_args,
    prioritize_result,
)

# Upper bounds of the request-duration histogram, seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RESOURCES = {
    "nodes": "/api/v1/nodes",
    # Only pods bound to a node and not finished: what counts against the node's capacity.
    "pods": "/api/v1/pods?fieldSelector="
    + urllib.parse.quote("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"),
}
WATCH_SECONDS = 300
DURATION = "poweraware_extender_request_duration_seconds"
MAX_BODY = 64 << 20


def _query(path, params):
    """``path`` with ``params`` appended (a resource path may carry its field selector already)."""
    return f"{path}{'&' if '?' in path else '?'}{params}"


def log(message):
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)


class Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = {}  # (verb, code) -> count
        self.durations = {}  # verb -> [bucket counts..., sum, count]
        self.neutral = {}  # reason kind -> node scores given neutrally
        self.slow = 0
        self.watch_restarts = {name: 0 for name in RESOURCES}

    def observe(self, verb, code, seconds):
        with self.lock:
            self.requests[(verb, code)] = self.requests.get((verb, code), 0) + 1
            hist = self.durations.setdefault(verb, [0] * (len(BUCKETS) + 2))
            for index, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    hist[index] += 1
            hist[-2] += seconds
            hist[-1] += 1

    def render(self, service):
        lines = [
            "# HELP poweraware_extender_requests_total Extender requests by verb and HTTP status.",
            "# TYPE poweraware_extender_requests_total counter",
        ]
        with self.lock:
            for (verb, code), count in sorted(self.requests.items()):
                lines.append(f'poweraware_extender_requests_total{{verb="{verb}",code="{code}"}} {count}')
            lines += [
                "# HELP poweraware_extender_request_duration_seconds Time to answer a verb.",
                "# TYPE poweraware_extender_request_duration_seconds histogram",
            ]
            for verb, hist in sorted(self.durations.items()):
                for index, bound in enumerate(BUCKETS):
                    lines.append(f'{DURATION}_bucket{{verb="{verb}",le="{bound}"}} {hist[index]}')
                lines.append(
                    f'poweraware_extender_request_duration_seconds_bucket{{verb="{verb}",le="+Inf"}} {hist[-1]}'
                )
                lines.append(f'poweraware_extender_request_duration_seconds_sum{{verb="{verb}"}} {hist[-2]:.6f}')
                lines.append(f'poweraware_extender_request_duration_seconds_count{{verb="{verb}"}} {hist[-1]}')
            lines += [
                "# HELP poweraware_extender_slow_requests_total Answers later than the scheduler's timeout.",
                "# TYPE poweraware_extender_slow_requests_total counter",
                f"poweraware_extender_slow_requests_total {self.slow}",
                "# HELP poweraware_extender_neutral_scores_total Node scores given neutrally, by reason.",
                "# TYPE poweraware_extender_neutral_scores_total counter",
            ]
            for kind, count in sorted(self.neutral.items()):
                lines.append(f'poweraware_extender_neutral_scores_total{{reason="{kind}"}} {count}')
            lines += [
                "# HELP poweraware_extender_watch_restarts_total Lists after a broken watch.",
                "# TYPE poweraware_extender_watch_restarts_total counter",
            ]
            for name, count in sorted(self.watch_restarts.items()):
                lines.append(f'poweraware_extender_watch_restarts_total{{resource="{name}"}} {count}')
        with service.lock:
            up = {name: int(service.synced[name] and service.down_since[name] is None) for name in RESOURCES}
            nodes, pods = len(service.state.nodes), len(service.state.pods)
            modelled = sum(1 for summary in service.state.nodes.values() if summary["model"] is not None)
        lines += [
            "# HELP poweraware_extender_watch_up 1 while the resource's watch runs.",
            "# TYPE poweraware_extender_watch_up gauge",
        ]
        lines += [f'poweraware_extender_watch_up{{resource="{name}"}} {value}' for name, value in sorted(up.items())]
        lines += [
            "# HELP poweraware_extender_nodes Nodes in the extender's view, and those with a power model.",
            "# TYPE poweraware_extender_nodes gauge",
            f'poweraware_extender_nodes{{model="yes"}} {modelled}',
            f'poweraware_extender_nodes{{model="no"}} {nodes - modelled}',
            "# HELP poweraware_extender_pods Bound, unfinished pods in the extender's view.",
            "# TYPE poweraware_extender_pods gauge",
            f"poweraware_extender_pods {pods}",
        ]
        return "\n".join(lines) + "\n"


class Service:
    def __init__(self, options):
        self.options = options
        self.lock = threading.Lock()
        self.state = ClusterState(options.annotation_prefix)
        self.synced = {name: False for name in RESOURCES}
        self.down_since = {name: time.monotonic() for name in RESOURCES}
        self.metrics = Metrics()
        self.logged_neutral = {}  # node -> reason last logged
        self.logged_problems = set()
        url = urllib.parse.urlsplit(options.api_server)
        if url.scheme != "https" or not url.hostname:
            raise SystemExit(
                f"--api-server: {options.api_server!r} is not an https:// URL; give the API server kube-scheduler uses"
            )
        self.api_host, self.api_port = url.hostname, url.port or 443
        self.api_context = ssl.create_default_context(cafile=options.api_ca)
        self.api_context.load_cert_chain(options.api_cert, options.api_key)

    # -- the API
    def _connection(self, timeout):
        return http.client.HTTPSConnection(self.api_host, self.api_port, context=self.api_context, timeout=timeout)

    def _list(self, name):
        path, items, token = RESOURCES[name], [], ""
        while True:
            query = _query(path, "limit=500" + (f"&continue={urllib.parse.quote(token)}" if token else ""))
            conn = self._connection(30)
            try:
                conn.request("GET", query, headers={"Accept": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
            finally:
                conn.close()
            if resp.status != 200:
                raise OSError(f"list {name}: HTTP {resp.status}: {body[:300]!r}")
            page = json.loads(body)
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items, page["metadata"]["resourceVersion"]

    def _apply(self, name, kind, obj):
        if name == "nodes":
            self.state.node_event(kind, obj)
        else:
            self.state.pod_event(kind, obj)

    def _watch(self, name, version):
        """Apply events until the watch ends; return the last resourceVersion, or None to re-list."""
        path = RESOURCES[name]
        query = _query(
            path, f"watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={version}"
        )
        conn = self._connection(WATCH_SECONDS + 30)
        try:
            conn.request("GET", query, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise OSError(f"watch {name}: HTTP {resp.status}: {resp.read()[:300]!r}")
            while True:
                line = resp.readline()
                if not line:
                    return version
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    # 410 Gone: our resourceVersion is too old; anything else: start over too.
                    log(f"watch {name}: {obj.get('code')} {obj.get('message')}; listing again")
                    return None
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if kind == "BOOKMARK":
                    continue
                with self.lock:
                    self._apply(name, kind, obj)
                    self._log_problems()
        finally:
            conn.close()

    def _log_problems(self):
        for what, why in self.state.problems.items():
            if (what, why) not in self.logged_problems:
                self.logged_problems.add((what, why))
                log(f"ignored {what}: {why}")

    def follow(self, name):
        delay, version = 1.0, None
        while True:
            try:
                if version is None:
                    items, version = self._list(name)
                    with self.lock:
                        (self.state.set_nodes if name == "nodes" else self.state.set_pods)(items)
                        self._log_problems()
                        if self.down_since[name] is not None:
                            log(f"{name}: {len(items)} listed, watching from resourceVersion {version}")
                        self.synced[name], self.down_since[name] = True, None
                version = self._watch(name, version)
                delay = 1.0
            except (OSError, ValueError, KeyError, http.client.HTTPException, ssl.SSLError) as err:
                with self.lock:
                    if self.down_since[name] is None:
                        self.down_since[name] = time.monotonic()
                with self.metrics.lock:
                    self.metrics.watch_restarts[name] += 1
                log(f"{name}: {err}; retrying in {delay:g} s")
                time.sleep(delay)
                delay, version = min(delay * 2, 10.0), None

    def fresh(self):
        """False once a watch has been down longer than --stale-after (the caller holds the lock)."""
        now = time.monotonic()
        return all(
            self.synced[name] and (since is None or now - since <= self.options.stale_after)
            for name, since in self.down_since.items()
        )

    # -- decisions
    def decide(self, verb, body):
        pod, names, objects = parse_args(body)
        meta = pod.get("metadata") or {}
        who = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self.lock:
            fresh = self.fresh()
            if verb == "filter":
                reply, _ranked = filter_result(self.state, pod, names, objects, fresh, self.options.default_pod_cpu_m)
                if reply["FailedNodes"]:
                    log(
                        f"filter {who}: {len(reply['FailedNodes'])} of {len(names)} nodes refused: "
                        f"{reply['FailedNodes']}"
                    )
                return reply
            reply, ranked, neutral, unknown = prioritize_result(
                self.state, pod, names, objects, fresh, self.options.default_pod_cpu_m
            )
            self._log_neutral(neutral, unknown)
        best = ranked[0] if ranked else None
        if best is not None:
            log(f"prioritize {who}: {len(names)} nodes, best {best['name']} ({best['reason']})")
        return reply

    def _log_neutral(self, neutral, unknown):
        with self.metrics.lock:
            for why in neutral.values():
                kind = (
                    "stale"
                    if "not current" in why
                    else ("no-model" if why.startswith("no annotation") else "bad-model")
                )
                self.metrics.neutral[kind] = self.metrics.neutral.get(kind, 0) + 1
            if unknown:
                self.metrics.neutral["unknown-node"] = self.metrics.neutral.get("unknown-node", 0) + len(unknown)
        for name, why in neutral.items():
            if self.logged_neutral.get(name) != why:
                self.logged_neutral[name] = why
                log(f"node {name} scored neutrally: {why}")
        for name in unknown:
            why = "not in the extender's view yet"
            if self.logged_neutral.get(name) != why:
                self.logged_neutral[name] = why
                log(f"node {name} scored neutrally: {why}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: kube-scheduler reuses its connections
    # Headers and body go out as two sends: with Nagle's algorithm the body waits for the client's
    # delayed ACK of the headers, about 40 ms per answer (Go, kube-scheduler's side, disables it too).
    disable_nagle_algorithm = True
    server_version = "poweraware-extender"
    service: Service = None  # set by build

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # one line per decision is logged by Service; per-request access lines would drown it

    def _send(self, code, body, content_type="application/json"):
        if isinstance(body, bytes):
            data = body
        else:
            data = (json.dumps(body) if content_type == "application/json" else body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        service = self.service
        if path == "/healthz":
            self._send(200, b"ok", "text/plain")
        elif path == "/readyz":
            with service.lock:
                ready = all(service.synced.values())
            digest = service.options.config_digest
            self._send(200 if ready else 503, f"ok {digest}" if ready else f"watches not synced {digest}", "text/plain")
        elif path == "/metrics":
            self._send(200, service.metrics.render(service), "text/plain; version=0.0.4")
        else:
            self._send(404, {"Error": f"no such path {path}"})

    def _client_allowed(self):
        cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        if not cert:
            return False, "no client certificate"
        names = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
        if not set(names) & set(self.service.options.allowed_client):
            return False, f"client certificate CN {names} is not allowed (--allowed-client)"
        return True, ""

    def do_POST(self):  # noqa: N802 - http.server's name
        started = time.monotonic()
        verb = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        code = 200
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                code, reply = 413, {"Error": "request body too large"}
                self.close_connection = True
            else:
                body = self.rfile.read(length)
                allowed, why = self._client_allowed()
                if verb not in ("filter", "prioritize"):
                    code, reply = 404, {"Error": f"unknown verb {verb!r}; this extender serves filter and prioritize"}
                elif not allowed:
                    code, reply = 403, {"Error": why}
                    log(f"{verb}: refused: {why}")
                else:
                    reply = self.service.decide(verb, body)
        except ExtenderError as err:
            code, reply = 400, {"Error": str(err)}
            log(f"{verb}: bad request: {err}")
        self._send(code, reply)
        elapsed = time.monotonic() - started
        metrics = self.service.metrics
        metrics.observe(verb if verb in ("filter", "prioritize") else "other", code, elapsed)
        if elapsed > self.service.options.scheduler_timeout:
            with metrics.lock:
                metrics.slow += 1
            log(
                f"{verb}: answered after {elapsed:.3f} s, over the scheduler's "
                f"{self.service.options.scheduler_timeout:g} s timeout: it went on without us"
            )


def options(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9443)
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument(
        "--client-ca", required=True, help="CA of the clients (kube-scheduler) allowed to call the verbs"
    )
    parser.add_argument(
        "--allowed-client", action="append", required=True, help="client certificate CN allowed (repeat)"
    )
    parser.add_argument("--api-server", required=True)
    parser.add_argument("--api-ca", required=True)
    parser.add_argument("--api-cert", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--annotation-prefix", default="poweraware.io")
    parser.add_argument("--stale-after", type=float, default=30.0)
    parser.add_argument(
        "--default-pod-cpu-m",
        type=int,
        default=DEFAULT_POD_CPU_M,
        help="millicores a container without CPU request or limit counts for in the predicted jump",
    )
    parser.add_argument(
        "--config-digest", default="", help="reported by /readyz: which configuration this process runs"
    )
    parser.add_argument(
        "--scheduler-timeout", type=float, default=1.0, help="the httpTimeout registered in kube-scheduler, seconds"
    )
    return parser.parse_args(argv)


def build(opts):
    """The HTTPS server with its watches started; ``serve_forever`` it."""
    service = Service(opts)
    Handler.service = service
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(opts.tls_cert, opts.tls_key)
    context.load_verify_locations(cafile=opts.client_ca)
    # Optional at the handshake so that kubelet's probes (no certificate) reach /healthz; the verbs
    # refuse a request without an allowed certificate.
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer((opts.address, opts.port), Handler)
    server.daemon_threads = True
    # The handshake happens in the handler's thread (its first read), not in the accepting one.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    for name in RESOURCES:
        threading.Thread(target=service.follow, args=(name,), name=f"watch-{name}", daemon=True).start()
    return server


def main(argv=None):
    opts = options(argv)
    server = build(opts)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log(
        f"serving filter and prioritize on https://{opts.address}:{opts.port}, API {opts.api_server}, "
        f"annotations {opts.annotation_prefix}/"
    )
    server.serve_forever()
    log("stopped")


if __name__ == "__main__":
    main()
