"""Whose flow runs on a node, read from its labels (spec/findings.md, "Who else acts on a node").

The ledger names the node's owner and the diagnostics refuse to run while one acts: the
GPU Operator's driver upgrade (state neither empty nor `upgrade-done`), NVSentinel (its state
label present), an operand paused for a driver upgrade or a MIG change, a MIG reconfiguration.
"""

from __future__ import annotations

from dataclasses import dataclass

from layers.facts import objects as o
from layers.sources import K8sObject

DRIVER_UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
NVSENTINEL_STATE = "dgxc.nvidia.com/nvsentinel-state"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
_PAUSED = ("paused-for-driver-upgrade", "paused-for-mig-change")


@dataclass(frozen=True)
class Flow:
    name: str  # "driver-upgrade", "nvsentinel", "operand-paused", "mig-manager"
    state: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "state": self.state}


def running_flow(node: K8sObject) -> Flow | None:
    """The owner whose flow is running on the node now, or None."""
    labels = o.labels(node)
    upgrade = labels.get(DRIVER_UPGRADE_STATE, "")
    if upgrade and upgrade != "upgrade-done":
        return Flow("driver-upgrade", upgrade)
    if NVSENTINEL_STATE in labels:
        return Flow("nvsentinel", labels[NVSENTINEL_STATE] or "present")
    paused = sorted(k for k, v in labels.items() if k.startswith("nvidia.com/gpu.deploy.") and v in _PAUSED)
    if paused:
        return Flow("operand-paused", f"{paused[0]}={labels[paused[0]]}")
    if labels.get(MIG_CONFIG_STATE) in ("pending", "rebooting"):
        return Flow("mig-manager", labels[MIG_CONFIG_STATE])
    return None
