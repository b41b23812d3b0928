"""Must-gather bundles: collect a node's (or the fleet's) GPU evidence into one tar.gz.

Our own collector, covering what the GPU Operator's hack/must-gather.sh collects
plus the node's DCGM history, the walk's findings and a `scenario.yaml`, so
`gpubot why --bundle FILE ns/pod` replays the diagnosis offline. Each file is
written into the archive as it is read; logs are spooled to a temporary file
for scenario.yaml, never held together. Text is masked (bot/actions/redact.py) before
it is written anywhere. A read that fails is listed in errors.txt and the
bundle is still produced. The CLI and the Slack button both call `collect_bundle`;
bot/sources/bundle_reader.py reads a bundle back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.actions.archive import Archive, Caps, name_part
from bot.actions.bug_report import bug_reports, kube_exec
from bot.actions.bundle_yaml import write_scenario
from bot.actions.gather import Collector, ExecFn, Progress
from bot.actions.gather_dra import dra_files
from bot.actions.gather_series import telemetry_files
from bot.actions.gather_volumes import volume_files
from bot.actions.gather_walk import recorded_walk
from bot.actions.history import record_action
from bot.ledger.store import Ledger
from layers import remedy as rm
from layers.facts import objects as o
from layers.findings import WalkResult
from layers.sources import Cluster, SourceError, Telemetry

__all__ = ["BundleReport", "Caps", "ExecFn", "Progress", "collect_bundle", "kube_exec"]


@dataclass
class BundleReport:
    path: str
    files: int
    content_bytes: int  # uncompressed bytes written into the archive
    archive_bytes: int
    skipped: list[dict[str, str]] = field(default_factory=list)
    cut: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    walk: WalkResult | None = None
    notes: list[str] = field(default_factory=list)  # what befell the bundle after it was written


# --- the entry points -------------------------------------------------------------------


def _walk(
    cluster: Cluster, telemetry: Telemetry, scope: rm.GatherScope, errors: list[dict[str, str]]
) -> WalkResult | None:
    from layers.walk import open_node, open_pod, run

    try:
        if scope.target:
            return run(open_pod(cluster, telemetry, *scope.target))
        if scope.node:
            return run(open_node(cluster, telemetry, scope.node))
    except Exception as err:  # a bug in one layer must not cost the whole bundle
        errors.append({"read": "the walk", "error": f"{type(err).__name__}: {err}"})
    return None


def _summary(manifest: rm.Manifest, walk: WalkResult | None, notes: list[str]) -> str:
    from bot.render import walk_text

    lines = [
        f"# gpubot must-gather: {manifest.scope.get('label')}",
        "",
        f"Collected {manifest.created} from {manifest.source}.",
        "",
    ]
    if walk is not None:
        lines += ["## Diagnosis", "", "```", walk_text(walk), "```", ""]
    else:
        lines += [
            "No target pod or node was given: no walk ran (`gpubot why --bundle FILE ns/pod` replays one).",
            "",
        ]
    lines += [
        "Replay: `gpubot why --bundle THIS_FILE NAMESPACE/POD`.",
        "",
        f"{len(manifest.errors)} read(s) failed (errors.txt), {len(manifest.skipped)} part(s) skipped, "
        f"{len(manifest.cut)} cut by caps (manifest.json).",
    ]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def collect_bundle(
    cluster: Cluster,
    telemetry: Telemetry,
    out_path: str | Path,
    *,
    node: str | None = None,
    target: tuple[str, str] | None = None,
    walk: WalkResult | None = None,
    with_bug_report: bool = False,
    exec_fn: ExecFn | None = None,
    caps: Caps | None = None,
    progress: Progress | None = None,
    operator_namespace: str | None = None,
    ledger: Ledger | None = None,
    actor: str = "",
) -> BundleReport:
    """Collect a must-gather bundle into `out_path` (written whole or not at all).

    Raises SourceError only for what makes a bundle pointless: the node or the
    target pod does not exist (not_found), or the cluster cannot be reached at all.
    A bundle written is a `bundle` entry in the node's `ledger` (the node asked for, else the
    target's; who: `actor`), so the node's history says a bundle exists and who took it.
    """
    caps = caps or Caps()
    say: Progress = progress or (lambda _msg: None)
    target_pod = cluster.get_pod(*target) if target else None
    if node:
        cluster.get_node(node)
    scope = rm.GatherScope(
        node=node, target=target, target_node=o.pod_node(target_pod) if target_pod else None
    )
    now = telemetry.now()
    label = f"node {node}" if node else "all GPU nodes"
    if target:
        label += f", pod {target[0]}/{target[1]}"
    manifest = rm.Manifest(
        created=rm.rfc3339(now),
        source=f"{cluster.source}; metrics: {telemetry.source}",
        scope={"label": label, "node": node, "target": "/".join(target) if target else None},
        caps={
            "log_tail_lines": caps.log_tail_lines,
            "log_bytes": caps.log_bytes,
            "total_bytes": caps.total_bytes,
        },
    )
    out = Path(out_path)
    if not out.parent.is_dir():
        raise SourceError(
            "bad_input", f"cannot write the bundle: no folder {out.parent} (for --out {out_path})"
        )
    partial = out.with_name(f".{name_part(out.name, 200)}.partial")  # the name may be at the limit
    archive = Archive(partial, caps, manifest, now)
    c = Collector(cluster, telemetry, archive, scope, say)
    notes: list[str] = []
    try:
        nodes, scoped = c.cluster_objects()
        # Nothing can be collected from an API server that does not answer: its own error, whose
        # str() already carries the hint (re-wrapping it printed the hint twice).
        refused = c.failed.get("nodes")
        if not nodes and refused is not None and "unreachable" in refused.message:
            raise refused
        operator, operands = c.pods(operator_namespace)
        c.node_files(scoped, c.operator_ns)
        dra_files(c, scoped, target_pod)
        if target_pod is not None:
            c.target_files(target_pod)
            volume_files(c, target_pod)
        c.pod_files(operator, operands)
        telemetry_files(c, nodes, operands)
        if with_bug_report:
            notes += bug_reports(c, operands, exec_fn if exec_fn is not None else kube_exec(cluster))
        else:
            manifest.skipped.append({"what": "nvidia-bug-report", "why": "not requested (--with-bug-report)"})
        say("the walk")
        if c.raw_nodes:
            # A large fleet's bundle keeps what the target's walk reads (bot/actions/gather_walk.py).
            recorded = recorded_walk(c, telemetry, c.raw_nodes)
            c.raw_nodes = []
            walk = walk if walk is not None else recorded
        if walk is None:
            walk = _walk(cluster, telemetry, scope, manifest.errors)
        # The walk quotes raw log lines: masked like every other file of the bundle.
        archive.add("summary.md", c.free(_summary(manifest, walk, notes)), essential=True)
        say("scenario.yaml")
        write_scenario(
            archive,
            manifest,
            name=c.free(f"must-gather {label}"),
            description=c.free(
                f"must-gather of {label}, collected {manifest.created} from {manifest.source}"
            ),
            now=c.now,
            objects=[obj for key, obj in c.objects.items() if key not in c.compact],
            logs=c.logs,
            series=c.series,
            compact=[obj for key, obj in c.objects.items() if key in c.compact],
        )
        for error in manifest.errors:  # errors quote answers and URLs: free text (also in manifest.json)
            error["error"] = c.free(error["error"])
        errors_txt = "".join(f"{e['read']}: {e['error']}\n" for e in manifest.errors) or "no read failed\n"
        archive.add("errors.txt", errors_txt, essential=True)
        archive.add("manifest.json", json.dumps(manifest.to_dict(), indent=2) + "\n", essential=True)
        archive.close()
        os.replace(partial, out)
    except BaseException:
        archive.close()
        partial.unlink(missing_ok=True)
        raise
    finally:
        c.logs.close()
    after: list[str] = []
    logged = node or scope.target_node
    detail = f"must-gather {out.name}: {len(manifest.files)} files, {out.stat().st_size / 1e6:.1f} MB"
    if note := record_action(ledger, logged or "", "bundle", now, actor, detail):
        after.append(f"the bundle is {note}")
    return BundleReport(
        notes=after,
        path=str(out),
        files=len(manifest.files),
        content_bytes=archive.used,
        archive_bytes=out.stat().st_size,
        skipped=manifest.skipped,
        cut=manifest.cut,
        errors=manifest.errors,
        walk=walk,
    )
