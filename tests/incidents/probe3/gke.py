"""The probe3 GKE fleets: GKE's managed device plugin (container-engine-accelerators,
`k8s-app=nvidia-gpu-device-plugin` in kube-system) and its health checker's own lines, on node pools
with no GPU Operator and no GFD labels."""

from __future__ import annotations

from typing import Any

from tests.incidents.fleets import Fleet, _pod, _suffix, uuid_of

# GKE machine types by pool: (model key, GPUs, accelerator label, machine type)
POOLS = {
    "l4": ("l4", 8, "nvidia-l4", "g2-standard-96"),
    "a100": ("a100", 8, "nvidia-a100-80gb", "a2-ultragpu-8g"),
    "h100": ("h100", 8, "nvidia-h100-80gb", "a3-highgpu-8g"),
}
PLUGIN = "nvidia-gpu-device-plugin"
IMAGE = "gke.gcr.io/nvidia-gpu-device-plugin:v1.0.25-gke.72"


def gke_fleet(name: str, description: str, sizes: dict[str, int], cpu: int = 3) -> Fleet:
    """GKE node pools: GPU nodes advertise nvidia.com/gpu and carry GKE's labels and taint only (no GFD)."""
    f = Fleet(name, description)
    for i in range(1, cpu + 1):
        f.cpu_node(f"gke-prod-default-pool-5c1e-{i:02d}")
    for pool, count in sizes.items():
        model, gpus, accel, machine = POOLS[pool]
        for i in range(1, count + 1):
            node = f"gke-prod-{pool}-pool-{_suffix(pool, 'np')[:4]}-{i:02d}"
            n = f.gpu_node(node, model, gpus, pool=None, operands=False)
            lab = n["metadata"]["labels"]
            for key in [k for k in lab if k.startswith(("nvidia.com/", "feature.node.kubernetes.io/"))]:
                del lab[key]
            lab.update({"cloud.google.com/gke-accelerator": accel, "cloud.google.com/gke-nodepool": f"{pool}-pool",
                        "cloud.google.com/gke-gpu": "true", "node.kubernetes.io/instance-type": machine,
                        "cloud.google.com/gke-os-distribution": "cos"})  # fmt: skip
            n["spec"]["taints"] = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
            n["status"]["nodeInfo"].update({"kernelVersion": "6.6.56+", "osImage": "Container-Optimized OS from Google",
                                            "kubeletVersion": "v1.32.4-gke.1415000"})  # fmt: skip
            plugin_pod(f, node, gpus)
    return f


def plugin_pod(f: Fleet, node: str, gpus: int) -> str:
    name = f"{PLUGIN}-large-cos-{_suffix(node, 'gke')}"
    f.objects.append(_pod(name, "kube-system", node, {"k8s-app": PLUGIN}, [(PLUGIN, IMAGE)]))
    f.logs[f"kube-system/{name}/{PLUGIN}"] = (
        "I1123 10:12:31.102234       1 nvidia_gpu.go:75] device-plugin started\n"
        "I1123 10:12:31.204517       1 health_checker.go:174] Starting GPU Health Checker\n"
        f"I1123 10:12:31.204611       1 health_checker.go:186] Found {gpus} GPU devices\n"
        + "".join(
            f"I1123 10:12:31.2047{i}1       1 health_checker.go:249] Found non-mig device nvidia{i} for health "
            f"monitoring. UUID: {uuid_of(node, i)}\n"
            for i in range(gpus)
        )
    )
    return name


def plugin_lines(f: Fleet, node: str, lines: str) -> None:
    key = next(k for k in f.logs if k.startswith(f"kube-system/{PLUGIN}-") and _suffix(node, "gke") in k)
    f.logs[key] += lines


def skipping_xid79_on_bound_l4() -> tuple[Fleet, dict[str, Any]]:
    f = gke_fleet(
        "probe3-gke-plugin-skipping-xid79-l4-bound-22-nodes",
        "Built on sample 24 (Xid 79, GPU fallen off the bus) and GKE's device plugin (container-engine-accelerators "
        "health_checker.go since 2022): it marks a device unhealthy only for Xid 48 and the Xids it is told, and "
        "logs `Health checker is skipping Xid 79 error` for the rest, so allocatable stays 8 of 8 while GPU 3 of "
        "the bound pod's L4 node fell off the bus. No dcgm-exporter (GKE has none by default); DCGM could not "
        "report 79 anyway. Elsewhere an A100 lost every device to `XidCriticalError: Xid=48, All devices will go "
        "unhealthy.`",
        {"l4": 8, "a100": 6, "h100": 5},
    )  # fmt: skip
    node = f"gke-prod-l4-pool-{_suffix('l4', 'np')[:4]}-04"
    f.running_pod("whisper-batch-0", "speech", node, 8)
    plugin_lines(
        f,
        node,
        "I1129 09:41:07.551823       1 health_checker.go:395] Health checker is skipping Xid 79 error\n",
    )
    sick = f"gke-prod-a100-pool-{_suffix('a100', 'np')[:4]}-02"
    f.node(sick)["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    plugin_lines(
        f,
        sick,
        "E1129 08:02:44.120931       1 health_checker.go:407] XidCriticalError: Xid=48, All devices will go unhealthy.\n",
    )
    f._noise(sick)
    return f, {
        "target": "speech/whisper-batch-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L5_DEVICE_UNHEALTHY", "L1_ALLOCATABLE_BELOW_CAPACITY", "L2_OPERATOR_NOT_FOUND"],
    }


def xid48_device_name_and_unknown_device() -> tuple[Fleet, dict[str, Any]]:
    f = gke_fleet(
        "probe3-gke-plugin-xid48-device-nvidia5-and-unknown-device-a100-20-nodes",
        "Built on sample 08 (Xid 48 marks) and GKE's device plugin (container-engine-accelerators "
        "health_checker.go): it names the device by its path and the GPU after it, `XidCriticalError: Xid=48 on "
        "Device=nvidia5, uuid=GPU-…, the device will go unhealthy.`, and when no device matches the event it logs "
        "`XidCriticalError: Xid=48 on unknown device.` and marks nothing. The bound pod's A100 has 7 of 8 "
        "allocatable: one device marked, not all of them.",
        {"a100": 8, "h100": 5, "l4": 4},
    )  # fmt: skip
    node = f"gke-prod-a100-pool-{_suffix('a100', 'np')[:4]}-06"
    f.running_pod("t5-finetune-0", "research", node, 7)
    f.node(node)["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    plugin_lines(
        f,
        node,
        "E1129 07:15:20.400117       1 health_checker.go:436] XidCriticalError: Xid=48 on unknown device.\n"
        f"E1129 09:22:51.870254       1 health_checker.go:428] XidCriticalError: Xid=48 on Device=nvidia5, "
        f"uuid={uuid_of(node, 5)}, the device will go unhealthy.\n",
    )
    return f, {
        "target": "research/t5-finetune-0",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": [
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L5_ALLOCATABLE_BELOW_CAPACITY",
            "L5_DEVICE_UNHEALTHY",
            "L5_XID",
        ],
        "absent": ["L2_OPERATOR_NOT_FOUND"],
    }
