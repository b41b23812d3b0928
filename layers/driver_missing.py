"""Layer 3: a node the operator installs the driver on, without a driver pod to read (issue 18, 8c).

L3_OK must not be claimed where the driver container's log, the build check's only source, could
not be read: the check says `unknown` there, naming what was not read.
"""

from __future__ import annotations

from layers.facts import objects as o
from layers.facts.context import component
from layers.facts.logs import LogReads
from layers.findings import Finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 3


DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"


def driver_pod_missing(reads: LogReads, node: str, node_obj: K8sObject | None) -> Finding | None:
    """A node the operator is to install the driver on (`nvidia.com/gpu.deploy.driver=true`, the
    ClusterPolicy's driver enabled) where no driver pod was found: the driver container's log, the
    build check's only source, was not read, so layer 3 cannot say the driver is fine there.

    Only where the operator's own pods on the node were read and the ClusterPolicy is there to say the
    driver is the operator's: a `pre-installed` node, `driver.enabled=false` or a cluster without a
    ClusterPolicy (a standalone device plugin) has no driver pod by design."""
    if str(o.labels(node_obj or {}).get(DEPLOY_DRIVER, "")).strip().lower() != "true":
        return None
    try:
        operands = reads.ctx.operator_pods_on(node)
        policies = reads.ctx.custom("nvidia.com", "v1", "clusterpolicies")
    except SourceError:
        return None  # the reads that failed are said by the checks that needed them
    if not operands or not policies:
        return None
    enabled = ((policies[0].get("spec") or {}).get("driver") or {}).get("enabled")
    if enabled is False or str(enabled).lower() == "false":
        return None
    seen = sorted({c for p in operands if (c := component(p))})
    return unknown(
        LAYER,
        f"{node} is labelled {DEPLOY_DRIVER}=true but no driver pod runs there, so its driver container's "
        "log was not read and the driver build cannot be judged: check the driver DaemonSet "
        "(or NVIDIADriver) selects the node and that its pod is not deleted or evicted",
        node=node,
        evidence=[
            f"{DEPLOY_DRIVER}=true",
            f"ClusterPolicy {o.name(policies[0])}: spec.driver.enabled="
            + ("unset (defaults to true)" if enabled is None else str(enabled).lower()),
            f"operator pods on {node}: {', '.join(seen) or 'none recognised'}; no driver pod",
        ],
    )
