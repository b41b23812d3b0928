"""The REST resources gpubot reads and where they live: paths, RBAC names, API versions.

Used by the live cluster (bot/sources/kube.py); a name becomes one quoted path segment or a
SourceError, never another object's path.
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec

from bot.sources.kube_errors import counted
from layers.sources import SourceError

# The NVIDIADriver CRD has only ever shipped as v1alpha1.
FALLBACK_VERSIONS = {"nvidiadrivers": "v1alpha1"}


class Resource(msgspec.Struct, frozen=True):
    """A REST resource: where it lives and the name RBAC knows it by."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def rbac(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            root += f"/namespaces/{_segment(namespace, 'namespace', self)}"
        root += f"/{self.plural}"
        if name is not None:
            root += f"/{_segment(name, 'name', self)}"
        if sub:
            root += f"/{sub}"
        return root


def query_value(value: str | int | bool) -> str:
    """A query value as the API reads it (booleans lower-case, as the client serializes them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _segment(value: str, what: str, res: Resource) -> str:
    """One path segment; an empty or slashed one would address another object."""
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise counted(
            SourceError("bad_input", f"cannot read {res.rbac}: {what} {value!r} is not a valid object name")
        )
    return quote(value, safe="")


NODES = Resource("", "v1", "nodes", namespaced=False)
PODS = Resource("", "v1", "pods", namespaced=True)
EVENTS = Resource("", "v1", "events", namespaced=True)
DAEMONSETS = Resource("apps", "v1", "daemonsets", namespaced=True)
RUNTIMECLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", namespaced=True)
# A pending pod's volumes: a PersistentVolume's required node affinity (a zonal disk) limits its nodes.
PVCS = Resource("", "v1", "persistentvolumeclaims", namespaced=True)
PVS = Resource("", "v1", "persistentvolumes", namespaced=False)
# Dynamic Resource Allocation (resource.k8s.io), at v1 (Kubernetes 1.34); older clusters serve only the
# betas (1.32/1.33), and DeviceTaintRules came as v1alpha3: DRA_FALLBACK lists what to try next.
DRA_RESOURCES: dict[str, Resource] = {
    "DeviceClass": Resource("resource.k8s.io", "v1", "deviceclasses", namespaced=False),
    "ResourceSlice": Resource("resource.k8s.io", "v1", "resourceslices", namespaced=False),
    "ResourceClaim": Resource("resource.k8s.io", "v1", "resourceclaims", namespaced=True),
    "ResourceClaimTemplate": Resource("resource.k8s.io", "v1", "resourceclaimtemplates", namespaced=True),
    "DeviceTaintRule": Resource("resource.k8s.io", "v1", "devicetaintrules", namespaced=False),
}
DRA_FALLBACK = {"devicetaintrules": ("v1beta2", "v1alpha3")}
DRA_BETAS = ("v1beta2", "v1beta1")
