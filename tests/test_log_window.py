"""pods/log by time and size (since_seconds, limit_bytes) in every Cluster adapter, and the layers'
windowed read (layers/facts/logs.py) deciding when the byte cap cut a log."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.sources.kube import KubeCluster
from bot.sources.snapshot import SnapshotCluster, lines_since
from layers.facts.context import Settings, WalkContext
from layers.facts.logs import LogReads
from layers.findings import Target
from layers.sources import NoTelemetry
from tests.fakes.kube_api import serve
from tests.layers import builders as b

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC).timestamp()
LOG = (
    "I1123 10:12:31.313485       1 main.go:235] Starting NVIDIA Device Plugin\n"
    "Running with config:\n"  # undated: printed with the line before it
    '{"version": "v1"}\n'
    "I1129 02:10:44.918341       1 health.go:185] XidCriticalError: Xid=119 on Device=GPU-5; marking device as unhealthy.\n"
    "I1129 09:59:00.000001       1 health.go:163] Skipping event {EventData:13} é\n"
)


def test_since_keeps_dated_lines_in_the_window_and_their_undated_followers() -> None:
    day = lines_since(LOG, NOW - 24 * 3600, NOW)
    assert "Starting NVIDIA" not in day and "Running with config" not in day
    assert day.startswith("I1129 02:10:44") and day.endswith("é\n")
    week = lines_since(LOG, NOW - 7 * 24 * 3600, NOW)
    assert week == LOG
    # Nothing dated: nothing says when it was printed, so it is all kept.
    assert lines_since("a\nb\n", NOW, NOW) == "a\nb\n"


def snapshot() -> SnapshotCluster:
    p = b.pod("gpu-operator", "nvidia-device-plugin-daemonset-x", node="gpu-1", phase="Running",
              containers=("nvidia-device-plugin",))  # fmt: skip
    return SnapshotCluster(
        [b.gpu_node("gpu-1"), p],
        {"gpu-operator/nvidia-device-plugin-daemonset-x/nvidia-device-plugin": LOG},
        now=NOW,
    )


def test_snapshot_and_api_server_agree_on_since_tail_and_limit() -> None:
    snap = snapshot()
    args = ("gpu-operator", "nvidia-device-plugin-daemonset-x", "nvidia-device-plugin")
    with serve(snap) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            for kw in (
                {"since_seconds": 3600, "tail_lines": None},
                {"since_seconds": 24 * 3600, "tail_lines": 1},
                {"tail_lines": None, "limit_bytes": 100},
                # The cap falls inside the two-byte "é": the wire cuts the character, both decode it the same.
                {"tail_lines": None, "limit_bytes": len(LOG.encode()) - 2},
            ):
                assert kube.pod_log(*args, **kw) == snap.pod_log(*args, **kw), kw  # type: ignore[arg-type]
        finally:
            kube.close()
        sent = [r.query for r in api.requests if r.path.endswith("/log")]
    assert sent[0]["sinceSeconds"] == "3600" and "tailLines" not in sent[0]
    assert sent[2]["limitBytes"] == "100"
    assert snap.pod_log(*args, since_seconds=3600, tail_lines=None).startswith("I1129 09:59")
    assert len(snap.pod_log(*args, tail_lines=None, limit_bytes=100).encode()) == 100


def window_of(cap: int) -> tuple[LogReads, object]:
    snap = snapshot()
    pod = snap.get_pod("gpu-operator", "nvidia-device-plugin-daemonset-x")
    ctx = WalkContext(
        snap, NoTelemetry(NOW), Target(None, None, "gpu-1"), None, Settings(log_window_bytes=cap)
    )
    reads = LogReads(ctx, 5)
    return reads, reads.window(pod, "nvidia-device-plugin")


def test_a_log_under_the_cap_is_one_whole_read() -> None:
    _reads, window = window_of(1 << 20)
    assert window is not None and window.texts == (LOG,) and not window.gaps  # type: ignore[attr-defined]


def test_a_log_past_the_cap_is_read_again_for_the_last_day_and_says_what_is_missing() -> None:
    reads, window = window_of(120)
    assert window is not None and not reads.failed
    first, day = window.texts  # type: ignore[attr-defined]
    # The cut line of the first read is dropped, not scanned half-way.
    assert first.endswith("\n") and first.count("\n") == 3 and len(first.encode()) <= 120
    assert day.startswith("I1129 02:10:44") and not day.endswith("é\n")
    assert window.gaps == (  # type: ignore[attr-defined]
        "the log of gpu-operator/nvidia-device-plugin-daemonset-x container nvidia-device-plugin: between its "
        "first 120 bytes and the last 24 h",
        "the log of gpu-operator/nvidia-device-plugin-daemonset-x container nvidia-device-plugin: the last 24 h "
        "past their first 120 bytes",
    )


def test_the_digest_says_a_plugin_log_past_the_cap_was_read_only_in_part() -> None:
    from layers.digest import collect_digest

    dp = b.operand("nvidia-device-plugin-daemonset", "gpu-1", suffix="q7x2m")
    mark = "I1129 02:10:44.918341       1 health.go:185] XidCriticalError: Xid=119 on Device=GPU-5; marking device as unhealthy.\n"
    # 7,000 skipped Xid 43 events in the last hours: over the 1 MiB cap from the start and within 24 h.
    chatter = "".join(
        f"I1129 {3 + i // 1200:02d}:{(i // 20) % 60:02d}:{i % 60:02d}.{i:06d}       1 health.go:163] Skipping event "
        "{Device:{Handle:0x7f2d4c0b8a10} EventType:8 EventData:43 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        for i in range(7000)
    )
    logs = b.logs_for(dp, "nvidia-device-plugin", mark + chatter)
    snap = SnapshotCluster([b.gpu_node("gpu-1", 8, allocatable=7), dp], logs, now=NOW)
    digest = collect_digest(snap, NoTelemetry(NOW))
    assert any(n.startswith("device plugin log read only in part on gpu-1") for n in digest.notes), (
        digest.notes
    )
    assert not any(n.startswith("device plugin log not read") for n in digest.notes)
    [flagged] = digest.flagged
    assert 119 in flagged.xids_24h and 43 in flagged.xids_24h  # what was read still counts
