"""The DRA selector incidents (tests/incidents/dra_cel/*.yaml): issue 18 item 5 and the missing
ResourceClaimTemplate, on a production-shaped DRA fleet (A100, L40S and H100 pools, the usual unrelated
sickness from dra_fleets_build._noisy_fleet).

Each pending pod selects H100s with one function of Kubernetes' CEL environment that the API server
accepts (strings v2, regex, lists, optional values); every H100 is held by a pretraining job, the A100s
and L40Ss are free but do not match. Evaluated as Kubernetes does, the answer is "all devices taken"
(L1_DRA_DEVICES_EXHAUSTED, info, beside the claim-pending warn that is the verdict); gpubot used to say it could not evaluate the selector and walk on. A
selector Kubernetes rejects (`reverse`, strings v3) is the claim's error; a pod whose template is gone
gets the resource claim controller's event (pkg/controller/resourceclaim/controller.go:
`PodResourceClaim %s: resource claim template %q: <lister error>`).

Run `python -m tests.incidents.dra_cel_build` to rewrite them.
"""

from __future__ import annotations

from pathlib import Path

from tests.incidents.dra_fleets_build import _noisy_fleet
from tests.incidents.drafleet import DraFleet

HERE = Path(__file__).resolve().parent / "dra_cel"
NOW = "2026-11-30T15:00:00Z"
POOLS = {"a100": 8, "l40s": 4, "h100": 6}
H100S = [f"h100-{i:02d}" for i in range(1, POOLS["h100"] + 1)]
A = "device.attributes['gpu.nvidia.com']"
# 19 nodes: the control plane, the cordoned L40S, 11 other nodes outside the H100 pool, and the 6 H100s
# on which the claim cannot be allocated (one reason per node: the first filter that fails).
SCHEDULER = (
    "0/19 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
    "1 node(s) were unschedulable, 11 node(s) didn't match Pod's node affinity/selector, 6 cannot allocate "
    "all claims. preemption: 0/19 nodes are available: 19 Preemption is not helpful for scheduling."
)
H100_POOL = {"pool": "h100"}

# function -> the selector a user writes with it (each true on the H100s only)
SELECTORS: dict[str, str] = {
    "lowerascii": f"{A}.productName.lowerAscii().contains('h100')",
    "split": f"{A}.productName.split(' ')[1] == 'H100'",
    "replace": f"{A}.productName.replace('NVIDIA ', '').startsWith('H100')",
    "indexof": f"{A}.productName.indexOf('H100') >= 0",
    "trim": f"{A}.architecture.trim().lowerAscii() == 'hopper' && {A}.productName.contains('80GB')",
    # (the size guard also keeps it off cel-cpp's end == size() refusal on "NVIDIA L40S": see kubecel)
    "substring": f"{A}.productName.size() > 11 && {A}.productName.substring(7, 11) == 'H100'",
    "find": f"{A}.productName.find('H[0-9]{{3}}') == 'H100'",
    "sum": f"[{A}.cudaComputeCapability.major() * 10, {A}.cudaComputeCapability.minor()].sum() >= 90",
    "format": f"'%s/%s'.format([{A}.architecture, {A}.productName]).startsWith('Hopper/NVIDIA H100')",
    "optional": f"{A}.?productName.orValue('').endsWith('HBM3')",
}


def _fleet(name: str, description: str) -> DraFleet:
    f = DraFleet(name, description, now=NOW)
    _noisy_fleet(f, POOLS, set(H100S))
    for i, node in enumerate(H100S, start=1):
        f.gpu_node(node, "h100")
        f.workload("training", f"llama3-70b-pretrain-{i}", node, [f"gpu-{g}" for g in range(8)],
                   template="llama3-70b-x8", created="2026-11-29T22:00:00Z")  # fmt: skip
    return f


def exhausted(function: str, selector: str) -> None:
    f = _fleet(
        f"dra-cel-{function}-selector-h100s-all-held-19-nodes",
        f"A fine-tuning job asks for 4 H100s with a selector built on `{function}` (Kubernetes' CEL environment "
        "accepts it) in the H100 pool; all 48 H100s are held by the pretraining jobs (the A100 and L40S pools, "
        "free and sick in the usual ways, are not its nodes). "
        "Evaluated as the scheduler does: all matching devices are taken.",
    )
    pod = f"qwen-ft-{function}-0"
    f.pending("research", pod, template=f"h100-x4-{function}", selector=selector, count=4, node_selector=H100_POOL,
              scheduler=SCHEDULER, created="2026-11-30T14:20:00Z")  # fmt: skip
    f.write(HERE, {
        "target": f"research/{pod}", "walk": [1], "verdict": "L1_DRA_CLAIM_PENDING",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_DEVICES_EXHAUSTED"],
        "absent": ["L1_UNKNOWN", "L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_CLAIM_TEMPLATE_MISSING", "L5_XID"],
    })  # fmt: skip


def rejected() -> None:
    f = _fleet(
        "dra-cel-reverse-strings-v3-rejected-19-nodes",
        "A selector uses `reverse()` (cel-go strings v3), which Kubernetes' strings v2 does not have: the "
        "selector is the claim's error (no device can ever match), not something gpubot cannot evaluate.",
    )
    pod = "qwen-ft-reverse-0"
    f.pending("research", pod, template="h100-x4-reverse", selector=f"{A}.productName.reverse().startsWith('3MBH')",
              count=4, node_selector=H100_POOL, scheduler=SCHEDULER, created="2026-11-30T14:20:00Z")  # fmt: skip
    f.write(HERE, {
        "target": f"research/{pod}", "walk": [1], "verdict": "L1_DRA_SELECTOR_UNSATISFIED",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_SELECTOR_UNSATISFIED"],
        "absent": ["L1_UNKNOWN", "L1_DRA_DEVICES_EXHAUSTED"],
    })  # fmt: skip


def template_missing() -> None:
    f = _fleet(
        "dra-claim-template-missing-h100-x8-19-nodes",
        "A TrainJob's pods name the ResourceClaimTemplate `h100-x8-nccl`, which was never created in their "
        "namespace (the manifest came from another team's environment): the resource claim controller reports "
        "FailedResourceClaimCreation and no claim exists. gpubot must say so, never that the claims are allocated.",
    )
    pod = "deepseek-sft-node-0-0"
    template = "h100-x8-nccl"
    obj = f._pod(pod, "ml-train", None, {"app": "deepseek-sft"},
                 [("trainer", "nvcr.io/nvidia/pytorch:25.09-py3", {"state": "ContainerCreating"})],
                 claims=[{"name": "gpus", "resourceClaimTemplateName": template}], phase="Pending",
                 created="2026-11-30T14:31:00Z")  # fmt: skip
    obj["spec"].pop("nodeName")
    obj["spec"]["nodeSelector"] = H100_POOL
    obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    f.event("ml-train", pod, "FailedResourceClaimCreation",
            f'PodResourceClaim gpus: resource claim template "{template}": '
            f'resourceclaimtemplate.resource.k8s.io "{template}" not found',
            count=31, first="2026-11-30T14:31:00Z", last="2026-11-30T14:58:12Z",
            component="resource_claim")  # fmt: skip
    f.write(HERE, {
        "target": f"ml-train/{pod}", "walk": [1], "verdict": "L1_DRA_CLAIM_TEMPLATE_MISSING",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_CLAIM_TEMPLATE_MISSING"],
        "absent": ["L1_UNKNOWN", "L1_DRA_DEVICES_EXHAUSTED", "L1_DRA_SELECTOR_UNSATISFIED"],
    })  # fmt: skip


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for function, selector in SELECTORS.items():
        exhausted(function, selector)
    rejected()
    template_missing()


if __name__ == "__main__":
    main()
