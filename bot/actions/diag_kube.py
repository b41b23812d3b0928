"""The diagnostics' Job calls against a Kubernetes API server, through the official client's
BatchV1Api on the cluster's own configuration (bot/sources/kube.py `KubeCluster.api_client`).

Every answer is read raw (`_preload_content=False`) as the JSON the server sent, so the
Job is the same plain dict the rest of the bot reads; every failure is a SourceError.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3

from bot.sources.kube_errors import api_error, unreachable
from layers.sources import K8sObject

TIMEOUT_S = 10.0


class KubeJobs:
    """JobClient (bot/actions/diag.py) over a kubernetes ApiClient."""

    def __init__(self, api_client: Any, server: str, timeout_s: float = TIMEOUT_S) -> None:
        from kubernetes.client import BatchV1Api

        self._batch = BatchV1Api(api_client)
        self._server = server
        self._timeout = timeout_s

    def _call(self, verb: str, namespace: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = call(*args, _preload_content=False, _request_timeout=self._timeout, **kwargs)
            return json.loads(resp.data or b"{}")
        except ApiException as exc:
            raise api_error(
                self._server, exc.status, exc.reason, exc.body, verb, "jobs.batch", namespace
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unreachable(self._server, self._timeout, exc, verb, "jobs.batch") from None

    def create_job(self, namespace: str, body: dict[str, Any]) -> K8sObject:
        job: K8sObject = self._call(
            "create", namespace, self._batch.create_namespaced_job, namespace, body, field_manager="gpubot"
        )
        return job

    def get_job(self, namespace: str, name: str) -> K8sObject | None:
        from layers.sources import SourceError

        try:
            job: K8sObject = self._call("get", namespace, self._batch.read_namespaced_job, name, namespace)
        except SourceError as err:
            if err.kind == "not_found":
                return None
            raise
        return job

    def delete_job(self, namespace: str, name: str) -> None:
        from layers.sources import SourceError

        try:
            self._call(
                "delete",
                namespace,
                self._batch.delete_namespaced_job,
                name,
                namespace,
                propagation_policy="Background",
            )
        except SourceError as err:
            if err.kind != "not_found":
                raise

    def list_jobs(self, namespace: str, label_selector: str) -> list[K8sObject]:
        page = self._call(
            "list", namespace, self._batch.list_namespaced_job, namespace, label_selector=label_selector
        )
        return list(page.get("items") or [])
