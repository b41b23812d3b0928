"""The DRA side of the one reader of refused starts (layers/facts/drastart.py via startfail.py): each
real shape of a DRA refusal resolves to the pod's claim and the node's kubelet plugin; what is not the
NVIDIA DRA driver's, or is a ComputeDomain still forming, is not a start failure."""

from __future__ import annotations

from typing import Any

from layers.facts.startfail import walk_start_failures
from layers.sources import SourceError
from tests.incidents.drafleet import DraFleet
from tests.layers import builders as b

NODE = "h100-01"


def fleet(**workload: Any) -> tuple[DraFleet, str]:
    f = DraFleet("unit", "unit", now="2026-11-30T09:00:00Z")
    f.control_plane()
    f.gpu_node(NODE, "h100")
    f.gpu_node("h100-02", "h100")
    claim_uid = f.workload("ml", "train-0", NODE, ["gpu-0", "gpu-1"], state="ContainerCreating", **workload)
    return f, claim_uid


def failures(
    f: DraFleet, message: str, *, reason: str = "FailedPrepareDynamicResources", fail: Any = None
) -> list[Any]:
    f.event(
        "ml", "train-0", reason, message, count=3, first="2026-11-30T08:50:00Z", last="2026-11-30T08:58:00Z"
    )
    ctx = b.ctx(f.objects, logs=f.logs, pod=("ml", "train-0"), fail=fail)
    return list(walk_start_failures(ctx).failures)


def claim_name(f: DraFleet) -> str:
    return next(o["metadata"]["name"] for o in f.objects if o["kind"] == "ResourceClaim")


def test_the_older_kubelets_words_name_the_claim_with_its_namespace() -> None:
    # kubernetes#124090 (kubelet 1.29): "NodePrepareResources failed for claim <ns>/<name>: …"
    f, claim_uid = fleet()
    name = claim_name(f)
    [got] = failures(
        f,
        f"Failed to prepare dynamic resources: NodePrepareResources failed for claim ml/{name}: error preparing "
        f"devices for claim {claim_uid}: unable to create CDI spec file for claim: failed to set permissions on spec "
        f"file: chmod /var/run/cdik8s.gpu.nvidia.com-claim_{claim_uid}.yaml: no such file or directory",
    )
    assert got.cause == "dra-prepare" and got.container == "trainer" and got.dra is not None
    assert got.dra.claim == f"ml/{name}" and got.dra.claim_uid == claim_uid
    assert got.dra.error.startswith("unable to create CDI spec file for claim: failed to set permissions")
    assert got.dra.plugin == f"nvidia-dra-driver-gpu/{f.plugins[NODE]}" and got.dra.container == "gpus"


def test_an_rpc_error_names_the_pods_gpu_claim() -> None:
    # dra-driver-nvidia-gpu#1218: the plugin did not answer in time (a GPU held by a host process).
    f, claim_uid = fleet()
    [got] = failures(
        f,
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources: rpc error: "
        "code = DeadlineExceeded desc = context deadline exceeded",
    )
    assert got.dra is not None and got.dra.kind == "rpc" and got.dra.claim_uid == claim_uid
    assert got.dra.error == "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
    assert f"failed to prepare claim ml/{claim_name(f)}: rpc error" in got.dra.explain(NODE)


def test_the_base_spec_device_form_finds_the_claim_holding_the_device() -> None:
    # dra-driver-nvidia-gpu#736 (Talos): containerd does not read the plugin's CDI root.
    f, claim_uid = fleet()
    [got] = failures(
        f,
        "Error: failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
        "k8s.gpu.nvidia.com/device=gpu-1",
        reason="Failed",
    )
    assert got.cause == "cdi-unresolvable" and got.dra is not None and got.dra.kind == "cdi-device"
    assert got.dra.claim_uid == claim_uid and "cdi_spec_dirs" in got.dra.explain(NODE)


def test_another_vendors_claim_is_not_the_nvidia_runtimes_refusal() -> None:
    f, _ = fleet()
    claim = next(o for o in f.objects if o["kind"] == "ResourceClaim")
    for r in claim["status"]["allocation"]["devices"]["results"]:
        r["driver"] = "dra.net"
    got = failures(
        f,
        f"Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        f"ResourceClaim {claim['metadata']['name']}: failed to add interface eth99: link not found",
    )
    assert got == []


def test_a_compute_domain_still_forming_is_left_to_its_own_finding() -> None:
    f, _ = fleet()
    got = failures(
        f,
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        "ResourceClaim worker-0-channel-wwpnf: error preparing devices for claim training/worker-0-channel-wwpnf: "
        "prepare devices failed: error preparing IMEX channel device: current node not ready in ComputeDomain",
    )
    assert got == []


def test_claims_that_cannot_be_read_leave_the_failure_and_say_why() -> None:
    f, _ = fleet()
    name = claim_name(f)
    [got] = failures(
        f,
        f"Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        f"ResourceClaim {name}: error preparing devices for claim ml/{name}:3c8337ad-f366-4541-883d-30b9e99fd6be: prepare devices failed: boom",
        fail={"list_dra": b.forbidden("list", "resourceclaims.resource.k8s.io", "ml")},
    )
    assert got.dra is not None and got.dra.claim == f"ml/{name}" and got.dra.claim_uid is None
    assert any("the pod's ResourceClaims not read" in p and "forbidden" in p for p in got.dra.problems)
    assert got.dra.error == "prepare devices failed: boom"


def test_no_kubelet_plugin_on_the_node_is_said() -> None:
    f, _ = fleet()
    f.objects = [o for o in f.objects if o["metadata"]["name"] != f.plugins[NODE]]
    [got] = failures(
        f,
        "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
    )
    assert got.dra is not None and got.dra.plugin is None
    assert got.dra.explain(NODE).startswith(f"no DRA kubelet plugin of driver gpu.nvidia.com runs on {NODE}")
    assert got.dra.plugin_state == f"no kubelet plugin pod runs on {NODE}"


def test_the_device_plugins_cdi_names_are_not_dra() -> None:
    f, _ = fleet()
    [got] = failures(
        f,
        "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: could not "
        "apply required modification to OCI specification: error modifying OCI spec: failed to inject CDI devices: "
        "unresolvable CDI devices management.nvidia.com/gpu=GPU-e78e68c0-4e6a-737e-f9cc-4223fe50aead",
        reason="Failed",
    )
    assert got.cause == "cdi-unresolvable" and got.dra is None


def test_a_failing_event_read_still_reads_the_status() -> None:
    f, claim_uid = fleet(
        message=f"failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
        f"k8s.gpu.nvidia.com/claim={'0' * 8}-0000-0000-0000-000000000000-gpu-0"
    )
    pod = next(o for o in f.objects if o["kind"] == "Pod" and o["metadata"]["name"] == "train-0")
    pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] = "CreateContainerError"
    ctx = b.ctx(f.objects, pod=("ml", "train-0"), fail={"list_events": SourceError("unavailable", "timeout")})
    read = walk_start_failures(ctx)
    [got] = read.failures
    assert read.errors and got.dra is not None and got.dra.kind == "cdi-claim"
    assert got.dra.claim is None  # a claim uid the pod no longer has: not guessed
    assert claim_uid not in got.dra.explain(NODE)
