"""Changes to a scenario that must not change its diagnosis, and a few that must (issue 18, "a
metamorphic suite"). Each is a small pure function from one scenario dict to another: the input is
never modified. A change that has nothing to act on (no operator namespace to move, no series to
relabel) returns an equal scenario, and its case passes trivially."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

Scenario = dict[str, Any]
WEEKS = timedelta(weeks=-3)


def _objects(s: Scenario) -> list[dict[str, Any]]:
    return [o for o in s.get("objects") or [] if isinstance(o, dict)]


def _kind(s: Scenario, kind: str) -> list[dict[str, Any]]:
    out = []
    for o in _objects(s):
        if o.get("kind") == kind:
            out.append(o)
        elif o.get("kind") == "List":
            out += [i for i in o.get("items") or [] if isinstance(i, dict) and i.get("kind") == kind]
    return out


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    meta = o.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _as_text(s: Scenario, edit: Callable[[str], str]) -> Scenario:
    return json.loads(edit(json.dumps(s)))


# --- order -----------------------------------------------------------------------------------------


def reorder_objects(s: Scenario) -> Scenario:
    """The API lists objects in no promised order."""
    out = copy.deepcopy(s)
    out["objects"] = list(reversed(out.get("objects") or []))
    return out


def reorder_series(s: Scenario) -> Scenario:
    """Prometheus returns series in no promised order; labels come in any order too."""
    out = copy.deepcopy(s)
    if isinstance(out.get("metrics"), list):
        out["metrics"] = [
            {**m, "metric": dict(reversed(list((m.get("metric") or {}).items())))}
            if isinstance(m, dict)
            else m
            for m in reversed(out["metrics"])
        ]
    return out


# --- names -----------------------------------------------------------------------------------------


def _cloud_name(i: int) -> str:
    return f"ip-10-{20 + i // 200}-{i % 200}-{(i * 37) % 250 + 3}.us-west-2.compute.internal"


def node_names_cloud_style(s: Scenario) -> Scenario:
    """Every node renamed as EKS names them (dots included), consistently everywhere the name is
    written: names, hostname labels, nodeName, events, logs, series labels, exposition, slices."""
    names = sorted({str(_meta(n).get("name")) for n in _kind(s, "Node") if _meta(n).get("name")}, key=len)
    mapping = {n: _cloud_name(i) for i, n in enumerate(sorted(names))}
    if not mapping:
        return copy.deepcopy(s)
    # Longest first, whole names only (not inside another name: `gpu-7` is not `gpu-70`, nor
    # `nvidia-driver-daemonset-gpu-7`); a sentence's full stop may follow.
    alternation = "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(rf"(?<![A-Za-z0-9.\-_])(?:{alternation})(?![A-Za-z0-9\-_]|\.[A-Za-z0-9])")
    return _as_text(s, lambda text: pattern.sub(lambda m: mapping[m.group(0)], text))


def exporter_hostname_lowercase(s: Scenario) -> Scenario:
    """dcgm-exporter's `Hostname` label spelled `hostname` (relabelled by some Prometheus set-ups)."""
    out = copy.deepcopy(s)
    for m in out.get("metrics") or []:
        labels = m.get("metric") if isinstance(m, dict) else None
        if isinstance(labels, dict) and "Hostname" in labels and "hostname" not in labels:
            labels["hostname"] = labels.pop("Hostname")
    if isinstance(out.get("exposition"), str):
        out["exposition"] = re.sub(r"(?<=[{,])Hostname=", "hostname=", out["exposition"])
    return out


# --- operator namespace -------------------------------------------------------------------------------

OPERATOR_NS, MOVED_NS = "gpu-operator", "nvidia-gpu-operator"


def operator_other_namespace(s: Scenario) -> Scenario:
    """The operator and its operands in `nvidia-gpu-operator` (OpenShift's), not `gpu-operator`: every
    object, event and log key of the namespace moves; GPUBOT_OPERATOR_NAMESPACE stays unset."""
    out = copy.deepcopy(s)
    if any(_meta(o).get("namespace") == MOVED_NS for o in _objects(out)):
        return out
    listed = [i for lst in _objects(out) for i in lst.get("items") or [] if isinstance(i, dict)]
    for o in _objects(out) + listed:
        meta = _meta(o)
        if meta.get("namespace") == OPERATOR_NS:
            meta["namespace"] = MOVED_NS
        inv = o.get("involvedObject")
        if isinstance(inv, dict) and inv.get("namespace") == OPERATOR_NS:
            inv["namespace"] = MOVED_NS
        if o.get("kind") == "Namespace" and meta.get("name") == OPERATOR_NS:
            meta["name"] = MOVED_NS
    logs = out.get("logs")
    if isinstance(logs, dict):
        out["logs"] = {
            (MOVED_NS + k[len(OPERATOR_NS) :] if k.startswith(OPERATOR_NS + "/") else k): v
            for k, v in logs.items()
        }
    for m in out.get("metrics") or []:
        labels = m.get("metric") if isinstance(m, dict) else None
        for key in ("namespace", "exported_namespace", "kubernetes_namespace"):
            if isinstance(labels, dict) and labels.get(key) == OPERATOR_NS:
                labels[key] = MOVED_NS
    if isinstance(out.get("exposition"), str):
        out["exposition"] = out["exposition"].replace(f'namespace="{OPERATOR_NS}"', f'namespace="{MOVED_NS}"')
    target = (out.get("x-expect") or {}).get("target")
    if isinstance(target, str) and target.startswith(OPERATOR_NS + "/"):
        out["x-expect"]["target"] = MOVED_NS + target[len(OPERATOR_NS) :]
    return out


# --- time ----------------------------------------------------------------------------------------------

_RFC3339 = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
_KLOG = re.compile(r"(?<![A-Za-z0-9])([IWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6})")
_GOLOG = re.compile(r"\b(\d{4})/(\d{2})/(\d{2}) (\d{2}:\d{2}:\d{2})")
_CTIME = re.compile(
    r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
    r"(\d{2}:\d{2}:\d{2}) (\d{4})"
)


def _shift_rfc3339(m: re.Match[str]) -> str:
    frac, zone = m.group(3) or "", m.group(4)
    t = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{'+00:00' if zone == 'Z' else zone}") + WEEKS
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + (zone if zone != "Z" else "Z")


def _now_year(s: Scenario) -> int:
    now = s.get("now")
    if isinstance(now, str):
        m = _RFC3339.search(now)
        if m:
            return int(m.group(1)[:4])
    return 2026


def timestamps_weeks_earlier(s: Scenario) -> Scenario:
    """Every instant three weeks earlier: `now`, objects' and events' timestamps, series' absolute
    times, and the log lines' own (klog `I1129 11:58:05.486697`, Go's `2026/11/29 11:58:05`, ctime)."""
    year = _now_year(s)

    def klog(m: re.Match[str]) -> str:
        t = datetime(year, int(m.group(2)), int(m.group(3)), tzinfo=UTC) + WEEKS
        return f"{m.group(1)}{t:%m%d} {m.group(4)}"

    def golog(m: re.Match[str]) -> str:
        t = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC) + WEEKS
        return f"{t:%Y/%m/%d} {m.group(4)}"

    def ctime(m: re.Match[str]) -> str:
        t = (
            datetime.strptime(f"{m.group(2)} {m.group(3)} {m.group(5)} {m.group(4)}", "%b %d %Y %H:%M:%S")
            + WEEKS
        )
        return f"{t:%a %b} {t.day:2d} {m.group(4)} {t.year}"

    out = _as_text(s, lambda text: _RFC3339.sub(_shift_rfc3339, text))
    logs = out.get("logs")
    if isinstance(logs, dict):
        out["logs"] = {k: _CTIME.sub(ctime, _GOLOG.sub(golog, _KLOG.sub(klog, v))) if isinstance(v, str) else v
                       for k, v in logs.items()}  # fmt: skip
    if isinstance(out.get("now"), int | float) and not isinstance(out.get("now"), bool):
        out["now"] = out["now"] + WEEKS.total_seconds()
    for m in out.get("metrics") or []:
        for sample in (m.get("values") or []) if isinstance(m, dict) else []:
            if isinstance(sample, list) and sample and isinstance(sample[0], int | float) and sample[0] > 1e9:
                sample[0] = sample[0] + WEEKS.total_seconds()
    return out


# --- the fleet around the target --------------------------------------------------------------------


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    cap = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    alloc = {**cap, "cpu": "63500m"}
    spec: dict[str, Any] = {}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels},
                     "creationTimestamp": "2026-09-01T00:00:00Z"},
        "spec": spec,
        "status": {"capacity": cap, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": "2026-09-01T00:00:00Z"}],
                   "nodeInfo": {"kubeletVersion": "v1.31.4", "kernelVersion": "5.15.0-1071-gke",
                                "osImage": "Ubuntu 22.04.5 LTS", "containerRuntimeVersion": "containerd://1.7.24"}},
    }  # fmt: skip


def _pod(name: str, ns: str, node: str, labels: dict[str, str], image: str, container: str,
         requests: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"meta-{name}", "labels": labels,
                     "creationTimestamp": "2026-09-02T00:00:00Z"},
        "spec": {"nodeName": node, "containers": [{"name": container, "image": image,
                                                   "resources": {"requests": requests or {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": container, "image": image, "ready": True, "restartCount": 0,
                                          "state": {"running": {"startedAt": "2026-09-02T00:01:00Z"}}}]},
    }  # fmt: skip


def cpu_workloads(s: Scenario) -> Scenario:
    """A CPU pool running CPU-only pods: nothing there asks for a GPU."""
    out = copy.deepcopy(s)
    objs = out.setdefault("objects", [])
    for n in range(3):
        node = f"meta-cpu-pool-{n:02d}"
        objs.append(_node(node, {"node.kubernetes.io/instance-type": "m6i.4xlarge"}))
        objs.append(_pod(f"meta-web-{n}", "meta-web", node, {"app": "web"}, "nginx:1.27", "web"))
        objs.append(_pod(f"meta-etl-{n}", "meta-batch", node, {"app": "etl"}, "python:3.12-slim", "etl",
                         {"cpu": "2", "memory": "4Gi"}))  # fmt: skip
    return out


def _operator_ns(s: Scenario) -> str:
    for p in _kind(s, "Pod"):
        if (_meta(p).get("labels") or {}).get("app") in ("gpu-operator", "nvidia-device-plugin-daemonset"):
            return str(_meta(p).get("namespace") or OPERATOR_NS)
    return OPERATOR_NS


def _gpu_template(s: Scenario) -> dict[str, Any] | None:
    """A GPU node of the scenario to copy: new nodes look like its (GFD labels or none, cloud labels)."""
    for n in _kind(s, "Node"):
        alloc = (n.get("status") or {}).get("allocatable") or {}
        if any(k.startswith("nvidia.com/") and str(v).isdigit() and int(v) > 0 for k, v in alloc.items()):
            return n
    return None  # no node advertises a GPU: a new one that did would change the cluster's premise


_AVAILABLE = re.compile(r"0/(\d+) nodes are available: ")
_NOT_HELPFUL = re.compile(r"(\d+) (Preemption is not helpful for scheduling|No preemption victims found)")


def _scheduler_saw(s: Scenario, count: int, reason: str) -> None:
    """The scheduler's messages count the new nodes, with the reason it gives for them, as it would."""

    def edit(text: str) -> str:
        if not _AVAILABLE.search(text):
            return text
        text = _AVAILABLE.sub(lambda m: f"0/{int(m.group(1)) + count} nodes are available: ", text)
        text = text.replace("nodes are available: ", f"nodes are available: {count} {reason}, ", 1)
        return _NOT_HELPFUL.sub(lambda m: f"{int(m.group(1)) + count} {m.group(2)}", text)

    for o in _objects(s):
        if o.get("kind") == "Event" and isinstance(o.get("message"), str):
            o["message"] = edit(o["message"])
        for c in ((o.get("status") or {}).get("conditions") or []) if o.get("kind") == "Pod" else []:
            if isinstance(c, dict) and isinstance(c.get("message"), str):
                c["message"] = edit(c["message"])


def _clone_gpu_node(template: dict[str, Any], name: str, product: str, extra: dict[str, str],
                    taints: list[dict[str, str]], gpus: int, allocatable: int,
                    unschedulable: bool = False) -> dict[str, Any]:  # fmt: skip
    node = copy.deepcopy(template)
    meta = node.setdefault("metadata", {})
    old = meta.get("name")
    meta["name"] = name
    meta.pop("uid", None)
    labels = meta.setdefault("labels", {})
    for k, v in list(labels.items()):
        if v == old:
            labels[k] = name
    if "nvidia.com/gpu.product" in labels:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus)
    labels.update({k: v for k, v in extra.items() if k.split("/")[0] in {x.split("/")[0] for x in labels}})
    node["spec"] = {
        k: v
        for k, v in (node.get("spec") or {}).items()
        if k not in ("taints", "unschedulable", "providerID")
    }
    node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    # The template's own GPU resources (whole GPUs, MIG profiles, shared replicas: the cluster's
    # strategy), one short on a node that lost a GPU.
    status = node.setdefault("status", {})
    alloc = dict(status.get("allocatable") or {})
    status["capacity"] = {
        **(status.get("capacity") or {}),
        **{k: v for k, v in alloc.items() if k.startswith("nvidia.com/")},
    }
    if allocatable < gpus:
        key = next(
            k
            for k in sorted(alloc)
            if k.startswith("nvidia.com/") and str(alloc[k]).isdigit() and int(alloc[k]) > 0
        )
        alloc[key] = str(int(alloc[key]) - 1)
    status["allocatable"] = alloc
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"] or [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ]
    for c in status["conditions"]:
        c.update({"status": "True", "reason": "KubeletReady"})
    return node


DEDICATED = [{"key": "dedicated", "value": "l40s-inference", "effect": "NoSchedule"}]


def healthy_pool_other_driver(s: Scenario) -> Scenario:
    """Four healthy L40S nodes of their own node pool on driver branch 535 (cloud nodepool label, their
    own gpu.product), tainted for a dedicated team, with their operands Running: not the target's
    candidates. Built in the style of the scenario's own GPU nodes."""
    out = copy.deepcopy(s)
    template = _gpu_template(out)
    if template is None:
        return out
    objs = out.setdefault("objects", [])
    extra = {"cloud.google.com/gke-nodepool": "l40s-inference", "eks.amazonaws.com/nodegroup": "l40s-inference",
             "nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "230",
             "nvidia.com/cuda.driver.rev": "02", "nvidia.com/cuda.driver-version.full": "535.230.02"}  # fmt: skip
    ns = _operator_ns(s)
    tname = _meta(template).get("name")
    operands = [p for p in _kind(out, "Pod") if (p.get("spec") or {}).get("nodeName") == tname
                and _meta(p).get("namespace") == ns]  # fmt: skip
    for n in range(4):
        name = f"meta-l40s-pool-{n:02d}"
        objs.append(_clone_gpu_node(template, name, "NVIDIA-L40S", extra, DEDICATED, 4, 4))
        for p in operands:
            pod = copy.deepcopy(p)
            pod["spec"]["nodeName"] = name
            pod["metadata"]["name"] = f"{_meta(p).get('name')}-meta{n}"
            pod["metadata"].pop("uid", None)
            for c in pod["spec"].get("containers") or []:
                c["image"] = re.sub(r"driver:\d+\.\d+(\.\d+)?", "driver:535.230.02", str(c.get("image")))
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                             "containerStatuses": [{"name": c.get("name"), "image": c.get("image"), "ready": True,
                                                    "restartCount": 0,
                                                    "state": {"running": {"startedAt": "2026-09-02T00:01:00Z"}}}
                                                   for c in pod["spec"].get("containers") or []]}  # fmt: skip
            objs.append(pod)
    _scheduler_saw(out, 4, "node(s) had untolerated taint {dedicated: l40s-inference}")
    return out


def sick_nodes_elsewhere(s: Scenario) -> Scenario:
    """Two sick GPU nodes the target cannot use, tainted by a health controller: one cordoned that lost
    a GPU (allocatable below capacity), one whose GPU fell off the bus. Not candidates (an untolerated
    NoExecute taint), in the style of the scenario's own GPU nodes."""
    out = copy.deepcopy(s)
    template = _gpu_template(out)
    if template is None:
        return out
    taint = [{"key": "nvidia.com/gpu.health", "value": "xid-79", "effect": "NoExecute"}]
    out.setdefault("objects", []).extend([
        _clone_gpu_node(template, "meta-a100-sick-00", "NVIDIA-A100-SXM4-40GB", {}, taint, 8, 7, unschedulable=True),
        _clone_gpu_node(template, "meta-a100-sick-01", "NVIDIA-A100-SXM4-40GB", {}, taint, 8, 8),
    ])  # fmt: skip
    _scheduler_saw(out, 2, "node(s) had untolerated taint {nvidia.com/gpu.health: xid-79}")
    return out


INVARIANT: dict[str, Callable[[Scenario], Scenario]] = {
    "reorder_objects": reorder_objects,
    "reorder_series": reorder_series,
    "node_names_cloud_style": node_names_cloud_style,
    "exporter_hostname_lowercase": exporter_hostname_lowercase,
    "operator_other_namespace": operator_other_namespace,
    "timestamps_weeks_earlier": timestamps_weeks_earlier,
    "cpu_workloads": cpu_workloads,
    "healthy_pool_other_driver": healthy_pool_other_driver,
    "sick_nodes_elsewhere": sick_nodes_elsewhere,
}


# --- positive controls: changes that must change the diagnosis ----------------------------------------


def _target_pod(s: Scenario) -> dict[str, Any] | None:
    ns, _, name = str((s.get("x-expect") or {}).get("target") or "").partition("/")
    for p in _kind(s, "Pod"):
        if _meta(p).get("namespace") == ns and _meta(p).get("name") == name:
            return p
    return None


def xid79_on_target_node(s: Scenario) -> Scenario | None:
    """The target's node loses a GPU to Xid 79: the device plugin marks it unhealthy, allocatable drops.
    None when the target is not bound to a node that advertises nvidia.com/gpu."""
    out = copy.deepcopy(s)
    pod = _target_pod(out)
    node_name = ((pod or {}).get("spec") or {}).get("nodeName")
    for n in _kind(out, "Node"):
        status = n.get("status") or {}
        cap = (status.get("capacity") or {}).get("nvidia.com/gpu")
        if _meta(n).get("name") != node_name or cap is None or int(cap) < 1:
            continue
        alloc = status.setdefault("allocatable", {})
        if int(alloc.get("nvidia.com/gpu", cap)) < int(cap):
            return None  # already short of a GPU: this control has nothing to add
        alloc["nvidia.com/gpu"] = str(int(cap) - 1)
        return out
    return None


def xid79_taint_on_target_dra_device(s: Scenario) -> Scenario | None:
    """The DRA driver taints a GPU the target's claim holds (gpu.nvidia.com/xid=79, NoExecute). None
    when the target holds no allocated DRA device."""
    out = copy.deepcopy(s)
    pod = _target_pod(out)
    if pod is None or not (pod.get("spec") or {}).get("nodeName"):
        return None  # an unbound pod's claim may be allocated elsewhere: its devices are not its node's
    ns = _meta(pod).get("namespace")
    names = {
        str(c.get("resourceClaimName")) for c in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names |= {str(c.get("resourceClaimName")) for c in (pod.get("spec") or {}).get("resourceClaims") or []}
    held: set[tuple[str, str]] = set()
    for claim in _kind(out, "ResourceClaim"):
        if _meta(claim).get("namespace") == ns and _meta(claim).get("name") in names:
            alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            held |= {(str(r.get("pool")), str(r.get("device"))) for r in alloc.get("results") or []}
    tainted = False
    for sl in _kind(out, "ResourceSlice"):
        pool = str(((sl.get("spec") or {}).get("pool") or {}).get("name"))
        for d in (sl.get("spec") or {}).get("devices") or []:
            if (pool, str(d.get("name"))) in held and not d.get("taints"):
                d["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute",
                                "timeAdded": "2026-11-30T07:02:44Z"}]  # fmt: skip
                tainted = True
    return out if tainted else None


CONTROLS: dict[str, Callable[[Scenario], Scenario | None]] = {
    "xid79_on_target_node": xid79_on_target_node,
    "xid79_taint_on_target_dra_device": xid79_taint_on_target_dra_device,
}
