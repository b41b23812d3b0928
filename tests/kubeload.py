"""Load a scenario's objects into a real API server as the cluster would have written them, and take
them out again.

Objects are created as they are (the server validates and defaults them); what a kubelet or a
controller writes, status, goes through the status subresource afterwards, as they would. Custom
resources (the GPU Operator's, the DRA driver's, Kueue's) get a minimal CustomResourceDefinition
each (any fields kept): their schemas are their projects', not what these tests check.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec.structs

from bot.sources.scenario import Scenario
from tests.kubecp import ApiError, ControlPlane, Rest

# Kinds no Kubernetes serves: (group, kind) -> (plural, namespaced).
CUSTOM = {
    ("nvidia.com", "ClusterPolicy"): ("clusterpolicies", False),
    ("nvidia.com", "NVIDIADriver"): ("nvidiadrivers", False),
    ("nvidia.com", "GPUCluster"): ("gpuclusters", False),
    ("resource.nvidia.com", "ComputeDomain"): ("computedomains", True),
    ("kueue.x-k8s.io", "Workload"): ("workloads", True),
}
CUSTOM_VERSIONS = {
    ("nvidia.com", "ClusterPolicy"): ["v1"],
    ("nvidia.com", "NVIDIADriver"): ["v1alpha1"],
    ("nvidia.com", "GPUCluster"): ["v1alpha1"],
    ("resource.nvidia.com", "ComputeDomain"): ["v1beta1"],
    ("kueue.x-k8s.io", "Workload"): ["v1beta1"],
}
# Creation order: what others refer to first.
ORDER = [
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "DeviceClass",
    "RuntimeClass",
    "PersistentVolume",
    "Node",
    "ResourceSlice",
    "DeviceTaintRule",
    "ConfigMap",
    "PersistentVolumeClaim",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "*",  # custom resources: a ComputeDomain before the pods labelled with its uid
    "DaemonSet",
    "Pod",
    "Event",
]
# Kinds whose status a controller or kubelet writes through /status (create ignores it).
STATUS_KINDS = frozenset(
    {"Node", "Pod", "ResourceClaim", "PersistentVolume", "PersistentVolumeClaim", "DaemonSet"}
)
# What the server sets itself; finalizers are the controllers' (none runs here to remove them, and
# gpubot reads none).
SERVER_OWNED = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "finalizers",
)


class Rejected(AssertionError):
    """The server refused an object of the scenario: the scenario is wrong, not the server."""


def custom_resource_definition(group: str, kind: str) -> dict[str, Any]:
    plural, namespaced = CUSTOM[(group, kind)]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
                for i, v in enumerate(CUSTOM_VERSIONS[(group, kind)])
            ],
        },
    }


@dataclass
class Kinds:
    """kind per apiVersion -> (plural, namespaced), from the server's discovery."""

    table: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    @classmethod
    def discover(cls, rest: Rest) -> Kinds:
        out = cls()
        versions = ["/api/v1"]
        for g in rest.get("/apis")["groups"]:
            versions += [f"/apis/{v['groupVersion']}" for v in g["versions"]]
        for path in versions:
            for r in rest.get(path)["resources"]:
                if "/" not in r["name"]:
                    out.table[(path.removeprefix("/api/").removeprefix("/apis/"), r["kind"])] = (
                        r["name"],
                        r["namespaced"],
                    )
        return out

    def path(self, obj: dict[str, Any], name: bool = True) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        try:
            plural, namespaced = self.table[(api_version, kind)]
        except KeyError:
            raise Rejected(f"{api_version} {kind}: the server serves no such kind") from None
        meta = obj.get("metadata") or {}
        root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            root += f"/namespaces/{meta.get('namespace') or 'default'}"
        root += f"/{plural}"
        return f"{root}/{meta['name']}" if name else root


def install_custom_resources(rest: Rest) -> Kinds:
    for group, kind in CUSTOM:
        crd = custom_resource_definition(group, kind)
        try:
            rest.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        except ApiError as e:
            if e.code != 409:
                raise
    deadline = time.monotonic() + 30
    while True:
        kinds = Kinds.discover(rest)
        if all((f"{g}/{CUSTOM_VERSIONS[(g, k)][0]}", k) in kinds.table for g, k in CUSTOM):
            return kinds
        if time.monotonic() > deadline:
            raise TimeoutError("custom resources not served after 30 s")
        time.sleep(0.2)


@dataclass
class Loaded:
    """What one scenario put in the server: paths to delete, in creation order, and the server's copies."""

    paths: list[str] = field(default_factory=list)
    uids: dict[str, str] = field(default_factory=dict)
    stored: list[dict[str, Any]] = field(default_factory=list)


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(obj)
    meta = body.setdefault("metadata", {})
    for key in SERVER_OWNED:
        meta.pop(key, None)
    return body


def _rank(obj: dict[str, Any]) -> int:
    kind = obj.get("kind", "")
    return ORDER.index(kind if kind in ORDER else "*")


def remap(obj: Any, uids: dict[str, str]) -> Any:
    """`obj` with every scenario uid replaced by the uid the server gave that object (labels and
    owner references name uids; the server picks its own)."""
    if not uids:
        return obj
    text = json.dumps(obj)
    for old, new in uids.items():
        text = text.replace(old, new)
    return json.loads(text)


def as_loaded(scenario: Scenario, loaded: Loaded) -> Scenario:
    """The scenario as the server holds it: the same objects, with the server's uids."""
    return msgspec.structs.replace(scenario, objects=[remap(o, loaded.uids) for o in scenario.objects])


def kubelet_here(node: dict[str, Any], port: int) -> None:
    """Point the API server at the fake kubelet for this node's logs: an ExternalDNS address (the type
    the server is told to prefer) and the kubelet port. Nothing gpubot's layers read."""
    status = node.setdefault("status", {})
    addresses = [a for a in status.get("addresses") or [] if a.get("type") != "ExternalDNS"]
    status["addresses"] = [*addresses, {"type": "ExternalDNS", "address": "127.0.0.1"}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}


def load(cp: ControlPlane, kinds: Kinds, scenario: Scenario) -> Loaded:
    """Every object of `scenario` in the server, or Rejected (and nothing of it left there)."""
    loaded = Loaded()
    try:
        _load(cp, kinds, scenario, loaded)
    except BaseException:
        unload(cp, loaded)
        raise
    return loaded


def _load(cp: ControlPlane, kinds: Kinds, scenario: Scenario, loaded: Loaded) -> None:
    rest = cp.rest
    named = {str(o["metadata"]["name"]) for o in scenario.objects if o.get("kind") == "Namespace"}
    namespaces = {str((o.get("metadata") or {}).get("namespace") or "") for o in scenario.objects}
    for ns in sorted(namespaces - named - {""}):
        try:
            rest.post(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        except ApiError as e:
            if e.code != 409:
                raise Rejected(f"{scenario.path}: namespace {ns}: {e}") from e
    runtime_classes = {o["metadata"]["name"] for o in scenario.objects if o.get("kind") == "RuntimeClass"}
    gone: list[str] = []
    for obj in sorted(scenario.objects, key=_rank):
        body = _clean(remap(obj, loaded.uids))
        wanted = (body.get("spec") or {}).get("runtimeClassName") if body.get("kind") == "Pod" else None
        if wanted and wanted not in runtime_classes:
            # The pod runs under a RuntimeClass deleted since (admission refuses a pod naming a missing one):
            # create it, then delete it once the pods exist, as happened in the cluster.
            rc = {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": wanted},
                "handler": wanted,
            }
            rest.post("/apis/node.k8s.io/v1/runtimeclasses", rc)
            runtime_classes.add(wanted)
            loaded.paths.insert(0, f"/apis/node.k8s.io/v1/runtimeclasses/{wanted}")
            gone.append(f"/apis/node.k8s.io/v1/runtimeclasses/{wanted}")
        what = f"{scenario.path}: {body.get('kind')} {(body.get('metadata') or {}).get('name')}"
        if body.get("kind") == "Node":
            kubelet_here(body, cp.kubelet.port)
        status = body.get("status") if body.get("kind") in STATUS_KINDS else None
        try:
            path = kinds.path(body)
            created = rest.post(kinds.path(body, name=False), body)
        except (ApiError, Rejected) as e:
            raise Rejected(f"{what}: {e}") from e
        loaded.paths.append(path)
        old_uid = (obj.get("metadata") or {}).get("uid")
        if old_uid:
            loaded.uids[old_uid] = created["metadata"]["uid"]
        if status:
            created["status"] = remap(status, loaded.uids)  # a pod's status may name its own uid
            try:
                created = rest.put(f"{path}/status", created)
            except ApiError as e:
                raise Rejected(f"{what} status: {e}") from e
        managed = (obj.get("metadata") or {}).get("managedFields")
        if body.get("kind") == "Node":
            # Who wrote what (cordoned it) is the server's record: set it as the scenario has it, or
            # empty (an unknown client), as a PATCH naming managedFields does; the loader's own
            # entry would otherwise own every field.
            try:
                created = rest.patch(path, {"metadata": {"managedFields": managed or [{}]}})
            except ApiError as e:
                raise Rejected(f"{what} managedFields: {e}") from e
        loaded.stored.append(created)
    for path in gone:
        rest.delete(path)


def unload(cp: ControlPlane, loaded: Loaded) -> None:
    for path in reversed(loaded.paths):
        left = cp.rest.delete(path)
        if isinstance(left, dict) and (left.get("metadata") or {}).get("finalizers"):
            # Added by admission (PV/PVC protection) for a controller this tier does not run.
            cp.rest.patch(path, {"metadata": {"finalizers": None}})
