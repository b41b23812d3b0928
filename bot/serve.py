"""`gpubot serve`: the Slack bot over Socket Mode (default) or HTTP, with health endpoints.

HTTP mode serves Slack's Events API at /slack/events (bot/slackroute.py checks
the signature on the raw bytes before anything else) and /healthz, /readyz,
/metrics, all behind bot/httpserver.py's timeouts and caps; with
GPUBOT_ALERT_TOKEN set, both modes serve Alertmanager's webhook at
/alertmanager (bot/alert_webhook.py).
Socket Mode connects out with SLACK_APP_TOKEN and serves only /healthz,
/readyz and /metrics (Prometheus text, bot/metrics.py) on the port. Logs are
JSON lines on stderr (bot/logs.py) at GPUBOT_LOG_LEVEL. The host defaults to
127.0.0.1; 0.0.0.0 (the container) only when asked with --host. SIGTERM
stops cleanly: no new requests, running walks finish (within a grace period),
the Slack connection closes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError, SlackClientError

from bot import metrics
from bot.alert_webhook import PATH as ALERTS_PATH
from bot.app import GpuBot
from bot.config import Config
from bot.httpserver import HttpServer, Limits, Response, Route, start_server
from bot.slackroute import EVENTS_PATH, SlackEvents
from bot.sources import Sources
from handlers.ports import StateUnavailable
from layers.sources import SourceError

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from layers.digest import Digest
    from layers.sources import Telemetry

log = logging.getLogger("gpubot.serve")

DRAIN_S = 25.0  # Kubernetes gives 30 s between SIGTERM and SIGKILL by default


def start_http(bot: GpuBot, host: str, port: int, *, events: bool) -> HttpServer:
    """Serve health (and with `events`, Slack's requests) on a background thread.

    Every route is served behind the same limits (bot/httpserver.py): timeouts, a
    connection cap, body limits, no Transfer-Encoding."""
    routes: dict[tuple[str, str], Route] = {
        ("GET", "/healthz"): lambda _req: Response.text(200, "ok\n"),
        ("GET", "/readyz"): lambda _req: _ready(bot),
        ("GET", "/metrics"): lambda _req: Response(
            200, metrics.render(), {"Content-Type": [metrics.CONTENT_TYPE]}
        ),
    }
    if events:
        assert bot.cfg.slack_signing_secret is not None  # load_config(http=True) checked it
        routes[("POST", EVENTS_PATH)] = SlackEvents(
            bot.app, bot.cfg.slack_signing_secret, bot.state, tell=bot.tell
        )
    if bot.alerts is not None:  # in Socket Mode too: Alertmanager needs no public Slack endpoint
        routes[("POST", ALERTS_PATH)] = bot.alerts
    cfg = bot.cfg
    limits = Limits(
        header_s=cfg.http_timeout_s,
        body_s=cfg.http_timeout_s,
        write_s=cfg.http_timeout_s,
        max_connections=cfg.http_max_connections,
    )
    return start_server(routes, host, port, limits)


def _ready(bot: GpuBot) -> Response:
    ok, why = bot.ready()
    return Response.text(200 if ok else 503, why + "\n")


def drain(bot: GpuBot, timeout_s: float = DRAIN_S) -> None:
    """Let running walks finish (bounded), then stop the pool."""
    pending = list(bot.pending)
    if pending:
        log.info("waiting up to %.0fs for %d running job(s)", timeout_s, len(pending))
        concurrent.futures.wait(pending, timeout=timeout_s)
    bot.shutdown(wait=False)


def cmd_serve(args: argparse.Namespace) -> int:
    from bot.app import build_app
    from bot.config import load_config
    from bot.logs import setup_logging
    from bot.slackpost import Poster
    from bot.sources import sources_from_args
    from bot.state import open_state

    cfg = load_config(need_slack=True, http=args.http)
    setup_logging(cfg.log_level)
    if args.redis_url:
        from dataclasses import replace

        from bot.config import check_url

        cfg = replace(cfg, redis_url=check_url("--redis-url", args.redis_url, ("redis", "rediss", "unix")))
    sources = sources_from_args(cfg, args)
    try:
        state, note = open_state(cfg.redis_url)
    except StateUnavailable as err:
        raise SourceError("unavailable", f"state store: {err}") from None
    assert cfg.slack_bot_token is not None  # load_config(need_slack=True) checked it
    poster = Poster(cfg.slack_bot_token, cfg.slack_api_url)
    try:
        bot = build_app(cfg, sources, state, poster, client=poster.client)
    except (SlackApiError, SlackClientError, OSError) as err:  # Bolt calls auth.test at start
        raise SourceError(
            "unavailable",
            f"Slack Web API at {cfg.slack_api_url} refused the bot token or did not answer: {err}",
        ) from None
    log.info("sources: %s", sources.description)
    log.info("%s", note)

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

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
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        socket_handler = SocketModeHandler(bot.app, cfg.slack_app_token)
        bot.slack_up = socket_handler.client.is_connected
        try:
            socket_handler.connect()
        except (SlackApiError, SlackClientError, OSError) as err:
            server.shutdown()
            server.server_close()
            bot.shutdown(wait=False)
            raise SourceError(
                "unavailable",
                f"Slack refused the app-level token (SLACK_APP_TOKEN) or Socket Mode did not connect: {err}",
            ) from None
        log.info("connected to Slack over Socket Mode; health at http://%s:%s/healthz, /metrics", host, port)

    scheduler = _start_digest(bot, sources, cfg)
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
        drain(bot)
        log.info("stopped")
    return 0


def _start_digest(bot: GpuBot, sources: Sources, cfg: Config) -> BackgroundScheduler | None:
    """The daily digest, when GPUBOT_DIGEST_CHANNEL is set (exactly once a day across replicas)."""
    if not cfg.digest_channel:
        return None
    from bot.scheduler import DigestJob, start_scheduler
    from layers.digest import collect_digest

    def collect() -> tuple[Digest, Telemetry]:
        digest = collect_digest(sources.cluster, sources.telemetry, operator_namespace=cfg.operator_namespace)
        return digest, sources.telemetry

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


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bot.serve …`: the same command as `gpubot serve`, through the CLI's error handling."""
    from bot import cli

    return cli.main(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
