"""The kubelet's word on the health of the devices allocated to a pod (KEP-4680).

`status.containerStatuses[].allocatedResourcesStatus` (Kubernetes 1.31+, feature gate
ResourceHealthStatus) lists, per resource a container was given, each device's `resourceID` and
`health`: `Healthy`, `Unhealthy` or `Unknown`. The resource is an extended resource
(`nvidia.com/gpu`, resourceID the device plugin's device ID, a GPU UUID) or a DRA claim
(`claim:<claim>/<request>`, resourceID `<driver>/<pool>/<device>`). Layer 5 reads `Unhealthy` as a
device marked unhealthy, on device-plugin and DRA pods alike; `Unknown` is evidence only.
"""

from __future__ import annotations

import msgspec

from layers.facts import objects as o
from layers.sources import K8sObject

FIELD = "allocatedResourcesStatus"


class DeviceHealth(msgspec.Struct, frozen=True):
    pod: tuple[str, str]
    container: str
    resource: str  # nvidia.com/gpu, or claim:<claim>/<request>
    resource_id: str  # a GPU UUID (device plugin), or <driver>/<pool>/<device> (DRA)
    health: str  # Healthy, Unhealthy, Unknown

    @property
    def line(self) -> str:
        ns, name = self.pod
        return (
            f"{ns}/{name} container {self.container}: {FIELD} {self.resource} "
            f"resourceID {self.resource_id} health={self.health}"
        )


def device_health(pod: K8sObject) -> list[DeviceHealth]:
    """Every device the kubelet reports a health for, in the pod's init, app and ephemeral containers."""
    ref = (o.namespace(pod) or "default", o.name(pod))
    status = pod.get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for s in status.get(key) or []:
            for entry in s.get(FIELD) or []:
                for r in (entry or {}).get("resources") or []:
                    rid = str((r or {}).get("resourceID") or "")
                    if rid:
                        out.append(
                            DeviceHealth(
                                ref,
                                str(s.get("name", "?")),
                                str(entry.get("name", "?")),
                                rid,
                                str(r.get("health") or "Unknown"),
                            )
                        )
    return out


def is_gpu(h: DeviceHealth) -> bool:
    """A GPU resource (nvidia.com/*) or a DRA claim (its device's driver is in the resourceID)."""
    return h.resource.startswith(("nvidia.com/", "claim:"))
