"""The request kinds: what the gateway queues (`*_request`) and how an agent runs each (`agent_handlers`).

A request's body is plain JSON. Each carries `reply`: the channel, user and
thread where what became of it is said (a poison entry, an unknown kind).

- `why`: `/gpu why` for a pod. The walk id is chosen by the gateway, so a
  walk taken over after its agent died resumes its own thread.
- `click`: a button click, as bot/slack/app.py hands it to the button handlers.
- `digest_part`: this cluster's part of a digest, under the root the gateway
  posted; posted once per run and cluster however many agents take it.
- `alerts`: the alerts of one Alertmanager webhook that concern this cluster
  (bot/cluster/alert_forward.py), with the gateway's alert settings: the agent
  records them and brings their incident threads up to date, as the single
  process does on POST /alertmanager (handlers/alerts.py).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec.structs

from bot.cluster.streams import Request
from handlers.alert_payload import PayloadError, batch_from_dict
from handlers.alerts import AlertService, AlertSettings
from handlers.buttons import Buttons
from handlers.clicks import Click
from handlers.ports import StateStore
from handlers.walks import WalkService
from handlers.walkstate import WalkGone
from layers.facts.target import BadTarget, check_namespace, check_object_name
from layers.findings import Target

log = logging.getLogger("gpubot.agent")

WHY = "why"
CLICK = "click"
DIGEST_PART = "digest_part"
ALERTS = "alerts"
PART_KEY = "digest:part:{}:{}"  # run, cluster: set once the part is posted
PART_TTL_S = 3 * 86400


# Set by the agent while it runs an entry delivered before (its first agent died, or it failed).
_taken_over: contextvars.ContextVar[bool] = contextvars.ContextVar("gpubot_taken_over", default=False)


@contextmanager
def delivery(deliveries: int) -> Iterator[None]:
    token = _taken_over.set(deliveries > 1)
    try:
        yield
    finally:
        _taken_over.reset(token)


class BadRequest(ValueError):
    """The body is not what its kind needs: buried at once, never retried."""


class PartBusy(RuntimeError):
    """Another agent of the cluster is posting this digest part right now: leave the entry pending."""


# --- the gateway's side -----------------------------------------------------------------------


def why_request(walk_id: str, namespace: str, pod: str, channel: str, user: str, version: str) -> Request:
    return Request(
        WHY,
        {"walk_id": walk_id, "namespace": namespace, "pod": pod, "reply": {"channel": channel, "user": user}},
        sender_version=version,
    )


def click_request(click: Click, thread_ts: str | None, version: str) -> Request:
    reply = {"channel": click.channel, "user": click.user, "thread_ts": thread_ts}
    return Request(CLICK, {"click": msgspec.structs.asdict(click), "reply": reply}, sender_version=version)


def digest_part_request(run: str, day: str, channel: str, thread_ts: str, version: str) -> Request:
    body = {"run": run, "day": day, "channel": channel, "thread_ts": thread_ts}
    return Request(
        DIGEST_PART, {**body, "reply": {"channel": channel, "thread_ts": thread_ts}}, sender_version=version
    )


def alerts_request(payload: dict[str, Any], settings: AlertSettings, version: str) -> Request:
    """`payload`: an Alertmanager v4 payload holding only this cluster's alerts."""
    body = {
        "payload": payload,
        "settings": msgspec.structs.asdict(settings),
        "reply": {"channel": settings.channel},
    }
    return Request(ALERTS, body, sender_version=version)


# --- the agent's side ----------------------------------------------------------------------------


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"the request has no {key}")
    return value


def run_why(service: WalkService) -> Callable[[Request], None]:
    def handle(req: Request) -> None:
        body = req.body
        walk_id = _text(body, "walk_id")
        try:
            target = Target(
                namespace=check_namespace(_text(body, "namespace")),
                pod=check_object_name(_text(body, "pod"), "pod"),
            )
        except BadTarget as err:
            raise BadRequest(str(err)) from None
        reply = req.reply
        try:
            walk = service.load(walk_id)
        except WalkGone:
            walk = None
        if walk is not None and walk.root_ts is not None:
            service.resume(walk)  # taken over mid-walk: its root and layers done stand
            return
        service.start(_text(reply, "channel"), reply.get("user"), target, walk_id=walk_id)

    return handle


def run_click(buttons: Buttons) -> Callable[[Request], None]:
    fields = {f.name for f in msgspec.structs.fields(Click)}

    def handle(req: Request) -> None:
        raw = req.body.get("click")
        if not isinstance(raw, dict) or not raw.get("action_id") or not raw.get("user"):
            raise BadRequest("the request holds no click")
        buttons.handle(Click(**{k: v for k, v in raw.items() if k in fields}))

    return handle


# (run, channel, day, thread_ts) → posts this cluster's part of that digest run in that thread
PublishPart = Callable[[str, str, str, str], object]


def run_digest_part(
    cluster: str,
    store: StateStore,
    publish: PublishPart,
    lease_s: float,
    clock: Callable[[], float] = time.time,
) -> Callable[[Request], None]:
    def handle(req: Request) -> None:
        body = req.body
        run, day = _text(body, "run"), _text(body, "day")
        channel, thread_ts = _text(body, "channel"), _text(body, "thread_ts")
        done_key = PART_KEY.format(run, cluster)
        if store.get(done_key) is not None:
            return
        # A lease (renewed while this runs): an agent that dies posting frees the part within lease_s.
        if not store.set_if_absent(done_key + ":claim", {"at": clock()}, lease_s):
            raise PartBusy(f"the digest part of {cluster} for {run} is being posted by another agent")
        try:
            if store.get(done_key) is not None:
                return
            publish(run, channel, day, thread_ts)
            store.set(done_key, {"at": clock()}, PART_TTL_S)
        finally:
            store.delete(done_key + ":claim")

    return handle


def _positive(value: Any) -> float:
    seconds = float(value)
    if not 0 < seconds < 1e9:  # NaN, a negative or absurd time from the stream: not a time
        raise ValueError(f"{value!r} is not a number of seconds")
    return seconds


def _alert_settings(raw: Any) -> AlertSettings:
    if not isinstance(raw, dict) or not isinstance(raw.get("channel"), str) or not raw["channel"]:
        raise BadRequest("the request has no alert settings with a channel")
    try:
        return AlertSettings(
            channel=raw["channel"],
            rewalk_s=float(raw.get("rewalk_s", 30 * 60)),
            max_threads_per_hour=int(raw.get("max_threads_per_hour", 10)),
            duplicate_s=float(raw.get("duplicate_s", 60)),
            # A gateway of an older version sends no stale time: the default, 12 h.
            stale_s=_positive(raw.get("stale_s", 12 * 3600)),
        )
    except (TypeError, ValueError) as err:
        raise BadRequest(f"the alert settings are not numbers: {err}") from None


# The agent's alert service under the gateway's settings (its cluster's keys, directory and walks).
MakeAlerts = Callable[[AlertSettings], AlertService]


def run_alerts(make: MakeAlerts) -> Callable[[Request], None]:
    def handle(req: Request) -> None:
        try:
            batch = batch_from_dict(req.body.get("payload"))
        except PayloadError as err:
            raise BadRequest(f"not an Alertmanager payload: {err}") from None
        alerts = make(_alert_settings(req.body.get("settings")))
        # A store that fails raises here and the entry is retried; a taken-over entry is recorded
        # again as a duplicate delivery, and what its dead agent left unposted is caught up.
        # A failed Slack post is not acknowledged either: every incident is tried, then the first
        # failure is raised, so the entry stays pending and its redelivery posts what is missing.
        failed: list[Exception] = []
        for key in alerts.receive(batch):
            try:
                alerts.sync(key)
            except Exception as err:
                log.error("incident of %s: Slack not brought up to date: %s", key, err)
                failed.append(err)
        if failed:
            raise failed[0]
        if _taken_over.get():
            alerts.finish_walks(batch)

    return handle


def agent_handlers(
    cluster: str,
    service: WalkService,
    buttons: Buttons,
    publish_part: PublishPart,
    lease_s: float,
    make_alerts: MakeAlerts,
) -> dict[str, Callable[[Request], None]]:
    return {
        WHY: run_why(service),
        CLICK: run_click(buttons),
        DIGEST_PART: run_digest_part(cluster, service.state, publish_part, lease_s),
        ALERTS: run_alerts(make_alerts),
    }
