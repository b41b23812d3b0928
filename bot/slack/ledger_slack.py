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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bot.actions.diag import JobClient, gpu_uuids, plan, record, run
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
from layers.diagjob import DiagRefused, confirmation
from layers.sources import SourceError

log = logging.getLogger("gpubot.ledger")
DIAG_LEASE = "diag:running:{}"
LEASE_S = 60.0  # held at most this long, renewed while the Job runs: a dead holder blocks no one for long


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
            return "ignored"
        if value.level >= 3 and value.confirmed < 2:
            msg = second_confirmation(value.node)
            self.poster.ephemeral(click.channel, click.user, msg.text, msg.blocks)
            return "confirm"
        if self.sources.offline:
            self.poster.ephemeral(
                click.channel,
                click.user,
                ":no_entry: this bot reads a scenario or bundle: it cannot run a Job",
            )
            return "offline"
        jobs = live_jobs(self.sources)
        try:
            p = plan(
                self.sources.cluster,
                jobs,
                value.node,
                value.level,
                namespace=self.namespace,
                image=self.cfg.diag_image,
                requested_by=click.user,
                confirmed=value.confirmed,
                operator_namespace=self.cfg.operator_namespace,
                hostengine_setting=self.cfg.diag_hostengine,
            )
        except (DiagRefused, SourceError) as err:
            self.poster.post(
                click.channel,
                f":no_entry: diagnostics on *{escape(value.node)}* refused: {escape(str(err))}",
                thread_ts=where,
            )
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

    def _run(
        self, click: Click, p: Any, where: str | None, jobs: JobClient, renew: Callable[[str], None]
    ) -> str:
        node, job = p.manifest["metadata"]["annotations"]["gpubot/diag-node"], p.manifest["metadata"]["name"]
        started = diag_started(
            node, p.level, job, click.user, confirmation(node, p.level, p.gpus, p.hostengine)
        )
        ref = self.poster.post(click.channel, started, thread_ts=where)
        where = where or ref.ts
        out = run(self.sources.cluster, jobs, p, poll_s=self.poll_s, progress=renew)
        uuids = gpu_uuids(self.sources.telemetry, node)
        names = {i: f"GPU {i} ({u})" for i, u in uuids.items()}
        msg = diag_result_message(node, p.level, job, out.report, out.failure, names, out.notes)
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
        record(self.ledger, out, uuids, click.user, self.sources.telemetry.now())
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
