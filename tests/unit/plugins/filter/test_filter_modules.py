"""Every FilterModule registers exactly its names (plugins/filter/*.py).

Each filter is a thin wrapper: it checks its input with its own message, turns Ansible's values into
what the library takes (None into [] or {}, tuples into lists, numbers into text) and passes every
argument on, then turns the library's errors into AnsibleFilterError. Each filter's own test file
(test_<filter>_filter.py) checks that with a stand-in library function that records its call
(``stub``, conftest.py); the library itself has its own tests.
"""

from __future__ import annotations

import ansible_collections.poweraware.k8s.plugins.filter.api_server_peers as f_peers
import ansible_collections.poweraware.k8s.plugins.filter.certificate_lifetime_errors as f_lifetime
import ansible_collections.poweraware.k8s.plugins.filter.certificate_renewal_due as f_renewal
import ansible_collections.poweraware.k8s.plugins.filter.coexistence as f_coex
import ansible_collections.poweraware.k8s.plugins.filter.control_plane_label as f_cpl
import ansible_collections.poweraware.k8s.plugins.filter.cpu_power_plan as f_cpu
import ansible_collections.poweraware.k8s.plugins.filter.descheduler_plan as f_desched
import ansible_collections.poweraware.k8s.plugins.filter.image_reference as f_image
import ansible_collections.poweraware.k8s.plugins.filter.node_tolerations as f_tol
import ansible_collections.poweraware.k8s.plugins.filter.peaks_plan as f_peaks
import ansible_collections.poweraware.k8s.plugins.filter.pod_power_objects as f_pod_power
import ansible_collections.poweraware.k8s.plugins.filter.pod_security_labels as f_psa
import ansible_collections.poweraware.k8s.plugins.filter.power_extender_errors as f_ext
import ansible_collections.poweraware.k8s.plugins.filter.power_model as f_model
import ansible_collections.poweraware.k8s.plugins.filter.power_score as f_score
import ansible_collections.poweraware.k8s.plugins.filter.prometheus_service_url as f_prom
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_errors as f_tas_errors
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labeling as f_tas_labeling
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_labels as f_tas_labels
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_node_permissions as f_tas_permissions
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_normalized as f_tas_norm
import ansible_collections.poweraware.k8s.plugins.filter.tas_policy_objects as f_tas_objects
import pytest


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            f_peers,
            {
                "api_server_peers": "api_server_peers",
                "network_policy_control_plane_errors": "network_policy_control_plane_errors",
            },
        ),
        (f_lifetime, {"certificate_lifetime_errors": "certificate_lifetime_errors"}),
        (f_renewal, {"certificate_renewal_due": "certificate_renewal_due"}),
        (
            f_coex,
            {
                "coexistence": "coexistence",
                "scheduler_config_path": "scheduler_config_path_filter",
                "scheduler_extender_coexistence": "scheduler_extender_coexistence",
                "removal_plan": "removal_plan",
                "namespace_removal_plan": "namespace_removal_plan",
            },
        ),
        (f_cpl, {"control_plane_label": "control_plane_label"}),
        (f_cpu, {"cpu_power_plan": "cpu_power_plan"}),
        (f_desched, {"descheduler_plan": "descheduler_plan"}),
        (f_image, {"image_reference": "image_reference", "image_pull_secrets": "image_pull_secrets"}),
        (f_tol, {"node_tolerations": "node_tolerations"}),
        (f_peaks, {"peaks_plan": "peaks_plan"}),
        (
            f_pod_power,
            {
                "pod_power_objects": "pod_power_objects",
                "pod_power_removal": "pod_power_removal",
                "pod_power_agent_config": "pod_power_agent_config",
                "pod_power_tokens": "pod_power_tokens",
            },
        ),
        (f_psa, {"pod_security_labels": "pod_security_labels"}),
        (f_ext, {"power_extender_errors": "power_extender_errors"}),
        (
            f_model,
            {
                "power_model": "power_model",
                "power_model_fits": "power_model_fits",
                "power_model_promql": "power_model_promql",
                "power_model_annotations": "power_model_annotations",
                "power_model_peaks": "power_model_peaks",
            },
        ),
        (f_score, {"power_score": "power_score"}),
        (f_prom, {"prometheus_service_url": "prometheus_service_url"}),
        (f_tas_errors, {"tas_policy_errors": "tas_policy_errors"}),
        (f_tas_labeling, {"tas_policy_node_labeling": "tas_policy_node_labeling"}),
        (f_tas_labels, {"tas_policy_node_labels": "tas_policy_node_labels"}),
        (f_tas_permissions, {"tas_policy_node_permissions": "tas_policy_node_permissions"}),
        (f_tas_norm, {"tas_policy_normalized": "tas_policy_normalized"}),
        (f_tas_objects, {"tas_policy_objects": "tas_policy_objects"}),
    ],
)
def test_each_filter_module_registers_exactly_its_names(module, names):
    assert module.FilterModule().filters() == {name: getattr(module, attr) for name, attr in names.items()}
