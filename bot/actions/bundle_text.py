"""The readable files of a must-gather bundle: kubectl-like tables and descriptions.

Rendered from the same dicts that go into scenario.yaml, so what a person reads
in the bundle and what the replay diagnoses cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import yaml

from layers.facts import objects as o
from layers.facts.logsigs import event_time
from layers.sources import K8sObject

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(objs: Sequence[K8sObject]) -> str:
    """A `kubectl get -o yaml`-style List."""
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    return str(yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))


def _ts(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(value: object, now: float) -> str:
    """kubectl's short age: 45s, 12m, 5h, 3d."""
    t = _ts(value)
    if t is None:
        return "<unknown>"
    s = max(0, int(now - t))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(map(str, r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def _roles(node: K8sObject) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in o.labels(node) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_status(node: K8sObject) -> str:
    status = "Ready" if o.node_ready(node) else "NotReady"
    return status + (",SchedulingDisabled" if o.is_unschedulable(node) else "")


def _address(node: K8sObject, kind: str) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == kind:
            return str(a.get("address"))
    return "<none>"


def _gpu_pairs(node: K8sObject) -> str:
    cap = o.gpu_resources(node, "capacity")
    alloc = o.gpu_resources(node, "allocatable")
    return ",".join(f"{r}={cap[r]}/{alloc.get(r, 0)}" for r in sorted(cap)) or "<none>"


def nodes_labels(nodes: Sequence[K8sObject]) -> str:
    out = []
    for n in nodes:
        out.append(f"node/{o.name(n)}")
        out += [f"  {k}={v}" for k, v in sorted(o.labels(n).items())]
    return "\n".join(out) + "\n"


def nodes_status(nodes: Sequence[K8sObject], now: float) -> str:
    rows = []
    for n in nodes:
        info = o.node_info(n)
        rows.append(
            [
                o.name(n),
                _node_status(n),
                _roles(n),
                age(n.get("metadata", {}).get("creationTimestamp"), now),
                info.get("kubeletVersion", ""),
                _address(n, "InternalIP"),
                info.get("osImage", ""),
                info.get("kernelVersion", ""),
                info.get("containerRuntimeVersion", ""),
                _gpu_pairs(n),
            ]
        )
    header = ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION"]
    return table([*header, "CONTAINER-RUNTIME", "GPU CAPACITY/ALLOCATABLE"], rows)


def _mapping(title: str, values: dict[str, Any], indent: str = "                    ") -> list[str]:
    if not values:
        return [f"{title:<20}<none>"]
    items = sorted(values.items())
    first, rest = items[0], items[1:]
    return [f"{title:<20}{first[0]}={first[1]}"] + [f"{indent}{k}={v}" for k, v in rest]


def node_describe(node: K8sObject, pods: Sequence[K8sObject], events: Sequence[K8sObject], now: float) -> str:
    """A `kubectl describe node`-like text."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = [f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in spec.get("taints") or []]
    lines = [f"Name:               {o.name(node)}", f"Roles:              {_roles(node)}"]
    lines += _mapping("Labels:", o.labels(node))
    lines += _mapping("Annotations:", meta.get("annotations") or {})
    lines += [
        f"CreationTimestamp:  {meta.get('creationTimestamp', '<unknown>')}",
        f"Taints:             {(chr(10) + ' ' * 20).join(taints) or '<none>'}",
        f"Unschedulable:      {str(o.is_unschedulable(node)).lower()}",
        "Conditions:",
    ]
    conds = status.get("conditions") or []
    lines += [
        "  " + line
        for line in table(
            ["Type", "Status", "LastTransitionTime", "Reason", "Message"],
            [
                [
                    c.get("type", ""),
                    c.get("status", ""),
                    c.get("lastTransitionTime", ""),
                    c.get("reason", ""),
                    c.get("message", ""),
                ]
                for c in conds
            ],
        ).splitlines()
    ]
    lines.append("Addresses:")
    lines += [f"  {a.get('type')}: {a.get('address')}" for a in status.get("addresses") or []]
    for title in ("capacity", "allocatable"):
        lines.append(f"{title.capitalize()}:")
        lines += [f"  {k}: {v}" for k, v in sorted((status.get(title) or {}).items())]
    lines.append("System Info:")
    lines += [f"  {k}: {v}" for k, v in sorted(o.node_info(node).items())]
    lines.append(f"Non-terminated Pods: ({len(pods)} in total)")
    lines += [
        "  " + line
        for line in table(
            ["Namespace", "Name", "GPU Requests", "Age"],
            [
                [
                    o.namespace(p) or "",
                    o.name(p),
                    _gpu_req(p),
                    age(p.get("metadata", {}).get("creationTimestamp"), now),
                ]
                for p in pods
            ],
        ).splitlines()
    ]
    lines.append("Events:")
    lines += ["  " + line for line in events_table(events, now).splitlines()] if events else ["  <none>"]
    return "\n".join(lines) + "\n"


def _gpu_req(pod: K8sObject) -> str:
    return ",".join(f"{r}={n}" for r, n in sorted(o.pod_requests(pod).items()) if o.is_gpu_resource(r)) or "0"


def _ready(pod: K8sObject) -> str:
    statuses = o.container_statuses(pod)
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(o.containers(pod)) or len(statuses)}"


def pod_status_word(pod: K8sObject) -> str:
    """kubectl's STATUS column: Init:0/2, CrashLoopBackOff, Running, …"""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    inits = o.container_statuses(pod, init=True)
    for i, s in enumerate(inits):
        reason = o.waiting_reason(s)
        terminated = (s.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) == 0:
            continue
        if reason and reason != "PodInitializing":
            return f"Init:{reason}"
        if terminated:
            return f"Init:{terminated.get('reason') or 'Error'}"
        return f"Init:{i}/{len(inits)}"
    for s in o.container_statuses(pod):
        reason = o.waiting_reason(s)
        if reason:
            return reason
        terminated = (s.get("state") or {}).get("terminated") or {}
        if terminated.get("reason"):
            return str(terminated["reason"])
    return str((pod.get("status") or {}).get("reason") or o.pod_phase(pod) or "Unknown")


def pods_status(pods: Sequence[K8sObject], now: float) -> str:
    rows = [
        [
            o.namespace(p) or "",
            o.name(p),
            _ready(p),
            pod_status_word(p),
            str(sum(int(s.get("restartCount") or 0) for s in o.container_statuses(p))),
            age(p.get("metadata", {}).get("creationTimestamp"), now),
            (p.get("status") or {}).get("podIP") or "<none>",
            o.pod_node(p) or "<none>",
        ]
        for p in pods
    ]
    return table(["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"], rows)


def pod_images(pods: Sequence[K8sObject]) -> str:
    lines = []
    for p in pods:
        for init, kind in ((True, "init"), (False, "container")):
            for c in o.containers(p, init=init):
                lines.append(f"{o.namespace(p)}/{o.name(p)} {kind} {c.get('name')}: {c.get('image')}")
    return "\n".join(lines) + ("\n" if lines else "")


def daemonsets_status(dss: Sequence[K8sObject], now: float) -> str:
    rows = []
    for ds in dss:
        st = ds.get("status") or {}
        selector = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector") or {}
        rows.append(
            [
                o.namespace(ds) or "",
                o.name(ds),
                *(
                    str(st.get(k, 0))
                    for k in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
                ),
                str(st.get("updatedNumberScheduled", 0)),
                str(st.get("numberAvailable", 0)),
                ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
                age(ds.get("metadata", {}).get("creationTimestamp"), now),
            ]
        )
    header = [
        "NAMESPACE",
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE SELECTOR",
        "AGE",
    ]
    return table(header, rows)


def events_table(events: Sequence[K8sObject], now: float) -> str:
    # event_time: an events.k8s.io-recorded event (the scheduler's) has no lastTimestamp and its
    # eventTime is the first occurrence; the latest is series.lastObservedTime.
    when = event_time
    rows = []
    for e in sorted(events, key=when):
        inv = e.get("involvedObject") or {}
        count = e.get("count") or (e.get("series") or {}).get("count") or 1
        rows.append(
            [
                age(when(e), now),
                str(e.get("type", "")),
                str(e.get("reason", "")),
                f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
                f"x{count}",
                " ".join(str(e.get("message", "")).split()),
            ]
        )
    return table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"], rows)
