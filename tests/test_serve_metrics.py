"""`gpubot serve --http` observed from outside: /metrics after a real walk and clicks, JSON logs on stderr.

The bot runs as a subprocess over the harness scenario (sample 06's Xid 79 on
gpu-7) against the fake Slack, with a recognisable bot token. What /metrics
must say is derived from the same walk run in-process by layers/, so the
test checks the wiring, not a copy of today's findings.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.ops import metrics
from bot.sources.scenario import build_sources, load_scenario
from layers.findings import WalkResult
from layers.walk import walk
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import (
    SECRET,
    BotProcess,
    bot_env,
    get,
    inprocess_bot,
    running_bot,
    wait_for,
    write_scenario,
)

# Shaped like a real bot token: it must reach Slack (the fake checks nothing) and never the log.
TOKEN = "xoxb-8462001357-7531908642-ObServAbiLiTyToKeN42"
CHANNEL = "C0METRICS"


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module")
def scenario_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scenario(tmp_path_factory.mktemp("metrics-scenario"))


@pytest.fixture(scope="module")
def bot(slack: FakeSlack, scenario_path: Path) -> Iterator[BotProcess]:
    # The digest is scheduled (so its gauge shows) half a day away, so it never fires during the test.
    later = datetime.now(UTC) + timedelta(hours=12)
    env = bot_env(
        slack.url,
        SLACK_BOT_TOKEN=TOKEN,
        GPUBOT_LOG_LEVEL="DEBUG",
        GPUBOT_DIGEST_CHANNEL="C0DIGEST",
        GPUBOT_DIGEST_TIME=later.strftime("%H:%M"),
        GPUBOT_TIMEZONE="UTC",
    )
    with running_bot(["--scenario", str(scenario_path)], env, scenario_path.parent / "bot.log") as proc:
        # Ready (/readyz) comes before the scheduler has started: wait for its gauge.
        wait_for("the digest to be scheduled", lambda: scrape(proc).get("gpubot_digest_scheduled{}") == 1)
        yield proc


@pytest.fixture(scope="module")
def expected(scenario_path: Path) -> WalkResult:
    """The walk `/gpu why ml/trainer-0` runs, computed in-process from the same scenario."""
    cluster, telemetry = build_sources(load_scenario(scenario_path))
    return walk(cluster, telemetry, "ml", "trainer-0")


def scrape(bot: BotProcess) -> dict[str, float]:
    """GET /metrics, parsed by prometheus_client's own parser: 'name{k=v,...}' -> value."""
    status, text = get(bot.url + "/metrics")
    assert status == 200, text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"] = s.value
    return out


def scrape_until(bot: BotProcess, what: str, ready: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    """Scrape /metrics until `ready` holds (the bot works after it has answered Slack)."""

    def probe() -> dict[str, float] | None:
        series = scrape(bot)
        return series if ready(series) else None

    return wait_for(what, probe, explain=bot.log)


def total(series: dict[str, float], name: str) -> float:
    return sum(v for k, v in series.items() if k.startswith(name + "{"))


def log_lines(bot: BotProcess) -> list[dict[str, Any]]:
    lines = [ln for ln in bot.log_path.read_text().splitlines() if ln.strip()]
    parsed = []
    for ln in lines:
        entry = json.loads(ln)  # every line on stderr is one JSON object
        assert isinstance(entry, dict) and {"ts", "level", "logger", "msg"} <= entry.keys(), ln
        parsed.append(entry)
    return parsed


def walk_id_from_thread(slack: FakeSlack) -> str:
    """The walk id the bot put on layer 1's buttons."""

    def find() -> str | None:
        for call in slack.calls_to("chat.postMessage"):
            if call.params.get("channel") == CHANNEL and call.params["text"].startswith("Layer 1 ("):
                raw = call.params.get("blocks") or "[]"
                blocks = json.loads(raw) if isinstance(raw, str) else raw
                for block in blocks:
                    if block.get("type") == "actions":
                        return str(block["elements"][0]["value"])
        return None

    return wait_for("layer 1's buttons in the thread", find)


@pytest.fixture(scope="module")
def walked(bot: BotProcess, slack: FakeSlack) -> tuple[dict[str, float], dict[str, float], str]:
    """(/metrics before, /metrics once the walk has finished, walk id) for one `/gpu why`."""
    before = scrape(bot)
    status, _ = bot.command("why ml/trainer-0", channel=CHANNEL)
    assert status == 200
    after = scrape_until(
        bot,
        "the walk to finish on /metrics",
        lambda s: total(s, "gpubot_walks_finished_total") >= 1,
    )
    return before, after, walk_id_from_thread(slack)


def test_metrics_count_the_walk_its_layers_and_findings(
    walked: tuple[dict[str, float], dict[str, float], str], expected: WalkResult
) -> None:
    before, after, _ = walked
    assert before["gpubot_digest_scheduled{}"] == after["gpubot_digest_scheduled{}"] == 1
    assert total(before, "gpubot_walks_started_total") == 0
    assert after["gpubot_walks_started_total{}"] == 1
    assert total(after, "gpubot_walks_finished_total") == 1
    verdict = expected.verdict
    assert verdict is not None and verdict.code == "L5_XID"  # sample 06's Xid 79: the card
    assert after[f"gpubot_walks_finished_total{{verdict_severity={verdict.severity.label}}}"] == 1

    ran = {r.layer for r in expected.layers}
    for n in range(1, 6):
        count = after[f"gpubot_layer_duration_seconds_count{{layer={n}}}"]
        assert count == (1 if n in ran else 0), (n, ran)
        if n in ran:
            assert after[f"gpubot_layer_duration_seconds_sum{{layer={n}}}"] > 0

    counted = {k: v for k, v in after.items() if k.startswith("gpubot_findings_total{")}
    want: dict[str, float] = {}
    for result in expected.layers:
        for f in result.findings:
            key = f"gpubot_findings_total{{code={f.code},severity={f.severity.label}}}"
            want[key] = want.get(key, 0) + 1
    assert counted == want
    # Findings of every layer are counted under their own code, the card's Xid among them.
    assert counted["gpubot_findings_total{code=L5_XID,severity=fault}"] == 1
    assert after["gpubot_start_time_seconds{}"] > 1.7e9


def test_clicks_are_counted_by_action_and_outcome(
    bot: BotProcess,
    slack: FakeSlack,
    walked: tuple[dict[str, float], dict[str, float], str],
    expected: WalkResult,
) -> None:
    _, after_walk, walk_id = walked
    ran = {r.layer for r in expected.layers}
    skipped = min(n for n in range(1, 6) if n not in ran)  # the first layer the walk jumped over
    block = f"layer{skipped - 1}_actions"

    def actions(series: dict[str, float], action: str, outcome: str) -> float:
        return series.get(f"gpubot_actions_total{{action={action},outcome={outcome}}}", 0.0)

    assert bot.click("layer_descend", walk_id, block_id=block, channel=CHANNEL)[0] == 200
    done = scrape_until(
        bot,
        "the descend to be counted",
        lambda s: actions(s, "layer_descend", "done") == 1,
    )
    assert done[f"gpubot_layer_duration_seconds_count{{layer={skipped}}}"] == 1
    # The layer a click ran is counted as a layer, not as a new walk.
    assert done["gpubot_walks_started_total{}"] == after_walk["gpubot_walks_started_total{}"] == 1

    # The same click again: that layer has run, nothing runs twice.
    assert bot.click("layer_descend", walk_id, block_id=block, channel=CHANNEL)[0] == 200
    repeated = scrape_until(
        bot,
        "the repeat to be counted",
        lambda s: actions(s, "layer_descend", "repeated") == 1,
    )
    assert repeated[f"gpubot_layer_duration_seconds_count{{layer={skipped}}}"] == 1

    # A cordon by someone who is not an operator is refused, and the refusal's ephemeral fails at
    # Slack: both are counted (the Slack error by its Web API method).
    slack.fail("chat.postEphemeral", 404, times=1)
    assert bot.click("cordon_node", walk_id, user="U0NOTOPS", channel=CHANNEL)[0] == 200
    refused = scrape_until(
        bot,
        "the refusal to be counted",
        lambda s: actions(s, "cordon_node", "refused") == 1,
    )
    assert refused.get("gpubot_slack_api_errors_total{method=chat.postephemeral}") == 1
    assert actions(refused, "cordon_node", "done") == 0


def test_log_lines_are_json_with_the_walk_id_and_no_secret(
    bot: BotProcess, walked: tuple[dict[str, float], dict[str, float], str]
) -> None:
    _, _, walk_id = walked
    entries = log_lines(bot)
    started = [e for e in entries if e["msg"].startswith(f"walk {walk_id} started")]
    assert len(started) == 1 and started[0]["walk_id"] == walk_id, started
    # The walk service's and the buttons' lines all run inside the walk's scope.
    for e in entries:
        if e["logger"] in ("gpubot.walks", "gpubot.buttons"):
            assert e.get("walk_id") == walk_id, e
    # Every line that names the walk was logged inside its scope, and no other walk id shows up.
    for e in entries:
        if walk_id in e["msg"]:
            assert e.get("walk_id") == walk_id, e
    assert {e["walk_id"] for e in entries if "walk_id" in e} == {walk_id}
    # Lines outside any walk (start-up) carry none.
    assert any(e["msg"].startswith("sources:") and "walk_id" not in e for e in entries)
    text = bot.log_path.read_text()
    assert TOKEN not in text and TOKEN.split("-", 1)[1] not in text
    assert SECRET not in text
    assert TOKEN not in get(bot.url + "/metrics")[1]


def test_the_health_only_server_answers_metrics_too(slack: FakeSlack, scenario_path: Path) -> None:
    """Socket Mode serves no events on the port, but /metrics like HTTP mode (same handler, events off)."""
    from bot.slack.transport import start_http

    gpubot = inprocess_bot(slack.url, scenario_path)
    server = start_http(gpubot, "127.0.0.1", 0, events=False)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            assert r.status == 200
            assert r.headers["Content-Type"] == metrics.CONTENT_TYPE
            body = r.read().decode()
        assert "# TYPE gpubot_walks_started_total counter" in body
        assert "gpubot_kubernetes_api_errors_total" in body
        assert get(url + "/slack/events")[0] == 404
    finally:
        server.shutdown()
        server.server_close()
        gpubot.shutdown()
