"""The roots of what the probe3 incidents found (tests/incidents/probe3/), one rule each:

- DCGM's last-Xid gauge carries a GPU's pod labels: a new pod starts new series holding the old,
  never-reset value; that is not an Xid of the last 24 h (layers/facts/gpufacts.py).
- A MIG GPU's remapped rows are repeated on each GPU instance's series: counted once (gpufacts.py).
- A taint Kubernetes puts on a node in trouble (unreachable, not-ready, pressure) is not a toleration
  to add (layers/facts/placement.py); a node that is not Ready and no candidate is one info line.
- GKE's device plugin: "Health checker is skipping Xid N error" is an Xid seen; "on unknown device"
  marks nothing; "Device=nvidia5, uuid=GPU-…" names the GPU (layers/facts/pluginlog.py).
- A lost MIG device is counted as a MIG device, not a GPU (layers/capacity.py, layers/card.py).
- A pod that selects a pool advertising its GPUs under another name (nvidia.com/gpu.shared) asks for
  the wrong resource; it is not a selector to fix (layers/scheduling.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.sources.series import SeriesData, SeriesTelemetry
from layers.capacity import allocatable_below_capacity
from layers.card import allocatable_below_capacity as card_gap
from layers.facts.candidates import candidate_nodes, carries_requested
from layers.facts.gpufacts import read_fleet_health, read_gpu_facts
from layers.facts.healthagents import gke_xids as condition_xids
from layers.facts.hosts import HostMap
from layers.facts.placement import scheduler_reasons
from layers.facts.pluginlog import PluginLog
from layers.facts.schedmsg import parse_failed_scheduling
from layers.scheduling import elsewhere_in_fleet, selected_mismatch

NOW = 1_795_000_000.0
DAY = 86400
XID = "DCGM_FI_DEV_XID_ERRORS"
GPU = {"gpu": "2", "UUID": "GPU-5e0c1a3b-0d44-4f6e-9b5a-71c2d8e0aa10", "Hostname": "h100-a"}
HOSTS = HostMap(nodes=frozenset({"h100-a"}))


def _series(name: str, points: list[tuple[float, float]], **labels: str) -> SeriesData:
    return SeriesData({"__name__": name, **GPU, **labels}, [(NOW + t, v) for t, v in points])


def _recent(*series: SeriesData) -> bool:
    [gpu] = read_gpu_facts(SeriesTelemetry(list(series), NOW), HOSTS, ["h100-a"])
    return gpu.last_xid_recent


OLD_POD = [(-40 * DAY, 48.0), (-DAY - 2000, 48.0), (-DAY + 600, 48.0), (-10800, 48.0)]


def test_a_new_pods_series_holding_the_old_xid_is_history() -> None:
    assert not _recent(
        _series(XID, OLD_POD, pod="trainer-0", namespace="ray"),
        _series(XID, [(-10740, 48.0), (0, 48.0)], pod="trainer-1", namespace="ray"),
    )


def test_a_new_value_under_new_labels_is_news() -> None:
    assert _recent(
        _series(XID, OLD_POD, pod="trainer-0", namespace="ray"),
        _series(XID, [(-10740, 79.0), (0, 79.0)], pod="trainer-1", namespace="ray"),
    )


def test_a_gpu_first_seen_in_the_window_is_news() -> None:
    assert _recent(_series(XID, [(-7200, 94.0), (0, 94.0)], pod="trainer-1", namespace="ray"))


def test_a_change_in_the_window_is_news_whatever_the_labels() -> None:
    assert _recent(
        _series(XID, [(-40 * DAY, 0.0), (-DAY - 2000, 0.0), (-DAY + 600, 0.0), (-3600, 48.0), (0, 48.0)])
    )


def test_a_mig_gpus_rows_count_once() -> None:
    rows = [(-DAY + 300, 0.0), (-20000, 2.0), (0, 2.0)]
    instances: list[dict[str, str]] = [{}, {"GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "9"},
                                       {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1"}]  # fmt: skip
    tel = SeriesTelemetry(
        [_series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", rows, **i) for i in instances], NOW
    )
    health = read_fleet_health(tel, HOSTS)
    assert round(health["h100-a"].correctable_rows_24h) == 2
    assert len(health["h100-a"].gpus) == 1


def _node(name: str, taints: list[dict[str, str]], ready: str = "True") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown",
                                   "message": "Kubelet stopped posting node status."}]},
    }  # fmt: skip


POD: dict[str, Any] = {
    "metadata": {"name": "job-0", "namespace": "ml"},
    "spec": {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                              "effect": "NoExecute", "tolerationSeconds": 300}]},
}  # fmt: skip
FAILURE = [parse_failed_scheduling("0/3 nodes are available: 3 node(s) had untolerated taint(s).")]


def test_an_unreachable_node_is_a_node_to_bring_back() -> None:
    down = _node(
        "gpu-1", [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}], ready="Unknown"
    )
    [f] = scheduler_reasons(POD, FAILURE, taint_nodes=[down], selector_nodes=[], candidates=[])
    assert "unreachable" in f.summary and "a toleration is not the fix" in f.summary
    assert (
        "gpu-1: condition Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
        in f.evidence
    )


def test_a_users_taint_still_asks_for_a_toleration() -> None:
    tainted = _node("gpu-2", [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}])
    [f] = scheduler_reasons(POD, FAILURE, taint_nodes=[tainted], selector_nodes=[], candidates=[])
    assert "add a toleration or remove the taint" in f.summary
    assert not any("condition Ready" in e for e in f.evidence)


def test_names_past_three_are_counted_not_dropped() -> None:
    tainted = [
        _node(f"gpu-{i}", [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}]) for i in range(5)
    ]
    [f] = scheduler_reasons(POD, FAILURE, taint_nodes=tainted, selector_nodes=[], candidates=[])
    assert f.summary.startswith("5 GPU node(s) (gpu-0, gpu-1, gpu-2 … and 2 more) have taint dedicated=llm")


def _gpu_node(name: str, resource: str, pool: str, ready: str = "True") -> dict[str, Any]:
    node = _node(name, [], ready=ready)
    node["metadata"]["labels"]["pool"] = pool
    node["status"]["capacity"] = node["status"]["allocatable"] = {resource: "8"}
    return node


def _pending(resource: str, pool: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "nb-0", "namespace": "ml"},
        "spec": {
            "nodeSelector": {"pool": pool},
            "containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}],
        },
    }


def test_the_selected_pool_advertising_another_name_is_a_resource_mismatch() -> None:
    nodes = [
        _gpu_node("a100-1", "nvidia.com/gpu", "train"),
        _gpu_node("l40s-1", "nvidia.com/gpu.shared", "viz"),
    ]
    pod = _pending("nvidia.com/gpu", "viz")
    cands = candidate_nodes(pod, nodes, carries_requested(pod))
    [f] = selected_mismatch(pod, cands, nodes, {"nvidia.com/gpu": 1}, set(), "kubectl get nodes")
    assert (
        f.code == "L1_RESOURCE_MISMATCH"
        and "the 1 GPU node(s) it selects advertise only nvidia.com/gpu.shared" in f.summary
    )
    # The same request on the pool that advertises it: candidates, no mismatch.
    pod = _pending("nvidia.com/gpu", "train")
    assert not selected_mismatch(pod, candidate_nodes(pod, nodes, carries_requested(pod)), nodes,
                                 {"nvidia.com/gpu": 1}, set(), "kubectl get nodes")  # fmt: skip


def test_a_node_that_is_not_ready_is_mentioned_elsewhere() -> None:
    nodes = [
        _gpu_node("xl-1", "nvidia.com/gpu", "xl"),
        _gpu_node("xl-2", "nvidia.com/gpu", "xl", ready="Unknown"),
    ]
    nodes[1]["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]
    pod = _pending("nvidia.com/gpu", "xl")
    [f] = elsewhere_in_fleet(nodes, candidate_nodes(pod, nodes, carries_requested(pod)))
    [line] = f.evidence
    assert line.startswith(
        "xl-2: condition Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
    )


def test_a_lost_mig_device_is_not_called_a_gpu() -> None:
    single = _gpu_node("a100-mig", "nvidia.com/gpu", "train")
    single["metadata"]["labels"].update(
        {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    )
    single["status"]["capacity"] = {"nvidia.com/gpu": "56"}
    single["status"]["allocatable"] = {"nvidia.com/gpu": "55"}
    whole = _gpu_node("a100-full", "nvidia.com/gpu", "train")
    whole["status"]["allocatable"] = {"nvidia.com/gpu": "7"}
    [mig, gpu] = allocatable_below_capacity([single, whole])
    assert "1 MIG device(s) marked unhealthy" in mig.summary and "GPU(s)" not in mig.summary
    assert "1 GPU(s) marked unhealthy" in gpu.summary
    [card] = card_gap("a100-mig", single)
    assert "1 MIG device reported unhealthy" in card.summary


GKE = (
    "I1129 09:41:07.551823       1 health_checker.go:395] Health checker is skipping Xid 79 error\n"
    "E1129 07:15:20.400117       1 health_checker.go:436] XidCriticalError: Xid=48 on unknown device.\n"
    "E1129 09:22:51.870254       1 health_checker.go:428] XidCriticalError: Xid=48 on Device=nvidia5, "
    "uuid=GPU-a7894a94-2d0c-b255-66e2-eeb4f3f6d05a, the device will go unhealthy.\n"
)


GKE_NOW = datetime(2026, 11, 29, 10, 12, tzinfo=UTC).timestamp()


def test_gke_plugin_lines() -> None:
    log = PluginLog()
    log.scan(GKE, "nvidia-gpu-device-plugin-large-cos-x/nvidia-gpu-device-plugin", GKE_NOW, False)
    # The Xid it skips is still an Xid it saw; the unknown device marks nothing; the GPU is named by its UUID.
    assert sorted(log.xids) == [48, 79] and "(Xid ignored by the plugin's health check)" in log.xids[79][0]
    assert list(log.unhealthy) == ["GPU-a7894a94-2d0c-b255-66e2-eeb4f3f6d05a"]
    assert log.xid_devices == {48: {"GPU-a7894a94-2d0c-b255-66e2-eeb4f3f6d05a"}}


def test_gke_xid_condition_names_its_xids() -> None:
    node = {
        "status": {
            "conditions": [{"type": "XidCriticalError", "status": "True", "reason": '{"48":true,"79":true}'}]
        }
    }
    assert condition_xids(node) == (
        [48, 79],
        'node condition XidCriticalError=True, reason {"48":true,"79":true} (GKE\'s device plugin)',
    )
    for reason in ("not json", "[79]", '{"79":false}'):
        node["status"]["conditions"][0]["reason"] = reason
        assert condition_xids(node)[0] == []
    node["status"]["conditions"][0]["status"] = "False"
    assert condition_xids(node) == ([], None)
