"""The bot's HTTP side: Slack's Events API at /slack/events (HTTP mode) and /healthz, /readyz, /metrics.

bot/slack/slackroute.py checks the signature on the raw bytes before anything
else; every route is served by waitress behind bot/slack/httpserver.py's timeouts and caps.
With GPUBOT_ALERT_TOKEN set, both modes serve Alertmanager's webhook at
/alertmanager (bot/slack/alert_webhook.py).
Socket Mode (`socket_mode`, bot/slack/socketmode.py) serves only the health
endpoints here. Both transports hand Slack's payloads to the same gate
(bot/slack/gate.py: envelope shape, replays) before Bolt. On SIGTERM `drain` lets running walks finish within a grace period.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any, Protocol

from bot.ops import metrics
from bot.ops.config import Config
from bot.slack.alert_webhook import PATH as ALERTS_PATH
from bot.slack.flood import FloodGuard
from bot.slack.gate import SlackGate
from bot.slack.httpserver import HttpServer, Limits, Response, Route, start_server
from bot.slack.replay_record import BoundedReplayRecord
from bot.slack.slackroute import EVENTS_PATH, SlackEvents
from handlers.ports import StateStore

if TYPE_CHECKING:
    from bot.slack.socketmode import GatedSocketModeHandler

log = logging.getLogger("gpubot.serve")

DRAIN_S = 25.0  # Kubernetes gives 30 s between SIGTERM and SIGKILL by default


class Front(Protocol):
    """What the HTTP server serves: the single bot, a gateway or an agent (bot/cluster/roles.py).
    `app` (Bolt) is dispatched to only with `events`; an agent hears nothing from Slack."""

    @property
    def cfg(self) -> Config: ...

    @property
    def app(self) -> Any: ...

    @property
    def state(self) -> StateStore: ...

    @property
    def alerts(self) -> Any: ...

    def tell(self, channel: str, user: str, text: str) -> None: ...

    def ready(self) -> tuple[bool, str]: ...


class Drained(Protocol):
    """A front with running jobs to let finish at SIGTERM (the bot, the gateway)."""

    pending: set[concurrent.futures.Future[None]]

    def shutdown(self, wait: bool = True) -> None: ...


def start_http(bot: Front, host: str, port: int, *, events: bool) -> HttpServer:
    """Serve health (and with `events`, Slack's requests) on a background thread.

    Every route is served behind the same limits (bot/slack/httpserver.py): timeouts, a
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
        routes[("POST", EVENTS_PATH)] = SlackEvents(gate(bot), bot.cfg.slack_signing_secret)
    cfg = bot.cfg
    limits = Limits(
        header_s=cfg.http_timeout_s,
        body_s=cfg.http_timeout_s,
        write_s=cfg.http_timeout_s,
        max_connections=cfg.http_max_connections,
    )
    if bot.alerts is not None:  # in Socket Mode too: Alertmanager needs no public Slack endpoint
        routes[("POST", ALERTS_PATH)] = bot.alerts
        limits = bot.alerts.limits(limits)
    return start_server(routes, host, port, limits)


def gate(front: Front) -> SlackGate:
    """The checks every Slack payload passes before Bolt, over HTTP and over Socket Mode."""
    state = front.state
    if not isinstance(state, BoundedReplayRecord):  # a stalled Redis must not hold the ack
        state = BoundedReplayRecord(state)
    flood = FloodGuard(state, front.cfg.same_request_s, front.cfg.user_requests_per_minute)
    return SlackGate(front.app, state, front.tell, flood=flood)


def socket_mode(front: Front, app_token: str) -> GatedSocketModeHandler:
    """The Socket Mode connection for this front's Bolt app (not connected yet: `connect()`)."""
    from bot.slack.socketmode import GatedSocketModeHandler  # slack_sdk's WebSocket client: only when used

    return GatedSocketModeHandler(front.app, app_token, gate(front))


_READY_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="gpubot-readyz")
READY_BUDGET_S = 2.0  # a probe's own timeout is often 1 to 3 s: a stalled Redis is "unready", not no answer


def _ready(bot: Front) -> Response:
    try:
        ok, why = _READY_POOL.submit(bot.ready).result(timeout=READY_BUDGET_S)
    except concurrent.futures.TimeoutError:
        ok, why = False, f"Redis: no answer within {READY_BUDGET_S:g} s (stalled?)"
    return Response.text(200 if ok else 503, why + "\n")


def drain(bot: Drained, timeout_s: float = DRAIN_S) -> None:
    """Let running walks finish (bounded), then stop the pool."""
    pending = list(bot.pending)
    if pending:
        log.info("waiting up to %.0fs for %d running job(s)", timeout_s, len(pending))
        concurrent.futures.wait(pending, timeout=timeout_s)
    bot.shutdown(wait=False)
