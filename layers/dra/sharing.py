"""Layer 4 on a DRA pod: GPUs it shares with other pods (spec/findings.md, `L4_TIME_SLICING`: replicas
have no memory isolation). DRA has no sharing labels: a GPU is shared when the pod's allocated claim is
reserved for other pods too (a `resourceClaimName` several pods name), and the NVIDIA driver's claim
config says how (`GpuConfig`/`MigDeviceConfig` `sharing.strategy`: TimeSlicing, or MPS with its memory
limits)."""

from __future__ import annotations

from layers.facts import dra
from layers.facts import drareads as reads
from layers.facts.context import WalkContext
from layers.facts.fold import shown
from layers.findings import Finding, finding
from layers.sources import SourceError


def shared_claims(ctx: WalkContext, node: str) -> list[Finding]:
    """L4_TIME_SLICING for each of the pod's allocated GPU claims that other pods use too."""
    pod = ctx.pod
    if pod is None or not dra.pod_claims(pod):
        return []
    try:
        states = reads.pod_claims(ctx)
        classes = reads.classes(ctx)
    except SourceError:
        return []  # layer 1 says what could not be read
    me = ctx.target.pod
    out = []
    for s in states:
        claim = s.claim
        if claim is None or claim.allocated is None:
            continue
        if not any(
            dra.is_gpu_class(opt.device_class, classes) for r in claim.requests for opt in r.options()
        ):
            continue
        others = [p for p in claim.reserved_for if p != me]
        if not others:
            continue
        mps = (claim.sharing or "").lower() == "mps"
        how = (
            f"sharing.strategy {claim.sharing}"
            if claim.sharing
            else "no sharing config (time-sliced by default)"
        )
        out.append(
            finding(
                "L4_TIME_SLICING",
                (
                    f"{claim.key} is shared with {len(others)} other pod(s) through MPS: each client gets the "
                    "memory limit the claim's MpsConfig sets, a pod needing more fails with CUDA out of memory"
                    if mps
                    else f"{claim.key} is shared with {len(others)} other pod(s): they time-slice its GPU(s) with "
                    "no memory isolation, one pod can exhaust the memory of the others — give memory-heavy pods a "
                    "claim of their own"
                ),
                evidence=[
                    f"claim {claim.key} ({how}) is reserved for {shown([me or '', *others])}",
                    f"devices: {shown([a.device for a in claim.allocated if not a.admin_access])}",
                ],
                commands=[f"kubectl get resourceclaim -n {claim.namespace} {claim.name} -o yaml"],
                node=node,
            )
        )
    return out
