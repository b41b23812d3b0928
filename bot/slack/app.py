"""The Bolt wiring: `/gpu` and the buttons → handlers, on a bounded worker pool.

Listeners acknowledge at once (Slack allows 3 s; we aim well under 0.5 s) and
hand the walk to our own pool, so Bolt's listener threads are never held by a
walk: a burst of commands queues on the pool, none is dropped. The pool has a
fixed number of workers (GPUBOT_WORKERS) and an unbounded queue.

`MetricsObserver` fills the handlers' WalkObserver port with bot/ops/metrics.py
(walks, layer durations, findings, actions) and bot/ops/logs.py (the walk id on
every log line of a walk or a click). The node actions the buttons run are
bot/slack/node_actions.py's.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.ops import metrics
from bot.ops.config import Config
from bot.ops.logs import walk_scope
from bot.ops.secrets import mask_text
from bot.slack.alert_sweeper import AlertSweeper
from bot.slack.alert_webhook import AlertWebhook
from bot.slack.leases import lease_of
from bot.slack.ledger_alerts import LedgerReceiver
from bot.slack.ledger_open import bot_ledger
from bot.slack.ledger_slack import post_node_ledger, register_diagnostics
from bot.slack.ledger_walks import LedgerObserver, walk_recorder
from bot.slack.node_actions import ClusterNodeActions
from bot.sources.opener import Sources
from handlers.alert_subjects import ClusterDirectory
from handlers.alerts import AlertService, AlertSettings
from handlers.blocks import CORDON, DESCEND, JUMP, MUST_GATHER, UNCORDON, WALK_ALL
from handlers.buttons import Buttons, NodeActions
from handlers.clicks import click_from_payload, walk_id_of
from handlers.commands import CommandError, Digest, Node, Why, answer_now, parse_command, usage_reply
from handlers.digest import DIAGNOSE
from handlers.escape import escape
from handlers.operators import Operators
from handlers.ports import SlackPoster, StateStore, StateUnavailable, WalkObserver
from handlers.telling import unexpected
from handlers.walks import RETENTION_S, WalkService
from handlers.walkstate import new_walk_id
from layers import digest as fleet
from layers.facts.context import Settings, WalkContext
from layers.findings import LayerResult, Target, WalkResult
from layers.sources import Telemetry
from layers.walk import open_node, open_pod

log = logging.getLogger("gpubot.app")

BUTTON_ACTIONS = re.compile(
    f"^({'|'.join((DESCEND, JUMP, WALK_ALL, MUST_GATHER, CORDON, UNCORDON, DIAGNOSE))})$"
)


class MetricsObserver:
    """WalkObserver over this process's Prometheus metrics and JSON log context."""

    def walk_started(self) -> None:
        metrics.record_walk_started()

    def layer_done(self, result: LayerResult, seconds: float) -> None:
        metrics.record_layer(result, seconds)

    def walk_finished(self, result: WalkResult) -> None:
        metrics.record_walk_finished(result)

    def action(self, kind: str, outcome: str) -> None:
        metrics.record_action(kind, outcome)

    def scope(self, walk_id: str | None) -> AbstractContextManager[None]:
        return walk_scope(walk_id)

    def alert(self, status: str, decision: str, count: int = 1) -> None:
        metrics.record_alert(status, decision, count)

    def incident(self, event: str) -> None:
        metrics.record_alert_incident(event)


def group_members(client: WebClient) -> Callable[[str], Iterable[str]]:
    """usergroups.users.list for the operator check; a failure is counted, then Operators fails closed."""

    def members(group: str) -> Iterable[str]:
        try:
            users = client.usergroups_users_list(usergroup=group).get("users") or []
        except (SlackApiError, SlackClientError, OSError):
            metrics.record_slack_api_error("usergroups.users.list")
            raise
        return [str(u) for u in users]

    return members


@dataclass
class GpuBot:
    """The Bolt app and what it drives; `shutdown()` drains the pool."""

    app: App
    service: WalkService
    buttons: Buttons
    pool: ThreadPoolExecutor
    state: StateStore
    poster: SlackPoster
    cfg: Config
    slack_up: Callable[[], bool] = lambda: True
    alerts: AlertWebhook | None = None  # POST /alertmanager, when GPUBOT_ALERT_TOKEN is set
    sweeper: AlertSweeper | None = None  # closes stale incidents, with the alerts
    pending: set[Future[None]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def submit(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        walk_id: str | None = None,
        asker: tuple[str, str] | None = None,
    ) -> None:
        """Off the request path. The handlers say their own failures (in the thread, or to the
        asker); whatever still escapes them is told to `asker` (channel, user), so nobody waits
        on "walking…"."""

        def tell_asker(err: Exception) -> None:
            if asker is not None:  # `what` names the walk
                self.poster_quietly(*asker, f":x: {escape(what)} failed: {escape(unexpected(err))}")

        submit_job(
            self.pool, self.pending, self._lock, what, fn, *args, walk_id=walk_id, on_failure=tell_asker
        )

    def tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral answer, posted off the request path."""
        self.submit(f"answer to {user}", self.poster.ephemeral, channel, user, text)

    def poster_quietly(self, channel: str, user: str, text: str) -> None:
        """An ephemeral answer from a worker already off the request path; a failure is logged."""
        try:
            self.poster.ephemeral(channel, user, text)
        except Exception as err:
            log.error("could not answer %s in %s: %s", user, channel, err)

    def ready(self) -> tuple[bool, str]:
        """/readyz: the state store answers and the Slack connection is up."""
        try:
            self.state.ping()
        except StateUnavailable as err:
            return False, f"state store: {err}"
        if not self.slack_up():
            return False, "Slack: not connected"
        return True, "ready"

    def shutdown(self, wait: bool = True) -> None:
        if self.sweeper is not None:
            self.sweeper.stop()
        self.pool.shutdown(wait=wait, cancel_futures=not wait)


def submit_job(
    pool: ThreadPoolExecutor,
    pending: set[Future[None]],
    lock: threading.Lock,
    what: str,
    fn: Callable[..., Any],
    *args: Any,
    walk_id: str | None = None,
    on_failure: Callable[[Exception], None] | None = None,
) -> None:
    """Run off the request path (the bot's pool, or a gateway's), kept in `pending` until done for the
    drain at SIGTERM; a failure is logged with what it was (and its walk id), never lost, then
    handed to `on_failure`."""

    def run() -> None:
        # The pool's threads do not inherit the listener's context: the walk id is set here.
        with walk_scope(walk_id):
            try:
                fn(*args)
            except Exception as err:
                log.exception("%s failed", what)
                if on_failure is not None:
                    on_failure(err)

    def done(fut: Future[None]) -> None:
        with lock:
            pending.discard(fut)

    fut: Future[None] = pool.submit(run)
    with lock:
        pending.add(fut)
    fut.add_done_callback(done)


def _open_walk(sources: Sources, settings: Settings) -> Callable[[Target], WalkContext]:
    def open_walk(target: Target) -> WalkContext:
        if target.pod and target.namespace:
            return open_pod(sources.cluster, sources.telemetry, target.namespace, target.pod, settings)
        if target.node:
            return open_node(sources.cluster, sources.telemetry, target.node, settings)
        raise ValueError(f"a walk needs a pod or a node: {target}")

    return open_walk


def build_services(
    cfg: Config,
    sources: Sources,
    state: StateStore,
    poster: SlackPoster,
    client: WebClient,
    *,
    node_actions: NodeActions | None = None,
    observer: WalkObserver | None = None,
    claim_s: float | None = None,
) -> tuple[WalkService, Buttons]:
    """The walk service and the button handlers over these sources: the single process and a
    cluster's agent (bot/cluster/agent.py) run requests through exactly these."""
    settings = Settings(operator_namespace=cfg.operator_namespace)
    service = WalkService(
        state,
        poster,
        _open_walk(sources, settings),
        retention_s=cfg.state_retention_days * 86400 if cfg.state_retention_days else RETENTION_S,
        cluster_name=cfg.cluster_name,
        observer=LedgerObserver(observer or MetricsObserver(), walk_recorder(cfg, sources, bot_ledger(cfg))),
        claim_s=claim_s or lease_of(cfg),
    )
    operators = Operators(cfg.operators, cfg.operator_groups, group_members(client))
    buttons = Buttons(service, operators, node_actions or ClusterNodeActions(sources, cfg, state))
    return service, buttons


def alert_settings(cfg: Config) -> AlertSettings:
    """The GPUBOT_ALERT_* settings (a gateway hands them to the agents with each webhook's alerts)."""
    assert cfg.alert_channel is not None  # load_config requires it with GPUBOT_ALERT_TOKEN
    return AlertSettings(
        channel=cfg.alert_channel,
        rewalk_s=cfg.alert_rewalk_minutes * 60,
        max_threads_per_hour=cfg.alert_max_threads_per_hour,
        duplicate_s=cfg.alert_duplicate_seconds,
        stale_s=cfg.alert_stale_hours * 3600,
    )


LISTENER_THREADS = 64


def bolt_app(cfg: Config, client: WebClient | None, token_verification: bool = True) -> App:
    """The Bolt app of the bot or a gateway (bot/cluster/gateway.py), before any listener."""
    return App(
        client=client or WebClient(token=cfg.slack_bot_token, base_url=cfg.slack_api_url),
        signing_secret=cfg.slack_signing_secret,
        process_before_response=False,
        # Bolt's default is 5 threads: a sixth command in flight (a burst while Redis is slow, each ack
        # held up to its 2 s budget) waited for one and missed Slack's 3 s. More than the HTTP server's.
        listener_executor=ThreadPoolExecutor(max_workers=LISTENER_THREADS, thread_name_prefix="gpubot-bolt"),
        token_verification_enabled=token_verification,
        # Socket Mode has no signatures to check; HTTP mode always has a signing secret (load_config).
        request_verification_enabled=cfg.slack_signing_secret is not None,
        # Else Bolt copies the root level: at DEBUG it would log request and response bodies.
        logger=logging.getLogger("slack_bolt.App"),
    )


def build_app(
    cfg: Config,
    sources: Sources,
    state: StateStore,
    poster: SlackPoster,
    *,
    client: WebClient | None = None,
    node_actions: NodeActions | None = None,
    workers: int | None = None,
    token_verification: bool = True,
    observer: WalkObserver | None = None,
) -> GpuBot:
    """The Bolt app with its listeners; nothing is served until bot/slack/run.py starts a transport."""
    app = bolt_app(cfg, client, token_verification)
    service, buttons = build_services(
        cfg, sources, state, poster, app.client, node_actions=node_actions, observer=observer
    )
    pool = ThreadPoolExecutor(max_workers=workers or cfg.workers, thread_name_prefix="gpubot-walk")
    bot = GpuBot(app, service, buttons, pool, state, poster, cfg)
    if cfg.alert_token and cfg.alert_channel:
        alerts = AlertService(
            state, service, ClusterDirectory(sources.cluster), alert_settings(cfg), observer=MetricsObserver()
        )
        bot.alerts = AlertWebhook(
            LedgerReceiver(alerts, bot_ledger(cfg), bot.submit),
            cfg.alert_token,
            bot.submit,
            max_body_mib=cfg.alert_max_body_mib,
        )
        bot.sweeper = AlertSweeper(alerts, bot.submit)

    @app.command("/gpu")
    def on_gpu(ack: Ack, command: dict[str, Any]) -> None:
        try:
            cmd = parse_command(command.get("text"))
        except CommandError as err:
            ack(text=mask_text(usage_reply(str(err))), response_type="ephemeral")
            return
        channel, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
        if (now := answer_now(cmd, cfg.cluster_name)) is not None:
            ack(text=now, response_type="ephemeral")
        elif isinstance(cmd, Why):
            ack(text=mask_text(f"walking the layers for {escape(cmd.label)}…"), response_type="ephemeral")
            walk_id = new_walk_id()  # chosen here so even a crash of the walk is logged under it
            bot.submit(
                f"walk {walk_id} of {cmd.label} for {user}",
                functools.partial(
                    service.start,
                    channel,
                    user,
                    Target(namespace=cmd.namespace, pod=cmd.pod),
                    walk_id=walk_id,
                ),
                walk_id=walk_id,
                asker=(channel, user),
            )
        elif isinstance(cmd, Digest):
            ack(text="posting the GPU fleet digest in this channel…", response_type="ephemeral")
            bot.submit("the digest", post_digest_now, bot, sources, channel, user, asker=(channel, user))
        elif isinstance(cmd, Node):
            ack(text=f"reading the ledger of {escape(cmd.node)}…", response_type="ephemeral")
            ledger = bot_ledger(cfg)
            args = (cfg, sources, ledger, poster, channel, user, cmd.node)
            bot.submit(f"ledger of {cmd.node}", post_node_ledger, *args, asker=(channel, user))

    register_diagnostics(app, bot.submit, cfg, sources, state, poster, group_members(app.client))

    @app.action(BUTTON_ACTIONS)
    def on_button(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        click = click_from_payload(body)  # its shape was checked by bot/slack/gate.py on either transport
        bot.submit(
            f"{click.action_id} by {click.user} on walk {click.value}",
            buttons.handle,
            click,
            walk_id=walk_id_of(click),
            asker=(click.channel, click.user),
        )

    return bot


def post_digest_now(bot: GpuBot, sources: Sources, channel: str, user: str | None) -> None:
    """`/gpu digest`: the digest, now, in this channel (with its chart when it can be drawn).

    What could not be done is told to the user who asked (ephemeral), not only logged."""
    import time

    from bot.slack.digest_post import DigestFailed, publish_digest
    from bot.slack.ledger_open import ledger_digest
    from bot.slack.scheduler import digest_day
    from handlers.ports import PostFailed

    def collect() -> tuple[fleet.Digest, Telemetry]:
        digest = fleet.collect_digest(
            sources.cluster, sources.telemetry, operator_namespace=bot.cfg.operator_namespace
        )
        return ledger_digest(bot.cfg, sources.cluster, sources.telemetry, digest), sources.telemetry

    try:
        published = publish_digest(
            collect,
            bot.poster,
            channel,
            day=digest_day(time.time(), bot.cfg.tz),
            store=bot.state,
            retention_s=bot.service.retention_s,
            count_run=False,  # on demand: not the daily run gpubot_digest_runs_total counts
        )
    except DigestFailed as err:
        log.error("digest for %s in %s was not posted: %s", user, channel, err.reason)
        tell = f":x: the GPU fleet digest was not posted: {escape(err.reason)}"
    else:
        if not published.posted.problems:
            return
        tell = ":warning: the digest posted, but not everything could be attached: " + escape(
            "; ".join(published.posted.problems)
        )
    if user:
        try:
            bot.poster.ephemeral(channel, user, tell)
        except PostFailed as err:
            log.error("could not tell %s in %s about the digest: %s", user, channel, err.reason)
