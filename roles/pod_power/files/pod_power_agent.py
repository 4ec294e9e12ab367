#!/usr/bin/env python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod_power node agent (installed by the pod_power role as poweraware-pod-power.service).

Usage: pod_power_agent.py [--once | --remove] CONFIG_JSON

Level-triggered: every ``interval_s`` it reads the pods bound to its node and the PowerProfiles and
TimeOfDays (from the API server, with its own ServiceAccount token), the kubelet's CPU manager
checkpoint (which CPUs each Guaranteed container holds) and the node's cpufreq limits, computes the
wanted profile of every CPU (module_utils/node_power/pod_power.py) and, when that differs from what it
last applied, applies the difference through the node power library: validation before the first
write, ordered writes with read-back, originals journaled in ``state_file``, rollback on failure.
CPUs nobody wants a profile for get their journaled originals back. It then publishes what it did:
the node's ``power.intel.com/<profile>`` extended resources, its PowerNode's status, and a Warning
Event on every pod it refuses.

``--once`` runs one cycle and exits (1 when the cycle failed). ``--remove`` restores every CPU from the
journal, drops the node's ``power.intel.com/`` extended resources and clears its PowerNode status:
what the role's ``absent`` runs before removing the agent.

Stopping the agent leaves the CPUs as they are: a restart, a kubelet restart or a reboot converges to
the same state from the same inputs. Reserved CPUs (``reserved_cpus``, the kubelet's
reservedSystemCPUs) are never written. Standard library only (the node's Python, 3.8+).
"""

from __future__ import annotations

import datetime
import hashlib
import http.client
import json
import os
import signal
import ssl
import sys
import time
import urllib.parse

# The collection's node power code, installed by the role beside this file as the package tree
# ansible_collections/poweraware/k8s/plugins/module_utils/... (the files this runner's imports reach):
# first on sys.path, so the role's copy is what runs even where the node's Python has the collection too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import pod_power  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpu_topology import (  # noqa: E402
    gather_cpufreq_info,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.cpulist import format_cpulist  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_apply import (  # noqa: E402
    PowerError,
    SysfsAccessor,
    apply_assignments,
    restore_controls,
)

API_GROUP_PATH = "/apis/" + pod_power.GROUP + "/v1"
COMPONENT = "poweraware-pod-power"
EVENT_REASON = "PowerProfileRefused"
CONFIG_KEYS = ("node", "api_server", "ca_file", "token_file", "state_file", "kubelet_state")
# A failed apply is retried after this long, not every cycle: a refusal the kernel repeats would
# otherwise write and roll back once a second.
RETRY_S = 10.0


class AgentError(Exception):
    """Something the agent cannot work around this cycle (API unreachable, checkpoint unreadable)."""


def load_config(path):
    with open(path) as handle:
        try:
            config = json.load(handle)
        except ValueError as exc:  # the message names the file: the one the unit was given
            raise AgentError(f"{path} is not JSON ({exc}); the pod_power role writes it: run it again") from exc
    if not isinstance(config, dict):
        raise AgentError(f"{path} is not a JSON object of settings; the pod_power role writes it: run it again")
    missing = [key for key in CONFIG_KEYS if not config.get(key)]
    if missing:
        raise AgentError(f"{path}: missing {', '.join(missing)}; the pod_power role writes them all: run it again")
    config.setdefault("sysfs_root", "/sys")
    config.setdefault("reserved_cpus", [])
    config.setdefault("tolerance_mhz", 100)
    config.setdefault("interval_s", 1.0)
    config.setdefault("resync_s", 60.0)
    return config


# --- the API server ------------------------------------------------------------------------------
class Api:
    """A small Kubernetes API client: one kept-alive HTTPS connection, the CA verified (hostname too),
    the ServiceAccount token read from its file (again after a 401: the role may have replaced it)."""

    def __init__(self, server, ca_file, token_file, timeout=10.0):
        url = urllib.parse.urlsplit(server)
        if url.scheme != "https" or not url.hostname:
            raise AgentError(f"api_server {server!r} is not an https:// URL; the agent talks TLS only")
        self.host, self.port = url.hostname, url.port or 443
        self.context = ssl.create_default_context(cafile=ca_file)
        self.token_file, self.timeout = token_file, timeout
        self.token = None
        self.conn = None

    def _read_token(self):
        with open(self.token_file) as handle:
            self.token = handle.read().strip()

    def _connect(self):
        self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.context)

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        """``(status, document)``; a status outside ``ok`` (and not 404 for GET) raises AgentError."""
        if self.token is None:
            self._read_token()
        data = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            if self.conn is None:
                self._connect()
            headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            try:
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt == 2:
                    raise AgentError(f"{method} {path}: {exc}") from exc
                continue  # a kept-alive connection the server closed: once more on a new one
            if response.status == 401 and attempt == 1:
                self._read_token()
                continue
            break
        try:
            document = json.loads(raw.decode() or "null")
        except ValueError:
            document = None
        if response.status in ok or (method == "GET" and response.status == 404):
            return response.status, document
        message = document.get("message") if isinstance(document, dict) else raw[:200]
        raise AgentError(f"{method} {path}: HTTP {response.status}: {message}")

    def get(self, path):
        status, document = self.request("GET", path)
        return None if status == 404 else document

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None


def escape_pointer(key):
    """A JSON pointer segment (RFC 6901): the ``/`` of ``power.intel.com/x`` becomes ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def extended_resource_patch(status, wanted):
    """JSON patch operations that make the node's ``power.intel.com/`` capacity and allocatable
    ``wanted`` ({name: count}), leaving every other resource alone; [] when they already are."""
    ops = []
    for field in ("capacity", "allocatable"):
        current = (status or {}).get(field) or {}
        for name in sorted(current):
            if name.startswith(pod_power.RESOURCE_PREFIX) and name not in wanted:
                ops.append({"op": "remove", "path": f"/status/{field}/{escape_pointer(name)}"})
        for name, count in sorted(wanted.items()):
            if current.get(name) != str(count):
                ops.append({"op": "add", "path": f"/status/{field}/{escape_pointer(name)}", "value": str(count)})
    return ops


def without_nulls(value):
    """``value`` without null fields: the API server drops them from a custom resource (its schema
    makes none nullable), so a status holding one would never equal the one it stored."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def event_name(refusal):
    """The Event's name, the same for the same pod and message: a restarted agent posting a refusal
    again is answered 409 AlreadyExists instead of making a second Event (the agent may create
    Events, not list them)."""
    digest = hashlib.sha256(f"{refusal.get('uid')}\n{refusal['message']}".encode()).hexdigest()[:16]
    return f"{refusal['name'][:200]}.{digest}"


def now_rfc3339(clock=time.time):
    return datetime.datetime.fromtimestamp(int(clock()), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(previous, wanted, stamp):
    """Status conditions, each keeping its lastTransitionTime while its status does not change."""
    before = {c.get("type"): c for c in previous or [] if isinstance(c, dict)}
    result = []
    for kind, status, reason, message in wanted:
        old = before.get(kind) or {}
        since = old.get("lastTransitionTime") if old.get("status") == status else stamp
        result.append(
            {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
        )
    return result


# --- the agent -----------------------------------------------------------------------------------
class Agent:
    def __init__(self, config, api=None, acc=None, clock=time.time, out=sys.stdout):
        self.config = config
        self.node = config["node"]
        self.api = api or Api(config["api_server"], config["ca_file"], config["token_file"])
        self.acc = acc or SysfsAccessor(config["sysfs_root"])
        self.clock, self.out = clock, out
        self.reserved = sorted(int(c) for c in config["reserved_cpus"])
        self.applied_key = None  # what the last successful apply made true
        self.applied_at = 0.0
        self.failed_at = None
        self.failed_key = None
        self.apply_error = None
        self.info = None
        self.info_at = 0.0
        self.events_sent = set()
        self.published_status = None
        self.stopping = False

    def log(self, message):
        self.out.write(message + "\n")
        self.out.flush()

    # inputs
    def _cpufreq_info(self, now):
        # the node's CPU topology and limits change only with hotplug: read again at each resync
        if self.info is None or now - self.info_at >= float(self.config["resync_s"]):
            self.info = gather_cpufreq_info(self.acc)
            self.info_at = now
        return self.info

    def _kubelet_state(self):
        path = self.config["kubelet_state"]
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError as exc:
            raise AgentError(
                f"cannot read the kubelet's CPU manager checkpoint {path}: {exc.strerror}; is the kubelet "
                "running with cpuManagerPolicy: static?"
            ) from exc
        try:
            return pod_power.parse_cpu_manager_state(text)
        except pod_power.PodPowerError as exc:
            raise AgentError(f"{path}: {exc}") from exc

    def _inputs(self):
        selector = urllib.parse.quote(f"spec.nodeName={self.node}")
        pods = (self.api.get(f"/api/v1/pods?fieldSelector={selector}") or {}).get("items") or []
        node = self.api.get(f"/api/v1/nodes/{self.node}")
        if node is None:
            raise AgentError(f"node {self.node} is not in the cluster (the agent's config names it)")
        profiles = (self.api.get(f"{API_GROUP_PATH}/powerprofiles") or {}).get("items") or []
        days = (self.api.get(f"{API_GROUP_PATH}/timeofdays") or {}).get("items") or []
        return pods, node, profiles, days

    # one cycle
    def cycle(self):
        now = self.clock()
        pods, node, profile_objects, days = self._inputs()
        labels = (node.get("metadata") or {}).get("labels") or {}
        state = self._kubelet_state()
        info = self._cpufreq_info(now)
        profiles, problems = pod_power.check_profiles(profile_objects)
        mine = pod_power.profiles_for_node(profiles, labels)
        utc = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
        shared_name, more = pod_power.shared_profile(mine, days, labels, utc)
        problems = problems + more
        # a kubelet without the static CPU manager: the plan says so in its problems, and refuses each pod
        # that asks for a profile (an Event each)
        plan = pod_power.plan(self.node, labels, pods, state, self.reserved, info, mine, shared_name)
        self._apply(plan, now)
        self._events(plan["refusals"])
        self._publish(node, plan, problems + plan["problems"], plan["refusals"])
        return plan

    def _apply(self, plan, now):
        key = json.dumps([plan["assignments"], plan["restore"]], sort_keys=True)
        resync = now - self.applied_at >= float(self.config["resync_s"])
        if key == self.applied_key and not resync:
            return
        if self.failed_at is not None and key == self.failed_key and now - self.failed_at < RETRY_S:
            return
        state_file, tolerance = self.config["state_file"], int(self.config["tolerance_mhz"])
        try:
            if plan["restore"]:
                restore_controls(self.acc, cpus=format_cpulist(plan["restore"]), state_file=state_file,
                                 tolerance_mhz=tolerance)  # fmt: skip
            if plan["assignments"]:
                apply_assignments(self.acc, plan["assignments"], reserved_cpus=self.reserved, state_file=state_file,
                                  tolerance_mhz=tolerance)  # fmt: skip
        except (PowerError, OSError) as exc:
            self.apply_error = str(exc)
            self.failed_at, self.failed_key = now, key
            # the restore before the failed part stays done: the node is at neither state, so the one
            # applied before is no longer known to hold (wanted again, it is written again)
            self.applied_key = None
            self.log(f"apply failed (retried in {RETRY_S:.0f} s or when the wanted state changes): {exc}")
            return
        if key != self.applied_key:
            held = "; ".join(f"{a['profile']} on {a['cpus']}" for a in plan["assignments"]) or "no profile"
            returned = format_cpulist(plan["restore"]) or "none"
            self.log(f"applied: {held}; restored: {returned}")
        self.applied_key, self.applied_at = key, now
        self.apply_error, self.failed_at = None, None

    def _events(self, refusals):
        # the refusals of this cycle only: a pod refused again after a while is told again
        self.events_sent &= {(r.get("uid"), r.get("message")) for r in refusals}
        for refusal in refusals:
            mark = (refusal.get("uid"), refusal.get("message"))
            if mark in self.events_sent or not refusal.get("namespace"):
                continue
            stamp = now_rfc3339(self.clock)
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": event_name(refusal), "namespace": refusal["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": refusal["name"],
                    "namespace": refusal["namespace"],
                    "uid": refusal.get("uid"),
                },
                "reason": EVENT_REASON,
                "message": refusal["message"],
                "type": "Warning",
                "source": {"component": COMPONENT, "host": self.node},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            status, _event = self.api.request(
                "POST", f"/api/v1/namespaces/{refusal['namespace']}/events", event, ok=(200, 201, 409)
            )
            self.events_sent.add(mark)
            if status != 409:  # 409: posted before this agent's restart
                self.log(f"refused pod {refusal['namespace']}/{refusal['name']}: {refusal['message']}")

    def _publish(self, node, plan, problems, refusals):
        ops = extended_resource_patch(node.get("status"), plan["extended_resources"])
        if ops:
            self.api.request("PATCH", f"/api/v1/nodes/{self.node}/status", ops, "application/json-patch+json")
        path = f"{API_GROUP_PATH}/powernodes/{self.node}"
        current = self.api.get(path)
        if current is None:
            raise AgentError(f"PowerNode {self.node} does not exist; the pod_power role creates it: run it again")
        previous = (current.get("status") or {}).get("conditions")
        stamp = now_rfc3339(self.clock)
        applied = (
            ("Applied", "False", "ApplyFailed", self.apply_error)
            if self.apply_error
            else ("Applied", "True", "Applied", "every CPU is at its wanted profile")
        )
        # a node's condition says which pod a refusal is about (an Event says it by its object)
        refused = [f"pod {r['namespace']}/{r['name']}: {r['message']}" for r in refusals]
        valid = (
            ("ProfilesValid", "False", "Refused", "; ".join(problems + refused))
            if problems or refusals
            else ("ProfilesValid", "True", "Valid", "every profile and pod on this node can be served")
        )
        status = without_nulls(dict(plan["status"], conditions=conditions(previous, (applied, valid), stamp)))
        stored = current.get("status")
        # published already when the server still holds what it made of this status the last time
        # (it may drop fields its schema does not know): an unchanged cycle writes nothing
        if status != stored and self.published_status != (status, stored):
            # the whole status replaced: a merge patch would keep fields this one no longer has (the
            # shared pool's profile once there is none)
            _code, answer = self.api.request(
                "PATCH", f"{path}/status", [{"op": "add", "path": "/status", "value": status}],
                "application/json-patch+json",
            )  # fmt: skip
            self.published_status = (status, (answer or {}).get("status"))

    # the whole life
    def run(self):
        interval = float(self.config["interval_s"])
        self.log(f"pod_power agent on {self.node}: every {interval:g} s; reserved CPUs "
                 f"{format_cpulist(self.reserved) or 'none'}")  # fmt: skip
        while not self.stopping:
            started = self.clock()
            try:
                self.cycle()
            except (AgentError, PowerError, OSError, ValueError) as exc:
                self.log(f"cycle failed (tried again in {interval:g} s): {exc}")
            rest = interval - (self.clock() - started)
            if rest > 0 and not self.stopping:
                time.sleep(rest)
        self.api.close()
        return 0

    def remove(self):
        """Everything back: CPUs from the journal, the node's extended resources, the PowerNode status."""
        result = restore_controls(self.acc, cpus=None, state_file=self.config["state_file"],
                                  tolerance_mhz=int(self.config["tolerance_mhz"]))  # fmt: skip
        self.log(f"restored CPUs {result['cpus'] or 'none'} from {self.config['state_file']}")
        node = self.api.get(f"/api/v1/nodes/{self.node}")
        if node is not None:
            ops = extended_resource_patch(node.get("status"), {})
            if ops:
                self.api.request("PATCH", f"/api/v1/nodes/{self.node}/status", ops, "application/json-patch+json")
        path = f"{API_GROUP_PATH}/powernodes/{self.node}"
        # a status already cleared is left alone: a second removal writes nothing
        if (self.api.get(path) or {}).get("status") is not None:
            self.api.request("PATCH", f"{path}/status", {"status": None}, "application/merge-patch+json")
        self.api.close()
        return 0


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) != 1 or not flags <= {"--once", "--remove"} or len(flags) > 1:
        sys.stderr.write("usage: pod_power_agent.py [--once | --remove] CONFIG_JSON\n")
        return 2
    try:
        agent = Agent(load_config(args[0]))
        if "--remove" in flags:
            return agent.remove()
        if "--once" in flags:
            agent.cycle()
            return 0 if agent.apply_error is None else 1

        def stop(_signum, _frame):
            agent.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        return agent.run()
    except (AgentError, PowerError, OSError, ValueError) as exc:
        sys.stderr.write(f"pod_power agent: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
