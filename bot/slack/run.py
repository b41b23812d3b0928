"""Running the Slack bot: configuration, sources, state, the Bolt app, its transport and the digest's schedule.

HTTP mode serves Slack's Events API at /slack/events and /healthz, /readyz,
/metrics (bot/slack/transport.py). Socket Mode connects out with
SLACK_APP_TOKEN and serves only /healthz, /readyz and /metrics (Prometheus
text, bot/ops/metrics.py) on the port. Logs are JSON lines on stderr
(bot/ops/logs.py) at GPUBOT_LOG_LEVEL. SIGTERM stops cleanly: no new
requests, running walks finish (within a grace period), the Slack connection
closes. The command's options are bot/cli/serve.py.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from slack_sdk.errors import SlackApiError, SlackClientError

from bot.ops import metrics
from bot.ops.config import Config
from bot.slack.app import GpuBot
from bot.slack.httpserver import HttpServer
from bot.slack.transport import EVENTS_PATH, Drained, drain, socket_mode, start_http
from bot.sources.opener import Sources
from handlers.ports import StateUnavailable
from layers.sources import SourceError

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from layers.digest import Digest
    from layers.sources import Telemetry

log = logging.getLogger("gpubot.serve")
T = TypeVar("T")


def leased(state: Any, lease_s: float) -> Any:
    """The store whose short claims (a walk's layer leases) are renewed while their work runs, so a
    replica SIGKILLed mid-walk frees them within the lease (bot/slack/leases.py)."""
    from bot.slack.leases import LeaseKeeper, LeasingStore

    keeper = LeaseKeeper(state, lease_s)
    keeper.start()
    return LeasingStore(state, keeper)


def run_bot(args: argparse.Namespace) -> int:
    """Start the bot from `gpubot serve`'s arguments and serve until SIGTERM or SIGINT; 0 when stopped."""
    from bot.ops.config import load_config
    from bot.ops.logs import setup_logging
    from bot.slack.app import build_app
    from bot.slack.pace import share as share_pace
    from bot.slack.post import Poster
    from bot.slack.state import open_state
    from bot.sources.opener import sources_from_args

    cfg = load_config(need_slack=True, http=args.http)
    setup_logging(cfg.log_level)
    if args.redis_url:
        from dataclasses import replace

        from bot.ops.config import check_url

        cfg = replace(cfg, redis_url=check_url("--redis-url", args.redis_url, ("redis", "rediss", "unix")))
    sources = sources_from_args(cfg, args)
    from bot.ops.config import ConfigError
    from bot.slack.leases import lease_of
    from bot.slack.redisconn import NotThisMode, RedisTarget

    try:
        state, note = open_state(None, target=RedisTarget.of(cfg), lock_lease_s=lease_of(cfg))
    except StateUnavailable as err:
        raise SourceError("unavailable", f"state store: {err}") from None
    except NotThisMode as err:
        raise ConfigError(str(err)) from None
    state = leased(state, lease_of(cfg))
    assert cfg.slack_bot_token is not None  # load_config(need_slack=True) checked it
    poster = Poster(
        cfg.slack_bot_token, cfg.slack_api_url, history=cfg.slack_history, pace_s=cfg.slack_pace_s
    )
    share_pace(poster.pace, state)
    poster.pace.max_queued = cfg.slack_max_queued
    bot = with_bot_token(cfg, lambda: build_app(cfg, sources, state, poster, client=poster.client))
    log.info("sources: %s", sources.description)
    log.info("%s", note)

    stop = stop_on_signals()
    socket_handler: Any = None
    try:
        server = start_http(bot, args.host, args.port, events=args.http)
    except OSError as err:
        bot.shutdown(wait=False)
        raise SourceError(
            "bad_input", f"cannot listen on {args.host}:{args.port}: {err.strerror or err}"
        ) from None
    host, port = server.server_address[:2]
    if args.http:
        log.info(
            "serving Slack events at http://%s:%s%s (and /healthz, /readyz, /metrics)",
            host,
            port,
            EVENTS_PATH,
        )
    else:
        socket_handler = connect_socket_mode(bot, cfg.slack_app_token, server)
        log.info("connected to Slack over Socket Mode; health at http://%s:%s/healthz, /metrics", host, port)

    return serve_until(stop, bot, server, socket_handler, _start_digest(bot, sources, cfg))


def with_bot_token(cfg: Config, build: Callable[[], T]) -> T:
    """Build a Bolt app (the bot's or a gateway's): Bolt calls auth.test at start, and a refused
    token or an unreachable Web API is one SourceError line."""
    try:
        return build()
    except (SlackApiError, SlackClientError, OSError) as err:
        raise SourceError(
            "unavailable",
            f"Slack Web API at {cfg.slack_api_url} refused the bot token or did not answer: {err}",
        ) from None


def stop_on_signals() -> threading.Event:
    """Set by SIGTERM or SIGINT (the bot's, a gateway's or an agent's)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def connect_socket_mode(front: Any, app_token: str | None, server: HttpServer) -> Any:
    """Socket Mode for the bot or a gateway (bot/cluster/roles.py); its readiness follows the
    connection. Every envelope passes the gate HTTP requests pass (bot/slack/gate.py). Refused: the
    HTTP server and the front's pool stop, and SourceError says why."""
    assert app_token is not None  # load_config(need_slack=True) checked it in Socket Mode
    handler = socket_mode(front, app_token)
    front.slack_up = handler.client.is_connected
    try:
        handler.connect()
    except (SlackApiError, SlackClientError, OSError) as err:
        server.shutdown()
        server.server_close()
        front.shutdown(wait=False)
        raise SourceError(
            "unavailable",
            f"Slack refused the app-level token (SLACK_APP_TOKEN) or Socket Mode did not connect: {err}",
        ) from None
    return handler


def serve_until(
    stop: threading.Event, front: Drained, server: HttpServer, socket_handler: Any, scheduler: Any
) -> int:
    """Serve until `stop`; then no new requests, no schedule, no Slack connection, running work drained."""
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        if scheduler is not None:
            scheduler.shutdown(wait=False)
            metrics.record_digest_scheduled(False)
        if socket_handler is not None:
            socket_handler.close()
        drain(front)
        log.info("stopped")
    return 0


def _start_digest(bot: GpuBot, sources: Sources, cfg: Config) -> BackgroundScheduler | None:
    """The daily digest, when GPUBOT_DIGEST_CHANNEL is set (exactly once a day across replicas)."""
    if not cfg.digest_channel:
        return None
    from bot.slack.ledger_open import ledger_digest
    from bot.slack.scheduler import DigestJob, start_scheduler
    from layers.digest import collect_digest

    def collect() -> tuple[Digest, Telemetry]:
        digest = collect_digest(sources.cluster, sources.telemetry, operator_namespace=cfg.operator_namespace)
        return ledger_digest(cfg, sources.cluster, sources.telemetry, digest), sources.telemetry

    job = DigestJob(
        collect=collect,
        poster=bot.poster,
        channel=cfg.digest_channel,
        store=bot.state,
        tz=cfg.tz,
        retention_s=bot.service.retention_s,
        at=(cfg.digest_hour, cfg.digest_minute),
    )
    scheduler = start_scheduler(job, cfg.digest_hour, cfg.digest_minute, cfg.tz, still_due=job.due)
    log.info(
        "daily digest to %s at %02d:%02d %s",
        cfg.digest_channel,
        cfg.digest_hour,
        cfg.digest_minute,
        cfg.timezone,
    )
    return scheduler
