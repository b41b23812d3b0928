"""`/gpu node NODE` and the Run diagnostics button, in Slack.

`/gpu node` posts the node's ledger (handlers/ledger_blocks.py) with its timeline picture
(bot/slack/ledger_chart.py). Run diagnostics (operators only, GPUBOT_DIAG_ENABLED=true) plans the
Job (refused, saying why, by layers/diagjob.py), says it started in the thread, runs it
(bot/actions/diag.py) and posts the result with dcgmi's raw JSON attached; the result goes into
the ledger. One diagnostic per node at a time across replicas: a lease in the state store, on
top of the refusal that sees a Job already running there.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bot.actions.diag import DiagPlan, JobClient, plan, record, run
from bot.ledger.service import node_report
from bot.ledger.store import Ledger
from bot.ops.config import Config
from bot.sources.opener import Sources
from handlers.clicks import Click, click_from_payload
from handlers.escape import escape
from handlers.ledger_blocks import (
    RUN_DIAGNOSTICS,
    DiagValue,
    diag_result_message,
    diag_started,
    node_ledger_message,
    second_confirmation,
)
from handlers.operators import Operators
from handlers.ports import Attachment, PostFailed, SlackPoster, StateStore
from layers.diagjob import DiagRefused, confirmation, level_refusal
from layers.sources import SourceError

log = logging.getLogger("gpubot.ledger")
DIAG_LEASE = "diag:running:{}"
LEASE_S = 60.0  # held at most this long, renewed while the Job runs: a dead holder blocks no one for long
CONFIRM_KEY = "diag:confirm:{}"  # level 3's second confirmation, held by gpubot (never in a button)
CONFIRM_S = 600.0
NOT_UNDERSTOOD = "this Run diagnostics button is not understood, so nothing was done."
CONFIRMATION_CLAIMED = (
    ":no_entry: level 3 runs only from the second confirmation gpubot sends you: this button claims one "
    "gpubot did not give, so nothing was done. Click Run level 3 again to be asked."
)
CONFIRMATION_UNKNOWN = (
    ":no_entry: gpubot holds no such level 3 confirmation for you (each is yours alone, used once, "
    "for 10 minutes), so nothing was done. Click Run level 3 again to be asked."
)


def post_node_ledger(
    cfg: Config, sources: Sources, ledger: Ledger, poster: SlackPoster, channel: str, user: str, node: str
) -> None:
    """The ledger of one node in the channel, its picture attached; a failure told to the asker."""
    try:
        rep = node_report(cfg, sources.cluster, sources.telemetry, ledger, node, record=not sources.offline)
    except SourceError as err:
        poster.ephemeral(
            channel, user, f":x: the ledger of `{escape(node)}` could not be read: {escape(str(err))}"
        )
        return
    from bot.slack.ledger_chart import (
        timeline_png,
    )  # matplotlib: loaded on the first `/gpu node`, not at start

    data = rep.to_dict()
    png = timeline_png(data, rep.now)
    name = f"ledger-{node}.png" if png else None
    msg = node_ledger_message(data, name)
    ref = poster.post(channel, msg.text, msg.blocks)
    if png and name:
        try:
            poster.upload(channel, Attachment(name, png, f"{node}: {rep.days} days"), thread_ts=ref.ts)
        except PostFailed as err:
            poster.post(
                channel, f"the timeline could not be attached: {escape(err.reason)}", thread_ts=ref.ts
            )


def live_jobs(sources: Sources) -> JobClient:
    """The Job client of a live cluster's sources (KubeCluster's own configuration)."""
    from bot.actions.diag_kube import KubeJobs

    cluster: Any = sources.cluster
    return KubeJobs(cluster.api_client, getattr(cluster, "server", cluster.source))


@dataclass
class DiagButtons:
    cfg: Config
    sources: Sources
    ledger: Ledger
    poster: SlackPoster
    operators: Operators
    state: StateStore
    namespace: str
    poll_s: float = 2.0

    def handle(self, click: Click) -> str:
        """Run what the click asks for; the outcome, for the logs and tests."""
        where = click.thread_ts or click.message_ts
        if not self.operators.allows(click.user):
            self.poster.ephemeral(
                click.channel,
                click.user,
                ":no_entry: Run diagnostics is for operators only (GPUBOT_OPERATORS, GPUBOT_OPERATOR_GROUPS).",
            )
            return "refused"
        if not self.cfg.diag_enabled:
            self.poster.ephemeral(
                click.channel,
                click.user,
                ":no_entry: diagnostics are off (GPUBOT_DIAG_ENABLED=true turns them on, with the chart's diagnostics.enabled).",
            )
            return "off"
        try:
            value = DiagValue.decode(click.value)
        except ValueError:
            self.poster.ephemeral(click.channel, click.user, NOT_UNDERSTOOD)
            return "ignored"
        # Refusals that need no cluster read come before any (issue 28: no Job is listed for them).
        by_level = level_refusal(value.level)
        if by_level is not None:
            self.poster.ephemeral(
                click.channel,
                click.user,
                f":no_entry: diagnostics on *{escape(value.node)}* refused: {escape(by_level)}",
            )
            return "refused"
        confirmed = 1
        if value.level >= 3:
            step = self._second_confirmation(click, value)
            if step != "confirmed":
                return step
            confirmed = 2
        if self.sources.offline:
            self.poster.ephemeral(
                click.channel,
                click.user,
                ":no_entry: this bot reads a scenario or bundle: it cannot run a Job",
            )
            return "offline"
        jobs = live_jobs(self.sources)
        p = self._plan(click, value, confirmed, jobs)
        if p is None:
            return "refused"
        lease, holder = DIAG_LEASE.format(value.node), f"{click.user}:{p.manifest['metadata']['name']}"
        if not self.state.set_if_absent(lease, holder, LEASE_S):
            self.poster.post(
                click.channel,
                f":hourglass: a diagnostic already runs on *{escape(value.node)}*",
                thread_ts=where,
            )
            return "busy"

        def renew(_: str) -> None:
            self.state.extend(lease, holder, LEASE_S)

        try:
            return self._run(click, p, where, jobs, renew)
        finally:
            self.state.extend(lease, holder, 0.001)  # released if still ours (compare-and-expire)

    def _plan(
        self, click: Click, value: DiagValue, confirmed: int, jobs: JobClient | None
    ) -> DiagPlan | None:
        """The Job for the click (None: refused, said in the thread)."""
        try:
            return plan(
                self.sources.cluster,
                jobs,
                value.node,
                value.level,
                namespace=self.namespace,
                image=self.cfg.diag_image,
                requested_by=click.user,
                confirmed=confirmed,
                operator_namespace=self.cfg.operator_namespace,
                hostengine_setting=self.cfg.diag_hostengine,
                telemetry=self.sources.telemetry,
            )
        except (DiagRefused, SourceError) as err:
            self.poster.post(
                click.channel,
                f":no_entry: diagnostics on *{escape(value.node)}* refused: {escape(str(err))}",
                thread_ts=click.thread_ts or click.message_ts,
            )
            return None

    def _second_confirmation(self, click: Click, value: DiagValue) -> str:
        """Level 3: the first click gets a confirmation gpubot holds in the state store (for this
        operator, node and cluster, once, for CONFIRM_S); only its button runs the level. A value
        that claims the second confirmation itself (`…|3|2`) is refused."""
        holder = f"{click.user}|{self.cfg.cluster_name or ''}|{value.node}|{value.level}"
        if value.token:
            # Held for this very holder (compare), then used once: the first to mark it used wins.
            key = CONFIRM_KEY.format(value.token)
            if self.state.extend(key, holder, CONFIRM_S) and self.state.set_if_absent(
                key + ":used", holder, CONFIRM_S
            ):
                self.state.delete(key)
                return "confirmed"
            self.poster.ephemeral(click.channel, click.user, CONFIRMATION_UNKNOWN)
            return "refused"
        if value.confirmed >= 2:
            self.poster.ephemeral(click.channel, click.user, CONFIRMATION_CLAIMED)
            return "refused"
        # What level 3 would take and test (or why it cannot run) is said before it is confirmed.
        preview = self._plan(click, value, 2, None if self.sources.offline else live_jobs(self.sources))
        if preview is None:
            return "refused"
        said = confirmation(value.node, value.level, preview.ask, preview.hostengine)
        token = secrets.token_hex(16)
        self.state.set(CONFIRM_KEY.format(token), holder, CONFIRM_S)
        msg = second_confirmation(value.node, token, said)
        self.poster.ephemeral(click.channel, click.user, msg.text, msg.blocks)
        return "confirm"

    def _run(
        self, click: Click, p: Any, where: str | None, jobs: JobClient, renew: Callable[[str], None]
    ) -> str:
        node, job = p.manifest["metadata"]["annotations"]["gpubot/diag-node"], p.manifest["metadata"]["name"]
        started = diag_started(
            node, p.level, job, click.user, confirmation(node, p.level, p.ask, p.hostengine)
        )
        ref = self.poster.post(click.channel, started, thread_ts=where)
        where = where or ref.ts
        out = run(self.sources.cluster, jobs, p, poll_s=self.poll_s, progress=renew)
        msg = diag_result_message(
            node, p.level, job, out.report, out.failure, out.tested, out.notes, out.untested
        )
        self.poster.post(click.channel, msg.text, msg.blocks, thread_ts=where)
        if out.raw:
            try:
                self.poster.upload(
                    click.channel,
                    Attachment(f"dcgmi-diag-{node}-r{p.level}.json", out.raw, "dcgmi diag -j"),
                    thread_ts=where,
                )
            except PostFailed as err:
                log.error("diagnostics on %s: the JSON could not be attached: %s", node, err.reason)
        record(self.ledger, out, click.user, self.sources.telemetry.now())
        return "done" if out.report is not None else "failed"


def register_diagnostics(
    app: Any,
    submit: Callable[..., None],
    cfg: Config,
    sources: Sources,
    state: StateStore,
    poster: SlackPoster,
    members: Callable[[str], Iterable[str]],
) -> DiagButtons:
    """The Run diagnostics button's listener on the Bolt app (acknowledged at once, run off the request path)."""
    from bot.actions.diag import own_namespace
    from bot.slack.ledger_open import bot_ledger

    operators = Operators(cfg.operators, cfg.operator_groups, members)
    diag = DiagButtons(
        cfg, sources, bot_ledger(cfg), poster, operators, state, own_namespace(cfg.diag_namespace)
    )

    @app.action(RUN_DIAGNOSTICS)
    def on_run_diagnostics(ack: Callable[[], None], body: dict[str, Any]) -> None:
        ack()
        click = click_from_payload(body)
        submit(
            f"diagnostics by {click.user}: {click.value[:80]}",
            diag.handle,
            click,
            asker=(click.channel, click.user),
        )

    return diag
