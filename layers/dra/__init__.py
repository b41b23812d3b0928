"""Dynamic Resource Allocation rules (spec/findings.md, "Dynamic Resource Allocation (DRA)"), one
module per question a walk asks of a DRA cluster:

- `pods.py` (layer 1): a pod that uses DRA GPUs is judged by the DRA table — its claims, their
  DeviceClasses, and (`devices.py`) what the published inventory says about them: no devices,
  tainted devices, selectors no device satisfies (CEL evaluated for real), devices other claims hold;
- `computedomain.py` (layer 2): the ComputeDomain a claim's IMEX channel belongs to;
- `devicehealth.py` (layer 5): the driver's device taints and its kubelet plugin's health events.

The facts come from layers/facts/dra.py (claims), layers/facts/draslices.py (the inventory) and
layers/facts/drareads.py (the walk's reads). Here: what every rule shares.
"""

from __future__ import annotations

from layers.facts.deployments import DRA_SELECTOR
from layers.facts.draslices import DRIVER
from layers.findings import Finding, unknown
from layers.sources import SourceError

DAY_S = 24 * 3600
SLICES_CMD = f"kubectl get resourceslices --field-selector spec.driver={DRIVER} -o wide"
DRIVER_PODS_CMD = f"kubectl get pods -A -o wide -l '{DRA_SELECTOR}'"


def slice_cmd(node: str) -> str:
    return f"kubectl get resourceslices --field-selector spec.driver={DRIVER},spec.nodeName={node} -o yaml"


def cannot(layer: int, what: str, err: SourceError) -> Finding:
    return unknown(layer, f"could not read {what}: {err}")
