"""Many clusters in tests: agents and gateways over a REAL Redis, in-process or as `gpubot serve` processes.

In-process agents are the real Agent (bot/cluster/roles.py `build_agent`) over a
scenario or the fake Kubernetes API, posting with the real Poster to the fake
Slack Web API; the gateway is the real Bolt app, driven by signed requests.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
import yaml

from bot.cluster.gateway import Gateway, build_gateway
from bot.cluster.roles import build_agent
from bot.cluster.signing import RequestSigner
from bot.cluster.streams import ClusterStreams
from bot.ops.config import Config, load_config
from bot.slack.post import Poster
from bot.slack.redisconn import RedisTarget, connect
from bot.slack.state import RedisState
from bot.sources.opener import open_sources
from tests.slack_harness import BOT_TOKEN, bot_env, scenario_doc

FAST = {
    # Tight for tests, yet a takeover needs 3 s without renewal: a loaded CI machine can stall an
    # agent's ticker for a second or more, and a live agent must never be taken over.
    "GPUBOT_HEARTBEAT_SECONDS": "0.25",
    "GPUBOT_CLAIM_IDLE_SECONDS": "3",
    "GPUBOT_AGENT_SILENT_SECONDS": "1",
    "GPUBOT_DIGEST_PART_WAIT_SECONDS": "1.5",
}


# What gateway and agents sign and check every queued request with (GPUBOT_REQUEST_KEY).
REQUEST_KEY = "test-request-key-0123456789abcdef0123456789abcdef"
SIGNER = RequestSigner(REQUEST_KEY)


def cluster_scenario(folder: Path, cluster: str, prefix: str = "") -> Path:
    """The Slack harness's Xid 79 scenario with every node renamed `<prefix>gpu-N`: each cluster its own data."""
    text = yaml.safe_dump(scenario_doc(), sort_keys=False)
    if prefix:
        text = text.replace("gpu-", f"{prefix}gpu-").replace(f"{prefix}gpu-operator", "gpu-operator")
    path = folder / f"{cluster}.yaml"
    path.write_text(text)
    return path


def agent_env(slack_url: str, redis_url: str, cluster: str, **extra: str) -> dict[str, str]:
    env = bot_env(
        slack_url, REDIS_URL=redis_url, GPUBOT_CLUSTER_NAME=cluster, GPUBOT_REQUEST_KEY=REQUEST_KEY, **FAST
    )
    env.update(extra)
    return env


def gateway_env(slack_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = bot_env(slack_url, REDIS_URL=redis_url, GPUBOT_REQUEST_KEY=REQUEST_KEY, **FAST)
    env.update(extra)
    return env


class InProcessAgent:
    """A real Agent of `cluster` on a thread; `stop()` ends it as SIGTERM would (drains)."""

    def __init__(self, cfg: Config, sources: Any, redis_url: str, slack_url: str) -> None:
        # The Redis of cfg's shape (GPUBOT_REDIS_MODE in the settings: one server or a Redis Cluster).
        target = RedisTarget.of(cfg)
        self.state = RedisState(None, target=target)
        self.client = connect(target)
        self.streams = ClusterStreams(self.client, shown="test", maxlen=cfg.stream_maxlen, signer=SIGNER)
        self.poster = Poster(
            BOT_TOKEN, slack_url, backoff_s=0.01, history=cfg.slack_history, pace_s=cfg.slack_pace_s
        )
        self.agent = build_agent(cfg, sources, self.state, self.streams, self.poster)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.agent.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def stop(self, drain_s: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.agent.drain(drain_s)
        self.state.close()
        self.client.close()


def agent_config(slack_url: str, redis_url: str, cluster: str, **extra: str) -> Config:
    return load_config(agent_env(slack_url, redis_url, cluster, **extra), need_slack=True, role="agent")


def where(redis_at: str | Any, extra: dict[str, str]) -> tuple[str, dict[str, str]]:
    """A Redis URL (one server), or a server of tests/redis_topologies.py: its URL, and `extra` with the
    settings its shape needs (GPUBOT_REDIS_MODE=cluster)."""
    if isinstance(redis_at, str):
        return redis_at, extra
    return redis_at.url, {**redis_at.env, **extra}


@contextlib.contextmanager
def inprocess_agent(
    slack_url: str,
    redis_at: str | Any,
    cluster: str,
    *,
    scenario: Path | None = None,
    kubeconfig: str | None = None,
    **extra: str,
) -> Iterator[InProcessAgent]:
    redis_url, extra = where(redis_at, extra)
    cfg = agent_config(slack_url, redis_url, cluster, **extra)
    sources = open_sources(cfg, scenario=str(scenario) if scenario else None, kubeconfig=kubeconfig)
    agent = InProcessAgent(cfg, sources, redis_url, slack_url)
    try:
        yield agent
    finally:
        agent.stop()


def inprocess_gateway(slack_url: str, redis_at: str | Any, **extra: str) -> Gateway:
    redis_url, extra = where(redis_at, extra)
    cfg = load_config(gateway_env(slack_url, redis_url, **extra), need_slack=True, http=True, role="gateway")
    poster = Poster(BOT_TOKEN, slack_url, backoff_s=0.01, history=cfg.slack_history, pace_s=cfg.slack_pace_s)
    target = RedisTarget.of(cfg)
    streams = ClusterStreams(connect(target), shown="test", maxlen=cfg.stream_maxlen, signer=SIGNER)
    return build_gateway(cfg, RedisState(None, target=target), streams, poster, client=poster.client)


def fresh_cluster(name: str = "c") -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def flush(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).flushdb()


def streams_of(server: Any, signer: RequestSigner | None = SIGNER) -> ClusterStreams:
    """ClusterStreams over a client of `server`'s shape (tests/redis_topologies.py: single or cluster)."""
    return ClusterStreams(server.client(), shown="test", signer=signer)


def state_of(server: Any, **kw: Any) -> RedisState:
    target = RedisTarget(server.url, mode=server.mode)
    return RedisState(None, target=target, **kw)
