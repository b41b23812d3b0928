"""Production-shaped DRA fleets for incident scenarios: GPU nodes of several pools publishing their
GPUs as ResourceSlices of the NVIDIA DRA driver, the GPU Operator running only the driver and the
toolkit (devicePlugin.enabled=false, as the DRA driver's install guide asks), workloads holding
claims, and sick nodes that are not the target's.

Objects are shaped as `resource.k8s.io/v1` serves them and as the DRA driver's chart v25.8 deploys
its pods (`dra-driver-nvidia-gpu-kubelet-plugin-*` with containers `compute-domains` and `gpus`, the
`dra-driver-nvidia-gpu-component` label); device attributes are the ones the driver's deviceinfo.go
publishes. `python -m tests.incidents.drafleet` rewrites the committed scenarios from
`tests/incidents/dra_start_build.py`; the YAML files, not this module, are what the tests read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DRIVER = "gpu.nvidia.com"
DRA_NS = "nvidia-dra-driver-gpu"
CHART = "dra-driver-nvidia-gpu"
DRA_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"
OPERATOR_NS = "gpu-operator"
OPERATOR_VERSION = "v25.10.1"
DRIVER_VERSION = "580.95.05"

# pool -> (productName, architecture, compute capability, memory, CUDA driver version)
MODELS: dict[str, tuple[str, str, str, str]] = {
    "h100": ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi"),
    "h200": ("NVIDIA H200", "Hopper", "9.0.0", "143771Mi"),
    "a100": ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "81920Mi"),
    "l40s": ("NVIDIA L40S", "Ada Lovelace", "8.9.0", "46068Mi"),
}
DEVICE_CLASSES = (
    ("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    ("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"),
    ("vfio.gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"),
    (
        "compute-domain-default-channel.nvidia.com",
        "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == "
        "'channel' && device.attributes['compute-domain.nvidia.com'].id == 0",
    ),
)  # fmt: skip


def h(*parts: object, n: int = 32) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:n]


def uid(*parts: object) -> str:
    x = h(*parts)
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:32]}"


def suffix(*parts: object, n: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha1("/".join(map(str, parts)).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:n])


def gpu_uuid(node: str, gpu: int) -> str:
    return "GPU-" + uid(node, "gpu", gpu)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["uid"] = uid(namespace, name)
    meta["creationTimestamp"] = extra.pop("created", "2026-11-02T09:41:00Z")
    meta.update(extra)
    return meta


def _status(name: str, image: str, *, state: str = "running", restarts: int = 0, message: str = "",
            started: str = "2026-11-24T08:10:00Z") -> dict[str, Any]:  # fmt: skip
    """One container status: running and Ready, CrashLoopBackOff after an exit, or waiting with a reason."""
    s: dict[str, Any] = {"name": name, "image": image, "imageID": image.split(":")[0] + "@sha256:" + h(image, n=64),
                         "ready": state == "running", "restartCount": restarts, "started": state == "running"}  # fmt: skip
    if state == "running":
        s["state"] = {"running": {"startedAt": started}}
    elif state == "CrashLoopBackOff":
        s["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        s["lastState"] = {
            "terminated": {"exitCode": 1, "reason": "Error", "startedAt": started, "finishedAt": started}
        }
    else:
        s["state"] = {"waiting": {"reason": state, **({"message": message} if message else {})}}
    if state != "ContainerCreating":
        s["containerID"] = "containerd://" + h(name, image, started, n=64)
    return s


def _conditions(ready: bool) -> list[dict[str, Any]]:
    flag = "True" if ready else "False"
    return [{"type": t, "status": flag} for t in ("Ready", "ContainersReady")] + [
        {"type": "PodScheduled", "status": "True"}
    ]


@dataclass
class DraFleet:
    name: str
    description: str
    now: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    noise: list[str] = field(default_factory=list)  # nodes whose faults must never decide the walk
    plugins: dict[str, str] = field(default_factory=dict)  # node -> kubelet plugin pod
    _slices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for cls, expr in DEVICE_CLASSES:
            self.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                 "metadata": _meta(cls, created="2026-11-02T09:40:03Z"),
                                 "spec": {"selectors": [{"cel": {"expression": expr}}],
                                          **({"extendedResourceName": "nvidia.com/gpu"} if cls == DRIVER else {})}})  # fmt: skip

    # --- nodes --------------------------------------------------------------------------------

    def _node(self, name: str, labels: dict[str, str], *, boot: str = "2026-09-14T08:12:40Z",
              taints: list[dict[str, str]] | None = None, unschedulable: bool = False) -> dict[str, Any]:  # fmt: skip
        node: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": _meta(name, created="2026-09-14T08:12:40Z",
                              labels={"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                                      "kubernetes.io/os": "linux", **labels}),
            "spec": {"podCIDR": f"10.244.{int(h(name, n=2), 16) % 250}.0/24"},
            "status": {
                "capacity": {"cpu": "112", "memory": "2113371956Ki", "pods": "110", "ephemeral-storage": "1873483340Ki"},
                "allocatable": {"cpu": "111500m", "memory": "2112220980Ki", "pods": "110",
                                "ephemeral-storage": "1726607418123"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                     "lastHeartbeatTime": self.now, "lastTransitionTime": boot},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "message": "kubelet is posting ready status", "lastHeartbeatTime": self.now,
                     "lastTransitionTime": boot},
                ],
                "nodeInfo": {"architecture": "amd64", "bootID": uid(name, boot), "containerRuntimeVersion": "containerd://2.1.4",
                             "kernelVersion": "6.8.0-79-generic", "kubeletVersion": "v1.34.2",
                             "osImage": "Ubuntu 24.04.3 LTS", "operatingSystem": "linux"},
            },
        }  # fmt: skip
        if taints:
            node["spec"]["taints"] = taints
        if unschedulable:
            node["spec"]["unschedulable"] = True
        self.objects.append(node)
        return node

    def control_plane(self, name: str = "k8s-cp-01") -> None:
        self._node(name, {"node-role.kubernetes.io/control-plane": ""},
                   taints=[{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}])  # fmt: skip
        self._pod(f"{CHART}-controller-6b8d5c7f9-{suffix(name, 'ctl')}", DRA_NS, name,
                  {"app.kubernetes.io/name": CHART, "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
                   f"{CHART}-component": "controller"}, [("compute-domain", DRA_IMAGE, {})])  # fmt: skip
        self._pod(f"gpu-operator-7c5d8f9b6d-{suffix(name, 'op')}", OPERATOR_NS, name,
                  {"app": "gpu-operator", "app.kubernetes.io/name": "gpu-operator"},
                  [("gpu-operator", f"nvcr.io/nvidia/gpu-operator:{OPERATOR_VERSION}", {})])  # fmt: skip

    def gpu_node(
        self,
        name: str,
        pool: str,
        gpus: int = 8,
        *,
        publishes: bool = True,
        plugin: str = "running",  # "running", "CrashLoopBackOff"
        plugin_restarts: int = 0,
        plugin_started: str = "2026-11-24T08:10:00Z",
        taints: dict[int, list[dict[str, str]]] | None = None,
        mig: list[str] | None = None,  # MIG device names published instead of whole GPUs
        boot: str = "2026-09-14T08:12:40Z",
        driver_state: str = "running",
        unschedulable: bool = False,
    ) -> None:
        self._node(name, {"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true",
                          "nvidia.com/gpu.deploy.device-plugin": "false", "pool": pool}, boot=boot,
                   unschedulable=unschedulable)  # fmt: skip
        plugin_pod = f"{CHART}-kubelet-plugin-{suffix(name, 'kp')}"
        self.plugins[name] = plugin_pod
        crash = (
            "back-off 5m0s restarting failed container={c} pod="
            + f"{plugin_pod}_{DRA_NS}({uid(DRA_NS, plugin_pod)})"
        )
        states = {
            c: {"state": plugin, "restarts": plugin_restarts, "started": plugin_started,
                "message": crash.format(c=c) if plugin == "CrashLoopBackOff" else ""}
            for c in ("compute-domains", "gpus")
        }  # fmt: skip
        self._pod(plugin_pod, DRA_NS, name,
                  {"app.kubernetes.io/name": CHART, "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
                   f"{CHART}-component": "kubelet-plugin"},
                  [("compute-domains", DRA_IMAGE, states["compute-domains"]), ("gpus", DRA_IMAGE, states["gpus"])],
                  init=[("init-container", DRA_IMAGE)],
                  tolerations=[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}])  # fmt: skip
        drv = f"nvidia-driver-daemonset-{suffix(name, 'drv')}"
        self._pod(drv, OPERATOR_NS, name, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
                  [("nvidia-driver-ctr", f"nvcr.io/nvidia/driver:{DRIVER_VERSION}-ubuntu24.04",
                    {"state": driver_state, "restarts": 7 if driver_state != "running" else 0,
                     "message": f"back-off 5m0s restarting failed container=nvidia-driver-ctr pod={drv}"
                     if driver_state == "CrashLoopBackOff" else ""})],
                  init=[("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1")])  # fmt: skip
        self._pod(f"nvidia-container-toolkit-daemonset-{suffix(name, 'ctk')}", OPERATOR_NS, name,
                  {"app": "nvidia-container-toolkit-daemonset"},
                  [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.18.0", {})],
                  init=[("driver-validation", f"nvcr.io/nvidia/gpu-operator:{OPERATOR_VERSION}")])  # fmt: skip
        if publishes:
            self._slice(name, pool, gpus, taints or {}, mig)

    def _slice(
        self, node: str, pool: str, gpus: int, taints: dict[int, list[dict[str, str]]], mig: list[str] | None
    ) -> None:
        product, arch, cc, memory = MODELS[pool]
        devices = []
        names = mig if mig else [f"gpu-{g}" for g in range(gpus)]
        for i, dev in enumerate(names):
            g = int(dev.split("-")[1])
            attrs: dict[str, Any] = {
                "addressingMode": {"string": "None"}, "architecture": {"string": arch}, "brand": {"string": "Nvidia"},
                "cudaComputeCapability": {"version": cc}, "cudaDriverVersion": {"version": "13.0.0"},
                "driverVersion": {"version": DRIVER_VERSION.replace(".05", ".5")}, "productName": {"string": product},
                "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + 16 * g:02x}:00.0"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{0x15 + 16 * g:02x}"},
                "type": {"string": "mig" if mig else "gpu"}, "uuid": {"string": gpu_uuid(node, g)},
            }  # fmt: skip
            cap = {"memory": {"value": memory}}
            if mig:
                profile = dev.split("-")[3]
                attrs["profile"] = {"string": profile}
                attrs["uuid"] = {"string": "MIG-" + uid(node, dev)}
                cap = {"memory": {"value": "16384Mi"}, "multiprocessors": {"value": "16"}}
            d: dict[str, Any] = {"name": dev, "attributes": attrs, "capacity": cap}
            if i in taints:
                d["taints"] = taints[i]
            devices.append(d)
        name = f"{node}-{DRIVER}-{suffix(node, 'rs')}"
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": _meta(name, generateName=f"{node}-{DRIVER}-", generation=1,
                                 ownerReferences=[{"apiVersion": "v1", "controller": True, "kind": "Node", "name": node,
                                                   "uid": uid(None, node)}]),
               "spec": {"driver": DRIVER, "nodeName": node, "pool": {"generation": 1, "name": node, "resourceSliceCount": 1},
                        "devices": devices}}  # fmt: skip
        self._slices[node] = obj
        self.objects.append(obj)

    # --- pods and claims --------------------------------------------------------------------

    def _pod(self, name: str, ns: str, node: str | None, labels: dict[str, str],
             containers: list[tuple[str, str, dict[str, Any]]], *, init: list[tuple[str, str]] | None = None,
             tolerations: list[dict[str, Any]] | None = None, claims: list[dict[str, str]] | None = None,
             claim_statuses: list[dict[str, str]] | None = None, phase: str | None = None,
             created: str = "2026-11-24T08:09:30Z") -> dict[str, Any]:  # fmt: skip
        specs = []
        for c, image, _ in containers:
            spec: dict[str, Any] = {"name": c, "image": image, "imagePullPolicy": "IfNotPresent"}
            if claims:
                spec["resources"] = {"claims": [{"name": e["name"]} for e in claims]}
            specs.append(spec)
        statuses = [_status(c, image, **st) for c, image, st in containers]
        ready = all(s["ready"] for s in statuses)
        pod: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, ns, created=created, labels=labels),
            "spec": {"containers": specs, "restartPolicy": "Always", "nodeName": node,
                     "tolerations": [*(tolerations or []),
                                     {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "tolerationSeconds": 300}]},
            "status": {"phase": phase or "Running", "conditions": _conditions(ready), "hostIP": "10.40.0.1",
                       "startTime": created, "containerStatuses": statuses},
        }  # fmt: skip
        if init:
            pod["spec"]["initContainers"] = [{"name": c, "image": i} for c, i in init]
            pod["status"]["initContainerStatuses"] = [
                {"name": c, "image": i, "ready": True, "restartCount": 0, "started": False,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": created, "finishedAt": created}}}
                for c, i in init
            ]  # fmt: skip
        if claims:
            pod["spec"]["resourceClaims"] = claims
        if claim_statuses:
            pod["status"]["resourceClaimStatuses"] = claim_statuses
        self.objects.append(pod)
        return pod

    def workload(
        self,
        ns: str,
        pod: str,
        node: str,
        devices: list[str],
        *,
        container: str = "trainer",
        image: str = "nvcr.io/nvidia/pytorch:25.09-py3",
        state: str = "running",
        message: str = "",
        device_class: str = DRIVER,
        template: str | None = None,
        created: str = "2026-11-24T08:09:30Z",
    ) -> str:
        """A pod bound to `node` whose claim (from `template`) holds `devices` of the node's pool; returns
        the claim's uid (its CDI device names start with it)."""
        entry = "gpus"
        template = template or f"{pod.rsplit('-', 1)[0]}-gpus"
        claim = f"{pod}-{entry}-{suffix(ns, pod, 'rc')}"
        claim_uid = uid(ns, claim)
        phase = "Running" if state == "running" else "Pending"
        self._pod(pod, ns, node, {"app": pod.rsplit("-", 1)[0]},
                  [(container, image, {"state": state, "message": message, "started": created})],
                  claims=[{"name": entry, "resourceClaimTemplateName": template}],
                  claim_statuses=[{"name": entry, "resourceClaimName": claim}], phase=phase, created=created)  # fmt: skip
        self.objects.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {**_meta(claim, ns, created=created, generateName=f"{pod}-{entry}-",
                                 annotations={"resource.kubernetes.io/pod-claim-name": entry},
                                 ownerReferences=[{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True,
                                                   "kind": "Pod", "name": pod, "uid": uid(ns, pod)}]),
                         "uid": claim_uid},
            "spec": {"devices": {"requests": [{"name": entry, "exactly": {"deviceClassName": device_class,
                                                                           "allocationMode": "ExactCount",
                                                                           "count": len(devices)}}]}},
            "status": {"allocation": {"devices": {"results": [{"device": d, "driver": DRIVER, "pool": node, "request": entry}
                                                              for d in devices]},
                                      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                          {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                       "reservedFor": [{"name": pod, "resource": "pods", "uid": uid(ns, pod)}]},
        })  # fmt: skip
        if not any(o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == template
                   and o["metadata"]["namespace"] == ns for o in self.objects):  # fmt: skip
            self.objects.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": _meta(template, ns, created="2026-11-20T10:00:00Z"),
                "spec": {"spec": {"devices": {"requests": [{"name": entry, "exactly": {
                    "deviceClassName": device_class, "allocationMode": "ExactCount", "count": len(devices)}}]}}},
            })  # fmt: skip
        return claim_uid

    def event(self, ns: str, pod: str, reason: str, message: str, *, count: int, first: str, last: str,
              container: str | None = None, kind: str = "Warning", component: str = "kubelet") -> None:  # fmt: skip
        inv: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod,
            "namespace": ns,
            "uid": uid(ns, pod),
        }
        if container:
            inv["fieldPath"] = f"spec.containers{{{container}}}"
        self.objects.append({
            "apiVersion": "v1", "kind": "Event", "count": count, "firstTimestamp": first, "lastTimestamp": last,
            "involvedObject": inv, "message": message, "reason": reason, "reportingComponent": component,
            "source": {"component": component}, "type": kind,
            "metadata": _meta(f"{pod}.{h(reason, message, n=16)}", ns, created=first),
        })  # fmt: skip

    def log(self, node: str, container: str, text: str, previous: bool = False) -> None:
        key = f"{DRA_NS}/{self.plugins[node]}/{container}" + ("#previous" if previous else "")
        self.logs[key] = text

    def write(self, folder: Path, expect: dict[str, Any]) -> Path:
        out: dict[str, Any] = {"kind": "Scenario", "name": self.name, "description": self.description,
                               "now": self.now, "objects": self.objects}  # fmt: skip
        if self.logs:
            out["logs"] = self.logs
        out["x-noise"] = self.noise
        out["x-expect"] = expect
        path = folder / f"{self.name}.yaml"
        path.write_text(
            yaml.dump(out, Dumper=_Dumper, sort_keys=False, width=160, allow_unicode=True), encoding="utf-8"
        )
        return path


class _Dumper(yaml.SafeDumper):
    """Block style for the structure, flow style for small leaf mappings and lists (files stay short and
    quick to load); logs as literal blocks, so a scenario reads like `kubectl logs`."""


def _dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    leaf = all(not isinstance(v, dict | list) for v in data.values()) and len(data) <= 8
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=leaf)


def _list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence(
        "tag:yaml.org,2002:seq", data, flow_style=all(not isinstance(v, dict | list) for v in data)
    )


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(dict, _dict)
_Dumper.add_representer(list, _list)
_Dumper.add_representer(str, _str)


if __name__ == "__main__":
    from tests.incidents.dra_start_build import main

    main()
