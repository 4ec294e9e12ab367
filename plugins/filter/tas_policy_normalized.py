# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.poweraware.k8s.plugins.module_utils._tas_policy import normalize_policy

DOCUMENTATION = r"""
name: tas_policy_normalized
short_description: Turn whole-number strings in a Telemetry Aware Scheduling policy into integers
author: poweraware.k8s contributors
version_added: 0.1.0
description:
  - Returns a copy of a C(TASPolicy) object in which every rule C(target) written as a string of a
    whole number (for example C("70"), which is what C(-e name=value) gives) is an integer, as the
    CRD declares C(target) an int64.
  - Everything else is returned unchanged, including targets that are not whole numbers (C("70%"),
    C(60.5)): P(poweraware.k8s.tas_policy_errors#filter) reports those with the field named.
  - The input is not modified.
options:
  _input:
    description: The TASPolicy object (apiVersion, kind, metadata, spec).
    type: dict
    required: true
seealso:
  - plugin: poweraware.k8s.tas_policy_errors
    plugin_type: filter
"""

EXAMPLES = r"""
---
- name: Build a policy from a value given with -e, normalized before it is validated and applied
  vars:
    policy:
      apiVersion: telemetry.intel.com/v1alpha1
      kind: TASPolicy
      metadata: {name: power-sensitive-scheduling-policy, namespace: default}
      spec:
        strategies:
          dontschedule:
            rules: [{metricname: package_power_avg, operator: GreaterThan, target: "{{ max_percent }}"}]
  ansible.builtin.set_fact:
    tas_policy: "{{ policy | poweraware.k8s.tas_policy_normalized }}"
"""

RETURN = r"""
_value:
  description: The policy, with whole-number string targets converted to integers.
  type: dict
"""


def tas_policy_normalized(policy):
    return normalize_policy(policy)


class FilterModule:
    """TAS policy normalization."""

    def filters(self) -> dict[str, Callable]:
        return {"tas_policy_normalized": tas_policy_normalized}
