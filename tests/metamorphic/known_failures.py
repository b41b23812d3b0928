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
    ("blackbox:l12:cuda-validation-exclusive-process-devicequery", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l12:device-plugin-invalid-mig-config-dgx-reboot", "healthy_pool_other_driver"): DRIVER_POOLS,
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
    ("blackbox:l12:rke2-upgrade-runtime-handler-single-quotes", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l12:tensorflow-no-gpu-limit-cuinit-no-device", "healthy_pool_other_driver"): DRIVER_POOLS,
    (
        "blackbox:l12:time-slicing-renamed-plain-gpu-request",
        "healthy_pool_other_driver",
    ): NON_CANDIDATE_TAINTS,
    ("blackbox:l12:time-slicing-renamed-plain-gpu-request", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("blackbox:l3:bb-l3-airgapped-proxy-down-package-cache", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l3:bb-l3-dgx-os-preinstalled-label-host-oomkilled", "healthy_pool_other_driver"): DRIVER_POOLS,
    (
        "blackbox:l3:bb-l3-driver-fails-on-another-node-not-examined",
        "healthy_pool_other_driver",
    ): DRIVER_POOLS,
    ("blackbox:l3:bb-l3-eks-al2023-gpu-node-on-newer-ami-kernel", "healthy_pool_other_driver"): DRIVER_POOLS,
    (
        "blackbox:l3:bb-l3-hgx-fabric-manager-lib-missing-cuda-validator",
        "healthy_pool_other_driver",
    ): DRIVER_POOLS,
    (
        "blackbox:l3:bb-l3-host-driver-already-running-driver-enabled",
        "healthy_pool_other_driver",
    ): DRIVER_POOLS,
    ("blackbox:l3:bb-l3-three-driver-versions-target-on-majority", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:correctable-rows-rising-power-brake-h100-nvl", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:dcgm-exporter-crashloop-no-series-for-node", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:oomkilled-tokenizer-sidecar-gpu-idle", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:pytorch-oom-mps-shared-a100-40gb", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:row-remap-failed-flat-rows-exporter-podname", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:vllm-preemptions-hours-ago-reservation-normal", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("blackbox:l45:xid154-dcgm-count-only-plugin-restarted", "healthy_pool_other_driver"): DRIVER_POOLS,
    (
        "blackbox:l45:xid31-xid45-skipped-by-plugin-lowercase-hostname",
        "healthy_pool_other_driver",
    ): DRIVER_POOLS,
    ("cuda-requirement-refused-by-hook", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("cuda-requirement-refused-by-hook", "sick_nodes_elsewhere"): DRIVER_POOLS,
    ("dra-mixed-fleet-healthy-dra-pod", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("exporter-lowercase-hostname-mig-oom", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("healthy-pod-all-layers-ok", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("host-driver-lost-after-kernel-update", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l12:aks-gpu-pool-sku-taint-unnamed", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("l12:aks-gpu-pool-sku-taint-unnamed", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("l12:vllm-no-gpu-toolkit-validation-init-error", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l3:driver-manager-detects-host-driver", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l3:hgx-b200-fabric-manager-error-802", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l45:jax-oom-time-sliced-exported-labels", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l45:vllm-v1-data-parallel-preemptions-old-prom-labels", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("l45:xid13-skipped-throttle-old-exporter-mustgather", "healthy_pool_other_driver"): DRIVER_POOLS,
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
    ("nvswitch-fabric-manager-not-running", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("oomkilled-host-memory", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("pending-gpu-product-selector", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("pending-gpu-product-selector", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("pending-untolerated-gpu-taint", "healthy_pool_other_driver"): NON_CANDIDATE_TAINTS,
    ("pending-untolerated-gpu-taint", "sick_nodes_elsewhere"): NON_CANDIDATE_TAINTS,
    ("preinstalled-driver-conflict-vgpu", "healthy_pool_other_driver"): DRIVER_POOLS,
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
    ("pytorch-cuda-oom-framebuffer-full", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("thermal-clock-events-slow-transcode", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("vllm-framebuffer-reserved-normal", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("vllm-kv-cache-preemptions", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("vllm-startup-free-memory-time-slicing", "healthy_pool_other_driver"): DRIVER_POOLS,
    ("xid13-xid109-ignored-by-plugin", "healthy_pool_other_driver"): DRIVER_POOLS,
}
