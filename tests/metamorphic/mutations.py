"""Every mutation of the metamorphic suite, by name (tests/metamorphic/mutations_base.py: order, names,
namespace, time; fleet.py: nodes and pools added; controls.py: the positive controls)."""

from __future__ import annotations

from collections.abc import Callable

from tests.metamorphic.controls import xid79_on_target_node, xid79_taint_on_target_dra_device
from tests.metamorphic.fleet import cpu_workloads, healthy_pool_other_driver, sick_nodes_elsewhere
from tests.metamorphic.mutations_base import (
    Scenario,
    exporter_hostname_lowercase,
    node_names_cloud_style,
    operator_other_namespace,
    reorder_objects,
    reorder_series,
    timestamps_weeks_earlier,
)

INVARIANT: dict[str, Callable[[Scenario], Scenario]] = {
    "reorder_objects": reorder_objects,
    "reorder_series": reorder_series,
    "node_names_cloud_style": node_names_cloud_style,
    "exporter_hostname_lowercase": exporter_hostname_lowercase,
    "operator_other_namespace": operator_other_namespace,
    "timestamps_weeks_earlier": timestamps_weeks_earlier,
    "cpu_workloads": cpu_workloads,
    "healthy_pool_other_driver": healthy_pool_other_driver,
    "sick_nodes_elsewhere": sick_nodes_elsewhere,
}


CONTROLS: dict[str, Callable[[Scenario], Scenario | None]] = {
    "xid79_on_target_node": xid79_on_target_node,
    "xid79_taint_on_target_dra_device": xid79_taint_on_target_dra_device,
}
