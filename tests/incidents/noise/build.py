"""The noise-fleet scenarios, written out as YAML: `python -m tests.incidents.fleets`.

Each function builds one production-shaped fleet (8-50 nodes, several GPU models and pools, sick
nodes the target pod could never use) and returns it with its expected diagnosis. The committed
YAML files are what the tests read; this script is how they were made, kept so a change to a
fleet is a reviewed change to its recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parents[2] / "bot" / "scenarios"

Recipe = Callable[[], tuple[Fleet, dict[str, Any]]]
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
PREEMPTION_NOT_HELPFUL = (
    ". preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
)


def pending_missing_toleration_xid_elsewhere() -> tuple[Fleet, dict[str, Any]]:
    """The issue's own example: pending only for a missing toleration, an H100 it could never use lost a GPU."""
    f = Fleet(
        "pending-missing-toleration-xid-elsewhere",
        "Built on samples 04 (untolerated taint message, k8s-device-plugin issue 421) and 06 (Xid 79, "
        "7 of 8 GPUs): a 10-node fleet where the A100 training pool is tainted nvidia.com/gpu=present:NoSchedule "
        "and the batch job selects A100s without tolerating the taint. Elsewhere an H100 node lost a GPU to "
        "Xid 79: noise for this pod, which could never run there.",
    )
    f.control_plane()
    for i in (1, 2):
        f.cpu_node(f"cpu-{i:02d}")
    for i in range(1, 5):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", taints=[GPU_TAINT])
    for i in range(1, 4):
        f.gpu_node(f"h100-infer-{i:02d}", "h100", pool="infer")
    f.sick_lost_gpu("h100-infer-02", xid=79)
    msg = (
        "0/10 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "4 node(s) had untolerated taint {nvidia.com/gpu: present}, 5 node(s) didn't match Pod's node "
        "affinity/selector" + PREEMPTION_NOT_HELPFUL.format(n=10)
    )
    f.pending_pod(
        "batch-embed-7q2xk",
        "batch",
        msg,
        gpus=4,
        selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    )
    return f, {
        "target": "batch/batch-embed-7q2xk",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT", "L1_ELSEWHERE_IN_FLEET"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH"],
    }


BUNDLED_RECIPES: list[Recipe] = [pending_missing_toleration_xid_elsewhere]
NOISE_RECIPES: list[Recipe] = []


def main() -> None:
    for recipe in BUNDLED_RECIPES:
        fleet, expect = recipe()
        print(fleet.write(BUNDLED, expect))
    for recipe in NOISE_RECIPES:
        fleet, expect = recipe()
        print(fleet.write(HERE, expect))


if __name__ == "__main__":
    main()
