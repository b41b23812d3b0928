"""Fleet additions that must not change a diagnosis: CPU pools, another GPU pool on another driver
branch, sick tainted nodes elsewhere; each built in the style of the scenario's own nodes."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.metamorphic.mutations_base import OPERATOR_NS, Scenario, _kind, _meta, _objects

# --- the fleet around the target --------------------------------------------------------------------


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    cap = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    alloc = {**cap, "cpu": "63500m"}
    spec: dict[str, Any] = {}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels},
                     "creationTimestamp": "2026-09-01T00:00:00Z"},
        "spec": spec,
        "status": {"capacity": cap, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": "2026-09-01T00:00:00Z"}],
                   "nodeInfo": {"kubeletVersion": "v1.31.4", "kernelVersion": "5.15.0-1071-gke",
                                "osImage": "Ubuntu 22.04.5 LTS", "containerRuntimeVersion": "containerd://1.7.24"}},
    }  # fmt: skip


def _pod(name: str, ns: str, node: str, labels: dict[str, str], image: str, container: str,
         requests: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"meta-{name}", "labels": labels,
                     "creationTimestamp": "2026-09-02T00:00:00Z"},
        "spec": {"nodeName": node, "containers": [{"name": container, "image": image,
                                                   "resources": {"requests": requests or {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": container, "image": image, "ready": True, "restartCount": 0,
                                          "state": {"running": {"startedAt": "2026-09-02T00:01:00Z"}}}]},
    }  # fmt: skip


def cpu_workloads(s: Scenario) -> Scenario:
    """A CPU pool running CPU-only pods: nothing there asks for a GPU."""
    out = copy.deepcopy(s)
    objs = out.setdefault("objects", [])
    for n in range(3):
        node = f"meta-cpu-pool-{n:02d}"
        objs.append(_node(node, {"node.kubernetes.io/instance-type": "m6i.4xlarge"}))
        objs.append(_pod(f"meta-web-{n}", "meta-web", node, {"app": "web"}, "nginx:1.27", "web"))
        objs.append(_pod(f"meta-etl-{n}", "meta-batch", node, {"app": "etl"}, "python:3.12-slim", "etl",
                         {"cpu": "2", "memory": "4Gi"}))  # fmt: skip
    return out


def _operator_ns(s: Scenario) -> str:
    for p in _kind(s, "Pod"):
        if (_meta(p).get("labels") or {}).get("app") in ("gpu-operator", "nvidia-device-plugin-daemonset"):
            return str(_meta(p).get("namespace") or OPERATOR_NS)
    return OPERATOR_NS


def _gpu_template(s: Scenario) -> dict[str, Any] | None:
    """A GPU node of the scenario to copy: new nodes look like its (GFD labels or none, cloud labels)."""
    for n in _kind(s, "Node"):
        alloc = (n.get("status") or {}).get("allocatable") or {}
        if any(k.startswith("nvidia.com/") and str(v).isdigit() and int(v) > 0 for k, v in alloc.items()):
            return n
    return None  # no node advertises a GPU: a new one that did would change the cluster's premise


_AVAILABLE = re.compile(r"0/(\d+) nodes are available: ")
_NOT_HELPFUL = re.compile(r"(\d+) (Preemption is not helpful for scheduling|No preemption victims found)")


def _scheduler_saw(s: Scenario, count: int, reason: str) -> None:
    """The scheduler's messages count the new nodes, with the reason it gives for them, as it would."""

    def edit(text: str) -> str:
        if not _AVAILABLE.search(text):
            return text
        text = _AVAILABLE.sub(lambda m: f"0/{int(m.group(1)) + count} nodes are available: ", text)
        text = text.replace("nodes are available: ", f"nodes are available: {count} {reason}, ", 1)
        return _NOT_HELPFUL.sub(lambda m: f"{int(m.group(1)) + count} {m.group(2)}", text)

    for o in _objects(s):
        if o.get("kind") == "Event" and isinstance(o.get("message"), str):
            o["message"] = edit(o["message"])
        for c in ((o.get("status") or {}).get("conditions") or []) if o.get("kind") == "Pod" else []:
            if isinstance(c, dict) and isinstance(c.get("message"), str):
                c["message"] = edit(c["message"])


def _clone_gpu_node(template: dict[str, Any], name: str, product: str, extra: dict[str, str],
                    taints: list[dict[str, str]], gpus: int, allocatable: int,
                    unschedulable: bool = False) -> dict[str, Any]:  # fmt: skip
    node = copy.deepcopy(template)
    meta = node.setdefault("metadata", {})
    old = meta.get("name")
    meta["name"] = name
    meta.pop("uid", None)
    labels = meta.setdefault("labels", {})
    for k, v in list(labels.items()):
        if v == old:
            labels[k] = name
    if "nvidia.com/gpu.product" in labels:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus)
    labels.update({k: v for k, v in extra.items() if k.split("/")[0] in {x.split("/")[0] for x in labels}})
    node["spec"] = {
        k: v
        for k, v in (node.get("spec") or {}).items()
        if k not in ("taints", "unschedulable", "providerID")
    }
    node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    # The template's own GPU resources (whole GPUs, MIG profiles, shared replicas: the cluster's
    # strategy), one short on a node that lost a GPU.
    status = node.setdefault("status", {})
    alloc = dict(status.get("allocatable") or {})
    status["capacity"] = {
        **(status.get("capacity") or {}),
        **{k: v for k, v in alloc.items() if k.startswith("nvidia.com/")},
    }
    if allocatable < gpus:
        key = next(
            k
            for k in sorted(alloc)
            if k.startswith("nvidia.com/") and str(alloc[k]).isdigit() and int(alloc[k]) > 0
        )
        alloc[key] = str(int(alloc[key]) - 1)
    status["allocatable"] = alloc
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"] or [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ]
    for c in status["conditions"]:
        c.update({"status": "True", "reason": "KubeletReady"})
    return node


DEDICATED = [{"key": "dedicated", "value": "l40s-inference", "effect": "NoSchedule"}]


def healthy_pool_other_driver(s: Scenario) -> Scenario:
    """Four healthy L40S nodes of their own node pool on driver branch 535 (cloud nodepool label, their
    own gpu.product), tainted for a dedicated team, with their operands Running: not the target's
    candidates. Built in the style of the scenario's own GPU nodes."""
    out = copy.deepcopy(s)
    template = _gpu_template(out)
    if template is None:
        return out
    objs = out.setdefault("objects", [])
    extra = {"cloud.google.com/gke-nodepool": "l40s-inference", "eks.amazonaws.com/nodegroup": "l40s-inference",
             "nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "230",
             "nvidia.com/cuda.driver.rev": "02", "nvidia.com/cuda.driver-version.full": "535.230.02"}  # fmt: skip
    ns = _operator_ns(s)
    tname = _meta(template).get("name")
    operands = [p for p in _kind(out, "Pod") if (p.get("spec") or {}).get("nodeName") == tname
                and _meta(p).get("namespace") == ns]  # fmt: skip
    # A product none of the scenario's nodes has: without node-pool labels (an on-prem fleet) the
    # product alone tells the pools apart, and the same product with no pool label is one pool
    # (spec/findings.md, driver pools), where a second branch would be a real skew.
    used = {str((_meta(n).get("labels") or {}).get("nvidia.com/gpu.product")) for n in _kind(out, "Node")}
    product = next(p for p in ("NVIDIA-L40S", "NVIDIA-A10G", "NVIDIA-L4") if p not in used)
    for n in range(4):
        name = f"meta-l40s-pool-{n:02d}"
        objs.append(_clone_gpu_node(template, name, product, extra, DEDICATED, 4, 4))
        for p in operands:
            pod = copy.deepcopy(p)
            pod["spec"]["nodeName"] = name
            pod["metadata"]["name"] = f"{_meta(p).get('name')}-meta{n}"
            pod["metadata"].pop("uid", None)
            for c in pod["spec"].get("containers") or []:
                c["image"] = re.sub(r"driver:\d+\.\d+(\.\d+)?", "driver:535.230.02", str(c.get("image")))
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                             "containerStatuses": [{"name": c.get("name"), "image": c.get("image"), "ready": True,
                                                    "restartCount": 0,
                                                    "state": {"running": {"startedAt": "2026-09-02T00:01:00Z"}}}
                                                   for c in pod["spec"].get("containers") or []]}  # fmt: skip
            objs.append(pod)
    _scheduler_saw(out, 4, "node(s) had untolerated taint {dedicated: l40s-inference}")
    return out


def sick_nodes_elsewhere(s: Scenario) -> Scenario:
    """Two sick GPU nodes the target cannot use, tainted by a health controller: one cordoned that lost
    a GPU (allocatable below capacity), one whose GPU fell off the bus. Not candidates (an untolerated
    NoExecute taint), in the style of the scenario's own GPU nodes."""
    out = copy.deepcopy(s)
    template = _gpu_template(out)
    if template is None:
        return out
    taint = [{"key": "nvidia.com/gpu.health", "value": "xid-79", "effect": "NoExecute"}]
    out.setdefault("objects", []).extend([
        _clone_gpu_node(template, "meta-a100-sick-00", "NVIDIA-A100-SXM4-40GB", {}, taint, 8, 7, unschedulable=True),
        _clone_gpu_node(template, "meta-a100-sick-01", "NVIDIA-A100-SXM4-40GB", {}, taint, 8, 8),
    ])  # fmt: skip
    _scheduler_saw(out, 2, "node(s) had untolerated taint {nvidia.com/gpu.health: xid-79}")
    return out
