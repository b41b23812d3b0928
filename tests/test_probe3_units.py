"""The roots of what the probe3 incidents found (tests/incidents/probe3/), one rule each:

- DCGM's last-Xid gauge carries a GPU's pod labels: a new pod starts new series holding the old,
  never-reset value; that is not an Xid of the last 24 h (layers/facts/gpufacts.py).
- A MIG GPU's remapped rows are repeated on each GPU instance's series: counted once (gpufacts.py).
- A taint Kubernetes puts on a node in trouble (unreachable, not-ready, pressure) is not a toleration
  to add (layers/facts/placement.py).
"""

from __future__ import annotations

from typing import Any

from bot.sources.series import SeriesData, SeriesTelemetry
from layers.facts.gpufacts import read_fleet_health, read_gpu_facts
from layers.facts.hosts import HostMap
from layers.facts.placement import scheduler_reasons
from layers.facts.schedmsg import parse_failed_scheduling

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
