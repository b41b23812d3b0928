"""A small incident built from the real samples (sample 06: 7 of 8 GPUs, device plugin Xid 79) for the bundle tests."""

from __future__ import annotations

from typing import Any

# Verbatim from samples/06 (NVIDIA gpu-operator troubleshooting doc, device plugin log), kept here
# so the tests run from a clean clone without the shared samples folder.
SAMPLE_06_DP_LINES = (
    "I0624 22:58:05.486593       1 health.go:159] Processing event {Device:{Handle:0x7f7597647848} "
    "EventType:8 EventData:109 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}",
    "I0624 22:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on "
    "Device=GPU-adb24b25-1db1-436e-d958-ddee5da83d07; marking device as unhealthy.",
    "I0624 22:58:05.486727       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: "
    "GPU-adb24b25-1db1-436e-d958-ddee5da83d07",
)


def dp_log() -> str:
    return (
        "I0624 22:50:00.000001       1 main.go:317] Starting GRPC server for 'nvidia.com/gpu'\n"
        + "\n".join(SAMPLE_06_DP_LINES)
        + "\n"
    )


def node(
    name: str,
    cap: int,
    alloc: int,
    unsched: bool = False,
    gpu: bool = True,
    ann: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if gpu:
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(cap),
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/cuda.driver-version.full": "550.54.15",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            }
        )
    st: dict[str, Any] = {
        "capacity": {"cpu": "96", "memory": "527422416Ki", "pods": "110"},
        "allocatable": {"cpu": "96", "memory": "527320016Ki", "pods": "110"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "lastTransitionTime": "2026-11-01T00:00:00Z",
            }
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
        "nodeInfo": {
            "kubeletVersion": "v1.29.4",
            "osImage": "Ubuntu 22.04.4 LTS",
            "kernelVersion": "5.15.0-105-generic",
            "containerRuntimeVersion": "containerd://1.7.13",
        },
        "images": [{"names": ["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"], "sizeBytes": 123}],
    }
    if gpu:
        st["capacity"]["nvidia.com/gpu"] = str(cap)
        st["allocatable"]["nvidia.com/gpu"] = str(alloc)
    n: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "annotations": ann or {},
        },
        "spec": {},
        "status": st,
    }
    if unsched:
        n["spec"]["unschedulable"] = True
    return n


def pod(
    ns: str,
    name: str,
    node: str,
    app: str | None,
    containers: list[str],
    inits: Any = (),
    restarts: int = 0,
    phase: str = "Running",
    gpu: int = 0,
    env: Any = None,
) -> dict[str, Any]:
    cs = [
        {
            "name": c,
            "image": f"nvcr.io/nvidia/{c}:v1",
            **({"env": env} if env else {}),
            **(
                {
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpu)},
                        "requests": {"nvidia.com/gpu": str(gpu)},
                    }
                }
                if gpu
                else {}
            ),
        }
        for c in containers
    ]
    sts = [
        {
            "name": c,
            "ready": True,
            "restartCount": restarts,
            "state": {"running": {"startedAt": "2026-11-29T10:00:00Z"}},
            **({"lastState": {"terminated": {"reason": "Error", "exitCode": 1}}} if restarts else {}),
        }
        for c in containers
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": app} if app else {},
            "creationTimestamp": "2026-11-29T09:00:00Z",
        },
        "spec": {
            "nodeName": node,
            "containers": cs,
            "initContainers": [{"name": i, "image": "nvcr.io/nvidia/validator:v1"} for i in inits],
        },
        "status": {
            "phase": phase,
            "containerStatuses": sts,
            "initContainerStatuses": [
                {
                    "name": i,
                    "ready": True,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
                for i in inits
            ],
        },
    }


def scenario() -> dict[str, Any]:
    objs = [
        node("gpu-7", 8, 7),
        node("gpu-8", 8, 8),
        node("gpu-9", 8, 8),
        node("cpu-1", 0, 0, gpu=False),
        pod("gpu-operator", "gpu-operator-6d5b8f7c9-abcde", "cpu-1", "gpu-operator", ["gpu-operator"]),
        pod(
            "gpu-operator",
            "nvidia-device-plugin-daemonset-x7k2p",
            "gpu-7",
            "nvidia-device-plugin-daemonset",
            ["nvidia-device-plugin", "config-manager"],
            inits=["toolkit-validation", "config-manager-init"],
        ),
        pod(
            "gpu-operator",
            "nvidia-device-plugin-daemonset-q9z8w",
            "gpu-8",
            "nvidia-device-plugin-daemonset",
            ["nvidia-device-plugin", "config-manager"],
        ),
        pod(
            "gpu-operator",
            "nvidia-driver-daemonset-8xk2l",
            "gpu-7",
            "nvidia-driver-daemonset",
            ["nvidia-driver-ctr"],
            inits=["k8s-driver-manager"],
        ),
        pod(
            "gpu-operator",
            "nvidia-dcgm-exporter-m4n5b",
            "gpu-7",
            "nvidia-dcgm-exporter",
            ["nvidia-dcgm-exporter"],
        ),
        pod(
            "gpu-operator",
            "nvidia-operator-validator-p2q3r",
            "gpu-7",
            "nvidia-operator-validator",
            ["nvidia-operator-validator"],
            inits=["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"],
        ),
        pod("ml", "trainer-0", "gpu-7", None, ["trainer"], restarts=2, gpu=8),
        pod("ml", "infer-1", "gpu-8", None, ["vllm"], gpu=4),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "nvidia-device-plugin-daemonset",
                "namespace": "gpu-operator",
                "labels": {"app": "nvidia-device-plugin-daemonset"},
            },
            "spec": {"template": {"spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"}}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 3},
        },
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"driver": {"enabled": True}},
            "status": {"state": "ready"},
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        },
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "trainer-0.1", "namespace": "ml"},
            "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer-0"},
            "reason": "BackOff",
            "type": "Warning",
            "message": "Back-off restarting failed container trainer",
            "count": 4,
            "lastTimestamp": "2026-11-29T11:55:00Z",
        },
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "gpu-7.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "gpu-7"},
            "reason": "NodeHasSufficientMemory",
            "type": "Normal",
            "message": "Node gpu-7 status is now: NodeHasSufficientMemory",
            "lastTimestamp": "2026-11-29T11:00:00Z",
        },
    ]
    dp = dp_log()
    logs = {
        "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin": dp,
        "gpu-operator/nvidia-device-plugin-daemonset-q9z8w/nvidia-device-plugin": "I0624 22:50:00.000001       1 main.go:317] Starting GRPC server for 'nvidia.com/gpu'\n",
        "gpu-operator/nvidia-driver-daemonset-8xk2l/nvidia-driver-ctr": "========== NVIDIA Software Installer ==========\nDone, now waiting for signal\n",
        "gpu-operator/gpu-operator-6d5b8f7c9-abcde/gpu-operator": '{"level":"info","ts":1732874400,"msg":"ClusterPolicy is ready"}\n',
        "ml/trainer-0/trainer": "epoch 3 step 120\n",
        "ml/trainer-0/trainer#previous": "RuntimeError: CUDA error: no CUDA-capable device is detected\n",
    }
    uuid = "GPU-adb24b25-1db1-436e-d958-ddee5da83d07"
    metrics = [
        {
            "metric": {
                "__name__": "DCGM_FI_DEV_XID_ERRORS",
                "Hostname": "gpu-7",
                "gpu": "3",
                "UUID": uuid,
                "modelName": "NVIDIA H100 80GB HBM3",
            },
            "values": [[-86400, 0], [-3600, 79], [0, 79]],
        },
        {
            "metric": {
                "__name__": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                "Hostname": "gpu-7",
                "gpu": "3",
                "UUID": uuid,
            },
            "values": [[-86400, 0], [-3600, 12], [0, 14]],
        },
        {
            "metric": {
                "__name__": "DCGM_FI_DEV_FB_USED",
                "Hostname": "gpu-8",
                "gpu": "0",
                "UUID": "GPU-1111",
            },
            "values": [[-600, 1000], [0, 1200]],
        },
    ]
    return {
        "kind": "Scenario",
        "name": "xid79",
        "now": "2026-11-29T12:00:00Z",
        "objects": objs,
        "logs": logs,
        "metrics": metrics,
    }
