# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.power_model, power_model_fits, power_model_promql, power_model_annotations and
power_model_peaks filters; documentation in the .yml file of each beside this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.placement.power_model import (
    DEFAULT_KIND,
    PowerModelError,
    fit_model,
    fit_nodes,
    node_annotation_objects,
    peaks_models_text,
    power_jump_promql,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.quantity import QuantityError


def power_model(samples, kind=DEFAULT_KIND, node=None, knots=None, smoothing=None, robust=True):
    """Fit a node power model to ``[{util, watts}, ...]`` samples (see ``fit_model``)."""
    options = {"robust": robust}
    # Only pass the piecewise options when given, so other kinds reject them by name.
    if knots is not None:
        options["knots"] = knots
    if smoothing is not None:
        options["smoothing"] = smoothing
    try:
        return fit_model(samples, kind=kind, node=node, **options)
    except PowerModelError as err:
        raise AnsibleFilterError(str(err)) from err


def power_model_fits(samples_by_node, nodes=None, kind=DEFAULT_KIND, min_samples=30, min_util_span=20.0,
                     max_rmse_percent=10.0):  # fmt: skip
    """Fit and judge every node's model (see ``fit_nodes``): ``{node: {status, model, quality, ...}}``."""
    try:
        return fit_nodes(samples_by_node, nodes, kind, min_samples, min_util_span, max_rmse_percent)
    except PowerModelError as err:
        raise AnsibleFilterError(str(err)) from err


def power_model_promql(model, util_series, reference_cpu, capacity_cpu, node=None):
    """PromQL terms of the power jump of a reference pod (see ``power_jump_promql``)."""
    try:
        return power_jump_promql(model, util_series, reference_cpu, capacity_cpu, node=node)
    except (PowerModelError, QuantityError) as err:
        raise AnsibleFilterError(str(err)) from err


def power_model_annotations(results, prefix):
    """The Node objects that publish ``power_model_fits`` results (see ``node_annotation_objects``)."""
    try:
        return node_annotation_objects(results, prefix)
    except PowerModelError as err:
        raise AnsibleFilterError(str(err)) from err


def power_model_peaks(results):
    """The Peaks scheduler plugin's model file of ``power_model_fits`` results (see ``peaks_models_text``)."""
    try:
        return peaks_models_text(results)
    except PowerModelError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    """Power model fitting, judging and publishing."""

    def filters(self):
        return {
            "power_model": power_model,
            "power_model_fits": power_model_fits,
            "power_model_promql": power_model_promql,
            "power_model_annotations": power_model_annotations,
            "power_model_peaks": power_model_peaks,
        }
