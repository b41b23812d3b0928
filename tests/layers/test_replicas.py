"""Time-sliced nodes count replicas: layer 1 and the digest say GPUs (spec: layer 5, time-sliced nodes)."""

from __future__ import annotations

from layers import scheduling
from layers.digest import build_digest
from layers.facts import objects as o
from tests.layers.builders import NOW, ctx, gpu_node, node, pod

SLICED = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}


def sliced(name: str, allocatable: int, labels: dict[str, str] | None = None) -> dict:
    return gpu_node(name, 32, allocatable=allocatable, labels={**SLICED, **(labels or {})})


def test_replicas_per_gpu_from_the_label_or_the_sharing_labels() -> None:
    assert o.replicas_per_gpu(sliced("a", 28)) == 4
    # No replicas label, but the strategy and the count say it: 32 units over 8 GPUs.
    bare = gpu_node(
        "b", 32, labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "8"}
    )
    assert o.replicas_per_gpu(bare) == 4
    shared = node(
        "c",
        labels={"nvidia.com/gpu.product": "NVIDIA-A10G-SHARED", "nvidia.com/gpu.count": "4"},
        capacity={"nvidia.com/gpu.shared": 16},
    )
    assert o.replicas_per_gpu(shared, "nvidia.com/gpu.shared") == 4
    assert o.replicas_per_gpu(gpu_node("d", 8, labels={"nvidia.com/gpu.replicas": "1"})) == 1
    mig = node("e", labels={"nvidia.com/mig-1g.10gb.replicas": "2"}, capacity={"nvidia.com/mig-1g.10gb": 14})
    assert o.replicas_per_gpu(mig, "nvidia.com/mig-1g.10gb") == 2
    assert o.gpus_of(sliced("a", 28), "nvidia.com/gpu", 4) == 1
    assert o.gpus_of(sliced("a", 28), "nvidia.com/gpu", 3) == 1  # a GPU goes with all its replicas


def test_layer_one_says_one_gpu_for_four_replicas() -> None:
    n = sliced("l40s-01", 28, labels={"nvidia.com/gpu.count": "8"})
    p = pod("ml", "trainer-0", requests={"nvidia.com/gpu": 1})
    [f] = [
        x
        for x in scheduling.check(ctx([n, p], pod=("ml", "trainer-0"))).findings
        if x.code == "L1_ALLOCATABLE_BELOW_CAPACITY"
    ]
    assert "1 GPU(s) marked unhealthy" in f.summary and "replicas" in f.summary
    assert "time-sliced: 4 replicas per GPU, so 4 replica(s) = 1 GPU(s) of 8" in f.evidence


def test_the_digest_counts_gpus_not_replicas() -> None:
    digest = build_digest([sliced("l40s-01", 28), gpu_node("h100-01", 8, allocatable=7)], {}, NOW)
    by = {f.node: f for f in digest.flagged}
    assert (by["l40s-01"].capacity, by["l40s-01"].allocatable) == (8, 7)
    assert (by["h100-01"].capacity, by["h100-01"].allocatable) == (8, 7)
    [r] = by["l40s-01"].resources
    assert r.to_dict() == {
        "resource": "nvidia.com/gpu",
        "capacity": 32,
        "allocatable": 28,
        "replicas_per_gpu": 4,
    }
    assert "replicas_per_gpu" not in by["h100-01"].resources[0].to_dict()


def test_the_digest_table_shows_replicas_as_gpus() -> None:
    from handlers.digest import digest_table

    text = digest_table(build_digest([sliced("l40s-01", 28)], {}, NOW))
    assert "nvidia.com/gpu 32/28 replicas = 7 of 8 GPUs" in text
