"""Choosing the sources: each of cluster, metrics and state on its own (spec/interfaces.md)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from bot.ops.config import Config
from layers.sources import Cluster, ClusterWriter, NoTelemetry, SourceError, Telemetry

if TYPE_CHECKING:  # imported where a scenario or a bundle is read: a live cluster's `why` skips it
    from bot.sources.snapshot import SnapshotCluster


class Sources(msgspec.Struct):
    cluster: Cluster
    writer: ClusterWriter
    telemetry: Telemetry
    description: str
    offline: bool = False  # a scenario or a bundle: writes change only this process's copy


def bundled_scenarios() -> list[Path]:
    """The scenario files shipped with the package, sorted by name."""
    from importlib import resources  # ~5 ms (tempfile and more): only scenarios need it

    folder = resources.files("bot") / "scenarios"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml"))


def resolve_scenario(ref: str) -> Path:
    """A path, or the name of a bundled scenario (file stem or its `name:`)."""
    path = Path(ref)
    if path.exists():
        return path
    for p in bundled_scenarios():
        if p.stem == ref or p.stem == ref.removesuffix(".yaml"):
            return p
    if "/" in ref or ref.endswith((".yaml", ".yml", ".json")):
        return path  # let the loader say the file is missing, naming it
    raise SourceError(
        "bad_input", f"no scenario file or bundled scenario named {ref!r} (see `gpubot scenarios`)"
    )


def open_sources(
    cfg: Config,
    *,
    scenario: str | None = None,
    bundle: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    prometheus_url: str | None = None,
) -> Sources:
    from bot.ops.config import ConfigError, check_url

    if scenario and bundle:
        raise SourceError("bad_input", "give --scenario or --bundle, not both: each is a whole cluster")
    if (scenario or bundle) and (kubeconfig or context):
        # The cluster flags used to be ignored without a word. A real cluster with a scenario's
        # metrics (interfaces.md) is not built yet: the series keep the scenario's clock.
        raise SourceError(
            "bad_input",
            f"give --{'scenario' if scenario else 'bundle'} or --kubeconfig/--context, not both: each is a "
            "whole cluster (a live cluster with a scenario's metrics is not supported yet)",
        )
    # An explicit --kubeconfig/--context wins over GPUBOT_SCENARIO from the environment.
    scenario = scenario or (cfg.scenario if not (bundle or kubeconfig or context) else None)
    if prometheus_url is not None:  # an empty --prometheus-url '' is a mistake, not "no metrics"
        check_url("--prometheus-url", prometheus_url, ("http", "https"))
    prometheus_url = prometheus_url or cfg.prometheus_url
    series_telemetry: Telemetry | None = None
    cluster: SnapshotCluster | Cluster
    writer: ClusterWriter
    if bundle:
        from bot.sources.bundle_reader import read_bundle
        from bot.sources.scenario import build_sources

        sc = read_bundle(bundle)
        snap, series_telemetry = build_sources(sc, consume=True)  # sc is read for these alone
        cluster, writer, desc = snap, snap, f"bundle {bundle}"
    elif scenario:
        from bot.sources.scenario import build_sources, load_scenario

        sc = load_scenario(resolve_scenario(scenario))
        snap, series_telemetry = build_sources(sc, consume=True)  # sc is read for these alone
        cluster, writer, desc = snap, snap, f"scenario {sc.name}"
    else:
        from bot.sources.kube import KubeCluster

        kube = KubeCluster.from_config(kubeconfig or cfg.kubeconfig, context)
        cluster, writer, desc = kube, kube, kube.source
    telemetry: Telemetry
    if prometheus_url:
        from bot.sources.prom import PrometheusTelemetry

        if cfg.prometheus_ca and not os.path.isfile(cfg.prometheus_ca):
            raise ConfigError(f"PROMETHEUS_CA_BUNDLE names no readable file: {cfg.prometheus_ca}")
        telemetry = PrometheusTelemetry(
            prometheus_url, token=cfg.prometheus_token, ca_bundle=cfg.prometheus_ca
        )
    elif series_telemetry is not None:
        telemetry = series_telemetry
    else:
        telemetry = NoTelemetry(now=time.time)
    return Sources(
        offline=bool(scenario or bundle),
        cluster=cluster,
        writer=writer,
        telemetry=telemetry,
        description=f"{desc}; metrics: {telemetry.source}",
    )


def sources_from_args(cfg: Config, args: Any) -> Sources:
    """The sources named by a command's standard flags (see bot/cli/args.py `add_sources`)."""
    from bot.ops.config import check_url

    if getattr(args, "redis_url", None) is not None:
        # Checked even where this command would not use it (a scenario's cordon): a bad flag is bad input.
        check_url("--redis-url", args.redis_url, ("redis", "rediss", "unix"))
    return open_sources(
        cfg,
        scenario=args.scenario,
        bundle=args.bundle,
        kubeconfig=args.kubeconfig,
        context=args.context,
        prometheus_url=args.prometheus_url,
    )
