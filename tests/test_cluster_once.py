"""Effectively-once takeover over a REAL redis-server: an agent dies right after a post, another finishes.

The victim is the real agent (bot/cluster/roles.py `build_agent`) whose Poster
or state store dies (a BaseException: no `except Exception` of the walk can
catch it, as none can catch SIGKILL) at a chosen point: after Slack took the
root, layer 1, layer 5 or a digest part but before the answer was recorded,
or after the post was recorded but before the layer or part was marked done.
A second agent of the cluster takes the entries over (XAUTOCLAIM) and each
thread must hold every message exactly once. tests/test_cluster_e2e.py does the
same with `gpubot serve` processes and SIGKILL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.agent import Agent
from bot.cluster.kinds import PART_KEY, alerts_request, digest_part_request, why_request
from bot.cluster.once import OncePoster
from bot.cluster.roles import build_agent
from bot.cluster.streams import ClusterStreams
from bot.slack.post import Poster
from bot.slack.state import RedisState, redis_client
from bot.sources.opener import open_sources
from handlers.alerts import AlertSettings
from handlers.ports import Attachment, JSONValue, PostRef
from tests.alertmanager import alert
from tests.cluster_harness import SIGNER, agent_config, cluster_scenario, fresh_cluster, inprocess_agent
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import BOT_TOKEN, posts, wait_for

QUICK = {"GPUBOT_CLAIM_IDLE_SECONDS": "1.5"}  # nobody live is taken over here: the victim is stopped


class Died(BaseException):
    """The agent's process ends here."""


class Killer:
    """Dies once at each point named: `(channel, what)` where what is a post's text prefix, or a key."""

    def __init__(self, points: set[tuple[str, str]]) -> None:
        self.points = set(points)
        self.died: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def maybe(self, channel: str, what: str) -> None:
        with self.lock:
            hit = next((p for p in self.points if p[0] == channel and what.startswith(p[1])), None)
            if hit is None:
                return
            self.points.discard(hit)
            self.died.append(hit)
        raise Died(hit)


class DyingPoster:
    """The real Poster, dying just after Slack took a post: its answer is never recorded."""

    def __init__(self, inner: Poster, killer: Killer) -> None:
        self.inner, self.killer = inner, killer
        self.client = inner.client

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        *,
        key: str | None = None,
    ) -> PostRef:
        ref = self.inner.post(channel, text, blocks, thread_ts, key=key)
        self.killer.maybe(channel, text)
        return ref

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class DyingState(RedisState):
    """The real Redis state store, dying before it marks a key (a layer "posted", a part done)."""

    def __init__(self, url: str, killer: Killer, channel_of: Callable[[str], str | None]) -> None:
        super().__init__(url)
        self.killer, self.channel_of = killer, channel_of

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        channel = self.channel_of(key)
        if channel is not None:
            self.killer.maybe(channel, key)
        super().set(key, value, ttl_s)


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def roots(slack: FakeSlack, channel: str) -> list[Call]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


def layer_texts(slack: FakeSlack, channel: str) -> list[str]:
    return sorted(str(c.params["text"]) for c in posts(slack, channel) if c.params.get("thread_ts"))


def part_headers(slack: FakeSlack, channel: str) -> list[str]:
    return [
        b["text"]["text"]
        for c in posts(slack, channel)
        if c.params.get("thread_ts")
        for b in c.params.get("blocks") or []
        if b["type"] == "header"
    ]


WALKED = ["Layer 1 (scheduling): fault", "Layer 5 (the card): fault"]


def run_until_dead(victim: Agent, killer: Killer) -> None:
    """Run the victim until it has died at every point, then stop what is left of it."""
    stop = threading.Event()
    loop = threading.Thread(target=victim.run, args=(stop,), daemon=True)
    loop.start()
    try:
        wait_for(
            "the victim dead at every point",
            lambda: not killer.points,
            timeout=20,
            explain=lambda: f"left {killer.points} died {killer.died}",
        )
    finally:
        stop.set()
        loop.join(timeout=10)
        victim.drain(1.0)


def test_a_walk_and_a_digest_part_taken_over_after_any_post_have_each_message_once(
    slack: FakeSlack, redis_server: RedisServer, tmp_path: Path
) -> None:
    c = fresh_cluster("once")
    scenario = cluster_scenario(tmp_path, c)
    walks = {
        "C0ONCEROOT": ("walkonceroot01", ("C0ONCEROOT", "gpubot: ")),
        "C0ONCEL1": ("walkoncel10001", ("C0ONCEL1", "Layer 1 (")),
        "C0ONCEL5": ("walkoncel50001", ("C0ONCEL5", "Layer 5 (")),
        "C0ONCEL5DONE": ("walkoncel5done", ("C0ONCEL5DONE", "walk:walkoncel5done:posted:5")),
    }
    part_channels = {"C0ONCEPART": "post", "C0ONCEPARTDONE": "mark"}
    run_of = {ch: f"run-{ch.lower()}" for ch in part_channels}
    points = {point for _, point in walks.values()}
    points.add(("C0ONCEPART", ""))  # the part's own message: the agent's first post in that channel
    points.add(("C0ONCEPARTDONE", PART_KEY.format(run_of["C0ONCEPARTDONE"], c)))
    killer = Killer(points)

    def channel_of(key: str) -> str | None:
        for ch, (walk_id, point) in walks.items():
            if point[1] == key and walk_id in key:
                return ch
        return "C0ONCEPARTDONE" if key == PART_KEY.format(run_of["C0ONCEPARTDONE"], c) else None

    cfg = agent_config(slack.url, redis_server.url, c, **QUICK)
    sources = open_sources(cfg, scenario=str(scenario))
    client = redis_client(redis_server.url)
    streams = ClusterStreams(client, shown="test", signer=SIGNER)
    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, history=True)
    # A digest part's thread: the root the gateway would have posted.
    threads = {ch: poster.post(ch, "GPU digest (root)").ts for ch in part_channels}

    dying_poster = DyingPoster(poster, killer)
    victim = build_agent(
        cfg, sources, DyingState(redis_server.url, killer, channel_of), streams, dying_poster
    )
    for ch, (walk_id, _) in walks.items():
        streams.queue(c, why_request(walk_id, "ml", "trainer-0", ch, "U0ASKER", "0.2.0"))
    for ch in part_channels:
        streams.queue(c, digest_part_request(run_of[ch], "2026-12-01", ch, threads[ch], "0.2.0"))
    run_until_dead(victim, killer)
    assert len(killer.died) == 6
    with inprocess_agent(slack.url, redis_server.url, c, scenario=scenario, **QUICK) as survivor:
        for ch in walks:
            wait_for(
                f"the walk in {ch}", lambda ch=ch: set(layer_texts(slack, ch)) == set(WALKED), timeout=20
            )
        for ch in part_channels:
            wait_for(f"the part in {ch}", lambda ch=ch: part_headers(slack, ch), timeout=20)
        wait_for("every entry acknowledged", lambda: survivor.streams.stats(c).pending == 0, timeout=10)
        assert isinstance(survivor.agent.poster, OncePoster)
    for ch in walks:
        assert len(roots(slack, ch)) == 1, ch
        assert layer_texts(slack, ch) == WALKED, ch  # each layer once, none lost
    for ch in part_channels:
        assert [h.rsplit(" · ", 1)[1] for h in part_headers(slack, ch)] == [f"cluster {c}"], ch
        assert len(roots(slack, ch)) == 1  # the test's own root; no part landed outside the thread
    stored = RedisState(redis_server.url).get("once:post:walkonceroot01:root")
    assert isinstance(stored, dict) and stored["ts"]  # the root the victim posted, found in Slack
    client.close()


def test_an_alert_walk_whose_agent_died_mid_walk_is_finished_once_with_its_verdict(
    slack: FakeSlack, redis_server: RedisServer, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("oncealert"), "C0ONCEALERT"
    killer = Killer({(channel, "Layer 5 (")})  # Slack took the alert walk's layer 5; its agent died
    cfg = agent_config(slack.url, redis_server.url, c, **QUICK)
    scenario = cluster_scenario(tmp_path, c)
    client = redis_client(redis_server.url)
    streams = ClusterStreams(client, shown="test", signer=SIGNER)
    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, history=True)
    sources = open_sources(cfg, scenario=str(scenario))
    victim = build_agent(cfg, sources, RedisState(redis_server.url), streams, DyingPoster(poster, killer))
    payload = {"version": "4", "alerts": [alert("GPUXidError", Hostname="gpu-7", gpu="0")]}
    streams.queue(c, alerts_request(payload, AlertSettings(channel=channel), "0.2.0"))
    run_until_dead(victim, killer)
    with inprocess_agent(slack.url, redis_server.url, c, scenario=scenario, **QUICK) as survivor:
        wait_for(
            "the verdict on the incident root",
            lambda: [
                u
                for u in slack.calls_to("chat.update")
                if u.params.get("channel") == channel
                and "*Verdict* (layer 5)" in (shown := json.dumps(u.params["blocks"]))
                and "GPUXidError" in shown  # the incident's root, not the walk's own
            ],
        )
        wait_for("the entry acknowledged", lambda: survivor.streams.stats(c).pending == 0)
    assert len(roots(slack, channel)) == 1  # one incident root
    thread = [str(c.params["text"]) for c in posts(slack, channel) if c.params.get("thread_ts")]
    layers = [t for t in thread if t.startswith("Layer ")]
    assert len(layers) == len(set(layers)) and sum(t.startswith("Layer 5 (") for t in layers) == 1, thread
    assert sum(t.startswith("gpubot: ") for t in thread) == 1  # the walk's own root, once
    client.close()


def test_an_intent_without_a_message_in_slack_is_posted_and_one_with_it_is_not(
    slack: FakeSlack, redis_server: RedisServer
) -> None:
    """The two cases of a dead agent's intent, and a lookup Slack refuses (posted: none is worse than two)."""
    state = RedisState(redis_server.url)
    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, history=True)
    once = OncePoster(poster, state, "test")
    channel = "C0ONCEUNIT"
    root = poster.post(channel, "root")
    # Slack took the post; the agent died before recording where it landed.
    state.set("once:post:k-taken", {"at": 1.0e9, "by": "dead-1"}, 60)
    taken = poster.post(channel, "in thread", thread_ts=root.ts, key="k-taken")
    assert once.post(channel, "in thread", thread_ts=root.ts, key="k-taken") == taken
    # The agent died before Slack took it: nothing to find, so it is posted.
    state.set("once:post:k-lost", {"at": 1.0e9, "by": "dead-2"}, 60)
    lost = once.post(channel, "lost one", thread_ts=root.ts, key="k-lost")
    assert lost.ts != taken.ts
    recorded = state.get("once:post:k-lost")
    assert recorded["by"] == "test" and (recorded["channel"], recorded["ts"]) == (channel, lost.ts)
    # Recorded: not even looked up again.
    before = len(slack.calls_to("conversations.replies"))
    assert once.post(channel, "lost one", thread_ts=root.ts, key="k-lost") == lost
    assert len(slack.calls_to("conversations.replies")) == before
    # The lookup refused (no history scope): posted rather than lost.
    state.set("once:post:k-blind", {"at": 1.0e9, "by": "dead-3"}, 60)
    slack.fail("conversations.replies", 403, body={"ok": False, "error": "missing_scope"})
    blind = once.post(channel, "blind", thread_ts=root.ts, key="k-blind")
    texts = [c.params["text"] for c in posts(slack, channel, root.ts)]
    assert texts.count("in thread") == 1 and texts.count("lost one") == 1 and texts.count("blind") == 1
    assert blind.ts
    # Uploads: once per request; another request uploads again.
    with once.scope("req-1"):
        once.upload(channel, Attachment("a.txt", "x"), thread_ts=root.ts)
        once.upload(channel, Attachment("a.txt", "x"), thread_ts=root.ts)
    with once.scope("req-2"):
        once.upload(channel, Attachment("a.txt", "x"), thread_ts=root.ts)
    completed = [
        c for c in slack.calls_to("files.completeUploadExternal") if c.params.get("channel_id") == channel
    ]
    assert len(completed) == 2
    state.close()
