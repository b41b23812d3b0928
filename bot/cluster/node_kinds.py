"""`/gpu node` and Run diagnostics between gateway and agents: their requests, and the buttons'
cluster.

- `node`: `/gpu node [CLUSTER/]NODE`, routed as `/gpu why` is; the cluster's
  agent reads its ledger and posts it (bot/slack/ledger_slack.py
  `post_node_ledger`) with its own credentials.
- `diag_click`: a Run diagnostics click. Its button value is
  `diag|<node>|<level>|<confirmations>` (handlers/ledger_blocks.py); an agent
  posts it as `diag|<cluster>/<node>|…` (`ClusterButtons`: a node name has no
  '/'), so the gateway knows where a click on any of them goes, whoever clicks
  and wherever, and the agent gives its diagnostics the bare node back. The
  agent re-checks that the clicker is an operator, as for every action.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec.structs

from bot.cluster.kinds import BadRequest
from bot.cluster.streams import Request
from handlers.clicks import Click
from handlers.ledger_blocks import RUN_DIAGNOSTICS, DiagValue
from handlers.ports import Attachment, PostRef

NODE = "node"
DIAG_CLICK = "diag_click"


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"the request has no {key}")
    return value


def node_request(node: str, channel: str, user: str, version: str) -> Request:
    return Request(NODE, {"node": node, "reply": {"channel": channel, "user": user}}, sender_version=version)


def diag_request(click: Click, version: str) -> Request:
    reply = {"channel": click.channel, "user": click.user, "thread_ts": click.thread_ts or click.message_ts}
    return Request(
        DIAG_CLICK, {"click": msgspec.structs.asdict(click), "reply": reply}, sender_version=version
    )


def diag_cluster(value: str) -> tuple[str | None, DiagValue]:
    """The cluster a Run diagnostics value names (None: an unqualified node), and the value as the
    cluster's own diagnostics read it (the bare node). ValueError when it is no such value."""
    parsed = DiagValue.decode(value)
    cluster, _, node = parsed.node.rpartition("/")
    if not node:
        raise ValueError(f"not a Run diagnostics value: {value[:80]!r}")
    return cluster or None, msgspec.structs.replace(parsed, node=node)


def qualified(blocks: list[dict[str, Any]] | None, cluster: str) -> list[dict[str, Any]] | None:
    """`blocks` with each Run diagnostics button's node named as `<cluster>/<node>`."""
    if not blocks or RUN_DIAGNOSTICS not in repr(blocks):
        return blocks
    out = copy.deepcopy(blocks)
    for block in out:
        for element in block.get("elements") or ():
            if isinstance(element, dict) and element.get("action_id") == RUN_DIAGNOSTICS:
                try:
                    named, value = diag_cluster(str(element.get("value") or ""))
                except ValueError:
                    continue
                if named is None:
                    element["value"] = msgspec.structs.replace(value, node=f"{cluster}/{value.node}").encode()
    return out


class ClusterButtons:
    """An agent's SlackPoster: posts, updates and ephemeral answers whose Run diagnostics buttons name
    this cluster; everything else (uploads, the once-poster's lookups) as the inner poster does it."""

    def __init__(self, inner: Any, cluster: str) -> None:
        self.inner = inner
        self.cluster = cluster

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        *,
        key: str | None = None,
    ) -> PostRef:
        return self.inner.post(channel, text, qualified(blocks, self.cluster), thread_ts, key=key)  # type: ignore[no-any-return]

    def update(self, ref: PostRef, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        self.inner.update(ref, text, qualified(blocks, self.cluster))

    def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        self.inner.ephemeral(channel, user, text, qualified(blocks, self.cluster))

    def upload(self, channel: str, file: Attachment, *, thread_ts: str | None = None) -> None:
        self.inner.upload(channel, file, thread_ts=thread_ts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# (channel, user, node) → the node's ledger posted in the channel
PostNode = Callable[[str, str, str], None]


def run_node(post: PostNode) -> Callable[[Request], None]:
    def handle(req: Request) -> None:
        from layers.facts.target import BadTarget, check_object_name

        reply = req.reply
        try:
            node = check_object_name(_text(req.body, "node"), "node")
        except BadTarget as err:
            raise BadRequest(str(err)) from None
        post(_text(reply, "channel"), _text(reply, "user"), node)

    return handle


def run_diag(cluster: str, diag: Callable[[Click], object]) -> Callable[[Request], None]:
    fields = {f.name for f in msgspec.structs.fields(Click)}

    def handle(req: Request) -> None:
        raw = req.body.get("click")
        if not isinstance(raw, dict) or not raw.get("user") or raw.get("action_id") != RUN_DIAGNOSTICS:
            raise BadRequest("the request holds no Run diagnostics click")
        click = Click(**{k: v for k, v in raw.items() if k in fields})
        try:
            named, value = diag_cluster(click.value)
        except ValueError as err:
            raise BadRequest(str(err)) from None
        if named not in (None, cluster):
            raise BadRequest(f"the click names cluster {named!r}, not this one")
        diag(msgspec.structs.replace(click, value=value.encode()))

    return handle
