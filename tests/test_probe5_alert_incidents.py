"""Probe (black-box): alert incidents over their life, as a GPU platform team's Alertmanager drives them.

The bot (build_app over the fake Kubernetes API serving the probe fleet of
tests/test_probe5_alert_subjects.py, a real redis-server, the fake Slack Web
API) answers POST /alertmanager over real HTTP; its alert clock is the
test's. Expectations from shared/spec/interfaces.md, "Alert-driven incident
threads", written before running:

- an incident's subject is mapped from the alert's labels when it opens: an
  incident opened while the Kubernetes API was down (labels taken as named)
  does not bind the alert to that guess for later incidents once the API
  answers again;
- storm control counts the threads of the last 60 minutes (a rolling window):
  past the maximum, further subjects go into one summary per hour, and an
  hour later threads open again; a storm subject resolving hours later
  updates its summary row in place, it posts no new "Alert storm" message;
- bodies that are not an Alertmanager payload get 400 with one line saying
  what is wrong (a deeply nested body, Grafana's own webhook shape, `null`),
  never a 500 that Alertmanager would retry forever.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.ops.config import load_config
from bot.slack.app import build_app
from bot.slack.post import Poster
from bot.slack.state import RedisState
from bot.slack.transport import start_http
from bot.sources.opener import open_sources
from bot.sources.scenario import build_sources, load_scenario
from handlers.alert_subjects import ClusterDirectory
from tests.alertmanager import payload
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import Call, FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BOT_TOKEN, bot_env, wait_for
from tests.test_probe5_alert_subjects import DCGM, DCGM_POD, DCGM_TARGET, KSM_OWN, am_alert, probe_scenario

TOKEN = "probe5-incident-token-0123456789abcdef"
CHANNEL = "C0PROBE5INC"
PREFIX = "gpubot-probe5-incidents:"
T0 = 1_795_000_000.0  # 2026-11-18T09:46:40Z, inside an hour: the storm test crosses no hour boundary


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(probe_scenario(tmp_path_factory.mktemp("probe5-kube"))))
    with serve(snapshot) as api:
        yield api


@pytest.fixture(scope="module")
def served(slack: FakeSlack, kube: FakeKubeAPI, redis_server: RedisServer) -> Iterator[Any]:
    store = RedisState(redis_server.url, prefix=PREFIX)
    cfg = load_config(
        bot_env(
            slack.url,
            GPUBOT_ALERT_TOKEN=TOKEN,
            GPUBOT_ALERT_CHANNEL=CHANNEL,
            GPUBOT_ALERT_MAX_THREADS_PER_HOUR="2",
        ),
        need_slack=True,
        http=True,
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
    """The module's bot with a clean slate: no incidents, no Slack calls, no cached cluster reads."""
    kube.clear_faults()
    _forget(served.store)
    slack.reset()
    clock = Clock()
    service = served.alerts.service
    service.clock = clock
    service.directory = ClusterDirectory(service.directory.cluster)
    served.clock = clock
    yield served
    kube.clear_faults()


def send(bot: Any, data: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        bot.url,
        data=data,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, {"text": raw.decode(errors="replace")}


def deliver(bot: Any, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """One notification, answered 200, and everything it queued for Slack done."""
    status, answer = send(bot, json.dumps(payload(alerts)).encode())
    assert status == 200, answer
    wait_for("the bot's pool to drain", lambda: not bot.pending, timeout=60)
    return answer


def resolved(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "status": "resolved", "endsAt": "2026-11-18T10:20:00Z"}


def _blocks(call: Call) -> str:
    raw = call.params.get("blocks")
    return json.dumps(json.loads(raw) if isinstance(raw, str) else raw, ensure_ascii=False)


def roots(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def storm_messages(slack: FakeSlack) -> list[Call]:
    return [c for c in roots(slack) if "Alert storm" in _blocks(c)]


def threads(slack: FakeSlack) -> list[Call]:
    return [c for c in roots(slack) if "Alert storm" not in _blocks(c)]


# --- the subject is mapped when an incident opens ----------------------------------------------------


def test_an_incident_opened_while_kubernetes_was_down_does_not_bind_later_ones_to_its_guess(
    bot: Any, slack: FakeSlack, kube: FakeKubeAPI
) -> None:
    # dcgm-exporter without NODE_NAME: Hostname is its pod's name, which only the API maps to gpu-7.
    xid = am_alert("GPUXidError", {**DCGM, **DCGM_TARGET, "Hostname": DCGM_POD})
    kube.fail(".", status=503)
    deliver(bot, [xid])
    assert len(threads(slack)) == 1  # opened on the labels as named; the thread says what failed
    kube.clear_faults()
    deliver(bot, [resolved(xid)])
    assert "Resolved at" in _blocks(slack.calls_to("chat.update")[-1])

    # The Xid fires again a day later, the API answering: the new incident is about gpu-7.
    bot.clock.now += 86400
    deliver(bot, [{**xid, "startsAt": "2026-11-19T10:00:00Z"}])
    _first, second = threads(slack)
    assert "firing on node `gpu-7`" in _blocks(second), _blocks(second)


# --- storm control ---------------------------------------------------------------------------------


def later(bot: Any, when: float) -> None:
    """Time passes for the bot's clock and for Redis: keys whose TTL ran out in between are gone."""
    seconds = when - bot.clock.now
    r = bot.store._redis
    for key in r.scan_iter(f"{PREFIX}*"):
        left_ms = r.pttl(key)
        if left_ms > 0 and left_ms <= seconds * 1000:
            r.delete(key)
        elif left_ms > 0:
            r.pexpire(key, int(left_ms - seconds * 1000))
    bot.clock.now = when


def xid_on(node: str) -> dict[str, Any]:
    return am_alert("GPUXidError", {**DCGM, "Hostname": node, "gpu": "0"})


def test_storm_window_rolls_and_a_storm_subject_resolving_hours_later_updates_its_row_in_place(
    bot: Any, slack: FakeSlack
) -> None:
    # GPUBOT_ALERT_MAX_THREADS_PER_HOUR=2 (the module's bot).
    for node in ("gpu-h100-1", "gpu-h100-2"):
        deliver(bot, [xid_on(node)])
    bot.clock.now += 60
    deliver(bot, [xid_on("gpu-h100-3")])
    bot.clock.now += 60
    deliver(bot, [xid_on("gpu-h100-4")])
    assert len(threads(slack)) == 2
    [_summary] = storm_messages(slack)  # one summary for the hour, updated in place
    shown = [c for c in slack.calls_to("chat.update") if "Alert storm" in _blocks(c)]
    ts = str(shown[-1].params["ts"])
    assert "gpu-h100-3" in _blocks(shown[-1]) and "gpu-h100-4" in _blocks(shown[-1])

    # An hour after the first two threads the window has room again: a thread, not a summary row.
    later(bot, T0 + 3601)
    deliver(bot, [xid_on("gpu-h100-5")])
    assert len(threads(slack)) == 3 and len(storm_messages(slack)) == 1
    assert "firing on node `gpu-h100-5`" in _blocks(threads(slack)[-1])

    # gpu-h100-3 is rebooted and its Xid resolves three hours into the storm: its row says so, in
    # the summary it is listed in; no new "Alert storm" message appears about a storm long over.
    later(bot, T0 + 3 * 3600)
    deliver(bot, [resolved(xid_on("gpu-h100-3"))])
    assert len(storm_messages(slack)) == 1
    last = [c for c in slack.calls_to("chat.update") if c.params.get("ts") == ts][-1]
    assert "~`node gpu-h100-3` · *GPUXidError*~ resolved" in _blocks(last)


# --- bodies that are not Alertmanager's ---------------------------------------------------------------

GRAFANA = {  # Grafana-managed alerting's webhook contact point (its own shape, version "1")
    "receiver": "gpubot",
    "status": "firing",
    "orgId": 1,
    "alerts": [{"status": "firing", "labels": {"alertname": "GPU temp"}, "fingerprint": "3a4b5c6d7e8f9a0b"}],
    "groupLabels": {},
    "commonLabels": {"alertname": "GPU temp"},
    "externalURL": "http://grafana.monitoring/",
    "version": "1",
    "groupKey": "{}:{}",
    "truncatedAlerts": 0,
    "title": "[FIRING:1] GPU temp",
    "state": "alerting",
    "message": "**Firing**",
}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
        (b'{"version": "4", "alerts": [' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"]}", "nested"),
        (json.dumps(GRAFANA).encode(), 'version must be "4" (Alertmanager\'s webhook payload), got "1"'),
        (b"null", "the payload must be a JSON object, got null"),
        (
            json.dumps(payload([{**xid_on("gpu-7"), "labels": {"alertname": "X", "gpu": 3}}])).encode(),
            "alerts[0].labels['gpu'] must be a string, got a number",
        ),
        (json.dumps({**payload([xid_on("gpu-7")]), "alerts": {"0": {}}}).encode(), "alerts must be a list"),
        (b"\xef\xbb\xbf" + json.dumps(payload([xid_on("gpu-7")])).encode()[:-3], "not JSON"),
        (
            json.dumps({**payload([xid_on("gpu-7")]), "truncatedAlerts": "3"}).encode(),
            'truncatedAlerts must be a whole number, got "3"',
        ),
    ],
    ids=[
        "deep-array",
        "deep-alert",
        "grafana-webhook",
        "null",
        "number-label",
        "alerts-object",
        "bom-cut",
        "truncated-string",
    ],
)
def test_a_body_that_is_not_an_alertmanager_payload_gets_400_and_one_line(
    bot: Any, slack: FakeSlack, data: bytes, said: str
) -> None:
    status, answer = send(bot, data)
    assert status == 400, answer
    error = str(answer.get("error"))
    assert said in error and "\n" not in error
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    assert not list(bot.store._redis.scan_iter(f"{PREFIX}*alert*"))
    assert not slack.calls_to("chat.postMessage")


# --- one node, eight GPUs ---------------------------------------------------------------------------


def nvlink_on(node: str, gpu: int) -> dict[str, Any]:
    """dcgm-exporter's NVLink error counter alert for one GPU of an HGX node (a label set per GPU)."""
    return am_alert(
        "GPUNVLinkErrors",
        {**DCGM, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-7ad0{gpu:04d}", "device": f"nvidia{gpu}"},
    )


def thread_lines(slack: FakeSlack, ts: str) -> list[str]:
    return [
        str(c.params.get("text"))
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("thread_ts") == ts and not str(c.params.get("text")).startswith(("Layer ", "gpubot"))
    ]


def test_eight_gpus_of_one_node_alerting_add_one_line_per_notification_not_one_per_gpu(
    bot: Any, slack: FakeSlack
) -> None:
    # An NVSwitch tray fails: GPUs 0-3 are in Alertmanager's first notification, 4-7 join at the next
    # group_interval, then the group repeats. One thread; each later notification one line, and the
    # line says which GPUs joined (eight lines reading "GPUNVLinkErrors is firing too" say nothing).
    deliver(bot, [nvlink_on("gpu-h100-6", g) for g in range(4)])
    [root] = threads(slack)
    ts = next(
        str(c.params["thread_ts"]) for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")
    )
    bot.clock.now += 300
    deliver(bot, [nvlink_on("gpu-h100-6", g) for g in range(8)])
    joined = thread_lines(slack, ts)
    assert len(joined) == 1, joined
    assert "is firing too" in joined[0] and "GPU 4, 5, 6, 7" in joined[0]
    bot.clock.now += 4 * 3600  # Alertmanager's repeat_interval
    deliver(bot, [nvlink_on("gpu-h100-6", g) for g in range(8)])
    repeated = thread_lines(slack, ts)[1:]
    assert len(repeated) == 1, repeated
    assert "still firing" in repeated[0] and "8 alerts" in repeated[0]
    assert len(threads(slack)) == 1 and "GPUNVLinkErrors" in _blocks(root)


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")  # Go's RFC3339Nano


def test_resolved_at_is_when_the_alert_resolved_not_when_the_notification_came(
    bot: Any, slack: FakeSlack
) -> None:
    # Alertmanager sends resolved at the group's next flush (group_interval, 5 min in
    # kube-prometheus-stack): the root's "Resolved at" is the alert's endsAt, the time graphs show.
    xid = xid_on("gpu-h100-8")
    deliver(bot, [xid])
    ended = T0 + 300.25
    bot.clock.now = T0 + 600
    deliver(bot, [{**xid, "status": "resolved", "endsAt": _rfc3339(ended)}])
    last = _blocks(slack.calls_to("chat.update")[-1])
    assert f"Resolved at <!date^{int(ended)}^" in last, last
    # An endsAt the bot cannot place (later than now, or before the incident opened) is not believed.
    other = xid_on("gpu-h100-9")
    deliver(bot, [other])
    bot.clock.now = T0 + 900
    deliver(bot, [{**other, "status": "resolved", "endsAt": _rfc3339(T0 + 5000)}])
    assert f"Resolved at <!date^{int(T0 + 900)}^" in _blocks(slack.calls_to("chat.update")[-1])


# --- Alertmanager left alerts out ---------------------------------------------------------------------


def test_alerts_alertmanager_left_out_are_counted_and_said_once(bot: Any, slack: FakeSlack) -> None:
    # `max_alerts: 2` on the gpubot receiver, five GPUs of one group firing: Alertmanager sends two
    # and says `truncatedAlerts: 3`. Those three can open no thread: counted, and said in the channel.
    from bot.ops import metrics

    def left_out() -> float:
        return (
            metrics.REGISTRY.get_sample_value(
                "gpubot_alerts_total", {"status": "firing", "decision": "truncated"}
            )
            or 0.0
        )

    before = left_out()
    doc = {**payload([nvlink_on("gpu-h100-10", g) for g in range(2)]), "truncatedAlerts": 3}
    assert send(bot, json.dumps(doc).encode())[0] == 200
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    assert left_out() == before + 3
    [note] = [str(c.params.get("text")) for c in roots(slack) if "max_alerts" in str(c.params.get("text"))]
    assert "3 alert(s)" in note
    assert len(threads(slack)) == 2  # the incident of gpu-h100-10, and the note
    assert send(bot, json.dumps(doc).encode())[0] == 200  # the next notification: counted, not said again
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    assert left_out() == before + 6
    assert len([c for c in roots(slack) if "max_alerts" in str(c.params.get("text"))]) == 1


def test_mig_instances_of_one_gpu_are_told_apart_on_the_line(bot: Any, slack: FakeSlack) -> None:
    # dcgm-exporter on a MIG-partitioned A100: one series per GPU instance (`GPU_I_ID`,
    # `GPU_I_PROFILE`), all with gpu="0". The line names the instances, not "GPU 0, 0".
    def on_instance(i: int) -> dict[str, Any]:
        return am_alert(
            "GPUXidError",
            {**DCGM, "Hostname": "gpu-a100-7", "gpu": "0", "GPU_I_ID": str(i), "GPU_I_PROFILE": "3g.40gb"},
        )

    deliver(bot, [on_instance(1)])
    ts = next(
        str(c.params["thread_ts"]) for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")
    )
    bot.clock.now += 300
    deliver(bot, [on_instance(1), on_instance(2)])
    [line] = thread_lines(slack, ts)
    assert "is firing too · GPU 0 (MIG 2)" in line, line


def test_a_pod_deleted_before_its_alert_resolves_still_closes_the_pods_incident(
    bot: Any, slack: FakeSlack, kube: FakeKubeAPI
) -> None:
    # The Xid took trainer-0 down and its Job deleted it; the alert resolves afterwards. By its labels
    # the alert would now concern node gpu-7, but it belongs to the pod's open incident.
    xid = am_alert(
        "GPUXidError", {**DCGM, **DCGM_TARGET, "exported_namespace": "ml", "exported_pod": "trainer-0"}
    )
    deliver(bot, [xid])
    [root] = threads(slack)
    assert "firing on pod `ml/trainer-0`" in _blocks(root)
    kube.fail(r"/namespaces/ml/pods/trainer-0$", status=404)
    service = bot.alerts.service
    service.directory = ClusterDirectory(service.directory.cluster)  # another replica: nothing cached
    bot.clock.now += 600
    deliver(bot, [resolved(xid)])
    assert len(threads(slack)) == 1
    last = _blocks(slack.calls_to("chat.update")[-1])
    assert "Resolved at" in last and "pod `ml/trainer-0`" in last


def test_with_kubernetes_down_an_exporters_own_pod_is_still_no_subject(
    bot: Any, slack: FakeSlack, kube: FakeKubeAPI
) -> None:
    # The API is down, so labels are taken as named; kube-state-metrics' own pod (scraped with
    # honorLabels false, the object's namespace as exported_namespace) is still not what
    # KubeDeploymentReplicasMismatch is about: no thread about it, the alert counted and ignored.
    kube.fail(".", status=503)
    answer = deliver(
        bot,
        [
            am_alert(
                "KubeDeploymentReplicasMismatch",
                {**KSM_OWN, "exported_namespace": "ml", "deployment": "infer"},
            )
        ],
    )
    assert answer == {"alerts": 1, "incidents_to_post": 0}
    assert threads(slack) == []
