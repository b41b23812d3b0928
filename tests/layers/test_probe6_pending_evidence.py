"""L1_POD_PENDING names what the pod asks for, including a DRA extended resource
(`deviceclass.resource.kubernetes.io/<class>`, Kubernetes 1.34+), which is no GPU resource of the
extended-resource table but is a GPU request all the same (found by probe7); L1_GPU_NODE_NOT_ADVERTISING
says why by the node's own labels and capacity."""

from __future__ import annotations

from layers import scheduling
from layers.findings import Finding
from tests.layers.builders import ctx, gpu_node, node, pod

DRA_GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


def _pending(requests: dict[str, int]) -> Finding:
    objects = [gpu_node("gpu-1", 8), pod("ml", "trainer-0", requests=requests)]
    [f] = [
        f
        for f in scheduling.check(ctx(objects, pod=("ml", "trainer-0"))).findings
        if f.code == "L1_POD_PENDING"
    ]
    return f


def test_dra_extended_resource_is_named() -> None:
    f = _pending({DRA_GPU: 2})
    assert (
        f"requests {DRA_GPU}=2 (a DRA extended resource, served through DeviceClass gpu.nvidia.com)"
        in f.evidence
    )
    assert "requests no GPU resource" not in f.evidence


def test_gpu_and_no_gpu_requests() -> None:
    assert "requests nvidia.com/gpu=1" in _pending({"nvidia.com/gpu": 1}).evidence
    assert "requests no GPU resource" in _pending({"cpu": 2}).evidence


def test_not_advertising_says_why_by_the_deploy_label_and_capacity() -> None:
    def summary(labels: dict[str, str], capacity: dict[str, str]) -> str:
        n = node("gpu-1", labels={"nvidia.com/gpu.present": "true", **labels}, capacity=capacity)
        return scheduling.node_not_advertising(n).summary

    assert "turned off on this node" in summary({"nvidia.com/gpu.deploy.device-plugin": "false"}, {})
    assert "upgrades the driver" in summary(
        {"nvidia.com/gpu.deploy.device-plugin": "paused-for-driver-upgrade"}, {}
    )
    assert "registered once" in summary({}, {"nvidia.com/gpu": "0"})
    assert "never registered" in summary({}, {})


def test_long_pending_gist_leaves_out_the_control_plane_taint_first() -> None:
    message = (
        "0/22 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "3 Insufficient nvidia.com/gpu, 15 node(s) didn't match Pod's node affinity/selector, 3 node(s) didn't "
        "match pod topology spread constraints. preemption: 0/22 nodes are available: 3 No preemption victims "
        "found for incoming pod, 19 Preemption is not helpful for scheduling."
    )
    gist = scheduling.scheduler_gist(message)
    assert gist == (
        "0/22 nodes are available: 3 Insufficient nvidia.com/gpu, 15 node(s) didn't match Pod's node "
        "affinity/selector, 3 node(s) didn't match pod topology spread constraints"
    )
    short = (
        "0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"
    )
    assert (
        scheduling.scheduler_gist(short + ", 1 Insufficient nvidia.com/gpu.")
        == short + ", 1 Insufficient nvidia.com/gpu"
    )
