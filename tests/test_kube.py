"""bot/sources/kube.py through the real `kubernetes` client against the fake API server (and a real kubectl)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.sources.kube import STRATEGIC_MERGE, KubeCluster
from bot.sources.snapshot import SnapshotCluster, log_key
from layers.sources import K8sObject, SourceError
from tests import fixtures
from tests.fakes.kube_api import TOKEN, FakeKubeAPI, fake_kube, serve, write_kubeconfig

__all__ = ["fake_kube"]  # the fixture, used by name

SAMPLES = fixtures.SAMPLES
GPU_NODE = "gpu-node-1"
OPERATOR_NS = "gpu-operator"
PLUGIN_POD = "nvidia-device-plugin-daemonset-w72xb"  # sample 10
PLUGIN_CTR = "nvidia-device-plugin"


# --- real inputs from the samples -------------------------------------------------------


def h100_labels() -> dict[str, str]:
    """The `kubectl describe node` labels of sample 32."""
    labels = {}
    for line in (SAMPLES / "32_node_labels_h100_describe.txt").read_text().splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.strip().split("=", 1)
        labels[key] = value
    return labels


def plugin_xid_log() -> str:
    """The device plugin's klog lines of sample 06 (Xid 79, device marked unhealthy)."""
    lines = (SAMPLES / "06_node_7_of_8_gpus_device_plugin_xid79.txt").read_text().splitlines()
    return "".join(line + "\n" for line in lines if re.match(r"^[IWE]\d{4} ", line))


def plugin_nvml_log() -> str:
    """Sample 09: the plugin's earlier run that could not load NVML."""
    lines = (SAMPLES / "09_device_plugin_nvml_init_failed.log").read_text().splitlines()
    return "".join(line + "\n" for line in lines if re.match(r"^\d{4}/\d\d/\d\d ", line))


def sandbox_event() -> K8sObject:
    """Sample 10's FailedCreatePodSandBox, as the Event object `kubectl describe` summarised."""
    text = (SAMPLES / "10_no_runtime_nvidia_event.txt").read_text()
    row = next(line for line in text.splitlines() if "FailedCreatePodSandBox" in line)
    kind, reason, _age, source, message = re.split(r"\s{2,}", row.strip(), maxsplit=4)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{PLUGIN_POD}.17d5a", "namespace": OPERATOR_NS},
        "involvedObject": {"kind": "Pod", "namespace": OPERATOR_NS, "name": PLUGIN_POD, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": kind,
        "count": 10,
        "source": {"component": source, "host": GPU_NODE},
    }


def gpu_node(name: str = GPU_NODE) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **h100_labels()}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "96", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {"cpu": "96", "nvidia.com/gpu": "7", "pods": "110"},
        },
    }


def pod(name: str, app: str, containers: list[str], namespace: str = OPERATOR_NS, **labels: str) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app, **labels}},
        "spec": {"nodeName": GPU_NODE, "containers": [{"name": c} for c in containers]},
        "status": {"phase": "Running"},
    }


def build_snapshot() -> SnapshotCluster:
    rke2_node = json.loads((SAMPLES / "31_node_gfd_labels_rke2_vgpu_a16.json").read_text())
    objects: list[K8sObject] = [
        gpu_node(),
        rke2_node,
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-node-1", "labels": {"role": "cpu"}}},
        pod("gpu-operator-7d9f8c6b5-x2k4l", "gpu-operator", ["gpu-operator"]),
        pod(PLUGIN_POD, "nvidia-device-plugin-daemonset", [PLUGIN_CTR]),
        pod(
            "nvidia-driver-daemonset-8kq2p",
            "nvidia-driver-daemonset",
            ["nvidia-driver-ctr"],
            **{"app.kubernetes.io/component": "nvidia-driver"},
        ),
        pod("vllm-0", "vllm", ["vllm"], namespace="inference"),
        sandbox_event(),
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{GPU_NODE}.18a01", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": GPU_NODE, "uid": GPU_NODE},
            "reason": "NodeNotSchedulable",
            "message": f"Node {GPU_NODE} status is now: NodeNotSchedulable",
            "type": "Normal",
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "nvidia-device-plugin-daemonset",
                "namespace": OPERATOR_NS,
                "labels": {"app": "nvidia-device-plugin-daemonset"},
            },
            "spec": {"template": {"spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"}}}},
            "status": {"desiredNumberScheduled": 1, "numberReady": 0},
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        },
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"driver": {"enabled": True, "version": "550.54.15"}},
            "status": {"state": "notReady"},
        },
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": "default"},
            "spec": {"driverType": "gpu", "version": "550.90.07"},
        },
    ]
    logs = {
        log_key(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR): plugin_xid_log(),
        log_key(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR, previous=True): plugin_nvml_log(),
    }
    return SnapshotCluster(objects, logs, source="test")


@pytest.fixture
def kube_snapshot() -> SnapshotCluster:
    return build_snapshot()


@pytest.fixture
def kube(fake_kube: FakeKubeAPI) -> Iterator[KubeCluster]:
    cluster = KubeCluster.from_config(fake_kube.kubeconfig, timeout_s=2.0)
    yield cluster
    cluster.close()


def names(objs: list[K8sObject]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


# --- reads --------------------------------------------------------------------------


def test_source_names_the_context_and_server(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    assert kube.source == f"context fake-cluster ({fake_kube.url})"


def test_nodes_come_back_as_the_api_json(kube: KubeCluster, kube_snapshot: SnapshotCluster) -> None:
    node = kube.get_node(GPU_NODE)
    assert node == kube_snapshot.get_node(GPU_NODE)
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    listed = kube.list_nodes()
    assert names(listed) == ["cpu-node-1", GPU_NODE, "nori"]
    # The server leaves kind/apiVersion off list items; the adapter puts them back.
    assert {(n["kind"], n["apiVersion"]) for n in listed} == {("Node", "v1")}
    nori = next(n for n in listed if n["metadata"]["name"] == "nori")
    expected = json.loads((SAMPLES / "31_node_gfd_labels_rke2_vgpu_a16.json").read_text())
    expected["metadata"]["resourceVersion"] = nori["metadata"]["resourceVersion"]  # set by the store
    assert nori == expected
    assert nori["status"]["capacity"]["nvidia.com/gpu"] == "1"


def test_label_selectors_are_sent_to_the_server(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    assert names(kube.list_nodes("nvidia.com/gpu.present=true")) == [GPU_NODE, "nori"]
    assert names(kube.list_nodes("nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3)")) == [GPU_NODE]
    assert names(kube.list_nodes("!nvidia.com/gpu.present")) == ["cpu-node-1"]
    sent = [r.query.get("labelSelector") for r in fake_kube.requests if r.path == "/api/v1/nodes"]
    assert sent == [
        "nvidia.com/gpu.present=true",
        "nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3)",
        "!nvidia.com/gpu.present",
    ]


def test_pods_by_namespace_label_and_field(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    operator = kube.list_pods(label_selector="app in (gpu-operator,nvidia-device-plugin-daemonset)")
    assert names(operator) == ["gpu-operator-7d9f8c6b5-x2k4l", PLUGIN_POD]
    assert names(kube.list_pods(OPERATOR_NS, label_selector="app.kubernetes.io/component=nvidia-driver")) == [
        "nvidia-driver-daemonset-8kq2p"
    ]
    assert names(kube.list_pods("inference")) == ["vllm-0"]
    assert names(kube.list_pods(field_selector=f"spec.nodeName={GPU_NODE},metadata.namespace=inference")) == [
        "vllm-0"
    ]
    paths = [r.path for r in fake_kube.requests]
    assert paths == [
        "/api/v1/pods",
        f"/api/v1/namespaces/{OPERATOR_NS}/pods",
        "/api/v1/namespaces/inference/pods",
        "/api/v1/pods",
    ]
    assert (
        fake_kube.requests[-1].query["fieldSelector"]
        == f"spec.nodeName={GPU_NODE},metadata.namespace=inference"
    )
    got = kube.get_pod(OPERATOR_NS, PLUGIN_POD)
    assert got["kind"] == "Pod" and got["spec"]["containers"] == [{"name": PLUGIN_CTR}]


def test_events_of_a_pod_and_of_a_node(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    (event,) = kube.list_events(OPERATOR_NS, "Pod", PLUGIN_POD)
    assert event["reason"] == "FailedCreatePodSandBox"
    assert 'no runtime for "nvidia" is configured' in event["message"]
    assert fake_kube.requests[-1].path == f"/api/v1/namespaces/{OPERATOR_NS}/events"
    assert (
        fake_kube.requests[-1].query["fieldSelector"]
        == f"involvedObject.kind=Pod,involvedObject.name={PLUGIN_POD}"
    )
    # A node's events sit in "default": searched across namespaces whatever namespace is asked.
    (node_event,) = kube.list_events(OPERATOR_NS, "Node", GPU_NODE)
    assert node_event["metadata"]["namespace"] == "default"
    assert fake_kube.requests[-1].path == "/api/v1/events"
    assert kube.list_events(OPERATOR_NS, "Pod", "no-such-pod") == []
    assert len(kube.list_events(None)) == 2


def test_daemonsets_runtimeclasses_and_custom_resources(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    (ds,) = kube.list_daemonsets(OPERATOR_NS, "app=nvidia-device-plugin-daemonset")
    assert (ds["kind"], ds["apiVersion"]) == ("DaemonSet", "apps/v1")
    assert kube.list_daemonsets(label_selector="app=nvidia-driver-daemonset") == []
    (rc,) = kube.list_runtimeclasses()
    assert rc["handler"] == "nvidia" and rc["kind"] == "RuntimeClass"
    (policy,) = kube.list_custom("nvidia.com", "v1", "clusterpolicies")
    assert policy["status"]["state"] == "notReady"
    # NVIDIADriver is served as v1alpha1 only: asking for v1 falls back after the 404.
    (driver,) = kube.list_custom("nvidia.com", "v1", "nvidiadrivers")
    assert driver["spec"]["version"] == "550.90.07"
    assert [r.path for r in fake_kube.requests[-2:]] == [
        "/apis/nvidia.com/v1/nvidiadrivers",
        "/apis/nvidia.com/v1alpha1/nvidiadrivers",
    ]


def test_custom_resource_not_installed_is_an_empty_list(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    fake_kube.fail(r"/clusterpolicies$", status=404)
    assert kube.list_custom("nvidia.com", "v1", "clusterpolicies") == []


def test_pagination_follows_continue(kube_snapshot: SnapshotCluster) -> None:
    for i in range(23):
        kube_snapshot.add(gpu_node(f"gpu-node-{i + 100}"))
    with serve(kube_snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=2.0)
        kube.page_size = 5
        listed = kube.list_nodes("nvidia.com/gpu.present=true")
        assert len(listed) == 25 and len({n["metadata"]["name"] for n in listed}) == 25
        pages = [r for r in api.requests if r.path == "/api/v1/nodes"]
        assert len(pages) == 5 == kube.calls
        assert all(r.query["limit"] == "5" for r in pages)
        assert "continue" not in pages[0].query and all("continue" in r.query for r in pages[1:])
        # The default page size asks for 500 at a time: one request here.
        kube.page_size = 500
        assert len(kube.list_nodes()) == 26
        assert api.requests[-1].query["limit"] == "500" and kube.calls == 6


def test_calls_counts_http_requests(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    kube.list_nodes()
    kube.get_pod(OPERATOR_NS, PLUGIN_POD)
    kube.list_custom("nvidia.com", "v1", "nvidiadrivers")  # two requests (v1 404, v1alpha1)
    with pytest.raises(SourceError):
        kube.get_node("missing")
    assert kube.calls == len(fake_kube.requests) == 5


# --- logs ----------------------------------------------------------------------------


def test_logs_current_previous_and_tail(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    current = kube.pod_log(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR, tail_lines=None)
    assert current == plugin_xid_log() and "Xid=79" in current
    last = kube.pod_log(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR, tail_lines=1)
    assert last.startswith("I0624 22:58:05.486727") and last.count("\n") == 1
    assert fake_kube.requests[-1].query == {"container": PLUGIN_CTR, "tailLines": "1"}
    previous = kube.pod_log(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR, previous=True)
    assert "Failed to initialize NVML: could not load NVML library." in previous
    assert fake_kube.requests[-1].query == {"container": PLUGIN_CTR, "previous": "true", "tailLines": "500"}


def test_missing_logs_are_not_found(kube: KubeCluster) -> None:
    driver = "nvidia-driver-daemonset-8kq2p"
    with pytest.raises(SourceError) as err:
        kube.pod_log(OPERATOR_NS, driver, "nvidia-driver-ctr", previous=True)
    assert err.value.kind == "not_found" and "previous terminated container" in err.value.message
    with pytest.raises(SourceError) as err:
        kube.pod_log(OPERATOR_NS, driver, "nvidia-driver-ctr")
    assert err.value.kind == "not_found" and "waiting to start" in err.value.message
    with pytest.raises(SourceError) as err:
        kube.pod_log(OPERATOR_NS, "gone-pod", PLUGIN_CTR)
    assert err.value.kind == "not_found" and err.value.resource == "pods/log"


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "read", "verb", "resource", "namespace"),
    [
        (r"/namespaces/gpu-operator/pods$", lambda k: k.list_pods(OPERATOR_NS), "list", "pods", OPERATOR_NS),
        (r"^/api/v1/nodes$", lambda k: k.list_nodes(), "list", "nodes", None),
        (r"/log$", lambda k: k.pod_log(OPERATOR_NS, PLUGIN_POD, PLUGIN_CTR), "get", "pods/log", OPERATOR_NS),
        (
            r"/nodes/",
            lambda k: k.patch_node(GPU_NODE, {"spec": {"unschedulable": True}}),
            "patch",
            "nodes",
            None,
        ),
        (r"/events$", lambda k: k.list_events(None, "Node", GPU_NODE), "list", "events", None),
        (
            r"/clusterpolicies$",
            lambda k: k.list_custom("nvidia.com", "v1", "clusterpolicies"),
            "list",
            "clusterpolicies.nvidia.com",
            None,
        ),
    ],
)
def test_forbidden_names_the_missing_rule(
    kube: KubeCluster,
    fake_kube: FakeKubeAPI,
    pattern: str,
    read: Any,
    verb: str,
    resource: str,
    namespace: str | None,
) -> None:
    fake_kube.fail(pattern, status=403)
    with pytest.raises(SourceError) as err:
        read(kube)
    e = err.value
    assert (e.kind, e.verb, e.resource, e.namespace) == ("forbidden", verb, resource, namespace)
    assert "is forbidden: User" in e.message  # the API's own words
    assert f"'{verb}' on '{resource}'" in e.hint()


def test_not_found_get(kube: KubeCluster) -> None:
    with pytest.raises(SourceError) as err:
        kube.get_pod(OPERATOR_NS, "nvidia-device-plugin-daemonset-gone")
    assert err.value.kind == "not_found"
    assert err.value.message == 'pods "nvidia-device-plugin-daemonset-gone" not found'


@pytest.mark.parametrize("code", [500, 503, 410])
def test_server_error_is_unavailable_and_names_the_server(
    kube: KubeCluster, fake_kube: FakeKubeAPI, code: int
) -> None:
    fake_kube.fail(r"^/api/v1/nodes$", status=code)
    with pytest.raises(SourceError) as err:
        kube.list_nodes()
    assert err.value.kind == "unavailable"
    assert fake_kube.url in err.value.message and str(code) in err.value.message
    assert fake_kube.count(r"^/api/v1/nodes$") == 1  # no retries on an error status


def test_timeout_must_be_positive(fake_kube: FakeKubeAPI) -> None:
    with pytest.raises(SourceError) as err:
        KubeCluster.from_config(fake_kube.kubeconfig, timeout_s=0)
    assert err.value.kind == "bad_input"


def test_slow_server_times_out_fast(fake_kube: FakeKubeAPI) -> None:
    kube = KubeCluster.from_config(fake_kube.kubeconfig, timeout_s=0.3)
    fake_kube.fail(r"^/api/v1/nodes$", delay=3.0)
    start = time.monotonic()
    with pytest.raises(SourceError) as err:
        kube.list_nodes()
    assert time.monotonic() - start < 1.5
    assert err.value.kind == "unavailable" and "no answer within 0.3s" in err.value.message
    assert fake_kube.url in err.value.message


def test_dropped_connection_is_unavailable(kube: KubeCluster, fake_kube: FakeKubeAPI) -> None:
    fake_kube.fail(r"/pods$", drop=True)
    with pytest.raises(SourceError) as err:
        kube.list_pods()
    assert err.value.kind == "unavailable" and "connection dropped" in err.value.message
    assert fake_kube.count(r"/pods$") == 1
    fake_kube.clear_faults()
    assert len(kube.list_pods()) == 4  # the client recovers on a fresh connection


def test_dead_server_fails_fast(kube_snapshot: SnapshotCluster) -> None:
    with serve(kube_snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
    start = time.monotonic()
    with pytest.raises(SourceError) as err:
        kube.list_nodes()
    assert time.monotonic() - start < 1.0
    assert err.value.kind == "unavailable" and "cannot connect" in err.value.message
    assert api.url in err.value.message


def test_rejected_credentials_never_echo_the_token(fake_kube: FakeKubeAPI, tmp_path: Path) -> None:
    secret = "sha256~do-not-print-me"
    path = write_kubeconfig(tmp_path / "kc", fake_kube.url, token=secret)
    kube = KubeCluster.from_config(path)
    with pytest.raises(SourceError) as err:
        kube.list_nodes()
    assert err.value.kind == "unavailable" and "credentials rejected" in err.value.message
    assert secret not in str(err.value) and TOKEN not in str(err.value)


# --- configuration ------------------------------------------------------------------------


def test_missing_kubeconfig_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SourceError) as err:
        KubeCluster.from_config(str(tmp_path / "nope"))
    assert err.value.kind == "bad_input" and "no readable kubeconfig" in err.value.message
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "also-nope"))
    with pytest.raises(SourceError) as err:
        KubeCluster.from_config()
    assert "also-nope" in err.value.message


def test_unknown_context_lists_the_known_ones(fake_kube: FakeKubeAPI) -> None:
    with pytest.raises(SourceError) as err:
        KubeCluster.from_config(fake_kube.kubeconfig, context="prod")
    assert err.value.kind == "bad_input"
    assert err.value.message.startswith("context 'prod' not found") and "fake-cluster" in err.value.message


def test_kubeconfig_from_environment(fake_kube: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    # KUBECONFIG wins over in-cluster credentials even inside a pod.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBECONFIG", fake_kube.kubeconfig)
    kube = KubeCluster.from_config()
    assert names(kube.list_nodes("role=cpu")) == ["cpu-node-1"]


def test_in_cluster_without_service_account_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(SourceError) as err:
        KubeCluster.from_config()
    assert err.value.kind == "bad_input" and err.value.message.startswith("in-cluster")


# --- the write -----------------------------------------------------------------------------


def test_cordon_is_a_strategic_merge_patch(
    kube: KubeCluster, fake_kube: FakeKubeAPI, kube_snapshot: SnapshotCluster
) -> None:
    before = kube.get_node(GPU_NODE)["metadata"]["resourceVersion"]
    after = kube.patch_node(GPU_NODE, {"spec": {"unschedulable": True}})
    assert after["spec"]["unschedulable"] is True
    assert after["metadata"]["resourceVersion"] != before
    patch = fake_kube.requests[-1]
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH",
        f"/api/v1/nodes/{GPU_NODE}",
        STRATEGIC_MERGE,
    )
    assert json.loads(patch.body) == {"spec": {"unschedulable": True}}
    assert kube_snapshot.get_node(GPU_NODE)["spec"]["unschedulable"] is True
    assert kube.get_node(GPU_NODE)["spec"]["unschedulable"] is True
    kube.patch_node(GPU_NODE, {"spec": {"unschedulable": None}})  # uncordon
    assert "unschedulable" not in kube.get_node(GPU_NODE)["spec"]


def test_patch_of_a_missing_node_is_not_found(kube: KubeCluster) -> None:
    with pytest.raises(SourceError) as err:
        kube.patch_node("gpu-node-404", {"spec": {"unschedulable": True}})
    assert err.value.kind == "not_found"


# --- a real kubectl agrees with the adapter ------------------------------------------------


def kubectl(api: FakeKubeAPI, cache: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", api.kubeconfig, "--cache-dir", str(cache), *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
def test_kubectl_sees_what_the_adapter_sees(
    kube: KubeCluster, fake_kube: FakeKubeAPI, tmp_path: Path
) -> None:
    nodes = kubectl(fake_kube, tmp_path, "get", "nodes")["items"]
    assert nodes == sorted(kube.list_nodes(), key=lambda n: n["metadata"]["name"])
    selector = "app in (gpu-operator,nvidia-device-plugin-daemonset)"
    pods = kubectl(fake_kube, tmp_path, "get", "pods", "-A", "-l", selector)["items"]
    assert pods == kube.list_pods(label_selector=selector) and len(pods) == 2
    node = kubectl(fake_kube, tmp_path, "get", "node", GPU_NODE)
    assert node == kube.get_node(GPU_NODE)
    # kubectl cordon sends the same kind of patch the bot does.
    subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            fake_kube.kubeconfig,
            "--cache-dir",
            str(tmp_path),
            "cordon",
            "cpu-node-1",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    patch = next(r for r in reversed(fake_kube.requests) if r.method == "PATCH")
    assert patch.content_type == STRATEGIC_MERGE
    assert kube.get_node("cpu-node-1")["spec"]["unschedulable"] is True
    # kubectl sends no fieldManager: the API server names the writer after its User-Agent.
    cordoned = kube.get_node("cpu-node-1")
    [entry] = cordoned["metadata"].pop("managedFields")
    assert entry["manager"] == "kubectl" and entry["fieldsV1"] == {"f:spec": {"f:unschedulable": {}}}
    # kubectl get hides managedFields unless --show-managed-fields.
    assert cordoned == kubectl(fake_kube, tmp_path, "get", "node", "cpu-node-1")
