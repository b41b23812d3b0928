"""Layer 1 for DRA pods, what the published inventory says about a claim's requests: no device
published (the kubelet plugin is not running there), devices tainted, selectors no published device
satisfies, or matching devices all held by other claims (spec/findings.md, DRA table)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import msgspec

from layers.dra import DRIVER_PODS_CMD, SLICES_CMD, slice_cmd
from layers.facts import dra, draslices
from layers.facts.devicecel import UNSUPPORTED_HERE, compile_selector
from layers.facts.dra import Matcher, Request
from layers.facts.draslices import Device, Inventory
from layers.facts.fold import MAX_LISTED, listed, shown
from layers.facts.placement import one_node
from layers.findings import Finding, finding, unknown

# --- the tainted devices -------------------------------------------------------------------------


def tainted_finding(
    node: str, devices: Sequence[Device], own: frozenset[tuple[str, str, str]] = frozenset()
) -> Finding:
    """L1_DRA_DEVICE_TAINTED for one node: its GPUs with a NoSchedule/NoExecute taint."""
    lines = []
    for d in devices:
        mine = " (allocated to this pod)" if d.ref in own else ""
        for t in d.blocking_taints:
            source = f", from DeviceTaintRule {t.rule}" if t.rule else ""
            added = f", added {t.time_added}" if t.time_added else ""
            lines.append(f"{node} {d.label}: taint {t.text}{added}{source}{mine}")
    keys = sorted({t.key for d in devices for t in d.blocking_taints})
    return finding(
        "L1_DRA_DEVICE_TAINTED",
        f"{node} publishes {len(devices)} GPU(s) tainted {', '.join(keys)}: the DRA driver took them out "
        "of service, look at the card",
        evidence=listed(lines),
        commands=[slice_cmd(node), "kubectl get devicetaintrules -o wide"],
        node=node,
    )


def tainted_on(inventory: Inventory, nodes: Iterable[str]) -> dict[str, list[Device]]:
    out: dict[str, list[Device]] = {}
    for n in nodes:
        hit = [d for d in inventory.on(n) if d.blocking_taints]
        if hit:
            out[n] = hit
    return out


# --- layer 1 -------------------------------------------------------------------------------------


class Need(msgspec.Struct, frozen=True):
    """One request of an unallocated claim, with the claim it belongs to."""

    claim: str
    request: Request

    @property
    def count(self) -> int:
        return self.request.count if self.request.mode == "ExactCount" else 1


def problems_finding(inv: Inventory) -> list[Finding]:
    if not inv.problems:
        return []
    return [
        unknown(
            1,
            f"{len(inv.problems)} part(s) of the published GPU inventory could not be read and were left out",
            evidence=listed(list(inv.problems)),
        )
    ]


def no_devices_anywhere(inv: Inventory) -> Finding:
    why = f"{inv.slices} slice(s) of the driver, none with a current device" if inv.slices else "none exists"
    return finding(
        "L1_DRA_NO_DEVICES",
        f"no ResourceSlice of driver {draslices.DRIVER} publishes a GPU: the DRA kubelet plugin is not running anywhere",
        evidence=[f"ResourceSlices of driver {draslices.DRIVER}: {why}"],
        commands=[SLICES_CMD, DRIVER_PODS_CMD],
    )


def no_devices_on(node: str, empty_slice: bool = False, plugin: str = "") -> Finding:
    """A GPU node that publishes no GPU: no slice at all (the plugin is not running), or a slice with no
    device (the plugin runs but enumerated none: its driver root, or NVML, on that node). `plugin`: the
    node's kubelet plugin pod and its state, as evidence."""
    commands = [
        slice_cmd(node),
        f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep -i dra",
    ]
    seen = [f"{node}: {plugin}"] if plugin else []
    if empty_slice:
        return finding(
            "L1_DRA_NO_DEVICES",
            f"{node} is a GPU node but its ResourceSlice of driver {draslices.DRIVER} lists no device: the DRA "
            "kubelet plugin runs there but found no GPU — check its driver root (nvidiaDriverRoot, e.g. "
            "/home/kubernetes/bin/nvidia on GKE) and its log",
            evidence=[
                f"{node}: the current ResourceSlice with spec.driver={draslices.DRIVER}, spec.nodeName={node} "
                "has spec.devices empty",
                *seen,
            ],
            commands=commands,
            node=node,
        )
    return finding(
        "L1_DRA_NO_DEVICES",
        f"{node} is a GPU node but publishes no ResourceSlice of driver {draslices.DRIVER}: the DRA kubelet plugin "
        "is not running there",
        evidence=[
            f"{node}: no ResourceSlice with spec.driver={draslices.DRIVER}, spec.nodeName={node}",
            *seen,
        ],
        commands=commands,
        node=node,
    )


# The API server compiles and type-checks every selector before it stores a claim or class, in the
# environment layers/facts/kubecel.py rebuilds: an expression that does not compile there is one the
# API server rejects too (the claim's error), unless it uses what Kubernetes has and gpubot's runtime
# lacks (UNSUPPORTED_HERE: gpubot cannot say). Runtime errors (no such key, no such overload) happen
# on the scheduler's devices too.
_NOT_HERE = (UNSUPPORTED_HERE,)


def selector_broken(expressions: Sequence[str], m: Matcher) -> list[Finding]:
    """What a selector that does not evaluate means: the scheduler fails on it too, or gpubot cannot say."""
    commands = [
        "kubectl get resourceclaims -A -o yaml | grep -A3 'cel:'",
        "kubectl get deviceclasses -o yaml",
    ]
    ours = [e for e in expressions if any(w in m.errors[e] for w in _NOT_HERE)]
    theirs = [e for e in expressions if e not in ours]
    out = []
    if theirs:
        out.append(
            finding(
                "L1_DRA_SELECTOR_UNSATISFIED",
                f"a CEL selector of the claim cannot be evaluated ({m.errors[theirs[0]]}): "
                "the scheduler cannot allocate it on any node; fix the expression",
                evidence=[f"{e}: {m.errors[e]}" for e in theirs],
                commands=commands,
            )
        )
    if ours:
        out.append(
            unknown(
                1,
                f"gpubot cannot evaluate the claim's CEL selector here ({m.errors[ours[0]]}); the API server "
                "accepted it, so which devices match is not checked — the scheduler's messages say why the "
                "claim is not allocated",
                evidence=[f"{e}: {m.errors[e]}" for e in ours],
            )
        )
    return out


def _published_values(expressions: Sequence[str], devices: Iterable[tuple[str, Device]]) -> list[str]:
    """The values nodes publish for the attributes and capacities the expressions name."""
    names: set[str] = set()
    for e in expressions:
        sel = compile_selector(e)
        names |= set(sel.names or ())
    seen: Counter[tuple[str, str]] = Counter()
    nodes_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for node, d in devices:
        for qualified in (*d.facts.attributes, *d.facts.capacity):
            ident = qualified.rpartition("/")[2]
            if ident in names and ident not in ("uuid",):
                value = d.attribute(qualified) or d.facts.capacity.get(qualified, "")
                seen[(qualified, value)] += 1
                nodes_of[(qualified, value)].add(node)
    return [
        f"published {k}={v!r} on {seen[(k, v)]} device(s) of {len(nodes_of[(k, v)])} node(s)"
        for k, v in sorted(seen)
    ][:MAX_LISTED]


def selector_unsatisfied(
    needs: Sequence[Need], fitting: dict[str, list[list[Device]]], inv: Inventory, m: Matcher
) -> Finding:
    lines = []
    for i, need in enumerate(needs):
        for node, per in fitting.items():
            lines.append(
                f"{node}: {len(per[i])} of {len(inv.on(node))} GPU(s) match {need.claim} "
                f"request {need.request.name}, {need.count} needed"
            )
    expressions = [e for n in needs for r in n.request.options() for e in (*m_class(m, r), *r.selectors)]
    exprs = list(dict.fromkeys(expressions))
    devices = [(n, d) for n in fitting for d in inv.on(n)]
    return finding(
        "L1_DRA_SELECTOR_UNSATISFIED",
        f"no candidate node publishes GPUs that satisfy the selectors and count of {needs[0].claim}: "
        "change the selector or add such GPUs",
        evidence=[*(f"selector: {e}" for e in exprs), *listed(lines), *_published_values(exprs, devices)],
        commands=[SLICES_CMD.replace("-o wide", "-o yaml"), "kubectl get deviceclasses -o yaml"],
        node=one_node(list(fitting)),
    )


def m_class(m: Matcher, r: Request) -> tuple[str, ...]:
    cls = m.classes.get(r.device_class)
    return cls.selectors if cls else ()


def devices_exhausted(
    needs: Sequence[Need],
    fitting: dict[str, list[list[Device]]],
    held: dict[tuple[str, str, str], str],
    tainted: dict[str, list[Device]],
) -> Finding | None:
    """Matching devices exist on some node, but on every such node other claims hold too many of them."""
    lines = []
    for node, per in fitting.items():
        short = False
        for i, need in enumerate(needs):
            usable = [
                d for d in per[i] if not any(not dra.tolerated(need.request, t) for t in d.blocking_taints)
            ]
            free = [d for d in usable if d.ref not in held]
            holders = sorted({held[d.ref] for d in usable if d.ref in held})
            # allocationMode All takes every matching device of the node: one held or tainted is one too many.
            wanted = len(per[i]) if need.request.mode == "All" else need.count
            if len(free) < wanted:
                short = True
                holding = shown(holders, limit=3)
                lines.append(
                    f"{node}: {len(per[i])} matching, {len(per[i]) - len(usable)} tainted, "
                    f"{len(usable) - len(free)} taken by {holding or 'no claim'}, {len(free)} free < {wanted}"
                )
        if not short:
            return None  # one node has room: not a capacity question
    if all(not any(d.ref in held for i in range(len(needs)) for d in per[i]) for per in fitting.values()):
        return None  # nothing taken: taints explain it (L1_DRA_DEVICE_TAINTED)
    return finding(
        "L1_DRA_DEVICES_EXHAUSTED",
        f"GPUs matching {needs[0].claim} exist on {len(fitting)} node(s) but other claims hold them all: "
        "a capacity question (DRA claims are not preempted); wait, or free a claim",
        evidence=listed(lines),
        commands=["kubectl get resourceclaims -A -o wide | grep -v pending", SLICES_CMD],
        node=one_node(list(fitting)),
    )
