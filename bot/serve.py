"""`python -m bot.serve …`: the same command as `gpubot serve …`, through the CLI's error handling.

A public entry point (spec/interfaces.md); the bot itself runs in bot/slack/run.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from bot.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
