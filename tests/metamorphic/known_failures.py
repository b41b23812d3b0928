"""(case id, mutation) -> the cause, for metamorphic cases that fail today because of a bug in another
helper's area (tests/metamorphic/KNOWN_FAILURES.md explains each cause and names its owner). Each is a
strict xfail: when the fix lands the case passes, its xfail fails, and the lead removes the entry."""

from __future__ import annotations

# Issue 18 item 1 (helper `pools`: layers/versions.py, the new layers/facts/driverpool.py): driver and
# kernel versions are compared across the whole fleet, not within a driver pool, so a healthy pool on
# another driver branch adds (or, as the majority shifts, removes) L3_DRIVER_VERSION_SKEW / L3_KERNEL_SKEW.
DRIVER_POOLS = "pools: versions compared across driver pools, not within one (issue 18 item 1)"
# Helper `pools` (layers/facts/placement.py, taint_reasons): once the scheduler's message names an
# untolerated taint, every GPU node with a taint the pod does not tolerate is reported, including nodes
# the pod cannot use anyway (another pool it does not select, no node offering the resource it asks for)
# and health-controller taints on sick nodes, with "add a toleration": L1_UNTOLERATED_TAINT is added,
# and outranks L1_RESOURCE_MISMATCH / L1_SELECTOR_MISMATCH as the verdict.
NON_CANDIDATE_TAINTS = (
    "pools: L1_UNTOLERATED_TAINT counts tainted nodes that are not candidates (placement.py)"
)

KNOWN_FAILURES: dict[tuple[str, str], str] = {
    ("blackbox:l12:gpu-taint-tolerated-with-wrong-effect", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("blackbox:l12:gpu-taint-tolerated-with-wrong-effect", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    (
        "blackbox:l12:node-affinity-gpu-memory-gt-new-style-events",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    (
        "blackbox:l12:node-affinity-gpu-memory-gt-new-style-events",
        "sick_nodes_elsewhere",
    ): NON_CANDIDATE_TAINTS,
    (
        "blackbox:l12:time-slicing-renamed-plain-gpu-request",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    ("blackbox:l12:time-slicing-renamed-plain-gpu-request", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("l12:aks-gpu-pool-sku-taint-unnamed", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("l12:aks-gpu-pool-sku-taint-unnamed", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("mig-mixed-resource-mismatch", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("mig-mixed-resource-mismatch", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("noise:noise-affinity-memory-gt-18-nodes", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("noise:noise-affinity-memory-gt-18-nodes", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("noise:noise-old-scheduler-taint-32-nodes", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("noise:noise-old-scheduler-taint-32-nodes", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("noise:noise-selector-no-h200-20-nodes", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("noise:noise-selector-no-h200-20-nodes", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("noise:noise-toleration-wrong-value-50-nodes", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("noise:noise-toleration-wrong-value-50-nodes", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("pending-gpu-product-selector", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("pending-gpu-product-selector", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("pending-untolerated-gpu-taint", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("pending-untolerated-gpu-taint", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    (
        "probe3:probe3-selects-time-sliced-pool-asks-nvidia-gpu-22-nodes",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe3:probe3-selects-time-sliced-pool-asks-nvidia-gpu-22-nodes",
        "sick_nodes_elsewhere",
    ): NON_CANDIDATE_TAINTS,
    ("probe:probe-mig-mixed-2g-20gb-not-offered-17-nodes", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("probe:probe-mig-mixed-2g-20gb-not-offered-17-nodes", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-mig-mixed-2g-20gb-not-offered-17-nodes-l40s-unregistered",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-mig-mixed-2g-20gb-not-offered-17-nodes-l40s-unregistered",
        "sick_nodes_elsewhere",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-scheduler-1-21-taint-text-didnt-tolerate-19-nodes",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-scheduler-1-21-taint-text-didnt-tolerate-19-nodes",
        "sick_nodes_elsewhere",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-selector-product-typo-scheduler-1-32-26-nodes",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    (
        "probe:probe-selector-product-typo-scheduler-1-32-26-nodes",
        "sick_nodes_elsewhere",
    ): NON_CANDIDATE_TAINTS,
}
