"""Per-GPU facts from real dcgm-exporter and vLLM expositions, and the cost of the fleet read."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sources.prom import PrometheusTelemetry
from bot.sources.series import SeriesData
from layers.facts import gpufacts as gf
from layers.facts import hosts
from layers.facts import walkfacts as wf
from layers.sources import NoTelemetry, TelemetryError
from tests.layers import builders as b
from tests.layers.fake_telemetry import CountingTelemetry, exposition, sample_text, series, telemetry
from tests.services import PrometheusFactory


def node_facts(telemetry: Any, hostmap: hosts.HostMap, nodes: list[str]) -> dict[str, list[gf.GpuFacts]]:
    """The walk's read (gpufacts.read_gpu_facts) grouped by node, as these tests look at it."""
    return gf.by_node(gf.read_gpu_facts(telemetry, hostmap, nodes))


NOW = 1_795_953_600.0  # 2026-11-29T12:00:00Z
DAY = 86400


def test_capital_hostname_maps_to_node_sample_27() -> None:
    tel = telemetry(exposition(sample_text("27_"), NOW), NOW)
    facts = node_facts(tel, hosts.host_map(["k8s-gpu1"], []), ["k8s-gpu1"])
    [gpu] = facts["k8s-gpu1"]
    assert (gpu.gpu, gpu.uuid, gpu.model) == ("0", "GPU-7ad09335-aadb-19c3-e3a8", "NVIDIA RTX A5000")
    assert gpu.fb_used_mib == 21383 and gpu.fb_free_mib is None and gpu.fb_ratio is None
    assert gpu.host_key == "Hostname" and gpu.matcher() == '{Hostname="k8s-gpu1",gpu="0"}'


def test_lowercase_hostname_holding_the_exporter_pod_maps_through_its_node_sample_40() -> None:
    exporter = b.operand("nvidia-dcgm-exporter", "a30-node", name="dcgm-exporter-wwwjh")
    hostmap = hosts.host_map(["a30-node", "other"], [exporter])
    assert hostmap.hosts_for(["a30-node"]) == ["a30-node", "dcgm-exporter-wwwjh"]
    tel = telemetry(exposition(sample_text("40_"), NOW), NOW)
    facts = node_facts(tel, hostmap, ["a30-node"])
    gpus = {(g.gpu, g.mig_instance): g for g in facts["a30-node"]}
    ada = gpus[("1", None)]
    assert ada.fb_free_mib == 11275 and ada.host == "dcgm-exporter-wwwjh" and ada.host_key == "hostname"
    mig = gpus[("2", "1g.6gb/3")]
    assert mig.fb_free_mib == 2207 and mig.pods == (("default", "triton-server-f7cb5d77-95xcf"),)
    # Without the exporter pod the series cannot be placed on the node.
    assert node_facts(tel, hosts.host_map(["a30-node"], []), ["a30-node"]) == {}


def test_shared_gpu_series_fold_into_one_gpu_with_both_pods_sample_39() -> None:
    node = "gke-gpu-share-test-a100-inference-mps-b3fc3d0e-3bpg"
    tel = telemetry(exposition(sample_text("39_"), NOW), NOW)
    [gpu] = node_facts(tel, hosts.host_map([node], []), [node])[node]
    assert gpu.fb_used_mib == 15866  # the whole GPU's value, not a per-pod share
    assert gpu.pods == (
        ("default", "gpu-burn-deployment-1-85dc8ff699-clvh5"),
        ("vllm-inference", "vllm-medgemma-4b-it-d599b4c99-f95nk"),
    )


def test_a100_with_mig_instance_sample_30() -> None:
    tel = telemetry(exposition(sample_text("30_"), NOW), NOW)
    gpus = node_facts(tel, hosts.host_map(["ub20-a100-k8s"], []), ["ub20-a100-k8s"])["ub20-a100-k8s"]
    whole = next(g for g in gpus if g.mig_instance is None)
    assert whole.fb_ratio == pytest.approx(4845 / (4845 + 35690))
    assert whole.last_xid == 0  # value 0 means no Xid
    assert {g.mig_instance for g in gpus} == {None, "1g.5gb/13"}


def test_exp_xid_and_clock_event_counts_by_label_sample_29() -> None:
    # 29(a)'s line carries the pre-rename name; the exporter now emits DCGM_EXP_XID_ERRORS_COUNT.
    data = exposition(
        sample_text("29_"), NOW, rename={"DCGM_FI_DEV_XID_ERRORS_ACTIVE": "DCGM_EXP_XID_ERRORS_COUNT"}
    )
    facts = node_facts(telemetry(data, NOW), hosts.host_map([], []), ["workstation", "home"])
    assert facts["workstation"][0].xid_counts_24h == {42: 1}
    assert facts["home"][0].clock_events_24h == {"gpu_idle": 2, "hw_thermal": 1, "sw_thermal": 1}


def test_since_start_totals_are_news_only_when_they_changed_or_appeared_in_24_h() -> None:
    labels = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c"}
    xid, clock = "DCGM_EXP_XID_ERRORS_TOTAL", "DCGM_EXP_CLOCK_EVENTS_TOTAL"
    data = [
        # scraped all along and flat for days: no Xid 48 and no slowdown today
        series(xid, {**labels, "xid": "48"}, [(-4 * DAY, 1), (-DAY - 600, 1), (-80000, 1), (0, 1)], NOW),
        series(clock, {**labels, "clock_event": "hw_slowdown"}, [(-DAY - 600, 9), (0, 9)], NOW),
        series(xid, {**labels, "xid": "31"}, [(-DAY - 600, 1), (-3600, 1), (0, 4)], NOW),  # rose today
        series(xid, {**labels, "xid": "13"}, [(-600, 2), (0, 2)], NOW),  # first appeared today
    ]
    [gpu] = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])["gpu-7"]
    assert gpu.xid_counts_24h == {} and gpu.clock_events_24h == {} and gpu.clock_totals_24h == {}
    assert set(gpu.xid_totals_24h) == {13, 31}
    health = gf.read_fleet_health(telemetry(data, NOW), hosts.host_map(["gpu-7"], []))
    assert health["gpu-7"].xids_24h == [13, 31]


def test_counts_peak_over_the_day_and_zero_series_without_xid_are_ignored() -> None:
    labels = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c"}
    data = [
        series(
            "DCGM_EXP_XID_ERRORS_COUNT", {**labels, "xid": "79"}, [(-7200, 0), (-3600, 2), (-3300, 0)], NOW
        ),
        series("DCGM_EXP_XID_ERRORS_COUNT", {**labels, "xid": "13"}, [(-2 * DAY, 5)], NOW),  # older than 24 h
        series("DCGM_EXP_XID_ERRORS_COUNT", labels, [(0, 0)], NOW),  # "no Xid" series
    ]
    [gpu] = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])["gpu-7"]
    assert gpu.xid_counts_24h == {79: 2}


def test_remapped_rows_now_and_increase_over_24h() -> None:
    labels = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c", "modelName": "NVIDIA H100 80GB HBM3"}
    data = [
        series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", labels, [(-DAY, 0), (-3600, 12), (0, 14)], NOW),
        series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", labels, [(-DAY, 1), (0, 1)], NOW),
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", labels, [(-DAY, 0), (-600, 1), (0, 1)], NOW),
    ]
    [gpu] = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])["gpu-7"]
    assert gpu.correctable_rows == 14 and gpu.correctable_rows_24h == pytest.approx(14, rel=0.01)
    assert gpu.uncorrectable_rows == 1 and gpu.uncorrectable_rows_24h == 0
    assert gpu.rows_rising and gpu.row_remap_failure == 1


def test_exporter_scrape_pod_label_is_not_a_workload() -> None:
    # A ServiceMonitor without honorLabels: `pod` is the exporter, exported_pod the workload.
    exporter = b.operand("nvidia-dcgm-exporter", "gpu-7", name="nvidia-dcgm-exporter-abcde")
    labels = {"Hostname": "gpu-7", "gpu": "0", "UUID": "GPU-1", "namespace": "gpu-operator"}
    data = [
        series("DCGM_FI_DEV_FB_USED", {**labels, "pod": "nvidia-dcgm-exporter-abcde"}, [(0, 10)], NOW),
        series(
            "DCGM_FI_DEV_FB_USED",
            {
                **labels,
                "gpu": "1",
                "UUID": "GPU-2",
                "pod": "nvidia-dcgm-exporter-abcde",
                "exported_namespace": "ml",
                "exported_pod": "trainer-0",
            },
            [(0, 10)],
            NOW,
        ),
    ]
    facts = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], [exporter]), ["gpu-7"])["gpu-7"]
    assert [g.pods for g in facts] == [(), (("ml", "trainer-0"),)]


@pytest.mark.parametrize(
    ("raw", "name"),
    [("HW_SLOWDOWN", "hw_slowdown"), ("hw_slowdown", "hw_slowdown"), ("sw_thermal_slowdown", "sw_thermal"),
     ("HwPowerBrake", "hw_power_brake"), ("hw_thermal", "hw_thermal"), ("clocks_event_reason_sw_thermal", "sw_thermal"),
     ("power_cap", "power_cap")],
)  # fmt: skip
def test_clock_event_label_variants(raw: str, name: str) -> None:
    assert gf.clock_event_name(raw) == name


def test_telemetry_down_raises_telemetry_error() -> None:
    with pytest.raises(TelemetryError):
        node_facts(NoTelemetry(NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])


def _fleet(nodes: int) -> list:
    data = []
    for n in range(nodes):
        host = {"Hostname" if n % 2 else "hostname": f"node-{n}"}
        for g in range(8):
            labels = {**host, "gpu": str(g), "UUID": f"GPU-{n}-{g}"}
            rising = n == 3 and g == 5
            data.append(
                series(
                    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", labels, [(-DAY, 0), (0, 6 if rising else 0)], NOW
                )
            )
            data.append(series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", labels, [(-DAY, 0), (0, 0)], NOW))
            data.append(
                series("DCGM_FI_DEV_ROW_REMAP_FAILURE", labels, [(0, 1 if (n, g) == (4, 0) else 0)], NOW)
            )
            data.append(series("DCGM_FI_DEV_XID_ERRORS", labels, [(0, 79 if (n, g) == (6, 2) else 0)], NOW))
    data.append(
        series(
            "DCGM_EXP_XID_ERRORS_TOTAL",
            {"hostname": "node-1", "gpu": "0", "UUID": "GPU-1-0", "xid": "48"},
            [(-60, 1)],
            NOW,
        )
    )
    return data


@pytest.mark.parametrize("nodes", [8, 400])
def test_fleet_health_costs_at_most_six_calls_whatever_the_fleet_size(nodes: int) -> None:
    tel = CountingTelemetry(telemetry(_fleet(nodes), NOW))
    health = gf.read_fleet_health(tel, hosts.host_map([f"node-{n}" for n in range(nodes)], []))
    # Six (the since-start Xid counter read by its rise), a seventh for the last Xid node-6 holds, an
    # eighth because that series began in the window, a ninth because node-3's rows rose (one range
    # read of that GPU: growth, not a reset's dip).
    assert tel.total <= 9
    # Only nodes with a non-zero signal come back: the rest of the fleet is healthy by absence.
    assert set(health) == {"node-1", "node-3", "node-4", "node-6"} if nodes > 6 else set(health) <= {"node-1"}
    assert [n for n, h in health.items() if h.rows_rising] == ["node-3"]
    assert health["node-3"].correctable_rows_24h == pytest.approx(6, rel=0.01)
    assert [n for n, h in health.items() if h.row_remap_failure] == ["node-4"]
    assert {n: h.xids_24h for n, h in health.items() if h.xids_24h} == {"node-1": [48], "node-6": [79]}


def test_node_facts_cost_does_not_grow_with_the_nodes_asked() -> None:
    one, many = CountingTelemetry(telemetry(_fleet(20), NOW)), CountingTelemetry(telemetry(_fleet(20), NOW))
    hostmap = hosts.host_map([f"node-{n}" for n in range(20)], [])
    node_facts(one, hostmap, ["node-3"])
    facts = node_facts(many, hostmap, [f"node-{n}" for n in range(10)])
    # node-3's rows rose: one range read of that GPU tells growth from a reset's dip.
    assert one.total == 14  # thirteen reads (two since-start counters by their rise) and the range read
    # node-6 holds a last Xid: one more call asks whether it changed in 24 h, and one more
    # whether another series of that GPU held it before its series began.
    assert many.total == 16
    assert sorted(facts) == [f"node-{n}" for n in range(10)]


def test_vllm_utilization_label_and_preemption_rate_by_pod() -> None:
    pod = {"namespace": "llm", "pod": "vllm-0"}
    # 34(a): gpu_memory_utilization is a label of vllm:cache_config_info.
    info = exposition(sample_text("34_"), NOW)[0]
    data = [
        series(
            "vllm:cache_config_info",
            {**{k: v for k, v in info.labels.items() if k != "__name__"}, **pod},
            [(0, 1)],
            NOW,
        ),
        series(
            "vllm:num_preemptions_total",
            {**pod, "model_name": "m", "engine": "0"},
            [(-300, 10), (-150, 40), (0, 70)],
            NOW,
        ),
        series(
            "vllm:vllm_config_info",
            {"namespace": "llm", "pod": "vllm-1", "cache_config_gpu_memory_utilization": "0.85"},
            [(0, 1)],
            NOW,
        ),
        series(
            "vllm:num_preemptions_total",
            {"namespace": "llm", "pod": "vllm-1", "model_name": "m"},
            [(-300, 3), (0, 3)],
            NOW,
        ),
    ]
    out = wf.read_vllm(telemetry(data, NOW), [("llm", "vllm-0"), ("llm", "vllm-1"), ("llm", "not-vllm")])
    assert out[("llm", "vllm-0")].gpu_memory_utilization == "0.9"
    assert out[("llm", "vllm-0")].preemption_rate == pytest.approx(0.2, rel=0.05)
    assert out[("llm", "vllm-1")].gpu_memory_utilization == "0.85"
    assert out[("llm", "vllm-1")].preemption_rate == 0
    assert ("llm", "not-vllm") not in out


def test_fleet_read_through_a_real_prometheus_matches_and_stays_within_six_queries(
    prometheus_factory: PrometheusFactory,
) -> None:
    data = _fleet(8)
    server = prometheus_factory(data)
    prom = PrometheusTelemetry(server.url, at=NOW)
    hostmap = hosts.host_map([f"node-{n}" for n in range(8)], [])
    real = gf.read_fleet_health(prom, hostmap)
    # six; node-6's last-Xid series began in the window: one more query; node-3's rows rose: one more.
    assert prom.queries <= 9
    memory = gf.read_fleet_health(telemetry(data, NOW), hostmap)
    summary = {n: (h.rows_rising, h.row_remap_failure, h.xids_24h) for n, h in real.items()}
    assert summary == {n: (h.rows_rising, h.row_remap_failure, h.xids_24h) for n, h in memory.items()}
    assert real["node-3"].correctable_rows_24h == pytest.approx(
        memory["node-3"].correctable_rows_24h, rel=0.01
    )


# --- exposition variants -----------------------------------------------------------------


def test_exporter_pod_hostname_with_empty_pod_labels_sample_28() -> None:
    # Sample 28: Hostname is the exporter pod (standalone chart, OpenShift-style namespace), pod labels empty.
    exporter = b.pod(
        "nvidia-gpu-operator", "dcgm-exporter-lcxpl", node="titan-node",
        labels={"app.kubernetes.io/name": "dcgm-exporter"},
    )  # fmt: skip
    data = exposition(sample_text("28_"), NOW, rename={"DCGM_FI_DEV_SM_CLOCK": "DCGM_FI_DEV_FB_USED"})
    facts = node_facts(telemetry(data, NOW), hosts.host_map(["titan-node"], [exporter]), ["titan-node"])
    gpus = facts["titan-node"]
    assert len(gpus) >= 5 and all(g.pods == () for g in gpus)
    assert {g.host for g in gpus} == {"dcgm-exporter-lcxpl"} and gpus[0].node == "titan-node"


def test_old_prometheus_chart_pod_labels_name_the_workload() -> None:
    labels = {"Hostname": "gpu-7", "gpu": "0", "UUID": "GPU-1"}
    data = [
        series(
            "DCGM_FI_DEV_FB_USED",
            {**labels, "kubernetes_namespace": "ml", "kubernetes_pod_name": "trainer-0"},
            [(0, 10)],
            NOW,
        )
    ]
    [gpu] = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])["gpu-7"]
    assert gpu.pods == (("ml", "trainer-0"),)
    assert {"kubernetes_namespace": ["ml"], "kubernetes_pod_name": ["trainer-0"]} in hosts.pod_selector(
        "ml", "trainer-0"
    )


def test_nan_readings_are_no_reading() -> None:
    labels = {"Hostname": "gpu-7", "gpu": "0", "UUID": "GPU-1"}
    data = [
        series(
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            {**labels, "pod": "a", "namespace": "x"},
            [(0, float("nan"))],
            NOW,
        ),
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", {**labels, "pod": "b", "namespace": "x"}, [(0, 1)], NOW),
        series("DCGM_FI_DEV_FB_USED", labels, [(0, float("nan"))], NOW),
    ]
    [gpu] = node_facts(telemetry(data, NOW), hosts.host_map(["gpu-7"], []), ["gpu-7"])["gpu-7"]
    assert gpu.row_remap_failure == 1 and gpu.fb_used_mib is None


def test_pre_rename_clock_throttle_metric_and_label_pr_254() -> None:
    text = (
        'DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT{gpu="0",UUID="GPU-b9f9e81b-bee7-34bc-af17-132ef6592740",'
        'device="nvidia0",modelName="NVIDIA T400 4GB",Hostname="localhost",DCGM_FI_DRIVER_VERSION="545.29.02",'
        'throttle_reason="sw_thermal",window_size_in_ms="300000"} 1\n'
    )
    tel = telemetry(exposition(text, NOW), NOW)
    [gpu] = node_facts(tel, hosts.host_map(["localhost"], []), ["localhost"])["localhost"]
    assert gpu.clock_events_24h == {"sw_thermal": 1}


def test_digest_xids_leave_out_a_last_xid_gauge_unchanged_for_24h() -> None:
    def gauge(node: str, points: list[tuple[float, float]]) -> SeriesData:
        labels = {"Hostname": node, "gpu": "0", "UUID": f"GPU-{node}", "modelName": "NVIDIA H100 80GB HBM3"}
        return series("DCGM_FI_DEV_XID_ERRORS", labels, points, NOW)

    data = [
        gauge("old", [(-3600.0 * h, 48.0) for h in range(40, -1, -1)]),
        gauge("changed", [(-30 * 3600.0, 31.0), (-3 * 3600.0, 79.0), (0.0, 79.0)]),
        gauge("began", [(-1800.0, 94.0), (0.0, 94.0)]),
    ]
    health = gf.read_fleet_health(telemetry(data, NOW), hosts.host_map(["old", "changed", "began"], []))
    assert {n: h.xids_24h for n, h in health.items()} == {"old": [], "changed": [79], "began": [94]}
