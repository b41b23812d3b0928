"""`gpubot why [NAMESPACE/]POD`: walk the five layers for a pod and print the findings."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from bot.cli.args import EXIT_OK, colour
from bot.ops.config import load_config
from layers.sources import SourceError


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    why = sub.add_parser("why", help="walk the five layers for a pod")
    why.add_argument("target", metavar="[NAMESPACE/]POD")
    why.add_argument("-n", "--namespace")
    mode = why.add_mutually_exclusive_group()
    mode.add_argument("--all", action="store_true", help="run all five layers")
    mode.add_argument("--layer", type=int, choices=range(1, 6), metavar="N", help="run only layer N (1-5)")
    add_format(why)
    add_sources(why)


def cmd_why(args: argparse.Namespace) -> int:
    from bot.render import walk_json, walk_text
    from bot.sources.opener import sources_from_args
    from layers.facts.context import Settings
    from layers.facts.target import parse_pod_ref
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
        print(walk_text(result, colour=colour(), source=src.description))
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"why": cmd_why}
