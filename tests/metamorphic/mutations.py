"""Changes to a scenario that must not change its diagnosis (issue 18, "a metamorphic suite"): small
pure functions from one scenario dict to another (the input is never modified)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Scenario = dict[str, Any]


def reorder_objects(s: Scenario) -> Scenario:
    """The API lists objects in no promised order."""
    out = copy.deepcopy(s)
    out["objects"] = list(reversed(out.get("objects") or []))
    return out


def reorder_metrics(s: Scenario) -> Scenario:
    """Prometheus returns series in no promised order."""
    out = copy.deepcopy(s)
    if isinstance(out.get("metrics"), list):
        out["metrics"] = list(reversed(out["metrics"]))
    return out


def _cpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m6i.4xlarge"},
            "creationTimestamp": "2026-09-01T00:00:00Z",
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.31.4", "kernelVersion": "6.1.0-29-cloud-amd64"},
        },
    }


def cpu_workloads(s: Scenario) -> Scenario:
    """A CPU pool running CPU-only pods: nothing there asks for a GPU."""
    out = copy.deepcopy(s)
    objs = out.setdefault("objects", [])
    for n in range(3):
        node = f"meta-cpu-pool-{n:02d}"
        objs.append(_cpu_node(node))
        objs.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"meta-web-{n}", "namespace": "meta-web", "uid": f"meta-web-{n}",
                         "creationTimestamp": "2026-09-02T00:00:00Z"},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx:1.27",
                                                       "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0,
                                              "state": {"running": {"startedAt": "2026-09-02T00:01:00Z"}}}]},
        })  # fmt: skip
    return out


def cpu_nodes_only(s: Scenario) -> Scenario:
    """Idle CPU nodes added to the fleet."""
    out = copy.deepcopy(s)
    out.setdefault("objects", []).extend(_cpu_node(f"meta-idle-{n:02d}") for n in range(4))
    return out


INVARIANT: dict[str, Callable[[Scenario], Scenario]] = {
    "reorder_objects": reorder_objects,
    "reorder_metrics": reorder_metrics,
    "cpu_workloads": cpu_workloads,
    "cpu_nodes_only": cpu_nodes_only,
}
