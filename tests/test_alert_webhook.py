"""POST /alertmanager over real HTTP: incidents in a real Redis, Slack through the fake Web API.

The bot runs in-process (build_app + the serve transport on a free port) over
the Xid 79 scenario (gpu-7 lost a GPU, trainer-0 runs there); its clock is
the test's, so repeats, the duplicate window and the rewalk interval are
exact. Every refusal is checked to change nothing in the store or in Slack.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.ops import metrics
from bot.slack.state import RedisState
from bot.slack.transport import start_http
from tests.alertmanager import alert, body, payload
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import HOSTILE, action_body, dispatch, inprocess_bot, wait_for, write_scenario

TOKEN = "test-alert-token-0123456789abcdef"
CHANNEL = "C0ALERTS"


class Clock:
    def __init__(self) -> None:
        self.now = 1_795_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisState]:
    s = RedisState(redis_server.url, prefix="gpubot-alerts-test:")
    s._redis.flushdb()
    yield s
    s.close()


@pytest.fixture
def bot(slack: FakeSlack, store: RedisState, tmp_path: Path) -> Iterator[Any]:
    slack.reset()
    b = inprocess_bot(
        slack.url,
        write_scenario(tmp_path, hostile=True),
        store,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
        GPUBOT_ALERT_MAX_THREADS_PER_HOUR="3",
    )
    clock = Clock()
    assert b.alerts is not None
    b.alerts.service.clock = clock
    server = start_http(b, "127.0.0.1", 0, events=True)
    b.url = f"http://127.0.0.1:{server.server_address[1]}"
    b.clock = clock
    try:
        yield b
    finally:
        server.shutdown()
        server.server_close()
        b.shutdown(wait=True)


def send(bot: Any, data: bytes, token: str | None = TOKEN, **headers: str) -> tuple[int, dict[str, Any]]:
    hdrs = {"Content-Type": "application/json", **headers}
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(bot.url + "/alertmanager", data=data, headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, {"text": raw.decode()}


def idle(bot: Any) -> None:
    wait_for("the bot's pool to drain", lambda: not bot.pending)


def roots(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def in_thread(slack: FakeSlack, ts: str) -> list[Call]:
    return [c for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts") == ts]


def thread_of(slack: FakeSlack) -> str:
    """The incident root's ts: the walk's messages are posted in its thread."""
    return str(
        next(c.params["thread_ts"] for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts"))
    )


def updates(slack: FakeSlack, ts: str) -> list[Call]:
    return [c for c in slack.calls_to("chat.update") if c.params.get("ts") == ts]


def blocks_text(call: Call) -> str:
    raw = call.params.get("blocks")
    return json.dumps(json.loads(raw) if isinstance(raw, str) else raw)


def counter(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value or 0.0


XID = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c2a91-5bde-4c1e-9a77-ddee5da83d07"}


def test_open_repeat_second_alert_resolve_reopen(bot: Any, slack: FakeSlack, store: RedisState) -> None:
    opened_before = counter("gpubot_alert_incidents_total", event="thread_opened")
    hostile = " ".join(HOSTILE)
    xid = alert("GPUXidError", summary=f"gpu-7 GPU 3: Xid 79 {hostile}", **XID)
    status, answer = send(bot, body([xid]))
    assert status == 200 and answer["alerts"] == 1
    idle(bot)
    [root] = roots(slack)
    ts = thread_of(slack)
    text = blocks_text(root)
    assert "GPUXidError" in text and "gpu-7" in text
    for bad in HOSTILE:  # the annotation's markup reaches Slack inert
        assert bad not in text
    assert "&lt;!channel&gt;" in text
    # The walk in the thread, as /gpu why posts it: its root, then one message per layer with buttons.
    thread = in_thread(slack, ts)
    layers = [c for c in thread if str(c.params.get("text", "")).startswith("Layer ")]
    assert layers and any("layer_descend" in blocks_text(c) or "walk_all" in blocks_text(c) for c in layers)
    assert any("L5_XID" in blocks_text(c) for c in layers)
    # The root now carries the verdict.
    assert "L5_XID" in blocks_text(updates(slack, ts)[-1])
    assert counter("gpubot_alert_incidents_total", event="thread_opened") == opened_before + 1

    # The same notification again at once (a second Alertmanager, a retry): nothing new.
    before = len(slack.calls)
    bot.clock.now += 5
    assert send(bot, body([xid]))[0] == 200
    idle(bot)
    assert len(slack.calls) == before

    # Alertmanager's repeat later: one line, no new root, no second walk within the rewalk interval.
    walks = len([c for c in in_thread(slack, ts) if str(c.params.get("text", "")).startswith("Layer 1 ")])
    bot.clock.now += 300
    assert send(bot, body([xid]))[0] == 200
    idle(bot)
    assert len(roots(slack)) == 1
    lines = [c.params["text"] for c in in_thread(slack, ts)]
    assert sum("still firing" in t for t in lines) == 1
    assert len([t for t in lines if t.startswith("Layer 1 ")]) == walks

    # A second alert about the same node: a line, and its name joins the root.
    remap = alert("GPURowRemapFailure", severity="critical", **XID)
    bot.clock.now += 60
    assert send(bot, body([xid, remap]))[0] == 200
    idle(bot)
    assert len(roots(slack)) == 1
    assert any(
        "GPURowRemapFailure" in t and "firing too" in t
        for t in [c.params["text"] for c in in_thread(slack, ts)]
    )
    assert "GPURowRemapFailure" in blocks_text(updates(slack, ts)[-1])

    # One resolves: a line, the incident stays open; both resolved: the root says so in place.
    bot.clock.now += 60
    send(bot, body([{**xid, "status": "resolved"}]))
    idle(bot)
    assert "Resolved" not in blocks_text(updates(slack, ts)[-1])
    send(bot, body([{**remap, "status": "resolved"}]))
    idle(bot)
    assert "Resolved at" in blocks_text(updates(slack, ts)[-1])
    assert len(roots(slack)) == 1

    # Firing again later: a new incident, a new thread.
    bot.clock.now += 600
    send(bot, body([xid]))
    idle(bot)
    assert len(roots(slack)) == 2


def _store_keys(store: RedisState) -> list[str]:
    return sorted(store._redis.keys("gpubot-alerts-test:alert:*"))


@pytest.mark.parametrize(
    ("data", "token", "status", "said"),
    [
        (body([alert("GPUXidError", **XID)]), None, 401, "bearer token"),
        (body([alert("GPUXidError", **XID)]), "wrong-token-0123456789", 401, "bearer token"),
        (b'{"version": "4", "alerts": [', TOKEN, 400, "not JSON"),
        (
            json.dumps({**payload([alert("GPUXidError", **XID)]), "version": "3"}).encode(),
            TOKEN,
            400,
            'version must be "4"',
        ),
        (
            json.dumps(payload([{**alert("GPUXidError", **XID), "labels": {}}])).encode(),
            TOKEN,
            400,
            "has no labels",
        ),
        (
            json.dumps(payload([{**alert("GPUXidError", **XID), "status": "pending"}])).encode(),
            TOKEN,
            400,
            "status must be",
        ),
        (b"[]", TOKEN, 400, "must be a JSON object"),
    ],
    ids=["no-token", "wrong-token", "bad-json", "wrong-version", "no-labels", "bad-status", "not-an-object"],
)
def test_refusals_change_nothing(
    bot: Any, slack: FakeSlack, store: RedisState, data: bytes, token: str | None, status: int, said: str
) -> None:
    got, answer = send(bot, data, token)
    assert got == status
    assert said in str(answer.get("error"))
    idle(bot)
    assert _store_keys(store) == []
    assert not slack.calls_to("chat.postMessage")
    assert counter("gpubot_alert_webhooks_total", code=str(status)) >= 1


def _head_answer(bot: Any, data: bytes, token: str | None) -> str:
    """The answer to the headers and the body's start (a refusal comes from the headers alone)."""
    port = int(bot.url.rsplit(":", 1)[1])
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        head = (
            f"POST /alertmanager HTTP/1.1\r\nHost: gpubot\r\n{auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        conn.sendall(head.encode() + data[:65536])
        return conn.recv(4096).decode()


def test_bodies_over_the_alert_limit_get_413_counted_and_change_nothing(
    bot: Any, slack: FakeSlack, store: RedisState
) -> None:
    # Over GPUBOT_ALERT_MAX_BODY_MIB (16 MiB): 10,000 alerts with 1.7 kB descriptions.
    many = [
        alert("GPUXidError", summary="Xid 79 " + "x" * 1700, Hostname="gpu-7", gpu=str(i))
        for i in range(10_000)
    ]
    data = body(many)
    assert len(data) > 16 << 20
    refused = counter("gpubot_alert_webhooks_total", code="413")
    assert _head_answer(bot, data, TOKEN).startswith("HTTP/1.1 413")
    # Without the token the 1 MiB limit of every other path holds: nobody else may send megabytes.
    assert _head_answer(bot, data[: 2 << 20], None).startswith("HTTP/1.1 413")
    assert counter("gpubot_alert_webhooks_total", code="413") == refused + 2
    # Every refusal of the server's own is counted for the webhook too: a chunked body (411).
    chunked = counter("gpubot_alert_webhooks_total", code="411")
    port = int(bot.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            f"POST /alertmanager HTTP/1.1\r\nHost: gpubot\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode()
        )
        assert conn.recv(4096).decode().startswith("HTTP/1.1 411")
    assert counter("gpubot_alert_webhooks_total", code="411") == chunked + 1
    assert _store_keys(store) == [] and not slack.calls_to("chat.postMessage")


def test_ten_thousand_small_alerts_under_one_mib_make_one_incident_per_subject(
    bot: Any, slack: FakeSlack, store: RedisState
) -> None:
    # Compact alerts (no annotations, short labels): 10,000 fit in 1 MiB. Most name no node here.
    many = []
    for i in range(10_000):
        node = "gpu-7" if i < 5 else "gpu-1" if i < 8 else f"gone-{i}"
        lab = {"alertname": "X", "Hostname": node, "gpu": str(i)}
        many.append({"status": "firing", "labels": lab})  # no fingerprint: derived from the labels
    data = json.dumps({"version": "4", "alerts": many}, separators=(",", ":")).encode()
    assert len(data) < 1 << 20
    unknown = counter("gpubot_alerts_total", status="firing", decision="unknown_subject")
    status, answer = send(bot, data)
    assert status == 200 and answer["alerts"] == 10_000
    idle(bot)
    assert len(roots(slack)) == 2
    assert counter("gpubot_alerts_total", status="firing", decision="unknown_subject") == unknown + 9_992


def test_no_token_no_endpoint(slack: FakeSlack, store: RedisState, tmp_path: Path) -> None:
    b = inprocess_bot(slack.url, write_scenario(tmp_path), store)
    server = start_http(b, "127.0.0.1", 0, events=True)
    b.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert send(b, body([alert("GPUXidError", **XID)]))[0] == 404
    finally:
        server.shutdown()
        server.server_close()
        b.shutdown()
    assert _store_keys(store) == []


def test_redis_down_answers_503_and_posts_nothing(slack: FakeSlack, tmp_path: Path) -> None:
    from tests.services import free_port

    down = RedisState(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5)
    b = inprocess_bot(
        slack.url, write_scenario(tmp_path), down, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL
    )
    server = start_http(b, "127.0.0.1", 0, events=True)
    b.url = f"http://127.0.0.1:{server.server_address[1]}"
    slack.reset()
    try:
        status, answer = send(b, body([alert("GPUXidError", **XID)]))
    finally:
        server.shutdown()
        server.server_close()
        b.shutdown()
    assert status == 503 and "state store" in answer["error"]
    assert not slack.calls_to("chat.postMessage")


def test_storm_opens_at_most_the_maximum_then_one_summary_with_diagnose_buttons(
    bot: Any, slack: FakeSlack, store: RedisState
) -> None:
    # Max 3 threads an hour (the fixture). Six subjects alert: 3 threads, one summary listing the rest.
    subjects = [("gpu-7", {}), ("gpu-1", {}), ("gpu-2", {}), ("gpu-3", {})]
    alerts = [alert("GPUXidError", Hostname=n, gpu="0") for n, _ in subjects]
    alerts.append(alert("GPUPodPending", namespace="ml", pod="trainer-0"))
    for a in alerts:
        bot.clock.now += 1
        assert send(bot, body([a]))[0] == 200
    idle(bot)
    top = roots(slack)
    threads = [c for c in top if "Alert storm" not in blocks_text(c)]
    summaries = [c for c in top if "Alert storm" in blocks_text(c)]
    assert len(threads) == 3 and len(summaries) == 1
    final = updates(slack, _summary_ts(slack, summaries[0]))
    shown = blocks_text(final[-1]) if final else blocks_text(summaries[0])
    assert "gpu-3" in shown and "ml/trainer-0" in shown
    assert shown.count('"digest_diagnose"') == 2
    # Nothing was cordoned, and within the hour the storm stays in the one summary.
    cluster = bot.buttons.actions.sources.cluster
    assert not any(cluster.get_node(n).get("spec", {}).get("unschedulable") for n, _ in subjects)
    bot.clock.now += 600
    send(bot, body([alert("GPURowRemapFailure", Hostname="gpu-3", gpu="1")]))
    idle(bot)
    assert len([c for c in roots(slack) if "Alert storm" in blocks_text(c)]) == 1


def _summary_ts(slack: FakeSlack, summary: Call) -> str:
    index = slack.calls.index(summary)
    later = [
        c for c in slack.calls[index + 1 :] if c.method == "chat.update" and "Alert storm" in blocks_text(c)
    ]
    return str(later[0].params["ts"]) if later else ""


def test_a_diagnose_click_on_the_storm_summary_walks_that_subject_in_its_thread(
    bot: Any, slack: FakeSlack, store: RedisState
) -> None:
    for node in ("gpu-1", "gpu-2", "gpu-3", "gpu-7"):  # the fixture's maximum is 3 threads an hour
        bot.clock.now += 1
        send(bot, body([alert("GPUXidError", Hostname=node, gpu="0")]))
    bot.clock.now += 1
    send(bot, body([alert("GPUPodPending", namespace="ml", pod="trainer-0")]))
    idle(bot)
    [summary] = [c for c in slack.calls_to("chat.update") if "Alert storm" in blocks_text(c)]
    ts = str(summary.params["ts"])
    raw = summary.params["blocks"]
    rows = [b for b in (json.loads(raw) if isinstance(raw, str) else raw) if "accessory" in b]
    [button] = [r["accessory"] for r in rows if "ml/trainer-0" in r["text"]["text"]]
    assert button["action_id"] == "digest_diagnose"
    response = dispatch(bot, action_body("digest_diagnose", button["value"], channel=CHANNEL, message_ts=ts))
    assert response.status == 200
    wait_for(
        "the pod's walk in the summary's thread",
        lambda: [c for c in in_thread(slack, ts) if str(c.params.get("text", "")).startswith("Layer 1 ")],
    )
    assert any("ml/trainer-0" in str(c.params.get("text")) for c in in_thread(slack, ts))


def test_slack_429_on_the_root_is_waited_out_and_posts_once(bot: Any, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 429, times=1, retry_after=1)
    assert send(bot, body([alert("GPUXidError", **XID)]))[0] == 200
    idle(bot)
    first, second = slack.calls_to("chat.postMessage")[:2]
    assert second.at - first.at >= 1.0  # Retry-After honoured
    assert len(roots(slack)) == 2  # the refused attempt, then the one that landed
    assert len({json.dumps(c.params.get("blocks")) for c in roots(slack)}) == 1
    assert len([c for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")]) >= 2


@pytest.mark.parametrize("down", ["everything", "pods"])
def test_kubernetes_down_the_thread_says_what_could_not_run(
    slack: FakeSlack, store: RedisState, tmp_path: Path, down: str
) -> None:
    from bot.ops.config import load_config
    from bot.slack.app import build_app
    from bot.slack.post import Poster
    from bot.sources.opener import open_sources
    from bot.sources.scenario import build_sources, load_scenario
    from tests.fakes.kube_api import serve
    from tests.slack_harness import BOT_TOKEN, bot_env

    snapshot, _ = build_sources(load_scenario(write_scenario(tmp_path)))
    with serve(snapshot) as api:
        api.fail("/pods" if down == "pods" else ".", status=503)
        cfg = load_config(
            bot_env(slack.url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL),
            need_slack=True,
            http=True,
        )
        poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01)
        b = build_app(cfg, open_sources(cfg, kubeconfig=api.kubeconfig), store, poster, client=poster.client)
        server = start_http(b, "127.0.0.1", 0, events=True)
        b.url = f"http://127.0.0.1:{server.server_address[1]}"
        slack.reset()
        try:
            assert send(b, body([alert("GPUXidError", **XID)]))[0] == 200
            wait_for("the walk to end", lambda: not b.pending, timeout=60)
        finally:
            server.shutdown()
            server.server_close()
            b.shutdown()
    [root] = roots(slack)
    assert "gpu-7" in blocks_text(root)  # the subject as the labels name it
    thread = " ".join(str(c.params.get("text")) + blocks_text(c) for c in in_thread(slack, thread_of(slack)))
    final = blocks_text(updates(slack, thread_of(slack))[-1])
    if down == "everything":
        assert "could not read node gpu-7" in thread
        assert "The walk could not run" in final and "no layer ran" in final
    else:
        # The node reads, the pod reads fail: the layers ran and say which checks could not.
        assert "Layer 1 " in thread and "Layer 5 " in thread
        assert "L5_UNKNOWN" in thread and "could not list the operator pods" in thread and "503" in thread
        assert "*Verdict* (layer 5)" in final


def test_a_replica_that_died_before_slack_leaves_the_incident_for_the_next(
    bot: Any, slack: FakeSlack, store: RedisState
) -> None:
    from handlers.alert_payload import parse_payload

    data = body([alert("GPUXidError", **XID)])
    # Recorded (the webhook answered 200), then the process died before posting anything.
    assert bot.alerts.service.receive(parse_payload(data)) == ["node:gpu-7"]
    assert not roots(slack)
    # Alertmanager's next delivery (here: at once, a duplicate) finds the work and does it.
    bot.clock.now += 1
    assert send(bot, data)[0] == 200
    idle(bot)
    assert len(roots(slack)) == 1
