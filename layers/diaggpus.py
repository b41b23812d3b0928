"""Which GPUs a DCGM diagnostic asks for, which it cannot test, and which it tested.

spec/interfaces.md, "GPU diagnostics from chat": GPUs the device plugin withdrew (marked
unhealthy, so not allocatable) cannot be requested. The confirmation says which GPUs will and
will not be tested, the result names the GPUs tested by UUID, a node with untested GPUs is never
recorded as passed, and a node that advertises its GPUs under another name
(`nvidia.com/gpu.shared`, a renamed time-sliced resource) is asked for by that name.

Who the withdrawn GPUs are comes from the device plugin's own marks (its log, read by
layers/facts/pluginlog.py) and the health agents' conditions that name a GPU (NVSentinel's
`GPU_UUID:`); their index from dcgm-exporter's series. Which GPU DCGM's entity N is comes from
the Job's own `dcgmi discovery -l` (the container's numbering), printed before the diagnostic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import msgspec

from layers.facts import objects as o
from layers.facts.healthagents import agent_conditions
from layers.sources import K8sObject

DISCOVERY_BEGIN = "gpubot-gpus-begin"
DISCOVERY_END = "gpubot-gpus-end"
_UUID = re.compile(r"\bGPU-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\b")
_ROW = re.compile(r"^\|\s{0,40}(\d{1,4})\s{0,40}\|")  # `| 3      | Name: NVIDIA A100…`
_DEVICE_UUID = re.compile(r"Device UUID:\s{0,40}(GPU-[0-9A-Fa-f-]{1,60})")


class Withdrawn(msgspec.Struct, frozen=True):
    """A GPU the device plugin took out of allocatable: its UUID, its index where known, who said so."""

    uuid: str
    index: int | None
    said_by: str  # "the device plugin marked it unhealthy (Xid 79)", "NVSentinel (SysLogsXIDError)"

    def name(self) -> str:
        return f"GPU {self.index} ({self.uuid})" if self.index is not None else self.uuid


class GpuAsk(msgspec.Struct, frozen=True):
    """What the diagnostic's Job asks for on the node, and what it leaves untested."""

    resource: str  # the extended resource asked for, by the name the node advertises
    units: int  # allocatable units of it: what the Job requests
    capacity: int  # units in capacity
    per_gpu: int  # units one GPU counts for (time-slicing replicas), 1 when not shared
    known: Mapping[int, str] = msgspec.field(default_factory=dict)  # index -> UUID (dcgm-exporter)
    withdrawn: tuple[Withdrawn, ...] = ()  # the GPUs named as withdrawn

    @property
    def gpus(self) -> int:
        """Physical GPUs of the node under this resource."""
        return -(-self.capacity // self.per_gpu) if self.capacity > 0 else 0

    @property
    def untested(self) -> int:
        """GPUs the Job cannot get: withdrawn (a withdrawn GPU takes all its replicas)."""
        return self.gpus - self.units // self.per_gpu

    @property
    def named_exactly(self) -> bool:
        """The withdrawn GPUs are all named, no more and no fewer."""
        return len(self.withdrawn) == self.untested

    def untested_text(self) -> str:
        """Which GPUs will not be tested, in one sentence ('' when all will be)."""
        if self.untested <= 0:
            return ""
        names = ", ".join(f"{w.name()}: {w.said_by}" for w in self.withdrawn)
        if self.named_exactly:
            return f"Not tested: {self.untested} GPU(s) the device plugin withdrew ({names}); they cannot be requested."
        if self.withdrawn:
            return (
                f"Not tested: {self.untested} GPU(s) the device plugin withdrew; which exactly is not known "
                f"(marked unhealthy: {names}); they cannot be requested."
            )
        return (
            f"Not tested: {self.untested} GPU(s) the device plugin withdrew; which is not known "
            "(no unhealthy mark read from the plugin's log or a health agent); they cannot be requested."
        )

    def tested_text(self) -> str:
        """Which GPUs will be tested, in one sentence."""
        shared = (
            f" ({self.units} units of {self.resource}: {self.per_gpu} per GPU)"
            if self.per_gpu > 1
            else (f" (as {self.resource})" if self.resource != o.GPU_RESOURCE else "")
        )
        count = self.units // self.per_gpu
        which = ""
        withdrawn = {w.uuid for w in self.withdrawn}
        if self.known and self.named_exactly:
            names = [f"{i} ({u})" for i, u in sorted(self.known.items()) if u not in withdrawn]
            if len(names) == count:
                which = ": GPU " + ", ".join(names)
        return f"Tested: {count} of the node's {self.gpus} GPU(s){shared}{which}."


def ask_for(node: K8sObject) -> tuple[str, int, int] | None:
    """(resource, allocatable units, capacity units) the node gives its whole GPUs under: `nvidia.com/gpu`,
    else a renamed or shared resource (`nvidia.com/gpu.shared`); None when it advertises none of them
    (MIG resources are refused before this: DCGM's diagnostic runs on whole GPUs)."""
    cap = o.gpu_resources(node, "capacity")
    alloc = o.gpu_resources(node, "allocatable")
    names = [
        o.GPU_RESOURCE,
        *sorted(r for r in cap if r != o.GPU_RESOURCE and not r.startswith(o.MIG_PREFIX)),
    ]
    for name in names:
        if cap.get(name, 0) > 0:
            return name, alloc.get(name, 0), cap[name]
    return None


def withdrawn_gpus(
    node: K8sObject, plugin_marks: Mapping[str, tuple[int | None, str]], known: Mapping[int, str]
) -> tuple[Withdrawn, ...]:
    """The GPUs named unhealthy: the device plugin's marks first, then the health agents' conditions."""
    index = {u: i for i, u in known.items()}
    out: dict[str, Withdrawn] = {}
    for device, (xid, _line) in sorted(plugin_marks.items()):
        for uuid in _UUID.findall(device):
            said = "the device plugin marked it unhealthy" + (f" (Xid {xid})" if xid is not None else "")
            out.setdefault(uuid, Withdrawn(uuid, index.get(uuid), said))
    for cond in agent_conditions(node):
        for uuid in sorted(set(_UUID.findall(cond.message[:65536]))):
            out.setdefault(uuid, Withdrawn(uuid, index.get(uuid), f"{cond.agent} ({cond.type})"))
    return tuple(sorted(out.values(), key=lambda w: (w.index is None, w.index or 0, w.uuid)))


def gpu_ask(
    node: K8sObject, plugin_marks: Mapping[str, tuple[int | None, str]], known: Mapping[int, str]
) -> GpuAsk | None:
    """What the Job asks for on the node (None: no whole-GPU resource advertised)."""
    found = ask_for(node)
    if found is None:
        return None
    resource, units, capacity = found
    ask = GpuAsk(resource, units, capacity, max(o.replicas_per_gpu(node, resource), 1), dict(known))
    if ask.untested <= 0:
        return ask
    return GpuAsk(
        resource, units, capacity, ask.per_gpu, dict(known), withdrawn_gpus(node, plugin_marks, known)
    )


def discovered(log: str) -> dict[int, str]:
    """DCGM entity id -> UUID from the Job's `dcgmi discovery -l` listing (between its marks)."""
    start = log.find(DISCOVERY_BEGIN)
    end = log.find(DISCOVERY_END, start + 1)
    if start < 0 or end < 0:
        return {}
    out: dict[int, str] = {}
    current: int | None = None
    for line in log[start:end].splitlines():
        row = _ROW.match(line.strip())
        if row:
            current = int(row.group(1))
        m = _DEVICE_UUID.search(line)
        if m and current is not None:
            out.setdefault(current, m.group(1))
    return out


def without_discovery(log: str) -> str:
    """The log with the discovery listing cut out (the diagnostic's JSON is what remains)."""
    start = log.find(DISCOVERY_BEGIN)
    end = log.find(DISCOVERY_END, start + 1)
    if start < 0 or end < 0:
        return log
    return log[:start] + log[end + len(DISCOVERY_END) :]


def tested_uuids(
    entities: Iterable[int], listed: Mapping[int, str], ask: GpuAsk | None, standalone: bool
) -> dict[int, str]:
    """Each tested GPU entity's UUID ('' where not known): the Job's own listing, else the node's
    numbering where it is the same (the operator's host engine numbers every GPU of the node)."""
    out: dict[int, str] = {}
    for entity in sorted(set(entities)):
        uuid = listed.get(entity, "")
        if not uuid and standalone and ask is not None:
            uuid = ask.known.get(entity, "")
        out[entity] = uuid
    return out


def untested_after(ask: GpuAsk | None, tested: Mapping[int, str]) -> list[str]:
    """The node's GPUs the result does not cover, named where known ('GPU 3 (GPU-…)')."""
    if ask is None:
        return []
    seen = {u for u in tested.values() if u}
    if ask.known and all(tested.values()):
        missing = [f"GPU {i} ({u})" for i, u in sorted(ask.known.items()) if u not in seen]
        if missing:
            return missing
    missing_count = ask.gpus - len(tested)
    if missing_count <= 0:
        return []
    named = [w.name() for w in ask.withdrawn if w.uuid not in seen]
    if len(named) == missing_count:
        return named
    return [f"{missing_count} GPU(s) of the node (which is not known)"]


def coverage(tested: Mapping[int, str], untested: Iterable[str]) -> str:
    """The result's line of which GPUs were tested (by UUID) and which were not."""
    names = ", ".join(f"GPU {i} ({u or 'UUID not known'})" for i, u in sorted(tested.items()))
    text = f"Tested: {len(tested)} GPU(s): {names}." if tested else "Tested: no GPU."
    missing = list(untested)
    if missing:
        text += f" Not tested: {', '.join(missing)}; the node is not recorded as passed."
    return text
