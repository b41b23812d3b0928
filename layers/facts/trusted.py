"""Which labelled pods are trusted evidence, as the GPU Operator's (or a device plugin's, or the DRA driver's) own.

Labels are not proof: any tenant can run a pod labelled `app: nvidia-device-plugin-daemonset` in its own
namespace and print device-plugin-shaped Xid lines (spec/interfaces.md, "Only trusted evidence"). A pod
the operator-pod reads return (layers/facts/context.py, the one reader) must also be

- **owned as an operand is**: its controller (ownerReferences) a DaemonSet (or the Node, for a static
  pod's mirror) — a ReplicaSet for the
  operator's own Deployment and the DRA driver's controller, the validator pod or its DaemonSet for the
  validator's workload pods. A pod with no owner is a bare pod; one is never evidence where the other
  operator pods read show owners (every pod a DaemonSet makes has one), but for the validator's
  workload pods in the operator's namespace (the validator makes them itself);
- **in the operator's namespace**, for the GPU Operator's own operands: `GPUBOT_OPERATOR_NAMESPACE`, else
  the ClusterPolicy's `status.namespace` (the operator writes its own namespace there), else the
  namespace of the DaemonSets the ClusterPolicy owns. Never from a pod that merely carries the labels.
  GKE's managed plugin is held to `kube-system` (layers/facts/deployments.py); a standalone plugin or
  the DRA driver, installed wherever its chart went, is held to its DaemonSet owner.

Pure: the caller reads the ClusterPolicies and DaemonSets once per walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from layers.facts import objects as o
from layers.sources import K8sObject

# The operator's own Deployment and the DRA driver's controller run under a ReplicaSet; the validator's
# workload pods (cuda-validator, plugin-validator) are made by the validator pod (or, in old
# releases, a DaemonSet). Every other operand is a DaemonSet's.
_REPLICASET_COMPONENTS = frozenset({"operator", "dra-controller"})
_VALIDATOR_WORKLOADS = frozenset({"cuda-validator", "plugin-validator"})
# Owners that make the operator's DaemonSets: they carry an ownerReference to one of these.
OPERATOR_OWNER_KINDS = frozenset({"ClusterPolicy", "NVIDIADriver"})


class Trust(msgspec.Struct, frozen=True):
    """Where the GPU Operator's operands run, and how that was found (None: nothing says)."""

    namespace: str | None
    how: str = ""


def controller(obj: K8sObject) -> dict[str, str] | None:
    """The object's controlling ownerReference (the first owner when none is marked controller)."""
    refs = [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, dict)]
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return {str(k): str(v) for k, v in chosen.items()} if chosen else None


def _owner_ok(comp: str | None, owner: dict[str, str]) -> bool:
    kind = owner.get("kind", "")
    if comp in _REPLICASET_COMPONENTS:
        return kind == "ReplicaSet"
    if comp in _VALIDATOR_WORKLOADS:
        return kind in ("Pod", "DaemonSet")
    # A static pod's mirror is owned by its Node: the kubelet runs it from the host's manifests.
    return kind in ("DaemonSet", "Node")


def distrust(
    pod: K8sObject, comp: str | None, operators_own: bool, trust: Trust, owners_shown: bool
) -> str | None:
    """Why a labelled pod is not evidence (None: it is). `operators_own`: it carries the GPU Operator's
    own labels (held to its namespace); `owners_shown`: other operator pods of the same read carry
    ownerReferences, so a bare pod among them is an imitation, not an old manifest."""
    if trust.namespace and operators_own and o.namespace(pod) != trust.namespace:
        return f"outside the operator's namespace {trust.namespace} ({trust.how})"
    owner = controller(pod)
    if owner is not None and not _owner_ok(comp, owner):
        return f"owned by {owner.get('kind', '?')[:63]} {owner.get('name', '?')[:253]}, not the operand's controller"
    # The validator creates its CUDA and plugin workload pods itself, some releases without an owner:
    # in the operator's namespace (checked above), they stand bare.
    held = comp in _VALIDATOR_WORKLOADS and bool(trust.namespace)
    if owner is None and owners_shown and not held:
        return "no owner (a bare pod, not a DaemonSet's)"
    return None


def owners_shown(pods: Iterable[K8sObject]) -> bool:
    return any(controller(p) is not None for p in pods)


def operator_trust(
    setting: str | None, policies: Sequence[K8sObject], daemonsets: Sequence[K8sObject]
) -> Trust:
    """The operator's namespace: the setting, the ClusterPolicy's status, the DaemonSets it owns."""
    if setting:
        return Trust(setting, "GPUBOT_OPERATOR_NAMESPACE")
    for cp in policies:
        ns = (cp.get("status") or {}).get("namespace")
        if isinstance(ns, str) and ns:
            return Trust(ns, f"ClusterPolicy {o.name(cp)} status.namespace")
    for ds in daemonsets:
        owner = controller(ds)
        if owner is not None and owner.get("kind") in OPERATOR_OWNER_KINDS and o.namespace(ds):
            return Trust(
                o.namespace(ds), f"DaemonSet {o.name(ds)} owned by {owner['kind']} {owner.get('name', '')}"
            )
    return Trust(None)
