"""Positive controls: changes that must change the diagnosis."""

from __future__ import annotations

import copy
from typing import Any

from tests.metamorphic.mutations_base import Scenario, _kind, _meta


def _target_pod(s: Scenario) -> dict[str, Any] | None:
    ns, _, name = str((s.get("x-expect") or {}).get("target") or "").partition("/")
    for p in _kind(s, "Pod"):
        if _meta(p).get("namespace") == ns and _meta(p).get("name") == name:
            return p
    return None


def xid79_on_target_node(s: Scenario) -> Scenario | None:
    """The target's node loses a GPU to Xid 79: the device plugin marks it unhealthy, allocatable drops.
    None when the target is not bound to a node that advertises nvidia.com/gpu."""
    out = copy.deepcopy(s)
    pod = _target_pod(out)
    node_name = ((pod or {}).get("spec") or {}).get("nodeName")
    for n in _kind(out, "Node"):
        status = n.get("status") or {}
        cap = (status.get("capacity") or {}).get("nvidia.com/gpu")
        if _meta(n).get("name") != node_name or cap is None or int(cap) < 1:
            continue
        alloc = status.setdefault("allocatable", {})
        if int(alloc.get("nvidia.com/gpu", cap)) < int(cap):
            return None  # already short of a GPU: this control has nothing to add
        alloc["nvidia.com/gpu"] = str(int(cap) - 1)
        return out
    return None


def xid79_taint_on_target_dra_device(s: Scenario) -> Scenario | None:
    """The DRA driver taints a GPU the target's claim holds (gpu.nvidia.com/xid=79, NoExecute). None
    when the target holds no allocated DRA device."""
    out = copy.deepcopy(s)
    pod = _target_pod(out)
    if pod is None or not (pod.get("spec") or {}).get("nodeName"):
        return None  # an unbound pod's claim may be allocated elsewhere: its devices are not its node's
    ns = _meta(pod).get("namespace")
    names = {
        str(c.get("resourceClaimName")) for c in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names |= {str(c.get("resourceClaimName")) for c in (pod.get("spec") or {}).get("resourceClaims") or []}
    held: set[tuple[str, str]] = set()
    for claim in _kind(out, "ResourceClaim"):
        if _meta(claim).get("namespace") == ns and _meta(claim).get("name") in names:
            alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            held |= {(str(r.get("pool")), str(r.get("device"))) for r in alloc.get("results") or []}
    tainted = False
    for sl in _kind(out, "ResourceSlice"):
        pool = str(((sl.get("spec") or {}).get("pool") or {}).get("name"))
        for d in (sl.get("spec") or {}).get("devices") or []:
            if (pool, str(d.get("name"))) in held and not d.get("taints"):
                d["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute",
                                "timeAdded": "2026-11-30T07:02:44Z"}]  # fmt: skip
                tainted = True
    return out if tainted else None
