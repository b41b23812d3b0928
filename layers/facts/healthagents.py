"""Health agents' verdicts on a node: the conditions NVSentinel, the EKS node monitoring agent,
GKE's device plugin and AKS's node problem detector set (spec/findings.md, "Who else acts on a
node", `L5_HEALTH_AGENT_CONDITION`). They are often the only witness of an Xid DCGM cannot report.

A table of agents, like layers/facts/owners.py: each names its condition types and the status
that means a fault. Message formats are the agents' own:

- NVSentinel's platform connector: type = the check name (`SysLogsXIDError`, `GpuMemWatch` …),
  status True, reason `<check>IsNotHealthy`, message entries `ErrorCode:79 PCI:0001:00:00
  GPU_UUID:GPU-… kernel:… Recommended Action=NODE_REBOOT;` (one per event, `;`-terminated).
- EKS: `AcceleratedHardwareReady` False, reason `NvidiaXID79Error`, `NvidiaDoubleBitError` …
- GKE: `XidCriticalError` True, reason a JSON map of Xids (gke_xids).
- AKS NPD: `GPUMissing`, `XIDErrors`, `NVLinkStatusInactive` True.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from layers.sources import K8sObject


class Agent(msgspec.Struct, frozen=True):
    name: str
    types: tuple[str, ...]  # condition types; empty: any type whose reason ends with reason_suffix
    fault_status: str
    reason_suffix: str = ""
    next_step: str = ""  # what the platform does next about a node it reports (a cordon's confirmation)


NVSENTINEL_CHECKS = (
    "GpuMemWatch",
    "GpuNvlinkWatch",
    "GpuPcieWatch",
    "GpuThermalWatch",
    "GpuPowerWatch",
    "GpuInforomWatch",
    "GpuSmWatch",
    "GpuMcuWatch",
    "GpuPmuWatch",
    "GpuDriverWatch",
    "GpuCpusetWatch",
    "GpuXidError",
    "SysLogsXIDError",
    "SysLogsSXIDError",
    "SysLogsGPUFallenOff",
    "NVSwitchFatalError",
    "NVSwitchDown",
)

EKS_CONDITION = "AcceleratedHardwareReady"
# GKE's device plugin records the Xids it caught in a node condition (container-engine-accelerators
# health_checker.go): type XidCriticalError, status True, reason a JSON object of Xids, `{"79":true}`.
GKE_XID_CONDITION = "XidCriticalError"
_NVSENTINEL_NEXT = "NVSentinel quarantines and drains the node when its policy matches this check"

AGENTS: tuple[Agent, ...] = (
    # The named checks, and any other check the platform connector reports (`…IsNotHealthy`).
    Agent("NVSentinel", NVSENTINEL_CHECKS, "True", next_step=_NVSENTINEL_NEXT),
    Agent("NVSentinel", (), "True", reason_suffix="IsNotHealthy", next_step=_NVSENTINEL_NEXT),
    Agent(
        "EKS node monitoring agent",
        (EKS_CONDITION,),
        "False",
        next_step="EKS auto repair, if on, replaces or reboots the node after 10 minutes",
    ),
    Agent(
        "GKE device plugin",
        (GKE_XID_CONDITION,),
        "True",
        next_step="GKE repairs the node; on Autopilot a node cordoned ~10 min is re-created",
    ),
    Agent(
        "AKS node problem detector",
        ("GPUMissing", "XIDErrors", "NVLinkStatusInactive"),
        "True",
        next_step="AKS's remediator may taint and repair the node",
    ),
)
# The conditions' types are the owners' marks: read here only (layers/facts/owners.py asks).


CONTACT_SUPPORT = "CONTACT_SUPPORT"
MESSAGE_SHOWN = 400  # a condition message can hold many events: the evidence keeps a sentence

_NVSENTINEL_XID = re.compile(r"ErrorCode:(\d{1,4})\b")
_EKS_XID = re.compile(r"NvidiaXID(\d{1,4})Error")
_AKS_XID = re.compile(r"\b[Xx][Ii][Dd][ :=]{0,3}(\d{1,4})\b")
_ACTION = re.compile(r"Recommended ?Action[=:] ?([A-Z_]{1,40})")


class AgentCondition(msgspec.Struct, frozen=True):
    agent: str
    type: str
    status: str
    reason: str
    message: str
    since: str | None
    xids: tuple[int, ...] = ()
    actions: tuple[str, ...] = ()  # NVSentinel's Recommended Action values

    @property
    def contact_support(self) -> bool:
        return CONTACT_SUPPORT in self.actions

    @property
    def text(self) -> str:
        reason = f", reason {self.reason}" if self.reason else ""
        since = f", since {self.since}" if self.since else ""
        return f"{self.agent}: condition {self.type}={self.status}{reason}{since}"

    def evidence(self) -> list[str]:
        out = [self.text]
        if self.message:
            cut = "…" if len(self.message) > MESSAGE_SHOWN else ""
            out.append(f"message: {self.message[:MESSAGE_SHOWN]}{cut}")
        if self.actions:
            out.append("recommended action: " + ", ".join(dict.fromkeys(self.actions)))
        return out


def _agent_for(cond: dict[str, Any]) -> Agent | None:
    ctype, reason = str(cond.get("type") or ""), str(cond.get("reason") or "")
    for agent in AGENTS:
        if agent.types and ctype not in agent.types:
            continue
        if agent.reason_suffix and not reason.endswith(agent.reason_suffix):
            continue
        if ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"):
            return None
        return agent
    return None


def _xids(agent: Agent, cond: dict[str, Any]) -> tuple[int, ...]:
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    if agent.name == "NVSentinel":
        found: Iterable[str] = _NVSENTINEL_XID.findall(message) if "XID" in str(cond.get("type")) else ()
    elif agent.name.startswith("EKS"):
        found = _EKS_XID.findall(reason) + _EKS_XID.findall(message)
    elif agent.name.startswith("AKS"):
        found = _AKS_XID.findall(message) if cond.get("type") == "XIDErrors" else ()
    else:
        found = ()  # GKE's Xids are read by gke_xids below
    return tuple(sorted({int(x) for x in found}))


def agent_conditions(node: K8sObject | None) -> list[AgentCondition]:
    """Every health agent's fault condition on the node (status as the agent means a fault)."""
    out: list[AgentCondition] = []
    for cond in (node or {}).get("status", {}).get("conditions") or []:
        agent = _agent_for(cond)
        if agent is None or str(cond.get("status")) != agent.fault_status:
            continue
        message = str(cond.get("message") or "")
        out.append(
            AgentCondition(
                agent=agent.name,
                type=str(cond.get("type")),
                status=str(cond.get("status")),
                reason=str(cond.get("reason") or ""),
                message=message,
                since=cond.get("lastTransitionTime"),
                xids=_xids(agent, cond),
                actions=tuple(_ACTION.findall(message[:65536])),
            )
        )
    return out


def needs_person(node: K8sObject) -> str | None:
    """A node an agent's owner gave up on because it asks for support (NVSentinel CONTACT_SUPPORT)."""
    for c in agent_conditions(node):
        if c.contact_support:
            return f"{c.agent} recommends CONTACT_SUPPORT ({c.type}{', ' + c.reason if c.reason else ''})"
    return None


def next_step(agent: str) -> str:
    """What the platform behind an agent does next about a node it reports."""
    return next((a.next_step for a in AGENTS if a.name == agent), "")


def gke_xids(node: K8sObject) -> tuple[list[int], str | None]:
    """The Xids a node's XidCriticalError condition names, and the evidence line; ([], None) without one."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") != GKE_XID_CONDITION or cond.get("status") != "True":
            continue
        reason = str(cond.get("reason") or "")
        try:
            named = json.loads(reason)
        except ValueError:
            named = None
        numbers = sorted(
            {int(k) for k, v in named.items() if str(k).isdigit() and v} if isinstance(named, dict) else set()
        )
        since = f" since {cond['lastTransitionTime']}" if cond.get("lastTransitionTime") else ""
        return (
            numbers,
            f"node condition {GKE_XID_CONDITION}=True, reason {reason[:200]}{since} (GKE's device plugin)",
        )
    return [], None
