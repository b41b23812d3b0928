"""Issue 18 incidents (driver pools, driver-too-old suggestions, zonal volumes, topology spread,
Kueue quota, a driver pod missing), written out as YAML: `python -m tests.incidents.pools.build`.

Each recipe fills a production-shaped fleet (tests/incidents/fleets.py: dozens of nodes, several
pools and GPU models, sick nodes the pod could never use, device plugins of several operator
releases) and returns the diagnosis spec/findings.md gives, written before the walk was run. The
real-world text: kube-scheduler's VolumeBinding and PodTopologySpread reasons
(`node(s) had volume node affinity conflict`, `node(s) didn't match pod topology spread
constraints`), Kueue's QuotaReserved message (`couldn't assign flavors to pod set main:
insufficient quota for nvidia.com/gpu in flavor …, request > maximum capacity (8 > 0)`, kueue's
flavorassigner and its integration tests), the runtime hook's `requirement error: unsatisfied
condition: cuda>=12.8` (NVIDIA/nvidia-docker#1442). The committed YAML files are what the tests read.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.incidents.fleets import Fleet, _pod, write_recipes
from tests.incidents.noise.build import CONTROL_PLANE, PREEMPTION_NOT_HELPFUL, _unschedulable, recipe

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parents[2] / "bot" / "scenarios"
NODEGROUP = "eks.amazonaws.com/nodegroup"
ZONE = "topology.kubernetes.io/zone"
OLDER_PLUGINS = ("v0.14.5", "v0.15.0", "v0.16.2", "v0.17.3")  # device plugins of operator v23.9 … v25.3


def _fleet_base(
    f: Fleet, pools: dict[str, tuple[str, int, str, str]], zones: tuple[str, ...] = ("us-east-1a",)
) -> None:
    """Control plane, CPU nodes and GPU pools: name -> (model, count, driver, cuda). Nodes rotate over
    the zones and the device plugin versions; every GPU node carries its EKS node group."""
    f.control_plane()
    for i in range(1, 4):
        f.cpu_node(f"cpu-{i:02d}")["metadata"]["labels"][ZONE] = zones[i % len(zones)]
    for pool, (model, count, driver, cuda) in pools.items():
        for i in range(1, count + 1):
            name = f"{pool}-{i:02d}"
            f.gpu_node(
                name,
                model,
                4 if model in ("l40s", "l4", "a10g") else 8,
                labels={NODEGROUP: pool, ZONE: zones[i % len(zones)]},
                operands="plugin",
                driver=driver,
                cuda=cuda,
                plugin_version=OLDER_PLUGINS[i % len(OLDER_PLUGINS)],
            )


def _expect(
    target: str, verdict: str | None, codes: list[str], absent: list[str], walk: list[int]
) -> dict[str, Any]:
    return {"target": target, "walk": walk, "verdict": verdict, "codes": codes, "absent": absent}


# --- item 1: driver pools ----------------------------------------------------------------


def healthy_pod_beside_a100_pool_on_535() -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundled healthy-pod-all-layers-ok shape (H100s on 570.158.01) plus six A100 nodes of
    another node group on driver 535.230.02 (CUDA 12.2), kernel 5.15.0-126-generic, Ubuntu 22.04.4
    — one NVIDIADriver-less fleet, two pools, two branches on purpose."""
    data = yaml.safe_load((BUNDLED / "healthy-pod-all-layers-ok.yaml").read_text(encoding="utf-8"))
    data["name"] = "pools-healthy-h100-pod-beside-a100-pool-on-535"
    data["description"] = (
        "Built on the bundled healthy-pod-all-layers-ok (sample 40's exporter, sample 32's labels), issue 18 item 1: the H100 nodes run 570.158.01 on "
        "5.15.0-134-generic; six A100 nodes of node group a100-batch were added on driver 535.230.02 (CUDA "
        "12.2), kernel 5.15.0-126-generic, Ubuntu 22.04.4. Different branches in different pools are no "
        "finding: the healthy pod stays all OK, and L3_OK lists both pools."
    )
    nodes = [
        o for o in data["objects"] if o["kind"] == "Node" and o["metadata"]["name"].startswith("gpu-h100")
    ]
    for n in nodes:
        n["metadata"]["labels"][NODEGROUP] = "h100-train"
    template = nodes[0]
    for i in range(1, 7):
        n = copy.deepcopy(template)
        name = f"gpu-a100-{i:02d}"
        lab = n["metadata"]["labels"]
        lab.update({
            "kubernetes.io/hostname": name, NODEGROUP: "a100-batch",
            "nvidia.com/cuda.driver-version.full": "535.230.02", "nvidia.com/cuda.runtime-version.full": "12.2",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.family": "ampere",
            "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.machine": "DGX-A100",
        })  # fmt: skip
        n["metadata"]["name"] = name
        n["metadata"]["uid"] = f"0a100000-0000-4000-8000-{i:012d}"
        n["status"]["addresses"] = [{"address": f"10.89.187.{10 + i}", "type": "InternalIP"},
                                    {"address": name, "type": "Hostname"}]  # fmt: skip
        n["status"]["nodeInfo"]["kernelVersion"] = "5.15.0-126-generic"
        n["status"]["nodeInfo"]["osImage"] = "Ubuntu 22.04.4 LTS"
        data["objects"].append(n)
    expect = _expect("ml/eval-harness-0", None, ["L1_POD_SCHEDULED", "L2_OK", "L3_OK", "L4_OK", "L5_OK"],
                     ["L3_DRIVER_VERSION_SKEW", "L3_KERNEL_SKEW"], [1, 2, 3, 4, 5])  # fmt: skip
    data["x-expect"] = expect
    return data, expect


@recipe
def pools_nvidiadriver_per_pool_one_h100_on_565(f: Fleet) -> dict[str, Any]:
    """Built on sample 32 (GFD driver labels), issue 18 item 1: 30 nodes, one NVIDIADriver per pool (h100-570 selects node group h100-train on
    570.158.01, a100-550 node group a100-batch on 550.163.01, l40s-575 node group l40s-viz on 575.57.08).
    One H100 node still runs 565.57.01 after a paused rollout: a skew inside its pool, while the other
    pools' branches are no finding. Elsewhere an L40S lost a GPU (Xid 79) and an A100 never registered."""
    _fleet_base(f, {"h100-train": ("h100", 10, "570.158.01", "12.8"), "a100-batch": ("a100", 8, "550.163.01", "12.4"),
                    "l40s-viz": ("l40s", 8, "575.57.08", "12.9")})  # fmt: skip
    for name, pool, version in (("h100-570", "h100-train", "570.158.01"), ("a100-550", "a100-batch", "550.163.01"),
                                ("l40s-575", "l40s-viz", "575.57.08")):  # fmt: skip
        f.objects.append({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
            "metadata": {"name": name, "uid": f"5e1d0000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}"},
            "spec": {"driverType": "gpu", "repository": "nvcr.io/nvidia", "image": "driver", "version": version,
                     "nodeSelector": {NODEGROUP: pool}},
            "status": {"state": "ready"},
        })  # fmt: skip
    odd = f.node("h100-train-04")["metadata"]["labels"]
    odd["nvidia.com/cuda.driver-version.full"] = "565.57.01"
    odd["nvidia.com/cuda.runtime-version.full"] = "12.7"
    f.running_pod("llama-sft-3", "ml", "h100-train-04", 8)
    f.sick_lost_gpu("l40s-viz-03", xid=79, gpu=1)
    f.sick_not_advertising("a100-batch-06")
    return _expect("ml/llama-sft-3", "L3_DRIVER_VERSION_SKEW", ["L1_POD_SCHEDULED", "L3_DRIVER_VERSION_SKEW"],
                   ["L3_KERNEL_SKEW", "L3_OK"], [1, 2, 3, 4, 5])  # fmt: skip


def _nvidiadriver(name: str, uid: str, version: str, selector: dict[str, str], state: str) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": name, "uid": uid},
        "spec": {"driverType": "gpu", "repository": "nvcr.io/nvidia", "image": "driver", "version": version,
                 "nodeSelector": selector},
        "status": {"state": state},
    }  # fmt: skip


def _driver_daemonset(f: Fleet, owner: dict[str, Any], ds: str, nodes: list[str], version: str) -> None:
    """The GPU Operator's driver DaemonSet of an NVIDIADriver (owned by it) and its pods on `nodes`."""
    image = f"nvcr.io/nvidia/driver:{version}-ubuntu22.04"
    labels = {"app": ds, "app.kubernetes.io/component": "nvidia-driver",
              "nvidia.com/precompiled": "false", "helm.sh/chart": "gpu-operator-v25.3.1"}  # fmt: skip
    f.objects.append({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": ds, "namespace": "gpu-operator", "uid": f"d5{owner['metadata']['uid'][2:]}",
                     "labels": labels,
                     "ownerReferences": [{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
                                          "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"selector": {"matchLabels": {"app": ds}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "nvidia-driver-ctr", "image": image}]}}},
        "status": {"desiredNumberScheduled": len(nodes), "numberReady": len(nodes)},
    })  # fmt: skip
    for i, node in enumerate(nodes):
        pod = _pod(f"{ds}-{i:05x}", "gpu-operator", node, labels, [("nvidia-driver-ctr", image)],
                   [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0")])  # fmt: skip
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds,
                                               "uid": f"d5{owner['metadata']['uid'][2:]}", "controller": True}]  # fmt: skip
        f.objects.append(pod)
        f.logs[f"gpu-operator/{pod['metadata']['name']}/nvidia-driver-ctr"] = (
            f"Starting NVIDIA driver {version}\nDone, now waiting for signal\n"
        )


@recipe
def pools_nvidiadriver_default_overlaps_h100_pin(f: Fleet) -> dict[str, Any]:
    """Built on sample 32 (GFD driver labels) and the GPU Operator's NVIDIADriver CRD (issue 26, driver pools): a catch-all NVIDIADriver
    `default` (nodeSelector nvidia.com/gpu.deploy.driver=true, 570.158.01) runs every GPU node's driver; a
    later `h100-565-pin` (node group h100-train, 565.57.01) overlaps it on the ten H100 nodes, so the GPU
    Operator refuses it (status notReady) and deploys nothing for it: every driver pod there is owned by
    default's DaemonSet. h100-train-04 runs 565.57.01 (pinned by hand) and its driver pod is gone, the
    other nine run 570.158.01. Its pool is default's, by the driver pods of the overlap, not by a name:
    a skew, with the overlap said. Renaming default to zz-default used to put it alone in the pin's
    pool (L3_OK). 26 nodes; an L40S lost a GPU elsewhere."""
    _fleet_base(f, {"h100-train": ("h100", 10, "570.158.01", "12.8"), "a100-batch": ("a100", 8, "570.158.01", "12.8"),
                    "l40s-viz": ("l40s", 8, "570.158.01", "12.8")})  # fmt: skip
    default = _nvidiadriver("default", "5e1d0000-0000-4000-8000-00000000de01", "570.158.01",
                            {"nvidia.com/gpu.deploy.driver": "true"}, "ready")  # fmt: skip
    pin = _nvidiadriver("h100-565-pin", "5e1d0000-0000-4000-8000-00000000de02", "565.57.01",
                        {NODEGROUP: "h100-train"}, "notReady")  # fmt: skip
    f.objects += [default, pin]
    nodes = [n for n in (o["metadata"]["name"] for o in f.objects if o["kind"] == "Node")
             if n.split("-")[0] in ("h100", "a100", "l40s") and n != "h100-train-04"]  # fmt: skip
    _driver_daemonset(f, default, "nvidia-gpu-driver-ubuntu22.04-7c9d5b5f8", nodes, "570.158.01")
    odd = f.node("h100-train-04")["metadata"]["labels"]
    odd["nvidia.com/cuda.driver-version.full"] = "565.57.01"
    odd["nvidia.com/cuda.runtime-version.full"] = "12.7"
    f.running_pod("llama-sft-4", "ml", "h100-train-04", 8)
    f.sick_lost_gpu("l40s-viz-05", xid=79, gpu=1)
    return _expect("ml/llama-sft-4", "L3_DRIVER_VERSION_SKEW", ["L1_POD_SCHEDULED", "L3_DRIVER_VERSION_SKEW"],
                   ["L3_KERNEL_SKEW", "L3_OK"], [1, 2, 3, 4, 5])  # fmt: skip


# --- item 4: L3_DRIVER_TOO_OLD suggests only nodes the pod could run on ---------------------


HOOK_REFUSAL = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error running prestart hook #0: exit status 1, "
    "stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: "
    "cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container: unknown"
)


@recipe
def pools_cuda128_image_on_550_only_healthy_a100_suggested(f: Fleet) -> dict[str, Any]:
    """Built on sample 32 (H100 GFD labels) and the hook's refusal of NVIDIA/nvidia-docker#1442 (issue 18 item 4): a vLLM image built for CUDA
    12.8 lands on a100-batch-01 (driver 550.163.01, CUDA 12.4). Other A100s of its node group already
    run 570.172.08 (CUDA 12.8), but a100-batch-02 is cordoned, -03 lost a GPU, -04 is NotReady, -05 has a
    taint the pod does not tolerate: only a100-batch-06 is a place to run it. The H100s on 570 are
    another node group the pod does not select. 24 nodes."""
    _fleet_base(f, {"a100-batch": ("a100", 6, "570.172.08", "12.8"), "h100-train": ("h100", 8, "570.172.08", "12.8"),
                    "l4-infer": ("l4", 6, "550.163.01", "12.4")})  # fmt: skip
    first = f.node("a100-batch-01")["metadata"]["labels"]
    first["nvidia.com/cuda.driver-version.full"] = "550.163.01"
    first["nvidia.com/cuda.runtime-version.full"] = "12.4"
    f.node("a100-batch-02")["spec"]["unschedulable"] = True
    f.sick_lost_gpu("a100-batch-03", xid=79, gpu=2)
    f.node("a100-batch-04")["status"]["conditions"][0].update(
        {
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
    )
    f.node("a100-batch-05")["spec"]["taints"] = [
        {"key": "dedicated", "value": "ml-research", "effect": "NoSchedule"}
    ]
    f.sick_lost_gpu("l4-infer-02", xid=48, gpu=0)
    for name in ("a100-batch-02", "a100-batch-03", "a100-batch-04", "a100-batch-05"):
        f.noise.remove(name) if name in f.noise else None
    f.running_pod("vllm-mistral-0", "serving", "a100-batch-01", 1)
    pod = f.objects[-1]
    pod["spec"]["nodeSelector"] = {NODEGROUP: "a100-batch"}
    pod["spec"]["containers"] = [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.2",
                                  "resources": {"limits": {"nvidia.com/gpu": "1"}}}]  # fmt: skip
    pod["status"].update({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                             {"type": "Ready", "status": "False"}]})  # fmt: skip
    pod["status"]["containerStatuses"] = [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.9.2", "ready": False, "restartCount": 4, "started": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 1m20s restarting failed container=vllm"}},
        "lastState": {"terminated": {"exitCode": 128, "reason": "StartError", "message": HOOK_REFUSAL,
                                     "startedAt": "1970-01-01T00:00:00Z", "finishedAt": "2026-11-29T10:09:41Z"}},
    }]  # fmt: skip
    return _expect("serving/vllm-mistral-0", "L3_DRIVER_TOO_OLD", ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED",
                   "L3_DRIVER_TOO_OLD"], [], [1, 2, 3])  # fmt: skip


# --- item 6: zonal volumes ------------------------------------------------------------------


@recipe
def pools_zonal_ebs_volume_in_zone_without_a10g(f: Fleet) -> dict[str, Any]:
    """Built on sample 01 (scheduler text) and VolumeBinding's ErrReasonNodeConflict with an EBS CSI PV, issue 18 item 6: an EKS fleet of 27 nodes over three zones. The fine-tuning pod selects node group
    a10g-infer and mounts a gp3 EBS claim bound in us-east-1c (its PV's required node affinity names the
    zone); the A10G nodes live in us-east-1a and us-east-1b, with free GPUs. kube-scheduler:
    `node(s) had volume node affinity conflict`. Elsewhere an H100 lost a GPU, an L40S never registered."""
    zones = ("us-east-1a", "us-east-1b")
    _fleet_base(f, {"a10g-infer": ("a10g", 8, "570.158.01", "12.8"), "h100-train": ("h100", 8, "570.158.01", "12.8"),
                    "l40s-viz": ("l40s", 7, "550.163.01", "12.4")}, zones)  # fmt: skip
    for n in f.objects:
        if n["kind"] == "Node" and n["metadata"]["name"].startswith("h100"):
            n["metadata"]["labels"][ZONE] = "us-east-1c"
    f.sick_lost_gpu("h100-train-03", xid=79, gpu=5)
    f.sick_not_advertising("l40s-viz-05")
    message = _unschedulable(27, CONTROL_PLANE, "8 node(s) had volume node affinity conflict",
                             "18 node(s) didn't match Pod's node affinity/selector",
                             then=PREEMPTION_NOT_HELPFUL.format(n=27))  # fmt: skip
    pod = f.pending_pod("whisper-finetune-0", "speech", message, gpus=1, selector={NODEGROUP: "a10g-infer"})
    pod["spec"]["volumes"] = [{"name": "dataset", "persistentVolumeClaim": {"claimName": "whisper-data"}}]
    f.objects.append({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "whisper-data", "namespace": "speech", "uid": "c1a1a000-0000-4000-8000-000000000001"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": "pvc-3f9e2d1c-7b4a-4e8f-9c2d-1a2b3c4d5e6f",
                 "resources": {"requests": {"storage": "500Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "500Gi"}},
    })  # fmt: skip
    f.objects.append({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pvc-3f9e2d1c-7b4a-4e8f-9c2d-1a2b3c4d5e6f", "uid": "c1a1a000-0000-4000-8000-000000000002"},
        "spec": {"capacity": {"storage": "500Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0a1b2c3d4e5f60718", "fsType": "ext4"},
                 "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "speech", "name": "whisper-data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1c"]}]}]}}},
        "status": {"phase": "Bound"},
    })  # fmt: skip
    return _expect("speech/whisper-finetune-0", "L1_VOLUME_NODE_AFFINITY", ["L1_POD_PENDING", "L1_VOLUME_NODE_AFFINITY"],
                   ["L1_SELECTOR_MISMATCH", "L1_GPU_EXHAUSTED", "L1_GPU_NODE_NOT_ADVERTISING",
                    "L1_ALLOCATABLE_BELOW_CAPACITY"], [1])  # fmt: skip


# --- item 7: topology spread and Kueue ------------------------------------------------------


@recipe
def pools_topology_spread_h100_room_in_one_zone(f: Fleet) -> dict[str, Any]:
    """Built on sample 01 (scheduler text) and PodTopologySpread's ErrReasonConstraintsNotMatch, issue 18 item 7: a 3-replica serving deployment spreads over zones with maxSkew 1 and
    whenUnsatisfiable DoNotSchedule; zone us-east-1a (4 H100 nodes with free GPUs) already holds one
    more replica than us-east-1b, whose 4 H100s are full. kube-scheduler (v1.31):
    `node(s) didn't match pod topology spread constraints`. 26 nodes; an A100 lost a GPU elsewhere."""
    _fleet_base(f, {"h100-serve": ("h100", 8, "570.158.01", "12.8"), "a100-batch": ("a100", 8, "550.163.01", "12.4"),
                    "l4-infer": ("l4", 6, "570.158.01", "12.8")}, ("us-east-1a", "us-east-1b"))  # fmt: skip
    for i in range(1, 9):
        zone = f.node(f"h100-serve-{i:02d}")["metadata"]["labels"][ZONE]
        if zone == "us-east-1b":
            f.running_pod(f"batch-embed-{i}", "batch", f"h100-serve-{i:02d}", 8)
    f.sick_lost_gpu("a100-batch-02", xid=79, gpu=0)
    message = _unschedulable(26, CONTROL_PLANE, "4 Insufficient nvidia.com/gpu",
                             "4 node(s) didn't match pod topology spread constraints",
                             "17 node(s) didn't match Pod's node affinity/selector",
                             then=". preemption: 0/26 nodes are available: 4 No preemption victims found for incoming pod, "
                             "22 Preemption is not helpful for scheduling.")  # fmt: skip
    pod = f.pending_pod("vllm-llama-70b-2", "serving", message, gpus=4, selector={NODEGROUP: "h100-serve"})
    pod["metadata"]["labels"] = {"app": "vllm-llama-70b"}
    pod["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"app": "vllm-llama-70b"}}}]  # fmt: skip
    return _expect("serving/vllm-llama-70b-2", "L1_TOPOLOGY_SPREAD", ["L1_POD_PENDING", "L1_TOPOLOGY_SPREAD"],
                   ["L1_GPU_EXHAUSTED", "L1_SELECTOR_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY"], [1])  # fmt: skip


KUEUE_NO_GPU_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
    "request > maximum capacity (8 > 0)"
)


@recipe
def pools_kueue_clusterqueue_without_gpu_quota(f: Fleet) -> dict[str, Any]:
    """Built on sample 01's pending pod and Kueue's QuotaReserved message (kueue flavorassigner, its integration tests; issue 18 item 7): a plain pod under Kueue's pod integration (gate kueue.x-k8s.io/admission, queue
    research) asks for 8 GPUs; the ClusterQueue behind the LocalQueue was created from the CPU example and
    has no nvidia.com/gpu quota in flavor default-flavor. Its Workload says so (QuotaReserved=False,
    Pending). 28 nodes with free H100s; an L40S never registered elsewhere."""
    _fleet_base(f, {"h100-train": ("h100", 10, "570.158.01", "12.8"), "l40s-viz": ("l40s", 8, "550.163.01", "12.4"),
                    "a100-batch": ("a100", 7, "570.158.01", "12.8")})  # fmt: skip
    f.sick_not_advertising("l40s-viz-06")
    pod = f.pending_pod("pretrain-7b-0", "research", None, gpus=8, gates=["kueue.x-k8s.io/admission"])
    pod["metadata"]["labels"].update(
        {"kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/managed": "true"}
    )
    f.objects.append({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "pod-pretrain-7b-0-4c1f3", "namespace": "research", "uid": "6b0c0000-0000-4000-8000-000000000001",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pretrain-7b-0",
                                          "uid": pod["metadata"]["uid"], "controller": True}]},
        "spec": {"queueName": "research", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                   "message": KUEUE_NO_GPU_QUOTA, "lastTransitionTime": "2026-11-29T09:40:02Z"}]},
    })  # fmt: skip
    return _expect("research/pretrain-7b-0", "L1_SCHEDULING_GATED", ["L1_POD_PENDING", "L1_SCHEDULING_GATED"],
                   ["L1_GPU_EXHAUSTED", "L1_GPU_NODE_NOT_ADVERTISING"], [1])  # fmt: skip


# --- item 8c: no driver pod to read -----------------------------------------------------------


@recipe
def pools_deploy_driver_true_without_driver_pod(f: Fleet) -> dict[str, Any]:
    """Built on sample 32 (GFD labels, nvidia.com/gpu.deploy.driver=true) and sample 12's operator pods (issue 18 item 8c): the ClusterPolicy enables the driver and h100-train-02 is labelled
    nvidia.com/gpu.deploy.driver=true, its device plugin running, but no driver pod is there (the driver
    DaemonSet's pod was deleted and not yet re-created). Layer 3 cannot read the driver container's log:
    it must say so, not claim L3_OK. 22 nodes; an A100 lost a GPU elsewhere."""
    _fleet_base(f, {"h100-train": ("h100", 8, "570.158.01", "12.8"), "a100-batch": ("a100", 7, "550.163.01", "12.4"),
                    "l4-infer": ("l4", 4, "570.158.01", "12.8")})  # fmt: skip
    f.objects.append({
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy", "uid": "af44dd7c-62bc-403f-3ad8-06f5187c0d58"},
        "spec": {"driver": {"enabled": True, "version": "570.158.01"}, "devicePlugin": {"enabled": True},
                 "toolkit": {"enabled": True}, "validator": {}},
        "status": {"state": "ready", "namespace": "gpu-operator"},
    })  # fmt: skip
    f.sick_lost_gpu("a100-batch-04", xid=79, gpu=3)
    f.gpu_series("h100-train-02", "h100", 8)  # dcgm-exporter scrapes it: layers 4 and 5 can look
    f.running_pod("bert-eval-0", "ml", "h100-train-02", 2)
    return _expect(
        "ml/bert-eval-0", "L3_UNKNOWN", ["L1_POD_SCHEDULED", "L3_UNKNOWN"], ["L3_OK"], [1, 2, 3, 4, 5]
    )


RECIPES = [
    pools_nvidiadriver_per_pool_one_h100_on_565,
    pools_cuda128_image_on_550_only_healthy_a100_suggested,
    pools_zonal_ebs_volume_in_zone_without_a10g,
    pools_topology_spread_h100_room_in_one_zone,
    pools_kueue_clusterqueue_without_gpu_quota,
    pools_deploy_driver_true_without_driver_pod,
    pools_nvidiadriver_default_overlaps_h100_pin,
]


def main() -> None:
    write_recipes(RECIPES, HERE)
    data, _ = healthy_pod_beside_a100_pool_on_535()
    path = HERE / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=200, allow_unicode=True), encoding="utf-8")
    print(path)


if __name__ == "__main__":
    main()
