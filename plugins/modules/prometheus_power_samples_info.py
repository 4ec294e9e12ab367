#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: prometheus_power_samples_info
short_description: Read per-node CPU utilisation and power samples from Prometheus
version_added: 0.1.0
description:
  - Runs two range queries (C(/api/v1/query_range)) over the same window and step, one for CPU
    utilisation in percent and one for power in watts, each returning one series per node, and
    pairs them at equal evaluation timestamps.
  - The result feeds the P(poweraware.k8s.power_model#filter) filter, as the role
    C(poweraware.k8s.power_models) does.
author:
  - poweraware.k8s contributors (@poweraware)
extends_documentation_fragment:
  - poweraware.k8s.attributes
  - poweraware.k8s.attributes.info_module
options:
  url:
    description:
      - Base URL of the Prometheus HTTP API, without C(/api/v1), e.g. V(https://prometheus.monitoring:9090).
    type: str
    required: true
  util_query:
    description:
      - PromQL expression for CPU utilisation in percent (0-100), one series per node carrying O(node_label).
    type: str
    required: true
  power_query:
    description:
      - PromQL expression for power in watts, one series per node carrying O(node_label).
    type: str
    required: true
  node_label:
    description: The label that names the Kubernetes node in both expressions' results.
    type: str
    default: node
  end:
    description:
      - End of the window, as unix seconds or an RFC 3339 timestamp. Default is now.
      - Rounded down to a multiple of O(step), so that runs within one step read the same samples.
    type: str
  window:
    description: Length of the window, a Prometheus duration (V(30s), V(5m), V(24h), V(7d)) or seconds.
    type: str
    default: 24h
  step:
    description: Query resolution step, a Prometheus duration or seconds. At most 11,000 points per series.
    type: str
    default: 5m
  validate_certs:
    description: Verify the server certificate for C(https) URLs. Leave on outside tests.
    type: bool
    default: true
  ca_path:
    description: PEM file of the CA that signed the Prometheus serving certificate.
    type: path
  client_cert:
    description: PEM client certificate for mutual TLS.
    type: path
  client_key:
    description: PEM key of O(client_cert).
    type: path
  bearer_token:
    description: Bearer token sent in the C(Authorization) header.
    type: str
  timeout:
    description: Seconds to wait for each query.
    type: int
    default: 30
notes:
  - Both queries are evaluated on the same aligned timestamps, so each sample pairs the two
    values Prometheus reports for one instant (with its default 5 minute look-back).
seealso:
  - module: poweraware.k8s.cpu_power_info
  - name: Prometheus HTTP API, range queries
    description: The C(query_range) endpoint and its answer format.
    link: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries
"""

EXAMPLES = r"""
- name: Read a day of utilisation and package power samples per node
  poweraware.k8s.prometheus_power_samples_info:
    url: https://prometheus.monitoring.svc:9090
    ca_path: /etc/pki/prometheus-ca.crt
    # collectd's cpu plugin (role collectd); with node_exporter:
    # 100 * (1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m])))
    util_query: 100 - avg by (node) (collectd_cpu_percent{cpu="idle", node!=""})
    power_query: sum by (node) (collectd_rapl_power{type="package", node!=""})
    window: 24h
    step: 5m
  register: power_samples

- name: Fit one model per node
  ansible.builtin.debug:
    msg: "{{ item.value | poweraware.k8s.power_model }}"
  loop: "{{ power_samples.samples | dict2items }}"
"""

RETURN = r"""
samples:
  description: Per node, the paired samples sorted by time.
  returned: always
  type: dict
  sample:
    worker-1:
      - {time: 1767225600, util: 12.5, watts: 141.2}
      - {time: 1767225900, util: 35.0, watts: 188.9}
nodes:
  description: Nodes that have at least one paired sample, sorted.
  returned: always
  type: list
  elements: str
  sample: [worker-1, worker-2]
dropped:
  description:
    - Per node, points left out (no partner at that timestamp, utilisation outside 0-100, negative power).
  returned: always
  type: dict
  sample: {worker-1: 0, worker-2: 3}
window:
  description: The window and step actually queried, in unix seconds.
  returned: always
  type: dict
  sample: {start: 1767139200, end: 1767225600, step: 300}
"""

import json  # noqa: E402
import time  # noqa: E402
from urllib.parse import urlencode  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.urls import open_url  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.prometheus import (  # noqa: E402
    PrometheusError,
    join_samples,
    parse_duration,
    parse_matrix,
    parse_time,
    query_range_params,
)


def _error_detail(exc):
    """Prometheus' own error message from an HTTP error's JSON body, if there is one."""
    read = getattr(exc, "read", None)
    if not callable(read):
        return ""
    try:
        return str(json.loads(read()).get("error", ""))
    except Exception:  # the body is only a hint; any failure to read it leaves it out
        return ""


def _query(module, base, params, what):
    p = module.params
    headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    if p["bearer_token"]:
        headers["Authorization"] = "Bearer %s" % p["bearer_token"]
    url = base + "/api/v1/query_range"
    try:
        response = open_url(
            url,
            data=urlencode(params),
            method="POST",
            headers=headers,
            validate_certs=p["validate_certs"],
            ca_path=p["ca_path"],
            client_cert=p["client_cert"],
            client_key=p["client_key"],
            timeout=p["timeout"],
        )
        body = response.read()
    except Exception as exc:  # urllib raises HTTPError, URLError, SSL and socket errors
        detail = _error_detail(exc)
        module.fail_json(
            msg="%s: query to %s failed: %s%s. Check url, TLS options (ca_path, validate_certs) and "
            "that Prometheus is reachable from the host running this task"
            % (what, url, exc, (" (" + detail + ")") if detail else ""),
            query=params["query"],
        )
    try:
        return json.loads(body)
    except ValueError:
        module.fail_json(msg="%s: %s did not answer JSON; is url the Prometheus base URL?" % (what, url))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            util_query=dict(type="str", required=True),
            power_query=dict(type="str", required=True),
            node_label=dict(type="str", default="node"),
            end=dict(type="str"),
            window=dict(type="str", default="24h"),
            step=dict(type="str", default="5m"),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            client_cert=dict(type="path"),
            client_key=dict(type="path", no_log=False),
            bearer_token=dict(type="str", no_log=True),
            timeout=dict(type="int", default=30),
        ),
        required_together=[("client_cert", "client_key")],
        supports_check_mode=True,
    )
    p = module.params
    base = p["url"].rstrip("/")
    if not base.startswith(("http://", "https://")):
        module.fail_json(msg="url: %r must start with http:// or https://" % p["url"])
    if base.endswith("/api/v1"):
        module.fail_json(msg="url: give the Prometheus base URL without /api/v1 (got %r)" % p["url"])
    if not p["node_label"]:
        module.fail_json(msg="node_label: must not be empty")
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout: must be a positive number of seconds, got %d" % p["timeout"])
    try:
        step = parse_duration(p["step"], "step")
        window = parse_duration(p["window"], "window")
        end = parse_time(p["end"], "end") if p["end"] else time.time()
        end = (end // step) * step
        start = end - window
        util_params = query_range_params(p["util_query"], start, end, step)
        power_params = query_range_params(p["power_query"], start, end, step)
    except PrometheusError as exc:
        module.fail_json(msg=str(exc))

    try:
        util = parse_matrix(_query(module, base, util_params, "util_query"), p["node_label"], "util_query")
        power = parse_matrix(_query(module, base, power_params, "power_query"), p["node_label"], "power_query")
    except PrometheusError as exc:
        module.fail_json(msg=str(exc))
    samples, dropped = join_samples(util, power)
    module.exit_json(
        changed=False,
        samples=samples,
        nodes=sorted(n for n, s in samples.items() if s),
        dropped=dropped,
        window={"start": start, "end": end, "step": step},
    )


if __name__ == "__main__":
    main()
