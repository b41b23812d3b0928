"""The `gpubot` command. The only place that prints and chooses exit codes.

Exit status: 0 the command ran (whatever it found), 2 bad input or target not
found, 3 a backend unreachable or refusing, 1 a bug. Errors are one line on
stderr, never a traceback (set GPUBOT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType

from bot.cli import actions, demo, diag, digest, node, serve, why
from bot.cli.args import (
    EXIT_BACKEND,
    EXIT_BUG,
    EXIT_INPUT,
    EXIT_OK,
    Parser,
    UsageError,
    add_format,
    add_sources,
)
from bot.ops.config import ConfigError
from layers.facts.target import BadTarget
from layers.sources import SourceError, TelemetryError

# One module per command (or a few that belong together), each with `register` and `COMMANDS`;
# listed in the order `gpubot --help` shows them.
COMMAND_MODULES: tuple[ModuleType, ...] = (why, demo, actions, digest, node, diag, serve)


def build_parser() -> Parser:
    parser = Parser(
        prog="gpubot",
        description="Diagnose GPU failures on Kubernetes clusters running the NVIDIA GPU Operator, layer by layer.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMAND_MODULES:
        module.register(sub, add_sources, add_format)
    return parser


class _VersionAction(argparse.Action):
    """`--version`: the installed version, looked up only when asked (importlib.metadata costs ~20 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from bot.ops.version import gpubot_version

        print(f"gpubot {gpubot_version()}")  # on stdout, as argparse's own version action prints
        parser.exit()


def _error(msg: str) -> None:
    print(f"gpubot: {' '.join(str(msg).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from bot.ops.gctune import tune

    tune()  # the collector's thresholds for large fleets (bot/ops/gctune.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_INPUT
    if args.command != "serve" and not os.environ.get("GPUBOT_DEBUG"):
        # The CLI reports errors itself, in one line: library and retry logs stay quiet.
        logging.getLogger().setLevel(logging.CRITICAL)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for module in COMMAND_MODULES:
        handlers.update(module.COMMANDS)
    handler = handlers[args.command]
    try:
        return handler(args)
    except (BadTarget, ConfigError, UsageError) as err:
        _error(str(err))
        return EXIT_INPUT
    except SourceError as err:
        _error(str(err))
        return EXIT_INPUT if err.kind in ("not_found", "bad_input") else EXIT_BACKEND
    except TelemetryError as err:
        _error(str(err))
        return EXIT_BACKEND
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as err:
        # Looked up, not imported: a command that read no scenario cannot have raised one, and an
        # import in the error path that fails itself (a broken install) would end in a traceback.
        model = sys.modules.get("bot.sources.scenario_model")
        if model is not None and isinstance(err, model.ScenarioError):
            _error(str(err))
            return EXIT_INPUT
        if os.environ.get("GPUBOT_DEBUG"):
            traceback.print_exc()
        _error(
            f"internal error ({type(err).__name__}): {err} — please report it; GPUBOT_DEBUG=1 shows the traceback"
        )
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
