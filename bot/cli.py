"""The `gpubot` command. The only place that prints and chooses exit codes.

Exit status: 0 the command ran (whatever it found), 2 bad input or target not
found, 3 a backend unreachable or refusing, 1 a bug. Errors are one line on
stderr, never a traceback (set GPUBOT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from bot.config import ConfigError, load_config
from layers.sources import SourceError, TelemetryError
from layers.target import BadTarget

EXIT_OK, EXIT_BUG, EXIT_INPUT, EXIT_BACKEND = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input detected by the CLI itself (exit 2)."""


def _add_sources(p: argparse.ArgumentParser) -> None:
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


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("text", "json", "blocks"),
        default="text",
        help="text for people (default), json for programs, blocks: the Slack messages the bot would post",
    )


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"gpubot: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpubot",
        description="Diagnose GPU failures on Kubernetes clusters running the NVIDIA GPU Operator, layer by layer.",
    )
    parser.add_argument("--version", action="version", version=f"gpubot {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    why = sub.add_parser("why", help="walk the five layers for a pod")
    why.add_argument("target", metavar="[NAMESPACE/]POD")
    why.add_argument("-n", "--namespace")
    mode = why.add_mutually_exclusive_group()
    mode.add_argument("--all", action="store_true", help="run all five layers")
    mode.add_argument("--layer", type=int, choices=range(1, 6), metavar="N", help="run only layer N (1-5)")
    _format(why)
    _add_sources(why)

    sub.add_parser("scenarios", help="list bundled scenarios")
    demo = sub.add_parser("demo", help="walk every bundled scenario: no cluster, Slack or Redis needed")
    demo.add_argument("--format", choices=("text", "json"), default="text")

    for module in _command_modules():
        module.register(sub, _add_sources, _format)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpubot")
    except PackageNotFoundError:
        return "(not installed)"


def _command_modules() -> list[Any]:
    """The subcommands that live beside the walk: node actions, the digest, the bot."""
    from bot import cli_actions, cli_digest, cli_serve

    return [cli_actions, cli_digest, cli_serve]


def cmd_why(args: argparse.Namespace) -> int:
    from bot.render import walk_json, walk_text
    from bot.sources import sources_from_args
    from layers.context import Settings
    from layers.target import parse_pod_ref
    from layers.walk import open_pod, run

    namespace, pod = parse_pod_ref(args.target, args.namespace)
    cfg = load_config()
    src = sources_from_args(cfg, args)
    try:
        ctx = open_pod(
            src.cluster, src.telemetry, namespace, pod, Settings(operator_namespace=cfg.operator_namespace)
        )
    except SourceError as err:
        if err.kind != "not_found":
            raise
        raise SourceError("not_found", _not_found_hint(src, args, namespace, pod, err)) from None
    result = run(ctx, all_layers=args.all, only_layer=args.layer)
    if args.format == "json":
        print(walk_json(result))
    elif args.format == "blocks":
        from handlers.blocks import walk_messages

        print(json.dumps([m.to_dict() for m in walk_messages(result)], indent=2, ensure_ascii=False))
    else:
        print(walk_text(result, colour=_colour(), source=src.description))
    return EXIT_OK


def _not_found_hint(src: Any, args: argparse.Namespace, namespace: str, pod: str, err: SourceError) -> str:
    """Say where the pod is when it exists under another namespace; for a bundle, how to include it."""
    try:
        elsewhere = [
            f"{p['metadata'].get('namespace')}/{pod}"
            for p in src.cluster.list_pods(field_selector=f"metadata.name={pod}")
        ]
    except SourceError:
        elsewhere = []
    if elsewhere:
        return f"{err.message}; did you mean {' or '.join(sorted(elsewhere)[:3])}?"
    if args.bundle:
        return (
            f"{err.message}: the bundle was collected without it (gpubot must-gather --pod {namespace}/{pod})"
        )
    return err.message


def _colour() -> bool:
    return sys.stdout.isatty() and os.environ.get("NO_COLOR") is None and os.environ.get("TERM") != "dumb"


def cmd_scenarios(_args: argparse.Namespace) -> int:
    from bot.scenario import load_scenario
    from bot.sources import bundled_scenarios

    paths = bundled_scenarios()
    rows = []
    for path in paths:
        expect = load_scenario(path).extra.get("x-expect") or {}
        rows.append((path.stem, str(expect.get("target", "")), str(expect.get("verdict") or "all ok")))
    width = max(len(r[0]) for r in rows) if rows else 0
    target_width = max(len(r[1]) for r in rows) if rows else 0
    for stem, target, verdict in rows:
        print(f"{stem:<{width}}  {target:<{target_width}}  {verdict}")
    print(f"\n{len(rows)} scenarios · gpubot why <target> --scenario <name> · what each one is: gpubot demo")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from bot.demo import run_demo

    return run_demo(fmt=args.format, interactive=sys.stdin.isatty() and sys.stdout.isatty(), colour=_colour())


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "why": cmd_why,
    "scenarios": cmd_scenarios,
    "demo": cmd_demo,
}


def _error(msg: str) -> None:
    print(f"gpubot: {' '.join(str(msg).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_INPUT
    if args.command != "serve" and not os.environ.get("GPUBOT_DEBUG"):
        # The CLI reports errors itself, in one line: library and retry logs stay quiet.
        logging.getLogger().setLevel(logging.CRITICAL)
    handlers = dict(COMMANDS)
    for module in _command_modules():
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
        from bot.scenario import ScenarioError

        if isinstance(err, ScenarioError):
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
