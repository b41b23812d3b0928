"""Where a pod may be placed: tolerations against taints, nodeSelector, required node affinity.

Pure readers over the Kubernetes dicts following the scheduler's own rules
(TaintToleration and NodeAffinity plugins), and the layer-1 findings that check
what a FailedScheduling message said (taint, selector, cordon) against the nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from layers.facts import cordons, owners
from layers.facts import objects as o
from layers.facts.fold import listed, shown
from layers.facts.schedmsg import SchedulingFailure
from layers.findings import Finding, finding
from layers.sources import K8sObject

# The cordon taint is the scheduler's "were unschedulable", not an untolerated taint.
CORDON_TAINT = "node.kubernetes.io/unschedulable"
# Taints Kubernetes itself puts on a node in trouble (node lifecycle controller, kubelet): what each
# says of the node. A toleration for them is never the fix; the node is.
CONDITION_TAINTS = {
    "node.kubernetes.io/not-ready": "not ready",
    "node.kubernetes.io/unreachable": "unreachable (its kubelet stopped posting status)",
    "node.kubernetes.io/memory-pressure": "under memory pressure",
    "node.kubernetes.io/disk-pressure": "under disk pressure",
    "node.kubernetes.io/pid-pressure": "under PID pressure",
    "node.kubernetes.io/network-unavailable": "without a working network",
    "node.kubernetes.io/out-of-service": "marked out of service",
}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """The Kubernetes rule (ToleratesTaint): effect, key and operator Exists/Equal."""
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        op = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or (op == "Equal" and (tol.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def taint_text(t: Mapping[str, Any]) -> str:
    """A taint as kubectl writes it: `key=value:Effect`."""
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


def label_value(value: Any) -> str | None:
    """A label or selector value as the API stores it: a string (YAML may give `true` or `8` unquoted)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _labels(node: K8sObject) -> dict[str, str | None]:
    return {str(k): label_value(v) for k, v in o.labels(node).items()}


def _term_matches(term: Mapping[str, Any], node: K8sObject) -> bool:
    """One nodeSelectorTerm (matchExpressions on labels, matchFields on metadata.name)."""
    lab = _labels(node)
    for expr in term.get("matchExpressions") or []:
        if not _expr_matches(expr, lab.get(str(expr.get("key")))):
            return False
    for expr in term.get("matchFields") or []:
        if expr.get("key") == "metadata.name" and not _expr_matches(expr, o.name(node)):
            return False
    return True


def _expr_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op, values = expr.get("operator"), [label_value(v) for v in expr.get("values") or []]
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            limit = int(str(values[0]))
            return int(value) > limit if op == "Gt" else int(value) < limit
        except ValueError:
            return False
    return False


def selector_misses(pod: K8sObject, node: K8sObject) -> list[str]:
    """Why the pod's nodeSelector / required node affinity rejects the node (empty: it matches)."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeSelector") and not spec.get("affinity"):
        return []  # nothing to miss: the node's labels are not read (a pending pod's 65,000 candidates)
    lab = _labels(node)
    wanted = {str(k): label_value(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    why = [
        f"nodeSelector {k}={v}, node has {k}={lab[k]}"
        if k in lab
        else f"nodeSelector {k}={v}, node lacks {k}"
        for k, v in wanted.items()
        if lab.get(k) != v
    ]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, node) for t in terms):
        # Terms are ORed: say what fails in each, with the node's own value, so a person sees
        # "nvidia.com/gpu.memory Gt 90000, node has 81920" rather than re-evaluating by hand.
        why.append("required node affinity: " + " or ".join(_term_miss(t, node) for t in terms))
    return why


def terms_match(terms: Sequence[Mapping[str, Any]], node: K8sObject) -> bool:
    """A NodeSelector's terms (ORed) match the node: a PersistentVolume's required node affinity as
    the scheduler's VolumeBinding plugin reads it, with the pod's own affinity rules."""
    return not terms or any(_term_matches(t, node) for t in terms)


def terms_miss(terms: Sequence[Mapping[str, Any]], node: K8sObject) -> str:
    """Why the node fails each of the terms, with its own value ("zone In us-east-1a, node has …")."""
    return " or ".join(_term_miss(t, node) for t in terms)


def terms_text(terms: Sequence[Mapping[str, Any]]) -> str:
    """A NodeSelector as a person reads it: `topology.kubernetes.io/zone In us-east-1a`."""
    return " or ".join(
        " and ".join(
            _expr_text(e) for e in [*(t.get("matchExpressions") or []), *(t.get("matchFields") or [])]
        )
        or "an empty term"
        for t in terms
    )


def _term_miss(term: Mapping[str, Any], node: K8sObject) -> str:
    """The first expression of a nodeSelectorTerm that the node fails, with the node's value."""
    lab = _labels(node)
    for expr in term.get("matchExpressions") or []:
        key = str(expr.get("key"))
        if not _expr_matches(expr, lab.get(key)):
            return _expr_text(expr) + (
                f", node has {key}={lab[key]}" if key in lab else f", node lacks {key}"
            )
    for expr in term.get("matchFields") or []:
        if expr.get("key") == "metadata.name" and not _expr_matches(expr, o.name(node)):
            return _expr_text(expr) + f", node is {o.name(node)}"
    return "an empty term"


def _expr_text(expr: Mapping[str, Any]) -> str:
    values = [label_value(v) or "" for v in expr.get("values") or []]
    vals = f" {','.join(values)}" if values else ""
    return f"{expr.get('key')} {expr.get('operator')}{vals}"


# Added to every pod by the DefaultTolerationSeconds admission plugin: noise in evidence.
_DEFAULT_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def toleration_text(tol: Mapping[str, Any]) -> str:
    """A toleration as a person writes it: `key=value:Effect`, `key:Effect (Exists)`, `* (Exists)`."""
    key = tol.get("key") or "*"
    op = tol.get("operator") or "Equal"
    value = f"={tol.get('value')}" if op == "Equal" and tol.get("value") else ""
    effect = f":{tol['effect']}" if tol.get("effect") else ""
    return f"{key}{value}{effect}" + (" (Exists)" if op == "Exists" else "")


def tolerations_shown(tolerations: Sequence[Mapping[str, Any]]) -> str:
    own = [
        t
        for t in tolerations
        if not (t.get("key") in _DEFAULT_TOLERATIONS and t.get("tolerationSeconds") is not None)
    ]
    return ", ".join(toleration_text(t) for t in own) or "none (only the default not-ready/unreachable ones)"


def near_miss(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> str:
    """Why a toleration for the taint's key does not apply (wrong effect or value), or ''."""
    for tol in tolerations:
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            return f" (it tolerates {taint.get('key')} only with effect {tol.get('effect')})"
        if (tol.get("operator") or "Equal") == "Equal" and (tol.get("value") or "") != (
            taint.get("value") or ""
        ):
            return f" (it tolerates {taint.get('key')} only with value {tol.get('value') or '(empty)'!s})"
    return ""


def node_conditions(node: K8sObject) -> list[str]:
    """The node's Ready condition and any pressure condition that is not False, as kubectl shows them."""
    out = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        kind, status = cond.get("type"), cond.get("status")
        if kind == "Ready" or status != "False":
            why = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
            since = f" since {cond['lastTransitionTime']}" if cond.get("lastTransitionTime") else ""
            out.append(f"condition {kind}={status}" + (f" ({why})" if why else "") + since)
    return out


def one_node(names: Sequence[str]) -> str | None:
    """The node a finding is about, when it is about exactly one."""
    return names[0] if len(names) == 1 else None


# --- what the scheduler said, checked against the nodes ----------------------------------


def scheduler_reasons(
    pod: K8sObject,
    failures: list[SchedulingFailure],
    *,
    taint_nodes: Sequence[K8sObject],
    selector_nodes: Sequence[K8sObject],
    candidates: Sequence[K8sObject],
) -> list[Finding]:
    """What the scheduler said, checked against the nodes it can be about: taints against
    `taint_nodes`, the selector against `selector_nodes`, cordons against the candidate nodes."""
    ns, name = o.namespace(pod), o.name(pod)
    spec = pod.get("spec") or {}
    out: list[Finding] = []

    def said(flag: str) -> str:
        """The latest message that reported this reason."""
        return next(f.message for f in reversed(failures) if getattr(f, flag))

    if any(f.untolerated_taint for f in failures):
        tolerations = spec.get("tolerations") or []
        by_taint: dict[str, list[K8sObject]] = defaultdict(list)
        near: dict[str, str] = {}
        state: dict[str, str] = {}
        for node in taint_nodes:
            for taint in (node.get("spec") or {}).get("taints") or []:
                if taint.get("effect") not in BLOCKING_EFFECTS or taint.get("key") == CORDON_TAINT:
                    continue
                if owners.owner_taint(taint):
                    continue  # the owner removing or repairing the node: layers/ownership.py says it
                if not tolerates(tolerations, taint):
                    by_taint[taint_text(taint)].append(node)
                    near[taint_text(taint)] = near_miss(tolerations, taint)
                    if str(taint.get("key")) in CONDITION_TAINTS:
                        state[taint_text(taint)] = CONDITION_TAINTS[str(taint.get("key"))]
        plain = sorted((t, n) for t, n in by_taint.items() if t not in state)
        troubled = sorted((t, n) for t, n in by_taint.items() if t in state)
        looks = [  # what either finding below asks to re-run
            "kubectl get nodes -o custom-columns='NODE:.metadata.name,TAINTS:.spec.taints'",
            f"kubectl get pod -n {ns} {name} -o jsonpath='{{.spec.tolerations}}'",
        ]
        if plain:
            # One finding however many taints: each is a line of it, so a second tainted pool the
            # pod could also use (a dedicated team's, say) adds evidence, not another answer.
            parts = [
                f"{len(tainted)} GPU node(s) ({shown([o.name(n) for n in tainted], limit=3)}) have taint "
                f"{taint_shown}{near[taint_shown]}"
                for taint_shown, tainted in plain
            ]
            names = sorted({o.name(n) for _, tainted in plain for n in tainted})
            out.append(
                finding(
                    "L1_UNTOLERATED_TAINT",
                    f"{'; '.join(parts)}: {ns}/{name} does not tolerate "
                    f"{'it' if len(plain) == 1 else 'them'} — add a toleration or remove the taint",
                    evidence=[
                        f"scheduler: {said('untolerated_taint')}",
                        *listed([f"{o.name(n)}: taint {t}" for t, tainted in plain for n in tainted]),
                        f"pod tolerations: {tolerations_shown(tolerations)}",
                    ],
                    commands=looks,
                    node=one_node(names),
                )
            )
        for taint_shown, tainted in troubled:
            names = [o.name(n) for n in tainted]
            # Kubernetes tainted the node because it is in trouble: tolerating that would send
            # the pod to a broken node. The node's conditions say what is wrong.
            out.append(
                finding(
                    "L1_UNTOLERATED_TAINT",
                    f"{len(names)} GPU node(s) ({shown(names, limit=3)}) are {state[taint_shown]}: Kubernetes "
                    f"tainted them {taint_shown}, so {ns}/{name} cannot go there — bring the node back (kubelet, "
                    "network, power), a toleration is not the fix",
                    evidence=[
                        f"scheduler: {said('untolerated_taint')}",
                        *listed([f"{n}: taint {taint_shown}" for n in names]),
                        *listed([f"{o.name(n)}: {line}" for n in tainted for line in node_conditions(n)]),
                        f"pod tolerations: {tolerations_shown(tolerations)}",
                    ],
                    commands=[
                        *looks,
                        *(
                            f"kubectl describe node {n} | sed -n '/Conditions/,/Addresses/p'"
                            for n in names[:3]
                        ),
                    ],
                    node=one_node(names),
                )
            )

    if any(f.selector_mismatch for f in failures):
        misses = {o.name(n): why for n in selector_nodes if (why := selector_misses(pod, n))}
        if misses:
            names = sorted(misses)
            out.append(
                finding(
                    "L1_SELECTOR_MISMATCH",
                    f"{len(names)} of {len(selector_nodes)} GPU node(s) do not match the node selector/affinity of "
                    f"{ns}/{name}: fix the selector or the node labels",
                    evidence=[
                        f"scheduler: {said('selector_mismatch')}",
                        f"pod nodeSelector: {spec.get('nodeSelector') or 'none'}",
                        *listed([f"{n}: {'; '.join(misses[n])}" for n in names]),
                    ],
                    commands=[
                        f"kubectl get pod -n {ns} {name} -o jsonpath='{{.spec.nodeSelector}} {{.spec.affinity}}'",
                        f"kubectl get nodes --show-labels | grep -E '{'|'.join(names[:5])}'",
                    ],
                    # The pod's spec is at fault, not a node: naming the one node that lacks a label
                    # would aim must-gather and cordon at a healthy node, and would make the answer
                    # depend on how many other nodes happen to be GPU nodes (the noise property test).
                    node=None,
                )
            )

    if any(f.unschedulable for f in failures):
        cordoned = [o.name(n) for n in candidates if o.is_unschedulable(n)]
        by = {o.name(n): cordons.cordoned_by(n) or "" for n in candidates if o.is_unschedulable(n)}
        held = [n for n in candidates if o.is_unschedulable(n) and owners.owner_of(n)]
        if cordoned:
            out.append(
                finding(
                    "L1_NODES_UNSCHEDULABLE",
                    f"{len(cordoned)} GPU node(s) that advertise the requested resource are cordoned "
                    f"({shown(cordoned, limit=3)}, {by[cordoned[0]]}): "
                    + cordons.cordon_advice(held, len(cordoned)),
                    evidence=[
                        f"scheduler: {said('unschedulable')}",
                        *listed([f"{n}: spec.unschedulable=true" for n in cordoned]),
                        *listed([f"{n}: {by[n]}" for n in cordoned]),
                    ],
                    commands=[
                        "kubectl get nodes --field-selector spec.unschedulable=true",
                        *(
                            f"kubectl describe node {n} | grep -iE 'Taints|Unschedulable'"
                            for n in cordoned[:3]
                        ),
                    ],
                    node=one_node(cordoned),
                )
            )
    return out
