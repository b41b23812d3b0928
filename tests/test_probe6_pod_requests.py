"""A pod's GPU request as the scheduler counts it (KEP-753): sidecars add to the containers, a plain
init container needs only its own request plus the sidecars started before it."""

from __future__ import annotations

from typing import Any

from layers.facts.objects import pod_requests


def _c(name: str, gpus: int | None, *, sidecar: bool = False, limits_only: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "x"}
    if gpus is not None:
        q = {"nvidia.com/gpu": str(gpus)}
        c["resources"] = {"limits": q} if limits_only else {"limits": q, "requests": q}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": containers, "initContainers": init, **spec}}


def test_sidecar_adds_to_the_containers() -> None:
    pod = _pod([_c("main", 4, limits_only=True)], [_c("fetch", None), _c("encoder", 1, sidecar=True)])
    assert pod_requests(pod) == {"nvidia.com/gpu": 5}


def test_plain_init_container_counts_with_the_sidecars_before_it() -> None:
    # sidecar 1, then an init container of 3 while it runs (4), then main 2 beside the sidecar (3).
    pod = _pod([_c("main", 2)], [_c("proxy", 1, sidecar=True), _c("warmup", 3)])
    assert pod_requests(pod) == {"nvidia.com/gpu": 4}
    # an init container before the sidecar starts does not run beside it.
    pod = _pod([_c("main", 2)], [_c("warmup", 3), _c("proxy", 1, sidecar=True)])
    assert pod_requests(pod) == {"nvidia.com/gpu": 3}


def test_plain_init_containers_take_the_largest() -> None:
    pod = _pod([_c("a", 1), _c("b", 1)], [_c("i1", 3), _c("i2", 1)])
    assert pod_requests(pod) == {"nvidia.com/gpu": 3}


def test_overhead_of_a_gpu_resource_is_added_and_others_ignored() -> None:
    pod = _pod([_c("main", 1)], [], overhead={"cpu": "250m", "nvidia.com/gpu": "1"})
    assert pod_requests(pod) == {"nvidia.com/gpu": 2}
