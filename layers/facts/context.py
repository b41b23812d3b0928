"""What a walk knows while it runs: the target, the sources, and per-walk caches.

Every read goes through here so one walk lists the nodes once and the
operator pods once, however many layers look at them. A failed read is cached
too: a 403 is reported by each layer that needed it, not retried by each.
"""

from __future__ import annotations

from layers.facts import drareads, migstate
from layers.facts import objects as o
from layers.facts.candidates import Candidates, candidate_nodes, carries_requested, pointed_at
from layers.facts.deployments import DRA_DRIVER_NAMES, EXTRA_SELECTORS, device_plugin_of, dra_role
from layers.facts.readcache import ReadCache, Settings
from layers.facts.trusted import Trust, distrust, operator_trust, owners_shown
from layers.facts.volumes import NONE as NO_VOLUMES
from layers.facts.volumes import PodVolumes, read_volumes
from layers.findings import Target
from layers.sources import Cluster, K8sObject, SourceError, Telemetry

__all__ = [
    "OPERATOR_APPS",
    "PER_NODE_READS",
    "STANDALONE_NAMES",
    "Settings",
    "WalkContext",
    "component",
    "trusted_pods",
]

# `app` label values of the GPU Operator and its operands
# (gpu-operator assets/*/0500_daemonset.yaml), plus the validator's workload pods.
OPERATOR_APPS: dict[str, str] = {
    "gpu-operator": "operator",
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "nvidia-operator-validator": "validator",
    "nvidia-cuda-validator": "cuda-validator",
    "nvidia-device-plugin-validator": "plugin-validator",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-device-plugin-mps-control-daemon": "mps-control-daemon",
    "nvidia-node-status-exporter": "node-status-exporter",
    "nvidia-vgpu-manager-daemonset": "vgpu-manager",
    "nvidia-vgpu-device-manager": "vgpu-device-manager",
    "nvidia-sandbox-validator": "sandbox-validator",
    "nvidia-vfio-manager": "vfio-manager",
    "nvidia-cc-manager": "cc-manager",
    "nvidia-kata-manager": "kata-manager",
    "nvidia-sandbox-device-plugin-daemonset": "sandbox-device-plugin",
}
# Standalone Helm charts (device plugin, GFD, dcgm-exporter) label by app.kubernetes.io/name.
STANDALONE_NAMES: dict[str, str] = {
    "nvidia-device-plugin": "device-plugin",
    "gpu-feature-discovery": "gfd",
    "dcgm-exporter": "dcgm-exporter",
    "gpu-operator": "operator",
    # The NVIDIA DRA driver (layers/facts/deployments.py knows its names).
    **dict.fromkeys(DRA_DRIVER_NAMES, "dra-driver"),
}
OPERATOR_SELECTORS = (
    "app in (" + ",".join(OPERATOR_APPS) + ")",
    # NVIDIADriver-managed driver pods are named after the CR, not the daemonset;
    # OpenShift's per-RHCOS driver daemonsets (Driver Toolkit) carry their own
    # app name, so they are found by the labels must-gather.sh uses.
    "app.kubernetes.io/component=nvidia-driver",
    "openshift.driver-toolkit",
    "app.kubernetes.io/name in (" + ",".join(STANDALONE_NAMES) + ")",
    # Device plugins labelled neither way: the upstream static manifest, GKE's managed plugin.
    *EXTRA_SELECTORS,
)


def operators_own(pod: K8sObject) -> bool:
    """The pod carries the GPU Operator's own labels (an operand, its driver, the operator itself), not a
    standalone chart's or the DRA driver's: it is held to the operator's namespace (layers/facts/trusted.py)."""
    lab = o.labels(pod)
    return (
        lab.get("app") in OPERATOR_APPS
        or lab.get("app.kubernetes.io/component") == "nvidia-driver"
        or "openshift.driver-toolkit" in lab
        or lab.get("app.kubernetes.io/name") == "gpu-operator"
    )


def component(pod: K8sObject) -> str | None:
    """Which operand a pod is ("driver", "device-plugin", "validator", …), or None."""
    lab = o.labels(pod)
    if lab.get("app.kubernetes.io/component") == "nvidia-driver" or "openshift.driver-toolkit" in lab:
        return "driver"
    app = lab.get("app")
    if app in OPERATOR_APPS:
        return OPERATOR_APPS[app]
    if device_plugin_of(pod) is not None and lab.get("app.kubernetes.io/name") != "nvidia-device-plugin":
        return "device-plugin"  # the static manifest's and GKE's (their labels name no chart)
    std = lab.get("app.kubernetes.io/name")
    if std in STANDALONE_NAMES:
        # The device plugin's own chart (v0.15+) names its GFD pods after itself too:
        # tell them apart by their container.
        if any(c.get("name", "").startswith("gpu-feature-discovery") for c in o.containers(pod)):
            return "gfd"
        if STANDALONE_NAMES[std] == "dra-driver":
            return dra_role(pod)
        return STANDALONE_NAMES[std]
    return None


def trusted_pods(pods: list[K8sObject], trust: Trust) -> tuple[list[K8sObject], list[tuple[K8sObject, str]]]:
    """(the labelled pods that are the operator's, the others with why): layers/facts/trusted.py's rule
    with this module's label table. Walks, the ledger and must-gather all split their pods here."""
    shown = owners_shown(pods)
    kept: list[K8sObject] = []
    refused: list[tuple[K8sObject, str]] = []
    for p in pods:
        why = distrust(p, component(p), operators_own(p), trust, shown)
        if why is None:
            kept.append(p)
        else:
            refused.append((p, why))
    return kept, refused


# Past this many nodes, a node's operator pods come from one fleet-wide list instead of
# one list per node: the plugin logs are read on at most 50 nodes too (layers/card.py).
PER_NODE_READS = 50
# The most nodes layers 2-5 examine for an unbound pod (spec/findings.md, Terms: examined nodes),
# in the candidates' order (by name): a walk is about one pod, and past a few nodes what is wrong is
# the fleet's, for the digest. Keeps a pending pod's LIST pages at the node list's + 10.
EXAMINED_NODES = 4


def _found(_node: K8sObject) -> bool:
    """The GPU-node test of nodes already found to be GPU nodes (ReadCache.gpu_nodes)."""
    return True


class WalkContext(ReadCache):
    """The target and cached reads of one walk: the read cache (layers/facts/readcache.py) plus the
    questions that need the DRA reads (candidates, examined nodes) and the operator's pods."""

    def __init__(
        self,
        cluster: Cluster,
        telemetry: Telemetry,
        target: Target,
        pod: K8sObject | None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__(cluster, telemetry, target, pod, settings)
        self._nodes_asked: set[str] = set()  # nodes whose operator pods were read one by one
        self._not_examined: list[str] = []  # candidates past EXAMINED_NODES (examined_nodes)
        # Pods with operand labels the reads refused as evidence, and why (layers/facts/trusted.py).
        self._impostors: dict[tuple[str | None, str], tuple[K8sObject, str]] = {}

    def candidates(self) -> Candidates:
        """The candidate nodes of the unbound target pod, once per walk (spec: Terms). Every layer
        that picks nodes for an unbound pod picks among these. A node walk or a bound pod has
        none: its node is the one examined. DRA pods get their predicate here (layers/facts/candidates.py)."""

        def pick() -> Candidates:
            if self.pod is None or self.bound_node or o.scheduling_gates(self.pod):
                # A gated pod has not been tried by the scheduler: no node is examined for it.
                return Candidates(nodes=(), carrying=())
            nodes = self.nodes()
            vols = self.volumes()
            if drareads.uses_dra_gpus(self):
                carries, gpu_node = drareads.publishes_requested(self), drareads.is_dra_gpu_node(self)
                return candidate_nodes(self.pod, nodes, carries, gpu_node, vols)
            carries = drareads.not_via_dra(self, carries_requested(self.pod))
            # The GPU nodes as found once per walk (every GPU node, in node order), not asked again.
            return candidate_nodes(self.pod, self.gpu_nodes(), carries, gpu_node=_found, volumes=vols)

        return self.cached("candidates", pick)

    def volumes(self) -> PodVolumes:
        """The unbound target pod's PersistentVolumes that pin it to nodes, read once per walk."""
        if self.pod is None or self.bound_node:
            return NO_VOLUMES
        pod = self.pod
        return self.cached("volumes", lambda: read_volumes(self.cluster, pod))

    def examined_nodes(self) -> list[str]:
        """Nodes later layers look at (spec/findings.md, Terms: examined nodes): the pod's node, else
        the candidate nodes layer 1 points at (capacity above allocatable, not advertising, a MIG
        layout not applied), else every candidate node."""
        if self.bound_node:
            return [self.bound_node]

        def sick(node: K8sObject) -> bool:
            return bool(o.allocatable_gaps(node)) or not o.advertised(node) or migstate.not_applied(node)

        def pick() -> list[str]:
            # A DRA pod's candidates are pointed at by their slices: tainted GPUs, or none published.
            pointed = (
                drareads.pointed_at(self) if self.pod is not None and drareads.uses_dra_gpus(self) else sick
            )
            # At most EXAMINED_NODES: each costs a pod list (a maximum-seat LIST under API Priority
            # and Fairness) and two log reads, and a pending pod of a 65,000-node fleet may have
            # thousands of candidates. Layer 1 still names every node it points at.
            nodes = pointed_at(self.candidates().nodes, pointed)
            self._not_examined = nodes[EXAMINED_NODES:]
            return nodes[:EXAMINED_NODES]

        return self.cached("examined", pick)

    def not_examined(self) -> list[str]:
        """The candidate nodes past EXAMINED_NODES that layers 2-5 do not look at (after examined_nodes)."""
        return list(self._not_examined)

    # --- operator ------------------------------------------------------------------

    def operator_trust(self) -> Trust:
        """Where the GPU Operator's operands run (layers/facts/trusted.py): the setting, else the
        ClusterPolicy's status, else the DaemonSets it owns; read once per walk. Unreadable: None."""

        def read() -> Trust:
            setting = self.settings.operator_namespace
            if setting:
                return operator_trust(setting, [], [])
            try:
                policies = self.custom("nvidia.com", "v1", "clusterpolicies")
                known = operator_trust(None, policies, [])
                if known.namespace or not policies:
                    return known
                return operator_trust(
                    None, policies, self.cluster.list_daemonsets(label_selector=OPERATOR_SELECTORS[0])
                )
            except SourceError:
                return Trust(None)  # then only ownership decides (layers/facts/trusted.py)

        return self.cached("operator_trust", read)

    def _trusted(self, pods: list[K8sObject]) -> list[K8sObject]:
        """The labelled pods that are evidence; the others are kept for the walk to name (impostors)."""
        kept, refused = trusted_pods(pods, self.operator_trust())
        for p, why in refused:
            self._impostors[(o.namespace(p), o.name(p))] = (p, why)
        return kept

    def impostors(self) -> list[tuple[K8sObject, str]]:
        """Pods carrying operand labels that the reads refused as evidence, and why, by namespace and name."""
        return [self._impostors[k] for k in sorted(self._impostors, key=lambda k: (k[0] or "", k[1]))]

    def operator_pods(self) -> list[K8sObject]:
        """The GPU Operator's pod and its operands, found by label in any namespace (or the setting's),
        kept only when trusted (layers/facts/trusted.py). The one reader of "which pods are the operator's"."""

        def read() -> list[K8sObject]:
            seen: dict[tuple[str | None, str], K8sObject] = {}
            ns = self.settings.operator_namespace
            for selector in OPERATOR_SELECTORS:
                for pod in self.cluster.list_pods(namespace=ns, label_selector=selector):
                    seen[(o.namespace(pod), o.name(pod))] = pod
            return self._trusted(list(seen.values()))

        return self.cached("operator_pods", read)

    def operator_pods_on(self, node: str, comp: str | None = None) -> list[K8sObject]:
        """The operator's pods on one node (trusted ones only, as operator_pods).

        Read with the node's own pod list (`spec.nodeName=`) while few nodes are asked
        about, so a walk or a digest pays per examined node, not per pod of the fleet;
        from the fleet-wide operator list once that is read anyway or many nodes are asked.
        """
        if self._fleet_wide_operator_reads(node):

            def index() -> dict[str | None, list[K8sObject]]:
                # One pass over the operator pods, then a lookup per node: a pending pod
                # examines every GPU node of a 5,000-node fleet.
                by_node: dict[str | None, list[K8sObject]] = {}
                for p in self.operator_pods():
                    by_node.setdefault(o.pod_node(p), []).append(p)
                return by_node

            pods = self.cached("operator_pods_by_node", index).get(node, [])
        else:
            self._nodes_asked.add(node)
            ns = self.settings.operator_namespace

            def on_node() -> list[K8sObject]:
                labelled = [
                    p
                    for p in self.pods_on(node)
                    if component(p) is not None and (ns is None or o.namespace(p) == ns)
                ]
                return self._trusted(labelled)

            pods = self.cached(("operator_pods_on", node), on_node)
        return pods if comp is None else [p for p in pods if component(p) == comp]

    def _fleet_wide_operator_reads(self, node: str) -> bool:
        if "operator_pods" in self._cache:
            return True
        examined = self._cache.get("examined")
        if isinstance(examined, list) and len(examined) > PER_NODE_READS:
            return True
        if node in self._nodes_asked:
            # Its own list is read (and cached) already: asking again about the 50th node (the
            # digest reads its plugin pods, then their logs) is no reason to list the fleet's pods.
            return False
        return len(self._nodes_asked) >= PER_NODE_READS

    def pods_on(self, node: str) -> list[K8sObject]:
        """Every pod bound to the node, in any namespace (one `spec.nodeName=` list)."""
        return self.cached(
            ("pods_on", node), lambda: self.cluster.list_pods(field_selector=f"spec.nodeName={node}")
        )

    def operator_namespace(self) -> str | None:
        """Where the operator runs: the setting, the ClusterPolicy or its DaemonSets, else the trusted
        operator pod's namespace."""
        trust = self.operator_trust()
        if trust.namespace:
            return trust.namespace
        for p in self.operator_pods():
            if component(p) == "operator":
                return o.namespace(p)
        for p in self.operator_pods():
            return o.namespace(p)
        return None

    # --- events and logs -------------------------------------------------------------

    def events(self, kind: str, namespace: str | None, name: str) -> list[K8sObject]:
        return self.cached(
            ("events", kind, namespace, name),
            lambda: self.cluster.list_events(namespace, kind, name),
        )

    def log(self, namespace: str, pod: str, container: str, previous: bool = False) -> str | None:
        """A container log, or None when the container has none (not an error)."""

        def read() -> str | None:
            try:
                return self.cluster.pod_log(
                    namespace, pod, container, previous=previous, tail_lines=self.settings.log_tail_lines
                )
            except SourceError as err:
                if err.kind == "not_found":
                    return None
                raise

        return self.cached(("log", namespace, pod, container, previous), read)

    def log_window(
        self, namespace: str, pod: str, container: str, previous: bool, since_s: int | None, limit_bytes: int
    ) -> str | None:
        """A container log by time and size (no tail): the last `since_s` seconds (None: since the
        container started), stopped after `limit_bytes`; None when the container has none."""

        def read() -> str | None:
            try:
                return self.cluster.pod_log(
                    namespace,
                    pod,
                    container,
                    previous=previous,
                    tail_lines=None,
                    since_seconds=since_s,
                    limit_bytes=limit_bytes,
                )
            except SourceError as err:
                if err.kind == "not_found":
                    return None
                raise

        return self.cached(("log_window", namespace, pod, container, previous, since_s, limit_bytes), read)

    def custom(self, group: str, version: str, plural: str) -> list[K8sObject]:
        return self.cached(
            ("custom", group, plural), lambda: self.cluster.list_custom(group, version, plural)
        )
