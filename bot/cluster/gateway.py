"""`gpubot serve --role gateway`: the Slack side of many clusters, with no Kubernetes access at all.

It holds the Slack connection (Socket Mode or HTTP), acknowledges within
Slack's 3 s, parses and validates every command and click, and queues each on
its cluster's stream (bot/cluster/streams.py); the cluster's agents run it and
post to Slack themselves. Nothing here imports the kubernetes client or reads
a kubeconfig.

- `/gpu why [CLUSTER/]NS/POD`: routed (bot/cluster/routing.py); the walk id is
  chosen here, so the walk can be taken over by another agent and still be one
  thread. A silent cluster's request is answered at once and still queued.
- A click goes to the cluster its walk records (or, for a digest row, the
  cluster its digest part names), whoever clicks and wherever.
- `/gpu clusters`: the clusters, their agents' version and last heartbeat.
- `/gpu digest` and the daily digest: one root here, one part per cluster from
  its agents (bot/cluster/digest_root.py).
- POST /alertmanager (with GPUBOT_ALERT_TOKEN): each alert to its cluster's
  agent by its `cluster` label (bot/cluster/alert_forward.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.cluster import acks
from bot.cluster.acks import ACK_BUDGET_S, QUEUE_DOWN, QUEUE_LATER, QUEUE_PATIENCE_S, Budget, Queued
from bot.cluster.digest_root import DigestRoots
from bot.cluster.kinds import click_request, why_request
from bot.cluster.node_kinds import diag_cluster, diag_request, node_request
from bot.cluster.routing import NoRoute, Route, clusters_text, route
from bot.cluster.streams import ClusterStreams, Request, StreamsUnavailable
from bot.ops.config import Config
from bot.ops.version import gpubot_version
from bot.slack.app import submit_job
from bot.slack.replay_record import BoundedReplayRecord
from handlers.clicks import Click, click_from_payload, click_problem, clicker
from handlers.commands import (
    USAGE,
    Clusters,
    CommandError,
    Digest,
    Help,
    Node,
    Why,
    parse_command,
    usage_reply,
)
from handlers.digest import cluster_of, parse_button_value
from handlers.escape import escape
from handlers.ledger_blocks import RUN_DIAGNOSTICS
from handlers.ports import SlackPoster, StateStore, StateUnavailable
from handlers.walkstate import Walk, new_walk_id, walk_key

log = logging.getLogger("gpubot.gateway")
T = TypeVar("T")
_ME = f"{socket.gethostname()}-{os.getpid()}"


class Unroutable(Exception):
    """A click that belongs to no cluster we can name; the message is said to the clicker."""


@dataclass
class Gateway:
    """The Bolt app and what it queues to; `ready()` and `pending` for bot/serve.py."""

    app: App
    streams: ClusterStreams
    state: StateStore
    poster: SlackPoster
    cfg: Config
    roots: DigestRoots
    pool: ThreadPoolExecutor
    version: str = field(default_factory=gpubot_version)
    clock: Callable[[], float] = time.time
    slack_up: Callable[[], bool] = lambda: True
    # How long a command or click keeps trying while Redis switches master (0: single mode, where an
    # unreachable Redis is said in the ack at once).
    patience_s: float = 0.0
    alerts: Any = None  # POST /alertmanager (bot/cluster/alert_forward.py), with GPUBOT_ALERT_TOKEN
    pending: set[Future[None]] = field(default_factory=set)
    # The command acks' Redis work, bounded by ACK_BUDGET_S (a stuck call keeps its thread, not the ack).
    ack_pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=8, thread_name_prefix="gpubot-ack")
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ready(self) -> tuple[bool, str]:
        """Ready when Redis takes its writes, not only its PING: an ACL user without XADD, a replica
        that became read-only, queue nothing."""
        try:
            self.state.ping()
            self.state.set(f"readyz:gateway:{_ME}", {"at": time.time()}, 60)
            self.streams.clusters()
            self.streams.check_gateway_writes()
        except (StateUnavailable, StreamsUnavailable) as err:
            return False, f"Redis: {err}"
        if not self.slack_up():
            return False, "Slack: not connected"
        return True, "ready"

    def submit(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        submit_job(self.pool, self.pending, self._lock, what, fn, *args)

    def tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral answer, posted off the request path (bot/slack/slackroute.py's refusals)."""
        self.submit(f"answer to {user}", self.poster.ephemeral, channel, user, text)

    def shutdown(self, wait: bool = True) -> None:
        self.roots.cancel()
        self.pool.shutdown(wait=wait, cancel_futures=not wait)
        self.ack_pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(self.state, BoundedReplayRecord):
            self.state.shutdown()

    # --- commands ---------------------------------------------------------------------------

    def route(self, asked: str | None) -> Route:
        return self._route_now(asked)[0]

    def _route_now(self, asked: str | None) -> tuple[Route, float, float]:
        """The route, Redis's time and when (time.monotonic) it was read."""
        clusters, now = self.streams.clusters(), self.clock()
        return route(asked, clusters, now, self.cfg.agent_silent_s), now, time.monotonic()

    def why(self, cmd: Why, channel: str, user: str) -> str:
        """Queue the walk; the ephemeral answer (the ack's text), within ACK_BUDGET_S whatever Redis does."""
        doing = f"walking the layers for {escape(cmd.label)}"
        return self._command(doing, lambda late: self._why(cmd, channel, user, late), channel, user)

    def node(self, cmd: Node, channel: str, user: str) -> str:
        """Queue `/gpu node` on the node's cluster: its agent reads the ledger and posts it here."""
        doing = f"reading the ledger of {escape(cmd.label)}"
        return self._command(doing, lambda late: self._node(cmd, channel, user, late), channel, user)

    def _command(self, doing: str, work: Callable[[Budget], Queued], channel: str, user: str) -> str:
        if self.patience_s <= 0:
            return self.within_budget(lambda late: work(late).text)  # type: ignore[arg-type]
        # Sentinel or Cluster: a master switch is expected and short. Past the budget the ack says the
        # request is not queued yet; the work goes on for patience_s and says once if it fails after all.
        fut = self.ack_pool.submit(work, Budget(self.patience_s))
        try:
            return fut.result(timeout=ACK_BUDGET_S).text
        except FutureTimeout:
            fut.add_done_callback(lambda done: self._queued_late(done, channel, user))
            return QUEUE_LATER.format(doing=doing, s=self.patience_s)

    def _queued_late(self, done: Future[Queued], channel: str, user: str) -> None:
        """The end of a request acknowledged before Redis answered: nothing to say once it is queued
        (its root follows), one ephemeral line when it could not be."""
        try:
            answer = done.result()
            if not answer.queued:
                self.tell(channel, user, answer.text)
        except Exception as err:  # a bug, or shutting down: logged, never a silent drop
            log.error("request of %s not queued, and not told: %s", user, err)

    def within_budget(self, answer: Callable[[threading.Event], str]) -> str:
        """`answer(late)` if it is ready within ACK_BUDGET_S, else "could not be queued": Slack drops
        an ack after 3 s, and a Redis that is switching master or unreachable can take longer than
        that. `late` is set once the budget is spent, so the work queues nothing after it."""
        late = Budget(ACK_BUDGET_S)
        fut = self.ack_pool.submit(answer, late)
        try:
            return fut.result(timeout=ACK_BUDGET_S)
        except FutureTimeout:
            late.set()
            return QUEUE_DOWN.format(f"Redis did not answer within {ACK_BUDGET_S:g} s")

    def _patiently(self, call: Callable[[], T]) -> T:
        """`call()`, tried again for patience_s while Redis refuses it (a master switch), else once."""
        deadline = time.monotonic() + self.patience_s
        wait = 0.1
        while True:
            try:
                return call()
            except (StreamsUnavailable, StateUnavailable):
                if time.monotonic() + wait > deadline:
                    raise
                time.sleep(wait)
                wait = min(1.0, wait * 2)

    def _why(self, cmd: Why, channel: str, user: str, late: Budget) -> Queued:
        walk_id = new_walk_id()
        request = why_request(walk_id, cmd.namespace, cmd.pod, channel, user, self.version)
        got = self._route_and_queue(cmd.cluster, request, late)
        if isinstance(got, Queued):
            return got
        log.info("walk %s of %s queued for cluster %s by %s", walk_id, cmd.label, got.cluster, user)
        return self._queued(f"walking the layers for {escape(cmd.label)}", got)

    def _node(self, cmd: Node, channel: str, user: str, late: Budget) -> Queued:
        got = self._route_and_queue(cmd.cluster, node_request(cmd.node, channel, user, self.version), late)
        if isinstance(got, Queued):
            return got
        log.info("ledger of %s queued for cluster %s by %s", cmd.node, got.cluster, user)
        return self._queued(f"reading the ledger of {escape(cmd.node)}", got)

    def _queued(self, doing: str, where: Route) -> Queued:
        text = f"{doing} on cluster `{escape(where.cluster)}`…"
        note = where.note()
        return Queued(f"{text}\n{note}" if note else text, True)

    def _route_and_queue(self, cluster: str | None, request: Request, late: Budget) -> Route | Queued:
        """The route the request was queued on, or the answer saying why it was not. The request says
        by when (Redis's clock) it must be queued: an XADD a stalled Redis takes after the ack said
        "could not be queued" is refused by the agents, never run (bot/cluster/agent.py)."""
        try:
            where, now, read_at = self._patiently(lambda: self._route_now(cluster))
            if late.is_set() or time.monotonic() > late.until - acks.QUEUE_MARGIN_S:
                return Queued(QUEUE_DOWN.format("Redis did not answer in time"), False)
            by = late.queue_by(now, read_at)
            request = replace(request, body={**request.body, "queue_by": round(by, 3)})
            entry = self.streams.queue(
                where.cluster,
                request,
                patience_s=max(0.0, late.until - acks.QUEUE_MARGIN_S - time.monotonic()),
            )
            if late.is_set() and not request.late(entry):  # taken in time, answered too late: say so
                reply = request.reply
                self.tell(str(reply.get("channel")), str(reply.get("user")), acks.QUEUED_AFTER_ALL)
        except NoRoute as err:
            return Queued(str(err), False)
        except StreamsUnavailable as err:
            return Queued(QUEUE_DOWN.format(escape(str(err))), False)
        return where

    def clusters(self) -> str:
        def answer(_late: threading.Event) -> str:
            try:
                return clusters_text(self.streams.clusters(), self.clock(), self.cfg.agent_silent_s)
            except StreamsUnavailable as err:
                return f":x: the clusters could not be read: {escape(str(err))}"

        return self.within_budget(answer)

    def queue(self, cluster: str, request: Request) -> str:
        # Signed once and sent again while the master switches; a copy that landed is not added twice.
        return self.streams.queue(cluster, request, patience_s=self.patience_s)

    # --- clicks ------------------------------------------------------------------------------

    def click(self, click: Click) -> None:
        """Queue a click on its walk's cluster; whatever stops it is told to the clicker."""
        try:
            cluster, thread = self._patiently(lambda: self._click_target(click))
            where = self._patiently(lambda: self.route(cluster))
            self.queue(where.cluster, click_request(click, thread, self.version))
        except (Unroutable, NoRoute) as err:
            self._tell(click, str(err))
            return
        except (StreamsUnavailable, StateUnavailable) as err:
            self._tell(click, QUEUE_DOWN.format(escape(str(err))))
            return
        log.info("%s by %s queued for cluster %s", click.action_id, click.user, where.cluster)
        note = where.note()
        if note:
            self._tell(click, note)

    def diag_click(self, click: Click) -> None:
        """A Run diagnostics click, to the cluster its button names (an agent posted it so)."""
        try:
            cluster, _value = diag_cluster(click.value)
            where = self._patiently(lambda: self.route(cluster))
            self.queue(where.cluster, diag_request(click, self.version))
        except ValueError:
            self._tell(click, "this Run diagnostics button is not understood, so nothing was done.")
            return
        except NoRoute as err:
            self._tell(click, str(err))
            return
        except StreamsUnavailable as err:
            self._tell(click, QUEUE_DOWN.format(escape(str(err))))
            return
        log.info("run diagnostics by %s queued for cluster %s", click.user, where.cluster)
        if note := where.note():
            self._tell(click, note)

    def _click_target(self, click: Click) -> tuple[str | None, str | None]:
        """(the cluster, the thread to answer in) of a clicked button."""
        if "|" in click.value:  # a digest row: `<digest id>|<node>`
            try:
                did, _node = parse_button_value(click.value)
            except ValueError as err:
                raise Unroutable(f"this button is not understood: {escape(str(err))}") from None
            return cluster_of(did), click.thread_ts or click.message_ts
        raw = self.state.get(walk_key(click.value[:64])) if click.value else None
        if raw is None:
            raise Unroutable(
                f":hourglass: this walk (`{escape(click.value[:64])}`) is no longer known: run /gpu why again."
            )
        walk = Walk.from_dict(raw)
        return walk.cluster, walk.thread

    def _tell(self, click: Click, text: str) -> None:
        try:
            self.poster.ephemeral(click.channel, click.user, text)
        except Exception as err:
            log.error("could not answer %s about %s: %s", click.user, click.action_id, err)


def build_gateway(
    cfg: Config,
    state: StateStore,
    streams: ClusterStreams,
    poster: SlackPoster,
    *,
    client: WebClient | None = None,
    token_verification: bool = True,
    button_actions: Any = None,
) -> Gateway:
    """The gateway's Bolt app; nothing is served until a transport runs it (bot/serve.py)."""
    from bot.slack.app import BUTTON_ACTIONS, bolt_app

    app = bolt_app(cfg, client, token_verification)
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gpubot-gateway")
    roots = DigestRoots(cfg, state, streams, poster, gpubot_version())
    # Heartbeats are in Redis's clock (TIME): read against it, never this machine's.
    patience = QUEUE_PATIENCE_S if cfg.redis_mode != "single" else 0.0
    # The Slack gate's replay record (gw.state's only set-if-absent) must leave the ack its budget.
    front_state = BoundedReplayRecord(state) if patience else state
    gw = Gateway(app, streams, front_state, poster, cfg, roots, pool, clock=streams.now, patience_s=patience)
    if cfg.alert_token and cfg.alert_channel:
        from bot.cluster.alert_forward import AlertForwarder
        from bot.slack.alert_webhook import AlertWebhook
        from bot.slack.app import MetricsObserver, alert_settings

        forwarder = AlertForwarder(
            streams,
            state,
            poster,
            alert_settings(cfg),
            gw.version,
            MetricsObserver(),
            gw.submit,
            silent_s=cfg.agent_silent_s,
            clock=lambda: gw.clock(),
        )
        gw.alerts = AlertWebhook(forwarder, cfg.alert_token, gw.submit, max_body_mib=cfg.alert_max_body_mib)

    @app.command("/gpu")
    def on_gpu(ack: Ack, command: dict[str, Any]) -> None:
        try:
            cmd = parse_command(command.get("text"))
        except CommandError as err:
            ack(text=usage_reply(str(err)), response_type="ephemeral")
            return
        channel, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
        if isinstance(cmd, Help):
            ack(text=USAGE, response_type="ephemeral")
        elif isinstance(cmd, Clusters):
            ack(text=gw.clusters(), response_type="ephemeral")
        elif isinstance(cmd, Why):
            ack(text=gw.why(cmd, channel, user), response_type="ephemeral")
        elif isinstance(cmd, Digest):
            ack(
                text="posting the GPU fleet digest of every cluster in this channel…",
                response_type="ephemeral",
            )
            run = "now-" + uuid.uuid4().hex[:12]
            gw.submit("digest", roots.post_now, channel, user, run)
        elif isinstance(cmd, Node):
            ack(text=gw.node(cmd, channel, user), response_type="ephemeral")

    @app.action(RUN_DIAGNOSTICS)
    def on_run_diagnostics(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        if (why := click_problem(body)) is not None:
            if (who := clicker(body)) is not None:
                gw.tell(*who, f":warning: this click could not be read ({why}), so nothing was done.")
            return
        gw.diag_click(click_from_payload(body))

    @app.action(button_actions or BUTTON_ACTIONS)
    def on_button(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        if (why := click_problem(body)) is not None:  # nothing unreadable is queued for an agent
            if (who := clicker(body)) is not None:
                gw.tell(*who, f":warning: this click could not be read ({why}), so nothing was done.")
            log.warning("refused a click: %s", why)
            return
        gw.click(click_from_payload(body))

    return gw
