"""What layer 4 knows of one pod as an inference server: the recogniser's answer (inference.py) with
the series it has — vLLM's (walkfacts.py), SGLang's and TGI's (servermetrics.py) — read once a walk.

The ConfigMap a pod's script comes from is read through the walk's cluster, cached, and only when a
GPU of the pod is at the framebuffer ceiling (or its own spec already names a server).
"""

from __future__ import annotations

import msgspec

from layers.facts import hosts
from layers.facts import inference as inf
from layers.facts import servermetrics as sm
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.sources import K8sObject, SourceError, TelemetryError


class PodServer(msgspec.Struct):
    """What layer 4 knows of one pod as an inference server: its recognition and own overload series."""

    ref: hosts.PodRef
    recognition: inf.Recognition
    vllm: wf.VllmFacts | None
    signals: sm.ServerSignals | None
    unread: str | None = None  # why the SGLang/TGI series could not be read

    @property
    def server(self) -> inf.Server | None:
        return self.recognition.server

    @property
    def checked(self) -> bool:
        """The server's own overload signal was read (vLLM, SGLang or TGI series for the pod)."""
        return self.vllm is not None or self.signals is not None

    @property
    def overloaded(self) -> bool:
        """Preempting or retracting: the finding that says so replaces the "normal reservation" one."""
        return bool(
            (self.vllm and (self.vllm.preemption_rate or 0) > 0) or (self.signals and self.signals.retracting)
        )


def pod_server(
    ctx: WalkContext, pod: K8sObject | None, ref: hosts.PodRef, vllm: wf.VllmFacts | None
) -> PodServer:
    """Recognise the pod (layers/facts/inference.py) with the series it has; read once per walk."""
    return ctx.cached(("inference_server", ref), lambda: _pod_server(ctx, pod, ref, vllm))


def _pod_server(
    ctx: WalkContext, pod: K8sObject | None, ref: hosts.PodRef, vllm: wf.VllmFacts | None
) -> PodServer:
    signals: sm.ServerSignals | None = None
    unread = None
    try:
        signals = sm.read_server_signals(ctx.telemetry, [ref]).get(ref)
    except TelemetryError as err:
        unread = str(err) or type(err).__name__
    series = (["vLLM"] if vllm is not None else []) + (signals.servers if signals else [])
    recognition = inf.recognise(pod or {}, series, lambda ns, name: _configmap(ctx, ns, name))
    return PodServer(ref, recognition, vllm, signals, unread)


def _configmap(ctx: WalkContext, namespace: str, name: str) -> K8sObject | None:
    def read() -> K8sObject | None:
        try:
            return ctx.cluster.get_configmap(namespace, name)
        except SourceError as err:
            if err.kind == "not_found":
                return None
            raise

    return ctx.cached(("configmap", namespace, name), read)
