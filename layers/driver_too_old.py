"""Layer 3: the image needs a newer CUDA than the node's driver supports (L3_DRIVER_TOO_OLD).

The requirement comes from the runtime hook's refusal (`unsatisfied condition: cuda>=12.9`, read
by layers/startfail.py) or from the application's own words (`CUDA driver version is
insufficient for CUDA runtime version`, PyTorch's `The NVIDIA driver on your system is too old
(found version 12040)`); what the node supports is GFD's `nvidia.com/cuda.runtime-version.*`
(the CUDA version its driver supports) and `nvidia.com/cuda.driver-version.*`. Versions compare
as numbers: 12.10 is newer than 12.9.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import msgspec

from layers.facts import drareads
from layers.facts import fleet as fl
from layers.facts import objects as o
from layers.facts import podstatus as ps
from layers.facts.candidates import candidate_nodes, carries_requested
from layers.facts.context import WalkContext
from layers.facts.fold import shown
from layers.facts.logsigs import clip, lines_of
from layers.facts.startfail import parse_version, walk_start_failures
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 3
_TOO_OLD = re.compile(
    r"NVIDIA\s+driver\s+on\s+your\s+system\s+is\s+too\s+old\s*\(found\s+version\s+(\d{4,6})\)", re.I
)
_INSUFFICIENT = re.compile(
    r"CUDA\s+driver\s+version\s+is\s+insufficient\s+for\s+CUDA\s+runtime\s+version", re.I
)
# The CUDA version an image is built for, from its tag: nvidia/cuda:12.9.0-…, …-cuda12.8-…, cu128.
_IMAGE_CUDA = (
    re.compile(r"(?<![a-z])cuda[:_-]?(\d{1,2})\.(\d{1,2})", re.I),
    re.compile(r"(?<![a-z])cu(1\d)(\d)(?!\d)", re.I),
)

Version = tuple[int, ...]


class Need(msgspec.Struct, frozen=True):
    """What the target needs of a node's driver, and the words that say so."""

    node: str
    what: str  # "cuda" or "driver"
    at_least: Version | None  # None: only "newer than the node's" is known
    newer_than: Version | None  # the version the application found (its "found version")
    said: str  # the line or message that says it
    where: str  # "container X (status)", "container X log" …


def _fmt(v: Version | None) -> str:
    return ".".join(map(str, v)) if v else "?"


def cuda_of_int(n: int) -> Version:
    """CUDA's integer version (cudaDriverGetVersion): 12040 → 12.4."""
    return (n // 1000, (n % 1000) // 10)


def image_cuda(images: Iterable[str]) -> Version | None:
    """The CUDA version an image's tag names, when it names one (the newest among the images)."""
    found: list[Version] = []
    for image in images:
        tag = image.rsplit("/", 1)[-1]
        for pattern in _IMAGE_CUDA:
            m = pattern.search(tag)
            if m:
                found.append((int(m.group(1)), int(m.group(2))))
                break
    return max(found) if found else None


def _node_has(versions: fl.Versions, node: K8sObject | None, what: str) -> Version | None:
    driver, cuda, _ = versions(node)
    return parse_version(cuda if what == "cuda" else driver)


def needs(ctx: WalkContext, log: Callable[[K8sObject, str, bool], str | None]) -> list[Need]:
    """What the target's start failures and logs say it needs, per node."""
    out: list[Need] = []
    for f in walk_start_failures(ctx).failures:
        req = f.requirement
        if (
            req is None
            or req.what not in ("cuda", "driver")
            or not f.node
            or req.op not in (">=", ">", "=", "==")
        ):
            continue
        need = Need(f.node, req.what, req.version, None, f.core, f"container {f.container} ({f.reason})")
        if all((n.node, n.what, n.at_least) != (need.node, need.what, need.at_least) for n in out):
            out.append(need)  # the status and the kubelet's event say it twice
    pod, node = ctx.pod, ctx.bound_node
    if pod is None or not node or out:
        return out
    images = [str(c.get("image") or "") for c in [*o.containers(pod, init=True), *o.containers(pod)]]
    for c in [*o.containers(pod, init=True), *o.containers(pod)]:
        name = str(c.get("name"))
        for previous in (False, True) if ps.restarted(pod, name) else (False,):
            for line in lines_of(log(pod, name, previous)):
                hit = _TOO_OLD.search(line) or _INSUFFICIENT.search(line)
                if hit is None:
                    continue
                have = cuda_of_int(int(hit.group(1))) if hit.re is _TOO_OLD else None
                tag = image_cuda([str(c.get("image") or "")]) or image_cuda(images)
                at_least = tag if tag and (have is None or tag > have) else None
                where = f"container {name}{' (previous)' if previous else ''} log"
                return [Need(node, "cuda", at_least, have, clip(line, hit.start()), where)]
    return out


def satisfies(node: K8sObject, need: Need, versions: fl.Versions) -> bool:
    have = _node_has(versions, node, need.what)
    if have is None:
        return False
    if need.at_least is not None:
        return have >= need.at_least
    return need.newer_than is not None and have > need.newer_than


def runnable_nodes(ctx: WalkContext, nodes: list[K8sObject]) -> dict[str, str]:
    """Why the target pod could not run on each of these nodes now (absent: it could): not a
    candidate by its selectors, affinity, taints and requested resource, not Ready, cordoned, or
    with allocatable below capacity. A node walk (no pod) keeps only the node-state rules."""
    pod = ctx.pod
    out: dict[str, str] = {}
    if pod is not None:
        if drareads.uses_dra_gpus(ctx):
            cands = candidate_nodes(
                pod, nodes, drareads.publishes_requested(ctx), drareads.is_dra_gpu_node(ctx)
            )
        else:
            cands = candidate_nodes(pod, nodes, carries_requested(pod))
        out.update({n: why for n, why in cands.excluded.items()})
    for node in nodes:
        name = o.name(node)
        if name in out:
            continue
        if not o.node_ready(node):
            out[name] = "not Ready"
        elif o.is_unschedulable(node):
            out[name] = "cordoned"
        elif o.allocatable_gaps(node):
            out[name] = "allocatable below capacity"
    return out


def driver_too_old(ctx: WalkContext, log: Callable[[K8sObject, str, bool], str | None]) -> list[Finding]:
    out: list[Finding] = []
    found = needs(ctx, log)
    versions = fl.node_versions(ctx) if found else (lambda _n: (None, None, ""))
    for need in found:
        node_obj = ctx.node(need.node)
        have = _node_has(versions, node_obj, need.what)
        label = "CUDA" if need.what == "cuda" else "driver"
        wanted = (
            f"{label} >= {_fmt(need.at_least)}"
            if need.at_least
            else f"a newer {label} than {_fmt(need.newer_than or have)}"
        )
        floor = need.newer_than or have
        probe = Need(need.node, need.what, need.at_least, floor, need.said, need.where)
        if have is not None and need.at_least is not None and have >= need.at_least:
            out.append(
                unknown(
                    LAYER,
                    f"{need.where} says the image needs {wanted}, yet {need.node}'s labels say its driver "
                    f"supports {label} {_fmt(have)}: the GFD labels may be stale (restart GFD on the node)",
                    node=need.node,
                    evidence=[need.said],
                )
            )
            continue
        try:
            fleet_nodes = ctx.gpu_nodes()
            placeable = runnable_nodes(ctx, fleet_nodes)
        except SourceError:
            fleet_nodes, placeable = [], {}
        newer = [n for n in fleet_nodes if o.name(n) != need.node and satisfies(n, probe, versions)]
        # Only nodes the pod could run on now (spec: L3_DRIVER_TOO_OLD suggestions): a cordoned node,
        # one with lost GPUs or one its selector or taints keep it off is no place to send it.
        good = [n for n in newer if o.name(n) not in placeable]
        kept_off = [f"{o.name(n)} ({placeable[o.name(n)]})" for n in newer if o.name(n) in placeable]
        known_driver, known_cuda, source = versions(node_obj)
        driver = known_driver or "unknown (no GFD label or DRA attribute)"
        cuda = known_cuda or "unknown"
        listed = shown([f"{o.name(n)} (driver {versions(n)[0]}, CUDA {versions(n)[1]})" for n in good])
        fleet_line = (
            f"GPU nodes the pod could run on whose driver would do ({len(good)} of {len(fleet_nodes)}): {listed}"
            if good
            else f"no GPU node of the fleet ({len(fleet_nodes)}) the pod could run on has a driver that would do: "
            "upgrade the driver (ClusterPolicy or NVIDIADriver spec.version) or use an image built for an older CUDA"
        )
        off_line = (
            [f"newer drivers the pod cannot use now ({len(kept_off)}): {shown(kept_off, limit=5)}"]
            if kept_off
            else []
        )
        where_to = (
            f"run it on {shown([o.name(n) for n in good], limit=3)}"
            if good
            else "upgrade the node's driver"
            + (
                f" ({len(kept_off)} node(s) with a newer one exist, but the pod cannot run there now)"
                if kept_off
                else ""
            )
        )
        out.append(
            finding(
                "L3_DRIVER_TOO_OLD",
                (
                    f"the image needs {wanted} but the driver on {need.node} ({driver}) supports CUDA {cuda}: "
                    f"{where_to}, or use an image built for CUDA {cuda}"
                    if known_cuda
                    else f"the image needs {wanted}, more than the driver on {need.node} supports (the node reports "
                    f"no CUDA version: no GFD label, no DRA attribute): {where_to}, or use an image built for an "
                    "older CUDA"
                ),
                evidence=[
                    f"requirement ({need.where}): {need.said}",
                    f"{need.node}: "
                    + (
                        _version_labels(node_obj)
                        if source == fl.GFD
                        else f"driverVersion {driver}, cudaDriverVersion {cuda} ({source or 'not reported'})"
                    ),
                    fleet_line,
                    *off_line,
                ],
                commands=[
                    "kubectl get nodes -l nvidia.com/gpu.present=true -L "
                    + ",".join(_LABEL_COLUMNS[:5] if _old_gfd(node_obj) else _LABEL_COLUMNS[5:]),
                    *(
                        [f"kubectl get resourceslices --field-selector spec.nodeName={need.node} -o yaml"]
                        if source == fl.DRA_SLICE
                        else []
                    ),
                ],
                node=need.node,
            )
        )
    return out


# GFD v0.15+ writes cuda.driver-version.* / cuda.runtime-version.*; older GFD (GPU Operator v23.x) only
# the now deprecated cuda.driver.* / cuda.runtime.*: the evidence names the labels the node carries.
_VERSION_LABELS = ("nvidia.com/cuda.driver-version.", "nvidia.com/cuda.runtime-version.", "nvidia.com/cuda.driver.",
                   "nvidia.com/cuda.runtime.")  # fmt: skip
_LABEL_COLUMNS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.runtime-version.full",
)


def _version_labels(node: K8sObject | None) -> str:
    """The node's GFD driver/CUDA labels as `key=value`, the `.full` ones alone when present."""
    labels = o.labels(node or {})
    found = {k: v for k, v in labels.items() if k.startswith(_VERSION_LABELS)}
    full = {k: v for k, v in found.items() if k.endswith(".full")}
    return ", ".join(f"{k}={v}" for k, v in sorted((full or found).items()))


def _old_gfd(node: K8sObject | None) -> bool:
    labels = o.labels(node or {})
    return not any(k.startswith(_VERSION_LABELS[:2]) for k in labels) and any(
        k.startswith(_VERSION_LABELS[2:]) for k in labels
    )
