"""nvidia-bug-report.sh in each driver pod in scope (`--with-bug-report`), through pods/exec."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence

from bot.actions.archive import name_part
from bot.actions.gather import Collector, ExecFn
from layers import remedy as rm
from layers.facts import objects as o
from layers.sources import Cluster, K8sObject, SourceError


def bug_reports(c: Collector, operands: list[K8sObject], exec_fn: ExecFn | None) -> list[str]:
    notes: list[str] = []
    drivers = [p for p in operands if rm.is_driver_pod(p) and o.pod_node(p)]
    if exec_fn is None:
        why = f"running commands in pods is not possible with {c.cluster.source}"
        c.manifest.skipped.append({"what": "nvidia-bug-report", "why": why})
        return [f"--with-bug-report skipped: {why}"]
    for pod in drivers:
        node, container = o.pod_node(pod), rm.driver_container(pod)
        if not container:
            continue
        c.progress(f"nvidia-bug-report.sh on {node} (takes minutes)")
        try:
            out = exec_fn(o.namespace(pod) or "", o.name(pod), container, rm.BUG_REPORT_COMMAND)
        except SourceError as err:
            if err.kind == "forbidden":
                msg = "pods/exec not allowed: --with-bug-report skipped"
                c.manifest.skipped.append({"what": "nvidia-bug-report", "why": f"{msg} ({err})"})
                return [msg]
            c.manifest.errors.append({"read": f"nvidia-bug-report on {node}", "error": str(err)})
            continue
        c.archive.add(f"nvidia-bug-report_{name_part(node or o.name(pod))}.log.gz", _masked(c, out))
    if not drivers:
        c.manifest.skipped.append({"what": "nvidia-bug-report", "why": "no driver pod in scope"})
    return notes


# nvidia-bug-report.log.gz inflates ~10x; more than this from one exec is refused, not masked in memory.
MAX_REPORT_BYTES = 512 << 20


def _masked(c: Collector, packed: bytes) -> bytes:
    """The report's text masked as free text (bot/actions/freetext.py) and packed again: it quotes
    dmesg, the driver's and the system's logs and the environment, as any log. Inflated in chunks
    under MAX_REPORT_BYTES; what is no gzip is masked as text."""
    try:
        inflate = zlib.decompressobj(wbits=47)  # gzip or zlib, by the header
        chunks, size, data = [], 0, packed
        while data:
            chunk = inflate.decompress(data, 1 << 20)
            size += len(chunk)
            if size > MAX_REPORT_BYTES:
                return gzip.compress(
                    f"<masked: the report inflates past {MAX_REPORT_BYTES >> 20} MiB>\n".encode()
                )
            chunks.append(chunk)
            data = inflate.unconsumed_tail
        text = b"".join(chunks).decode("utf-8", "replace")
    except zlib.error:
        text = packed.decode("utf-8", "replace")
    return gzip.compress(c.free(text).encode(), compresslevel=6)


def kube_exec(cluster: Cluster) -> ExecFn | None:
    """Run a command in a container through the pods/exec websocket; None when the source has no API."""
    api = getattr(cluster, "api_client", None)
    if api is None:
        return None
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    def run(namespace: str, pod: str, container: str, command: Sequence[str]) -> bytes:
        # A private ApiClient: stream() swaps the client's transport while it runs.
        core = client.CoreV1Api(client.ApiClient(configuration=api.configuration))
        try:
            out = stream(
                core.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                container=container,
                command=list(command),
                stderr=False,
                stdin=False,
                stdout=True,
                tty=False,
            )
        except ApiException as exc:
            text = f"{exc.status} {exc.reason}"
            if exc.status == 403 or "403" in text:
                raise SourceError(
                    "forbidden",
                    f"exec in pod {namespace}/{pod} forbidden",
                    verb="create",
                    resource="pods/exec",
                    namespace=namespace,
                ) from None
            raise SourceError("unavailable", f"exec in pod {namespace}/{pod} failed: {text}") from None
        import base64
        import binascii

        try:
            return base64.b64decode("".join(str(out).split()), validate=True)
        except (binascii.Error, ValueError):
            raise SourceError(
                "unavailable", f"nvidia-bug-report.sh in {namespace}/{pod} gave no report"
            ) from None

    return run
