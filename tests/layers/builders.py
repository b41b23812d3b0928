"""Small builders of Kubernetes objects shaped exactly like the JSON API (camelCase).

Focused layer tests build a handful of Nodes, Pods and Events here, then a
WalkContext over a real SnapshotCluster. Real log and message text comes from
tests/fixtures/samples and is pasted into the tests that use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.sources.snapshot import SnapshotCluster, log_key
from layers.facts.context import Settings, WalkContext
from layers.findings import Finding, LayerResult, Target
from layers.sources import K8sObject, NoTelemetry, SourceError, Telemetry

NOW = 1_795_000_000.0  # 2026-11-18, a fixed instant for NoTelemetry
OPERATOR_NS = "gpu-operator"
_EVENT_IDS = itertools.count(1)


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, Any] | None = None,
    allocatable: Mapping[str, Any] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    unschedulable: bool = False,
    node_info: Mapping[str, str] | None = None,
    ready: bool = True,
) -> K8sObject:
    """A Node; allocatable defaults to capacity; quantities are strings as the API returns them."""
    cap = {"cpu": "16", "memory": "64Gi", "pods": "110", **{k: str(v) for k, v in (capacity or {}).items()}}
    alloc = dict(cap) if allocatable is None else {**cap, **{k: str(v) for k, v in allocatable.items()}}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {
            "capacity": cap,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "nodeInfo": dict(node_info or {}),
        },
    }


def gpu_node(name: str, gpus: int = 8, *, allocatable: int | None = None, **kw: Any) -> K8sObject:
    """A GPU node as GFD labels it, advertising `gpus` nvidia.com/gpu."""
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        **kw.pop("labels", {}),
    }
    alloc = None if allocatable is None else {"nvidia.com/gpu": allocatable}
    return node(name, labels=labels, capacity={"nvidia.com/gpu": gpus}, allocatable=alloc, **kw)


# --- container statuses ----------------------------------------------------------------


def running(
    name: str, *, ready: bool = True, restarts: int = 0, last: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    st: dict[str, Any] = {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": "2026-11-18T10:00:00Z"}},
    }
    if last:
        st["lastState"] = {"terminated": dict(last)}
    return st


def waiting(
    name: str,
    reason: str = "PodInitializing",
    *,
    message: str | None = None,
    restarts: int = 0,
    last: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    w: dict[str, Any] = {"reason": reason}
    if message:
        w["message"] = message
    st: dict[str, Any] = {"name": name, "ready": False, "restartCount": restarts, "state": {"waiting": w}}
    if last:
        st["lastState"] = {"terminated": dict(last)}
    return st


def crash_looping(name: str, restarts: int, *, exit_code: int = 1) -> dict[str, Any]:
    """A container in CrashLoopBackOff whose last run ended in Error."""
    return waiting(
        name, "CrashLoopBackOff", restarts=restarts, last={"reason": "Error", "exitCode": exit_code}
    )


def terminated(
    name: str, *, exit_code: int = 0, reason: str | None = None, restarts: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": restarts,
        "state": {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            }
        },
    }


# --- pods ------------------------------------------------------------------------------


def pod(
    ns: str,
    name: str,
    *,
    node: str | None = None,
    phase: str | None = None,
    requests: Mapping[str, Any] | None = None,
    containers: Sequence[str] = ("main",),
    init_containers: Sequence[str] = (),
    statuses: Sequence[Mapping[str, Any]] | None = None,
    init_statuses: Sequence[Mapping[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    ready: bool | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    affinity: Mapping[str, Any] | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    image: str = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
) -> K8sObject:
    """A Pod. `requests` go to the first container's requests and limits (extended resources need both).

    Without explicit statuses, a bound pod's containers are running and Ready.
    """
    phase = phase or ("Running" if node else "Pending")
    specs: list[dict[str, Any]] = [{"name": c, "image": image} for c in containers]
    if requests and specs:
        res = {k: str(v) for k, v in requests.items()}
        specs[0]["resources"] = {"requests": dict(res), "limits": dict(res)}
    spec: dict[str, Any] = {"containers": specs}
    if init_containers:
        spec["initContainers"] = [{"name": c, "image": image} for c in init_containers]
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if statuses is None:
        statuses = [running(c) for c in containers] if node and phase == "Running" else []
    if ready is None:
        ready = bool(statuses) and all(s.get("ready") for s in statuses)
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": list(conditions or [{"type": "Ready", "status": "True" if ready else "False"}]),
    }
    if statuses:
        status["containerStatuses"] = [dict(s) for s in statuses]
    if init_statuses:
        status["initContainerStatuses"] = [dict(s) for s in init_statuses]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {}), "uid": f"uid-{ns}-{name}"},
        "spec": spec,
        "status": status,
    }


# Operand pods as the GPU Operator deploys them (reference §A2): app label, init and main containers.
OPERANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gpu-operator": ((), ("gpu-operator",)),
    "nvidia-driver-daemonset": (("k8s-driver-manager",), ("nvidia-driver-ctr",)),
    "nvidia-container-toolkit-daemonset": (("driver-validation",), ("nvidia-container-toolkit-ctr",)),
    "nvidia-device-plugin-daemonset": (
        ("toolkit-validation", "config-manager-init"),
        ("nvidia-device-plugin", "config-manager"),
    ),
    "gpu-feature-discovery": (
        ("toolkit-validation", "config-manager-init"),
        ("gpu-feature-discovery", "config-manager"),
    ),
    "nvidia-dcgm-exporter": (("toolkit-validation",), ("nvidia-dcgm-exporter",)),
    "nvidia-operator-validator": (
        ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
        ("nvidia-operator-validator",),
    ),
    "nvidia-mig-manager": (("toolkit-validation",), ("nvidia-mig-manager",)),
}


def operand(
    app: str,
    node: str,
    suffix: str = "x7k2p",
    *,
    ns: str = OPERATOR_NS,
    statuses: Sequence[Mapping[str, Any]] | None = None,
    init_statuses: Sequence[Mapping[str, Any]] | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    name: str | None = None,
) -> K8sObject:
    """A healthy operand pod on `node` unless statuses say otherwise (init containers completed)."""
    inits, mains = OPERANDS[app]
    labels = {"app": app}
    if app == "nvidia-driver-daemonset":
        labels["app.kubernetes.io/component"] = "nvidia-driver"
    if init_statuses is None:
        init_statuses = [terminated(c) for c in inits]
    if statuses is None:
        statuses = [running(c) for c in mains]
    return pod(
        ns,
        name or (app if app == "gpu-operator" else f"{app}-{suffix}"),
        node=node,
        phase=phase or "Running",
        containers=mains,
        init_containers=inits,
        statuses=statuses,
        init_statuses=init_statuses,
        labels=labels,
        ready=ready,
        image=f"nvcr.io/nvidia/{app}:v1",
    )


def healthy_operator(
    node: str, *, ns: str = OPERATOR_NS, apps: Iterable[str] | None = None
) -> list[K8sObject]:
    """Every operand of a healthy install on one node."""
    wanted = apps or [a for a in OPERANDS if a != "gpu-operator"]
    return [operand(a, node, suffix=f"{node[-5:]}", ns=ns) for a in wanted]


# --- events ----------------------------------------------------------------------------


def event(
    involved: tuple[str | None, str, str],
    reason: str,
    message: str,
    *,
    type: str = "Warning",
    count: int = 1,
    source: str = "kubelet",
    last: str = "2026-11-18T10:00:00Z",
    name: str | None = None,
) -> K8sObject:
    """A core/v1 Event about (namespace, kind, name); Node events live in `default`."""
    ns, kind, obj = involved
    inv: dict[str, Any] = {"kind": kind, "name": obj, "apiVersion": "v1"}
    if ns:
        inv["namespace"] = ns
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name or f"{obj}.{next(_EVENT_IDS):x}", "namespace": ns or "default"},
        "involvedObject": inv,
        "reason": reason,
        "message": message,
        "type": type,
        "count": count,
        "source": {"component": source},
        "firstTimestamp": last,
        "lastTimestamp": last,
    }


# --- the walk context ------------------------------------------------------------------


class FailingCluster(SnapshotCluster):
    """A snapshot whose chosen reads fail, e.g. {"list_pods": SourceError("forbidden", ...)}."""

    def __init__(
        self, objects: Iterable[K8sObject], logs: Mapping[str, str] | None, fail: Mapping[str, SourceError]
    ) -> None:
        super().__init__(objects, logs)
        self.fail = dict(fail)

    def __getattribute__(self, attr: str) -> Any:
        fail = object.__getattribute__(self, "__dict__").get("fail") or {}
        if attr in fail:
            err = fail[attr]

            def raising(*_a: Any, **_k: Any) -> Any:
                raise err

            return raising
        return object.__getattribute__(self, attr)


def forbidden(verb: str, resource: str, namespace: str | None = None) -> SourceError:
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    return SourceError(
        "forbidden",
        f'{resource} is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot {verb} resource '
        f'"{resource}"{where}',
        verb=verb,
        resource=resource,
        namespace=namespace,
    )


def ctx(
    objects: Iterable[K8sObject],
    *,
    logs: Mapping[str, str] | None = None,
    telemetry: Telemetry | None = None,
    pod: tuple[str, str] | None = None,
    node: str | None = None,
    fail: Mapping[str, SourceError] | None = None,
    settings: Settings | None = None,
) -> WalkContext:
    """A WalkContext over a SnapshotCluster: a pod walk with pod=(ns, name), else a node walk."""
    objs = list(objects)
    cluster = FailingCluster(objs, logs, fail) if fail else SnapshotCluster(objs, logs)
    tel = telemetry or NoTelemetry(NOW)
    if pod is not None:
        obj = SnapshotCluster.get_pod(cluster, *pod)  # the walk reads its target before any layer
        bound = (obj.get("spec") or {}).get("nodeName")
        return WalkContext(cluster, tel, Target(pod[0], pod[1], bound), obj, settings)
    return WalkContext(cluster, tel, Target(None, None, node), None, settings)


def logs_for(pod_obj: K8sObject, container: str, text: str, *, previous: bool = False) -> dict[str, str]:
    """{log key: text} for SnapshotCluster(logs=…)."""
    meta = pod_obj["metadata"]
    return {log_key(meta["namespace"], meta["name"], container, previous): text}


# --- reading results ---------------------------------------------------------------------


def codes(result: LayerResult) -> list[str]:
    return [f.code for f in result.findings]


def one(result: LayerResult, code: str) -> Finding:
    """The single finding with this code (fails, naming the codes found, when there are 0 or 2+)."""
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, (code, codes(result))
    return found[0]
