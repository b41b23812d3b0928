"""The DRA reads of one walk, each made once and cached in the walk context.

The target pod's own claims are read by name (one request per claim, whatever
the number of claims in the cluster); every allocated claim is listed only when
a question needs them all (which devices are taken). ResourceSlices are listed
once with the server-side selector `spec.driver=gpu.nvidia.com`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from layers.facts import dra, draslices
from layers.facts import objects as o
from layers.facts.candidates import untolerated_taints
from layers.facts.dra import Claim, DeviceClass, Matcher, PodClaim, Request
from layers.facts.draslices import Device, Inventory
from layers.facts.placement import selector_misses
from layers.facts.readcache import ReadCache
from layers.sources import K8sObject, SourceError


def classes(ctx: ReadCache) -> dict[str, DeviceClass]:
    return ctx.cached("dra_classes", lambda: dra.read_classes(ctx.cluster.list_dra("DeviceClass")))


def taint_rules(ctx: ReadCache) -> list[K8sObject]:
    return ctx.cached("dra_taint_rules", lambda: ctx.cluster.list_dra("DeviceTaintRule"))


def inventory(ctx: ReadCache) -> Inventory:
    """The GPU inventory; DeviceTaintRules a 403 hides are left out (the caller says so)."""

    def read() -> Inventory:
        slices = ctx.cluster.list_dra("ResourceSlice", field_selector=f"spec.driver={draslices.DRIVER}")
        try:
            rules = taint_rules(ctx)
        except SourceError:
            rules = []
        return draslices.build_inventory(slices, rules)

    return ctx.cached("dra_inventory", read)


def matcher(ctx: ReadCache) -> Matcher:
    """One selector evaluator per walk (its memo is the walk's); classes unreadable: none known."""

    def build() -> Matcher:
        try:
            known = classes(ctx)
        except SourceError:
            known = {}
        return Matcher(known)

    return ctx.cached("dra_matcher", build)


def held_devices(ctx: ReadCache) -> dict[tuple[str, str, str], str]:
    """Device ref -> the claim holding it, from one list of every ResourceClaim (asked only when
    matching devices exist and the question is who holds them)."""
    return ctx.cached("dra_held", lambda: dra.claims_holding(ctx.cluster.list_dra("ResourceClaim")))


def _named(ctx: ReadCache, kind: str, namespace: str, name: str) -> K8sObject | None:
    def read() -> K8sObject | None:
        found = ctx.cluster.list_dra(
            "ResourceClaim" if kind == "ResourceClaim" else "ResourceClaimTemplate",
            namespace=namespace,
            field_selector=f"metadata.name={name}",
        )
        return found[0] if found else None

    return ctx.cached(("dra_named", kind, namespace, name), read)


class PodClaimState(msgspec.Struct, frozen=True):
    """One of the pod's claims: the entry, the ResourceClaim (None: not created, or not found), and the
    requests it makes (the claim's, else its template's)."""

    entry: PodClaim
    claim: Claim | None
    requests: tuple[Request, ...]
    missing: str | None = None  # why there is no claim to read
    # The pod names a ResourceClaimTemplate that does not exist: no claim can be created from it.
    template_missing: bool = False

    @property
    def label(self) -> str:
        if self.claim is not None:
            return f"claim {self.claim.key}" + (
                f" (from template {self.entry.template})" if self.entry.template else ""
            )
        return f"claim {self.entry.name}" + (
            f" (template {self.entry.template})" if self.entry.template else ""
        )


def pod_claims(ctx: ReadCache) -> list[PodClaimState]:
    """The target pod's claims, resolved; SourceError escapes (the caller reports it)."""
    return claims_of(ctx, ctx.pod) if ctx.pod is not None else []


def claims_of(ctx: ReadCache, pod: K8sObject) -> list[PodClaimState]:
    """One pod's claims, resolved (the target's, or a pod on a node walk's node); read once per walk."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")

    def read() -> list[PodClaimState]:
        out = []
        for entry in dra.pod_claims(pod):
            claim_obj = _named(ctx, "ResourceClaim", ns, entry.claim_name) if entry.claim_name else None
            if claim_obj is not None:
                claim = dra.read_claim(claim_obj)
                out.append(PodClaimState(entry, claim, claim.requests))
                continue
            template = _named(ctx, "ResourceClaimTemplate", ns, entry.template) if entry.template else None
            requests = dra.requests_of((template or {}).get("spec", {}).get("spec") or {}) if template else ()
            if entry.claim_name:
                why = f"ResourceClaim {ns}/{entry.claim_name} does not exist"
            elif template is None:
                why = f"ResourceClaimTemplate {ns}/{entry.template} does not exist"
            else:
                why = f"the claim from template {entry.template} is not created yet"
            gone = bool(entry.template) and template is None
            out.append(PodClaimState(entry, None, requests, why, template_missing=gone))
        return out

    name = str((pod.get("metadata") or {}).get("name") or "")
    return ctx.cached(("dra_pod_claims", ns, name), read)


def slice_nodes(ctx: ReadCache) -> frozenset[str]:
    """Nodes that publish GPUs through DRA; none when the slices cannot be read (layer 1 says why)."""
    try:
        return inventory(ctx).nodes_with_slices
    except SourceError:
        return frozenset()


def extended_requests(ctx: ReadCache) -> dict[str, int]:
    """DeviceClass -> count the pod asks for as extended resources DRA serves: the explicit
    `deviceclass.resource.kubernetes.io/<class>`, or a resource no node advertises that a GPU
    DeviceClass names in `spec.extendedResourceName` (the driver's chart maps nvidia.com/gpu)."""
    pod = ctx.pod
    if pod is None:
        return {}
    out = dra.extended_dra_requests(pod)
    wanted = o.pod_requests(pod)
    if not wanted:
        return out
    bound = ctx.bound_node
    try:
        # What the pod's own node advertises answers first: a resource it offers is served, so
        # a bound pod's walk reads the fleet's nodes only for a resource its node does not offer.
        here = ctx.node(bound) if bound else None
        unserved = {r: q for r, q in wanted.items() if here is None or r not in o.advertised(here)}
        if unserved:
            # Some node offers it (usually the first one asked): the fleet is not read node by node.
            nodes = ctx.nodes()
            unserved = {r: q for r, q in unserved.items() if not any(r in o.advertised(n) for n in nodes)}
    except SourceError:
        return out
    if not unserved:
        return out
    try:
        known = classes(ctx)
    except SourceError:
        return out
    for cls in known.values():
        if cls.extended_resource in unserved and dra.is_gpu_class(cls.name, known):
            out[cls.name] = max(out.get(cls.name, 0), unserved[cls.extended_resource])
    return out


def uses_dra_gpus(ctx: ReadCache) -> bool:
    """spec/findings.md, DRA: the pod's claims request a GPU DeviceClass, or it requests the
    extended resource `deviceclass.resource.kubernetes.io/<GPU class>`. A pod with claims that
    cannot be read counts as one (its layer 1 says why)."""
    pod = ctx.pod
    if pod is None:
        return False

    def decide() -> bool:
        if extended_requests(ctx):
            return True
        if not dra.pod_claims(pod):
            return False
        try:
            states = pod_claims(ctx)
        except SourceError:
            return True
        wanted = [opt.device_class for s in states for r in s.requests for opt in r.options()]
        if any(c in dra.GPU_CLASSES for c in wanted):
            return True
        try:
            known = classes(ctx)
        except SourceError:
            return bool(wanted)
        return any(dra.is_gpu_class(c, known) for c in wanted) or any(
            s.claim is None and not s.requests for s in states
        )

    return ctx.cached("dra_uses_gpus", decide)


# --- candidate nodes ------------------------------------------------------------------------------


def requested_classes(ctx: ReadCache) -> set[str]:
    """The GPU DeviceClasses the pod's claims (and DRA extended resources) ask for."""
    pod = ctx.pod
    if pod is None:
        return set()
    wanted = set(extended_requests(ctx))
    with contextlib.suppress(SourceError):  # unreadable claims: layer 1 says so
        wanted |= {opt.device_class for s in pod_claims(ctx) for r in s.requests for opt in r.options()}
    return wanted


def publishes_requested(ctx: ReadCache) -> Callable[[K8sObject], bool]:
    """spec/findings.md, DRA: a candidate publishes devices of the requested class or, when it
    publishes none, is labelled a GPU node — one whose device plugin advertises GPUs belongs to the
    extended-resource pools of a mixed fleet, not to DRA. With the slices unreadable, labels decide.

    A node whose published devices can never satisfy a pending request's selectors (an A100 pool for
    a claim selecting H100s) could not run the pod even healthy and empty (spec: Terms, candidate
    nodes): its tainted GPUs are noise elsewhere, not this pod's answer. A selector gpubot cannot
    evaluate judges nothing: the class alone decides then."""
    try:
        inv: Inventory | None = inventory(ctx)
    except SourceError:
        inv = None
    m = matcher(ctx)
    wanted = requested_classes(ctx)
    pending = _pending_gpu_requests(ctx, m)
    placed = allocated_elsewhere(ctx)

    def carries(node: K8sObject) -> bool:
        if any(not admits(where, node) for _, where in placed):
            return False  # a claim already allocated elsewhere: the pod can only run where its devices are
        devices = inv.on(o.name(node)) if inv is not None else ()
        if not devices:
            # Labelled a GPU node, and not served by a device plugin (a mixed fleet's other pools).
            return o.is_gpu_node(node) and not o.advertised(node)
        if not any(m.in_class(c, d) for c in wanted for d in devices):
            return False
        return all(_could_serve(m, r, devices) for r in pending)

    return carries


def allocated_elsewhere(ctx: ReadCache) -> list[tuple[Claim, Mapping[str, Any]]]:
    """The pod's allocated claims and their allocation's node selector (a shared claim another pod's
    scheduling placed): the scheduler admits the pod only on a node that selector matches
    (`resourceclaim not available on the node` elsewhere)."""
    try:
        states = pod_claims(ctx)
    except SourceError:
        return []
    return [
        (s.claim, s.claim.node_selector)
        for s in states
        if s.claim is not None and s.claim.allocated is not None and s.claim.node_selector
    ]


def admits(node_selector: Mapping[str, Any], node: K8sObject) -> bool:
    """A v1 NodeSelector (ORed terms of matchExpressions and matchFields) matches the node: the
    required-node-affinity rule, which it is."""
    as_affinity = {
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": node_selector}}
        }
    }
    return not selector_misses(as_affinity, node)


def _pending_gpu_requests(ctx: ReadCache, m: Matcher) -> list[Request]:
    """The GPU requests of the pod's claims that are not allocated yet; none when they cannot be read."""
    try:
        states = pod_claims(ctx)
    except SourceError:
        return []
    return [
        r
        for s in states
        if s.claim is None or s.claim.allocated is None
        for r in s.requests
        if any(dra.is_gpu_class(opt.device_class, m.classes) for opt in r.options())
    ]


def _could_serve(m: Matcher, request: Request, devices: Sequence[Device]) -> bool:
    """Some device satisfies one of the request's options (class and selectors, ignoring taints and
    allocation), or an option's selector cannot be evaluated (then it cannot rule the node out)."""
    for opt in request.options():
        if any(m.fits(opt, d) for d in devices):
            return True
        cls = m.classes.get(opt.device_class)
        if any(e in m.errors for e in (*(cls.selectors if cls else ()), *opt.selectors)):
            return True
    return False


def is_dra_gpu_node(ctx: ReadCache) -> Callable[[K8sObject], bool]:
    """A node with a ResourceSlice of driver gpu.nvidia.com, or GPU labels."""
    try:
        with_slices = inventory(ctx).nodes_with_slices
    except SourceError:
        with_slices = frozenset()
    return lambda node: o.name(node) in with_slices or o.is_gpu_node(node)


def _placeable(pod: K8sObject, node: K8sObject) -> bool:
    """The pod's node selector, required affinity and NoSchedule/NoExecute tolerations admit the node."""
    return not selector_misses(pod, node) and not untolerated_taints(pod, node)


def placeable_with_slices(ctx: ReadCache) -> list[str]:
    """Nodes that publish GPUs and admit the pod, whatever class their devices are: where a claim's
    class and selectors are judged when no node publishes the requested class."""
    pod = ctx.pod or {}
    with_slices = slice_nodes(ctx)
    return [o.name(n) for n in ctx.nodes() if o.name(n) in with_slices and _placeable(pod, n)]


def pointed_at(ctx: ReadCache) -> Callable[[K8sObject], bool]:
    """The DRA candidates layer 1 points at: tainted GPUs, or none published (spec: DRA)."""
    try:
        inv: Inventory | None = inventory(ctx)
    except SourceError:
        inv = None

    def pointed(node: K8sObject) -> bool:
        if inv is None:
            return False
        devices = inv.on(o.name(node))
        return not devices or any(d.blocking_taints for d in devices)

    return pointed


def not_via_dra(ctx: ReadCache, carries: Callable[[K8sObject], bool]) -> Callable[[K8sObject], bool]:
    """For a pod that requests an extended resource: a node that advertises none but publishes its
    GPUs through DRA does not carry it (its device plugin is not meant to register). The slices are
    read only when some GPU node advertises nothing."""
    try:
        silent = ctx.some_gpu_node_silent()
    except SourceError:
        silent = False
    via_dra = slice_nodes(ctx) if silent else frozenset()
    if not via_dra:
        return carries
    return lambda node: carries(node) and (bool(o.advertised(node)) or o.name(node) not in via_dra)
