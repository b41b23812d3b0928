"""/metrics after a real walk, and the JSON logs: structured, with the walk id, never a token."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot import metrics
from bot.logs import mask_secrets, setup_logging, walk_scope
from bot.scenario import build_sources, parse_scenario
from layers.findings import WalkResult
from layers.walk import open_pod

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"
if not SAMPLES.is_dir():
    SAMPLES = Path("/work/shared/samples")

# Shaped like real ones, but not real: the token patterns must catch these.
BOT_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
APP_TOKEN = "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef"


def _scenario_objects() -> tuple[list[dict[str, object]], dict[str, str]]:
    """Node ocio-gpu01 (sample 05: capacity 16, allocatable 0), its device plugin's Xid 79 log (sample 06)."""
    status = yaml.safe_load((SAMPLES / "05_node_capacity16_allocatable0.yaml").read_text())["status"]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ocio-gpu01", "labels": {"nvidia.com/gpu.present": "true"}},
        "status": status,
    }
    plugin = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nvidia-device-plugin-daemonset-x7k2p",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-device-plugin-daemonset"},
        },
        "spec": {"nodeName": "ocio-gpu01", "containers": [{"name": "nvidia-device-plugin"}]},
        "status": {"phase": "Running"},
    }
    trainer = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer-0", "namespace": "ml"},
        "spec": {
            "nodeName": "ocio-gpu01",
            "containers": [{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    lines = (SAMPLES / "06_node_7_of_8_gpus_device_plugin_xid79.txt").read_text().splitlines()
    log = "\n".join(x for x in lines if "health.go" in x or "server.go" in x) + "\n"
    return [node, plugin, trainer], {
        "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin": log
    }


def _walk_with_metrics() -> WalkResult:
    objects, logs = _scenario_objects()
    sc = parse_scenario(
        {
            "kind": "Scenario",
            "name": "xid79",
            "now": "2026-11-29T12:00:00Z",
            "objects": objects,
            "logs": logs,
        },
        "<test>",
    )
    cluster, telemetry = build_sources(sc)
    ctx = open_pod(cluster, telemetry, "ml", "trainer-0")
    metrics.record_walk_started()
    results = []
    layer: int | None = 1
    while layer is not None and layer not in {r.layer for r in results}:
        result = metrics.run_layer(ctx, layer)
        results.append(result)
        layer = result.next_layer
    walk = WalkResult(ctx.target, tuple(results))
    metrics.record_walk_finished(walk)
    return walk


def _value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _exposition() -> dict[str, float]:
    """Parse /metrics with prometheus_client's own text parser: name{labels} -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            key = s.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
            out[key] = s.value
    return out


def test_metrics_after_a_scenario_walk() -> None:
    before = _exposition()
    walk = _walk_with_metrics()
    after = _exposition()

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("gpubot_walks_started_total{}") == 1
    verdict = walk.verdict
    assert verdict is not None
    assert delta(f"gpubot_walks_finished_total{{verdict_severity={verdict.severity.label}}}") == 1
    # Sample 05's node: 16 GPUs of capacity, 0 allocatable → layer 1's fault, counted once.
    assert delta("gpubot_findings_total{code=L1_ALLOCATABLE_BELOW_CAPACITY,severity=fault}") == 1
    for result in walk.layers:
        assert delta(f"gpubot_layer_duration_seconds_count{{layer={result.layer}}}") == 1
        for f in result.findings:
            assert delta(f"gpubot_findings_total{{code={f.code},severity={f.severity.label}}}") >= 1
    # Every series the issue names is exposed.
    names = {k.split("{", 1)[0] for k in after}
    for name in (
        "gpubot_walks_started_total",
        "gpubot_walks_finished_total",
        "gpubot_layer_duration_seconds_bucket",
        "gpubot_findings_total",
        "gpubot_kubernetes_api_errors_total",
        "gpubot_digest_runs_total",
    ):
        assert name in names, name


def test_record_walk_counts_every_layer_and_the_verdict() -> None:
    walk = _walk_with_metrics()
    assert len(walk.layers) > 1, [r.layer for r in walk.layers]
    code = walk.layers[0].findings[0].code
    sev = walk.layers[0].findings[0].severity.label
    second = str(walk.layers[1].layer)
    before_findings = _value("gpubot_findings_total", code=code, severity=sev)
    before_l1 = _value("gpubot_layer_duration_seconds_count", layer="1")
    before_second = _value("gpubot_layer_duration_seconds_count", layer=second)
    metrics.record_walk(walk, {1: 0.2})
    assert _value("gpubot_findings_total", code=code, severity=sev) == before_findings + 1
    assert _value("gpubot_layer_duration_seconds_count", layer="1") == before_l1 + 1
    # A layer with no measured duration is counted for its findings but not timed.
    assert _value("gpubot_layer_duration_seconds_count", layer=second) == before_second


def test_actions_errors_and_digest_series() -> None:
    b_action = _value("gpubot_actions_total", action="cordon_node", outcome="refused")
    metrics.record_action("cordon_node", "refused")
    assert _value("gpubot_actions_total", action="cordon_node", outcome="refused") == b_action + 1
    # An unknown action id or a hostile outcome cannot create new series.
    b_other = _value("gpubot_actions_total", action="other", outcome="other")
    metrics.record_action("drop_tables", "<script>")
    assert _value("gpubot_actions_total", action="other", outcome="other") == b_other + 1

    b_slack = _value("gpubot_slack_api_errors_total", method="chat.postmessage")
    metrics.record_slack_api_error("chat.postMessage")
    assert _value("gpubot_slack_api_errors_total", method="chat.postmessage") == b_slack + 1

    b_kube = _value("gpubot_kubernetes_api_errors_total", kind="forbidden")
    metrics.record_kubernetes_api_error("forbidden")
    assert _value("gpubot_kubernetes_api_errors_total", kind="forbidden") == b_kube + 1

    b_skip = _value("gpubot_digest_runs_total", outcome="skipped")
    last = _value("gpubot_digest_last_success_timestamp_seconds")
    metrics.record_digest_run("skipped")
    assert _value("gpubot_digest_runs_total", outcome="skipped") == b_skip + 1
    assert _value("gpubot_digest_last_success_timestamp_seconds") == last  # a skip is no success
    metrics.record_digest_run("posted", at=1_790_000_000.0)
    assert _value("gpubot_digest_last_success_timestamp_seconds") == 1_790_000_000.0
    metrics.record_digest_scheduled()
    assert _value("gpubot_digest_scheduled") == 1
    assert metrics.CONTENT_TYPE.startswith("text/plain")


# --- logs ----------------------------------------------------------------------------


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    out = io.StringIO()
    setup_logging("DEBUG", stream=out)
    yield out
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def test_logs_are_json_with_the_walk_id(json_log: io.StringIO) -> None:
    log = logging.getLogger("gpubot.test")
    with walk_scope("w-20261129-abc"):
        log.info("walk of %s started", "ml/trainer-0")
    log.warning("posting failed", extra={"walk_id": "w-explicit", "channel": "C0123"})
    log.info("no walk here")
    first, second, third = _lines(json_log)
    assert first["msg"] == "walk of ml/trainer-0 started"
    assert first["walk_id"] == "w-20261129-abc"
    assert first["level"] == "info" and first["logger"] == "gpubot.test"
    assert str(first["ts"]).endswith("+00:00")
    assert second["walk_id"] == "w-explicit" and second["channel"] == "C0123"
    assert "walk_id" not in third


def test_tokens_never_reach_the_log(json_log: io.StringIO) -> None:
    log = logging.getLogger("gpubot.test")
    log.info("token is %s", BOT_TOKEN)
    log.info(f"app token {APP_TOKEN} and header Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.abc.def")
    log.info("state store at %s", "redis://:s3cretPassw0rd@redis-master:6379/0")
    log.info("config", extra={"env": {"SLACK_BOT_TOKEN": BOT_TOKEN}})
    try:
        raise RuntimeError(f"Slack refused token={BOT_TOKEN}")
    except RuntimeError:
        log.exception("post failed")
    text = json_log.getvalue()
    for secret in (BOT_TOKEN, APP_TOKEN, "s3cretPassw0rd", "eyJhbGciOiJSUzI1NiJ9"):
        assert secret not in text
    lines = _lines(json_log)
    assert len(lines) == 5
    assert lines[2]["msg"] == "state store at redis://:<masked>@redis-master:6379/0"
    assert "RuntimeError" in str(lines[4]["exc"])  # the traceback is kept, only the token masked
    assert "<masked>" in str(lines[4]["exc"])


def test_mask_secrets_keeps_ordinary_text() -> None:
    line = "I0624 22:58:05.486697 1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-adb24b25"
    assert mask_secrets(line) == line
    assert mask_secrets("https://user:pw@example.test/x") == "https://user:<masked>@example.test/x"
    assert "xoxp-" not in mask_secrets("user token xoxp-1-2-3-abcdef")


def test_bad_level_is_refused() -> None:
    with pytest.raises(ValueError, match="log level"):
        setup_logging("LOUD", stream=io.StringIO())
