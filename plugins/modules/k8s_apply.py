#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the action plugin plugins/action/k8s_apply.py runs the kubernetes.core.k8s module.

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply
short_description: kubernetes.core.k8s with a check mode that works on a cluster that has never seen the run
version_added: 0.1.0
description:
  - Applies Kubernetes objects with the M(kubernetes.core.k8s) module and takes all of its options (only
    the ones the collection's roles use are listed here). Outside check mode the module runs as
    M(kubernetes.core.k8s) runs it; this action does what kubernetes.core's does first. It renders O(template)
    on the controller, and when the module runs on the controller (a local connection) it finds O(kubeconfig)
    and C(src) there (a relative path in the role's or the playbook's C(files/), a vault-encrypted file
    decrypted); on a remote host the module reads them there, as given.
  - In check mode M(kubernetes.core.k8s) asks the API server for a server-side dry run, which cannot see
    what the run has not created. An object in a namespace that an earlier task of this run would create,
    or of a kind whose CustomResourceDefinition an earlier task (or the same task) would install, is then
    reported as a predicted creation, C(changed) with the whole object as its diff and a line saying it
    was predicted, not dry-run, and why. Any other refusal stays an error, naming the object and what the
    run lacks (a namespace or CRD that nothing in the run creates).
  - The namespaces and CRDs a check-mode run applies are kept in the host fact C(_poweraware_dry_run_creates)
    for the later tasks and plays of the same run; a value left by another run (a fact cache) is ignored.
  - Module defaults (such as O(kubeconfig)) for C(group/poweraware.k8s.k8s) apply, as ansible-core applies a
    group's. That group holds this action, M(poweraware.k8s.k8s_info_many) and every module of kubernetes.core's
    C(k8s) group, so one entry serves a play that uses both collections. Those for C(group/kubernetes.core.k8s)
    (or the legacy C(group/k8s)) and for C(kubernetes.core.k8s) apply too, as they do to M(kubernetes.core.k8s).
  - A long O(wait) reports its progress every 20 seconds instead of waiting silently (see O(wait)).
author:
  - poweraware.k8s contributors (@poweraware)
options:
  state:
    description: As in M(kubernetes.core.k8s). Predictions are made only for V(present).
    type: str
    default: present
    choices: [absent, present, patched]
  apply:
    description: As in M(kubernetes.core.k8s).
    type: bool
    default: false
  server_side_apply:
    description: As in M(kubernetes.core.k8s) (the collection's roles use field manager C(poweraware)).
    type: dict
  template:
    description: As in M(kubernetes.core.k8s); rendered on the controller. Templates that render no object apply
      nothing (C(changed=false)).
    type: raw
  definition:
    description: As in M(kubernetes.core.k8s).
    type: raw
  namespace:
    description: As in M(kubernetes.core.k8s); the namespace of definitions that name none.
    type: str
  continue_on_error:
    description: As in M(kubernetes.core.k8s). In check mode the action always continues past single objects
      to find every prediction; without this option it still fails when an object has an error.
    type: bool
    default: false
  wait:
    description:
      - As in M(kubernetes.core.k8s). A dry run applies nothing, so it never waits.
      - The wait runs in steps of 20 seconds. After each step that ends with an object not ready, the action
        prints what it waits for, for how long and the object's current status (replicas, conditions), and
        applies the objects from the first one not ready onwards again (no change) for the next step. A
        wait that runs out fails naming the object, the condition, the time and the last status.
      - C(changed) and the diff of each object are kept across the steps.
    type: bool
    default: false
  wait_condition:
    description: As in M(kubernetes.core.k8s).
    type: dict
  wait_timeout:
    description:
      - As in M(kubernetes.core.k8s), except that with O(wait) it bounds the whole task's wait (all its
        objects together), not each object's.
    type: int
    default: 120
  kubeconfig:
    description: As in M(kubernetes.core.k8s); usually from C(module_defaults) for C(group/kubernetes.core.k8s) or
      C(group/poweraware.k8s.k8s).
    type: raw
extends_documentation_fragment:
  - poweraware.k8s.attributes
  - poweraware.k8s.attributes.facts
attributes:
  check_mode:
    support: full
    details: Server-side dry run; objects whose namespace or CRD this run would create are predicted and say so.
  diff_mode:
    support: full
    details: Each object's diff; a predicted object's diff is the whole object against nothing.
  idempotent:
    support: full
  facts:
    support: full
    details: In check mode only, C(_poweraware_dry_run_creates) (the namespaces and CRDs this run applies).
requirements:
  - the kubernetes.core collection, >= 6.2.0 and < 7.0.0 (the versions tested; a dependency in galaxy.yml)
seealso:
  - module: kubernetes.core.k8s
notes:
  - Runs where the play's host has the C(kubernetes) Python client (role C(poweraware.k8s._common), C(k8s_client.yml)).
"""

EXAMPLES = r"""
- name: Apply a namespace and what lives in it (a dry run on a new cluster predicts the second)
  poweraware.k8s.k8s_apply:
    apply: true
    server_side_apply:
      field_manager: poweraware
    definition:
      - {apiVersion: v1, kind: Namespace, metadata: {name: telemetry}}
      - {apiVersion: v1, kind: ServiceAccount, metadata: {name: collectd, namespace: telemetry}}
"""

RETURN = r"""
result:
  description: As in M(kubernetes.core.k8s); a predicted object's entry is the object as it would be created.
  returned: success
  type: dict
predicted:
  description: One line per object that was predicted instead of dry-run, with the reason.
  returned: in check mode, when an object was predicted
  type: list
  elements: str
  sample:
    - "ServiceAccount t/c: would create (predicted, not dry-run: namespace t is created by this run)"
diff:
  description: The object's diff, or a list of them when the task applies several objects.
  returned: in diff mode
  type: raw
"""
