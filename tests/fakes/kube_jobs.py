"""batch/v1 Jobs for the fake API server, and the Job controller's and kubelet's part in them.

The API part answers as the real server does: POST creates (409 AlreadyExists for a taken
name, 422 Invalid without one), GET reads and lists (through the snapshot, like every other
kind), DELETE removes the Job and, with propagationPolicy Background or Foreground, its pods.
Creating a Job makes its pod at once, Pending, labelled `job-name` and
`batch.kubernetes.io/job-name` as the controller labels them. Tests then move it as the
scheduler, kubelet and controller would: `start`, `succeed` (with the container's log),
`fail_pod`, `unschedulable`, `deadline_exceeded`; `delete` is someone else deleting it mid-run.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from bot.sources.snapshot import SnapshotCluster, log_key
from layers.sources import K8sObject


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
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


class JobController:
    def __init__(self, snapshot: SnapshotCluster) -> None:
        self.snapshot = snapshot
        self.created: list[K8sObject] = []  # every Job body as posted, for assertions
        self.deleted: list[str] = []
        self._lock = threading.Lock()

    # --- the API server ---------------------------------------------------------------

    def handle(
        self, method: str, ns: str, name: str | None, body: bytes, query: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        if method == "POST" and name is None:
            return self._create(ns, json.loads(body or b"{}"))
        if method == "DELETE" and name is not None:
            # As the API server: the query's propagationPolicy, else the DeleteOptions body's;
            # a Job's default is orphaning its pods.
            options = json.loads(body or b"{}") or {}
            policy = query.get("propagationPolicy") or options.get("propagationPolicy") or "Orphan"
            return self._delete(ns, name, policy)
        return 405, _status(405, "MethodNotAllowed", f"{method} is not supported by the fake")

    def _create(self, ns: str, job: K8sObject) -> tuple[int, dict[str, Any]]:
        meta = job.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            return 422, _status(422, "Invalid", 'Job.batch "" is invalid: metadata.name: Required value')
        with self._lock:
            if self.snapshot.named("batch", "Job", ns, name) is not None:
                return 409, _status(
                    409,
                    "AlreadyExists",
                    f'jobs.batch "{name}" already exists',
                    {"name": name, "kind": "jobs"},
                )
            posted = copy.deepcopy(job)
            uid = str(uuid.uuid4())
            meta.update(namespace=ns, uid=uid, creationTimestamp=_now())
            job.setdefault("apiVersion", "batch/v1")
            job.setdefault("kind", "Job")
            job["status"] = {"active": 1, "startTime": _now()}
            self.snapshot.add(job)
            self.snapshot.add(self._pod(ns, job, uid))
            # Recorded last: a test thread that sees it (playing the kubelet) finds the Job and its
            # pod stored; recorded first, it once looked the Job up in between and failed.
            self.created.append(posted)
        return 201, job

    def _pod(self, ns: str, job: K8sObject, uid: str) -> K8sObject:
        name = job["metadata"]["name"]
        template = copy.deepcopy(job["spec"]["template"])
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            "job-name": name,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{uid[:5]}",
                "namespace": ns,
                "labels": labels,
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": True}
                ],
                "creationTimestamp": _now(),
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }

    def _delete(self, ns: str, name: str, policy: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            job = self.snapshot.remove("batch", "Job", ns, name)
            if job is None:
                return 404, _status(
                    404, "NotFound", f'jobs.batch "{name}" not found', {"name": name, "kind": "jobs"}
                )
            self.deleted.append(name)
            if policy in ("Background", "Foreground"):
                for pod in self.pods(ns, name):
                    self.snapshot.remove("", "Pod", ns, pod["metadata"]["name"])
        return 200, {**_status(200, "", ""), "status": "Success", "details": {"name": name, "kind": "jobs"}}

    # --- the scheduler, the kubelet and the controller, driven by tests -------------------

    def pods(self, ns: str, job: str) -> list[K8sObject]:
        return [
            p
            for p in self.snapshot.stored("", "Pod")
            if p["metadata"].get("namespace") == ns and p["metadata"].get("labels", {}).get("job-name") == job
        ]

    def job(self, ns: str, name: str) -> K8sObject:
        found = self.snapshot.named("batch", "Job", ns, name)
        assert found is not None, f"no Job {ns}/{name}"
        return found

    def only(self) -> tuple[str, str]:
        """(namespace, name) of the one Job there is."""
        jobs = self.snapshot.stored("batch", "Job")
        assert len(jobs) == 1, f"{len(jobs)} Jobs"
        return jobs[0]["metadata"]["namespace"], jobs[0]["metadata"]["name"]

    def start(self, ns: str, name: str) -> None:
        node = self.job(ns, name)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        for pod in self.pods(ns, name):
            pod["spec"]["nodeName"] = node
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "startTime": _now(),
            }

    def succeed(self, ns: str, name: str, log: str) -> None:
        """The container exited 0 (the Job's script always does once dcgmi ran) with this log."""
        for pod in self.pods(ns, name):
            pod["status"]["phase"] = "Succeeded"
            self.snapshot.logs[log_key(ns, pod["metadata"]["name"], "dcgmi")] = log
        job = self.job(ns, name)
        job["status"] = {
            "succeeded": 1,
            "completionTime": _now(),
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": _now()},
                {"type": "Complete", "status": "True", "lastTransitionTime": _now()},
            ],
        }

    def unschedulable(self, ns: str, name: str, message: str) -> None:
        for pod in self.pods(ns, name):
            pod["status"] = {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ],
            }

    def deadline_exceeded(self, ns: str, name: str, log: str | None = None) -> None:
        """activeDeadlineSeconds passed: the controller kills the pod and marks the Job failed."""
        for pod in self.pods(ns, name):
            pod["status"]["phase"] = "Failed"
            if log is not None:
                self.snapshot.logs[log_key(ns, pod["metadata"]["name"], "dcgmi")] = log
        job = self.job(ns, name)
        job["status"] = {
            "failed": 1,
            "conditions": [
                {
                    "type": "FailureTarget",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                },
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                },
            ],
        }

    def delete(self, ns: str, name: str) -> None:
        """Someone else deletes the Job (kubectl delete job), pods with it."""
        self._delete(ns, name, "Background")
