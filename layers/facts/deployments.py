"""Every way the NVIDIA device plugin (and the DRA driver) is deployed, and which container to read.

One table, used by the operator-pod reads (layers/facts/context.py), layer 2, layer 5 and the
digest: the GPU Operator's operand, the plugin's own Helm chart, the upstream static manifest,
GKE's managed plugin, and the NVIDIA DRA driver's chart names, its kubelet plugin and controller
and the container that serves each DRA driver name. Each is found by a label selector the API
server applies, never by listing every pod.
"""

from __future__ import annotations

import msgspec

from layers.facts import objects as o
from layers.sources import K8sObject


class Deployment(msgspec.Struct, frozen=True):
    """One way a GPU device plugin runs: how its pods are labelled and which container logs."""

    name: str  # how a person calls it
    label: str  # the label key and value its pods carry
    value: str
    containers: tuple[str, ...]  # the plugin's own container, in order of preference
    namespace: str | None = None  # where it always runs, when it does

    @property
    def selector(self) -> str:
        return f"{self.label}={self.value}"

    def matches(self, pod: K8sObject) -> bool:
        return o.labels(pod).get(self.label) == self.value and (
            self.namespace is None or o.namespace(pod) == self.namespace
        )


DEVICE_PLUGINS: tuple[Deployment, ...] = (
    # gpu-operator assets/state-device-plugin/0500_daemonset.yaml
    Deployment(
        "the GPU Operator's device plugin", "app", "nvidia-device-plugin-daemonset", ("nvidia-device-plugin",)
    ),
    # k8s-device-plugin deployments/helm/nvidia-device-plugin (v0.15+ also runs GFD under this name)
    Deployment(
        "the device plugin's Helm chart",
        "app.kubernetes.io/name",
        "nvidia-device-plugin",
        ("nvidia-device-plugin-ctr",),
    ),
    # k8s-device-plugin deployments/static/nvidia-device-plugin.yml (`kubectl create -f …`)
    Deployment(
        "the device plugin's static manifest",
        "name",
        "nvidia-device-plugin-ds",
        ("nvidia-device-plugin-ctr",),
    ),
    # GKE's managed plugin (container-engine-accelerators), always in kube-system
    Deployment(
        "GKE's managed device plugin",
        "k8s-app",
        "nvidia-gpu-device-plugin",
        ("nvidia-gpu-device-plugin",),
        namespace="kube-system",
    ),
)
# The NVIDIA DRA driver: its chart's old and new names, and its pods under GPUCluster.
DRA_DRIVER_NAMES = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu", "nvidia-dra-driver")
# Its kubelet plugin pod runs one container per DRA driver name it serves (the chart's
# kubeletplugin.yaml: cmd/gpu-kubelet-plugin and cmd/compute-domain-kubelet-plugin); its
# controller runs `compute-domain`. The driver a claim names picks the container to read.
DRA_PLUGIN_CONTAINERS: dict[str, str] = {
    "gpu.nvidia.com": "gpus",
    "compute-domain.nvidia.com": "compute-domains",
}
DRA_SELECTOR = "app.kubernetes.io/name in (" + ",".join(DRA_DRIVER_NAMES) + ")"


def dra_role(pod: K8sObject) -> str | None:
    """A pod of the NVIDIA DRA driver is its `dra-kubelet-plugin` or its `dra-controller` (None: not
    the driver's): the chart's `<name>-component` label says, else the kubelet plugin's containers."""
    lab = o.labels(pod)
    name = lab.get("app.kubernetes.io/name")
    if name not in DRA_DRIVER_NAMES:
        return None
    said = lab.get(f"{name}-component")
    if said in ("kubelet-plugin", "controller"):
        return "dra-kubelet-plugin" if said == "kubelet-plugin" else "dra-controller"
    plugin = any(c.get("name") in DRA_PLUGIN_CONTAINERS.values() for c in o.containers(pod))
    return "dra-kubelet-plugin" if plugin else "dra-controller"


def dra_plugin_container(pod: K8sObject, driver: str = "gpu.nvidia.com") -> str | None:
    """The container of a DRA kubelet plugin pod that serves this DRA driver name, or None when the
    pod runs none (a chart with that plugin disabled)."""
    wanted = DRA_PLUGIN_CONTAINERS.get(driver)
    names = [str(c.get("name")) for c in o.containers(pod)]
    return wanted if wanted in names else None


# Selectors for the plugins that are not the operator's `app=` operands nor labelled by chart name.
EXTRA_SELECTORS = tuple(
    d.selector for d in DEVICE_PLUGINS if d.label not in ("app", "app.kubernetes.io/name")
)


def device_plugin_of(pod: K8sObject) -> Deployment | None:
    """How this pod's device plugin was deployed, or None when it is not a device plugin."""
    return next((d for d in DEVICE_PLUGINS if d.matches(pod)), None)


def plugin_containers(pod: K8sObject) -> list[str]:
    """The device plugin's container(s) in a plugin pod: the deployment's own name, else any
    `*device-plugin*` container that is not its config sidecar, else the first."""
    names = [str(c.get("name")) for c in o.containers(pod)]
    known = {c for d in DEVICE_PLUGINS for c in d.containers}
    chosen = [n for n in names if n in known]
    if chosen:
        return chosen
    guess = [n for n in names if "device-plugin" in n and "config" not in n]
    if guess or names:
        return guess or names[:1]
    dep = device_plugin_of(pod)
    return list(dep.containers if dep else DEVICE_PLUGINS[0].containers)


def where_looked() -> str:
    """The selectors, for a finding that found none of them."""
    return ", ".join(d.selector for d in DEVICE_PLUGINS)
