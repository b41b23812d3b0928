"""Run DCGM diagnostics on a node as a Job, wait for it, read its result, clean up.

The plan (refusals, the manifest, the confirmation) is pure: layers/diagjob.py. Here the
Job is created in gpubot's namespace, watched (its pod's phase, the scheduler's verdict,
the Job's conditions) until it completes, fails, runs out of its deadline, cannot be
scheduled or is deleted by someone else, then its pod's log is read for `dcgmi diag -j`'s
JSON and the Job is deleted with its pod (`ttlSecondsAfterFinished` is the backstop when
gpubot itself dies). The result goes into the ledger as a `diag` entry per GPU.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.ledger.store import Ledger, LedgerUnavailable
from layers.diaggpus import GpuAsk, discovered, gpu_ask, tested_uuids, untested_after, without_discovery
from layers.diagjob import (
    CONTAINER,
    NODE_LABEL,
    DiagRefused,
    HostEngine,
    hostengine_for,
    job_manifest,
    job_name,
    level_refusal,
    node_label_value,
    refusal,
)
from layers.facts import objects as o
from layers.facts.dcgmdiag import DiagOutputError, DiagReport, read_job_log
from layers.facts.hosts import selector_for
from layers.facts.ledgerevents import Event
from layers.facts.ledgerfacts import GpuId
from layers.sources import Cluster, K8sObject, SourceError, Telemetry, TelemetryError

UNSCHEDULABLE_GRACE_S = 120.0  # the scheduler said no for this long: the Job will not start


class JobClient(Protocol):
    """The Job calls diagnostics make (batch/v1 in gpubot's namespace)."""

    def create_job(self, namespace: str, body: dict[str, Any]) -> K8sObject: ...

    def get_job(self, namespace: str, name: str) -> K8sObject | None:
        """The Job, or None when it no longer exists."""
        ...

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job and its pods (propagation Background); a missing Job is no error."""
        ...

    def list_jobs(self, namespace: str, label_selector: str) -> list[K8sObject]: ...


@dataclass
class DiagOutcome:
    node: str
    level: int
    job: str
    report: DiagReport | None = None
    raw: str = ""  # the JSON as dcgmi printed it, for the attachment
    failure: str | None = None  # why no result: deadline, unschedulable, deleted, no JSON
    notes: list[str] = field(default_factory=list)
    tested: dict[int, str] = field(default_factory=dict)  # DCGM's GPU entity -> its UUID ('' unknown)
    untested: list[str] = field(default_factory=list)  # the node's GPUs the result does not cover

    @property
    def ok(self) -> bool:
        return self.report is not None

    @property
    def verdict(self) -> str | None:
        """The node's verdict: DCGM's, except that a pass with GPUs untested is no pass (None: no result)."""
        if self.report is None:
            return None
        if self.report.verdict == "Pass" and self.untested:
            return "Incomplete"
        return self.report.verdict


@dataclass
class DiagPlan:
    node: K8sObject
    level: int
    manifest: dict[str, Any]
    hostengine: HostEngine
    ask: GpuAsk


def plan(
    cluster: Cluster,
    jobs: JobClient | None,
    node_name: str,
    level: int,
    *,
    namespace: str,
    image: str,
    requested_by: str,
    confirmed: int,
    operator_namespace: str | None = None,
    hostengine_setting: str | None = None,
    suffix: str | None = None,
    telemetry: Telemetry | None = None,
) -> DiagPlan:
    """The Job for this node and level, or DiagRefused saying why not (layers/diagjob.py). A level
    never offered is refused before any cluster read; `telemetry` names the GPUs by index and UUID."""
    by_level = level_refusal(level)
    if by_level is not None:
        raise DiagRefused(by_level)
    node = cluster.get_node(node_name)
    pods = cluster.list_pods(field_selector=f"spec.nodeName={node_name}")
    running: list[K8sObject] = []
    if jobs is not None:
        running = jobs.list_jobs(namespace, f"{NODE_LABEL}={node_label_value(node_name)}")
    try:
        policies = cluster.list_custom("nvidia.com", "v1", "clusterpolicies")
    except SourceError:
        policies = []  # no ClusterPolicy readable: the embedded default, said in the confirmation
    engine = hostengine_for(policies, operator_namespace, hostengine_setting)
    ask = _gpu_ask(cluster, telemetry, node, operator_namespace)
    why = refusal(node, pods, level, confirmed=confirmed, running=running, hostengine=engine, ask=ask)
    if why is not None:
        raise DiagRefused(why)
    runtime = _nvidia_runtime_class(cluster)
    name = job_name(node_name, suffix or secrets.token_hex(3))
    manifest = job_manifest(
        node,
        level,
        namespace=namespace,
        image=image,
        name=name,
        requested_by=requested_by,
        hostengine=engine,
        runtime_class=runtime,
        ask=ask,
    )
    assert ask is not None  # refused above when the node advertises no whole GPU
    return DiagPlan(node, level, manifest, engine, ask)


def _gpu_ask(
    cluster: Cluster, telemetry: Telemetry | None, node: K8sObject, operator_namespace: str | None
) -> GpuAsk | None:
    """What the Job asks for; where the plugin withdrew GPUs, which (its log, the health agents)."""
    from layers.facts.context import Settings, WalkContext
    from layers.facts.pluginlog import read_plugin_log
    from layers.findings import Target

    name = o.name(node)
    known = gpu_uuids(telemetry, name) if telemetry is not None else {}
    ask = gpu_ask(node, {}, known)
    if ask is None or ask.untested <= 0 or telemetry is None:
        return ask
    ctx = WalkContext(cluster, telemetry, Target(None, None, name), None, Settings(operator_namespace))
    log, _unread = read_plugin_log(ctx, name)
    return gpu_ask(node, log.unhealthy if log is not None else {}, known)


def _nvidia_runtime_class(cluster: Cluster) -> str | None:
    """The operator's RuntimeClass (handler nvidia) where the cluster has one, so the GPUs are injected."""
    try:
        classes = cluster.list_runtimeclasses()
    except SourceError:
        return None
    names = sorted(o.name(rc) for rc in classes if rc.get("handler") == "nvidia")
    return names[0] if names else None


def _pod_state(pods: list[K8sObject]) -> tuple[str, str]:
    """(phase, the scheduler's message when it could not place the pod)."""
    if not pods:
        return "", ""
    pod = pods[0]
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return "Unschedulable", str(c.get("message") or "")
    return str(status.get("phase") or "Pending"), ""


def _failed_condition(job: K8sObject) -> str | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"{c.get('reason') or 'Failed'}: {c.get('message') or ''}".rstrip(": ")
    return None


def _complete(job: K8sObject) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "SuccessCriteriaMet") and c.get("status") == "True" for c in conds
    )


def run(
    cluster: Cluster,
    jobs: JobClient,
    p: DiagPlan,
    *,
    poll_s: float = 2.0,
    unschedulable_grace_s: float = UNSCHEDULABLE_GRACE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[str], None] | None = None,
) -> DiagOutcome:
    """Create the Job and see it through; the Job is deleted at the end whatever happened."""
    meta = p.manifest["metadata"]
    ns, name = meta["namespace"], meta["name"]
    out = DiagOutcome(o.name(p.node), p.level, name)
    jobs.create_job(ns, p.manifest)
    deadline = clock() + p.manifest["spec"]["activeDeadlineSeconds"] + 120
    unschedulable_since: float | None = None
    try:
        while True:
            job = jobs.get_job(ns, name)
            if job is None:
                out.failure = f"Job {name} was deleted while it ran (by someone else, or its TTL)"
                return out
            pods = cluster.list_pods(namespace=ns, label_selector=f"job-name={name}")
            phase, why = _pod_state(pods)
            if progress is not None:
                progress(f"Job {name}: {phase or 'no pod yet'}")
            failed = _failed_condition(job)
            if failed is not None:
                out.failure = _failure_text(failed, p)
                _read_result(
                    cluster, ns, pods, out, p.ask, p.hostengine.standalone
                )  # a partial JSON still tells which test hung
                return out
            if _complete(job) or phase == "Succeeded":
                _read_result(cluster, ns, pods, out, p.ask, p.hostengine.standalone)
                return out
            if phase == "Unschedulable":
                unschedulable_since = unschedulable_since if unschedulable_since is not None else clock()
                if clock() - unschedulable_since >= unschedulable_grace_s:
                    out.failure = f"the diagnostic's pod cannot be scheduled on {out.node}: {why}"
                    return out
            else:
                unschedulable_since = None
            if clock() > deadline:
                out.failure = f"Job {name} did not finish within its deadline and the API never said why"
                return out
            sleep(poll_s)
    finally:
        try:
            jobs.delete_job(ns, name)
        except SourceError as err:
            out.notes.append(f"Job {name} not deleted ({err}); its TTL removes it within an hour")


def _failure_text(condition: str, p: DiagPlan) -> str:
    if condition.startswith("DeadlineExceeded"):
        limit = p.manifest["spec"]["activeDeadlineSeconds"]
        return (
            f"the diagnostic ran past its deadline of {limit // 60} minutes (level {p.level}) and was stopped"
        )
    return f"the diagnostic's Job failed ({condition})"


def _read_result(
    cluster: Cluster,
    ns: str,
    pods: list[K8sObject],
    out: DiagOutcome,
    ask: GpuAsk | None = None,
    standalone: bool = False,
) -> None:
    if not pods:
        out.failure = out.failure or "the Job finished without a pod to read"
        return
    try:
        log = cluster.pod_log(ns, o.name(pods[0]), CONTAINER, tail_lines=None, limit_bytes=8 << 20)
    except SourceError as err:
        out.failure = out.failure or f"the diagnostic's log could not be read: {err}"
        return
    listed = discovered(log)
    log = without_discovery(log)
    try:
        out.report = read_job_log(log)
        start = log.find("{")
        out.raw = log[start : log.rfind("}") + 1] if start >= 0 else ""
    except DiagOutputError as err:
        out.failure = out.failure or str(err)
        return
    entities = [r.entity for r in out.report.results if r.group == "GPU"]
    out.tested = tested_uuids(entities, listed, ask, standalone)
    out.untested = untested_after(ask, out.tested)


def record(ledger: Ledger, out: DiagOutcome, actor: str, now: float) -> None:
    """The result into the ledger: a `diag` entry per GPU tested (its verdict and failed tests, under
    the UUID the Job listed), serials kept; nothing for a GPU the diagnostic did not test, and no
    entry for the node as a whole unless the run gave no result at all."""
    events: list[Event] = []
    gpus: dict[str, GpuId] = {}
    if out.report is None:
        events.append(
            Event(
                out.node, "diag", now, source="diag", actor=actor, detail=f"level {out.level}: {out.failure}"
            )
        )
    else:
        rep = out.report
        by_gpu: dict[int, list[str]] = {}
        for r in rep.results:
            if r.group == "GPU":
                by_gpu.setdefault(r.entity, [])
                if r.status in ("Fail", "Warn"):
                    by_gpu[r.entity].append(f"{r.test} {r.status}")
        for index, failed in sorted(by_gpu.items()):
            uuid = out.tested.get(index, "")
            detail = f"level {out.level}: " + (", ".join(failed) if failed else "Pass")
            if not uuid:
                detail += f" (GPU {index}, UUID not known)"
            events.append(Event(out.node, "diag", now, gpu=uuid, source="diag", actor=actor, detail=detail))
            if uuid:
                gpus[uuid] = GpuId(uuid, str(index), rep.serials.get(index, ""))
    try:
        ledger.record(out.node, events, gpus, now=now)
    except LedgerUnavailable as err:
        out.notes.append(f"result not written to the ledger: {err}")


def gpu_uuids(telemetry: Telemetry | None, node: str) -> dict[int, str]:
    """GPU index -> UUID from the node's DCGM series, so each result is filed under its GPU."""
    if telemetry is None:
        return {}
    try:
        samples = telemetry.instant("DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_GPU_TEMP", selector_for([node]))
    except TelemetryError:
        return {}
    return {
        int(s.labels["gpu"]): s.labels.get("UUID", "") for s in samples if s.labels.get("gpu", "").isdigit()
    }


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_namespace(configured: str | None, path: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """gpubot's namespace: GPUBOT_DIAG_NAMESPACE, else the pod's service account's, else `gpubot`."""
    if configured:
        return configured
    try:
        with open(path, encoding="utf-8") as f:
            found = f.read().strip()
    except OSError:
        found = ""
    return found or "gpubot"
