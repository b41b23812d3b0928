"""The target's PersistentVolumeClaims and their PersistentVolumes in a must-gather bundle: layer 1
reads the volumes' required node affinity (L1_VOLUME_NODE_AFFINITY, layers/facts/volumes.py), so a
bundle without them replays a different walk.
"""

from __future__ import annotations

from functools import partial

from bot.actions import bundle_text as bt
from bot.actions.gather import Collector
from layers.facts import objects as o
from layers.sources import K8sObject


def claimed_volumes(pod: K8sObject) -> list[str]:
    """The PersistentVolumeClaims a pod's volumes name, in order, once each."""
    names: dict[str, None] = {}
    for v in (pod.get("spec") or {}).get("volumes") or []:
        claim = v.get("persistentVolumeClaim") if isinstance(v, dict) else None
        if isinstance(claim, dict) and claim.get("claimName"):
            names[str(claim["claimName"])] = None
    return list(names)


def volume_files(c: Collector, pod: K8sObject) -> None:
    ns = o.namespace(pod) or ""
    kept: list[K8sObject] = []
    for claim in claimed_volumes(pod):
        pvc = c.read(
            f"persistentvolumeclaim {ns}/{claim}",
            partial(c.cluster.get_persistent_volume_claim, ns, claim),
            None,
        )
        if pvc is None:
            continue
        kept.append(pvc)
        volume = str((pvc.get("spec") or {}).get("volumeName") or "")
        if volume:
            pv = c.read(f"persistentvolume {volume}", partial(c.cluster.get_persistent_volume, volume), None)
            if pv is not None:
                kept.append(pv)
    if kept:
        c.archive.add("target/volumes.yaml", bt.to_yaml(c.keep(kept)), essential=True)
