"""`gpubot digest [--format text|json|blocks] [--post] [sources]`: the daily digest, now."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from bot.ops.config import ConfigError, load_config


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    p = sub.add_parser(
        "digest",
        help="GPU nodes that lost capacity, have rising remapped rows or a failed row remap",
    )
    add_format(p)
    p.add_argument(
        "--post",
        action="store_true",
        help="also post it now, with its chart, to $GPUBOT_DIGEST_CHANNEL (needs $SLACK_BOT_TOKEN)",
    )
    add_sources(p)


def cmd_digest(args: argparse.Namespace) -> int:
    from bot.slack.ledger_open import ledger_digest
    from bot.sources.opener import sources_from_args
    from handlers.digest import digest_id, digest_message, digest_table
    from layers.digest import collect_digest

    cfg = load_config()
    if args.post:
        if not cfg.slack_bot_token:
            raise ConfigError("--post needs SLACK_BOT_TOKEN: the bot token (xoxb-…) of the Slack app")
        if not cfg.digest_channel:
            raise ConfigError("--post needs GPUBOT_DIGEST_CHANNEL: the channel id (C…) or name to post to")
    src = sources_from_args(cfg, args)
    digest = collect_digest(src.cluster, src.telemetry, operator_namespace=cfg.operator_namespace)
    digest = ledger_digest(cfg, src.cluster, src.telemetry, digest, offline=src.offline)
    did = digest_id(digest)
    if args.format == "json":
        print(json.dumps(digest.to_dict(), indent=2, ensure_ascii=False))
    elif args.format == "blocks":
        print(json.dumps(digest_message(digest, did).to_dict(), indent=2, ensure_ascii=False))
    else:
        print(digest_table(digest, sources=src.description), end="")
    if args.post:
        _post(args, cfg, digest, src.telemetry, did)
    return 0


def _post(args: argparse.Namespace, cfg: Any, digest: Any, telemetry: Any, did: str) -> None:
    from bot.slack.digest_post import DigestFailed, publish_digest
    from bot.slack.post import Poster
    from bot.slack.scheduler import digest_day
    from bot.slack.state import open_state
    from handlers.ports import StateUnavailable
    from layers.sources import SourceError

    try:
        store, note = open_state(args.redis_url or cfg.redis_url)
    except StateUnavailable as err:
        raise SourceError("unavailable", str(err)) from None
    poster = Poster(
        cfg.slack_bot_token, cfg.slack_api_url, history=cfg.slack_history, pace_s=cfg.slack_pace_s
    )
    try:
        published = publish_digest(
            lambda: (digest, telemetry),  # collected once, already printed
            poster,
            cfg.digest_channel,
            did=did,
            day=digest_day(time.time(), cfg.tz),
            store=store,
            retention_s=cfg.state_retention_days * 86400,
        )
    except DigestFailed as err:
        raise SourceError("unavailable", f"digest {did} was not posted: {err.reason}") from None
    posted = published.posted
    extra = f"; not attached: {'; '.join(posted.problems)}" if posted.problems else ""
    print(f"digest {did} posted to {posted.ref.channel} (ts {posted.ref.ts}){extra}")
    if not (args.redis_url or cfg.redis_url):
        # Its buttons resolve the digest from the state store: only a shared Redis lets the bot see it.
        print(f"note: {note}; the digest's buttons need the bot's REDIS_URL to work")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"digest": cmd_digest}
