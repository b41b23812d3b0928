"""`gpubot serve`: the options of the Slack bot; the bot itself runs in bot/slack/run.py.

The host defaults to 127.0.0.1; 0.0.0.0 (the container) only when asked with --host.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3000


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"a TCP port is a number from 1 to 65535, got {text!r}")
    return int(text)


def add_arguments(p: argparse.ArgumentParser, add_sources: Callable[[argparse.ArgumentParser], None]) -> None:
    p.add_argument(
        "--role",
        choices=("all", "gateway", "agent"),
        default="all",
        help="all: one process for one cluster (default); gateway: the Slack side of many clusters, "
        "queueing on Redis Streams; agent: one cluster's worker (GPUBOT_CLUSTER_NAME)",
    )
    p.add_argument(
        "--http",
        action="store_true",
        help="serve Slack's Events API at /slack/events (default: Socket Mode with SLACK_APP_TOKEN)",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"port for /slack/events (HTTP mode) and /healthz, /readyz (both modes); default {DEFAULT_PORT}",
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to bind (default {DEFAULT_HOST}; a container passes --host 0.0.0.0)",
    )
    add_sources(p)


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add `serve` (no --format: it talks to Slack, not to a terminal)."""
    p = sub.add_parser("serve", help="run the Slack bot (Socket Mode by default, HTTP with --http)")
    add_arguments(p, add_sources)


def cmd_serve(args: argparse.Namespace) -> int:
    # Slack Bolt and the bot's app are imported only here: every other command starts without them.
    if args.role != "all":
        from bot.cluster.roles import serve_role

        return serve_role(args)
    from bot.slack.run import run_bot

    return run_bot(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"serve": cmd_serve}
