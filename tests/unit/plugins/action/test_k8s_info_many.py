# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""poweraware.k8s.k8s_info_many: its queries checked whole before the client starts, and each query
run as kubernetes.core.k8s_info runs one (K8sService.find with the same arguments). Against the lab's
real API server it runs in every role that reads before it changes (nfd, tas: test_site.py's converge
and the coexistence tests)."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_queries import normalize_queries
from ansible_collections.poweraware.k8s.plugins.modules import k8s_info_many


def test_defaults_are_k8s_infos():
    queries, problems = normalize_queries(
        {
            "crd": {"kind": "CustomResourceDefinition", "api_version": "apiextensions.k8s.io/v1", "name": "a.b"},
            "svc": {"kind": "Service", "label_selectors": "app=x"},
        }
    )
    assert problems == []
    assert queries == {
        "crd": {
            "kind": "CustomResourceDefinition",
            "api_version": "apiextensions.k8s.io/v1",
            "name": "a.b",
            "namespace": None,
            "label_selectors": [],
            "field_selectors": [],
        },
        "svc": {
            "kind": "Service",
            "api_version": "v1",
            "name": None,
            "namespace": None,
            "label_selectors": ["app=x"],
            "field_selectors": [],
        },
    }


@pytest.mark.parametrize(
    ("queries", "expected"),
    [
        (None, ["queries must be a non-empty mapping of a result name to a query, got None"]),
        ({}, ["queries must be a non-empty mapping"]),
        (
            {"a": "Deployment"},
            [
                "queries.a must be a mapping (kind, api_version, name, namespace, label_selectors, "
                "field_selectors), got 'Deployment'"
            ],
        ),
        # every problem at once, each naming the query and the field
        (
            {
                "a": {"api_version": "v1"},
                "b": {"kind": "Pod", "labels": ["x"]},
                "c": {"kind": 5, "label_selectors": [""]},
            },
            [
                "queries.a.kind is missing; fix: name the kind to read, such as Deployment",
                "queries.b: unknown key(s) labels; fix: use only kind, api_version, name, namespace, "
                "label_selectors, field_selectors",
                "queries.c.kind must be text, got 5",
                "queries.c.label_selectors must be a list of selectors such as app=nfd-master, got ['']",
            ],
        ),
    ],
)
def test_bad_queries_are_refused_whole(queries, expected):
    normal, problems = normalize_queries(queries)
    assert normal == {}
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problem


class FakeService:
    """K8sService.find's contract: {'resources': [...], 'api_found': bool}; records each call."""

    def __init__(self, objects, served=("Deployment", "Service")):
        self.objects, self.served, self.calls = objects, served, []

    def find(self, kind, api_version, name=None, namespace=None, label_selectors=None, field_selectors=None):
        self.calls.append((kind, api_version, name, namespace, label_selectors, field_selectors))
        if kind not in self.served:
            return {"resources": [], "api_found": False}
        found = [o for o in self.objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
        return {"resources": found, "api_found": True}


def test_each_query_is_one_find_with_k8s_infos_arguments():
    svc = FakeService([{"kind": "Deployment", "metadata": {"name": "nfd-master"}}])
    queries, problems = normalize_queries(
        {
            "masters": {"kind": "Deployment", "api_version": "apps/v1", "label_selectors": ["app=nfd-master"]},
            "svc": {"kind": "Service", "namespace": "tas", "name": "tas"},
            "crds": {"kind": "TASPolicy", "api_version": "telemetry.intel.com/v1alpha1"},
        }
    )
    assert problems == []
    resources, api_found = k8s_info_many.run_queries(svc, queries)
    assert resources == {"masters": [{"kind": "Deployment", "metadata": {"name": "nfd-master"}}], "svc": [], "crds": []}
    assert api_found == {"masters": True, "svc": True, "crds": False}
    assert svc.calls == [
        ("Deployment", "apps/v1", None, None, ["app=nfd-master"], []),
        ("Service", "v1", "tas", "tas", [], []),
        ("TASPolicy", "telemetry.intel.com/v1alpha1", None, None, [], []),
    ]


def test_the_module_takes_k8s_infos_connection_options():
    spec = k8s_info_many.argspec()
    assert {"kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert"} <= set(spec)
    assert spec["queries"] == {"type": "dict", "required": True}
