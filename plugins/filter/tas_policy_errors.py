# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils._tas_policy import normalize_policy, validate_policy

DOCUMENTATION = r"""
name: tas_policy_errors
short_description: List what is wrong with a Telemetry Aware Scheduling policy before it is applied
author: poweraware.k8s contributors
version_added: 0.1.0
description:
  - Checks a whole C(TASPolicy) object (C(telemetry.intel.com/v1alpha1)) against the rules of the
    upstream CRD's openAPI schema and against what the TAS extender needs to use the policy.
  - Strategy names must be ones TAS implements (C(scheduleonmetric), C(dontschedule),
    C(deschedule), C(labeling)); C(logicalOperator) must be C(allOf) or C(anyOf); every rule
    needs a C(metricname) matching C(^[a-zA-Z0-9_-]+$) and an C(operator) out of C(Equals),
    C(LessThan), C(GreaterThan); C(target) must be an int64; C(scheduleonmetric) takes exactly one
    C(LessThan) or C(GreaterThan) rule; C(labeling) rules carry C(key=value) labels.
  - A C(target) written as a string of a whole number (for example C("70"), which is what
    C(-e name=value) gives) is accepted, because P(poweraware.k8s.tas_policy_normalized#filter)
    turns it into the integer; apply the normalized object. Any other string (C("70%")), a float
    such as C(60.5) or a boolean is refused.
  - Metric names are the names C(custom.metrics.k8s.io) serves. The usual Prometheus Adapter rule
    strips C(node_), so the series C(node_package_power_avg) is the metric C(package_power_avg);
    a name that still has the stripped prefix is reported together with the served name.
  - Returns an empty list for a valid policy, so a play can fail with every problem at once
    before anything reaches the API server.
options:
  _input:
    description: The TASPolicy object (apiVersion, kind, metadata, spec).
    type: dict
    required: true
  known_metrics:
    description:
      - Metric names the metrics adapter serves. When not empty, every C(metricname) must be one of them.
    type: list
    elements: str
    default: []
  stripped_prefix:
    description:
      - The prefix the metrics adapter removes from Prometheus series names. Empty to turn the check off.
    type: str
    default: node_
seealso:
  - plugin: poweraware.k8s.tas_policy_normalized
    plugin_type: filter
  - name: Telemetry Aware Scheduling
    description: Upstream project and TASPolicy CRD.
    link: https://github.com/intel/platform-aware-scheduling/tree/master/telemetry-aware-scheduling
"""

EXAMPLES = r"""
---
- name: Refuse a policy with a bad operator before applying it
  vars:
    policy:
      apiVersion: telemetry.intel.com/v1alpha1
      kind: TASPolicy
      metadata: {name: power-sensitive-scheduling-policy, namespace: default}
      spec:
        strategies:
          dontschedule:
            rules: [{metricname: package_power_avg, operator: GreaterThan, target: 60}]
    problems: "{{ policy | poweraware.k8s.tas_policy_errors(known_metrics=['package_power_avg']) }}"
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
"""

RETURN = r"""
_value:
  description:
    - One message per problem, each naming the field (for example C(spec.strategies.dontschedule.rules[0].operator)).
    - Empty when the policy is valid.
  type: list
  elements: str
"""


def tas_policy_errors(policy, known_metrics=None, stripped_prefix="node_"):
    if known_metrics is not None and (
        isinstance(known_metrics, (str, bytes)) or not all(isinstance(m, str) for m in known_metrics)
    ):
        raise AnsibleFilterError("tas_policy_errors: known_metrics must be a list of metric names")
    if stripped_prefix is not None and not isinstance(stripped_prefix, str):
        raise AnsibleFilterError("tas_policy_errors: stripped_prefix must be a string")
    return validate_policy(normalize_policy(policy), known_metrics=known_metrics, stripped_prefix=stripped_prefix or "")


class FilterModule:
    """TAS policy validation."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_errors": tas_policy_errors}
