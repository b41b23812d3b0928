"""Field incidents, round four: `python -m tests.incidents.field.build` (issue 30).

Production-shaped fleets (20-24 nodes: A100 `train`, H100 `infer`, L40S `viz` pools beside CPU nodes,
a lost GPU, rising rows and an unregistered plugin elsewhere) around text from public threads: a
driver image the operator does not publish for the node's OS (containerd's and CRI-O's not-found
words), the kubelet's TopologyAffinityError, a device plugin that never re-registered after a kubelet
restart, NVSentinel's SysLogsXIDError carrying Xid 154's kernel line (journal and `dmesg -T` forms),
the MIG manager four minutes into a reconfiguration (and one stuck for 22), and the scheduler's
1.33+/1.34+ wording with DRA's PostFilter notes in the events.k8s.io/v1 event shape. Each
`x-expect` follows spec/findings.md (README.md beside this file names the sources).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import (
    NS,
    Fleet,
    Recipe,
    mixed_pools,
    noise_in_viz_and_infer,
    uuid_of,
    write_recipes,
)
from tests.incidents.probe2.build import _bound_pod, _operand

HERE = Path(__file__).resolve().parent
Expect = dict[str, Any]
VAL = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"
PREEMPT = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def _fleet(
    name: str, description: str, *, a100: int = 6, h100: int = 7, l40s: int = 5, cpu: int = 2
) -> Fleet:
    f = mixed_pools(name, f"Built on samples from public threads (README.md): {description}",
                    a100=a100, h100=h100, l40s=l40s, cpu=cpu)  # fmt: skip
    noise_in_viz_and_infer(f)
    return f


def _count(f: Fleet) -> int:
    return sum(1 for o in f.objects if o["kind"] == "Node")


def _waiting_operands(f: Fleet, node: str) -> None:
    """The toolkit and device plugin of a node whose driver is not up: in Init, waiting for it."""
    waiting = {"running": {"startedAt": "2026-11-29T09:31:10Z"}}
    _operand(f, f"nvidia-container-toolkit-daemonset-{node[-2:]}k7q", node, {"app": "nvidia-container-toolkit-daemonset"},
             [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04")],
             [("driver-validation", VAL)], failing={"driver-validation": waiting}, restarts=0)  # fmt: skip
    _operand(f, f"nvidia-device-plugin-daemonset-{node[-2:]}x4n", node, {"app": "nvidia-device-plugin-daemonset"},
             [("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.3")],
             [("toolkit-validation", VAL)], failing={"toolkit-validation": waiting}, restarts=0)  # fmt: skip


def _new_node(
    f: Fleet, name: str, model: str, pool: str, os_image: str, kernel: str, runtime: str
) -> dict[str, Any]:
    """A GPU node whose driver never came up: NFD's labels, no GFD labels, no GPU advertised."""
    n = f.gpu_node(name, model, pool=pool, operands=False)
    labels = n["metadata"]["labels"]
    for key in [
        k
        for k in labels
        if k.startswith("nvidia.com/")
        and k
        not in (
            "nvidia.com/gpu.present",
            "nvidia.com/gpu.deploy.driver",
            "nvidia.com/gpu.deploy.device-plugin",
        )
    ]:
        del labels[key]  # fmt: skip
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu")
    n["status"]["nodeInfo"].update(
        {"osImage": os_image, "kernelVersion": kernel, "containerRuntimeVersion": runtime}
    )
    n["metadata"]["creationTimestamp"] = "2026-11-29T09:20:00Z"
    return n


def _image_pull(
    f: Fleet, node: str, pod_name: str, app: str, image: str, failed: list[str], waiting: str
) -> None:
    drv = _operand(
        f, pod_name, node, {"app": app, "app.kubernetes.io/component": "nvidia-driver",
                            "app.kubernetes.io/managed-by": "gpu-operator", "nvidia.com/precompiled": "false"},
        [("nvidia-driver-ctr", image)],
        [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0")],
        failing={"nvidia-driver-ctr": {"waiting": {"reason": "ImagePullBackOff", "message": waiting}}}, restarts=0,
    )  # fmt: skip
    for i, (reason, kind, message) in enumerate(
        [("Pulling", "Normal", f'Pulling image "{image}"')]
        + [("Failed", "Warning", m) for m in failed]
        + [("Failed", "Warning", "Error: ErrImagePull"), ("BackOff", "Normal", waiting),
           ("Failed", "Warning", "Error: ImagePullBackOff")]
    ):  # fmt: skip
        f.objects.append(
            {"apiVersion": "v1", "kind": "Event", "type": kind, "reason": reason, "message": message,
             "metadata": {"name": f"{pod_name}.18{i:02d}c2f1e9a4b7d0", "namespace": NS},
             "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "namespace": NS,
                                "uid": drv["metadata"]["uid"], "fieldPath": "spec.containers{nvidia-driver-ctr}"},
             "source": {"component": "kubelet", "host": node}, "count": 14 if reason != "Pulling" else 15,
             "firstTimestamp": "2026-11-29T09:31:40Z", "lastTimestamp": f"2026-11-29T10:1{i % 2}:0{i}Z"}
        )  # fmt: skip


def _nvidiadriver(name: str, version: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
            "metadata": {"name": name, "uid": f"5e0c7a1d-0000-4000-8000-{abs(hash(name)) % 10**12:012d}"},
            "spec": {"driverType": "gpu", "repository": "nvcr.io/nvidia", "image": "driver", "version": version,
                     "nodeSelector": selector, "manager": {}, "startupProbe": {}},
            "status": {"state": "notReady"}}  # fmt: skip


# --- item 1: the driver image that does not exist for this OS ----------------------------------


def image_not_found_containerd() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-ubuntu24-h100-driver-550-54-15-image-not-found-containerd-22-nodes",
        "A new Ubuntu 24.04 H100 pool (one node so far) gets its own NVIDIADriver pinned to 550.54.15, a "
        "version NVIDIA never built for 24.04: the driver pod sits in ImagePullBackOff with containerd's "
        "`code = NotFound … failed to resolve reference … not found`, the toolkit and device plugin wait in Init "
        "and the node advertises no GPU. The fine-tuning job pinned to the pool stays Pending. The other pools "
        "run Ubuntu 22.04 with their drivers up.",
    )  # fmt: skip
    node = "h100-u24-01"
    _new_node(f, node, "h100", "infer-u24", "Ubuntu 24.04.1 LTS", "6.8.0-45-generic", "containerd://1.7.27")
    image = "nvcr.io/nvidia/driver:550.54.15-ubuntu24.04"
    _image_pull(f, node, "nvidia-gpu-driver-ubuntu24.04-6f5d8b9c7-kx2lq", "nvidia-gpu-driver-ubuntu24.04", image, [
        f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and unpack image '
        f'"{image}": failed to resolve reference "{image}": {image}: not found',
    ], f'Back-off pulling image "{image}"')  # fmt: skip
    f.objects.append(_nvidiadriver("h100-ubuntu24", "550.54.15", {"pool": "infer-u24"}))
    _waiting_operands(f, node)
    f.pending_pod(
        "llama-70b-sft-0", "research",
        f"0/{_count(f)} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
        f"{_count(f) - 2} node(s) didn't match Pod's node affinity/selector, 1 Insufficient nvidia.com/gpu. "
        + PREEMPT.format(n=_count(f)), gpus=8, selector={"pool": "infer-u24"},
    )  # fmt: skip
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_IMAGE_UNAVAILABLE",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L3_DRIVER_IMAGE_UNAVAILABLE"],
        "absent": ["L3_OK", "L3_DRIVER_BUILD_FAILED", "L3_KERNEL_SKEW", "L5_XID"],
    }


def image_manifest_unknown_crio() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-rhel9-4-a100-driver-535-manifest-unknown-crio-21-nodes",
        "A RHEL 9.4 A100 node on CRI-O joins a fleet whose ClusterPolicy pins driver 535.104.05, never "
        "published for rhel9.4: CRI-O's `reading manifest 535.104.05-rhel9.4 in nvcr.io/nvidia/driver: manifest "
        "unknown` and `Error: ErrImagePull`, the pod in ImagePullBackOff. The Ubuntu 22.04 nodes run their "
        "drivers. The job pinned to the new node's pool stays Pending.",
        a100=5,
    )  # fmt: skip
    node = "a100-rhel-01"
    _new_node(f, node, "a100", "train-rhel", "Red Hat Enterprise Linux 9.4 (Plow)",
              "5.14.0-427.13.1.el9_4.x86_64", "cri-o://1.29.4")  # fmt: skip
    image = "nvcr.io/nvidia/driver:535.104.05-rhel9.4"
    _image_pull(f, node, "nvidia-driver-daemonset-rhel9-p7m2d", "nvidia-driver-daemonset", image, [
        f'Failed to pull image "{image}": rpc error: code = Unknown desc = reading manifest 535.104.05-rhel9.4 in '
        "nvcr.io/nvidia/driver: manifest unknown: manifest unknown",
        f'Failed to pull image "{image}": initializing source docker://{image}: reading manifest 535.104.05-rhel9.4 '
        "in nvcr.io/nvidia/driver: manifest unknown",
    ], f'Back-off pulling image "{image}"')  # fmt: skip
    _waiting_operands(f, node)
    f.pending_pod(
        "resnet-ddp-0", "vision",
        f"0/{_count(f)} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
        f"{_count(f) - 2} node(s) didn't match Pod's node affinity/selector, 1 Insufficient nvidia.com/gpu. "
        + PREEMPT.format(n=_count(f)), gpus=4, selector={"pool": "train-rhel"},
    )  # fmt: skip
    return f, {
        "target": "vision/resnet-ddp-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_IMAGE_UNAVAILABLE",
        "codes": ["L1_GPU_NODE_NOT_ADVERTISING", "L3_DRIVER_IMAGE_UNAVAILABLE"],
        "absent": ["L3_OK", "L3_DRIVER_BUILD_FAILED"],
    }


# --- item 2: the topology manager's refusal -----------------------------------------------------


def topology_affinity_error() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-p5-h100-topology-affinity-error-single-numa-4-gpu-21-nodes",
        "pytorch/ci-infra issue 696: an H100 pool (p5.48xlarge, 2 NUMA sockets x 4 GPUs) whose kubelets run "
        "topologyManagerPolicy single-numa-node, scope pod. Small 1-GPU runners sit on both sockets of "
        "h100-infer-03, so a 4-GPU workflow pod bound there (4 GPUs free in all, 2 per socket) is rejected: "
        "`TopologyAffinityError`, `Pod was rejected: Resources cannot be allocated with Topology locality`.",
    )  # fmt: skip
    node = "h100-infer-03"
    for i in range(4):
        f.running_pod(f"arc-runner-h100-1-{i}", "arc-runners", node, 1)
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "mt-l-h100-4-2pfzt-workflow", "namespace": "arc-runners",
                     "uid": "0c7e2a91-5b1d-4f0e-9a6c-3d2b1e0f9a87", "labels": {"app": "mt-l-h100-4-2pfzt-workflow"},
                     "creationTimestamp": "2026-11-29T10:10:31Z"},
        "spec": {"nodeName": node, "containers": [{"name": "job", "image": "ghcr.io/pytorch/helion-ci:cu128",
                 "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "48", "memory": "400Gi"},
                               "requests": {"nvidia.com/gpu": "4", "cpu": "48", "memory": "400Gi"}}}]},
        "status": {"phase": "Failed", "reason": "TopologyAffinityError",
                   "message": "Pod was rejected: Resources cannot be allocated with Topology locality",
                   "startTime": "2026-11-29T10:10:32Z"},
    }  # fmt: skip
    f.objects.append(pod)
    f.event_for_pod(pod, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")
    f.objects[-1]["source"] = {"component": "kubelet", "host": node}
    f.objects[-1]["count"] = 1
    return f, {
        "target": "arc-runners/mt-l-h100-4-2pfzt-workflow",
        "walk": [1],
        "verdict": "L1_ADMISSION_REJECTED",
        "codes": ["L1_ADMISSION_REJECTED", "L1_POD_SCHEDULED"],
        "absent": ["L1_UNKNOWN", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    }


# --- item 3: the plugin that never re-registered ------------------------------------------------


def plugin_not_reregistered() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-kubelet-restart-plugin-not-reregistered-a100-8-allocatable-0-21-nodes",
        "k8s-device-plugin issue 58, kubernetes issue 60176, bottlerocket issue 4250: the kubelet on "
        "a100-train-06 restarted at 09:46 (a kubelet config change); the device plugin, registered since "
        "11-23, never noticed its socket was gone. The node keeps nvidia.com/gpu 8 in capacity, 0 allocatable; "
        "no GPU marked unhealthy, no Xid. The other A100s are full, so the 8-GPU job waits.",
    )  # fmt: skip
    node = "a100-train-06"
    n = f.node(node)
    n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    n["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-29T09:46:58Z"
    n["status"]["nodeInfo"]["kubeletVersion"] = "v1.31.6"
    for reason, message, when in (
        ("Starting", "Starting kubelet.", "2026-11-29T09:46:41Z"),
        ("NodeAllocatableEnforced", "Updated Node Allocatable limit across pods", "2026-11-29T09:46:42Z"),
        (
            "NodeHasSufficientMemory",
            f"Node {node} status is now: NodeHasSufficientMemory",
            "2026-11-29T09:46:42Z",
        ),
        ("NodeReady", f"Node {node} status is now: NodeReady", "2026-11-29T09:46:58Z"),
    ):
        f.event_for_node(node, reason, message, when, "kubelet")
    for i in range(1, 6):
        f.running_pod(f"pretrain-shard-{i}", "research", f"a100-train-{i:02d}", 8)
    f.pending_pod(
        "pretrain-shard-6", "research",
        f"0/{_count(f)} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
        f"{_count(f) - 7} node(s) didn't match Pod's node affinity/selector, 6 Insufficient nvidia.com/gpu. "
        f"preemption: 0/{_count(f)} nodes are available: 1 Preemption is not helpful for scheduling, 5 No preemption "
        "victims found for incoming pod.", gpus=8, selector={"pool": "train"},
    )  # fmt: skip
    return f, {
        "target": "research/pretrain-shard-6",
        "walk": [1, 2],
        "verdict": "L2_DEVICE_PLUGIN_NOT_REGISTERED",
        "codes": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L2_DEVICE_PLUGIN_NOT_REGISTERED"],
        "absent": ["L2_OK", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY"],
    }


# --- item 4: Xid 154's recovery action ----------------------------------------------------------

_XID48 = (
    "NVRM: Xid (PCI:0000:ca:00): 48, pid=412907, name=python3, An uncorrectable double bit error (DBE) has been "
    "detected on GPU in the framebuffer at partition 6, subpartition 1."
)
_XID154 = (
    "NVRM: Xid (PCI:0000:ca:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
)


def _xid_node(f: Fleet, node: str) -> dict[str, Any]:
    n = f.gpu_node(node, "h100", pool="infer", operands=True, series=True)
    _bound_pod(f, "mistral-large-serve-0", "inference", node, "vllm/vllm-openai:v0.9.2",
               {"state": {"running": {"startedAt": "2026-11-29T10:02:11Z"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-11-29T09:01:02Z",
                                             "finishedAt": "2026-11-29T10:01:58Z"}}}, gpus=8)  # fmt: skip
    return n


def xid154_condition_journal() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-nvsentinel-syslog-xid48-xid154-gpu-reset-required-h100-bound-22-nodes",
        "NVSentinel's syslog health monitor sets SysLogsXIDError on h100-infer-08 with two kernel lines: Xid 48 "
        "(a double bit error) and Xid 154, `GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset "
        "Required)`. The vLLM server bound there restarted. The recovery action is in the condition.",
        h100=7,
    )  # fmt: skip
    node = "h100-infer-08"
    n = _xid_node(f, node)
    uuid = uuid_of(node, 4)
    n["status"]["conditions"].append({
        "type": "SysLogsXIDError", "status": "True", "reason": "SysLogsXIDErrorIsNotHealthy",
        "message": f"ErrorCode:48 PCI:0000:ca:00 GPU_UUID:{uuid} kernel:{_XID48} Recommended Action=COMPONENT_RESET;"
                   f"ErrorCode:154 PCI:0000:ca:00 GPU_UUID:{uuid} kernel:{_XID154} Recommended Action=NONE;",
        "lastHeartbeatTime": "2026-11-29T10:11:40Z", "lastTransitionTime": "2026-11-29T10:01:57Z"})  # fmt: skip
    return f, {
        "target": "inference/mistral-large-serve-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID", "L5_HEALTH_AGENT_CONDITION"],
        "absent": ["L1_UNKNOWN"],
    }


def xid154_dmesg_and_plugin() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-nvsentinel-dmesg-xid79-xid154-node-reboot-plugin-h100-bound-22-nodes",
        "The `dmesg -T` form of the kernel lines in NVSentinel's SysLogsXIDError on h100-infer-08 (Xid 79, the GPU "
        "fell off the bus, then Xid 154 `from 0x0 (None) to 0x2 (Node Reboot Required)`), and the device plugin's "
        "own `XidCriticalError: Xid=154` line, which names no action: the action comes from the condition.",
        h100=7,
    )  # fmt: skip
    node = "h100-infer-08"
    n = _xid_node(f, node)
    uuid = uuid_of(node, 2)
    xid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    xid154 = "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    n["status"]["conditions"].append({
        "type": "SysLogsXIDError", "status": "True", "reason": "SysLogsXIDErrorIsNotHealthy",
        "message": f"ErrorCode:79 PCI:0000:3b:00 GPU_UUID:{uuid} kernel:[Sun Nov 29 10:01:56 2026] {xid79} "
                   "Recommended Action=RESTART_BM;"
                   f"ErrorCode:154 PCI:0000:3b:00 GPU_UUID:{uuid} kernel:[Sun Nov 29 10:01:56 2026] {xid154} "
                   "Recommended Action=NONE;",
        "lastHeartbeatTime": "2026-11-29T10:11:40Z", "lastTransitionTime": "2026-11-29T10:01:57Z"})  # fmt: skip
    f.plugin_log(node, (
        "I1129 10:01:56.904411       1 health.go:159] Processing event {Device:{Handle:0x7f2b1c0a9e20} EventType:8 "
        "EventData:154 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        f"I1129 10:01:56.904502       1 health.go:185] XidCriticalError: Xid=154 on Device={uuid}; marking device as unhealthy.\n"
        f"I1129 10:01:56.904533       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n"
    ))  # fmt: skip
    n["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    return f, {
        "target": "inference/mistral-large-serve-0",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": [
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L5_XID",
            "L5_HEALTH_AGENT_CONDITION",
            "L5_DEVICE_UNHEALTHY",
        ],
        "absent": ["L1_UNKNOWN"],
    }


# --- item 5: the MIG manager at work ------------------------------------------------------------

MIG_RES = "nvidia.com/mig-2g.20gb"


def _mig_fleet(name: str, description: str, started: str) -> Fleet:
    """Three A100 MIG nodes (all-2g.20gb: 3 per GPU, 24 a node) beside the usual pools; a100-mig-03 is being
    reconfigured since `started` (its operands paused), the other two are full."""
    f = _fleet(name, description, a100=4)
    for i in (1, 2, 3):
        node = f"a100-mig-{i:02d}"
        n = f.gpu_node(node, "a100", pool="mig", resource=MIG_RES, operands="plugin")
        for key in ("capacity", "allocatable"):
            n["status"][key][MIG_RES] = "24"
        n["metadata"]["labels"].update({
            "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-2g.20gb",
            "nvidia.com/mig.config.state": "success", "nvidia.com/mig.capable": "true",
            "nvidia.com/mig-2g.20gb.count": "24", "nvidia.com/mig-2g.20gb.memory": "19968",
        })  # fmt: skip
        if i < 3:
            for j in range(4):
                f.running_pod(f"embed-{i}-{j}", "rag", node, 6, resource=MIG_RES)
    node = "a100-mig-03"
    n = f.node(node)
    n["status"]["allocatable"][MIG_RES] = "0"
    labels = n["metadata"]["labels"]
    labels["nvidia.com/mig.config.state"] = "pending"
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm"):
        labels[f"nvidia.com/gpu.deploy.{operand}"] = "paused-for-mig-change"
    f.mig_manager(node, (
        f'time="{started}" level=info msg="Updating to MIG config: all-2g.20gb"\n'
        "Asserting that the requested configuration is present in the configuration file\n"
        "Selected MIG configuration is valid\n"
        "Getting current value of the 'nvidia.com/gpu.deploy.device-plugin' node label\n"
        "Current value of 'nvidia.com/gpu.deploy.device-plugin=true'\n"
        "Asserting that MIG mode is enabled on all GPUs\n"
        "Changing the 'nvidia.com/mig.config.state' node label to 'pending'\n"
        "Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels\n"
        "node/a100-mig-03 labeled\n"
        "Waiting for the device-plugin to shutdown\n"
        "pod/nvidia-device-plugin-daemonset-mq2vx condition met\n"
        "Applying the selected MIG config to the node\n"
    ))  # fmt: skip
    f.pending_pod(
        "embed-bge-large-7", "rag",
        f"0/{_count(f)} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
        f"3 Insufficient {MIG_RES}, {_count(f) - 4} node(s) didn't match Pod's node affinity/selector. "
        + PREEMPT.format(n=_count(f)), gpus=6, resource=MIG_RES, selector={"pool": "mig"},
    )  # fmt: skip
    return f


def mig_manager_pending_4_min() -> tuple[Fleet, Expect]:
    f = _mig_fleet(
        "field-mig-manager-pending-4-min-all-2g-20gb-a100-22-nodes",
        "Four minutes into a MIG reconfiguration of a100-mig-03 to all-2g.20gb (`nvidia.com/mig.config.state=pending`, "
        "the device plugin, GFD and DCGM paused-for-mig-change): capacity 24, allocatable 0. The MIG manager at "
        "work, not a fault; the other two MIG nodes are full, so the pod waits.",
        "2026-11-29T10:08:02Z",
    )  # fmt: skip
    return f, {
        "target": "rag/embed-bge-large-7",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_ALLOCATABLE_BELOW_CAPACITY", "L1_NODE_OWNER", "L1_GPU_EXHAUSTED"],
        "absent": ["L1_MIG_CONFIG_FAILED", "L5_ALLOCATABLE_BELOW_CAPACITY", "L1_UNKNOWN"],
    }


def mig_manager_pending_22_min() -> tuple[Fleet, Expect]:
    f = _mig_fleet(
        "field-mig-manager-pending-22-min-stuck-all-2g-20gb-a100-22-nodes",
        "The same reconfiguration 22 minutes on, still `pending` with no `Successfully updated`: past the 15 "
        "minutes the spec allows, the MIG manager did not apply the layout (L1_MIG_CONFIG_FAILED).",
        "2026-11-29T09:50:02Z",
    )  # fmt: skip
    return f, {
        "target": "rag/embed-bge-large-7",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L1_MIG_CONFIG_FAILED",
        "codes": ["L1_POD_PENDING", "L1_MIG_CONFIG_FAILED"],
        "absent": ["L1_UNKNOWN"],
    }


# --- item 6: the scheduler's newer wording -------------------------------------------------------


def _v1_event(f: Fleet, pod: dict[str, Any], message: str, when: str, count: int | None, suffix: str) -> None:
    """A FailedScheduling event as the events.k8s.io/v1 recorder leaves it in the core/v1 view:
    first/lastTimestamp null, eventTime set, repeats in series.count (real-control-plane.md §4.1)."""
    meta = pod["metadata"]
    ev: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "FailedScheduling", "action": "Scheduling",
        "message": message, "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "namespace": meta["namespace"],
                           "uid": meta["uid"]},
        "source": {}, "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-k8s-cp-01", "firstTimestamp": None, "lastTimestamp": None,
        "eventTime": when,
    }  # fmt: skip
    if count:
        ev["series"] = {"count": count, "lastObservedTime": when.replace("10:0", "10:1")}
    f.objects.append(ev)


def untolerated_taints_no_key() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-k8s-1-34-untolerated-taints-no-key-dra-notes-h100-21-nodes",
        "Kubernetes 1.34.3 (PR 134740 cherry-picked: `node(s) had untolerated taint(s)` with no key or value), DRA "
        "on by default (`no new claims to deallocate` before `preemption:`), events from the events.k8s.io/v1 "
        "recorder. The H100 pool carries `nvidia.com/gpu=present:NoSchedule`; the inference pod asks for the pool "
        "without the toleration. The taint must be found from the nodes.",
    )  # fmt: skip
    for i in range(1, 8):
        f.node(f"h100-infer-{i:02d}")["spec"]["taints"] = [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
    n = _count(f)
    msg = (
        f"0/{n} nodes are available: {n - 8} node(s) didn't match Pod's node affinity/selector, 8 node(s) had "
        f"untolerated taint(s). no new claims to deallocate, preemption: 0/{n} nodes are available: {n} Preemption "
        "is not helpful for scheduling."
    )
    pod = f.pending_pod("qwen3-32b-serve-0", "inference", None, gpus=2, selector={"pool": "infer"})
    pod["status"]["conditions"][0]["message"] = msg
    _v1_event(f, pod, msg, "2026-11-29T10:02:00.418270Z", 7, "187c9a2e4b1f0d35")
    return f, {
        "target": "inference/qwen3-32b-serve-0",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT"],
        "absent": ["L1_SELECTOR_MISMATCH", "L1_UNKNOWN", "L1_ALLOCATABLE_BELOW_CAPACITY"],
    }


def persistentvolume_node_affinity() -> tuple[Fleet, Expect]:
    f = _fleet(
        "field-k8s-1-33-persistentvolume-node-affinity-zonal-ebs-dra-notes-a100-21-nodes",
        "Kubernetes 1.33+ (PR 129887): `node(s) didn't match PersistentVolume's node affinity` for a checkpoint "
        "volume restored in us-east-1c while every A100 is in us-east-1a/b, with DRA's `no new claims to "
        "deallocate` before `preemption:`; two FailedScheduling events in the events.k8s.io/v1 shape (the older "
        "one first in the list, the newer with series.count).",
    )  # fmt: skip
    zones = {"a100": ["us-east-1a", "us-east-1b"], "h100": ["us-east-1a"], "l40s": ["us-east-1b"]}
    for obj in f.objects:
        if obj["kind"] == "Node":
            name = obj["metadata"]["name"]
            pool = zones.get(name.split("-")[0], ["us-east-1a"])
            obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = pool[int(name[-1]) % len(pool)]
    n = _count(f)
    msg = (
        f"0/{n} nodes are available: 1 node(s) had untolerated taint(s), {n - 1} node(s) didn't match "
        f"PersistentVolume's node affinity. no new claims to deallocate, preemption: 0/{n} nodes are available: {n} "
        "Preemption is not helpful for scheduling."
    )
    older = (
        f"0/{n} nodes are available: pod has unbound immediate PersistentVolumeClaims. no new claims to deallocate, "
        f"preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
    )
    pod = f.pending_pod("llm-ckpt-resume-0", "research", None, gpus=8, selector={"pool": "train"})
    pod["status"]["conditions"][0]["message"] = msg
    pod["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-restore"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    _v1_event(f, pod, msg, "2026-11-29T10:02:41.902113Z", 9, "187c9b01d2e3f4a5")
    _v1_event(f, pod, older, "2026-11-29T09:40:01.004310Z", None, "187c8a77c0b1a2d3")
    f.objects.append(f.objects.pop(-2))  # the newer event last in the list: order comes from the times
    pv = "pvc-7d1e4c2a-9b3f-4e6d-8a5c-2f1b0e9d8c7a"
    f.objects += [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "ckpt-restore", "namespace": "research", "uid": "c2b2b000-0000-4000-8000-000000000001"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": pv,
                  "dataSource": {"name": "ckpt-snap-1128", "kind": "VolumeSnapshot",
                                 "apiGroup": "snapshot.storage.k8s.io"},
                  "resources": {"requests": {"storage": "2Ti"}}},
         "status": {"phase": "Bound", "capacity": {"storage": "2Ti"}}},
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": pv, "uid": "c2b2b000-0000-4000-8000-000000000002"},
         "spec": {"capacity": {"storage": "2Ti"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                  "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0c2d3e4f5a6b7c8d9", "fsType": "xfs"},
                  "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "research", "name": "ckpt-restore"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]}]}}},
         "status": {"phase": "Bound"}},
    ]  # fmt: skip
    return f, {
        "target": "research/llm-ckpt-resume-0",
        "walk": [1],
        "verdict": "L1_VOLUME_NODE_AFFINITY",
        "codes": ["L1_POD_PENDING", "L1_VOLUME_NODE_AFFINITY"],
        "absent": ["L1_SELECTOR_MISMATCH", "L1_GPU_EXHAUSTED", "L1_UNTOLERATED_TAINT", "L1_UNKNOWN"],
    }


RECIPES: list[Recipe] = [
    image_not_found_containerd,
    image_manifest_unknown_crio,
    topology_affinity_error,
    plugin_not_reregistered,
    xid154_condition_journal,
    xid154_dmesg_and_plugin,
    mig_manager_pending_4_min,
    mig_manager_pending_22_min,
    untolerated_taints_no_key,
    persistentvolume_node_affinity,
]


# The two new codes' bundled scenarios (bot/scenarios/; every code has one): the same incidents, named for
# `gpubot demo`.
BUNDLED: dict[str, Recipe] = {
    "driver-image-not-published-for-ubuntu24": image_not_found_containerd,
    "device-plugin-not-reregistered-after-kubelet-restart": plugin_not_reregistered,
}


def write_bundled() -> None:
    for name, recipe in BUNDLED.items():
        fleet, expect = recipe()
        fleet.name = name
        print(fleet.write(HERE.parents[2] / "bot" / "scenarios", expect))


def main() -> None:
    write_recipes(RECIPES, HERE)
    write_bundled()


if __name__ == "__main__":
    main()
