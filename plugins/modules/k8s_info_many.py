#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_info_many
short_description: Several kubernetes.core.k8s_info queries in one module run
version_added: 0.1.0
description:
  - Runs every query of O(queries) as M(kubernetes.core.k8s_info) runs one (the same client, the same
    discovery cache, the same objects found) in one module run, and returns each query's objects under
    its name.
  - One module run costs a Python start and a Kubernetes client start on the host (about a second on a
    small control-plane node); a role that looks for several kinds of objects before it changes anything
    (another installer's CRDs, Deployments and Services) pays that once instead of once per kind.
  - The connection options and the play's C(module_defaults) for C(group/kubernetes.core.k8s) (such as
    O(kubeconfig)) are those of M(kubernetes.core.k8s_info); those for C(group/poweraware.k8s.k8s) apply too.
  - Every query is checked before the client starts; all problems are reported at once and nothing is read.
author:
  - poweraware.k8s contributors (@poweraware)
options:
  queries:
    description:
      - The queries, each under the name its objects are returned with.
      - Each takes M(kubernetes.core.k8s_info)'s C(kind) (required), C(api_version) (default C(v1)), C(name),
        C(namespace), C(label_selectors) and C(field_selectors).
      - Without C(name) every object of the kind is listed, in C(namespace) or in every namespace.
    type: dict
    required: true
requirements:
  - kubernetes >= 24.2.0 (on the host, as for M(kubernetes.core.k8s_info))
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - poweraware.k8s.attributes
  - poweraware.k8s.attributes.info_module
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Look for another installer's NFD (CRDs and nfd-master) in one module run
  poweraware.k8s.k8s_info_many:
    queries:
      crd_rules:
        api_version: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        name: nodefeaturerules.nfd.k8s-sigs.io
      masters:
        api_version: apps/v1
        kind: Deployment
        label_selectors:
          - app.kubernetes.io/name=node-feature-discovery
  register: found

- name: Every object found, whatever the query
  ansible.builtin.debug:
    msg: "{{ found.resources.values() | flatten | map(attribute='metadata.name') }}"
"""

RETURN = r"""
resources:
  description: Each query's objects under its name (an empty list when none exists, or when its kind is not served).
  returned: success
  type: dict
  sample:
    {masters: [{apiVersion: apps/v1, kind: Deployment, metadata: {name: nfd-master, namespace: nfd}}], crd_rules: []}
api_found:
  description:
    Each query's name and whether the API server serves its kind (C(api_found) of M(kubernetes.core.k8s_info)).
  returned: success
  type: dict
  sample: {masters: true, crd_rules: true}
"""

import copy  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_queries import normalize_queries  # noqa: E402

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService
except ImportError:  # pragma: no cover - the action names the missing collection first
    AUTH_ARG_SPEC, AnsibleK8SModule = {}, None


def argspec():
    args = copy.deepcopy(AUTH_ARG_SPEC)
    args["queries"] = {"type": "dict", "required": True}
    return args


def run_queries(svc, queries):
    """``(resources, api_found)`` by query name: kubernetes.core.k8s_info's find for each query."""
    resources, api_found = {}, {}
    for key, query in queries.items():
        found = svc.find(
            query["kind"],
            query["api_version"],
            name=query["name"],
            namespace=query["namespace"],
            label_selectors=query["label_selectors"],
            field_selectors=query["field_selectors"],
        )
        resources[key], api_found[key] = found["resources"], found["api_found"]
    return resources, api_found


def main():
    if AnsibleK8SModule is None:  # pragma: no cover
        AnsibleModule(
            argument_spec={"queries": {"type": "dict", "required": True}}, supports_check_mode=True
        ).fail_json(
            msg="k8s_info_many needs the kubernetes.core collection next to this one: install the ansible package"
        )
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    queries, problems = normalize_queries(module.params["queries"])
    if problems:
        module.fail_json(msg="invalid queries, nothing was read: " + "; ".join(problems))
    try:
        svc = K8sService(get_api_client(module), module)
        resources, api_found = run_queries(svc, queries)
    except CoreException as exc:
        module.fail_from_exception(exc)
    module.exit_json(changed=False, resources=resources, api_found=api_found)


if __name__ == "__main__":
    main()
