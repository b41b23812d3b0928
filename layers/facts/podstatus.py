"""Readers over a pod's status: what kubectl shows, which stage stopped, why it is failing.

Pure functions over the Kubernetes pod dict (status.containerStatuses,
initContainerStatuses, conditions), shared by layers 2 and 3.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from layers.facts import objects as o
from layers.sources import K8sObject


def display_status(pod: K8sObject) -> str:
    """kubectl's STATUS column with READY and RESTARTS: `Init:0/4`, `Init:CrashLoopBackOff`, `Running`…"""
    inits = o.container_statuses(pod, init=True)
    mains = o.container_statuses(pod)
    count = restarts(pod)
    ready = f"{sum(1 for s in mains if s.get('ready'))}/{len(o.containers(pod)) or len(mains)}"
    n_init = len(o.containers(pod, init=True)) or len(inits)
    status = o.pod_phase(pod)
    for i, s in enumerate(inits):
        term = (s.get("state") or {}).get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        reason = o.waiting_reason(s)
        if term:
            status = f"Init:{term.get('reason') or 'Error'}"
        elif reason and reason != "PodInitializing":
            status = f"Init:{reason}"
        else:
            status = f"Init:{i}/{n_init}"
        break
    else:
        for s in mains:
            reason = o.waiting_reason(s) or ((s.get("state") or {}).get("terminated") or {}).get("reason")
            if reason:
                status = str(reason)
                break
    return f"{status}, ready {ready}, restarts {count}"


def in_init(pod: K8sObject) -> bool:
    """Still running its init containers (some init container has not completed)."""
    inits = o.container_statuses(pod, init=True)
    if not inits:
        return o.pod_phase(pod) == "Pending" and bool(o.containers(pod, init=True))
    return any(((s.get("state") or {}).get("terminated") or {}).get("exitCode") != 0 for s in inits)


def state_text(s: dict[str, Any]) -> str:
    """One container's state as evidence: `waiting: Reason`, `terminated: Reason (exit code N)`."""
    state = s.get("state") or {}
    if "waiting" in state:
        return f"waiting: {(state['waiting'] or {}).get('reason') or 'waiting'}"
    if "terminated" in state:
        t = state["terminated"] or {}
        return f"terminated: {t.get('reason') or 'Error'} (exit code {t.get('exitCode')})"
    if "running" in state:
        return "running (not finished)"
    return "no state reported"


def stopped_stage(pod: K8sObject) -> tuple[str, dict[str, Any]]:
    """The first init container that has not succeeded, else the first unready container."""
    inits = {str(s.get("name")): s for s in o.container_statuses(pod, init=True)}
    order = [str(c.get("name")) for c in o.containers(pod, init=True)] or list(inits)
    for name in order:
        s = inits.get(name, {"name": name})
        if ((s.get("state") or {}).get("terminated") or {}).get("exitCode") != 0:
            return name, s
    for s in o.container_statuses(pod):
        if not s.get("ready"):
            return str(s.get("name")), s
    main = o.containers(pod)
    name = str(main[0].get("name")) if main else "nvidia-operator-validator"
    return name, {"name": name}


def status_messages(pod: K8sObject) -> list[str]:
    """Every message a pod's status carries: pod, conditions, container states."""
    status = pod.get("status") or {}
    out = [str(status.get("message") or "")]
    out += [str(c.get("message") or "") for c in status.get("conditions") or []]
    for _init, cs in o.iter_all_statuses(pod):
        for key in ("state", "lastState"):
            for st in (cs.get(key) or {}).values():
                if isinstance(st, dict):
                    out.append(str(st.get("message") or ""))
    return [m for m in out if m]


def container_names(pod: K8sObject, fallback: Iterable[str]) -> list[str]:
    """Every container the pod names (init first, spec then status); `fallback` when it names none."""
    names = [c.get("name") for c in o.containers(pod, init=True) + o.containers(pod)]
    names += [s.get("name") for _, s in o.iter_all_statuses(pod)]
    out = list(dict.fromkeys(str(n) for n in names if n))
    return out or list(fallback)


def container_status(pod: K8sObject, container: str) -> dict[str, Any] | None:
    """The status of one container (init or main), None when the pod reports none."""
    for _, s in o.iter_all_statuses(pod):
        if s.get("name") == container:
            return s
    return None


def restarts(pod: K8sObject) -> int:
    """kubectl's RESTARTS: the restart counts of all the pod's containers."""
    return sum(int(str(s.get("restartCount") or 0)) for _i, s in o.iter_all_statuses(pod))


def restarted(pod: K8sObject, container: str) -> bool:
    """Did the container restart: whether a previous log may exist (the one notion every layer asks);
    unknown status (a sparse scenario) counts as yes."""
    s = container_status(pod, container)
    return s is None or int(str(s.get("restartCount") or 0)) > 0 or bool(s.get("lastState"))


def status_failing(s: dict[str, Any], init: bool) -> str | None:
    """Why one container is failing, or None."""
    kind = "init container" if init else "container"
    restarts = int(str(s.get("restartCount") or 0))
    waiting = o.waiting_reason(s)
    term = (s.get("state") or {}).get("terminated") or {}
    last = (s.get("lastState") or {}).get("terminated") or {}
    if waiting and waiting not in ("ContainerCreating", "PodInitializing"):
        return f"{kind} {s.get('name')}: {waiting}, {restarts} restarts"
    if term and term.get("exitCode") not in (0, None):
        return f"{kind} {s.get('name')}: {term.get('reason') or 'exited'} {term.get('exitCode')}"
    if not s.get("ready") and not init and (restarts > 0 or last.get("exitCode") not in (0, None)):
        return f"{kind} {s.get('name')}: not ready, {restarts} restarts"
    return None


def failing(pod: K8sObject) -> list[str]:
    """Why a pod is failing, one line per container; empty when it is not."""
    out = [why for init, s in o.iter_all_statuses(pod) if (why := status_failing(s, init))]
    if not out and o.pod_phase(pod) == "Failed":
        out.append(f"pod phase Failed: {(pod.get('status') or {}).get('reason') or ''}".strip())
    return out
