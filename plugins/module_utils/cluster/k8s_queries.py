# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The queries of ``poweraware.k8s.k8s_info_many``: checked whole before the client starts.

Pure: no Ansible, no Kubernetes client. A query is what one ``kubernetes.core.k8s_info`` task takes
to find objects (kind, api_version, name, namespace, label_selectors, field_selectors); the module
runs them all in one module run, so a role's reads cost one Python start and one Kubernetes client
on the host instead of one per object kind (docs/site.md, "Run time and cost by cluster size").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# a query's keys, kubernetes.core.k8s_info's names: text values, then lists of selectors
TEXT = ("kind", "api_version", "name", "namespace")
LISTS = ("label_selectors", "field_selectors")
KEYS = TEXT + LISTS


def _is_text(value):
    return isinstance(value, str)


def normalize_queries(queries):
    """``(queries, problems)``: each query with every key (api_version ``v1``, lists empty, name and
    namespace None), or every problem found, each naming the query, the field, the value and the fix."""
    if not isinstance(queries, dict) or not queries:
        return {}, [
            f"queries must be a non-empty mapping of a result name to a query, got {queries!r}; fix: for example "
            "queries: {crds: {api_version: apiextensions.k8s.io/v1, kind: CustomResourceDefinition}}"
        ]
    problems, out = [], {}
    for key, query in queries.items():
        where = f"queries.{key}"
        if not _is_text(key) or not key:
            problems.append(f"queries: the result name {key!r} is not text; fix: name each query with a word")
            continue
        if not isinstance(query, dict):
            problems.append(
                f"{where} must be a mapping (kind, api_version, name, namespace, label_selectors, field_selectors), "
                f"got {query!r}"
            )
            continue
        unknown = sorted(str(k) for k in query if k not in KEYS)
        if unknown:
            problems.append(
                f"{where}: unknown key(s) {', '.join(unknown)}; fix: use only {', '.join(KEYS)} "
                "(kubernetes.core.k8s_info's names)"
            )
        normal = {"api_version": "v1", "name": None, "namespace": None, "label_selectors": [], "field_selectors": []}
        for field in TEXT:
            value = query.get(field)
            if value is None or value == "":
                if field == "kind":
                    problems.append(f"{where}.kind is missing; fix: name the kind to read, such as Deployment")
                continue
            if not _is_text(value):
                problems.append(f"{where}.{field} must be text, got {value!r}")
                continue
            normal[field] = value
        for field in LISTS:
            value = query.get(field)
            if value is None:
                continue
            if _is_text(value):
                value = [value]  # as k8s_info's list options take one item
            if not isinstance(value, list) or not all(_is_text(v) and v for v in value):
                problems.append(f"{where}.{field} must be a list of selectors such as app=nfd-master, got {value!r}")
                continue
            normal[field] = list(value)
        out[key] = normal
    return (out, []) if not problems else ({}, problems)
