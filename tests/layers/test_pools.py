"""Unit tests of issue 18's rules in layers: driver pools (layers/facts/driverpool.py), volumes in
the candidates (layers/facts/volumes.py, candidates.py), the scheduler's volume and spread reasons,
Kueue's Workload, and the driver pod that is missing."""

from __future__ import annotations

from typing import Any

from layers import scheduling, versions
from layers.facts.candidates import candidate_nodes, carries_requested
from layers.facts.driverpool import NVIDIADRIVER, assign
from layers.facts.schedmsg import parse_failed_scheduling
from layers.facts.volumes import read_volumes
from layers.gated import workload_of
from layers.sources import K8sObject
from tests.layers.builders import codes, ctx, event, forbidden, gpu_node, one, pod

NODEGROUP = "eks.amazonaws.com/nodegroup"


def labelled(
    name: str, product: str | None, group: str | None, driver: str = "550.90.07", **kw: Any
) -> K8sObject:
    labels = {"nvidia.com/cuda.driver-version.full": driver}
    if group:
        labels[NODEGROUP] = group
    n = gpu_node(name, labels=labels, node_info=kw.pop("node_info", {"kernelVersion": "5.15.0-134-generic"}))
    if product is None:
        del n["metadata"]["labels"]["nvidia.com/gpu.product"]
    else:
        n["metadata"]["labels"]["nvidia.com/gpu.product"] = product
    return n


def nvidiadriver(name: str, selector: dict[str, str]) -> K8sObject:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name},
            "spec": {"nodeSelector": selector}}  # fmt: skip


# --- driver pools ------------------------------------------------------------------------


def test_cloud_pool_is_node_group_and_product() -> None:
    nodes = [labelled("a", "H100", "train"), labelled("b", "H100", "train"), labelled("c", "A100", "train"),
             labelled("d", "H100", "infer")]  # fmt: skip
    pools = assign(nodes, [], {})
    assert pools.members("a") == ("a", "b")
    assert pools.members("c") == ("c",) and pools.members("d") == ("d",)
    assert pools.of("a") is not None and pools.of("a").label == f"node pool {NODEGROUP}=train · H100"  # type: ignore[union-attr]


def test_nvidiadriver_owner_wins_over_its_selector_and_selector_over_the_cloud_pool() -> None:
    nodes = [labelled("a", "H100", "train"), labelled("b", "H100", "train"), labelled("c", "H100", "train")]
    drivers = [nvidiadriver("h100-570", {NODEGROUP: "train"}), nvidiadriver("canary", {"canary": "yes"})]
    pools = assign(nodes, drivers, {"c": "canary"})
    assert pools.members("a") == ("a", "b")
    assert pools.of("c") is not None and pools.of("c").key == (NVIDIADRIVER, "canary")  # type: ignore[union-attr]
    assert pools.members("c") == ("c",)


def test_a_node_of_unknown_product_is_compared_with_its_node_group_or_the_fleet() -> None:
    nodes = [labelled("a", "H100", "train"), labelled("b", "H100", "train"), labelled("new", None, "train"),
             labelled("x", "A100", "infer"), labelled("lone", None, "other")]  # fmt: skip
    pools = assign(nodes, [], {})
    assert pools.members("new") == ("a", "b", "new")
    assert pools.members("lone") == ("a", "b", "new", "x", "lone")  # alone in its group: every GPU node
    assert all(not p.wide for p in pools.pools)


def test_two_branches_in_two_pools_are_no_skew_and_l3_ok_lists_them() -> None:
    nodes = [labelled(f"h{i}", "H100", "train", "570.158.01") for i in range(4)]
    nodes += [labelled(f"a{i}", "A100", "batch", "535.230.02", node_info={"kernelVersion": "5.15.0-126-generic"})
              for i in range(6)]  # fmt: skip
    target = pod("ml", "p", node="h0", requests={"nvidia.com/gpu": 1})
    result = versions.check(ctx([*nodes, target], pod=("ml", "p")))
    assert codes(result) == ["L3_OK"]
    [line] = [e for e in one(result, "L3_OK").evidence if e.startswith("driver pools: ")]
    assert "driver 570.158.01 (4) of 4 nodes" in line and "driver 535.230.02 (6) of 6 nodes" in line


def test_an_odd_node_inside_its_pool_is_a_skew_and_a_pool_of_one_is_not() -> None:
    nodes = [labelled(f"h{i}", "H100", "train", "570.158.01") for i in range(4)]
    nodes += [labelled("h4", "H100", "train", "565.57.01"), labelled("solo", "L4", "edge", "535.230.02")]
    odd = pod("ml", "p", node="h4", requests={"nvidia.com/gpu": 1})
    f = one(versions.check(ctx([*nodes, odd], pod=("ml", "p"))), "L3_DRIVER_VERSION_SKEW")
    assert "on 4 of 5 GPU nodes of its driver pool" in f.summary
    alone = pod("ml", "q", node="solo", requests={"nvidia.com/gpu": 1})
    assert "L3_DRIVER_VERSION_SKEW" not in codes(versions.check(ctx([*nodes, alone], pod=("ml", "q"))))


# --- volumes in the candidates -----------------------------------------------------------------


def zonal(zone: str) -> list[K8sObject]:
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ml"},
           "spec": {"volumeName": "pv-1"}}  # fmt: skip
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
          "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
              {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}}}  # fmt: skip
    return [pvc, pv]


def pending_with_volume() -> K8sObject:
    p = pod("ml", "p", requests={"nvidia.com/gpu": 1}, phase="Pending")
    p["spec"].pop("nodeName", None)
    p["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    return p


def in_zone(name: str, zone: str) -> K8sObject:
    return gpu_node(name, labels={"topology.kubernetes.io/zone": zone})


def test_a_node_outside_the_volumes_zone_is_no_candidate() -> None:
    c = ctx([in_zone("a", "us-east-1a"), in_zone("c", "us-east-1c"), pending_with_volume(), *zonal("us-east-1c")],
            pod=("ml", "p"))  # fmt: skip
    cands = c.candidates()
    assert cands.ordered_names() == ["c"]
    assert (
        "volume pv-1 (claim ml/data) node affinity: topology.kubernetes.io/zone In us-east-1c"
        in cands.excluded["a"]
    )


def test_an_unbound_claim_pins_nothing() -> None:
    objs = zonal("us-east-1c")
    del objs[0]["spec"]["volumeName"]
    c = ctx([in_zone("a", "us-east-1a"), pending_with_volume(), *objs], pod=("ml", "p"))
    assert c.candidates().ordered_names() == ["a"]


def test_volume_conflict_without_a_gpu_node_in_the_zone() -> None:
    p = pending_with_volume()
    msg = ("0/3 nodes are available: 2 node(s) had volume node affinity conflict, 1 node(s) had untolerated taint "
           "{node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are available: 3 Preemption is not "
           "helpful for scheduling.")  # fmt: skip
    objs = [in_zone("a", "us-east-1a"), in_zone("b", "us-east-1b"), p, *zonal("us-east-1c"),
            event(("ml", "Pod", "p"), "FailedScheduling", msg, source="default-scheduler")]  # fmt: skip
    result = scheduling.check(ctx(objs, pod=("ml", "p")))
    f = one(result, "L1_VOLUME_NODE_AFFINITY")
    assert result.next == "stop" and "zone us-east-1c" in f.summary
    assert "zone us-east-1a: 1 GPU node(s), 8 free nvidia.com/gpu (a: 8)" in f.evidence


def test_a_refused_volume_read_is_unknown_with_the_rule() -> None:
    c = ctx([in_zone("a", "us-east-1a"), pending_with_volume()], pod=("ml", "p"),
            fail={"get_persistent_volume_claim": forbidden("get", "persistentvolumeclaims", "ml")})  # fmt: skip
    result = scheduling.check(c)
    [u] = [f for f in result.findings if f.code == "L1_UNKNOWN"]
    assert "grant the bot's ServiceAccount 'get' on 'persistentvolumeclaims' in namespace ml" in u.summary
    assert c.candidates().ordered_names() == ["a"]  # the candidates are still computed


def test_read_volumes_follows_generic_ephemeral_claims() -> None:
    p = pod("ml", "p", requests={"nvidia.com/gpu": 1})
    p["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    pvc, pv = zonal("us-east-1c")
    pvc["metadata"]["name"] = "p-scratch"
    from bot.sources.snapshot import SnapshotCluster

    vols = read_volumes(SnapshotCluster([pvc, pv]), p)
    assert [v.claim for v in vols.pinned] == ["ml/p-scratch"]
    assert candidate_nodes(p, [in_zone("a", "us-east-1a")], carries_requested(p), volumes=vols).nodes == ()


# --- scheduler reasons, Kueue, the missing driver pod -----------------------------------------


def test_scheduler_volume_and_spread_reasons_are_recognised() -> None:
    f = parse_failed_scheduling("0/9 nodes are available: 3 node(s) had volume node affinity conflict, "
                                "6 node(s) didn't match pod topology spread constraints (missing required label).")  # fmt: skip
    assert f.volume_conflict and f.topology_spread and not f.selector_mismatch
    assert not parse_failed_scheduling(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    ).topology_spread


def test_kueue_workload_is_found_by_owner_or_pod_group() -> None:
    p = pod("research", "w-0", requests={"nvidia.com/gpu": 1})
    p["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train"}]
    by_job = {
        "metadata": {
            "name": "job-train-1a2b",
            "namespace": "research",
            "ownerReferences": [{"kind": "Job", "name": "train"}],
        }
    }
    other_ns = {
        "metadata": {
            "name": "job-train-x",
            "namespace": "other",
            "ownerReferences": [{"kind": "Job", "name": "train"}],
        }
    }
    assert workload_of(p, [other_ns, by_job]) is by_job
    p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "grp"
    group = {"metadata": {"name": "grp", "namespace": "research"}}
    assert workload_of(p, [group]) is group


def test_no_driver_pod_on_a_deploy_driver_node_is_unknown_not_ok() -> None:
    from tests.layers.builders import healthy_operator

    n = gpu_node("g1", labels={"nvidia.com/gpu.deploy.driver": "true"})
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": {"driver": {"enabled": True}}}  # fmt: skip
    target = pod("ml", "p", node="g1", requests={"nvidia.com/gpu": 1})
    plugin = [p for p in healthy_operator("g1") if "device-plugin" in p["metadata"]["name"]]
    result = versions.check(ctx([n, policy, target, *plugin], pod=("ml", "p")))
    assert "L3_OK" not in codes(result)
    assert "no driver pod runs there" in one(result, "L3_UNKNOWN").summary
    off = versions.check(
        ctx([n, {**policy, "spec": {"driver": {"enabled": False}}}, target, *plugin], pod=("ml", "p"))
    )
    assert codes(off) == ["L3_OK"]
