"""A pod's volumes as the scheduler places them: bound PersistentVolumes with a required node affinity.

A zonal disk (EBS, PD, Azure Disk) or a local volume is pinned: its PersistentVolume's
`spec.nodeAffinity.required` names the zone or host it lives in, and the scheduler's VolumeBinding
plugin keeps the pod on nodes that match every such volume ("volume node affinity conflict").
Those nodes are the pod's candidates (spec/findings.md, Terms: candidate nodes), so this is read
with them (layers/facts/candidates.py), not as a special case of a layer. A claim not bound yet
(WaitForFirstConsumer) pins nothing: it is provisioned where the pod goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

from layers.facts import objects as o
from layers.facts.placement import terms_match, terms_miss, terms_text
from layers.sources import K8sObject, SourceError


class VolumeReads(Protocol):
    """The two reads (layers/sources.py Cluster has them)."""

    def get_persistent_volume_claim(self, namespace: str, name: str) -> K8sObject: ...

    def get_persistent_volume(self, name: str) -> K8sObject: ...


class PinnedVolume(msgspec.Struct, frozen=True):
    claim: str  # namespace/name
    volume: str  # the PersistentVolume
    terms: tuple[Mapping[str, Any], ...]  # its required nodeSelectorTerms

    @property
    def text(self) -> str:
        return f"PersistentVolume {self.volume} (claim {self.claim}) node affinity: {terms_text(self.terms)}"


class PodVolumes(msgspec.Struct, frozen=True):
    """The pod's pinned volumes, and the reads that were refused (said as `unknown` by layer 1)."""

    pinned: tuple[PinnedVolume, ...] = ()
    unread: tuple[tuple[str, SourceError], ...] = ()  # (what, error)

    def misses(self, node: K8sObject) -> list[str]:
        """Why the node cannot hold the pod's volumes (empty: it can)."""
        return [
            f"volume {v.volume} (claim {v.claim}) node affinity: {terms_miss(v.terms, node)}"
            for v in self.pinned
            if not terms_match(v.terms, node)
        ]


NONE = PodVolumes()


def claim_names(pod: K8sObject) -> list[str]:
    """The PersistentVolumeClaims the pod mounts: named ones, and a generic ephemeral volume's
    `<pod>-<volume>` claim."""
    out: list[str] = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            out.append(str(claim))
        elif vol.get("ephemeral"):
            out.append(f"{o.name(pod)}-{vol.get('name')}")
    return list(dict.fromkeys(out))


def read_volumes(cluster: VolumeReads, pod: K8sObject) -> PodVolumes:
    """The pod's bound volumes that pin it to nodes; a refused read is kept, never raised, so the
    candidates are still computed (without that volume's rule)."""
    ns = str(o.namespace(pod) or "")
    pinned: list[PinnedVolume] = []
    unread: list[tuple[str, SourceError]] = []
    for name in claim_names(pod):
        try:
            claim = cluster.get_persistent_volume_claim(ns, name)
        except SourceError as err:
            if err.kind != "not_found":  # a missing claim is the scheduler's own message
                unread.append((f"PersistentVolumeClaim {ns}/{name}", err))
            continue
        volume = str((claim.get("spec") or {}).get("volumeName") or "")
        if not volume:
            continue  # not bound yet: provisioned where the pod goes
        try:
            pv = cluster.get_persistent_volume(volume)
        except SourceError as err:
            if err.kind != "not_found":
                unread.append((f"PersistentVolume {volume}", err))
            continue
        required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
        terms: Sequence[Mapping[str, Any]] = required.get("nodeSelectorTerms") or []
        if terms:
            pinned.append(PinnedVolume(f"{ns}/{name}", volume, tuple(terms)))
    return PodVolumes(tuple(pinned), tuple(unread))
