"""`gpubot serve --role gateway|agent`: assembling each role and running it until SIGTERM.

Both roles need REDIS_URL (REDIS_PASSWORD, and REDIS_CA_BUNDLE with
`rediss://`, for a Redis reached over the network). The gateway also needs
what `--role all` needs from Slack; it never opens the cluster sources. The
agent needs the bot token and GPUBOT_CLUSTER_NAME, and its cluster's sources
(in-cluster credentials, or --kubeconfig / --scenario like every command).
Both serve /healthz, /readyz and /metrics on --port; only a gateway in HTTP
mode serves /slack/events.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, cast

from bot.ops.config import Config, ConfigError, check_url
from bot.slack.transport import Front, start_http
from layers.sources import SourceError

log = logging.getLogger("gpubot.serve")

DRAIN_S = 25.0
# How long an agent's state store rides out a Redis Cluster switching (redisconn.riding_out): well
# inside its lease (60 s), so nothing it holds lapses meanwhile.
AGENT_RIDE_OUT_S = 10.0


def _redis_settings(cfg: Config, args: argparse.Namespace) -> Config:
    if getattr(args, "redis_url", None):
        cfg = replace(cfg, redis_url=check_url("--redis-url", args.redis_url, ("redis", "rediss", "unix")))
    if cfg.redis_ca_bundle and not os.path.isfile(cfg.redis_ca_bundle):
        raise ConfigError(f"REDIS_CA_BUNDLE names no readable file: {cfg.redis_ca_bundle}")
    return cfg


def _streams(cfg: Config) -> Any:
    from bot.cluster.signing import RequestSigner
    from bot.cluster.streams import ClusterStreams
    from bot.slack.redisconn import RedisTarget, connect

    target = RedisTarget.of(cfg)
    assert target.configured and cfg.request_key is not None  # load_config(role=…) requires both
    return ClusterStreams(
        connect(target, ride_out_restarts=True),
        shown=target.shown,
        maxlen=cfg.stream_maxlen,
        signer=RequestSigner(cfg.request_key),
    )


@dataclass
class AgentFront:
    """/healthz, /readyz and /metrics of an agent: it serves nothing from Slack (no `app`, no alerts).
    Ready when Redis takes what an agent writes: the state store, its heartbeat, its acknowledgements."""

    agent: Any
    state: Any
    cfg: Config
    app: Any = None
    alerts: Any = None

    def tell(self, channel: str, user: str, text: str) -> None:
        self.agent.poster.ephemeral(channel, user, text)

    def ready(self) -> tuple[bool, str]:
        from bot.cluster.streams import StreamsUnavailable
        from handlers.ports import StateUnavailable

        try:
            self.state.ping()
            self.state.set(f"readyz:agent:{self.agent.consumer}", {"at": time.time()}, 60)
        except StateUnavailable as err:
            return False, f"state store: {err}"
        if not self.agent.redis_up:
            return False, "Redis streams: not reachable yet"
        if self.agent.beat_error is not None:
            return False, f"heartbeat: {self.agent.beat_error}"
        try:
            self.agent.streams.check_agent_writes(self.agent.cluster)
        except StreamsUnavailable as err:
            return False, f"Redis streams: {err}"
        return True, "ready"


def _in_line(_what: str, fn: Any, *args: Any) -> None:
    """An agent's `submit` for the ledger's alert entries: run now, on the agent's own worker."""
    fn(*args)


def build_agent(cfg: Config, sources: Any, state: Any, streams: Any, poster: Any) -> Any:
    """The agent over this cluster's sources: the single process's walk service and buttons, with
    short renewed claims (leases), fed by the cluster's stream."""
    from bot.cluster.agent import Agent, AgentTiming, consumer_name
    from bot.cluster.kinds import agent_handlers
    from bot.cluster.node_kinds import ClusterButtons
    from bot.cluster.once import OncePoster
    from bot.slack.app import MetricsObserver, build_services
    from bot.slack.digest_post import publish_digest
    from bot.slack.leases import LeaseKeeper, LeasingStore
    from bot.slack.ledger_alerts import LedgerReceiver
    from bot.slack.ledger_open import bot_ledger, ledger_digest
    from handlers.alert_subjects import ClusterDirectory
    from handlers.alerts import AlertService, AlertSettings
    from layers.digest import collect_digest

    assert cfg.cluster_name is not None  # load_config(role="agent") requires it
    timing = AgentTiming(heartbeat_s=cfg.heartbeat_s, claim_idle_s=cfg.claim_idle_s)
    keeper = LeaseKeeper(state, timing.lease_s)
    leased = LeasingStore(state, keeper)
    consumer = consumer_name()
    once = OncePoster(poster, state, consumer)
    # What the agent posts names its cluster in each Run diagnostics button: the gateway routes the click.
    posts = ClusterButtons(once, cfg.cluster_name)
    service, buttons = build_services(cfg, sources, leased, posts, poster.client, claim_s=timing.lease_s)

    def collect() -> Any:
        digest = collect_digest(sources.cluster, sources.telemetry, operator_namespace=cfg.operator_namespace)
        return ledger_digest(cfg, sources.cluster, sources.telemetry, digest), sources.telemetry

    def publish_part(run: str, channel: str, day: str, thread_ts: str) -> object:
        return publish_digest(
            collect,
            posts,
            channel,
            day=day,
            store=leased,
            retention_s=service.retention_s,
            thread_ts=thread_ts,
            cluster=cfg.cluster_name,
            count_run=run == day,  # the daily run; `/gpu digest` is not what the staleness alert watches
            key=f"digest:{run}:part:{cfg.cluster_name}",
        )

    directory = ClusterDirectory(sources.cluster)  # one node-list cache for every webhook's alerts
    cluster = cfg.cluster_name

    def make_alerts(settings: AlertSettings) -> AlertService:
        alerts = AlertService(
            leased,
            service,
            directory,
            settings,
            observer=MetricsObserver(),
            cluster=cluster,
            sweep_on_receive=True,  # no sweep timer in an agent: its alert requests run the sweep
        )
        # The Xids alerts name go to the node's ledger, as the single process's do (an agent runs its
        # requests on its own workers: the entry is written in line, and a redelivered request writes
        # nothing twice, the ledger's writes being idempotent).
        return cast(AlertService, LedgerReceiver(alerts, bot_ledger(cfg), _in_line))

    handlers = agent_handlers(cluster, service, buttons, publish_part, timing.lease_s, make_alerts)
    handlers.update(node_handlers(cfg, sources, leased, posts, poster.client))
    return Agent(
        cfg.cluster_name,
        streams,
        leased,
        once,
        handlers,
        keeper,
        timing=timing,
        workers=cfg.workers,
        consumer=consumer,
    )


def node_handlers(cfg: Config, sources: Any, state: Any, posts: Any, client: Any) -> dict[str, Any]:
    """`/gpu node` and Run diagnostics, run by the agent with its cluster's credentials and ledger."""
    from bot.actions.diag import own_namespace
    from bot.cluster.node_kinds import DIAG_CLICK, NODE, run_diag, run_node
    from bot.slack.app import group_members
    from bot.slack.ledger_open import bot_ledger
    from bot.slack.ledger_slack import DiagButtons, post_node_ledger
    from handlers.operators import Operators

    assert cfg.cluster_name is not None
    operators = Operators(cfg.operators, cfg.operator_groups, group_members(client))

    def node(channel: str, user: str, name: str) -> None:
        post_node_ledger(cfg, sources, bot_ledger(cfg), posts, channel, user, name)

    def diag(click: Any) -> object:
        namespace = own_namespace(cfg.diag_namespace)
        return DiagButtons(cfg, sources, bot_ledger(cfg), posts, operators, state, namespace).handle(click)

    return {NODE: run_node(node), DIAG_CLICK: run_diag(cfg.cluster_name, diag)}


def serve_role(args: argparse.Namespace) -> int:
    from bot.cluster import stream_metrics
    from bot.ops.config import load_config
    from bot.ops.logs import setup_logging
    from bot.slack.pace import share as share_pace
    from bot.slack.post import Poster
    from bot.slack.run import stop_on_signals
    from bot.slack.state import open_state
    from handlers.ports import StateUnavailable

    role = args.role
    gateway = role == "gateway"
    cfg = load_config(need_slack=True, http=args.http, role=role)
    setup_logging(cfg.log_level)
    cfg = _redis_settings(cfg, args)
    sources = None
    if not gateway:
        from bot.sources.opener import sources_from_args

        sources = sources_from_args(cfg, args)
    from bot.slack.leases import lease_of
    from bot.slack.redisconn import RIDE_OUT_S, NotThisMode, RedisTarget

    try:
        # An agent's locks lapse as fast as its leases: well before its entries can be taken over. An
        # agent answers nobody within Slack's 3 s, so its store rides out a Redis Cluster's restart for
        # longer than the gateway's (the slots agreed again can take seconds on a loaded host).
        target = RedisTarget.of(cfg)
        state, note = open_state(
            None,
            target=target,
            ride_out_restarts=True,
            lock_lease_s=lease_of(cfg),
            ride_out_s=AGENT_RIDE_OUT_S if not gateway else RIDE_OUT_S,
        )
    except StateUnavailable as err:
        raise SourceError("unavailable", f"state store: {err}") from None
    except NotThisMode as err:
        raise ConfigError(str(err)) from None
    streams = _streams(cfg)
    assert cfg.slack_bot_token is not None
    poster = Poster(
        cfg.slack_bot_token, cfg.slack_api_url, history=cfg.slack_history, pace_s=cfg.slack_pace_s
    )
    share_pace(poster.pace, state)
    poster.pace.max_queued = cfg.slack_max_queued
    stop = stop_on_signals()
    if gateway:
        return _run_gateway(args, cfg, state, streams, poster, stop)
    log.info(
        "agent of cluster %s; sources: %s; %s", cfg.cluster_name, sources.description if sources else "", note
    )
    agent = build_agent(cfg, sources, state, streams, poster)
    assert cfg.cluster_name is not None
    stream_metrics.prime(cfg.cluster_name)
    stream_metrics.register(streams, lambda: [cfg.cluster_name or ""])
    server = _listen(AgentFront(agent, state, cfg), args, events=False)
    loop = threading.Thread(target=agent.run, args=(stop,), name="gpubot-agent", daemon=True)
    loop.start()
    log.info("agent %s of cluster %s reading %s", agent.consumer, cfg.cluster_name, streams.shown)
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        loop.join(timeout=cfg.heartbeat_s + 5)
        agent.drain(DRAIN_S)
        log.info("stopped")
    return 0


def _listen(front: Front, args: argparse.Namespace, *, events: bool) -> Any:
    try:
        return start_http(front, args.host, args.port, events=events)
    except OSError as err:
        raise SourceError(
            "bad_input", f"cannot listen on {args.host}:{args.port}: {err.strerror or err}"
        ) from None


def _run_gateway(
    args: argparse.Namespace, cfg: Config, state: Any, streams: Any, poster: Any, stop: threading.Event
) -> int:

    from bot.cluster import stream_metrics
    from bot.cluster.gateway import build_gateway
    from bot.cluster.streams import StreamsUnavailable
    from bot.slack.run import connect_socket_mode, serve_until, with_bot_token

    gw = with_bot_token(cfg, lambda: build_gateway(cfg, state, streams, poster, client=poster.client))

    def registered() -> list[str]:
        try:
            return list(streams.clusters())
        except StreamsUnavailable:
            return []

    stream_metrics.register(streams, registered)
    server = _listen(gw, args, events=args.http)
    host, port = server.server_address[:2]
    socket_handler: Any = None
    if args.http:
        log.info("gateway serving Slack events at http://%s:%s/slack/events", host, port)
    else:
        socket_handler = connect_socket_mode(gw, cfg.slack_app_token, server)
        log.info("gateway connected to Slack over Socket Mode; health at http://%s:%s/healthz", host, port)
    scheduler = None
    if cfg.digest_channel:
        from bot.slack.scheduler import start_scheduler

        scheduler = start_scheduler(gw.roots.daily, cfg.digest_hour, cfg.digest_minute, cfg.tz)
        log.info(
            "daily digest root to %s at %02d:%02d %s",
            cfg.digest_channel,
            cfg.digest_hour,
            cfg.digest_minute,
            cfg.timezone,
        )
    return serve_until(stop, gw, server, socket_handler, scheduler)
