"""CLI commands beyond the walk: must-gather, cordon, uncordon (the digest and serve register here too).

Handlers return exit codes and raise SourceError / UsageError; bot/cli/main.py's
main() turns those into one stderr line and the exit status of the spec.
A refused cordon or uncordon (circuit breaker, not gpubot's cordon) exits 2.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.cli.args import UsageError

EXIT_OK, EXIT_REFUSED = 0, 2


def _sources(args: argparse.Namespace) -> Any:
    from bot.ops.config import load_config
    from bot.sources.opener import sources_from_args

    cfg = load_config()
    src = sources_from_args(cfg, args)
    return cfg, src


def cli_actor() -> str:
    """Who is acting, for the cordoned-by annotation: cli:user@host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER") or "unknown"
    return f"cli:{user}@{socket.gethostname()}"


def _stderr_progress() -> Callable[[str], None] | None:
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def show(message: str) -> None:
        print(f"\r\033[K[{time.monotonic() - started:5.1f}s] {message}", end="", file=sys.stderr, flush=True)

    return show


def _ledger(args: argparse.Namespace, cfg: Any, src: Any) -> Any:
    """The node ledger an action writes to (REDIS_URL, else this process); None for a read-only
    scenario or bundle, whose made-up history must not land in a shared Redis."""
    from bot.cli.node import open_ledger_for

    return None if src.offline or getattr(args, "dry_run", False) else open_ledger_for(args, cfg)


def cmd_must_gather(args: argparse.Namespace) -> int:
    from bot.actions.archive import name_part
    from bot.actions.bundle_writer import collect_bundle
    from layers.facts.target import check_object_name, parse_pod_ref

    # `is not None`: an empty --node '' (an unset shell variable) is a bad name, not "every node".
    node = check_object_name(args.node, "node") if args.node is not None else None
    target = parse_pod_ref(args.pod) if args.pod is not None else None
    out = args.out or (
        f"gpubot-must-gather_{name_part(node) if node else 'cluster'}_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.tar.gz"
    )
    if not out.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"--out must name a .tar.gz file, got {out!r}")
    cfg, src = _sources(args)
    progress = _stderr_progress()
    try:
        report = collect_bundle(
            src.cluster,
            src.telemetry,
            out,
            node=node,
            target=target,
            with_bug_report=args.with_bug_report,
            progress=progress,
            operator_namespace=cfg.operator_namespace,
            ledger=_ledger(args, cfg, src),
            actor=cli_actor(),
        )
    except OSError as err:
        # Writing the bundle failed (a read-only or special folder, no space): the user's --out, not a bug.
        if err.filename is None or Path(str(err.filename)).parent != Path(out).parent:
            raise
        raise UsageError(f"cannot write the bundle {out}: {err.strerror or err}") from None
    if progress is not None:
        print(file=sys.stderr)
    print(
        f"wrote {report.path}: {report.files} files, {report.archive_bytes / 1e6:.2f} MB "
        f"({report.content_bytes / 1e6:.2f} MB uncompressed) from {src.description}"
    )
    bug_report_notes = [
        s for s in report.skipped if s["what"] == "nvidia-bug-report" and args.with_bug_report
    ]
    for s in bug_report_notes:
        print(f"  skipped: {s['why']}")
    if report.cut:
        print(f"  {len(report.cut)} cut by caps (see manifest.json)")
    if report.errors:
        print(f"  {len(report.errors)} read(s) failed (see errors.txt), e.g. {report.errors[0]['error']}")
    for note in report.notes:
        print(f"  {note}")
    if report.walk is not None and report.walk.verdict is not None:
        v = report.walk.verdict
        print(f"  verdict: {v.code} (layer {v.layer}): {v.summary}")
    if target:
        print(f"replay: gpubot why --bundle {report.path} {target[0]}/{target[1]}")
    else:
        where = f"on {node}" if node else "requesting GPUs"
        print(
            f"replay: gpubot why --bundle {report.path} NAMESPACE/POD "
            f"(the bundle holds the pods {where}; add --pod NAMESPACE/POD for another)"
        )
    return EXIT_OK


def cmd_cordon(args: argparse.Namespace) -> int:
    from bot.actions.cordon import cordon
    from layers.remedy import RemedyInputError

    cfg, src = _sources(args)
    try:
        outcome = cordon(
            src.cluster,
            src.writer,
            args.node,
            args.reason,
            cli_actor(),
            max_fraction=cfg.cordon_max_fraction,
            dry_run=args.dry_run,
            breaker_lock=_breaker_lock(args, cfg, src),
            ledger=_ledger(args, cfg, src),
        )
    except RemedyInputError as err:
        raise UsageError(str(err)) from None
    return _report(outcome, src.offline)


def _breaker_lock(args: argparse.Namespace, cfg: Any, src: Any) -> Any:
    """The bot's Redis lock when REDIS_URL is set, so a CLI cordon and the bot's cannot both pass the
    breaker; None (this process's lock) otherwise, and for a dry run or a read-only scenario or bundle."""
    from bot.actions.cordon import store_breaker_lock
    from bot.slack.state import open_state
    from handlers.ports import StateUnavailable
    from layers.sources import SourceError

    url = args.redis_url or cfg.redis_url
    if not url or args.dry_run or src.offline:
        return None
    try:
        store, _note = open_state(url, ca_bundle=cfg.redis_ca_bundle, password=cfg.redis_password)
    except StateUnavailable as err:
        raise SourceError("unavailable", f"the circuit breaker's lock needs the state store: {err}") from None
    return store_breaker_lock(store, cluster=cfg.cluster_name)


def cmd_uncordon(args: argparse.Namespace) -> int:
    from bot.actions.cordon import uncordon

    cfg, src = _sources(args)
    outcome = uncordon(
        src.cluster,
        src.writer,
        args.node,
        force=args.force,
        dry_run=args.dry_run,
        actor=cli_actor(),
        ledger=_ledger(args, cfg, src),
    )
    return _report(outcome, src.offline)


def _report(outcome: Any, offline: bool) -> int:
    if outcome.refused:
        print(f"gpubot: {outcome.message}", file=sys.stderr)
        return EXIT_REFUSED
    simulated = offline and outcome.applied
    print(
        outcome.message
        + (" (simulated: a scenario or bundle is read-only, its file is unchanged)" if simulated else "")
    )
    if outcome.dry_run and outcome.patch is not None:
        print(json.dumps(outcome.patch, indent=2))
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "must-gather": cmd_must_gather,
    "cordon": cmd_cordon,
    "uncordon": cmd_uncordon,
}


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add the subcommands of the node actions, the digest and the bot."""
    mg = sub.add_parser(
        "must-gather", help="collect a must-gather bundle (tar.gz) for a node or the GPU fleet"
    )
    mg.add_argument(
        "--out",
        metavar="FILE.tar.gz",
        help="where to write (default gpubot-must-gather_<node>_<time>.tar.gz)",
    )
    mg.add_argument(
        "--node", metavar="NODE", help="only this node's operand pods and objects (default: every GPU node)"
    )
    mg.add_argument(
        "--pod", metavar="[NAMESPACE/]POD", help="also the pod being diagnosed: its logs, events and walk"
    )
    mg.add_argument(
        "--with-bug-report",
        action="store_true",
        help="run nvidia-bug-report.sh in the node's driver pod (needs pods/exec; takes minutes)",
    )
    add_sources(mg)

    co = sub.add_parser("cordon", help="mark a GPU node unschedulable, with gpubot's annotations")
    co.add_argument("node", metavar="NODE")
    co.add_argument("--reason", required=True, metavar="TEXT", help="why: stored in gpubot/cordon-reason")
    co.add_argument("--dry-run", action="store_true", help="print the patch, change nothing")
    add_sources(co)

    un = sub.add_parser("uncordon", help="undo a cordon gpubot made")
    un.add_argument("node", metavar="NODE")
    un.add_argument("--force", action="store_true", help="also undo a cordon gpubot did not make")
    un.add_argument("--dry-run", action="store_true", help="print the patch, change nothing")
    add_sources(un)
