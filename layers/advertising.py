"""Layer 1: which GPU resources nodes advertise, against what the pod requests.

A GPU node that advertises nothing (its device plugin never registered, or was paused by the
operator), and a request for a resource no node — or no node the pod selects — advertises.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import msgspec.structs

from layers.capacity import capacity_columns
from layers.facts import objects as o
from layers.facts import owners as ow
from layers.facts.candidates import Candidates, not_for_pods
from layers.facts.fold import shown
from layers.facts.placement import selector_misses
from layers.findings import Finding, finding
from layers.sources import K8sObject


def selected_mismatch(
    pod: K8sObject,
    cands: Candidates,
    gpu_nodes: list[K8sObject],
    requests: Mapping[str, int],
    explained: set[str],
    labels_cmd: str,
) -> list[Finding]:
    """`L1_RESOURCE_MISMATCH` on the nodes the pod selects: other nodes advertise the request, but
    every GPU node its selector and affinity match advertises only other GPU resources (a pool that
    shares GPUs as `nvidia.com/gpu.shared`, or MIG mixed). The pod asks the pool it means for the
    wrong name; "fix the selector" would send it to a pool it does not mean."""
    if cands.nodes or not requests:
        return []
    selected = [n for n in gpu_nodes if not not_for_pods(n) and not selector_misses(pod, n)]
    offered: dict[str, list[str]] = defaultdict(list)
    for node in selected:
        for r in o.advertised(node):
            offered[r].append(o.name(node))
    missing = sorted(r for r in requests if r not in offered and r not in explained)
    carrying = {o.name(n) for n in cands.carrying}
    if not (missing and offered) or any(o.name(n) in carrying for n in selected):
        return []
    found = resource_mismatch(
        missing, requests, offered, selected, labels_cmd, where=f"the {len(selected)} GPU node(s) it selects"
    )
    scope = f"other nodes advertise {', '.join(missing)}, but not the {len(selected)} the pod's node selector/affinity match"
    return [msgspec.structs.replace(found, evidence=(scope, *found.evidence))]


DEPLOY_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"


def node_not_advertising(node: K8sObject) -> Finding:
    name, lab = o.name(node), o.labels(node)
    keys = (
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.count",
        "nvidia.com/gpu.product",
        *o.NFD_NVIDIA_LABELS,
        DEPLOY_PLUGIN_LABEL,
        "nvidia.com/mig.config",
        ow.MIG_CONFIG_STATE,
    )
    # A resource present at 0 is not "never registered": the kubelet knew the plugin and now counts
    # no device (k8s-device-plugin issues 1228, 1698: the plugin pod still Running).
    zero = sorted(o.gpu_resources(node, "capacity"))
    alloc = o.gpu_resources(node, "allocatable")
    deploy = str(lab.get(DEPLOY_PLUGIN_LABEL) or "")
    paused = ow.operand_paused(node, "device-plugin")
    if paused:
        # The MIG manager (paused-for-mig-change) and the driver manager (paused-for-driver-upgrade)
        # take the plugin away while they work and put it back after: restarting it would fight them.
        why = (
            f"{DEPLOY_PLUGIN_LABEL}={deploy}: the GPU Operator removed its device plugin while it "
            f"{'applies a MIG layout' if paused == ow.PAUSED_FOR_MIG else 'upgrades the driver'}; the GPUs come back when that "
            "finishes (if it does not, that change is the problem to look at, not the plugin)"
        )
    elif deploy == "false":
        why = f"{DEPLOY_PLUGIN_LABEL}=false: the device plugin is turned off on this node (set it to true to offer its GPUs)"
    elif zero:
        why = (
            f"status.capacity holds {', '.join(f'{r}=0' for r in zero)}: the device plugin registered once and "
            "now reports no healthy device, or the kubelet lost its connection to it (restart the device-plugin "
            "pod, then the kubelet if it stays 0)"
        )
    else:
        why = "its device plugin never registered (often the driver failed on a new node)"
    return finding(
        "L1_GPU_NODE_NOT_ADVERTISING",
        f"{name} is labelled as a GPU node but advertises no GPU resource: {why}",
        evidence=[
            *(f"{k}={lab[k]}" for k in keys if k in lab),
            *(
                [f"status.capacity[{r}]=0, status.allocatable[{r}]={alloc.get(r, 0)}" for r in zero]
                or ["no GPU resource in status.capacity"]
            ),
        ],
        commands=[
            f"kubectl describe node {name} | sed -n '/Capacity/,/Allocatable/p'",
            f"kubectl get pods -A -o wide --field-selector spec.nodeName={name} | grep -i nvidia",
        ],
        node=name,
    )


def resource_mismatch(
    missing: list[str],
    requests: Mapping[str, int],
    offered: Mapping[str, list[str]],
    nodes: list[K8sObject],
    labels_cmd: str,
    where: str = "nodes",
) -> Finding:
    strategies = sorted({o.labels(n).get("nvidia.com/mig.strategy", "") for n in nodes} - {""})
    nobody = "no node advertises it" if where == "nodes" else f"none of {where} advertises it"
    evidence = [f"pod requests {r}={requests[r]}; {nobody}" for r in missing]
    evidence += [
        f"{r} advertised by {len(ns)} node(s): {shown(ns, limit=5)}" for r, ns in sorted(offered.items())
    ]
    if strategies:
        evidence.append(f"nvidia.com/mig.strategy={','.join(strategies)}")
    others = ", ".join(sorted(offered))
    return finding(
        "L1_RESOURCE_MISMATCH",
        f"the pod requests {', '.join(missing)} but {where} advertise only {others}: "
        "request the advertised resource (MIG mixed strategy / shared GPUs rename it) or change the config",
        evidence=evidence,
        commands=[capacity_columns(r) for r in [*missing, *sorted(offered)]] + [labels_cmd],
    )
