"""The rows of the owners' decision table (spec/findings.md, "One policy decides every action") as
production-shaped fleets: the 22-node mixed fleet of tests/incidents/owners/ (A100 `train`, H100
`infer`, L40S `viz`, CPU nodes, a control plane; a lost GPU, rising rows and an unregistered plugin
elsewhere), a training pod on h100-infer-03 whose device plugin saw Xid 79 (the catalog says "Drain
the node and reboot the machine"), and one owner's marks on that node and on an idle twin
(h100-infer-06, for the diagnostics, which a running pod would refuse on its own).

Adding an owner is one entry in layers/facts/owners.py and one `Row` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet, uuid_of
from tests.incidents.owners.build import _condition, _cordon, _fleet, _running
from tests.ledger_fleets import plugin_xid

NODE = "h100-infer-03"  # the pod's node, with the Xid
TWIN = "h100-infer-06"  # idle, the same marks: the CLI's diag and the gateway's diag click
POD = "research/llama-70b-sft-0"
T = "2026-11-29T09:58:14Z"
Mark = Callable[[dict[str, Any]], None]


def label(**kv: str) -> Mark:
    return lambda n: (
        n["metadata"].setdefault("labels", {}).update({k.replace("__", "/"): v for k, v in kv.items()})
    )


def labels(items: dict[str, str]) -> Mark:
    return lambda n: n["metadata"].setdefault("labels", {}).update(items)


def annotations(items: dict[str, str]) -> Mark:
    return lambda n: n["metadata"].setdefault("annotations", {}).update(items)


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Mark:
    def add(n: dict[str, Any]) -> None:
        t: dict[str, Any] = {"key": key, "effect": effect, "timeAdded": T}
        if value:
            t["value"] = value
        n["spec"].setdefault("taints", []).append(t)

    return add


def cordoned(manager: str, when: str = T) -> Mark:
    return lambda n: _cordon(n, manager, when)


def condition(ctype: str, status: str, reason: str, message: str = "") -> Mark:
    return lambda n: _condition(n, ctype, status, reason, message, "2026-11-29T09:50:00Z")


def both(*marks: Mark) -> Mark:
    def apply(n: dict[str, Any]) -> None:
        for m in marks:
            m(n)

    return apply


GPUBOT_CORDON = both(
    cordoned("gpubot", "2026-11-29T09:40:00Z"),
    annotations({
        "gpubot/cordoned-by": "slack:U0OPS",
        "gpubot/cordon-reason": "Xid 79 on GPU 3",
        "gpubot/cordoned-at": "2026-11-29T09:40:01Z",
    }),
)  # fmt: skip
NVSENTINEL = "dgxc.nvidia.com/nvsentinel-state"
UPGRADE = "nvidia.com/gpu-driver-upgrade-state"


def nvsentinel(state: str | None) -> Mark:
    """NVSentinel's fault-quarantine marks; `state` None: its state label is missing."""
    marks = {"k8saas.nvidia.com/cordon-by": "NVSentinel", "k8saas.nvidia.com/cordon-reason": "GPU-fatal"}
    if state is not None:
        marks[NVSENTINEL] = state
    return both(
        labels(marks),
        annotations({"quarantineHealthEvent": '[{"checkName":"SysLogsXIDError","errorCode":["79"]}]'}),
        cordoned("fault-quarantine"),
    )


def support(gpu: int = 2) -> Mark:
    return condition("GpuMemWatch", "True", "GpuMemWatchIsNotHealthy",
                     f"ErrorCode:DCGM_FR_FAULTY_MEMORY GPU_UUID:{uuid_of(NODE, gpu)} Recommended Action=CONTACT_SUPPORT;")  # fmt: skip


@dataclass(frozen=True)
class Row:
    """One owner variant and what the table says for it."""

    id: str
    mark: Mark
    row: str  # layers/nodepolicy.py ROWS
    owner: str | None  # the owner named (the digest's owner name), None: no owner
    cordon: bool
    uncordon_button: bool
    uncordon_force: bool  # the CLI's --force goes through
    diag: bool
    advice: str  # said in the Xid's advice on the node
    drain: bool  # the catalog's "Drain the node" is still advised
    confirm: str = ""  # said in the Cordon confirmation (where Cordon is offered)
    needs_person: bool = False  # the digest lists it apart: a person must act


CATALOG = "Drain the node and reboot the machine"
ROWS: tuple[Row, ...] = (
    Row("no-owner", lambda n: None, "no-owner", None, True, False, False, True, CATALOG, True),
    Row("cordoned-by-gpubot", GPUBOT_CORDON, "cordoned-by-gpubot", None, False, True, True, True, CATALOG, True),
    Row("cordoned-by-person", cordoned("kubectl-cordon"), "cordoned-by-person", None, False, False, True, True,
        CATALOG, True),
    Row("queued-upgrade", labels({UPGRADE: "upgrade-required"}), "queued", "GPU Operator driver upgrade",
        True, False, False, True, "a driver upgrade is queued here", True, confirm="GPU Operator driver upgrade"),
    Row("nvsentinel-quarantined", nvsentinel("quarantined"), "running-repair", "NVSentinel", False, False,
        False, False, "NVSentinel is repairing it (quarantined): no action", False),
    Row("nvsentinel-no-state-label", nvsentinel(None), "running-repair", "NVSentinel", False, False, False,
        False, "NVSentinel is repairing it (quarantined): no action", False),
    Row("nvsentinel-remediating", nvsentinel("remediating"), "running-repair", "NVSentinel", False, False,
        False, False, "NVSentinel is repairing it (remediating)", False),
    Row("aks-remediator", taint("remediator.aks.microsoft.com/unschedulable"), "running-repair", "AKS", False,
        False, False, False, "AKS is repairing it (remediating)", False),
    Row("hyperpod", labels({"sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReboot"}),
        "running-repair", "SageMaker HyperPod", False, False, False, False,
        "SageMaker HyperPod is repairing it (UnschedulablePendingReboot)", False),
    Row("upgrade-drain-required", both(labels({UPGRADE: "drain-required"}), cordoned("gpu-operator")),
        "running-maintenance", "GPU Operator driver upgrade", False, False, False, False,
        "maintenance by GPU Operator driver upgrade (drain-required): wait for it", False),
    Row("mig-manager", labels({"nvidia.com/mig.config.state": "rebooting"}), "running-maintenance", "MIG manager",
        False, False, False, False, "maintenance by MIG manager (rebooting): wait for it", False),
    Row("operand-paused", labels({"nvidia.com/gpu.deploy.dcgm-exporter": "paused-for-driver-upgrade"}),
        "running-maintenance", "GPU Operator driver manager", False, False, False, False,
        "maintenance by GPU Operator driver manager (paused-for-driver-upgrade): wait for it", False),
    Row("cluster-autoscaler", taint("ToBeDeletedByClusterAutoscaler", "1795945800"), "running-removal",
        "cluster-autoscaler", False, False, False, False,
        "cluster-autoscaler is removing this node: pods move elsewhere", False),
    Row("karpenter-v1", taint("karpenter.sh/disrupted"), "running-removal", "Karpenter", False, False, False,
        False, "Karpenter is removing this node: pods move elsewhere", False),
    Row("karpenter-pre-v1", taint("karpenter.sh/disruption", "disrupting"), "running-removal", "Karpenter",
        False, False, False, False, "Karpenter is removing this node: pods move elsewhere", False),
    Row("upgrade-failed", both(labels({UPGRADE: "upgrade-failed"}), cordoned("gpu-operator")), "gave-up",
        "GPU Operator driver upgrade", False, False, True, True,
        "GPU Operator driver upgrade gave up (upgrade-failed): a person must act", True, needs_person=True),
    Row("nvsentinel-drain-failed", nvsentinel("drain-failed"), "gave-up", "NVSentinel", False, False, True,
        True, "NVSentinel gave up (drain-failed): a person must act", True, needs_person=True),
    Row("nvsentinel-remediation-failed", nvsentinel("remediation-failed"), "gave-up", "NVSentinel", False,
        False, True, True, "NVSentinel gave up (remediation-failed): a person must act", True,
        needs_person=True),
    Row("nvsentinel-contact-support", both(nvsentinel("quarantined"), support()), "gave-up", "NVSentinel",
        False, False, True, True, "NVSentinel gave up (quarantined): a person must act", True,
        needs_person=True),
    Row("contact-support-schedulable", support(), "gave-up", "NVSentinel", True, False, False, True,
        "NVSentinel gave up (GpuMemWatch=True (GpuMemWatchIsNotHealthy)): a person must act", True,
        confirm="NVSentinel", needs_person=True),
    Row("eks-reported", condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"), "reported",
        "EKS node monitoring agent", True, False, False, True, "EKS node monitoring agent reports", True,
        confirm="EKS auto repair, if on, replaces or reboots the node after 10 minutes"),
    Row("gke-reported", condition("XidCriticalError", "True", '{"79":true}'), "reported", "GKE device plugin",
        True, False, False, True, "GKE device plugin reports", True,
        confirm="GKE repairs the node; on Autopilot a node cordoned ~10 min is re-created"),
    Row("aks-npd-reported", condition("XIDErrors", "True", "XIDErrorsDetected", "Xid 79 detected"), "reported",
        "AKS node problem detector", True, False, False, True, "AKS node problem detector reports", True,
        confirm="AKS's remediator may taint and repair the node"),
)  # fmt: skip


def build(row: Row, folder: Path) -> Path:
    """The row's fleet as a scenario file: the owner's marks on NODE and TWIN."""
    f: Fleet = _fleet(f"owner-policy-{row.id}", f"the owners' decision table, row {row.id}")
    n = f.node(NODE)
    n["status"]["allocatable"]["nvidia.com/gpu"] = "7"  # the plugin withdrew the GPU after the Xid
    plugin_xid(f, NODE, 3, 79, 20)
    _running(f, NODE)
    row.mark(n)
    row.mark(f.node(TWIN))
    return f.write(folder, {"target": POD})
