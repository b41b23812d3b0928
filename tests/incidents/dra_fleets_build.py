"""The DRA start-failure incidents (tests/incidents/dra_fleets/*.yaml), built on production-shaped
DRA fleets whose unrelated nodes are sick. Each is a pod whose claim was allocated but whose
container never starts, in the real words of the runtime, the kubelet and the DRA kubelet plugin:

- the claim's CDI spec lost in a reboot: containerd's `CDI device injection failed: unresolvable CDI
  devices k8s.gpu.nvidia.com/claim=<uid>-gpu-0` (kubernetes#141433; the driver's claim CDI names from
  its cdi.go), the kubelet still counting the claim prepared;
- the kubelet plugin cannot write a MIG claim's CDI spec: `FailedPrepareDynamicResources` with
  `NodePrepareResources failed for ResourceClaim …: unable to create CDI spec file for claim: failed
  to construct MIG device DeviceNode edits …` (the driver's docs, MIG cleanup example);
- the node's kubelet plugin crash-looping: `DRA driver gpu.nvidia.com is not registered` (the
  kubelet's DRA plugin manager), the plugin's own `error initializing NVML` line.

Run `python -m tests.incidents.drafleet` to rewrite them.
"""

from __future__ import annotations

from pathlib import Path

from tests.incidents.drafleet import DraFleet, suffix, uid

HERE = Path(__file__).resolve().parent / "dra_fleets"
GPU_LOST = [{"effect": "NoSchedule", "key": "gpu.nvidia.com/gpu-lost", "timeAdded": "2026-11-30T06:41:12Z"}]
XID79 = [
    {"effect": "NoExecute", "key": "gpu.nvidia.com/xid", "value": "79", "timeAdded": "2026-11-30T07:02:44Z"}
]
XID13_IGNORED = [
    {"effect": "None", "key": "gpu.nvidia.com/xid", "value": "13", "timeAdded": "2026-11-29T22:10:03Z"}
]
NVML_CRASH = (
    'I1130 08:44:10.112937       1 main.go:241] "Starting DRA kubelet plugin" driver="gpu.nvidia.com"\n'
    "Error: error creating driver: error enumerating all possible devices: error enumerating GPUs and MIG devices: "
    "error initializing NVML: ERROR_LIBRARY_NOT_FOUND\n"
)


def _noisy_fleet(f: DraFleet, pools: dict[str, int], skip: set[str]) -> None:
    """GPU nodes by pool, with the sickness a large DRA fleet always has on nodes that are not `skip`:
    a lost GPU, an Xid 79 taint, an ignored Xid 13, a kubelet plugin crash-looping (publishing
    nothing, its own pod failing to prepare), a driver pod crash-looping, a cordoned node."""
    f.control_plane()
    sick = iter(["lost", "xid79", "plugin", "xid13", "driver", "cordon"])
    for pool, count in pools.items():
        for i in range(1, count + 1):
            node = f"{pool}-{i:02d}"
            if node in skip:
                continue
            kind = next(sick, None) if i % 2 == 0 else None
            gpus = 4 if pool == "l40s" else 8  # 4-GPU L40S servers beside 8-GPU HGX boards
            if kind == "lost":
                f.gpu_node(node, pool, gpus, taints={3: GPU_LOST})
                f.workload("research", f"vit-huge-{i}", node, ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])
            elif kind == "xid79":
                f.gpu_node(node, pool, gpus, taints={1: XID79})
                f.workload("research", f"bert-eval-{i}", node, ["gpu-4"])
            elif kind == "plugin":
                f.gpu_node(node, pool, gpus, publishes=False, plugin="CrashLoopBackOff", plugin_restarts=19)
                f.log(node, "gpus", NVML_CRASH, previous=True)
                f.log(node, "compute-domains", NVML_CRASH.splitlines()[1] + "\n", previous=True)
                stuck = f"nightly-eval-{i}"
                f.workload("batch", stuck, node, ["gpu-2"], container="eval", state="ContainerCreating")
                f.event("batch", stuck, "FailedPrepareDynamicResources",
                        "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
                        count=44, first="2026-11-30T08:02:10Z", last="2026-11-30T08:58:40Z")  # fmt: skip
            elif kind == "xid13":
                f.gpu_node(node, pool, gpus, taints={5: XID13_IGNORED})
            elif kind == "driver":
                f.gpu_node(node, pool, gpus, driver_state="CrashLoopBackOff")
            elif kind == "cordon":
                f.gpu_node(node, pool, gpus, unschedulable=True)
            else:
                f.gpu_node(node, pool, gpus)
                f.workload("inference", f"llama-serve-{pool}-{i}", node, ["gpu-0", "gpu-1"], container="vllm",
                           image="vllm/vllm-openai:v0.11.0")  # fmt: skip
            if kind:
                f.noise.append(node)


def cdi_claim_spec_lost() -> None:
    f = DraFleet(
        "dra-start-cdi-claim-spec-lost-after-reboot-13-nodes",
        "h100-05 rebooted 40 minutes ago; the fine-tuning pod's claim stays allocated and the kubelet counts it "
        "prepared, but /var/run/cdi (tmpfs) lost the claim's transient CDI spec, so containerd refuses the "
        "container (samples: kubernetes#141433, the DRA driver's cdi.go claim names). Elsewhere a lost GPU, "
        "an Xid 79 taint, a crash-looping kubelet plugin, a crash-looping driver pod, a cordoned node.",
        now="2026-11-30T09:00:00Z",
    )
    target = "h100-05"
    _noisy_fleet(f, {"h100": 6, "a100": 4, "l40s": 2}, {target})
    f.gpu_node(
        target, "h100", boot="2026-11-30T08:19:52Z", plugin_restarts=1, plugin_started="2026-11-30T08:21:40Z"
    )
    pod = "qwen3-sft-0"
    devices = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    # The message names the claim's devices by uid; the claim's uid is fixed by its name (drafleet.uid).
    claim_uid = uid("llm", f"{pod}-gpus-{suffix('llm', pod, 'rc')}")
    names = ", ".join(f"k8s.gpu.nvidia.com/claim={claim_uid}-{d}" for d in devices)
    refusal = f"failed to create containerd container: CDI device injection failed: unresolvable CDI devices {names}"
    got = f.workload("llm", pod, target, devices, state="CreateContainerError", message=refusal,
                     created="2026-11-29T17:30:00Z")  # fmt: skip
    assert got == claim_uid
    f.event("llm", pod, "Failed", f"Error: {refusal}", count=31, first="2026-11-30T08:22:31Z",
            last="2026-11-30T08:58:02Z", container="trainer")  # fmt: skip
    f.log(target, "gpus", (
        'I1129 17:30:04.218811       1 driver.go:164] "Returning newly prepared devices for claim" '
        f"claim=\"llm/{pod}-gpus-{suffix('llm', pod, 'rc')}\" uid=\"{claim_uid}\" "
        f"devices=\"[{{[gpus] {target} gpu-0 [k8s.gpu.nvidia.com/claim={claim_uid}-gpu-0]}}]\"\n"
        "I1130 07:58:12.004133       1 health.go:118] \"Stopping health monitor\"\n"
    ), previous=True)  # fmt: skip
    f.log(target, "gpus", (
        'I1130 08:21:40.512937       1 main.go:241] "Starting DRA kubelet plugin" driver="gpu.nvidia.com"\n'
        f'I1130 08:21:41.930115       1 driver.go:98] "Published ResourceSlice" node="{target}" devices=8\n'
    ))  # fmt: skip
    f.write(HERE, {
        "target": f"llm/{pod}", "walk": [1, 2, 3, 4, 5], "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L2_APP_SEES_NO_GPU", "L2_OPERAND_FAILING", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def mig_prepare_failed() -> None:
    f = DraFleet(
        "dra-start-mig-claim-prepare-failed-h200-12-nodes",
        "A benchmark pod's MIG claim was allocated on h200-03, but the kubelet plugin cannot build the claim's CDI "
        "spec (the GPU instance's capability file is gone after a MIG reconfiguration): FailedPrepareDynamicResources "
        "and ContainerCreating (samples: the DRA driver's docs, MIG cleanup example). Elsewhere the usual sick nodes.",
        now="2026-11-30T11:30:00Z",
    )
    target = "h200-03"
    mig = [f"gpu-{g}-mig-1g18gb-19-{k}" for g in range(2) for k in range(7)]
    _noisy_fleet(f, {"h200": 4, "h100": 4, "a100": 3}, {target})
    f.gpu_node(target, "h200", mig=mig)
    pod = "memsat-mig-0"
    claim_uid = f.workload("bench", pod, target, [mig[8]], container="memsat", state="ContainerCreating",
                           image="nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04", device_class="mig.nvidia.com",
                           created="2026-11-30T10:58:00Z")  # fmt: skip
    claim = f"{pod}-gpus-{suffix('bench', pod, 'rc')}"
    error = (
        f"error preparing devices for claim bench/{claim}:{claim_uid}: unable to create CDI spec file for claim: failed to "
        "construct MIG device DeviceNode edits: failed to parse GI capabilities file "
        "/proc/driver/nvidia/capabilities/gpu1/mig/gi19/access: open /proc/driver/nvidia/capabilities/gpu1/mig/gi19/access: "
        "no such file or directory"
    )
    f.event("bench", pod, "Scheduled", f"Successfully assigned bench/{pod} to {target}", count=1,
            first="2026-11-30T10:58:01Z", last="2026-11-30T10:58:01Z", kind="Normal", component="default-scheduler")  # fmt: skip
    f.event("bench", pod, "FailedPrepareDynamicResources",
            f"Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
            f"ResourceClaim {claim}: {error}", count=9, first="2026-11-30T10:58:03Z", last="2026-11-30T11:27:40Z")  # fmt: skip
    f.log(target, "gpus", (
        f"I1130 11:27:40.118230       1 workqueue.go:171] Reconcile: error preparing devices for claim "
        f"'bench/{claim}:{claim_uid}': prepare devices failed: unable to create CDI spec file for claim: failed to "
        "construct MIG device DeviceNode edits: failed to parse GI capabilities file "
        "/proc/driver/nvidia/capabilities/gpu1/mig/gi19/access: no such file or directory (attempt 9)\n"
    ))  # fmt: skip
    f.write(HERE, {
        "target": f"bench/{pod}", "walk": [1, 2, 3, 4, 5], "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L2_COMPUTE_DOMAIN_NOT_READY", "L2_OPERAND_FAILING", "L5_XID"],
    })  # fmt: skip


def plugin_not_registered() -> None:
    f = DraFleet(
        "dra-start-kubelet-plugin-not-registered-a100-12-nodes",
        "The kubelet plugin on a100-02 crash-loops (NVML cannot be loaded after a driver upgrade left the node "
        "without its library), so the kubelet cannot prepare the pod's already allocated claim: "
        "FailedPrepareDynamicResources 'DRA driver gpu.nvidia.com is not registered' (samples: the kubelet's DRA "
        "plugin manager, the kubelet plugin's error initializing NVML). Elsewhere the usual sick nodes.",
        now="2026-11-30T09:00:00Z",
    )
    target = "a100-02"
    _noisy_fleet(f, {"a100": 6, "h100": 6}, {target})
    f.gpu_node(
        target, "a100", plugin="CrashLoopBackOff", plugin_restarts=12, plugin_started="2026-11-30T08:54:10Z"
    )
    f.log(target, "gpus", NVML_CRASH, previous=True)
    f.log(target, "compute-domains", NVML_CRASH.splitlines()[1] + "\n", previous=True)
    pod = "resnet-train-7d9f8-x2kqp"
    f.workload(
        "vision", pod, target, ["gpu-6", "gpu-7"], state="ContainerCreating", created="2026-11-30T08:40:00Z"
    )
    f.event("vision", pod, "FailedPrepareDynamicResources",
            "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
            count=23, first="2026-11-30T08:40:02Z", last="2026-11-30T08:59:10Z")  # fmt: skip
    f.write(HERE, {
        "target": f"vision/{pod}", "walk": [1, 2, 3, 4, 5], "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED", "L2_OPERAND_FAILING"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def selector_beyond_gpubots_cel() -> None:
    f = DraFleet(
        "dra-cel-lowerascii-selector-cordoned-h100-14-nodes",
        "A training job selects H100s with Kubernetes' CEL strings extension (lowerAscii), which the API server "
        "accepts; two H100 nodes serve a model on two GPUs each and the third, free, is cordoned. The walk "
        "evaluates the selector as Kubernetes does (issue 18: it used to say it could not) and quote the scheduler "
        "(samples: the scheduler's DynamicResources messages, the driver's deviceinfo.go attributes). The A100 and L40S "
        "pools carry the usual sickness.",
        now="2026-11-30T12:00:00Z",
    )
    _noisy_fleet(f, {"a100": 6, "l40s": 4, "h100": 3}, set())
    f.noise.remove("h100-02")  # the cordoned H100 is this pod's answer, not noise
    f.pending(
        "research", "mamba-pretrain-0", template="h100-x8", count=8, node_selector={"pool": "h100"},
        selector="device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')",
        scheduler="0/14 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "1 node(s) were unschedulable, 10 node(s) didn't match Pod's node affinity/selector, 2 cannot allocate all "
        "claims. preemption: 0/14 nodes are available: 14 Preemption is not helpful for scheduling.",
        created="2026-11-30T10:40:00Z",
    )  # fmt: skip
    f.write(HERE, {
        # h100-02, cordoned, has its eight GPUs free: uncordoning it is the answer.
        "target": "research/mamba-pretrain-0", "walk": [1], "verdict": "L1_NODES_UNSCHEDULABLE",
        "codes": ["L1_POD_PENDING", "L1_NODES_UNSCHEDULABLE", "L1_DRA_CLAIM_PENDING"],
        "absent": ["L1_UNKNOWN", "L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_DEVICE_TAINTED", "L1_DRA_NO_DEVICES", "L5_XID",
                   "L5_DEVICE_UNHEALTHY", "L2_OPERAND_FAILING"],
    })  # fmt: skip


def main() -> None:
    cdi_claim_spec_lost()
    mig_prepare_failed()
    plugin_not_registered()
    selector_beyond_gpubots_cel()


if __name__ == "__main__":
    main()
