"""Suite 5 of issue 29: writes as the real server records them. gpubot's cordon PATCH leaves field
manager `gpubot` owning spec.unschedulable in managedFields, and the walk's "who cordoned it" reads
that record from the real server, not a fake's imitation of it."""

from __future__ import annotations

from typing import Any

from bot.actions.cordon import cordon, uncordon
from bot.sources.kube import KubeCluster
from tests.bundle_scenario import node
from tests.kubecp import ControlPlane

NOW = 1_795_953_600.0


def owners_of_unschedulable(obj: dict[str, Any]) -> list[str]:
    return [
        e["manager"]
        for e in obj["metadata"].get("managedFields") or []
        if "f:unschedulable" in ((e.get("fieldsV1") or {}).get("f:spec") or {})
    ]


def test_gpubot_cordon_is_recorded_under_field_manager_gpubot(control_plane: ControlPlane) -> None:
    cp = control_plane
    made = []
    try:
        for name in ("w-gpu-1", "w-gpu-2", "w-gpu-3"):
            body = node(name, 8, 8)
            status = body.pop("status")
            created = cp.rest.post("/api/v1/nodes", body)
            created["status"] = status
            cp.rest.put(f"/api/v1/nodes/{name}/status", created)
            made.append(name)
        k = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        try:
            out = cordon(k, k, "w-gpu-1", "Xid 79 on GPU 3", "cli:alice@laptop", max_fraction=0.5, now=NOW)
            assert out.applied, out
            stored = cp.rest.get("/api/v1/nodes/w-gpu-1")
            assert stored["spec"]["unschedulable"] is True
            assert owners_of_unschedulable(stored) == ["gpubot"], stored["metadata"]["managedFields"]
            back = uncordon(k, k, "w-gpu-1", actor="cli:alice@laptop", now=NOW + 60)
            assert back.applied, back
            stored = cp.rest.get("/api/v1/nodes/w-gpu-1")
            assert not stored["spec"].get("unschedulable")
        finally:
            k.close()
    finally:
        for name in made:
            cp.rest.delete(f"/api/v1/nodes/{name}")
