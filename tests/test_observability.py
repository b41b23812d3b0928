"""/metrics after a real walk, and the JSON logs: structured, with the walk id, never a token."""

from __future__ import annotations

import ast
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.ops import metrics
from bot.ops.logs import setup_logging, walk_scope
from bot.ops.secrets import mask_text as mask_secrets
from bot.sources.scenario import build_sources, parse_scenario
from layers.findings import LayerResult, WalkResult
from layers.walk import open_pod, run_layer
from tests import fixtures

SAMPLES = fixtures.SAMPLES

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
    results: list[LayerResult] = []
    layer: int | None = 1
    while layer is not None and layer not in {r.layer for r in results}:
        started = time.perf_counter()
        result = run_layer(ctx, layer)
        metrics.record_layer(result, time.perf_counter() - started)
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
    for layer in walk.layers:
        metrics.record_layer(layer, {1: 0.2}.get(layer.layer))
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


# --- the wiring: Kubernetes and Slack API errors, digest runs, walks that never opened ----------------


def _harness_sources(tmp_path: Path, gpu7_allocatable: int = 7) -> tuple[Path, Any, Any]:
    """The Slack harness scenario (sample 06: gpu-7 lost one of eight GPUs); allocatable 8 heals it."""
    from bot.sources.scenario import load_scenario
    from tests.slack_harness import scenario_doc

    doc = scenario_doc()
    gpu7 = next(o for o in doc["objects"] if o["metadata"]["name"] == "gpu-7")
    gpu7["status"]["allocatable"]["nvidia.com/gpu"] = str(gpu7_allocatable)
    path = tmp_path / f"scenario-{gpu7_allocatable}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cluster, telemetry = build_sources(load_scenario(path))
    return path, cluster, telemetry


def test_kubernetes_api_errors_are_counted_by_kind(tmp_path: Path) -> None:
    from bot.sources.kube import KubeCluster
    from layers.sources import SourceError
    from tests.fakes.kube_api import serve

    _, snapshot, _ = _harness_sources(tmp_path)
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(kubeconfig=api.kubeconfig)
        before = {k: _value("gpubot_kubernetes_api_errors_total", kind=k) for k in ("forbidden", "not_found")}
        assert [n["metadata"]["name"] for n in kube.list_nodes()]  # a read that works counts nothing
        with pytest.raises(SourceError) as missing:
            kube.get_pod("ml", "no-such-pod")
        assert missing.value.kind == "not_found"
        api.fail(r"^/api/v1/nodes$", status=403)
        with pytest.raises(SourceError) as forbidden:
            kube.list_nodes()
        assert forbidden.value.kind == "forbidden"
        kube.close()
    assert _value("gpubot_kubernetes_api_errors_total", kind="not_found") == before["not_found"] + 1
    assert _value("gpubot_kubernetes_api_errors_total", kind="forbidden") == before["forbidden"] + 1


def test_slack_api_errors_are_counted_once_per_failed_call() -> None:
    from bot.slack.post import Poster
    from handlers.ports import Attachment, PostFailed, PostRef
    from tests.fakes.slack_api import serve_slack

    def errors(method: str) -> float:
        return _value("gpubot_slack_api_errors_total", method=method)

    with serve_slack() as slack:
        poster = Poster(BOT_TOKEN, slack.url, attempts=3, backoff_s=0.0)
        b_post, b_update = errors("chat.postmessage"), errors("chat.update")
        poster.post("C0OK", "fine")
        assert errors("chat.postmessage") == b_post
        # Three 500s: three attempts, one failed call.
        slack.fail("chat.postMessage", 500, times=3)
        with pytest.raises(PostFailed):
            poster.post("C0FAIL", "lost")
        assert len(slack.calls_to("chat.postMessage")) == 4
        assert errors("chat.postmessage") == b_post + 1
        # A 404 is not retried, and counted under its own method.
        slack.fail("chat.update", 404)
        with pytest.raises(PostFailed):
            poster.update(PostRef("C0FAIL", "1795000001.000100"), "x")
        assert errors("chat.update") == b_update + 1
        b_upload = errors("files.upload_v2")
        slack.fail("files.getUploadURLExternal", 403)
        with pytest.raises(PostFailed, match=r"file upload of chart\.png"):
            poster.upload("C0FAIL", Attachment("chart.png", b"png"))
        assert errors("files.upload_v2") == b_upload + 1


def test_scheduled_digest_runs_are_counted_by_outcome(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from bot.slack.post import Poster
    from bot.slack.scheduler import DigestJob, Outcome, start_scheduler
    from bot.slack.state import MemoryState
    from layers.digest import Digest, collect_digest
    from layers.sources import Telemetry
    from tests.fakes.slack_api import serve_slack

    def runs(outcome: str) -> float:
        return _value("gpubot_digest_runs_total", outcome=outcome)

    def job_over(cluster: Any, telemetry: Any, slack_url: str) -> DigestJob:
        def collect() -> tuple[Digest, Telemetry]:
            return collect_digest(cluster, telemetry), telemetry

        poster = Poster(BOT_TOKEN, slack_url, attempts=1)
        day = 1_795_000_000.0
        return DigestJob(collect, poster, "C0DIGEST", MemoryState(), ZoneInfo("UTC"), clock=lambda: day)

    _, sick_cluster, sick_metrics = _harness_sources(tmp_path, gpu7_allocatable=7)
    _, well_cluster, well_metrics = _harness_sources(tmp_path, gpu7_allocatable=8)
    before = {o: runs(o) for o in ("posted", "all_clear", "skipped", "failed")}
    with serve_slack() as slack:
        sick = job_over(sick_cluster, sick_metrics, slack.url)
        assert sick() is Outcome.POSTED
        assert sick() is Outcome.ALREADY_DONE
        slack.fail("chat.postMessage", 404)
        failing = job_over(sick_cluster, sick_metrics, slack.url)  # a fresh store: the day is open
        assert failing() is Outcome.FAILED
        well = job_over(well_cluster, well_metrics, slack.url)
        assert well() is Outcome.POSTED
    assert runs("posted") == before["posted"] + 1
    assert runs("skipped") == before["skipped"] + 1
    assert runs("failed") == before["failed"] + 1
    assert runs("all_clear") == before["all_clear"] + 1
    assert _value("gpubot_digest_last_success_timestamp_seconds") > 1.7e9

    metrics.record_digest_scheduled(False)
    scheduler = start_scheduler(lambda: None, 9, 0, ZoneInfo("UTC"))
    try:
        assert _value("gpubot_digest_scheduled") == 1
    finally:
        scheduler.shutdown(wait=False)


def test_cli_digest_post_counts_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main as cli
    from tests.fakes.slack_api import serve_slack

    path, _, _ = _harness_sources(tmp_path)
    for name in ("REDIS_URL", "PROMETHEUS_URL", "GPUBOT_SCENARIO"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("GPUBOT_DIGEST_CHANNEL", "C0DIGEST")
    before_posted, before_failed = (
        _value("gpubot_digest_runs_total", outcome="posted"),
        _value("gpubot_digest_runs_total", outcome="failed"),
    )
    with serve_slack() as slack:
        monkeypatch.setenv("SLACK_API_URL", slack.url)
        assert cli.main(["digest", "--post", "--scenario", str(path)]) == 0
        assert _value("gpubot_digest_runs_total", outcome="posted") == before_posted + 1
        slack.fail("chat.postMessage", 404)
        assert cli.main(["digest", "--post", "--scenario", str(path)]) != 0
        assert _value("gpubot_digest_runs_total", outcome="failed") == before_failed + 1
    assert BOT_TOKEN not in capsys.readouterr().err


def test_a_pod_that_cannot_be_read_opens_no_walk(tmp_path: Path) -> None:
    from tests.fakes.slack_api import serve_slack
    from tests.slack_harness import dispatch, inprocess_bot, slash_body, wait_for

    path, _, _ = _harness_sources(tmp_path)
    started, finished = _value("gpubot_walks_started_total"), _exposition_total("gpubot_walks_finished_total")
    with serve_slack() as slack:
        bot = inprocess_bot(slack.url, path)
        try:
            assert dispatch(bot, slash_body("why ml/no-such-pod")).status == 200
            wait_for("the usage, ephemerally", lambda: slack.calls_to("chat.postEphemeral"))
        finally:
            bot.shutdown()
    assert _value("gpubot_walks_started_total") == started
    assert _exposition_total("gpubot_walks_finished_total") == finished


def _exposition_total(name: str) -> float:
    return sum(v for k, v in _exposition().items() if k.startswith(name + "{"))


def test_log_level_setting() -> None:
    from bot.ops.config import ConfigError, load_config

    assert load_config({}).log_level == "INFO"
    assert load_config({"GPUBOT_LOG_LEVEL": " debug "}).log_level == "DEBUG"
    with pytest.raises(
        ConfigError, match=r"^GPUBOT_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got 'LOUD'$"
    ):
        load_config({"GPUBOT_LOG_LEVEL": "LOUD"})


# Names whose value is a credential, or a URL that may carry one (REDIS_URL's password).
_SECRET_NAMES = re.compile(r"token|secret|password|passwd|redis_url|authorization", re.I)
_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def test_no_log_call_formats_a_credential() -> None:
    """Masking is the second line of defence; the first is never handing a credential to a logger."""
    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted([*root.glob("bot/**/*.py"), *root.glob("handlers/*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _LOG_METHODS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"log", "logger", "logging"}
            ):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for sub in ast.walk(arg):
                    name = (
                        sub.id
                        if isinstance(sub, ast.Name)
                        else sub.attr
                        if isinstance(sub, ast.Attribute)
                        else ""
                    )
                    if _SECRET_NAMES.search(name):
                        offenders.append(f"{path.relative_to(root)}:{node.lineno} logs {name}")
    assert offenders == []
    assert len(list(root.glob("handlers/*.py"))) > 3  # the scan saw the code it is meant to check
