"""DCGM diagnostics as a Kubernetes Job: when it may run on a node, and the Job itself.

spec/interfaces.md, "GPU diagnostics from chat": a Job in gpubot's namespace, pinned to the
node by node affinity (not `nodeName`: the scheduler must still account for the GPUs it
takes), requesting every GPU the node can give so no workload shares them, tolerating the
node's taints and `node.kubernetes.io/unschedulable` (a cordoned node is the usual case),
with a deadline per level and `ttlSecondsAfterFinished` as the backstop of the cleanup.

Two host engines on one machine are not supported by DCGM (docs/diagnostics.md): where the
GPU Operator runs its standalone nv-hostengine (ClusterPolicy `dcgm.enabled=true`) the Job's
dcgmi connects to it with `--host`; in the operator's default (dcgm-exporter's embedded
host engine) the Job starts its own for the run, and the confirmation says what that does.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from typing import Any

import msgspec

from layers import nodepolicy
from layers.diaggpus import DISCOVERY_BEGIN, DISCOVERY_END, GpuAsk, gpu_ask
from layers.facts import objects as o
from layers.sources import K8sObject

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NODE_LABEL = "gpubot/diag-node"
LEVEL_LABEL = "gpubot/diag-level"
APP_LABELS = {"app.kubernetes.io/name": "gpubot-diag", "app.kubernetes.io/managed-by": "gpubot"}
CONTAINER = "dcgmi"
TTL_AFTER_FINISHED_S = 3600
GPU_RESOURCE = "nvidia.com/gpu"


class Level(msgspec.Struct, frozen=True):
    number: int
    takes: str  # what the confirmation says (DCGM's documentation of the suites)
    deadline_s: int  # activeDeadlineSeconds: the suite's time with room for start-up and image pull


LEVELS = {
    1: Level(1, "seconds (quick deployment checks)", 600),
    2: Level(2, "about two minutes (medium validation)", 1200),
    3: Level(3, "about fifteen minutes (long hardware diagnostics)", 3600),
}


class DiagRefused(Exception):
    """Why the diagnostic will not run on this node, in one line."""


class HostEngine(msgspec.Struct, frozen=True):
    """Where dcgmi finds its host engine: the operator's standalone one, or its own for the run."""

    address: str | None  # "nvidia-dcgm.gpu-operator.svc:5555"; None: embedded (start one in the Job)

    @property
    def standalone(self) -> bool:
        return self.address is not None


def hostengine_for(
    cluster_policies: Sequence[K8sObject], operator_namespace: str | None, setting: str | None
) -> HostEngine:
    """The setting (GPUBOT_DIAG_HOSTENGINE) wins; else the ClusterPolicy's `dcgm.enabled` names the
    operator's Service `nvidia-dcgm` (internalTrafficPolicy Local: the node's own host engine)."""
    if setting:
        return HostEngine(setting)
    for cp in cluster_policies:
        dcgm = ((cp.get("spec") or {}).get("dcgm")) or {}
        if dcgm.get("enabled") is True:
            ns = operator_namespace or ((cp.get("status") or {}).get("namespace")) or "gpu-operator"
            return HostEngine(f"nvidia-dcgm.{ns}.svc:5555")
    return HostEngine(None)


def _holds_gpu(pod: K8sObject) -> bool:
    for c in ((pod.get("spec") or {}).get("containers") or []) + (
        (pod.get("spec") or {}).get("initContainers") or []
    ):
        res = c.get("resources") or {}
        for part in (res.get("limits") or {}, res.get("requests") or {}):
            for name, value in part.items():
                if name.startswith("nvidia.com/") and str(value) not in ("0", ""):
                    return True
    claims = (pod.get("spec") or {}).get("resourceClaims") or []
    return bool(claims)


def _daemonset_pod(pod: K8sObject) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "DaemonSet" and r.get("controller") for r in refs)


def mig_partitioned(node: K8sObject) -> bool:
    """MIG is on: MIG resources advertised, a MIG product, or a MIG layout other than all-disabled."""
    labels = o.labels(node)
    if any(r.startswith("nvidia.com/mig-") for r in o.gpu_resources(node, "capacity")):
        return True
    if "-MIG-" in labels.get("nvidia.com/gpu.product", ""):
        return True
    layout = labels.get("nvidia.com/mig.config", "")
    return bool(layout) and layout != "all-disabled"


def level_refusal(level: int) -> str | None:
    """A refusal that needs no cluster read: a level that is never offered (checked first)."""
    if level not in LEVELS:
        return f"level {level} is not offered: levels 1, 2 and 3 only (level 4 runs for hours and is never run from chat)"
    return None


def refusal(
    node: K8sObject,
    pods_on_node: Sequence[K8sObject],
    level: int,
    *,
    confirmed: int,
    running: Sequence[K8sObject] = (),
    hostengine: HostEngine = HostEngine(None),
    ask: GpuAsk | None = None,
) -> str | None:
    """Why the diagnostic is refused here (None: it may run). `confirmed` counts the confirmations
    given: level 3 needs two. `ask` is what the Job would request (layers/diaggpus.py `gpu_ask`;
    read from the node alone when not given)."""
    name = o.name(node)
    by_level = level_refusal(level)
    if by_level is not None:
        return by_level
    if level >= 3 and confirmed < 2:
        return "level 3 takes about fifteen minutes of every GPU of the node: it needs a second confirmation"
    # The owners' table first (spec/findings.md, "One policy decides every action"): on a node an
    # owner repairs, reconfigures or removes, "drain the pods first" would be advice against it.
    policy = nodepolicy.decide(node)
    if not policy.diagnostics.offered:
        return policy.diagnostics.said
    holders = sorted(
        f"{o.namespace(p)}/{o.name(p)}"
        for p in pods_on_node
        if _holds_gpu(p)
        and not _daemonset_pod(p)
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )
    if holders:
        return f"{len(holders)} pod(s) hold GPUs on {name} ({', '.join(holders[:3])}): drain them first, a diagnostic needs every GPU"
    if mig_partitioned(node):
        return f"the GPUs of {name} are MIG-partitioned: DCGM's diagnostic runs on whole GPUs (disable MIG first)"
    active = [j for j in running if not _finished(j)]
    if active:
        return f"a diagnostic already runs on {name} (Job {o.name(active[0])})"
    ask = ask if ask is not None else gpu_ask(node, {}, {})
    if ask is None:
        return (
            f"{name} advertises no whole GPU as an extended resource (nvidia.com/gpu or nvidia.com/gpu.shared): "
            "a node whose GPUs are published only through DRA cannot be diagnosed from chat yet"
        )
    if ask.units == 0 and not hostengine.standalone:
        return (
            f"{name} has no allocatable GPU to request: no {ask.resource} (all {ask.gpus} GPU(s) withdrawn by the device "
            "plugin): enable the operator's standalone DCGM (dcgm.enabled=true) to test them"
        )
    return None


def _finished(job: K8sObject) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds)


def gpu_count(node: K8sObject) -> int:
    """Every GPU the scheduler can give on the node (allocatable: one marked unhealthy cannot be)."""
    return o.gpu_resources(node, "allocatable").get(GPU_RESOURCE, 0)


def _listing(engine: str) -> str:
    """The container's GPUs as DCGM numbers them, between marks: which UUID each result is."""
    return f"echo {DISCOVERY_BEGIN}; dcgmi discovery{engine} -l; echo {DISCOVERY_END}; "


def node_label_value(node: str) -> str:
    """The node's name as a label value (at most 63 characters), hashed when it does not fit."""
    if len(node) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", node):
        return node
    return "h-" + hashlib.sha1(node.encode(), usedforsecurity=False).hexdigest()[:20]


def tolerations(node: K8sObject) -> list[dict[str, Any]]:
    """Each of the node's taints tolerated as it is, and the cordon's taint."""
    out: list[dict[str, Any]] = [{"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") == UNSCHEDULABLE_TAINT:
            continue
        tol: dict[str, Any] = {"key": t.get("key"), "effect": t.get("effect")}
        if t.get("value") not in (None, ""):
            tol.update(operator="Equal", value=t["value"])
        else:
            tol["operator"] = "Exists"
        out.append(tol)
    return out


def script(level: int, hostengine: HostEngine) -> str:
    """The container's shell: dcgmi's JSON, then its exit status on a line of its own (a failed
    test makes dcgmi exit non-zero; the Job itself fails only when the run could not happen)."""
    if hostengine.standalone:
        host = f" --host {shlex.quote(str(hostengine.address))}"
        run = f"dcgmi diag{host} -r {level} -j"
        return f"{_listing(host)}{run}; rc=$?; echo; echo gpubot-dcgmi-exit=$rc"
    # The embedded default: no nv-hostengine the Job could reach, so it runs one for itself,
    # bound to the pod's loopback, and stops it when dcgmi is done.
    return (
        "nv-hostengine -n -b 127.0.0.1 --log-filename /tmp/nv-hostengine.log & he=$!; "
        "for i in 1 2 3 4 5 6 7 8 9 10; do dcgmi discovery -l >/dev/null 2>&1 && break; sleep 1; done; "
        f"{_listing('')}dcgmi diag -r {level} -j; rc=$?; kill $he 2>/dev/null; echo; echo gpubot-dcgmi-exit=$rc"
    )


def job_manifest(
    node: K8sObject,
    level: int,
    *,
    namespace: str,
    image: str,
    name: str,
    requested_by: str,
    hostengine: HostEngine,
    runtime_class: str | None = None,
    ask: GpuAsk | None = None,
) -> dict[str, Any]:
    """The Job for `dcgmi diag -r LEVEL -j` on the node (no GPU check here: see `refusal`). It asks
    for every allocatable unit of the resource the node advertises (`ask`; `nvidia.com/gpu` without)."""
    node_name = o.name(node)
    labels = {**APP_LABELS, NODE_LABEL: node_label_value(node_name), LEVEL_LABEL: str(level)}
    resource = ask.resource if ask is not None else GPU_RESOURCE
    units = str(ask.units if ask is not None else gpu_count(node))
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "command": ["/bin/sh", "-c", script(level, hostengine)],
        "resources": {"limits": {resource: units}, "requests": {resource: units}},
        # DCGM's profiling and stress plugins need SYS_ADMIN (as dcgm-exporter's DCP metrics do).
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": False},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            }
        },
        "tolerations": tolerations(node),
        "containers": [container],
        "automountServiceAccountToken": False,
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {NODE_LABEL: node_name, "gpubot/requested-by": requested_by},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": LEVELS[level].deadline_s,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def job_name(node: str, suffix: str) -> str:
    """`gpubot-diag-<node>-<suffix>`, within the 63 characters a Job's pods' labels allow."""
    short = re.sub(r"[^a-z0-9-]", "-", node.lower())[:40].strip("-") or "node"
    return f"gpubot-diag-{short}-{suffix}"[:63].rstrip("-")


def confirmation(node: str, level: int, ask: GpuAsk, hostengine: HostEngine) -> str:
    """What the confirmation says: what runs, how long, which GPUs it tests and which it cannot,
    and what it does to the exporter."""
    lvl = LEVELS[level]
    count = ask.units // ask.per_gpu
    text = (
        f"Run DCGM diagnostics level {level} on {node}: a Job takes the {count} allocatable GPU(s) "
        f"for {lvl.takes}; nothing else can be scheduled on them meanwhile. {ask.tested_text()}"
    )
    untested = ask.untested_text()
    if untested:
        text += " " + untested + " A node with untested GPUs is never recorded as passed."
        if hostengine.standalone:
            text += " (The operator's host engine sees every GPU: the result names each GPU DCGM tested.)"
    if hostengine.standalone:
        return text + (
            f" dcgmi connects to the operator's nv-hostengine at {hostengine.address} (dcgm.enabled=true), "
            "the one dcgm-exporter uses: no second host engine starts."
        )
    return text + (
        " dcgm-exporter runs DCGM's embedded host engine on this node (the operator's default): the Job "
        "starts a second host engine for its run, which DCGM does not support on one machine. "
        "Expect dcgm-exporter's profiling metrics (DCGM_FI_PROF_*) to fail or stop while it runs; "
        "restart the exporter pod on the node if they stay missing afterwards."
    )
