"""Incidents end, flap without flooding, and survive Alertmanager's real volumes (issue 20, items 1-3).

The bot (build_app over the fake Kubernetes API serving the probe fleet of
tests/test_probe5_alert_subjects.py, a real redis-server, the fake Slack Web
API) answers POST /alertmanager over real HTTP; its alert clock is the
test's, so "12 hours" and "a day" are exact without sleeping. Expectations,
from shared/spec/interfaces.md "Incidents end", written before running:

- an incident Alertmanager says nothing of for GPUBOT_ALERT_STALE_HOURS (12)
  closes as stale, its root updated in place to say so, once however many
  replicas sweep; an incident Alertmanager keeps repeating does not;
- a resolved that arrives before its firing (same fingerprint, startsAt) is
  remembered for a day: the late firing opens nothing; a new firing (a new
  startsAt) of the same alert opens a thread;
- a new alert for a subject whose open incident is over a day old opens a
  new root linking the old one, whose root says it was superseded;
- an alert flapping 200 times in an hour gives at most
  GPUBOT_ALERT_MAX_THREADS_PER_HOUR (10) threads, every one of whose roots
  ends saying resolved (none left "firing"), and one storm summary naming the
  node once;
- 10,000 alerts naming pods that no longer exist cost a list per namespace,
  not 10,000 GETs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bot.ops import metrics
from bot.ops.config import load_config
from bot.slack.app import build_app
from bot.slack.post import Poster
from bot.slack.state import RedisState
from bot.slack.transport import start_http
from bot.sources.opener import open_sources
from bot.sources.scenario import build_sources, load_scenario
from handlers.alert_subjects import ClusterDirectory
from handlers.alerts import AlertService
from tests.alertmanager import payload
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import Call, FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BOT_TOKEN, bot_env, wait_for
from tests.test_probe5_alert_subjects import DCGM, am_alert, probe_scenario

TOKEN = "incidents-end-token-0123456789abcdef"
CHANNEL = "C0INCEND"
PREFIX = "gpubot-incidents-end:"
T0 = 1_795_000_000.0  # 2026-11-18T09:46:40Z, inside an hour: the flapping crosses no hour boundary
HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(probe_scenario(tmp_path_factory.mktemp("incidents-end"))))
    with serve(snapshot) as api:
        yield api


@pytest.fixture(scope="module")
def served(slack: FakeSlack, kube: FakeKubeAPI, redis_server: RedisServer) -> Iterator[Any]:
    store = RedisState(redis_server.url, prefix=PREFIX)
    cfg = load_config(
        bot_env(slack.url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL), need_slack=True, http=True
    )
    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01)
    b = build_app(cfg, open_sources(cfg, kubeconfig=kube.kubeconfig), store, poster, client=poster.client)
    server = start_http(b, "127.0.0.1", 0, events=True)
    b.url = f"http://127.0.0.1:{server.server_address[1]}/alertmanager"
    b.store = store
    try:
        yield b
    finally:
        server.shutdown()
        server.server_close()
        b.shutdown(wait=True)
        _forget(store)
        store.close()


def _forget(store: RedisState) -> None:
    for key in store._redis.scan_iter(f"{PREFIX}*"):
        store._redis.delete(key)


@pytest.fixture
def bot(served: Any, slack: FakeSlack, kube: FakeKubeAPI) -> Iterator[Any]:
    kube.clear_faults()
    _forget(served.store)
    slack.reset()
    clock = Clock()
    service: AlertService = served.alerts.service
    service.clock = clock
    service.directory = ClusterDirectory(service.directory.cluster)
    served.clock = clock
    served.service_ = service
    yield served


def send(bot: Any, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    req = urllib.request.Request(
        bot.url,
        data=json.dumps(payload(alerts)).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200
            answer: dict[str, Any] = json.loads(r.read())
            return answer
    except urllib.error.HTTPError as err:
        raise AssertionError(f"{err.code}: {err.read()[:300]!r}") from None


def idle(bot: Any) -> None:
    wait_for("the bot's pool to drain", lambda: not bot.pending, timeout=120)


def deliver(bot: Any, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    answer = send(bot, alerts)
    idle(bot)
    return answer


def xid(node: str, starts: str = "2026-11-18T09:40:00Z") -> dict[str, Any]:
    a = am_alert("GPUXidError", {**DCGM, "Hostname": node, "gpu": "0"})
    a["startsAt"] = starts
    return a


def resolved(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "status": "resolved", "endsAt": "2026-11-18T09:50:00Z"}


def _blocks(params: dict[str, Any]) -> str:
    raw = params.get("blocks")
    return json.dumps(json.loads(raw) if isinstance(raw, str) else raw, ensure_ascii=False)


def roots(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def threads(slack: FakeSlack) -> list[Call]:
    return [c for c in roots(slack) if "Alert storm" not in _blocks(c.params)]


def shown(slack: FakeSlack, root: Call) -> str:
    """What a root says now: its last update, else the post."""
    ts = _ts_of(slack, root)
    updates = [c for c in slack.calls_to("chat.update") if c.params.get("ts") == ts]
    return _blocks(updates[-1].params) if updates else _blocks(root.params)


def _ts_of(slack: FakeSlack, root: Call) -> str:
    """The ts Slack gave the root (the fake keeps every message it stored, in order, per channel)."""
    text, raw = root.params.get("text"), root.params.get("blocks")
    blocks = json.loads(raw) if isinstance(raw, str) else raw
    for m in slack.messages.get(CHANNEL, []):
        if not m.get("thread_ts") and m.get("text") == text and m.get("blocks") == blocks:
            return str(m["ts"])
    raise AssertionError(f"no stored message for {text!r}")


def counter(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


# --- stale ----------------------------------------------------------------------------------------


def test_an_incident_alertmanager_stops_talking_about_closes_as_stale_once(
    bot: Any, slack: FakeSlack, redis_server: RedisServer
) -> None:
    deliver(bot, [xid("gpu-h100-1")])
    deliver(bot, [xid("gpu-h100-2")])
    [one, two] = threads(slack)
    service: AlertService = bot.service_
    # gpu-h100-2's alert keeps being repeated by Alertmanager (every 4 h); gpu-h100-1's resolve is
    # lost (a silence over it), so nothing more is heard of it.
    for _ in range(3):
        bot.clock.now += 4 * HOUR
        deliver(bot, [xid("gpu-h100-2")])
    bot.clock.now += 1  # 12 h and a second since gpu-h100-1 was last heard of
    stale_before = counter("gpubot_alert_incidents_total", event="stale")
    # Two replicas sweep the same store (the other with its own service over the same keys): the
    # incident closes once, its root is updated once.
    other = AlertService(
        RedisState(redis_server.url, prefix=PREFIX),
        bot.service,
        service.directory,
        service.settings,
        clock=bot.clock,
    )
    keys = service.sweep() + other.sweep()
    assert keys == ["node:gpu-h100-1"]
    for key in keys:
        service.catch_up(key)
    assert "Closed as stale" in shown(slack, one), shown(slack, one)
    assert "firing on node `gpu-h100-2`" in shown(slack, two)
    assert counter("gpubot_alert_incidents_total", event="stale") == stale_before + 1
    # The timer's path: one replica per period claims the sweep.
    assert service.sweep_due() is True and other.sweep_due() is False
    # A firing after the stale close is a new incident, a new thread.
    bot.clock.now += 60
    deliver(bot, [xid("gpu-h100-1", starts="2026-11-19T00:00:00Z")])
    assert len(threads(slack)) == 3


# --- a resolve before its firing -------------------------------------------------------------------


def test_a_resolve_that_comes_before_its_firing_keeps_the_late_firing_from_opening_anything(
    bot: Any, slack: FakeSlack
) -> None:
    a = xid("gpu-h100-3")
    late = counter("gpubot_alerts_total", status="firing", decision="late_firing")
    deliver(bot, [resolved(a)])  # two Alertmanagers: one had the resolve first
    bot.clock.now += 30
    deliver(bot, [a])  # the other's firing, late
    assert threads(slack) == []
    assert counter("gpubot_alerts_total", status="firing", decision="late_firing") == late + 1
    # The same alert firing anew (a new startsAt) is a new incident.
    bot.clock.now += HOUR
    deliver(bot, [xid("gpu-h100-3", starts="2026-11-18T10:45:00Z")])
    assert len(threads(slack)) == 1


# --- a day-old incident ----------------------------------------------------------------------------


def test_a_new_alert_on_a_subject_whose_incident_is_over_a_day_old_opens_a_new_root_linking_it(
    bot: Any, slack: FakeSlack
) -> None:
    deliver(bot, [xid("gpu-h100-4")])
    [old] = threads(slack)
    for _ in range(7):  # Alertmanager repeats it every 4 h: never stale, never resolved
        bot.clock.now += 4 * HOUR
        deliver(bot, [xid("gpu-h100-4")])
    assert len(threads(slack)) == 1  # repeats within the day are lines in the thread
    remap = am_alert("GPURowRemapFailure", {**DCGM, "Hostname": "gpu-h100-4", "gpu": "0"})
    deliver(bot, [remap])
    [_, new] = threads(slack)
    old_ts = _ts_of(slack, old)
    assert "Superseded" in shown(slack, old), shown(slack, old)
    assert f"p{old_ts.replace('.', '')}" in _blocks(new.params) and "continues incident" in _blocks(
        new.params
    )
    # The old thread says where the new alerts go; later repeats go to the new thread only.
    in_old = [c for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts") == old_ts]
    assert any("new thread" in str(c.params.get("text")) for c in in_old)
    bot.clock.now += 4 * HOUR
    deliver(bot, [xid("gpu-h100-4")])
    assert len(threads(slack)) == 2


# --- flapping ----------------------------------------------------------------------------------------


def test_an_alert_flapping_200_times_gives_at_most_10_threads_all_resolved_and_one_summary_row(
    bot: Any, slack: FakeSlack
) -> None:
    a = xid("gpu-a100-3")
    # Firing, resolved, firing again (each firing a new startsAt, as Alertmanager's would be), sent
    # as fast as Alertmanager flushes, not waiting for Slack (slow, as under its rate limit):
    # incidents are replaced while their roots are being posted.
    slack.slow("chat.postMessage", 0.2)
    for i in range(100):
        fire = {**a, "startsAt": f"2026-11-18T09:{i // 60 + 47:02d}:{i % 60:02d}Z"}
        send(bot, [fire])
        bot.clock.now += 5
        send(bot, [resolved(fire)])
        bot.clock.now += 5
    idle(bot)
    mine = threads(slack)
    assert 1 <= len(mine) <= 10, len(mine)
    still = [_ts_of(slack, r) for r in mine if "Resolved at" not in shown(slack, r)]
    assert still == [], [shown(slack, r) for r in mine if "Resolved at" not in shown(slack, r)]
    summaries = [c for c in roots(slack) if "Alert storm" in _blocks(c.params)]
    assert len(summaries) == 1
    last = [c for c in slack.calls_to("chat.update") if "Alert storm" in _blocks(c.params)]
    text = _blocks(last[-1].params) if last else _blocks(summaries[0].params)
    assert text.count("node gpu-a100-3") == 1, text.count("node gpu-a100-3")
    assert "times" in text


# --- 10,000 alerts naming pods that are gone ----------------------------------------------------------


def test_ten_thousand_alerts_naming_missing_pods_list_each_namespace_once(
    bot: Any, slack: FakeSlack, kube: FakeKubeAPI
) -> None:
    many = [
        am_alert(
            "KubePodCrashLooping",
            {"namespace": f"team-{i % 20}", "pod": f"job-{i}-x7k2p", "job": "kube-state-metrics"},
        )
        for i in range(10_000)
    ]
    gets = kube.count("/pods", method="GET")
    unknown = counter("gpubot_alerts_total", status="firing", decision="unknown_subject")
    answer = send(bot, many)
    # Answered once kept: recorded off the request path, on the bot's pool.
    assert answer["alerts"] == 10_000 and answer["queued"]
    idle(bot)
    assert counter("gpubot_alerts_total", status="firing", decision="unknown_subject") == unknown + 10_000
    pod_gets = kube.count("/pods", method="GET") - gets
    assert pod_gets <= 20, pod_gets  # at most a list per namespace; none by name
    assert threads(slack) == []


def test_a_large_notification_a_replica_kept_and_died_before_recording_is_recorded_by_another(
    bot: Any, slack: FakeSlack
) -> None:
    from handlers.alert_payload import parse_payload

    many = [xid(f"gpu-h100-{1 + i % 4}") | {"fingerprint": f"{i:016x}"} for i in range(600)]
    service: AlertService = bot.service_
    # What the webhook of a replica killed right after answering left: the entry, unrecorded.
    entry = service.inbox.put(parse_payload(json.dumps(payload(many))))
    assert service.inbox.orphans() == []  # not yet: its own replica may be recording it
    bot.clock.now += service.inbox.orphan_s + 1
    assert service.inbox.orphans() == [entry]
    bot.sweeper.tick()  # another replica's timer
    idle(bot)
    assert len(threads(slack)) == 4  # gpu-h100-1..4, each once
    assert service.inbox.orphans() == []
    bot.sweeper.tick()  # run twice: nothing more
    idle(bot)
    assert len(threads(slack)) == 4
