"""`gpubot diag NODE [--level 1|2|3] [--dry-run] [--format text|json] [sources]`.

Runs DCGM's diagnostic on the node as a Job (bot/actions/diag.py) and prints its result.
Off unless GPUBOT_DIAG_ENABLED=true, except `--dry-run`, which only prints the Job (and exits
2 with one line when it would be refused). Level 3 needs `--confirm` (the second confirmation;
running the command is the first); level 4 is never offered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from bot.cli.args import EXIT_BACKEND, EXIT_INPUT, UsageError


def cmd_diag(args: argparse.Namespace) -> int:
    from bot.actions.diag import own_namespace, plan, record, run
    from bot.cli.actions import cli_actor
    from bot.cli.node import open_ledger_for
    from bot.ops.config import load_config
    from bot.sources.opener import sources_from_args
    from layers.diagjob import DiagRefused, confirmation
    from layers.facts.target import check_object_name

    node = check_object_name(args.node, "node")
    cfg = load_config()
    if not cfg.diag_enabled and not args.dry_run:
        raise UsageError(
            "diagnostics are off: set GPUBOT_DIAG_ENABLED=true (and the chart's diag.enabled) to run them"
        )
    src = sources_from_args(cfg, args)
    if src.offline and not args.dry_run:
        raise UsageError(
            "a scenario or bundle cannot run a Job: add --dry-run to see the Job it would create"
        )
    jobs = None if src.offline else _jobs(src.cluster)
    try:
        p = plan(
            src.cluster,
            jobs,
            node,
            args.level,
            namespace=own_namespace(cfg.diag_namespace),
            image=cfg.diag_image,
            requested_by=cli_actor(),
            confirmed=2 if args.confirm else 1,
            operator_namespace=cfg.operator_namespace,
            hostengine_setting=cfg.diag_hostengine,
            telemetry=src.telemetry,
        )
    except DiagRefused as err:
        print(f"gpubot: diagnostics refused on {node}: {err}", file=sys.stderr)
        return EXIT_INPUT
    if args.dry_run:
        if args.format == "json":
            print(json.dumps({"node": node, "level": args.level, "job": p.manifest}, indent=2))
        else:
            print(confirmation(node, args.level, p.ask, p.hostengine))
            print(json.dumps(p.manifest, indent=2))
            print(f"(dry run: nothing created; sources: {src.description})")
        return 0
    assert jobs is not None
    print(confirmation(node, args.level, p.ask, p.hostengine), file=sys.stderr)
    out = run(src.cluster, jobs, p, progress=_progress())
    ledger = open_ledger_for(args, cfg)
    record(ledger, out, cli_actor(), src.telemetry.now())
    return _print_outcome(out, args.format)


def _jobs(cluster: Any) -> Any:
    from bot.actions.diag_kube import KubeJobs

    return KubeJobs(cluster.api_client, getattr(cluster, "server", cluster.source))


def _progress() -> Callable[[str], None] | None:
    if not sys.stderr.isatty():
        return None
    return lambda message: print(f"\r\033[K{message}", end="", file=sys.stderr, flush=True)


def _print_outcome(out: Any, fmt: str) -> int:
    from layers.diaggpus import coverage
    from layers.facts.dcgmdiag import result_lines

    if fmt == "json":
        doc: dict[str, Any] = {
            "node": out.node,
            "level": out.level,
            "job": out.job,
            "verdict": out.verdict,
            "tested": {str(i): u or None for i, u in sorted(out.tested.items())},
            "untested": out.untested,
            "failure": out.failure,
            "notes": out.notes,
        }
        doc["result"] = json.loads(out.raw) if out.raw else None
        print(json.dumps(doc, indent=2))
    else:
        if out.report is not None:
            names = {i: f"GPU {i} ({u})" for i, u in out.tested.items() if u}
            head, lines, rest = result_lines(out.report, names)
            if out.verdict == "Incomplete":
                head += f" on the GPUs tested, {len(out.untested)} not tested: not a pass for the node"
            print("\n".join([head, *lines, coverage(out.tested, out.untested), rest]))
        for note in out.notes:
            print(f"note: {note}")
    if out.failure is not None:
        print(f"gpubot: diagnostics on {out.node} did not give a result: {out.failure}", file=sys.stderr)
        return EXIT_BACKEND
    return 0


def _level(value: str) -> int:
    if value not in ("1", "2", "3"):
        raise argparse.ArgumentTypeError(
            f"--level must be 1, 2 or 3, got {value!r} (level 4 runs for hours and is never offered)"
        )
    return int(value)


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    p = sub.add_parser("diag", help="run DCGM's diagnostic on a node as a Job (GPUBOT_DIAG_ENABLED=true)")
    p.add_argument("node", metavar="NODE")
    p.add_argument(
        "--level", type=_level, default=1, help="1 seconds, 2 about two minutes, 3 about fifteen (default 1)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the Job (or why it is refused), create nothing"
    )
    p.add_argument("--confirm", action="store_true", help="the second confirmation level 3 needs")
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people, json for programs"
    )
    add_sources(p)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"diag": cmd_diag}
