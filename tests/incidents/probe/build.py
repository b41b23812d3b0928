"""The probe incidents, written out as YAML: `python -m tests.incidents.probe.build`.

Each recipe is a production-shaped fleet (12-40 nodes, several GPU models and pools, sick nodes the
target could never use) around one real-world variant of outside text: an older device-plugin log,
a kube-scheduler message of another release, a kubelet admission failure, DCGM labels of another
exporter release. Expectations come from spec/findings.md, not from what gpubot prints. The
committed YAML files are what tests/incidents/test_probe_incidents.py reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet, Recipe, mixed_pools, noise_in_viz_and_infer, uuid_of, write_recipes

HERE = Path(__file__).resolve().parent
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}


def _bound_on_lost_gpu(f: Fleet, node: str, pod: str, ns: str, gpus: int) -> None:
    f.running_pod(pod, ns, node, gpus)
    n = f.node(node)
    n["status"]["allocatable"]["nvidia.com/gpu"] = str(int(n["status"]["capacity"]["nvidia.com/gpu"]) - 1)


def old_plugin_will_go_unhealthy() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-old-plugin-will-go-unhealthy-xid48-20-nodes",
        "Built on samples 07 and 08 (device-plugin unhealthy lines) and k8s-device-plugin issue 259 / the v0.9 health check: the plugin logged with Go's log package "
        "(`2021/07/23 08:41:02 ...`) and said `XidCriticalError: Xid=48 on Device=GPU-..., the device will "
        "go unhealthy.` A training pod runs on the A100 whose GPU went unhealthy; elsewhere an L40S lost a GPU.",
    )
    noise_in_viz_and_infer(f)
    node = "a100-train-03"
    _bound_on_lost_gpu(f, node, "llm-pretrain-0", "research", 8)
    uuid = uuid_of(node, 6)
    f.plugin_log(
        node,
        "2026/11/29 09:58:05 Loading NVML\n"
        "2026/11/29 09:58:05 Starting FS watcher.\n"
        "2026/11/29 09:58:05 Starting OS watcher.\n"
        "2026/11/29 09:58:05 Starting GRPC server\n"
        "2026/11/29 09:58:05 Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock\n"
        "2026/11/29 09:58:05 Registered device plugin with Kubelet\n"
        f"2026/11/29 10:01:44 XidCriticalError: Xid=48 on Device={uuid}, the device will go unhealthy.\n",
    )
    return f, {
        "target": "research/llm-pretrain-0",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": [
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L5_ALLOCATABLE_BELOW_CAPACITY",
            "L5_DEVICE_UNHEALTHY",
            "L5_XID",
        ],
        "absent": ["L1_ELSEWHERE_IN_FLEET"],
    }


def admission_error_devices_unavailable() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-unexpected-admission-error-lost-gpu-22-nodes",
        "Built on sample 06 (7 of 8 GPUs, Xid 79) and kubernetes/kubernetes issue 130145: the pod bound to a node whose GPU was marked unhealthy between "
        "scheduling and admission fails with reason UnexpectedAdmissionError, `Allocate failed due to "
        "requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is "
        "unexpected`. The node's allocatable is one below capacity.",
        a100=7, h100=8, l40s=4,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "h100-infer-02"
    for i in range(7):
        f.running_pod(f"vllm-llama-{i}", "serving", node, 1)
    n = f.node(node)
    n["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    uuid = uuid_of(node, 4)
    f.plugin_log(
        node,
        f"I1129 10:05:11.018233       1 health.go:185] XidCriticalError: Xid=79 on Device={uuid}; "
        "marking device as unhealthy.\n"
        f"I1129 10:05:11.018301       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n",
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "vllm-llama-7", "namespace": "serving", "uid": "5d0a7f2e-9b21-4c1e-8c43-7e2f11a0c907",
                     "creationTimestamp": "2026-11-29T10:05:09Z", "labels": {"app": "vllm-llama"}},
        "spec": {"nodeName": node,
                 "containers": [{"name": "main", "image": "vllm/vllm-openai:v0.8.4",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                   "message": "Pod was rejected: Allocate failed due to requested number of devices unavailable "
                              "for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
                   "startTime": "2026-11-29T10:05:12Z"},
    }  # fmt: skip
    f.objects.append(pod)
    f.event_for_pod(
        pod,
        "UnexpectedAdmissionError",
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, "
        "Available: 0, which is unexpected",
    )
    return f, {
        "target": "serving/vllm-llama-7",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": [
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L5_ALLOCATABLE_BELOW_CAPACITY",
            "L5_DEVICE_UNHEALTHY",
            "L5_XID",
        ],
    }


def old_scheduler_taint_text() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-scheduler-1-21-taint-text-didnt-tolerate-19-nodes",
        "Built on sample 04 (untolerated taint): kube-scheduler before 1.22 said `node(s) had taint {nvidia.com/gpu: present}, that the pod didn't "
        "tolerate` and `didn't match node selector` (k8s-device-plugin issue 421 era). The A100 pool is tainted; "
        "the job selects it without the toleration. An L40S lost a GPU and an H100 has rising remapped rows.",
        a100=6, h100=5, l40s=4,
    )  # fmt: skip
    for i in range(1, 7):
        f.node(f"a100-train-{i:02d}")["spec"]["taints"] = [GPU_TAINT]
    noise_in_viz_and_infer(f)
    msg = (
        "0/19 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't "
        "tolerate, 6 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate, 12 node(s) "
        "didn't match node selector."
    )
    f.pending_pod("finetune-7b-x8k2p", "research", msg, gpus=8, selector={"pool": "train"})
    return f, {
        "target": "research/finetune-7b-x8k2p",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING"],
    }


def mig_profile_not_offered(l40s_not_advertising: bool = False) -> tuple[Fleet, dict[str, Any]]:
    name = "probe-mig-mixed-2g-20gb-not-offered-17-nodes"
    f = mixed_pools(
        name + ("-l40s-unregistered" if l40s_not_advertising else ""),
        "Built on sample 33 (MIG mixed labels) and gpu-operator's MIG mixed strategy: the A100 pool advertises nvidia.com/mig-1g.10gb and "
        "nvidia.com/mig-3g.40gb; the notebook asks for nvidia.com/mig-2g.20gb, which no node offers "
        "(`Insufficient nvidia.com/mig-2g.20gb`, scheduler 1.29 text with the preemption sentence).",
        a100=4, h100=6, l40s=4,
    )  # fmt: skip
    for i in range(1, 5):
        n = f.node(f"a100-train-{i:02d}")
        n["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed"
        n["metadata"]["labels"]["nvidia.com/mig.config"] = "all-balanced"
        n["metadata"]["labels"]["nvidia.com/mig.config.state"] = "success"
        for key in ("capacity", "allocatable"):
            del n["status"][key]["nvidia.com/gpu"]
            n["status"][key]["nvidia.com/mig-1g.10gb"] = "16"
            n["status"][key]["nvidia.com/mig-3g.40gb"] = "8"
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    f.sick_rows_rising("h100-infer-05", "h100")
    if l40s_not_advertising:
        # An L40S (not MIG-capable, no nvidia.com/mig.config) whose plugin never registered: its labels
        # do not say it would carry nvidia.com/mig-2g.20gb, so it is no candidate (spec: candidate nodes).
        f.sick_not_advertising("l40s-viz-04")
    msg = (
        "0/17 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "16 Insufficient nvidia.com/mig-2g.20gb. preemption: 0/17 nodes are available: 17 Preemption is not "
        "helpful for scheduling."
    )
    f.pending_pod("jupyter-alice-0", "notebooks", msg, gpus=1, resource="nvidia.com/mig-2g.20gb")
    return f, {
        "target": "notebooks/jupyter-alice-0",
        "walk": [1],
        "verdict": "L1_RESOURCE_MISMATCH",
        "codes": ["L1_POD_PENDING", "L1_RESOURCE_MISMATCH"],
        "absent": ["L1_GPU_EXHAUSTED", "L1_NO_GPU_ADVERTISED"],
    }


def exhausted_old_master_taint() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-exhausted-l40s-scheduler-1-27-victims-text-24-nodes",
        "Built on samples 01 and 03 (Insufficient nvidia.com/gpu, no preemption victims): kube-scheduler 1.27 text: `Insufficient nvidia.com/gpu` with `preemption: ... No preemption victims "
        "found for incoming pod`. Every L40S is held by running render pods; elsewhere an H100 has rising "
        "remapped rows and an A100 lost a GPU.",
        a100=8, h100=8, l40s=4,
    )  # fmt: skip
    f.sick_lost_gpu("a100-train-05", xid=79)
    f.sick_rows_rising("h100-infer-05", "h100")
    for i in range(1, 5):
        for j in range(4):
            f.running_pod(f"render-{i}-{j}", "viz", f"l40s-viz-{i:02d}", 1)
    msg = (
        "0/24 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "16 node(s) didn't match Pod's node affinity/selector, 3 node(s) didn't match Pod's node affinity/selector, "
        "4 Insufficient nvidia.com/gpu. preemption: 0/24 nodes are available: 4 No preemption victims found for "
        "incoming pod, 20 Preemption is not helpful for scheduling."
    ).replace("16 node(s) didn't match Pod's node affinity/selector, 3 node(s) didn't match Pod's node "
              "affinity/selector", "19 node(s) didn't match Pod's node affinity/selector")  # fmt: skip
    f.pending_pod("render-5-0", "viz", msg, gpus=1, selector={"pool": "viz"})
    return f, {
        "target": "viz/render-5-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY"],
    }


def dcgm_err_code_labels() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-dcgm-xid-err-code-labels-hostnetwork-21-nodes",
        "Built on samples 27 and 29 (dcgm-exporter series): dcgm-exporter 3.3+ labels DCGM_FI_DEV_XID_ERRORS with err_code/err_msg and pci_bus_id; on "
        "hostNetwork its instance is the node IP:9400 and Hostname the node name. The plugin runs with "
        "DP_DISABLE_HEALTHCHECKS=all, so allocatable stays full; DCGM alone shows Xid 79 on the pod's GPU.",
        a100=6, h100=7, l40s=4,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "a100-train-02"
    f.running_pod("train-moe-0", "research", node, 8)
    f.gpu_series(node, "a100", 8)
    base = {"gpu": "2", "UUID": uuid_of(node, 2), "device": "nvidia2", "modelName": "NVIDIA A100-SXM4-80GB",
            "Hostname": node, "pci_bus_id": "00000000:47:00.0", "instance": "10.20.3.12:9400",
            "job": "nvidia-dcgm-exporter", "DCGM_FI_DRIVER_VERSION": "570.158.01",
            "err_code": "79", "err_msg": "GPU has fallen off the bus"}  # fmt: skip
    f.metrics = [m for m in f.metrics
                 if not (m["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS" and m["metric"].get("gpu") == "2"
                         and m["metric"].get("Hostname") == node)]  # fmt: skip
    f.series("DCGM_FI_DEV_XID_ERRORS", base, [[-7200, 0], [-900, 79], [0, 79]])
    return f, {
        "target": "research/train-moe-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L4_NO_TELEMETRY"],
    }


def plugin_skipping_event_xid13() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-plugin-v0-14-skipping-event-xid13-18-nodes",
        "Built on sample 08 (plugin log) and k8s-device-plugin v0.14 health.go: an Xid the plugin ignores is logged `Skipping event "
        "{Device:{Handle:0x...} EventType:8 EventData:13 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}`; "
        "Xid 13 is the application's own fault (RESTART_APP), a warn pointing at the workload.",
        a100=5, h100=6, l40s=3,
    )  # fmt: skip
    f.sick_rows_rising("h100-infer-05", "h100")
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    node = "a100-train-04"
    f.running_pod("jax-sweep-3", "research", node, 8)
    f.gpu_series(node, "a100", 8)
    f.plugin_log(
        node,
        "I1129 09:44:12.774051       1 health.go:159] Processing event {Device:{Handle:0x7f1a2c3d4e50} "
        "EventType:8 EventData:13 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        "I1129 09:44:12.774102       1 health.go:165] Skipping event {Device:{Handle:0x7f1a2c3d4e50} "
        "EventType:8 EventData:13 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n",
    )
    return f, {
        "target": "research/jax-sweep-3",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L5_DEVICE_UNHEALTHY", "L5_ALLOCATABLE_BELOW_CAPACITY"],
    }


def selector_typo_1_32_text() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-selector-product-typo-scheduler-1-32-26-nodes",
        "Built on samples 01 and 32 (selector message, H100 labels): kube-scheduler 1.32 text: `0/26 nodes are available: ... didn't match Pod's node affinity/selector. "
        "preemption: 0/26 nodes are available: 26 Preemption is not helpful for scheduling.` The pod selects "
        "`nvidia.com/gpu.product=NVIDIA-H100-80GB` (the label is NVIDIA-H100-80GB-HBM3).",
        a100=8, h100=8, l40s=6,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    msg = (
        "0/26 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "25 node(s) didn't match Pod's node affinity/selector. preemption: 0/26 nodes are available: 26 "
        "Preemption is not helpful for scheduling."
    )
    f.pending_pod(
        "sglang-router-0", "serving", msg, gpus=2, selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB"}
    )
    return f, {
        "target": "serving/sglang-router-0",
        "walk": [1],
        "verdict": "L1_SELECTOR_MISMATCH",
        "codes": ["L1_POD_PENDING", "L1_SELECTOR_MISMATCH"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING"],
    }


def plugin_unhealthy_klog_structured() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-plugin-xid94-marked-unhealthy-pending-h100-16-nodes",
        "Built on samples 06 and 08 (Xid lines, 7 of 8 GPUs): k8s-device-plugin v0.15+: `XidCriticalError: Xid=94 on Device=GPU-...; marking device as unhealthy.` "
        "then `'nvidia.com/gpu' device marked unhealthy: GPU-...`. The H100 pool is full but for the GPU "
        "marked unhealthy; a pending 8-GPU job can only go there, so the candidate's allocatable below "
        "capacity decides (checked first), not exhaustion.",
        a100=3, h100=6, l40s=3,
    )  # fmt: skip
    f.sick_rows_rising("a100-train-02", "a100")
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    for i in range(1, 7):
        node = f"h100-infer-{i:02d}"
        if i == 4:
            continue
        f.running_pod(f"serve-{i}", "serving", node, 8)
    node = "h100-infer-04"
    n = f.node(node)
    n["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    uuid = uuid_of(node, 5)
    f.plugin_log(
        node,
        f"I1129 09:51:30.100412       1 health.go:185] XidCriticalError: Xid=94 on Device={uuid}; "
        "marking device as unhealthy.\n"
        f"I1129 09:51:30.100488       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n",
    )
    msg = (
        "0/16 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "6 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node affinity/selector. preemption: "
        "0/16 nodes are available: 6 No preemption victims found for incoming pod, 10 Preemption is not "
        "helpful for scheduling."
    )
    f.pending_pod("train-h100-x8", "research", msg, gpus=8, selector={"pool": "infer"})
    return f, {
        "target": "research/train-h100-x8",
        "walk": [1, 5],
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_POD_PENDING", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY", "L5_XID"],
    }


def plugin_uuid_unknown_all_devices() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-plugin-uuid-unknown-marks-all-devices-23-nodes",
        "Built on samples 06 and 08 (plugin health lines): k8s-device-plugin v0.14 health.go, when NVML "
        "cannot name the GPU of an Xid event, logs `Failed to determine uuid for event {{<nil>} 8 79 ...}: "
        "...; marking all devices as unhealthy.` The node's allocatable drops to 0 of 8; the bound pod's GPUs "
        "are gone. Elsewhere an L40S lost one GPU and an H100 has rising remapped rows.",
        a100=7, h100=8, l40s=4,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "h100-infer-07"
    f.running_pod("triton-ensemble-0", "serving", node, 4)
    f.node(node)["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    f.plugin_log(
        node,
        # health.go prints the event with %v here (no field names), unlike "Skipping event %+v".
        "I1129 10:03:02.551910       1 health.go:172] Failed to determine uuid for event {{<nil>} 8 79 "
        "4294967295 4294967295}: Unknown Error; marking all devices as unhealthy.\n",
    )
    return f, {
        "target": "serving/triton-ensemble-0",
        "walk": [1, 5],
        # Both layer-5 faults are equally severe; the walk's verdict names the device plugin's mark.
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY"],
    }


def mig_device_marked_unhealthy() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-mig-1g-10gb-device-marked-unhealthy-mixed-19-nodes",
        "Built on samples 30 and 33 (A100 MIG mixed) and sample 08: under the mixed strategy the plugin "
        "names the MIG resource, `'nvidia.com/mig-1g.10gb' device marked unhealthy: MIG-...`, after "
        "`XidCriticalError: Xid=48 on Device=MIG-...`; allocatable nvidia.com/mig-1g.10gb is 13 of 14.",
        a100=5, h100=6, l40s=4,
    )  # fmt: skip
    for i in range(1, 6):
        n = f.node(f"a100-train-{i:02d}")
        n["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed"
        n["metadata"]["labels"]["nvidia.com/mig.config"] = "all-balanced"
        n["metadata"]["labels"]["nvidia.com/mig.config.state"] = "success"
        for key in ("capacity", "allocatable"):
            del n["status"][key]["nvidia.com/gpu"]
            n["status"][key]["nvidia.com/mig-1g.10gb"] = "14"
            n["status"][key]["nvidia.com/mig-2g.20gb"] = "7"
    noise_in_viz_and_infer(f)
    node = "a100-train-03"
    f.node(node)["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "13"
    f.running_pod("notebook-bob-0", "notebooks", node, 1, resource="nvidia.com/mig-1g.10gb")
    mig = "MIG-4e1a9c02-77d5-5b8e-9a11-3f0c2d8e6b71"
    f.plugin_log(
        node,
        f"I1129 09:59:41.221930       1 health.go:185] XidCriticalError: Xid=48 on Device={mig}; "
        "marking device as unhealthy.\n"
        f"I1129 09:59:41.222010       1 server.go:276] 'nvidia.com/mig-1g.10gb' device marked unhealthy: {mig}\n",
    )
    return f, {
        "target": "notebooks/notebook-bob-0",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": [
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L5_ALLOCATABLE_BELOW_CAPACITY",
            "L5_DEVICE_UNHEALTHY",
            "L5_XID",
        ],
    }


def ignoring_xids_startup_line() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-plugin-ignoring-xids-startup-line-healthy-28-nodes",
        "Built on sample 08 and k8s-device-plugin pull 268 (XIDs to ignore): at start-up the plugin logs "
        "`Ignoring the following XIDs for health checks: map[13:true 31:true 43:true 45:true 68:true 109:true]`, "
        "a configuration line, not an Xid. The bound pod's node is healthy with DCGM series; the walk ends "
        "with every layer ok. Elsewhere: a lost GPU, rising rows, an unregistered plugin.",
        a100=10, h100=10, l40s=4,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "a100-train-08"
    f.running_pod("bert-eval-2", "research", node, 2)
    f.gpu_series(node, "a100", 8)
    f.plugin_log(
        node,
        "I1129 09:40:01.100233       1 health.go:64] Ignoring the following XIDs for health checks: "
        "map[13:true 31:true 43:true 45:true 68:true 109:true]\n",
    )
    return f, {
        "target": "research/bert-eval-2",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L5_OK"],
        "absent": ["L5_XID", "L5_DEVICE_UNHEALTHY"],
    }


def plugin_handle_lost_at_start() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe-plugin-gpu-lost-before-start-unnamed-device-25-nodes",
        "Built on sample 06 (7 of 8 GPUs) and k8s-device-plugin issue 231 (`nvml: GPU is lost`): the newest "
        "health.go registers each device at start and, when NVML cannot open one, logs `unable to get device "
        "handle from UUID: GPU is lost; marking it as unhealthy` without naming it. No Xid line; the bound "
        "pod's node has 7 of 8 GPUs allocatable. Elsewhere: a lost GPU, rising rows, an unregistered plugin.",
        a100=8, h100=8, l40s=5,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "a100-train-06"
    _bound_on_lost_gpu(f, node, "ray-worker-gpu-0", "ray", 4)
    f.plugin_log(
        node,
        "I1129 10:06:40.310922       1 health.go:133] Ignoring the following XIDs for health checks: "
        "map[13:true 31:true 43:true 45:true 68:true 109:true]\n"
        "I1129 10:06:40.402177       1 health.go:380] unable to get device handle from UUID: GPU is lost; "
        "marking it as unhealthy\n"
        "I1129 10:06:40.512004       1 health.go:197] Health monitoring started for 8 devices\n",
    )
    return f, {
        "target": "ray/ray-worker-gpu-0",
        "walk": [1, 5],
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY"],
        "absent": ["L5_XID"],
    }


RECIPES: list[Recipe] = [
    old_plugin_will_go_unhealthy,
    admission_error_devices_unavailable,
    old_scheduler_taint_text,
    mig_profile_not_offered,
    exhausted_old_master_taint,
    dcgm_err_code_labels,
    plugin_skipping_event_xid13,
    selector_typo_1_32_text,
    plugin_unhealthy_klog_structured,
    plugin_uuid_unknown_all_devices,
    mig_device_marked_unhealthy,
    ignoring_xids_startup_line,
    plugin_handle_lost_at_start,
    lambda: mig_profile_not_offered(l40s_not_advertising=True),
]


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
