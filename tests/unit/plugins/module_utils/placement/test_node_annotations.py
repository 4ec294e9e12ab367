"""The Node objects the power_models role applies in one run (``node_annotation_objects`` and the
``power_model_annotations`` filter): what each node of the cluster gets, byte for byte as the
annotations were written before (Ansible's ``to_json(sort_keys=true)``), and what nodes get none."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import to_json
from ansible_collections.poweraware.k8s.plugins.filter.power_model import FilterModule
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    PowerModelError,
    fit_nodes,
    node_annotation_objects,
)

PREFIX = "power.poweraware.io"


def _curve(base, slope):
    return [{"util": float(u), "watts": base + slope * u} for u in range(0, 101, 2)]


def test_every_node_of_the_cluster_gets_one_object_sorted_ok_ones_annotated():
    results = fit_nodes(
        {"w2": _curve(90.0, 1.5), "w1": _curve(95.0, 1.2), "gone": _curve(80.0, 1.0), "few": _curve(80.0, 1.0)[:3]},
        nodes=["w1", "w2", "few", "idle"],
    )
    objects = node_annotation_objects(results, PREFIX)
    assert [o["metadata"]["name"] for o in objects] == ["few", "idle", "w1", "w2"]  # "gone" is not in the cluster
    assert all(o["apiVersion"] == "v1" and o["kind"] == "Node" for o in objects)
    by_name = {o["metadata"]["name"]: o["metadata"] for o in objects}
    assert "annotations" not in by_name["few"] and "annotations" not in by_name["idle"]
    for node in ("w1", "w2"):
        annotations = by_name[node]["annotations"]
        assert set(annotations) == {f"{PREFIX}/power-model", f"{PREFIX}/power-model-quality"}
        # the same bytes the role's earlier per-node task wrote: a re-run after an upgrade changes nothing
        assert annotations[f"{PREFIX}/power-model"] == to_json(results[node]["model"], sort_keys=True)
        assert annotations[f"{PREFIX}/power-model-quality"] == to_json(results[node]["quality"], sort_keys=True)
        assert json.loads(annotations[f"{PREFIX}/power-model"]) == results[node]["model"]


def test_no_results_no_objects_and_a_non_mapping_is_refused():
    assert node_annotation_objects({}, PREFIX) == []
    with pytest.raises(PowerModelError, match="must be a mapping of node to result, got list"):
        node_annotation_objects([], PREFIX)
    with pytest.raises(AnsibleFilterError, match="got str"):
        FilterModule().filters()["power_model_annotations"]("w1", PREFIX)


def test_the_filter_returns_the_same_objects():
    results = fit_nodes({"w1": _curve(95.0, 1.2)}, nodes=["w1"])
    assert FilterModule().filters()["power_model_annotations"](results, PREFIX) == node_annotation_objects(
        results, PREFIX
    )
