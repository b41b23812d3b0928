"""Layer 3's L3_DRIVER_IMAGE_UNAVAILABLE: the driver pod cannot pull its image because no such image
exists — the operator publishes `nvcr.io/nvidia/driver:<version>-<os><release>` only for the
versions and OSes it supports, and a pool pinned to a version with no build for its OS gets
`ImagePullBackOff` (the playbook's "the OS differs per node and the driver image does not match").

A pull refused for other reasons (credentials, a registry unreachable) is not this: only the
runtime's not-found words count, in containerd's and CRI-O's spellings:
- containerd: `failed to resolve reference "…": …: not found` (`code = NotFound`);
- CRI-O: `reading manifest … in …: manifest unknown` (`code = Unknown`), `… does not exist`.
"""

from __future__ import annotations

import re
from collections import Counter

from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.fold import listed
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError

LAYER = 3
_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff")
_NOT_FOUND = re.compile(
    r"\bnot\s+found\b|\bNotFound\b|manifest\s+unknown|does\s+not\s+exist|\bname\s+unknown\b", re.IGNORECASE
)
_PULL_FAILED = re.compile(r"Failed to pull image", re.IGNORECASE)
# The driver image's tag: "<version>-<os><release>", e.g. 550.54.15-ubuntu24.04, 570.86.15-rhel9.4,
# 535.230.02-rhcos4.16; a precompiled tag ("535-5.15.0-1047-aws-ubuntu22.04") names its kernel too.
_VERSION = re.compile(r"\d{3}(?:\.\d{1,3}){0,2}")
_OS = re.compile(r"(?P<os>[a-z]{3,12})(?P<rel>\d{1,2}(?:\.\d{1,2})?)")


def tag_parts(image: str) -> tuple[str, str] | None:
    """(driver version, OS with release) the image's tag names, or None when it names no such pair."""
    tag = image.rsplit("/", 1)[-1].partition("@")[0]
    if ":" not in tag:
        return None
    parts = tag.rsplit(":", 1)[1].split("-")
    if len(parts) < 2 or not _VERSION.fullmatch(parts[0]) or not _OS.fullmatch(parts[-1]):
        return None
    return parts[0], parts[-1]


def _waiting_pull(pod: K8sObject) -> list[tuple[str, str, str]]:
    """(container, image, status line) of each container waiting on its image pull."""
    specs = {
        str(c.get("name")): str(c.get("image") or "")
        for key in ("containers", "initContainers")
        for c in (pod.get("spec") or {}).get(key) or []
    }
    out = []
    for _, s in o.iter_all_statuses(pod):
        waiting = (s.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        if reason in _PULL_REASONS:
            name = str(s.get("name"))
            image = specs.get(name) or str(s.get("image") or "")
            out.append(
                (
                    name,
                    image,
                    f"{name}: waiting {reason}: {' '.join(str(waiting.get('message') or '').split())}",
                )
            )
    return out


def _not_found_lines(ctx: WalkContext, pod: K8sObject, image: str, status: str) -> list[str]:
    lines = [status] if _NOT_FOUND.search(status) else []
    try:
        events = ctx.events("Pod", o.namespace(pod), o.name(pod))
    except SourceError:
        events = []
    for ev in sorted(events, key=sig.event_time):
        msg = sig.event_message(ev)
        if (
            str(ev.get("reason")) == "Failed"
            and _PULL_FAILED.search(msg)
            and image in msg
            and _NOT_FOUND.search(msg)
        ):
            lines.append(sig.event_line(ev)[: sig.EVIDENCE_CHARS])
    return lines[-3:]


def _running_oses(ctx: WalkContext, node: str) -> list[str]:
    """The OS images of the GPU nodes whose driver works (they advertise GPUs), with their counts."""
    try:
        nodes = ctx.gpu_nodes()
    except SourceError:
        return []
    counts = Counter(
        o.node_info(n).get("osImage") or "unknown OS" for n in nodes if o.name(n) != node and o.advertises(n)
    )
    return [f"{os_image}: {c} GPU node(s) advertising GPUs" for os_image, c in counts.most_common()]


def driver_image_unavailable(ctx: WalkContext, node: str, drivers: list[K8sObject]) -> list[Finding]:
    out: list[Finding] = []
    node_obj = ctx.node(node)
    info = o.node_info(node_obj) if node_obj is not None else {}
    for pod in drivers:
        for container, image, status in _waiting_pull(pod):
            tag = tag_parts(image)
            if tag is None:
                continue
            found = _not_found_lines(ctx, pod, image, status)
            if not found:
                continue
            ver, target = tag
            os_image = info.get("osImage") or "an OS not reported"
            ns, name = o.namespace(pod), o.name(pod)
            out.append(
                finding(
                    "L3_DRIVER_IMAGE_UNAVAILABLE",
                    f"the driver image {image} does not exist: the GPU Operator publishes no driver {ver} for "
                    f"{target}, which {node} runs ({os_image}) — pin a driver version published for {target} "
                    "(the NVIDIADriver's or ClusterPolicy's spec.version), or put this pool on an OS that "
                    f"driver {ver} is published for",
                    evidence=[
                        f"image: {image} ({ns}/{name}, container {container})",
                        f"{node}: osImage {os_image}, kernel {info.get('kernelVersion') or 'not reported'}",
                        *found,
                        *listed(_running_oses(ctx, node)),
                    ],
                    commands=[
                        f"kubectl describe pod -n {ns} {name} | sed -n '/Events/,$p'",
                        f"kubectl get node {node} -o jsonpath='{{.status.nodeInfo.osImage}} {{.status.nodeInfo.kernelVersion}}'",
                        "kubectl get nodes -o custom-columns='NODE:.metadata.name,OS:.status.nodeInfo.osImage' -l nvidia.com/gpu.present=true",
                        f"crane ls nvcr.io/nvidia/driver | grep '^{ver}-'",
                    ],
                    node=node,
                )
            )
    return out
