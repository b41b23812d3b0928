"""What every `gpubot` command shares: exit codes, the usage error, the source and format options.

Command modules (why, demo, actions, digest, serve) import this, never bot/cli/main.py,
so the parser can list them without an import circle.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

EXIT_OK, EXIT_BUG, EXIT_INPUT, EXIT_BACKEND = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input detected by the CLI itself (exit 2)."""


def add_sources(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sources")
    g.add_argument(
        "--scenario",
        metavar="FILE",
        help="read the cluster from a scenario file (or a bundled scenario name)",
    )
    g.add_argument("--bundle", metavar="FILE", help="read the cluster from a must-gather bundle (.tar.gz)")
    g.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)",
    )
    g.add_argument("--context", help="kubeconfig context")
    g.add_argument(
        "--prometheus-url", metavar="URL", help="Prometheus with DCGM and vLLM metrics ($PROMETHEUS_URL)"
    )
    g.add_argument("--redis-url", metavar="URL", help="state store ($REDIS_URL); default in-process memory")


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("text", "json", "blocks"),
        default="text",
        help="text for people (default), json for programs, blocks: the Slack messages the bot would post",
    )


class Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"gpubot: {message} (see `{self.prog} --help`)\n")


def colour() -> bool:
    return sys.stdout.isatty() and os.environ.get("NO_COLOR") is None and os.environ.get("TERM") != "dumb"
