"""`gpubot node NODE [--days N] [--format text|json]` and `gpubot ledger export --format csv`.

From a scenario or a bundle the ledger is what its objects, logs and series show (nothing is
written to a store: a made-up history must not land in a shared Redis); against a live
cluster what is seen is recorded in the state store first (REDIS_URL, else this process).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from bot.cli.args import UsageError


def open_ledger_for(args: argparse.Namespace, cfg: Any) -> Any:
    """The bot's own ledger (bot/slack/ledger_open.py): in its Redis (--redis-url / REDIS_URL, of
    GPUBOT_REDIS_MODE's shape, under GPUBOT_CLUSTER_NAME's keys), else in this process's memory."""
    from redis.exceptions import RedisError

    from bot.ledger.store import open_ledger
    from bot.slack.ledger_open import bot_ledger
    from bot.slack.state import shown_url
    from layers.sources import SourceError

    url = getattr(args, "redis_url", None) or cfg.redis_url
    if not url:
        return open_ledger(None, cfg.ledger_retention_days)  # this run's own: nothing shared, nothing kept
    try:
        return bot_ledger(cfg, redis_url=url)
    except (ValueError, RedisError) as err:
        raise SourceError("bad_input", f"Redis URL {shown_url(url)} is not usable: {err}") from None


def _days(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 3650:
        raise argparse.ArgumentTypeError(f"--days must be a whole number from 1 to 3650, got {value!r}")
    return int(value)


def _setup(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from bot.ops.config import load_config
    from bot.sources.opener import sources_from_args

    cfg = load_config()
    src = sources_from_args(cfg, args)
    return cfg, src, open_ledger_for(args, cfg)


def _unavailable(err: Exception) -> Exception:
    from layers.sources import SourceError

    return SourceError("unavailable", str(err))


def cmd_node(args: argparse.Namespace) -> int:
    from bot.ledger.service import node_report
    from layers.facts.target import check_object_name
    from layers.ledger import text_lines

    node = check_object_name(args.node, "node")
    cfg, src, ledger = _setup(args)
    rep = node_report(cfg, src.cluster, src.telemetry, ledger, node, days=args.days, record=not src.offline)
    if args.format == "json":
        print(json.dumps(rep.to_dict(), indent=2, ensure_ascii=False))
    else:
        print("\n".join(text_lines(rep)))
        print(f"sources: {src.description}")
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from bot.ledger.service import export_rows, gpu_nodes, node_report
    from bot.ledger.store import LedgerUnavailable
    from layers.facts.target import check_object_name

    if args.ledger_command != "export":
        raise UsageError("`gpubot ledger` needs a subcommand: export")
    cfg, src, ledger = _setup(args)
    if args.node:
        nodes = [check_object_name(n, "node") for n in args.node]
    else:
        try:
            stored = ledger.nodes()
        except LedgerUnavailable as err:
            raise _unavailable(err) from None
        # Offline, the scenario's or bundle's GPU nodes are the fleet; live, the nodes the store knows.
        nodes = sorted(set(stored) | (set(gpu_nodes(src.cluster)) if src.offline else set()))
    reports = [
        node_report(cfg, src.cluster, src.telemetry, ledger, n, days=args.days, record=not src.offline)
        for n in nodes
    ]
    sys.stdout.write(export_rows(reports))
    return 0


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    p = sub.add_parser("node", help="a node's ledger: its GPUs' events over 30 days and the rules it meets")
    p.add_argument("node", metavar="NODE")
    p.add_argument("--days", type=_days, default=30, help="how many days of events to show (default 30)")
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people, json for programs"
    )
    add_sources(p)

    led = sub.add_parser(
        "ledger", help="the GPU ledger: `gpubot ledger export --format csv` for an RMA ticket"
    )
    lsub = led.add_subparsers(dest="ledger_command", metavar="SUBCOMMAND")
    ex = lsub.add_parser("export", help="every entry of the ledger as CSV, with the rules each GPU meets")
    ex.add_argument("--format", choices=("csv",), default="csv", help="csv (the only format)")
    ex.add_argument("--node", action="append", metavar="NODE", help="only this node (repeatable)")
    ex.add_argument("--days", type=_days, default=90, help="how many days of entries (default 90)")
    add_sources(ex)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"node": cmd_node, "ledger": cmd_ledger}
