"""The must-gather's DRA objects: dra.yaml and the IMEX daemons of the target's ComputeDomains."""

from __future__ import annotations

from functools import partial

from bot.actions import bundle_text as bt
from bot.actions.gather import Collector
from layers.facts import dra
from layers.facts import objects as o
from layers.sources import K8sObject


def dra_files(c: Collector, scoped: list[K8sObject], target: K8sObject | None) -> None:
    """The DRA objects involved (spec/findings.md, DRA): the GPU slices of the nodes in scope (of
    every node when a target is), the classes, device taint rules, the target's claims and templates and the claims holding devices
    in scope, ComputeDomains and GPUCluster. A cluster without DRA gives an empty dra.yaml."""
    c.progress("DRA objects")
    names = {o.name(n) for n in scoped}
    # A target's layer 1 weighs every node's devices, as it weighs every node's GPU pods: a node
    # bundle that kept only its own slices replayed the other GPU nodes as publishing none.
    every = c.scope.want_fleet_gpu_pods()
    # One node's bundle asks the server for that node's slices only (spec.nodeName is a field
    # ResourceSlices can be selected by): the fleet's are 65,000 objects at 65,000 nodes.
    on_node = f",spec.nodeName={c.scope.node}" if c.node_only else ""
    slices = [
        s
        for s in c.read(
            "resourceslices",
            lambda: c.cluster.list_dra("ResourceSlice", field_selector=f"spec.driver={dra.DRIVER}{on_node}"),
            [],
        )
        if every or (s.get("spec") or {}).get("nodeName") in names
    ]
    picked = [*c.read("deviceclasses", lambda: c.cluster.list_dra("DeviceClass"), []), *slices]
    picked += c.read("devicetaintrules", lambda: c.cluster.list_dra("DeviceTaintRule"), [])
    target_ns = (o.namespace(target) or "") if target is not None else ""
    wanted = {(target_ns, e.claim_name) for e in dra.pod_claims(target or {}) if e.claim_name}
    if slices or wanted:
        pools = {str((s.get("spec") or {}).get("pool", {}).get("name")) for s in slices}
        for claim in _claims(c):
            held = {a.pool for a in dra.read_claim(claim).allocated or ()}
            if (o.namespace(claim) or "", o.name(claim)) in wanted or held & pools:
                picked.append(claim)
    templates = {t for e in dra.pod_claims(target or {}) if (t := e.template)}
    if templates:
        ns = target_ns
        picked += [
            t
            for t in c.read(
                f"resourceclaimtemplates in {ns}",
                lambda: c.cluster.list_dra("ResourceClaimTemplate", namespace=ns),
                [],
            )
            if o.name(t) in templates
        ]
    domains = c.read(
        "computedomains",
        lambda: c.cluster.list_custom("resource.nvidia.com", "v1beta1", "computedomains"),
        [],
    )
    picked += domains
    # The IMEX daemons of the target's ComputeDomains: layer 2 names the ones not Ready.
    for cd in domains:
        uid = (cd.get("metadata") or {}).get("uid")
        if uid and target is not None and o.namespace(cd) == target_ns:
            sel = f"resource.nvidia.com/computeDomain={uid}"
            c.keep(c.read(f"pods -l {sel}", c._lister(sel, None), []))
    picked += c.read(
        "gpuclusters", lambda: c.cluster.list_custom("nvidia.com", "v1alpha1", "gpuclusters"), []
    )
    c.archive.add("dra.yaml", bt.to_yaml(c.keep(picked)), essential=True)


def _claims(c: Collector) -> list[K8sObject]:
    """The claims to look through: every claim, or for one node's bundle the claims of the
    namespaces whose pods on the node use claims (a claim holding the node's devices is reserved
    for pods there), so the read does not grow with the fleet."""
    if not c.node_only:
        return list(c.read("resourceclaims", lambda: c.cluster.list_dra("ResourceClaim"), []))
    namespaces = sorted(
        {
            o.namespace(p) or ""
            for p in c.objects.values()
            if p.get("kind") == "Pod"
            and o.pod_node(p) == c.scope.node
            and (p.get("spec") or {}).get("resourceClaims")
        }
    )
    out: list[K8sObject] = []
    for ns in namespaces:
        out += c.read(
            f"resourceclaims in {ns}", partial(c.cluster.list_dra, "ResourceClaim", namespace=ns), []
        )
    return out
