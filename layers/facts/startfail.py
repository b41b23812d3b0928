"""Containers the NVIDIA runtime hook or CDI refused to start, from status and kubelet events.

A container refused at creation never ran, so it has no log: the evidence is its waiting or
terminated `message` and the kubelet's `Failed` / `FailedCreatePodSandBox` events, where the
runtime wraps the hook's one line in its own OCI error text. containerd:
`failed to create containerd task: failed to create shim task: OCI runtime create failed: runc
create failed: … error running hook #0: error running hook: exit status 1, stdout: , stderr:
Auto-detected mode as 'legacy'\\nnvidia-container-cli: requirement error: unsatisfied condition:
cuda>=12.9, please update your driver …: unknown`; CRI-O/crun: `container create failed: error
executing hook `/usr/local/nvidia/toolkit/nvidia-container-runtime-hook` (exit code: 1)`; Docker
(cri-dockerd) nests the same line in escaped quotes. One reader, shared by layer 2 (the target
pod), layer 3 (what the image requires) and a node walk (the pods on the node).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from msgspec.structs import replace

from layers.facts import objects as o
from layers.facts.context import WalkContext, component
from layers.facts.drastart import DraStart, claim_containers, dra_start, waits_for_domain
from layers.facts.logsigs import event_line, event_message
from layers.sources import K8sObject, SourceError

# Waiting reasons under which the kubelet reports a refused create/start; a container in
# CrashLoopBackOff after a refused start keeps the refusal in lastState (reason StartError).
START_REASONS = frozenset({"CreateContainerError", "RunContainerError", "StartError"})
# FailedPrepareDynamicResources: the kubelet could not prepare a DRA claim, so no container is created.
EVENT_REASONS = frozenset(
    {"Failed", "FailedCreatePodSandBox", "FailedStart", "BackOff", "FailedPrepareDynamicResources"}
)

_VERSION = r"\d{1,4}(?:\.\d{1,4}){0,3}"
# The hook's requirement check (libnvidia-container): "unsatisfied condition: cuda>=12.9", with
# or without spaces ("cuda >= 9.0" before 1.0), for cuda, driver, brand or arch.
_REQUIREMENT = re.compile(
    r"requirement\s+error:\s*unsatisfied\s+condition:\s*"
    rf"(?P<what>[a-z]{{1,12}})\s*(?P<op>>=|<=|==|!=|=|>|<)\s*(?P<value>{_VERSION}|[\w.-]{{1,40}})",
    re.IGNORECASE,
)
_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        # First: the plugin's error inside may quote a driver or CDI failure; the claim is the story.
        ("dra-prepare", r"Failed\s+to\s+prepare\s+dynamic\s+resources(?::\s*(?P<detail>[^\n]{0,200}))?"),
        ("driver-not-loaded", r"nvml\s+error:\s*driver\s+not\s+loaded"),
        ("driver-rpc", r"driver\s+rpc\s+error(?::\s*(?P<detail>[\w ]{1,40}))?"),
        # NVML's "Driver/library version mismatch": the loaded kernel module is not the library's version.
        ("driver-mismatch", r"nvml\s+error:\s*(?P<detail>driver/library\s+version\s+mismatch)"),
        ("driver-library", r"load\s+library\s+failed:\s*(?P<detail>libnvidia-ml\.so[\w.]{0,8})"),
        ("driver-error", r"initialization\s+error:\s*driver\s+error:\s*(?P<detail>[\w ]{1,60})"),
        (
            "cdi-unresolvable",
            r"unresolvable\s+CDI\s+devices?\s+(?P<detail>[^\s,:]{1,200}(?:,\s*[^\s,:]{1,200}){0,15})",
        ),
        # runc bind-mounting a driver library the CDI spec (or the hook) names, gone from the host: the
        # spec was generated for the driver before an upgrade. runc 1.1+: `error mounting "…" to rootfs at
        # "…": …`; before: `mounting "…" to rootfs at "…" caused: …` (Docker escapes the quotes).
        (
            "driver-mount",
            r"mounting\s+\"?(?P<detail>/[^\"\s]{0,200}/(?:libcuda|libnvidia-[\w-]{1,40}|libnv[a-z]{1,20}"
            r"|lib[A-Za-z]{1,12}_nvidia)\.so[\w.]{0,24})\"?\s+to\s+rootfs",
        ),
        ("unknown-device", r"device\s+error:\s*(?P<detail>[^:\s]{1,120}):\s*unknown\s+device"),
        (
            "hook-failed",
            r"error\s+executing\s+hook\s+[`'\"]?(?P<detail>[^\s`'\"]{0,200}nvidia[^\s`'\"]{0,60})",
        ),
        ("hook-failed", r"nvidia-container-cli(?:\.real)?:\s*(?P<detail>[a-z ]{1,30}error:[^\n]{0,200})"),
    )
)
# Where the hook's own words start inside the runtime's wrapping.
_CORE = re.compile(
    r"nvidia-container-cli(?:\.real)?:|unresolvable\s+CDI|error\s+executing\s+hook|CDI\s+device\s+injection"
    r"|Failed\s+to\s+prepare\s+dynamic\s+resources|(?:error\s+)?mounting\s+\"?/",
    re.IGNORECASE,
)
# A run of backslashes starts only at its first one: otherwise every position inside a long run
# rescans the rest of it (quadratic on hostile text).
_ESCAPED = re.compile(r"(?<!\\)\\+[nt\"]")
DRIVER_CAUSES = frozenset(
    {"driver-not-loaded", "driver-rpc", "driver-mismatch", "driver-library", "driver-error", "driver-mount"}
)


class Requirement(msgspec.Struct, frozen=True):
    """What the image asks of the node, e.g. cuda >= 12.9 (from NVIDIA_REQUIRE_CUDA)."""

    what: str  # "cuda", "driver", "brand", "arch"
    op: str
    value: str

    @property
    def version(self) -> tuple[int, ...] | None:
        return parse_version(self.value)

    def __str__(self) -> str:
        return f"{self.what}{self.op}{self.value}"


class StartFailure(msgspec.Struct, frozen=True):
    """One container the NVIDIA runtime hook or CDI refused."""

    namespace: str
    pod: str
    node: str | None
    container: str  # "" when only a sandbox event names the pod
    reason: str  # CreateContainerError, RunContainerError, StartError, or the event's reason
    cause: str  # requirement, driver-not-loaded, driver-rpc, driver-mismatch, cdi-unresolvable, …
    detail: str  # the device, the library, the rpc error …
    core: str  # the hook's own words, unwrapped
    where: str  # "status" or "event"
    raw: str  # the message as the kubelet gave it, whitespace collapsed
    requirement: Requirement | None = None
    dra: DraStart | None = None  # the DRA claim and kubelet plugin behind it (layers/facts/drastart.py)

    @property
    def names_driver(self) -> bool:
        """The message names the driver or a CUDA/driver requirement: layer 3 explains it."""
        return self.cause in DRIVER_CAUSES or (
            self.requirement is not None and self.requirement.what.lower() in ("cuda", "driver")
        )


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """`12.9` → (12, 9), `570.158.01` → (570, 158, 1): numbers, never compared as strings."""
    if not text:
        return None
    m = re.match(rf"\s*({_VERSION})", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def unwrap(message: str) -> str:
    """The hook's own words out of the runtime's wrapping: from `nvidia-container-cli:` (or the CDI /
    hook error) on, nested escapes undone, without the trailing `: unknown`."""
    text = " ".join(_ESCAPED.sub(" ", message).replace('"', " ").split())
    m = _CORE.search(text)
    core = text[m.start() :] if m else text
    return re.sub(r"(?::\s*unknown\.?)+\s*$", "", core).strip()


def classify(message: str) -> tuple[str, str, Requirement | None] | None:
    """(cause, detail, requirement) when the message is the NVIDIA hook's or CDI's refusal."""
    text = _ESCAPED.sub(" ", message)
    m = _REQUIREMENT.search(text)
    if m:
        req = Requirement(m.group("what").lower(), m.group("op"), m.group("value"))
        return "requirement", str(req), req
    for cause, pattern in _CAUSES:
        hit = pattern.search(text)
        if hit:
            detail = (hit.groupdict().get("detail") or "").strip()
            return cause, detail, None
    return None


def _failure(pod: K8sObject, container: str, reason: str, message: str, where: str) -> StartFailure | None:
    got = classify(message)
    if got is None:
        return None
    cause, detail, req = got
    if cause == "dra-prepare" and waits_for_domain(message):
        return None  # the node's IMEX daemon has not joined: L2_COMPUTE_DOMAIN_NOT_READY quotes it
    return StartFailure(
        namespace=o.namespace(pod) or "",
        pod=o.name(pod),
        node=o.pod_node(pod),
        container=container,
        reason=reason,
        cause=cause,
        detail=detail,
        core=unwrap(message),
        where=where,
        raw=" ".join(message.split()),
        requirement=req,
    )


def _status_messages(s: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(reason, message) of a refused create/start in one container status."""
    waiting = (s.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in START_REASONS and waiting.get("message"):
        yield str(waiting["reason"]), str(waiting["message"])
    for key in ("state", "lastState"):
        term = (s.get(key) or {}).get("terminated") or {}
        if term.get("message") and (term.get("reason") == "StartError" or term.get("exitCode") == 128):
            yield str(term.get("reason") or "StartError"), str(term["message"])


_FIELD_CONTAINER = re.compile(r"spec\.(?:init)?[cC]ontainers\{(?P<name>[^}]+)\}")


def start_failures(pod: K8sObject, events: Iterable[K8sObject] = ()) -> list[StartFailure]:
    """Every refusal of the pod's containers, from its status and from the kubelet's events:
    one per container, cause and witness (status first)."""
    seen: dict[tuple[str, str, str], StartFailure] = {}
    for _init, s in o.iter_all_statuses(pod):
        for reason, message in _status_messages(s):
            f = _failure(pod, str(s.get("name") or ""), reason, message, "status")
            if f is not None:
                seen.setdefault((f.container, f.cause, f.where), f)
    for ev in events:
        if ev.get("reason") not in EVENT_REASONS:
            continue
        field = str((ev.get("involvedObject") or {}).get("fieldPath") or "")
        m = _FIELD_CONTAINER.search(field)
        f = _failure(pod, m.group("name") if m else "", str(ev.get("reason")), event_message(ev), "event")
        if f is not None:
            # An event's failure keeps the event as `kubectl describe` shows it (count, source).
            seen.setdefault((f.container, f.cause, f.where), replace(f, raw=event_line(ev)))
    return list(seen.values())


# --- what a walk reads ------------------------------------------------------------------------


class WalkStartFailures(msgspec.Struct, frozen=True):
    """The start failures a walk concerns, read once and shared by layers 2 and 3."""

    failures: tuple[StartFailure, ...]
    errors: tuple[tuple[str, SourceError], ...] = ()  # (what could not be read, why)


def walk_start_failures(ctx: WalkContext) -> WalkStartFailures:
    """The target pod's refused containers (status and its events); for a node walk, those of the
    pods on the node that are not the GPU Operator's (statuses only: one list, no event read per pod)."""
    return ctx.cached("start_failures", lambda: _read(ctx))


def _read(ctx: WalkContext) -> WalkStartFailures:
    pod = ctx.pod
    if pod is not None:
        ns, name = o.namespace(pod) or "", o.name(pod)
        try:
            events = ctx.events("Pod", ns, name)
        except SourceError as err:
            found = _with_dra(ctx, pod, start_failures(pod))
            return WalkStartFailures(tuple(found), ((f"the events of {ns}/{name}", err),))
        return WalkStartFailures(tuple(_with_dra(ctx, pod, start_failures(pod, events))))
    node = ctx.target.node
    if not node:
        return WalkStartFailures(())
    try:
        pods = ctx.cached(
            ("pods_on", node), lambda: ctx.cluster.list_pods(field_selector=f"spec.nodeName={node}")
        )
    except SourceError as err:
        return WalkStartFailures((), ((f"the pods on {node}", err),))
    found = [f for p in pods if component(p) is None for f in _with_dra(ctx, p, start_failures(p))]
    return WalkStartFailures(tuple(found))


def _with_dra(ctx: WalkContext, pod: K8sObject, failures: list[StartFailure]) -> list[StartFailure]:
    """The target's refusals with their DRA claim and kubelet plugin; a claim prepare failure stands
    for each container that uses the claim; one of another vendor's DRA driver is left out."""
    out: list[StartFailure] = []
    for f in failures:
        if f.cause not in ("cdi-unresolvable", "dra-prepare"):
            out.append(f)
            continue
        facts = dra_start(ctx, pod, f.cause, f.raw)
        if facts is None:
            if f.cause != "dra-prepare":
                out.append(f)
            continue
        f = replace(f, dra=facts)
        users = [] if f.container else claim_containers(pod, facts.claim)
        out += [replace(f, container=c) for c in users] or [f]
    return out
