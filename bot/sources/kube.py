"""The live cluster: layers.sources.Cluster and ClusterWriter over the official kubernetes client.

The client's Configuration does auth (tokens, exec plugins and their refresh: its
`auth_settings`) and its RESTClientObject TLS, proxies and retries; requests go
out through it on the REST paths below, and bodies come back as the API's own
JSON (camelCase dicts, bot/sources/jsonbody.py), so a live cluster looks exactly like a
scenario file to the layers. The generated API classes, their pydantic models and
the ApiClient that serializes them are never imported: building them cost ~1 s of
every command's start (bot/sources/kubeclient.py, bot/sources/kubeconfig.py).
Every failure becomes a SourceError naming what could not be read
(bot/sources/kube_errors.py), counted in gpubot_kubernetes_api_errors_total by
its kind; nothing from the client (tokens included) leaks into messages.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from msgspec.structs import replace
from urllib3.util.retry import Retry

from bot.sources.jsonbody import decode_body
from bot.sources.kube_counts import RequestCounts, request_kind
from bot.sources.kube_errors import api_error, counted, unreachable
from bot.sources.kube_resources import (
    CONFIGMAPS,
    DAEMONSETS,
    DRA_BETAS,
    DRA_FALLBACK,
    DRA_RESOURCES,
    EVENTS,
    FALLBACK_VERSIONS,
    NODES,
    PODS,
    PVCS,
    PVS,
    RUNTIMECLASSES,
    Resource,
    query_value,
)
from bot.sources.kubeclient import (
    ApiException,
    ConfigException,
    Configuration,
    RESTClientObject,
    load_incluster_config,
)
from bot.sources.kubeconfig import load_kubeconfig
from bot.sources.listing import DRA_GROUP, EVERYTHING, ListReads, Selection
from bot.sources.selectors import node_named
from bot.sources.stalls import StallMemory
from layers.facts.cordons import GPUBOT_FIELD_MANAGER as FIELD_MANAGER
from layers.sources import K8sObject, SourceError

PAGE_SIZE = 500
USER_AGENT = "gpubot"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class KubeCluster(ListReads):
    """A Kubernetes API server, read through one private connection pool of the client."""

    def __init__(self, configuration: Configuration, source: str, timeout_s: float = 10.0) -> None:
        if not timeout_s > 0:
            raise SourceError("bad_input", f"Kubernetes request timeout must be positive, got {timeout_s}")
        self.configuration = configuration
        self._rest = RESTClientObject(configuration)
        self._source = source
        self.timeout_s = timeout_s
        self.page_size = PAGE_SIZE
        self.server = str(configuration.host)
        self.calls = 0  # HTTP requests made, for benchmarks
        self.counts = RequestCounts()  # by verb, resource and page (bot/sources/kube_counts.py)
        self._calls_lock = threading.Lock()
        self._stalled = StallMemory(timeout_s)  # (verb, resource) of reads that just timed out
        self._log_stalls = StallMemory(timeout_s)  # nodes whose pods' logs just timed out

    @property
    def api_client(self) -> Any:
        """A client's ApiClient on the same configuration, for calls outside the Cluster protocol
        (pods/exec for a bug report); built only then, with its pydantic models."""
        from kubernetes.client.api_client import ApiClient

        api = ApiClient(configuration=self.configuration)
        api.user_agent = USER_AGENT
        return api

    # --- construction ------------------------------------------------------------

    @classmethod
    def from_config(
        cls, kubeconfig: str | None = None, context: str | None = None, timeout_s: float = 10.0
    ) -> KubeCluster:
        """In-cluster credentials inside a pod, else the kubeconfig (argument, KUBECONFIG, ~/.kube/config)."""
        cfg = Configuration()
        explicit = kubeconfig or os.environ.get("KUBECONFIG") or context
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not explicit:
            try:
                load_incluster_config(client_configuration=cfg)
            except (ConfigException, OSError) as err:
                raise SourceError("bad_input", f"in-cluster Kubernetes credentials unusable: {err}") from None
            source = "in-cluster"
        else:
            path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            source = f"context {load_kubeconfig(cfg, path, context)}"
        # A dead server must fail fast: one connect retry, none on reads or statuses.
        cfg.retries = Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0, raise_on_status=False)
        if not cfg.verify_ssl:
            # The kubeconfig asked for insecure-skip-tls-verify: the user chose it, and a
            # warning per request would break "one line on stderr".
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        return cls(cfg, f"{source} ({cfg.host})", timeout_s)

    def close(self) -> None:
        self._rest.pool_manager.clear()

    @property
    def source(self) -> str:
        return self._source

    # --- the one place HTTP happens -------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str | int | bool]] = (),
        *,
        verb: str,
        resource: str,
        namespace: str | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        remember_stall: bool = True,
    ) -> bytes:
        """One HTTP request through the client's auth, TLS and retries; the raw body or a SourceError."""
        key = (verb, resource)
        with self._calls_lock:
            # A read that just timed out is not sent again for a while: a walk lists events of
            # two namespaces, and a stalled list would otherwise cost two timeouts, not one.
            if remember_stall and method == "GET" and self._stalled.stalled(key):
                raise counted(
                    SourceError(
                        "unavailable",
                        f"Kubernetes API at {self.server} unreachable (no answer within "
                        f"{self.timeout_s:g}s to an earlier {verb} {resource}) while trying to {verb} {resource}",
                    )
                )
            self.calls += 1
        self.counts.add(request_kind(verb, resource, query))
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            # The configuration's own auth: a bearer token, refreshed by its hook (exec plugins).
            settings: Mapping[str, Mapping[str, Any]] = self.configuration.auth_settings()  # type: ignore[assignment]
            for auth in settings.values():
                headers[str(auth["key"])] = str(auth["value"])
            url = f"{self.configuration.host}{path}"
            if query:
                url += "?" + urlencode([(k, query_value(v)) for k, v in query], safe="/", quote_via=quote)
            resp = self._rest.request(
                method,
                url,
                headers=headers,
                body=dict(body) if body is not None else None,
                _request_timeout=self.timeout_s,
            )
        except ApiException as exc:  # TLS failures and the like, raised with status 0
            raise counted(
                api_error(self.server, exc.status, exc.reason, exc.body, verb, resource, namespace)
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(exc, key, remember_stall) from None
        try:
            data = bytes(resp.read())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(exc, key, remember_stall) from None
        finally:
            resp.response.release_conn()
        if not 200 <= resp.status <= 299:
            raise counted(api_error(self.server, resp.status, resp.reason, data, verb, resource, namespace))
        return data

    def _unreachable(self, exc: Exception, key: tuple[str, str], remember: bool) -> SourceError:
        err = unreachable(self.server, self.timeout_s, exc, *key)
        if remember and "no answer within" in err.message:
            self._stalled.remember(key)
        return counted(err)

    def _get(self, res: Resource, name: str, namespace: str | None = None) -> K8sObject:
        path = res.path(namespace, name)
        body = self._send("GET", path, verb="get", resource=res.rbac, namespace=namespace)
        obj: K8sObject = decode_body(body)
        return obj

    def _list(self, res: Resource, where: Selection = EVERYTHING) -> list[K8sObject]:
        """Every page of a list; items get the kind/apiVersion the server leaves off."""
        namespace = where.namespace if res.namespaced else None
        path = res.path(namespace)
        query: list[tuple[str, str | int | bool]] = []
        if where.fields:
            query.append(("fieldSelector", where.fields))
        if where.labels:
            query.append(("labelSelector", where.labels))
        if res is PODS and node_named(where.fields) is not None:
            # One node's pods (at most a few hundred) may come from the API server's watch cache
            # (resourceVersion=0): no etcd read, and a list a second stale is fine for a walk. Not
            # for fleet-sized lists: served from the cache, a list at resourceVersion=0 ignores
            # `limit` (Kubernetes #70735), 65,000 nodes in one answer. docs/scale.md.
            query.append(("resourceVersion", "0"))
        query.append(("limit", self.page_size))
        items: list[K8sObject] = []
        token: str | None = None
        while True:
            # A continue token carries its list's resourceVersion: the API server refuses both.
            page_query = (
                [*(q for q in query if q[0] != "resourceVersion"), ("continue", token)] if token else query
            )
            body = self._send("GET", path, page_query, verb="list", resource=res.rbac, namespace=namespace)
            page = decode_body(body)
            self.counts.add_items(request_kind("list", res.rbac, page_query), len(page.get("items") or ()))
            kind = str(page.get("kind") or "")
            item_kind = kind[: -len("List")] if kind.endswith("List") else ""
            api_version = page.get("apiVersion")
            for item in page.get("items") or ():
                if item_kind:
                    item.setdefault("kind", item_kind)
                if api_version:
                    item.setdefault("apiVersion", api_version)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    # --- Cluster ---------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> K8sObject:
        return self._get(PODS, name, namespace)

    def get_configmap(self, namespace: str, name: str) -> K8sObject:
        return self._get(CONFIGMAPS, name, namespace)

    def _select(self, group: str, kind: str, where: Selection) -> list[K8sObject]:
        match (group, kind):
            case ("", "Pod"):
                return self._list(PODS, where)
            case ("", "Node"):
                return self._list(NODES, where)
            case ("apps", "DaemonSet"):
                return self._list(DAEMONSETS, where)
            case ("node.k8s.io", "RuntimeClass"):
                return self._list(RUNTIMECLASSES, where)
            case (group, kind) if group == DRA_GROUP and kind in DRA_RESOURCES:
                return self._list_dra(kind, where)
        raise ValueError(f"no list read for {group}/{kind}")

    def _list_dra(self, kind: str, where: Selection) -> list[K8sObject]:
        for version in (
            DRA_RESOURCES[kind].version,
            *DRA_FALLBACK.get(DRA_RESOURCES[kind].plural, DRA_BETAS),
        ):
            try:
                return self._list(replace(DRA_RESOURCES[kind], version=version), where)
            except SourceError as err:
                if err.kind != "not_found":
                    raise
        return []  # the cluster serves no DRA API: not an error

    def get_node(self, name: str) -> K8sObject:
        return self._get(NODES, name)

    def list_nodes_page(self, label_selector: str, limit: int) -> tuple[list[K8sObject], bool]:
        """One page of the nodes a selector matches (no `continue`) and whether the server had more:
        a bundle's driver-pool peers (bot/actions/gather_pool.py), one request on any fleet."""
        query: list[tuple[str, str | int | bool]] = [("labelSelector", label_selector), ("limit", limit)]
        page = decode_body(self._send("GET", NODES.path(None), query, verb="list", resource=NODES.rbac))
        self.counts.add_items(request_kind("list", NODES.rbac, query), len(page.get("items") or ()))
        items = [{"kind": "Node", "apiVersion": "v1", **item} for item in page.get("items") or ()]
        return items, bool((page.get("metadata") or {}).get("continue"))

    def get_persistent_volume_claim(self, namespace: str, name: str) -> K8sObject:
        return self._get(PVCS, name, namespace)

    def get_persistent_volume(self, name: str) -> K8sObject:
        return self._get(PVS, name)

    def list_events(
        self, namespace: str | None, kind: str | None = None, name: str | None = None
    ) -> list[K8sObject]:
        terms = []
        if kind:
            terms.append(f"involvedObject.kind={kind}")
        if name:
            terms.append(f"involvedObject.name={name}")
        # A node's events carry no namespace and usually land in "default": search everywhere.
        where = namespace if namespace and kind != "Node" else None
        return self._list(EVENTS, Selection(where, fields=",".join(terms) or None))

    def list_custom(self, group: str, version: str, plural: str) -> list[K8sObject]:
        versions = [version]
        fallback = FALLBACK_VERSIONS.get(plural)
        if fallback and fallback != version:
            versions.append(fallback)
        for v in versions:
            try:
                return self._list(Resource(group, v, plural, namespaced=False))
            except SourceError as err:
                if err.kind != "not_found":
                    raise
        return []  # the CRD is not installed

    def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        previous: bool = False,
        tail_lines: int | None = 500,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        query: list[tuple[str, str | int | bool]] = [("container", container)]
        if previous:
            query.append(("previous", True))
        if since_seconds is not None:
            query.append(("sinceSeconds", since_seconds))
        if tail_lines is not None:
            query.append(("tailLines", tail_lines))
        if limit_bytes is not None:
            query.append(("limitBytes", limit_bytes))
        path = PODS.path(namespace, pod, "log")
        # A log comes from the pod's kubelet: one node's dead kubelet stalls the logs of its pods
        # only, so a stalled log read is remembered per node, not for every pod's log.
        node = self._log_stalled_node(namespace, pod)
        if node is not None:
            raise counted(
                SourceError(
                    "unavailable",
                    f"Kubernetes API at {self.server} unreachable (no answer within {self.timeout_s:g}s to "
                    f"an earlier log read of a pod on {node or 'no node'}) while trying to get pods/log",
                )
            )
        try:
            body = self._send(
                "GET", path, query, verb="get", resource="pods/log", namespace=namespace, remember_stall=False
            )
        except SourceError as err:
            if "no answer within" in err.message:
                self._remember_log_stall(namespace, pod)
            raise
        return body.decode("utf-8", "replace")

    def _pod_node(self, namespace: str, pod: str) -> str | None:
        """The pod's node ("" unscheduled), None when the pod cannot be read."""
        try:
            return str(self.get_pod(namespace, pod).get("spec", {}).get("nodeName") or "")
        except SourceError:
            return None

    def _log_stalled_node(self, namespace: str, pod: str) -> str | None:
        """The pod's node when its logs stalled a moment ago; None (no request made) when no node's did."""
        if not self._log_stalls.any():
            return None
        node = self._pod_node(namespace, pod)
        return node if node is not None and self._log_stalls.stalled(node) else None

    def _remember_log_stall(self, namespace: str, pod: str) -> None:
        node = self._pod_node(namespace, pod)
        if node is not None:
            self._log_stalls.remember(node)

    # --- ClusterWriter -----------------------------------------------------------------

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> K8sObject:
        body = self._send(
            "PATCH",
            NODES.path(None, name),
            # managedFields then say gpubot set spec.unschedulable (spec/interfaces.md).
            [("fieldManager", FIELD_MANAGER)],
            verb="patch",
            resource=NODES.rbac,
            body=patch,
            content_type=STRATEGIC_MERGE,
        )
        node: K8sObject = decode_body(body)
        return node
