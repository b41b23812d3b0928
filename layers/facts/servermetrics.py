"""The overload signals of SGLang and TGI, each server's own, for the pods layer 4 judges.

vLLM's (`vllm:num_preemptions_total`) are read with its config in layers/facts/walkfacts.py.
SGLang retracts running requests when its KV cache runs out — the counter
`sglang:num_retracted_requests_total` (newer releases) or the gauge `sglang:num_retracted_reqs`
(retractions since the last log interval) — and queues what it cannot batch
(`sglang:num_queue_reqs`); TGI queues (`tgi_queue_size`). A queue that never emptied over five
minutes is a server that is full, not one whose memory reservation is at fault.

Four calls for any number of pods, made only when a pod's GPU is at the framebuffer ceiling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from layers.facts import hosts
from layers.sources import Selector, Telemetry

WINDOW_S = 300
STEP_S = 30
SGLANG_RETRACTED_TOTAL = "sglang:num_retracted_requests_total"
SGLANG_RETRACTED = "sglang:num_retracted_reqs"
SGLANG_QUEUE = "sglang:num_queue_reqs"
TGI_QUEUE = "tgi_queue_size"


class ServerSignals(msgspec.Struct):
    """One pod's SGLang/TGI overload series. `servers`: whose series it has, in read order."""

    pod: hosts.PodRef
    servers: list[str] = msgspec.field(default_factory=list)
    retraction_rate: float | None = None  # rate(sglang:num_retracted_requests_total[5m])
    retracted_peak: float | None = None  # max_over_time(sglang:num_retracted_reqs[5m])
    queue_min: dict[str, float] = msgspec.field(default_factory=dict)  # metric -> its lowest value over 5 m

    def saw(self, server: str) -> None:
        if server not in self.servers:
            self.servers.append(server)

    @property
    def retracting(self) -> bool:
        return (self.retraction_rate or 0) > 0 or (self.retracted_peak or 0) > 0

    @property
    def backlog(self) -> dict[str, float]:
        """The queues that held requests at every step of the window."""
        return {m: v for m, v in self.queue_min.items() if v > 0}


def _server_of(metric: str) -> str:
    return "SGLang" if metric.startswith("sglang:") else "TGI"


def read_server_signals(
    telemetry: Telemetry, pods: Sequence[hosts.PodRef]
) -> dict[hosts.PodRef, ServerSignals]:
    """SGLang/TGI signals of the pods that have such series; pods without any are absent.
    Raises TelemetryError when the source is down."""
    if not pods:
        return {}
    match: list[Selector] = []
    for ns, pod in pods:
        match.extend(hosts.pod_selector(ns, pod))
    wanted = set(pods)
    out: dict[hosts.PodRef, ServerSignals] = {}

    def entry(labels: Mapping[str, str]) -> ServerSignals | None:
        ref = hosts.pod_of(labels)
        if ref is None or ref not in wanted:
            return None
        return out.setdefault(ref, ServerSignals(ref))

    for s in telemetry.rate(SGLANG_RETRACTED_TOTAL, WINDOW_S, match):
        if (e := entry(s.labels)) is not None:
            e.saw("SGLang")
            e.retraction_rate = (e.retraction_rate or 0.0) + s.value  # one series per DP/TP rank
    for s in telemetry.max_over_time(SGLANG_RETRACTED, WINDOW_S, match):
        if (e := entry(s.labels)) is not None:
            e.saw("SGLang")
            e.retracted_peak = max(e.retracted_peak or 0.0, s.value)
    for metric in (SGLANG_QUEUE, TGI_QUEUE):
        for series in telemetry.range(metric, WINDOW_S, STEP_S, match):
            if (e := entry(series.labels)) is not None:
                e.saw(_server_of(metric))
                _lowest(e, metric, [v for _, v in series.points if v == v])
    return out


def _lowest(e: ServerSignals, metric: str, values: list[float]) -> None:
    if values:
        low = min(values)
        # A server with several ranks queues on each: the pod's backlog is its smallest queue's.
        e.queue_min[metric] = min(e.queue_min.get(metric, low), low)
