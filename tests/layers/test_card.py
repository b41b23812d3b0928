"""Layer 5 on real device-plugin logs and DCGM series: unhealthy devices, Xids, rows, clocks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from layers import card
from layers.facts import context
from layers.facts import logsigs as sig
from layers.findings import Severity
from layers.sources import NoTelemetry
from tests.layers import builders as b
from tests.layers.fake_telemetry import exposition, sample_text, series, telemetry

NODE = "gpu-node-1"
DAY = 86400
GPU = {"Hostname": NODE, "gpu": "0", "UUID": "GPU-adb24b25-1db1-436e-d958-ddee5da83d07"}


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# Verbatim from samples 06, 07, 08.
LOG_06 = """\
I0624 22:58:05.486593       1 health.go:159] Processing event {Device:{Handle:0x7f7597647848} EventType:8 EventData:109 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}
I0624 22:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-adb24b25-1db1-436e-d958-ddee5da83d07; marking device as unhealthy.
I0624 22:58:05.486727       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: GPU-adb24b25-1db1-436e-d958-ddee5da83d07
"""
LOG_07 = """\
2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.
2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8
"""
LOG_08 = """\
XidCriticalError: Xid=48 on Device=GPU-e3dbf294-2783-f38b-4274-5bc836df5be1; marking device as unhealthy.

'nvidia.com/gpu' device marked unhealthy: GPU-e3dbf294-2783-f38b-4274-5bc836df5be1
"""


def plugin(node: str = NODE) -> dict:
    return b.operand("nvidia-device-plugin-daemonset", node, suffix="xk2p9")


def run(
    objects: list,
    logs: str | dict | None,
    now: float,
    data: list | None = None,
    *,
    previous: bool = False,
    **kw: Any,
) -> Any:
    dp = plugin()
    all_logs = (
        b.logs_for(dp, "nvidia-device-plugin", logs, previous=previous) if isinstance(logs, str) else logs
    )
    tel = telemetry(data, now) if data is not None else NoTelemetry(now)
    return card.check(b.ctx([*objects, dp], logs=all_logs, telemetry=tel, node=NODE, **kw))


def by_code(result: Any, code: str) -> list:
    return [f for f in result.findings if f.code == code]


def test_seven_of_eight_with_xid79_sample_06() -> None:
    now = ts("2026-06-25T06:00:00")
    result = run([b.gpu_node(NODE, 8, allocatable=7)], LOG_06, now, [])
    [gap] = by_code(result, "L5_ALLOCATABLE_BELOW_CAPACITY")
    assert "capacity 8, allocatable 7" in gap.summary and "1 GPU " in gap.summary
    [unhealthy] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert "GPU-adb24b25-1db1-436e-d958-ddee5da83d07" in unhealthy.summary and "Xid 79" in unhealthy.summary
    assert any(e.startswith("GPU-adb24b25-1db1-436e-d958-ddee5da83d07: Xid 79") for e in unhealthy.evidence)
    # The doc's Processing-event line says EventData:109: not an Xid of its own.
    [x] = by_code(result, "L5_XID")
    assert "Xid 79" in x.summary and x.severity == Severity.FAULT
    assert "GPU-adb24b25-1db1-436e-d958-ddee5da83d07" in x.summary
    assert result.status == Severity.FAULT and result.next is None


def test_legacy_format_and_go_log_dates_sample_07() -> None:
    recent = run([b.gpu_node(NODE, 8, allocatable=7)], LOG_07, ts("2020-08-11T08:00:00"), [])
    [x] = by_code(recent, "L5_XID")
    assert "Xid 69" in x.summary and x.severity == Severity.WARN  # RESTART_APP: points at the workload
    assert by_code(recent, "L5_DEVICE_UNHEALTHY")
    # Years later the Xid is outside 24 h, but the current plugin's unhealthy mark still stands.
    later = run([b.gpu_node(NODE, 8, allocatable=7)], LOG_07, ts("2026-11-29T12:00:00"), [])
    assert not by_code(later, "L5_XID") and by_code(later, "L5_DEVICE_UNHEALTHY")


def test_previous_instance_marks_only_count_within_a_day() -> None:
    later = run([b.gpu_node(NODE)], LOG_07, ts("2026-11-29T12:00:00"), [], previous=True)
    assert not by_code(later, "L5_DEVICE_UNHEALTHY")
    recent = run([b.gpu_node(NODE)], LOG_07, ts("2020-08-10T20:00:00"), [], previous=True)
    [f] = by_code(recent, "L5_DEVICE_UNHEALTHY")
    assert "previous" in f.evidence[0]


def test_no_timestamps_standalone_chart_container_sample_08() -> None:
    dp = b.pod(
        "nvidia-device-plugin", "nvidia-device-plugin-4kq9z", node=NODE,
        containers=("nvidia-device-plugin-ctr",), labels={"app.kubernetes.io/name": "nvidia-device-plugin"},
    )  # fmt: skip
    logs = b.logs_for(dp, "nvidia-device-plugin-ctr", LOG_08)
    tel = telemetry([], ts("2026-11-29T12:00:00"))
    result = card.check(b.ctx([b.gpu_node(NODE), dp], logs=logs, telemetry=tel, node=NODE))
    [x] = by_code(result, "L5_XID")
    assert "Xid 48" in x.summary and x.severity == Severity.FAULT
    assert "nvidia-device-plugin-ctr" in x.commands[0]
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert "GPU-e3dbf294-2783-f38b-4274-5bc836df5be1" in u.summary


def test_kubectl_timestamps_klog_and_mig_device() -> None:
    now = ts("2026-11-29T12:00:00")
    log = (
        "2026-11-29T11:58:05.486697123Z I1129 11:58:05.486697       1 health.go:185] XidCriticalError: Xid=94 on "
        "Device=MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b; marking device as unhealthy.\n"
        "2026-11-27T09:00:00.000000000Z I1127 09:00:00.000000       1 health.go:185] XidCriticalError: Xid=31 on "
        "Device=GPU-1; marking device as unhealthy.\n"
    )
    result = run([b.gpu_node(NODE)], log, now, [])
    assert [x.summary.split(" ")[1] for x in by_code(result, "L5_XID")] == ["94"]  # 31 is two days old
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert "MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b" in u.summary


def test_skipped_events_are_ignored_xids_and_eventdata_zero_is_none() -> None:
    log = (
        "I1129 11:00:00.000001       1 health.go:160] Skipping event {Device:{Handle:0x7f} EventType:8 EventData:13 "
        "GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        "I1129 11:00:01.000001       1 health.go:160] Skipping event {Device:{Handle:0x7f} EventType:8 EventData:0 "
        "GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        "I1129 11:00:02.000001       1 health.go:150] Skipping non-nvmlEventTypeXidCriticalError event: {Device:{Handle:0x7f} "
        "EventType:2 EventData:5 GpuInstanceId:0 ComputeInstanceId:0}\n"
    )
    result = run([b.gpu_node(NODE)], log, ts("2026-11-29T12:00:00"), [])
    [x] = by_code(result, "L5_XID")
    assert x.summary.startswith("Xid 13 ") and x.severity == Severity.WARN
    assert not by_code(result, "L5_DEVICE_UNHEALTHY")


def test_dcgm_last_xid_and_exp_counts_sample_29() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 79)], now)]
    data += exposition(
        sample_text("29_"), now, rename={"DCGM_FI_DEV_XID_ERRORS_ACTIVE": "DCGM_EXP_XID_ERRORS_COUNT"}
    )
    for s in data:
        s.labels["Hostname"] = NODE
    result = run([b.gpu_node(NODE)], "", now, data)
    xids = {int(f.summary.split(" ")[1]): f for f in by_code(result, "L5_XID")}
    assert sorted(xids) == [42, 79]
    assert any("DCGM_FI_DEV_XID_ERRORS" in e and "does not reset" in e for e in xids[79].evidence)
    assert any('xid="42"' in e for e in xids[42].evidence)
    [clocks] = by_code(result, "L5_CLOCK_EVENTS")  # 29(b): sw_thermal and hw_thermal, gpu_idle does not count
    assert "hw_thermal, sw_thermal" in clocks.summary and "gpu_idle" not in " ".join(clocks.evidence)


def test_telemetry_down_still_reads_the_log() -> None:
    result = run([b.gpu_node(NODE, 8, allocatable=7)], LOG_06, ts("2026-06-25T06:00:00"), None)
    [x] = by_code(result, "L5_XID")
    assert any("DCGM telemetry not checked" in e for e in x.evidence)
    [u] = by_code(result, "L5_UNKNOWN")
    assert "no metrics source" in u.summary and "device plugin log was read" in u.summary


def test_xid154_names_the_recovery_action() -> None:
    now = ts("2026-11-29T12:00:00")
    msg = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    data = [series("DCGM_FI_DEV_XID_ERRORS", {**GPU, "err_code": "154", "err_msg": msg}, [(0, 154)], now)]
    [x] = by_code(run([b.gpu_node(NODE)], "", now, data), "L5_XID")
    assert x.severity == Severity.INFO and "Node Reboot Required" in x.summary


def test_row_remap_failure_and_rising_rows() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU, [(-600, 1), (0, 1)], now),
        series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", GPU, [(-DAY, 0), (-3600, 12), (0, 14)], now),
        series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, [(-DAY, 0), (0, 0)], now),
    ]
    result = run([b.gpu_node(NODE)], "", now, data)
    [fail] = by_code(result, "L5_ROW_REMAP_FAILURE")
    assert fail.severity == Severity.FAULT and "GPU 0" in fail.summary
    [rising] = by_code(result, "L5_REMAPPED_ROWS_RISING")
    assert rising.severity == Severity.WARN and any("= 14, +14" in e for e in rising.evidence)


@pytest.mark.parametrize(
    ("event", "flagged"),
    [
        ("HW_SLOWDOWN", True),
        ("sw_thermal_slowdown", True),
        ("hw_power_brake", True),
        ("power_cap", False),
        ("gpu_idle", False),
    ],
)
def test_only_slowdown_clock_events_count(event: str, flagged: bool) -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_EXP_CLOCK_EVENTS_COUNT", {**GPU, "clock_event": event}, [(-3600, 3), (0, 0)], now)]
    assert bool(by_code(run([b.gpu_node(NODE)], "", now, data), "L5_CLOCK_EVENTS")) is flagged
    # The since-start counter is news only when it changed in 24 h: 12 events days ago are none.
    total = "DCGM_EXP_CLOCK_EVENTS_TOTAL"
    old = [series(total, {**GPU, "clock_event": event}, [(-87000, 12), (-80000, 12), (0, 12)], now)]
    assert not by_code(run([b.gpu_node(NODE)], "", now, old), "L5_CLOCK_EVENTS")
    new = [series(total, {**GPU, "clock_event": event}, [(-87000, 12), (-3600, 12), (0, 15)], now)]
    assert bool(by_code(run([b.gpu_node(NODE)], "", now, new), "L5_CLOCK_EVENTS")) is flagged


def test_healthy_node_is_ok() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], now)]
    result = run([b.gpu_node(NODE)], "I1129 10:00:00.000000 1 main.go:1] Starting GRPC server\n", now, data)
    assert [f.code for f in result.findings] == ["L5_OK"]


def test_forbidden_plugin_log_is_unknown_and_never_ok() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], now)]
    result = run(
        [b.gpu_node(NODE)], {}, now, data, fail={"pod_log": b.forbidden("get", "pods/log", "gpu-operator")}
    )
    [u] = result.findings
    assert u.code == "L5_UNKNOWN" and "'get' on 'pods/log'" in u.summary and "79, 119, 120" in u.summary


def test_no_dcgm_series_for_the_node_is_unknown() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_FI_DEV_XID_ERRORS", {**GPU, "Hostname": "elsewhere"}, [(0, 0)], now)]
    result = run([b.gpu_node(NODE)], "", now, data)
    assert [f.code for f in result.findings] == ["L5_UNKNOWN"] and "no DCGM series" in result.findings[
        0
    ].summary


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("I0624 22:58:05.486593       1 health.go:159] x", "2026-06-24T22:58:05"),
        ("2020/08/10 19:09:42 XidCriticalError", "2020-08-10T19:09:42"),
        ("2026-11-29T11:58:05.486697123Z I1129 11:58:05.486697 1 x.go:1] y", "2026-11-29T11:58:05.486697"),
        ("2026-11-29T13:58:05+02:00 y", "2026-11-29T11:58:05"),
        (
            "[pod/nvidia-device-plugin-daemonset-x/nvidia-device-plugin] 2026-11-29T11:58:05Z y",
            "2026-11-29T11:58:05",
        ),
        ("I1231 23:59:00.000000 1 x.go:1] last year's line seen on new year's day", "2025-12-31T23:59:00"),
    ],
)
def test_line_time(line: str, expected: str) -> None:
    now = ts("2026-01-01T00:30:00") if "new year" in line else ts("2026-11-29T12:00:00")
    assert sig.line_time(line, now) == pytest.approx(ts(expected))


def test_line_without_timestamp() -> None:
    assert sig.line_time("XidCriticalError: Xid=48 on Device=GPU-1", 0) is None


def test_device_plugin_without_any_log_is_unknown() -> None:
    now = ts("2026-11-29T12:00:00")
    data = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], now)]
    result = run([b.gpu_node(NODE)], {}, now, data)
    assert [f.code for f in result.findings] == ["L5_UNKNOWN"] and "no log yet" in result.findings[0].summary


# --- variants of the device plugin's log across versions and transports ------------------

NOW_V = ts("2024-08-09T14:00:00")
# akash-network/support#244: `kubectl logs --timestamps` over klog, plugin v0.14+ (server.go:292).
LOG_AKASH_94 = """\
2024-08-09T13:32:51.873584285Z I0809 13:32:51.873532       1 health.go:159] Processing event {Device:{Handle:0x7e590d4986e8} EventType:8 EventData:94 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}
2024-08-09T13:32:51.873588972Z I0809 13:32:51.873541       1 health.go:185] XidCriticalError: Xid=94 on Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e; marking device as unhealthy.
2024-08-09T13:32:51.873595882Z I0809 13:32:51.873567       1 server.go:292] 'nvidia.com/gpu' device marked unhealthy: GPU-3b6ec030-5adc-1847-e155-79f635584b4e
"""


def test_kubectl_timestamps_over_klog_real_issue_lines() -> None:
    result = run([b.gpu_node(NODE, 8, allocatable=7)], LOG_AKASH_94, NOW_V, [])
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert "GPU-3b6ec030-5adc-1847-e155-79f635584b4e" in u.summary and "Xid 94" in u.summary
    assert u.node == NODE and u.severity == Severity.FAULT
    assert any("XidCriticalError: Xid=94 on Device=GPU-3b6ec030" in e for e in u.evidence)
    [x] = by_code(result, "L5_XID")
    # Xid 94 is a contained error: the catalog says restart the application.
    assert x.summary.startswith("Xid 94 ") and x.severity == Severity.WARN
    assert result.status == Severity.FAULT and result.next is None


def test_kubectl_prefix_and_timestamps_with_crlf_and_ansi() -> None:
    log = (
        "[pod/nvidia-device-plugin-daemonset-xk2p9/nvidia-device-plugin] 2024-08-09T13:32:51.873588972Z "
        "I0809 13:32:51.873541       1 health.go:185] XidCriticalError: Xid=79 on "
        "Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e; marking device as unhealthy.\r\n"
        "\x1b[0m[pod/nvidia-device-plugin-daemonset-xk2p9/nvidia-device-plugin] 2024-08-09T13:32:51.9Z "
        "I0809 13:32:51.9       1 server.go:292] 'nvidia.com/gpu' device marked unhealthy: "
        "GPU-3b6ec030-5adc-1847-e155-79f635584b4e\x1b[0m\r\n"
    )
    result = run([b.gpu_node(NODE)], log, NOW_V, [])
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert [d for d in u.summary.split("(")[1].split(")")[0].split(", ")] == [
        "GPU-3b6ec030-5adc-1847-e155-79f635584b4e"
    ]
    assert not any("\x1b" in e or "\r" in e for e in u.evidence)
    [x] = by_code(result, "L5_XID")
    assert x.summary.startswith("Xid 79 ") and x.severity == Severity.FAULT


def test_mig_device_event_and_mig_resource_marked_unhealthy() -> None:
    # health.go: "Event for mig device …" then the Xid line naming the MIG UUID; server.go names the MIG resource.
    log = (
        "I0809 13:30:00.000001       1 health.go:181] Event for mig device MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b "
        "(gi=3, ci=0)\n"
        "I0809 13:30:00.000002       1 health.go:185] XidCriticalError: Xid=48 on "
        "Device=MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b; marking device as unhealthy.\n"
        "I0809 13:30:00.000003       1 server.go:292] 'nvidia.com/mig-1g.10gb' device marked unhealthy: "
        "MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b\n"
    )
    node = b.node(
        NODE,
        labels={"nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"},
        capacity={"nvidia.com/mig-1g.10gb": 7},
        allocatable={"nvidia.com/mig-1g.10gb": 6},
    )
    result = run([node], log, NOW_V, [])
    [gap] = by_code(result, "L5_ALLOCATABLE_BELOW_CAPACITY")
    assert "nvidia.com/mig-1g.10gb capacity 7, allocatable 6" in gap.summary
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert "marked 1 device unhealthy after Xid 48" in u.summary
    assert "MIG-5f8b3c4e-2a1d-5e6f-9a0b-1c2d3e4f5a6b" in u.summary
    [x] = by_code(result, "L5_XID")
    assert x.severity == Severity.FAULT and "MIG-5f8b3c4e" in x.summary


@pytest.mark.parametrize(
    ("line", "device"),
    [
        # health.go placement / registration failures name the device before the colon.
        (
            "W0809 13:30:00.1 1 health.go:98] Could not determine device placement for "
            "MIG-30d00c09-1f2e-5a6b-8c7d-9e0f1a2b3c4d: unable to parse UUID as MIG device; Marking it unhealthy.",
            "MIG-30d00c09-1f2e-5a6b-8c7d-9e0f1a2b3c4d",
        ),
        (
            "I0809 13:30:00.1 1 health.go:120] unable to determine the supported events for "
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e: ERROR_UNKNOWN; marking it as unhealthy",
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
        ),
        (
            "I0809 13:30:00.1 1 health.go:130] Marking device GPU-3b6ec030-5adc-1847-e155-79f635584b4e as "
            "unhealthy: ERROR_GPU_IS_LOST",
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
        ),
        # Newer health checks: double-bit ECC and polled remapped-row checks.
        (
            "I0809 13:30:00.1 1 health.go:160] DoubleBitEccError on Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e; "
            "marking device(s) as unhealthy.",
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
        ),
        (
            "I0809 13:30:00.1 1 health.go:260] RemappedRows health check failed for "
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e: row remapping failure occurred (uncorrectable memory error); "
            "marking device(s) as unhealthy.",
            "GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
        ),
        (
            "I0809 13:30:00.1 1 health.go:140] Error waiting for event: ERROR_GPU_IS_LOST; Marking all devices as "
            "unhealthy",
            "all devices",
        ),
        # Plugin <= v0.9 (log.Printf): an Xid without a device takes them all.
        ("2021/07/15 20:49:32 XidCriticalError: Xid=79, All devices will go unhealthy.", "all devices"),
    ],
)
def test_every_unhealthy_message_names_its_device(line: str, device: str) -> None:
    result = run([b.gpu_node(NODE)], line + "\n", NOW_V, [])
    [u] = by_code(result, "L5_DEVICE_UNHEALTHY")
    assert f"({device})" in u.summary, u.summary
    assert any(line.split("] ")[-1][:40] in e for e in u.evidence)


def test_unnamed_device_is_not_called_all_devices() -> None:
    line = (
        "I0809 13:30:00.1 1 health.go:110] unable to get device handle from UUID: ERROR_NOT_FOUND; "
        "marking it as unhealthy\n"
    )
    [u] = by_code(run([b.gpu_node(NODE)], line, NOW_V, []), "L5_DEVICE_UNHEALTHY")
    assert "all devices" not in u.summary and "a device the plugin did not name" in u.summary


@pytest.mark.parametrize(
    "line",
    [
        # Healthy start-up: mentions NVML, Xids and health checks but marks nothing.
        "I0809 13:00:00.1 1 main.go:235] Starting NVML",
        "I0809 13:00:00.2 1 health.go:64] Ignoring the following XIDs for health checks: map[13:true 31:true 43:true "
        "45:true 68:true 109:true]",
        "W0809 13:00:00.3 1 health.go:124] Device GPU-3b6ec030-5adc-1847-e155-79f635584b4e is too old to support "
        "healthchecking.",
        "W0809 13:00:00.4 1 health.go:170] SingleBitEccError on Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e "
        "(correctable; not marking unhealthy).",
        "W0809 13:00:00.5 1 health.go:280] GPU has 2 uncorrectable remapped row(s); rows were successfully remapped",
        "I0809 13:00:00.6 1 health.go:151] Skipping non-nvmlEventTypeXidCriticalError event: {Device:{Handle:0x7f0d} "
        "EventType:2 EventData:0 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}",
        "I0809 13:00:00.7 1 health.go:150] Skipping non-critical event: {Device:{Handle:0x7f0d} EventType:4 "
        "EventData:0 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}",
        "E0809 13:00:00.8 1 server.go:120] Failed to start health check: ERROR_NOT_SUPPORTED; continuing with health "
        "checks disabled",
    ],
)
def test_near_misses_mark_nothing_and_report_no_xid(line: str) -> None:
    now = NOW_V
    data = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], now)]
    result = run([b.gpu_node(NODE)], line + "\n", now, data)
    assert [f.code for f in result.findings] == ["L5_OK"], [f.summary for f in result.findings]


def test_skipped_xid_with_timestamps_prefix_counts_and_eventdata_zero_does_not() -> None:
    log = (
        "2024-08-09T13:00:00.1Z I0809 13:00:00.1 1 health.go:160] Skipping event {Device:{Handle:0x7f} EventType:8 "
        "EventData:109 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        "2024-08-09T13:00:00.2Z I0809 13:00:00.2 1 health.go:160] Skipping event {Device:{Handle:0x7f} EventType:8 "
        "EventData:0 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
    )
    result = run([b.gpu_node(NODE)], log, NOW_V, [])
    [x] = by_code(result, "L5_XID")
    # 109 is ignored by the plugin (v0.17.1+) yet the catalog says reset the GPU.
    assert x.summary.startswith("Xid 109 ") and x.severity == Severity.FAULT
    assert any("ignored by the plugin" in e and "EventData:109" in e for e in x.evidence)
    assert not by_code(result, "L5_DEVICE_UNHEALTHY")


def test_xid_not_in_the_catalog_from_the_plugin_is_a_warning() -> None:
    # k8s-device-plugin#259: "XidCriticalError: Xid=999 on Device=GPU-XXXX".
    line = "I0809 13:30:00.1 1 health.go:185] XidCriticalError: Xid=999 on Device=GPU-3b6ec030; marking device as unhealthy.\n"
    result = run([b.gpu_node(NODE)], line, NOW_V, [])
    [x] = by_code(result, "L5_XID")
    assert x.severity == Severity.WARN and "not in the catalog" in x.summary
    assert by_code(result, "L5_DEVICE_UNHEALTHY")


# --- dcgm-exporter exposition variants ----------------------------------------------------


def test_exp_xid_count_with_window_label_and_lowercase_hostname() -> None:
    # dcgm-exporter PR #239 shape after the rename, hostname spelled as after PR #655.
    text = (
        "# TYPE DCGM_EXP_XID_ERRORS_COUNT counter\n"
        'DCGM_EXP_XID_ERRORS_COUNT{gpu="0",UUID="GPU-b9f9e81b-bee7-34bc-af17-132ef6592740",pci_bus_id="00000000:01:00.0",'
        f'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="{NODE}",DCGM_FI_DRIVER_VERSION="570.133.20",'
        'window_size_in_ms="300000",xid="119"} 2\n'
        'DCGM_EXP_XID_ERRORS_COUNT{gpu="1",UUID="GPU-c1",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",'
        f'hostname="{NODE}",window_size_in_ms="300000"}} 0\n'
    )
    result = run([b.gpu_node(NODE)], "", NOW_V, exposition(text, NOW_V))
    [x] = by_code(result, "L5_XID")
    assert x.summary.startswith("Xid 119 ") and x.severity == Severity.FAULT
    assert any('hostname="gpu-node-1"' in e and 'xid="119"' in e for e in x.evidence)


def test_last_xid_gauge_with_err_code_and_err_msg_labels() -> None:
    labels = {
        **GPU,
        "err_code": "45",
        "err_msg": "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    }
    data = [series("DCGM_FI_DEV_XID_ERRORS", labels, [(0, 45)], NOW_V)]
    [x] = by_code(run([b.gpu_node(NODE)], "", NOW_V, data), "L5_XID")
    assert x.summary.startswith("Xid 45 ") and x.severity == Severity.WARN
    assert any("Preemptive cleanup" in e for e in x.evidence)


def test_old_clock_throttle_reasons_metric_and_label() -> None:
    # dcgm-exporter PR #254 (before the rename in #261): throttle_reason label.
    text = (
        'DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT{gpu="0",UUID="GPU-b9f9e81b-bee7-34bc-af17-132ef6592740",'
        f'device="nvidia0",modelName="NVIDIA T400 4GB",Hostname="{NODE}",DCGM_FI_DRIVER_VERSION="545.29.02",'
        'throttle_reason="hw_thermal",window_size_in_ms="300000"} 1\n'
        'DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT{gpu="0",UUID="GPU-b9f9e81b-bee7-34bc-af17-132ef6592740",'
        f'device="nvidia0",modelName="NVIDIA T400 4GB",Hostname="{NODE}",DCGM_FI_DRIVER_VERSION="545.29.02",'
        'throttle_reason="power_cap",window_size_in_ms="300000"} 4\n'
    )
    [c] = by_code(run([b.gpu_node(NODE)], "", NOW_V, exposition(text, NOW_V)), "L5_CLOCK_EVENTS")
    assert "hw_thermal" in c.summary and "power_cap" not in c.summary


@pytest.mark.parametrize(("values", "flagged"), [([1.0], True), ([0.0], False), ([float("nan"), 1.0], True)])
def test_row_remap_failure_zero_one_and_nan(values: list[float], flagged: bool) -> None:
    data = [
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", {**GPU, "pod": f"p{i}", "namespace": "ml"}, [(0, v)], NOW_V)
        for i, v in enumerate(values)
    ]
    result = run([b.gpu_node(NODE)], "", NOW_V, data)
    assert bool(by_code(result, "L5_ROW_REMAP_FAILURE")) is flagged


def test_remapped_rows_flat_after_exporter_restart_are_not_rising() -> None:
    # The count is the card's own; an exporter restart leaves a gap, not a reset.
    data = [
        series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", GPU, [(-80000, 6), (-70000, 6)], NOW_V),
        series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", GPU, [(-3000, 6), (0, 6)], NOW_V),
    ]
    result = run([b.gpu_node(NODE)], "", NOW_V, data)
    assert not by_code(result, "L5_REMAPPED_ROWS_RISING")


# --- DCGM's last-Xid gauge never resets (spec/findings.md, layer 5) ------------------------


def _gauge(points: list[tuple[float, float]], gpu: str = "0") -> Any:
    labels = {**GPU, "gpu": gpu, "UUID": f"GPU-adb24b25-1db1-436e-d958-ddee5da83d0{gpu}"}
    return series("DCGM_FI_DEV_XID_ERRORS", labels, points, NOW_V)


def test_weeks_old_last_xid_is_an_info_line_and_the_node_is_ok() -> None:
    hourly = [(-3600.0 * h, 48.0) for h in range(30, -1, -1)]  # 48 for 30 h, never changed
    result = run([b.gpu_node(NODE)], "I0101 00:00:00.000000 1 main.go:1] Starting\n", NOW_V, [_gauge(hourly)])
    [x] = by_code(result, "L5_XID")
    assert x.severity == Severity.INFO and x.summary.startswith(f"last Xid 48 on {NODE}")
    assert "before the last 24 h" in x.summary
    assert any("unchanged over the last 24 h" in e for e in x.evidence)
    assert by_code(result, "L5_OK") and result.status == Severity.INFO


@pytest.mark.parametrize(
    "points",
    [
        [(-25 * 3600.0, 0.0), (-23 * 3600.0, 0.0), (-3600.0, 48.0), (0.0, 48.0)],  # changed today
        [(-2 * 3600.0, 48.0), (0.0, 48.0)],  # the series began today
    ],
    ids=["changed", "began"],
)
def test_last_xid_set_within_24h_is_a_fault(points: list[tuple[float, float]]) -> None:
    result = run([b.gpu_node(NODE)], "", NOW_V, [_gauge(points)])
    [x] = by_code(result, "L5_XID")
    assert x.severity == Severity.FAULT and x.summary.startswith("Xid 48 ")
    assert not by_code(result, "L5_OK")


def test_old_gauge_beside_a_fresh_xid_on_another_gpu() -> None:
    old = _gauge([(-3600.0 * h, 48.0) for h in range(30, -1, -1)])
    new = _gauge([(-30 * 3600.0, 0.0), (-600.0, 79.0), (0.0, 79.0)], gpu="1")
    xids = by_code(run([b.gpu_node(NODE)], "", NOW_V, [old, new]), "L5_XID")
    assert {(f.summary.split(" on ")[0], f.severity) for f in xids} == {
        ("last Xid 48", Severity.INFO),
        ("Xid 79", Severity.FAULT),
    }


def test_nodes_past_the_plugin_log_cap_are_unknown_never_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    # A walk examines at most EXAMINED_NODES candidates; the card's own log cap is for more.
    monkeypatch.setattr(context, "EXAMINED_NODES", 100)
    names = [f"gpu-{i:02d}" for i in range(60)]
    plugins = [
        b.operand("nvidia-device-plugin-daemonset", n, suffix=f"p{i:02d}") for i, n in enumerate(names)
    ]
    fb = [series("DCGM_FI_DEV_FB_USED", {**GPU, "Hostname": n}, [(0, 10.0)], NOW_V) for n in names]
    pending = b.pod("ml", "wide-0", requests={"nvidia.com/gpu": 8})
    objects = [*(b.gpu_node(n) for n in names), *plugins, pending]
    logs = {
        k: v for p in plugins for k, v in b.logs_for(p, "nvidia-device-plugin", "Starting Plugins.\n").items()
    }
    result = card.check(b.ctx(objects, logs=logs, pod=("ml", "wide-0"), telemetry=telemetry(fb, NOW_V)))
    [cap] = [f for f in by_code(result, "L5_UNKNOWN") if "plugin logs were not read" in f.summary]
    assert cap.summary.startswith(f"{60 - card.LOG_NODE_LIMIT} examined GPU nodes")
    assert any(e.startswith("not read: ") for e in cap.evidence)
    assert not [f for f in by_code(result, "L5_OK") if "not read" in f.summary]
