"""Production-shaped fleets for incident scenarios: many GPU nodes, several pools, sick nodes elsewhere.

A `Fleet` collects nodes, their GPU Operator operands, events, logs and DCGM series in the scenario
format (spec/scenario.md) and the bundled scenarios' structural rules (tests/test_bundled_scenarios.py):
operand pods named after their daemonset with the operator's init and main containers, device-plugin
logs in the plugin's klog format (samples 06 and 08), DCGM series labelled as dcgm-exporter 3.x labels
them (sample 27). Noise is added by `sick_*` helpers, each the kind of thing a large fleet always has.

`python -m tests.incidents.fleets` rewrites the committed noise-fleet scenarios from
`tests/incidents/noise/build.py`; the YAML files, not this module, are what the tests read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

NS = "gpu-operator"
OPERATOR_VERSION = "v25.3.2"
PLUGIN_VERSION = "v0.17.3"

# GPU models by pool: (product label, modelName in DCGM, memory MiB, family, machine)
MODELS: dict[str, tuple[str, str, int, str, str]] = {
    "h100": ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, "hopper", "DGX-H100"),
    "a100": ("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, "ampere", "DGX-A100"),
    "l40s": ("NVIDIA-L40S", "NVIDIA L40S", 46068, "ada-lovelace", "PowerEdge-R760xa"),
    "l4": ("NVIDIA-L4", "NVIDIA L4", 23034, "ada-lovelace", "PowerEdge-R760"),
    "a10g": ("NVIDIA-A10G", "NVIDIA A10G", 23028, "ampere", "g5.12xlarge"),
}

PLUGIN_START = """\
I{d} 10:12:31.313485       1 main.go:235] "Starting NVIDIA Device Plugin" version="{v}"
I{d} 10:12:31.313679       1 main.go:245] Starting OS watcher.
I{d} 10:12:31.313873       1 main.go:317] Loading configuration.
I{d} 10:12:31.394067       1 main.go:356] Retrieving plugins.
I{d} 10:12:31.474164       1 server.go:195] Starting GRPC server for 'nvidia.com/gpu'
I{d} 10:12:31.474358       1 server.go:146] Registered device plugin for 'nvidia.com/gpu' with Kubelet
"""


def _h(*parts: object, n: int = 8) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:n]


def uuid_of(node: str, gpu: int) -> str:
    h = hashlib.sha1(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _suffix(*parts: object) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha1("/".join(map(str, parts)).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


@dataclass
class Fleet:
    name: str
    description: str
    now: str = "2026-11-29T10:12:00Z"
    objects: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)  # nodes whose faults must never decide the walk
    decides: str | None = None  # a positive control's one sick candidate, whose fault must decide
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _plugins: dict[str, str] = field(default_factory=dict)  # node -> device plugin pod

    # --- nodes --------------------------------------------------------------------------

    def control_plane(self, name: str = "k8s-cp-01") -> dict[str, Any]:
        node = self._node(name, labels={"node-role.kubernetes.io/control-plane": ""}, gpus=0)
        node["spec"]["taints"] = [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}]
        self.objects.append(_pod("gpu-operator-7fzxtpws4j-j7mkj", NS, name, {"app": "gpu-operator"},
                                 [("gpu-operator", f"nvcr.io/nvidia/gpu-operator:{OPERATOR_VERSION}")]))  # fmt: skip
        return node

    def cpu_node(self, name: str) -> dict[str, Any]:
        return self._node(name, labels={"node-role.kubernetes.io/worker": ""}, gpus=0)

    def gpu_node(
        self,
        name: str,
        model: str = "h100",
        gpus: int = 8,
        *,
        pool: str | None = None,
        allocatable: int | None = None,
        resource: str = "nvidia.com/gpu",
        advertise: bool = True,
        taints: list[dict[str, str]] | None = None,
        labels: dict[str, str] | None = None,
        operands: bool | str = True,  # True: the operands; "plugin": the device plugin only
        driver: str = "570.158.01",
        cuda: str = "12.8",
        plugin_version: str = PLUGIN_VERSION,
        series: bool = False,
        replicas: int = 1,
    ) -> dict[str, Any]:
        product, _, memory, family, machine = MODELS[model]
        lab = {
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/cuda.runtime-version.full": cuda,
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu.deploy.driver": "true",
            "nvidia.com/gpu.family": family,
            "nvidia.com/gpu.machine": machine,
            "nvidia.com/gpu.memory": str(memory),
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product + ("-SHARED" if replicas > 1 else ""),
            "nvidia.com/gpu.replicas": str(replicas),
            "nvidia.com/gpu.sharing-strategy": "time-slicing" if replicas > 1 else "none",
            "nvidia.com/mig.strategy": "single",
        }
        if pool:
            lab["pool"] = pool
        lab.update(labels or {})
        units = gpus * replicas
        node = self._node(name, labels=lab, gpus=units if advertise else 0, resource=resource)
        if advertise and allocatable is not None:
            node["status"]["allocatable"][resource] = str(allocatable)
        if taints:
            node["spec"]["taints"] = taints
        if operands:
            self.operands(name, plugin_version, plugin_only=operands == "plugin")
        if series:
            self.gpu_series(name, model, gpus)
        return node

    def _node(
        self, name: str, *, labels: dict[str, str], gpus: int, resource: str = "nvidia.com/gpu"
    ) -> dict[str, Any]:
        lab = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            **labels,
        }
        res = {"cpu": "96", "memory": "1056462012Ki", "pods": "110"}
        alloc = {"cpu": "95900m", "memory": "1056359612Ki", "pods": "110"}
        if gpus:
            res[resource] = str(gpus)
            alloc[resource] = str(gpus)
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": lab, "uid": _uid(name),
                         "creationTimestamp": "2026-08-01T10:12:00Z"},
            "spec": {"podCIDR": f"10.244.{int(_h(name, n=2), 16)}.0/24"},
            "status": {
                "capacity": res,
                "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                                "lastHeartbeatTime": "2026-11-29T10:11:23Z",
                                "lastTransitionTime": "2026-08-01T10:13:35Z"}],
                "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.27",
                             "kernelVersion": "5.15.0-134-generic", "kubeletVersion": "v1.31.6",
                             "operatingSystem": "linux", "osImage": "Ubuntu 22.04.5 LTS"},
            },
        }  # fmt: skip
        self.objects.append(node)
        self._nodes[name] = node
        return node

    def node(self, name: str) -> dict[str, Any]:
        return self._nodes[name]

    # --- operands -----------------------------------------------------------------------

    def operands(self, node: str, plugin_version: str = PLUGIN_VERSION, *, plugin_only: bool = False) -> None:
        """The operator's device plugin, validator and dcgm-exporter on the node (large noise fleets keep
        only the device plugin, whose log carries the noise, so the files stay small)."""
        val = f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}"
        plugin = f"nvidia-device-plugin-daemonset-{_suffix(node, 'dp')}"
        self.objects.append(
            _pod(plugin, NS, node, {"app": "nvidia-device-plugin-daemonset"},
                 [("nvidia-device-plugin", f"nvcr.io/nvidia/k8s-device-plugin:{plugin_version}")],
                 [("toolkit-validation", val)])
        )  # fmt: skip
        self._plugins[node] = plugin
        day = self.now[5:7] + "23"
        self.logs[f"{NS}/{plugin}/nvidia-device-plugin"] = PLUGIN_START.format(d=day, v=plugin_version)
        if plugin_only:
            return
        self.objects.append(
            _pod(f"nvidia-operator-validator-{_suffix(node, 'val')}", NS, node,
                 {"app": "nvidia-operator-validator"},
                 [("nvidia-operator-validator", val)],
                 [(c, val) for c in ("driver-validation", "toolkit-validation", "cuda-validation",
                                     "plugin-validation")])
        )  # fmt: skip
        self.objects.append(
            _pod(f"nvidia-dcgm-exporter-{_suffix(node, 'dcgm')}", NS, node, {"app": "nvidia-dcgm-exporter"},
                 [("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04")],
                 [("toolkit-validation", val)])
        )  # fmt: skip

    def mig_manager(self, node: str, log: str) -> str:
        """The MIG manager operand on the node, with its log."""
        val = f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}"
        name = f"nvidia-mig-manager-{_suffix(node, 'mig')}"
        self.objects.append(
            _pod(name, NS, node, {"app": "nvidia-mig-manager"},
                 [("nvidia-mig-manager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.12.1-ubuntu20.04")],
                 [("toolkit-validation", val)])
        )  # fmt: skip
        self.logs[f"{NS}/{name}/nvidia-mig-manager"] = log
        return name

    def plugin_log(self, node: str, lines: str) -> None:
        key = f"{NS}/{self._plugins[node]}/nvidia-device-plugin"
        self.logs[key] = self.logs[key] + lines

    # --- telemetry ----------------------------------------------------------------------

    def gpu_series(self, node: str, model: str, gpus: int, *, fb_used: float = 1024.0) -> None:
        model_name = MODELS[model][1]
        memory = MODELS[model][2]
        for gpu in range(gpus):
            base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}",
                    "modelName": model_name, "Hostname": node, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
            for metric, value in (
                ("DCGM_FI_DEV_FB_USED", fb_used),
                ("DCGM_FI_DEV_FB_FREE", memory - fb_used),
                ("DCGM_FI_DEV_XID_ERRORS", 0),
            ):
                self.series(metric, base, [[-3600, value], [0, value]])

    def series(self, metric: str, labels: dict[str, str], values: list[list[float]]) -> None:
        self.metrics.append({"metric": {"__name__": metric, **labels}, "values": values})

    # --- noise: what sick nodes elsewhere look like -------------------------------------------

    def sick_lost_gpu(self, node: str, xid: int = 79, gpu: int = 3) -> None:
        """A GPU marked unhealthy (allocatable below capacity) with the plugin's Xid line (sample 06)."""
        n = self._nodes[node]
        for res, cap in n["status"]["capacity"].items():
            if res.startswith("nvidia.com/"):
                replicas = int(n["metadata"]["labels"].get("nvidia.com/gpu.replicas", "1"))
                n["status"]["allocatable"][res] = str(int(cap) - replicas)
        uuid = uuid_of(node, gpu)
        self.plugin_log(
            node,
            f"I1129 09:58:05.486593       1 health.go:159] Processing event {{Device:{{Handle:0x7f7597647848}} "
            f"EventType:8 EventData:{xid} GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}\n"
            f"I1129 09:58:05.486697       1 health.go:185] XidCriticalError: Xid={xid} on Device={uuid}; "
            "marking device as unhealthy.\n"
            f"I1129 09:58:05.486727       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n",
        )
        self._noise(node)

    def sick_xid_series(self, node: str, model: str, xid: int = 48, gpu: int = 0) -> None:
        """A recent Xid in DCGM (sample 29's DCGM_EXP_XID_ERRORS_COUNT) and the last-Xid gauge."""
        base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}",
                "modelName": MODELS[model][1], "Hostname": node}  # fmt: skip
        self.series("DCGM_EXP_XID_ERRORS_COUNT", {**base, "xid": str(xid)}, [[-7200, 0], [-600, 1], [0, 1]])
        self.series("DCGM_FI_DEV_XID_ERRORS", base, [[-7200, 0], [-600, xid], [0, xid]])
        self._noise(node)

    def sick_rows_rising(self, node: str, model: str, gpu: int = 5) -> None:
        base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}",
                "modelName": MODELS[model][1], "Hostname": node}  # fmt: skip
        self.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", base, [[-80000, 2], [-3600, 9], [0, 11]])
        self.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", base, [[-80000, 0], [-3600, 1], [0, 1]])
        self.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[-80000, 0], [0, 0]])
        self._noise(node)

    def sick_not_advertising(self, node: str) -> None:
        """A GPU node whose device plugin never registered: labels, no GPU in capacity."""
        n = self._nodes[node]
        for key in ("capacity", "allocatable"):
            for res in [r for r in n["status"][key] if r.startswith("nvidia.com/")]:
                del n["status"][key][res]
        self._noise(node)

    def passthrough(self, node: str, workload: str = "vm-passthrough") -> None:
        """A KubeVirt node: its GPUs go to VMs (advertised by the sandbox plugin under a PCI name)."""
        n = self._nodes[node]
        n["metadata"]["labels"]["nvidia.com/gpu.workload.config"] = workload
        n["metadata"]["labels"]["nvidia.com/gpu.deploy.sandbox-device-plugin"] = "true"
        for key in ("capacity", "allocatable"):
            for res in [r for r in n["status"][key] if r.startswith("nvidia.com/")]:
                del n["status"][key][res]
            n["status"][key]["nvidia.com/GH100_H100_SXM5_80GB"] = "8"
        self._noise(node)

    def operands_off(self, node: str) -> None:
        n = self._nodes[node]
        n["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"] = "false"
        for key in ("capacity", "allocatable"):
            for res in [r for r in n["status"][key] if r.startswith("nvidia.com/")]:
                del n["status"][key][res]
        self._noise(node)

    def _noise(self, node: str) -> None:
        if node not in self.noise:
            self.noise.append(node)

    # --- workloads ------------------------------------------------------------------------

    def running_pod(
        self, name: str, namespace: str, node: str, gpus: int, resource: str = "nvidia.com/gpu"
    ) -> None:
        pod = _pod(name, namespace, node, {"app": name.rsplit("-", 1)[0]},
                   [("main", "nvcr.io/nvidia/pytorch:25.01-py3")])  # fmt: skip
        pod["spec"]["containers"][0]["resources"] = {"limits": {resource: str(gpus)}}
        self.objects.append(pod)

    def pending_pod(
        self,
        name: str,
        namespace: str,
        message: str | None,
        *,
        gpus: int = 1,
        resource: str = "nvidia.com/gpu",
        selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        gates: list[str] | None = None,
        image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [{"name": "main", "image": image,
                            "resources": {"limits": {resource: str(gpus)}, "requests": {resource: str(gpus)}}}],
            "serviceAccountName": "default",
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "tolerationSeconds": 300},
                *(tolerations or []),
            ],
        }  # fmt: skip
        if selector:
            spec["nodeSelector"] = selector
        if gates:
            spec["schedulingGates"] = [{"name": g} for g in gates]
            cond = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None, "lastTransitionTime": "2026-11-29T09:40:00Z"}  # fmt: skip
        else:
            cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": message, "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-29T10:02:00Z"}  # fmt: skip
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid(namespace, name),
                         "creationTimestamp": "2026-11-29T09:40:00Z", "labels": {"app": name}},
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort", "conditions": [cond]},
        }  # fmt: skip
        self.objects.append(pod)
        if message and not gates:
            self.event_for_pod(pod, "FailedScheduling", message)
        return pod

    def event_for_pod(self, pod: dict[str, Any], reason: str, message: str, kind: str = "Warning") -> None:
        meta = pod["metadata"]
        self.objects.append(
            {"apiVersion": "v1", "kind": "Event", "type": kind, "reason": reason, "message": message,
             "metadata": {"name": f"{meta['name']}.{_h(reason, message, n=16)}", "namespace": meta["namespace"]},
             "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                "namespace": meta["namespace"], "uid": meta["uid"]},
             "source": {"component": "default-scheduler"}, "count": 6,
             "firstTimestamp": "2026-11-29T10:02:00Z", "lastTimestamp": "2026-11-29T10:11:45Z"}
        )  # fmt: skip

    def event_for_node(self, node: str, reason: str, message: str, when: str, source: str) -> None:
        self.objects.append(
            {"apiVersion": "v1", "kind": "Event", "type": "Normal", "reason": reason, "message": message,
             "metadata": {"name": f"{node}.{_h(reason, message, when, n=16)}", "namespace": "default"},
             "involvedObject": {"kind": "Node", "name": node, "uid": _uid(node)},
             "source": {"component": source}, "count": 1, "firstTimestamp": when, "lastTimestamp": when}
        )  # fmt: skip

    # --- output ---------------------------------------------------------------------------

    def scenario(self, expect: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Scenario",
            "name": self.name,
            "description": self.description,
            "now": self.now,
            "objects": self.objects,
            "logs": self.logs,
        }
        if self.metrics:
            out["metrics"] = self.metrics
        out["x-noise"] = sorted(self.noise)
        if self.decides:
            out["x-decides"] = self.decides
        out["x-expect"] = expect
        return out

    def write(self, folder: Path, expect: dict[str, Any]) -> Path:
        path = folder / f"{self.name}.yaml"
        text = yaml.dump(
            self.scenario(expect), Dumper=_Compact, sort_keys=False, width=200, allow_unicode=True
        )
        path.write_text(text, encoding="utf-8")
        return path


# A recipe builds one incident: its fleet and the `x-expect` the walk must give.
Recipe = Callable[[], tuple[Fleet, dict[str, Any]]]


def write_recipes(recipes: Iterable[Recipe], folder: Path) -> None:
    """Rewrite each recipe's scenario file in `folder`, printing its path."""
    for recipe in recipes:
        fleet, expect = recipe()
        print(fleet.write(folder, expect))


def mixed_pools(
    name: str, description: str, *, a100: int = 6, h100: int = 6, l40s: int = 4, cpu: int = 3
) -> Fleet:
    """A fleet of three GPU pools (A100 `train`, H100 `infer`, L40S `viz` with 4 GPUs a node), each
    node with its device plugin, beside `cpu` CPU nodes."""
    f = Fleet(name, description)
    f.control_plane()
    for i in range(1, cpu + 1):
        f.cpu_node(f"cpu-{i:02d}")
    for i in range(1, a100 + 1):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", operands="plugin")
    for i in range(1, h100 + 1):
        f.gpu_node(f"h100-infer-{i:02d}", "h100", pool="infer", operands="plugin")
    for i in range(1, l40s + 1):
        f.gpu_node(f"l40s-viz-{i:02d}", "l40s", 4, pool="viz", operands="plugin")
    return f


def noise_in_viz_and_infer(f: Fleet) -> None:
    """The noise every large cluster has, outside the A100 pool: a lost GPU, a rising row-remap
    count, a node whose plugin never registered."""
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    f.sick_rows_rising("h100-infer-05", "h100")
    f.sick_not_advertising("l40s-viz-04")


class _Compact(yaml.SafeDumper):
    """Block style for the structure, flow style for small leaf mappings: files stay short and readable."""


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    leaf = all(not isinstance(v, dict | list) for v in data.values()) and len(data) <= 8
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=leaf)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    leaf = all(not isinstance(v, dict | list) for v in data) or (
        all(isinstance(v, list) and all(not isinstance(x, dict | list) for x in v) for v in data)
    )
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=leaf)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Compact.add_representer(dict, _represent_dict)
_Compact.add_representer(list, _represent_list)
_Compact.add_representer(str, _represent_str)


def _uid(*parts: object) -> str:
    h = hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _pod(
    name: str,
    namespace: str,
    node: str,
    labels: dict[str, str],
    containers: list[tuple[str, str]],
    init: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    started = "2026-11-23T10:12:30Z"
    spec: dict[str, Any] = {
        "containers": [{"name": c, "image": i} for c, i in containers],
        "nodeName": node,
    }
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [{"type": t, "status": "True"} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [
            {"name": c, "image": i, "ready": True, "restartCount": 0, "started": True,
             "state": {"running": {"startedAt": started}}}
            for c, i in containers
        ],
    }  # fmt: skip
    if init:
        spec["initContainers"] = [{"name": c, "image": i} for c, i in init]
        status["initContainerStatuses"] = [
            {"name": c, "image": i, "ready": True, "restartCount": 0, "started": False,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-11-23T10:12:08Z",
                                      "finishedAt": "2026-11-23T10:12:12Z"}}}
            for c, i in init
        ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "uid": _uid(namespace, name),
                     "creationTimestamp": "2026-11-23T10:12:00Z"},
        "spec": spec,
        "status": status,
    }  # fmt: skip


if __name__ == "__main__":
    from tests.incidents.noise.build import main

    main()
