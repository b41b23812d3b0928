"""A small Kubernetes API server for tests, serving a SnapshotCluster on the real REST paths.

The real `kubernetes` client (and a real `kubectl`) talk to it through a
generated kubeconfig. Selectors go through bot/sources/selectors.py, the same code the
scenario snapshot uses, so the fake and the product cannot disagree. Faults
(403, 500, slow answers, dropped connections) can be injected per path.
"""

from __future__ import annotations

import base64
import bisect
import json
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.sources.selectors import node_named, parse_field_selector, parse_label_selector
from bot.sources.snapshot import SnapshotCluster
from layers.sources import K8sObject, SourceError
from tests.fakes.kube_jobs import JobController
from tests.fakes.managed_fields import manager_of, record_update

TOKEN = "gpubot-test-token"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = (
    Resource("", "v1", "nodes", "Node", False, ("no",)),
    Resource("", "v1", "pods", "Pod", True, ("po",)),
    Resource("", "v1", "events", "Event", True, ("ev",)),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",)),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",)),
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",)),
    Resource("batch", "v1", "jobs", "Job", True),
    Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    Resource("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False),
    Resource("nvidia.com", "v1alpha1", "nvidiadrivers", "NVIDIADriver", False, ("nvd",)),
    Resource("nvidia.com", "v1alpha1", "gpuclusters", "GPUCluster", False, ("gc",)),
    # Dynamic Resource Allocation (Kubernetes 1.34: v1) and the NVIDIA DRA driver's CRD.
    Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
    Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    Resource("resource.k8s.io", "v1alpha3", "devicetaintrules", "DeviceTaintRule", False),
    Resource("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain", True),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True),
)
_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
# Groups a cluster may not serve: an older Kubernetes has no DRA, and no DRA driver no CRD.
DRA_GROUPS = frozenset({"resource.k8s.io", "resource.nvidia.com"})
BUILT_IN_GROUPS = frozenset({"", "apps", "batch", "node.k8s.io", "resource.k8s.io"})
# Field labels the API server accepts beyond metadata.name/metadata.namespace (others are a 400).
_FIELD_LABELS = {"resourceslices": frozenset({"spec.driver", "spec.nodeName", "spec.pool.name"})}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>log))?)?$"
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: bytes


@dataclass
class Fault:
    pattern: re.Pattern[str]
    method: str | None
    status: int | None
    delay: float
    drop: bool
    times: int | None  # None = every matching request

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and bool(self.pattern.search(path))


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Kubernetes `Status` object, as the API server answers errors."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


def write_kubeconfig(path: str | Path, url: str, token: str = TOKEN, context: str = "fake-cluster") -> str:
    """A kubeconfig pointing at `url` with a dummy bearer token (JSON is valid YAML)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "gpubot", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "gpubot"}}],
        "current-context": context,
    }
    Path(path).write_text(json.dumps(doc, indent=1))
    return str(path)


class FakeKubeAPI:
    """The server; `url`, `kubeconfig`, `requests`, `fail(...)`, `clear_faults()`, `stop()`."""

    def __init__(
        self, snapshot: SnapshotCluster, workdir: str | Path, without: frozenset[str] = frozenset()
    ) -> None:
        self.snapshot = snapshot
        self.without = without  # API groups this cluster does not serve: their paths are 404
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._rv = 1000
        self.jobs = JobController(snapshot)  # batch/v1 Jobs: create, get, delete, and their pods
        self._matches: dict[tuple[Any, ...], list[tuple[str, K8sObject]]] = {}
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.kubeconfig = write_kubeconfig(Path(workdir) / "kubeconfig", self.url)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def fail(
        self,
        pattern: str,
        *,
        status: int | None = None,
        delay: float = 0.0,
        drop: bool = False,
        method: str | None = None,
        times: int | None = None,
    ) -> Fault:
        """Make requests whose path matches `pattern` (re.search) answer `status`, wait, or drop."""
        fault = Fault(re.compile(pattern), method, status, delay, drop, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def count(self, pattern: str = "", method: str | None = None) -> int:
        """Requests whose path matches `pattern`."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method) and re.search(pattern, r.path)
            )

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- request bookkeeping -------------------------------------------------------

    def _record(self, request: Request) -> Fault | None:
        with self._lock:
            self.requests.append(request)
            for fault in self.faults:
                if fault.matches(request.method, request.path):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.faults.remove(fault)
                    return fault
        return None

    def resource_version(self, bump: bool = False) -> str:
        """The store's resourceVersion; `bump` for a write."""
        with self._lock:
            self._rv += 1 if bump else 0
            return str(self._rv)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a delayed handler must not hold up stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that gave up (timeouts, injected drops) are expected here


class _Handler(BaseHTTPRequestHandler):
    api: FakeKubeAPI
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else ~40 ms per keep-alive request

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    # --- plumbing ---------------------------------------------------------------------

    def _send(self, code: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        self._send(code, status(code, reason, message, details))

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(method, url.path, query, self.headers.get("Content-Type"), body)
        fault = self.api._record(request)
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.drop:
                self.close_connection = True  # no answer at all: the client sees the connection drop
                return
            if fault.status is not None:
                self._fault_status(fault.status, method, url.path)
                return
        # kubectl never sends a bearer token over plain http, so a missing one is let
        # through (anonymous); a wrong one is refused as the real server does.
        auth = self.headers.get("Authorization")
        if auth is not None and auth != f"Bearer {TOKEN}":
            self._status(401, "Unauthorized", "Unauthorized")
            return
        try:
            self._route(request)
        except SourceError as err:
            code, reason = (404, "NotFound") if err.kind == "not_found" else (400, "BadRequest")
            self._status(code, reason, err.message)

    def _fault_status(self, code: int, method: str, path: str) -> None:
        m = _PATH.match(path)
        plural = (m["plural"] + (f"/{m['sub']}" if m["sub"] else "")) if m else path
        group = (m["group"] or "") if m else ""
        ns = m["ns"] if m else None
        verb = {"PATCH": "patch", "POST": "create", "DELETE": "delete"}.get(
            method, "get" if m and m["name"] else "list"
        )
        if code == 403:
            scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            message = (
                f'{plural} is forbidden: User "system:serviceaccount:gpu-operator:gpubot" '
                f'cannot {verb} resource "{plural}" in API group "{group}" {scope}'
            )
            self._status(403, "Forbidden", message, {"group": group, "kind": plural})
        elif code == 404:
            self._status(404, "NotFound", "the server could not find the requested resource")
        elif code == 401:
            self._status(401, "Unauthorized", "Unauthorized")
        else:
            self._status(code, "InternalError", f"Internal error occurred: injected fault {code}")

    # --- routes -------------------------------------------------------------------------

    def _route(self, req: Request) -> None:
        discovery = self._discovery(req.path)
        if discovery is not None and req.method == "GET":
            self._send(200, discovery)
            return
        m = _PATH.match(req.path)
        res = (
            _BY_PATH.get(
                ("", "v1", m["plural"]) if m and m["core"] else (m["group"], m["version"], m["plural"])
            )
            if m
            else None
        )
        if m is None or res is None or (m["ns"] and not res.namespaced) or res.group in self.api.without:
            self._status(404, "NotFound", "the server could not find the requested resource")
            return
        if m["sub"]:
            if res.plural != "pods" or req.method != "GET":
                self._status(404, "NotFound", "the server could not find the requested resource")
                return
            self._log(m["ns"] or "", m["name"], req.query)
        elif req.method == "PATCH" and res.plural == "nodes" and m["name"]:
            self._patch_node(m["name"], req)
        elif res.plural == "jobs" and req.method in ("POST", "DELETE"):
            code, payload = self.api.jobs.handle(req.method, m["ns"] or "", m["name"], req.body, req.query)
            self._send(code, payload)
        elif req.method != "GET":
            self._status(405, "MethodNotAllowed", f"{req.method} is not supported by the fake")
        elif m["name"]:
            obj = self._named(res, m["ns"] or "", m["name"])
            if obj is None:
                self._status(
                    404,
                    "NotFound",
                    f'{res.plural} "{m["name"]}" not found',
                    {"name": m["name"], "kind": res.plural},
                )
            else:
                self._send(200, obj)
        else:
            self._send(200, self._list_page(res, m["ns"], req.query))

    def _objects(self, res: Resource, node: str | None = None) -> list[K8sObject]:
        # Indexed by kind, and pods by node, as a real API server's watch cache indexes
        # spec.nodeName: a per-node list must not cost a scan of the whole cluster here.
        return self.api.snapshot.stored(res.group, res.kind, node)

    def _named(self, res: Resource, ns: str, name: str) -> K8sObject | None:
        return self.api.snapshot.named(res.group, res.kind, ns, name)

    def _list_page(self, res: Resource, ns: str | None, query: dict[str, str]) -> dict[str, Any]:
        allowed = _FIELD_LABELS.get(res.plural)
        for term in (query.get("fieldSelector") or "").split(","):
            label = term.replace("!=", "=").replace("==", "=").split("=", 1)[0].strip()
            if (
                allowed is not None
                and label
                and label not in allowed | {"metadata.name", "metadata.namespace"}
            ):
                raise SourceError("bad_input", f'field label not supported: "{label}"')
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"))
        # The matches of one list, kept for its `continue` pages while nothing was written: a
        # real API server continues from the token's key, it does not filter and sort the whole
        # store again for each page (at 65,000 nodes, 130 pages; benchmarks/scale_bench.py).
        key = (
            res.plural,
            ns,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            self.api.resource_version(),
        )
        with self.api._lock:
            cached = self.api._matches.get(key)
        if cached is None:
            cached = sorted(
                (
                    ((o["metadata"].get("namespace") or "") + "/" + o["metadata"].get("name", ""), o)
                    for o in self._objects(res, node_named(query.get("fieldSelector")))
                    if (ns is None or o["metadata"].get("namespace") == ns)
                    and labels(o["metadata"].get("labels") or {})
                    and fields(o)
                ),
                key=lambda kv: kv[0],
            )
            if int(query.get("limit") or 0) > 0 and len(cached) > int(query["limit"]):
                with self.api._lock:
                    self.api._matches = {key: cached}  # one list at a time: memory stays one list's
        picked = cached
        if query.get("continue") and query.get("resourceVersion"):
            # As the real API server: a continue token already names the list's resourceVersion.
            raise SourceError("bad_input", "specifying resource version is not allowed when using continue")
        if query.get("continue"):
            try:
                start = json.loads(base64.urlsafe_b64decode(query["continue"]))["start"]
            except (ValueError, KeyError, TypeError):
                raise SourceError("bad_input", "continue key is not valid: malformed token") from None
            picked = picked[bisect.bisect_right([kv[0] for kv in picked], start) :]
        limit = int(query.get("limit") or 0)
        page, rest = (picked[:limit], picked[limit:]) if limit > 0 else (picked, [])
        meta: dict[str, Any] = {"resourceVersion": self.api.resource_version()}
        if rest:
            token = {"v": "meta.k8s.io/v1", "rv": int(meta["resourceVersion"]), "start": page[-1][0]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(rest)
        items = []
        for _key, obj in page:
            item = dict(obj)
            if res.group in BUILT_IN_GROUPS:
                # The real server leaves kind/apiVersion off built-in list items.
                item.pop("kind", None)
                item.pop("apiVersion", None)
            items.append(item)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}

    def _log(self, ns: str, name: str, query: dict[str, str]) -> None:
        pod = self._named(_BY_PATH[("", "v1", "pods")], ns, name)
        if pod is None:
            self._status(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
            return
        spec = pod.get("spec") or {}
        known = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        container = query.get("container") or (known[0] if len(known) == 1 else "")
        if not container:
            self._status(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: {known}",
            )
            return
        if known and container not in known:
            self._status(400, "BadRequest", f"container {container} is not valid for pod {name}")
            return
        previous = query.get("previous") in ("true", "True", "1")
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        since = int(query["sinceSeconds"]) if query.get("sinceSeconds") else None
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        try:
            text = self.api.snapshot.pod_log(
                ns, name, container, previous=previous, tail_lines=tail, since_seconds=since
            )
        except SourceError:
            if previous:
                message = f'previous terminated container "{container}" in pod "{name}" not found'
            else:
                message = f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            self._status(400, "BadRequest", message)
            return
        body = text.encode()
        # The kubelet stops after limitBytes, wherever in a line or a character that falls.
        self._send(200, body[:limit] if limit is not None else body, "text/plain")

    def _patch_node(self, name: str, req: Request) -> None:
        ctype = (req.content_type or "").split(";")[0].strip()
        if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            self._status(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format ({ctype!r}) - accepted media types include: "
                "application/merge-patch+json, application/strategic-merge-patch+json",
            )
            return
        try:
            patch = json.loads(req.body or b"{}")
        except ValueError:
            self._status(400, "BadRequest", "error decoding patch: invalid JSON")
            return
        # Who wrote which field, as the API server records it (tests/fakes/managed_fields.py),
        # stored with the patch itself.
        try:
            before = self.api.snapshot.get_node(name)
        except SourceError:
            before = {}
        record_update(before, patch, manager_of(req.query, self.headers.get("User-Agent")))
        recorded = {
            **patch,
            "metadata": {
                **(patch.get("metadata") or {}),
                "managedFields": before["metadata"]["managedFields"],
            },
        }
        node = self.api.snapshot.patch_node(name, recorded)  # SourceError not_found → 404
        node["metadata"]["resourceVersion"] = self.api.resource_version(bump=True)
        self._send(200, node)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """Legacy discovery documents, enough for kubectl to map names to paths."""
        if path == "/version":  # kubectl's dispatcher picks its kubectl by this
            return {"major": "1", "minor": "32", "gitVersion": "v1.32.4", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for r in RESOURCES:
                if (
                    r.group
                    and r.group not in self.api.without
                    and r.version not in groups.setdefault(r.group, [])
                ):
                    groups[r.group].append(r.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in groups.items()
                ],
            }
        m = re.match(r"^/(?:api/(v1)|apis/([^/]+)/([^/]+))$", path)
        if not m:
            return None
        group, version = ("", "v1") if m[1] else (m[2], m[3])
        listed = [
            r
            for r in RESOURCES
            if r.group == group and r.version == version and group not in self.api.without
        ]
        if not listed:
            return None
        resources = [
            {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list"]
                + (["patch"] if r.plural == "nodes" else [])
                + (["create", "delete"] if r.plural == "jobs" else []),
                "shortNames": list(r.short),
            }
            for r in listed
        ]
        if group == "":
            resources.append(
                {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
            )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": listed[0].api_version,
            "resources": resources,
        }


@contextmanager
def serve(snapshot: SnapshotCluster, without: frozenset[str] = frozenset()) -> Iterator[FakeKubeAPI]:
    """Run a FakeKubeAPI (with its kubeconfig in a temporary directory) for the block; `without`
    names API groups the cluster does not serve (DRA_GROUPS: a cluster without DRA)."""
    with tempfile.TemporaryDirectory(prefix="fake-kube-") as workdir:
        api = FakeKubeAPI(snapshot, workdir, without)
        try:
            yield api
        finally:
            api.stop()


@pytest.fixture
def fake_kube(kube_snapshot: SnapshotCluster) -> Iterator[FakeKubeAPI]:
    """A FakeKubeAPI over the requesting module's `kube_snapshot` fixture."""
    with serve(kube_snapshot) as api:
        yield api
