"""How the Kubernetes API's failures read: each one becomes a SourceError of the kind it means.

403 is `forbidden` (with the verb and resource, for the RBAC hint), 404 and a
log that does not exist yet are `not_found`, 5xx, 410, 429, 401 and no answer
at all are `unavailable`, anything else is `bad_input`. A 403/404 that is not
the API server's own Status object means the address is wrong. Messages never
carry the client's exception text. Every error is counted by kind (`counted`).
"""

from __future__ import annotations

import json
import re
import sys

import urllib3

from layers.sources import SourceError

# 400s of the log endpoint that mean "this container has no log (yet)".
_NO_LOG = re.compile(
    r"not found|waiting to start|is not valid for pod|ContainerCreating|PodInitializing", re.I
)


def _is_kubernetes_status(body: str) -> bool:
    """Whether the error body is the API server's own Status object (not a proxy's page)."""
    try:
        status = json.loads(body) if isinstance(body, str) and body else None
    except ValueError:
        return False
    return isinstance(status, dict) and status.get("kind") == "Status"


def _status_message(status: int, reason: str | None, body: str) -> str:
    """The `message` of the API's Status body, else the HTTP reason."""
    if body:
        try:
            status = json.loads(body)
        except ValueError:
            return body.strip().splitlines()[0][:300]
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    return str(reason or f"HTTP {status}")


def counted(err: SourceError) -> SourceError:
    """A failed API call, counted by kind for /metrics, in a process that has them.

    A process that never loaded the registry (a CLI command) has no /metrics to show: loading
    it for the 404s a walk expects (a CRD not installed, a DRA version not served) cost ~30 ms.
    """
    metrics = sys.modules.get("bot.ops.metrics")
    if metrics is not None:
        metrics.record_kubernetes_api_error(err.kind)
    return err


def unreachable(server: str, timeout_s: float, exc: Exception, verb: str, resource: str) -> SourceError:
    """No HTTP answer: why, in a few words (never the client's exception text, which may hold a URL's token)."""
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
    # NewConnectionError subclasses ConnectTimeoutError, so it is tested first.
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        why = "host name does not resolve"
    elif isinstance(reason, urllib3.exceptions.NewConnectionError):
        why = "cannot connect: " + str(reason).rsplit("connection: ", 1)[-1]
    elif isinstance(reason, urllib3.exceptions.TimeoutError):
        why = f"no answer within {timeout_s:g}s"
    elif isinstance(reason, urllib3.exceptions.ProtocolError):
        why = "connection dropped"
    else:
        why = type(reason).__name__
    return SourceError(
        "unavailable",
        f"Kubernetes API at {server} unreachable ({why}) while trying to {verb} {resource}",
    )


def api_error(
    server: str,
    code: int | None,
    reason: str | None,
    raw: bytes | str | None,
    verb: str,
    resource: str,
    namespace: str | None,
) -> SourceError:
    """An HTTP answer that is not 2xx, or a client failure with no status, as the SourceError kind it means."""
    status = int(code or 0)
    where = f" in namespace {namespace}" if namespace else ""
    if status == 0:  # TLS failure and the like, raised by the client with no HTTP status
        first = str(reason or "").splitlines()[0] if reason else "no response"
        return SourceError(
            "unavailable",
            f"Kubernetes API at {server} unreachable ({first}) while trying to {verb} {resource}",
        )
    body = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else (raw or "")
    message = _status_message(status, reason, body)
    if status in (403, 404) and not _is_kubernetes_status(body):
        # A proxy or a web server answered, not an API server: the address is wrong.
        return SourceError(
            "unavailable",
            f"{server} is not a Kubernetes API server (HTTP {status} to {verb} {resource}, "
            "no Kubernetes Status in the answer): check the kubeconfig's server address",
        )
    if status == 401:
        return SourceError(
            "unavailable",
            f"Kubernetes API at {server}: credentials rejected (401) for {verb} {resource}",
        )
    if status == 403:
        return SourceError("forbidden", message, verb=verb, resource=resource, namespace=namespace)
    if status == 404 or (status == 400 and resource == "pods/log" and _NO_LOG.search(message)):
        return SourceError("not_found", message, resource=resource, namespace=namespace)
    if status >= 500 or status in (410, 429):  # 410: a paginated list outlived its snapshot
        return SourceError(
            "unavailable",
            f"Kubernetes API at {server} answered {status} to {verb} {resource}{where}: {message}",
        )
    return SourceError("bad_input", f"{verb} {resource}{where} rejected ({status}): {message}")
