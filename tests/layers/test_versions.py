"""Layer 3 (versions): every L3 code from real driver/validator output and node objects.

Log texts are the samples' lines (samples/13–18, 31), verbatim unless a test says
it builds a real-world variant (timestamps, case, whitespace, other distros).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.sources.snapshot import SnapshotCluster
from layers import versions
from layers.facts import context
from layers.facts.context import WalkContext
from layers.facts.fold import MAX_LISTED as MAX_PER_CODE
from layers.findings import STOP, LayerResult, Severity, Target
from layers.sources import K8sObject, NoTelemetry, SourceError
from tests.layers.builders import codes, one

NS = "gpu-operator"

# samples/13 (gpu-operator#152, FIPS kernel), verbatim log body
SAMPLE_13 = """
========== NVIDIA Software Installer ==========

Starting installation of NVIDIA driver version 450.80.02 for Linux kernel version 4.15.0-2036-aws-fips

Stopping NVIDIA persistence daemon...
Unloading NVIDIA driver kernel modules...
Unmounting NVIDIA driver rootfs...
Checking NVIDIA driver packages...
Updating the package cache...
Resolving Linux kernel version...
Could not resolve Linux kernel version
Stopping NVIDIA persistence daemon...
Unloading NVIDIA driver kernel modules...
Unmounting NVIDIA driver rootfs...
"""
# samples/14 (CentOS 7): the failure is glued to the previous message
SAMPLE_14 = """========== NVIDIA Software Installer ==========
Starting installation of NVIDIA driver version 450.80.02 for Linux kernel version 3.10.0-862.el7.x86_64
Resolving Linux kernel version...
Unable to open the file '/lib/modules/3.10.0-862.el7.x86_64/proc/version' (No such file or directory).Could not resolve Linux kernel version
Stopping NVIDIA persistence daemon...
"""
# samples/15 (OCP, Secure Boot)
SAMPLE_15 = """Building kernel modules
  : [##############################] 100%

ERROR: The kernel module failed to load, because it was not signed by a key that is trusted by the kernel. Please try installing the driver again, and sign the kernel module when prompted to do so.

ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel module was built against the wrong or improperly configured kernel sources
"""
# samples/16 (Ubuntu 24.04, module load failure)
SAMPLE_16 = """Welcome to the NVIDIA Software Installer for Unix/Linux
Installing NVIDIA driver version 535.161.07.
Kernel source path: '/lib/modules/6.8.0-35-generic/build'
Building kernel modules
  : [##############################] 100%

ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel module was built against the wrong or improperly configured kernel sources, with a version of gcc that differs from the one used to build the target kernel.
"""
# samples/18(a): cuda-validation log of nvidia-cuda-validator
SAMPLE_18 = (
    "Failed to allocate device vector A (error code system not yet initialized)! "
    "[Vector addition of 5000 elements]\n"
)
# gpu-operator cmd/nvidia-validator (driver-validation), logrus format as printed
PREINSTALLED = (
    'time="2025-03-19T20:41:02Z" level=info msg="Attempting to validate a pre-installed driver on the host"\n'
    'time="2025-03-19T20:41:03Z" level=info msg="Detected a pre-installed driver on the host"\n'
)
DRIVER_OK = (
    SAMPLE_13.split("Checking")[0] + "Loading NVIDIA driver kernel modules...\nDone, now waiting for signal\n"
)


# --- builders ---------------------------------------------------------------------------


def node(
    name: str,
    driver: str | None = "550.90.07",
    runtime: str | None = "12.4",
    kernel: str = "5.15.0-134-generic",
    os_image: str = "Ubuntu 22.04.5 LTS",
) -> K8sObject:
    lab = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1"}
    if driver:
        lab["nvidia.com/cuda.driver-version.full"] = driver
    if runtime:
        lab["nvidia.com/cuda.runtime-version.full"] = runtime
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": lab},
        "status": {
            "capacity": {"nvidia.com/gpu": "1"},
            "allocatable": {"nvidia.com/gpu": "1"},
            "nodeInfo": {"kernelVersion": kernel, "osImage": os_image},
        },
    }


def pod(
    name: str,
    on: str,
    labels: dict[str, str],
    containers: list[str],
    init: tuple[str, ...] = (),
    *,
    ns: str = NS,
    ready: bool = False,
    waiting: dict[str, str] | None = None,
    restarts: int = 0,
    phase: str = "Running",
) -> K8sObject:
    waiting = waiting or {}

    def status(c: str) -> dict[str, Any]:
        state: dict[str, Any] = {"waiting": {"reason": waiting[c]}} if c in waiting else {"running": {}}
        return {"name": c, "ready": ready, "restartCount": restarts if c in waiting else 0, "state": state}

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "nodeName": on,
            "containers": [{"name": c} for c in containers],
            "initContainers": [{"name": c} for c in init],
        },
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "initContainerStatuses": [status(c) for c in init],
            "containerStatuses": [status(c) for c in containers],
        },
    }


def driver_pod(on: str, name: str = "nvidia-driver-daemonset-8t4mg", **kw: Any) -> K8sObject:
    kw.setdefault("waiting", {"nvidia-driver-ctr": "CrashLoopBackOff"})
    kw.setdefault("restarts", 4)
    return pod(
        name,
        on,
        {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
        ["nvidia-driver-ctr"],
        ("k8s-driver-manager",),
        **kw,
    )


def validator_pod(on: str, **kw: Any) -> K8sObject:
    return pod(
        "nvidia-operator-validator-x7k2p",
        on,
        {"app": "nvidia-operator-validator"},
        ["nvidia-operator-validator"],
        ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
        **kw,
    )


def cluster_policy(driver_enabled: bool | None = None) -> K8sObject:
    spec: dict[str, Any] = {"driver": {} if driver_enabled is None else {"enabled": driver_enabled}}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


class Forbidden(SnapshotCluster):
    """A snapshot whose listed reads answer 403, as RBAC would."""

    def __init__(self, *a: Any, deny: tuple[str, ...] = (), **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.deny = deny
        self.calls: dict[str, int] = {}

    def _check(self, what: str, verb: str, resource: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1
        if what in self.deny:
            raise SourceError("forbidden", f"{resource} is forbidden", verb=verb, resource=resource)

    def pod_log(self, namespace: str, pod: str, container: str, **kw: Any) -> str:
        self._check("logs", "get", "pods/log")
        return super().pod_log(namespace, pod, container, **kw)

    def list_custom(self, group: str, version: str, plural: str) -> list[K8sObject]:
        self._check("custom", "list", f"{plural}.{group}")
        return super().list_custom(group, version, plural)

    def list_pods(self, *a: Any, **kw: Any) -> list[K8sObject]:
        self._check("pods", "list", "pods")
        return super().list_pods(*a, **kw)

    def list_nodes(self, label_selector: str | None = None) -> list[K8sObject]:
        self._check("nodes", "list", "nodes")
        return super().list_nodes(label_selector)


def run(
    objects: list[K8sObject],
    logs: dict[str, str] | None = None,
    *,
    node_name: str = "gpu-1",
    target: K8sObject | None = None,
    deny: tuple[str, ...] = (),
) -> LayerResult:
    cluster = Forbidden(copy.deepcopy(objects), logs or {}, deny=deny)
    if target is not None:
        cluster.add(target)
        t = Target(
            target["metadata"]["namespace"], target["metadata"]["name"], target["spec"].get("nodeName")
        )
    else:
        t = Target(None, None, node_name)
    ctx = WalkContext(cluster, NoTelemetry(0.0), t, target)
    return versions.check(ctx)


def log_key(p: K8sObject, container: str, previous: bool = False) -> str:
    return f"{p['metadata']['namespace']}/{p['metadata']['name']}/{container}" + (
        "#previous" if previous else ""
    )


# --- L3_DRIVER_BUILD_FAILED -------------------------------------------------------------


def test_kernel_headers_not_resolvable_sample_13() -> None:
    dp = driver_pod("gpu-1")
    result = run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): SAMPLE_13})
    f = one(result, "L3_DRIVER_BUILD_FAILED")
    assert f.severity is Severity.FAULT and f.node == "gpu-1"
    assert "Could not resolve Linux kernel version" in f.evidence
    # the kernel comes from the log's own banner, not nodeInfo
    assert "kernel: 4.15.0-2036-aws-fips" in f.evidence
    assert "kernel headers" in f.summary
    assert any("-c nvidia-driver-ctr" in c for c in f.commands)
    assert result.status is Severity.FAULT and result.next == STOP


def test_failure_glued_to_previous_message_sample_14_in_previous_log() -> None:
    # The container restarted: the failing run is the previous one, the current is mid-run.
    dp = driver_pod("gpu-1")
    logs = {
        log_key(dp, "nvidia-driver-ctr"): "========== NVIDIA Software Installer ==========\n",
        log_key(dp, "nvidia-driver-ctr", previous=True): SAMPLE_14,
    }
    f = one(run([node("gpu-1"), dp], logs), "L3_DRIVER_BUILD_FAILED")
    assert "kernel: 3.10.0-862.el7.x86_64" in f.evidence
    assert any(line.endswith(").Could not resolve Linux kernel version") for line in f.evidence)


def test_unsigned_module_secure_boot_sample_15_names_the_cause() -> None:
    dp = driver_pod("gpu-1")
    f = one(
        run(
            [node("gpu-1", kernel="4.18.0-305.19.1.el8_4.x86_64"), dp],
            {log_key(dp, "nvidia-driver-ctr"): SAMPLE_15},
        ),
        "L3_DRIVER_BUILD_FAILED",
    )
    assert "Secure Boot" in f.summary
    # no banner in this excerpt: the kernel comes from the node
    assert "kernel: 4.18.0-305.19.1.el8_4.x86_64" in f.evidence
    assert any("not signed by a key that is trusted" in e for e in f.evidence)
    assert any("Unable to load the kernel module 'nvidia.ko'" in e for e in f.evidence)


def test_module_load_failure_sample_16_kernel_from_source_path() -> None:
    dp = driver_pod("gpu-1")
    f = one(run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): SAMPLE_16}), "L3_DRIVER_BUILD_FAILED")
    assert "kernel: 6.8.0-35-generic" in f.evidence
    assert "would not load" in f.summary


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        # kubectl logs --timestamps, and the script's package-cache error (gpu-stack.md A7)
        (
            "2025-06-01T10:00:00.123456789Z Updating the package cache...\n"
            "2025-06-01T10:00:05.000000001Z ERROR: Failed to update package cache. "
            "Ensure that the cluster can access the proper networks.\n",
            "package repositories",
        ),
        # apt behind a firewall
        (
            "Updating the package cache...\n"
            "E: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  "
            "Temporary failure resolving 'archive.ubuntu.com'\n"
            "E: Some index files failed to download. They have been ignored, or old ones used instead.\n",
            "package repositories",
        ),
        # dnf on RHEL, headers for the running kernel missing: lower case, extra spaces
        (
            "Installing Linux kernel headers...\n"
            "error:   unable to find a match:   kernel-headers-5.14.0-427.13.1.el9_4.x86_64\n",
            "kernel headers",
        ),
        ("Could not locate Linux kernel version string\n", "kernel headers"),
        # modprobe under Secure Boot, double quotes
        ('modprobe: ERROR: could not insert "nvidia": Key was rejected by service\n', "Secure Boot"),
        (
            'ERROR: An error occurred while performing the step: "Building kernel modules".\n'
            "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for details.\n",
            "nvidia-installer",
        ),
    ],
)
def test_build_failure_variants(text: str, cause: str) -> None:
    dp = driver_pod("gpu-1")
    f = one(run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): text}), "L3_DRIVER_BUILD_FAILED")
    assert cause in f.summary


def test_nvidiadriver_managed_pod_and_driver_manager_evidence() -> None:
    dp = pod(
        "nvidia-gpu-driver-ubuntu22.04-6b8f9-abcde",
        "gpu-1",
        {"app.kubernetes.io/component": "nvidia-driver", "app": "nvidia-gpu-driver-ubuntu22.04-6b8f9"},
        ["nvidia-driver-ctr"],
        ("k8s-driver-manager",),
        waiting={"k8s-driver-manager": "CrashLoopBackOff", "nvidia-driver-ctr": "PodInitializing"},
        restarts=2,
    )
    logs = {
        log_key(dp, "nvidia-driver-ctr", previous=True): SAMPLE_13,
        log_key(
            dp, "k8s-driver-manager"
        ): "Getting current value of the 'nvidia.com/gpu.deploy.operator-validator' "
        "node label\nUnable to cordon node gpu-1: timed out\nFailed to uninstall nvidia driver components\n",
    }
    # the main container has not restarted, but the sparse status leaves room for a previous log
    dp["status"]["containerStatuses"][0]["restartCount"] = 1
    f = one(run([node("gpu-1"), dp], logs), "L3_DRIVER_BUILD_FAILED")
    assert "k8s-driver-manager: Failed to uninstall nvidia driver components" in f.evidence


def test_driver_that_came_up_since_is_not_a_failure() -> None:
    dp = driver_pod("gpu-1", waiting={"nvidia-driver-ctr": "CrashLoopBackOff"}, restarts=1)
    logs = {
        log_key(dp, "nvidia-driver-ctr", previous=True): SAMPLE_13,
        log_key(dp, "nvidia-driver-ctr"): DRIVER_OK,
    }
    assert "L3_DRIVER_BUILD_FAILED" not in codes(run([node("gpu-1"), dp], logs))


def test_failures_before_the_driver_came_up_in_the_same_log_are_history() -> None:
    # apt warned about a mirror, the install went on and finished.
    dp = driver_pod("gpu-1", waiting={"nvidia-driver-ctr": "CrashLoopBackOff"}, restarts=0)
    text = (
        "Updating the package cache...\nW: Failed to fetch http://mirror.example/ubuntu InRelease\n"
        + DRIVER_OK
    )
    assert "L3_DRIVER_BUILD_FAILED" not in codes(
        run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): text})
    )


def test_ready_driver_pod_logs_are_not_read() -> None:
    dp = driver_pod("gpu-1", ready=True, waiting={})
    cluster_logs = {log_key(dp, "nvidia-driver-ctr"): SAMPLE_13}
    result = run([node("gpu-1"), dp], cluster_logs, deny=("logs",))
    assert codes(result) == ["L3_OK"]


# --- L3_PREINSTALLED_DRIVER_CONFLICT -----------------------------------------------------


def conflict_objects(policy: K8sObject | None) -> tuple[list[K8sObject], dict[str, str]]:
    dp, vp = driver_pod("gpu-1"), validator_pod("gpu-1", waiting={"driver-validation": "CrashLoopBackOff"})
    objs = [node("gpu-1"), dp, vp] + ([policy] if policy else [])
    logs = {
        log_key(vp, "driver-validation"): PREINSTALLED,
        log_key(dp, "nvidia-driver-ctr"): SAMPLE_13.split("Checking")[0]
        + "Could not unload NVIDIA driver kernel modules, driver is in use\n",
    }
    return objs, logs


@pytest.mark.parametrize("enabled", [None, True])
def test_preinstalled_driver_conflict(enabled: bool | None) -> None:
    objs, logs = conflict_objects(cluster_policy(enabled))
    result = run(objs, logs)
    f = one(result, "L3_PREINSTALLED_DRIVER_CONFLICT")
    assert "driver.enabled=false" in f.summary
    assert any("Detected a pre-installed driver on the host" in e for e in f.evidence)
    assert any("CrashLoopBackOff" in e for e in f.evidence)
    assert any("spec.driver.enabled=" + ("unset" if enabled is None else "true") in e for e in f.evidence)
    assert result.next == STOP


def test_conflict_commands_name_the_nodes_validator_pod_not_a_placeholder() -> None:
    # Black-box finding: the command held "<operator-namespace>" though the namespace is known.
    objs, logs = conflict_objects(cluster_policy(True))
    f = one(run(objs, logs), "L3_PREINSTALLED_DRIVER_CONFLICT")
    assert f"kubectl logs -n {NS} nvidia-operator-validator-x7k2p -c driver-validation" in f.commands
    assert not any("<" in c for c in f.commands), f.commands


def test_driver_in_use_alone_with_a_failing_driver_pod_is_a_conflict() -> None:
    objs, logs = conflict_objects(cluster_policy(None))
    del logs[next(k for k in logs if "driver-validation" in k)]
    one(run(objs, logs), "L3_PREINSTALLED_DRIVER_CONFLICT")


def test_driver_disabled_in_clusterpolicy_is_not_a_conflict() -> None:
    objs, logs = conflict_objects(cluster_policy(False))
    assert "L3_PREINSTALLED_DRIVER_CONFLICT" not in codes(run(objs, logs))


def test_preinstalled_label_without_driver_pod_is_not_a_conflict_sample_31() -> None:
    # samples/31: nvidia.com/gpu.deploy.driver=pre-installed, the operator runs no driver pod.
    n = node("nori")
    n["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    vp = validator_pod("nori", ready=True)
    result = run(
        [n, vp, cluster_policy(True)], {log_key(vp, "driver-validation"): PREINSTALLED}, node_name="nori"
    )
    assert codes(result) == ["L3_OK"]


def test_host_driver_with_a_healthy_driver_pod_is_not_a_conflict() -> None:
    objs, logs = conflict_objects(cluster_policy(None))
    objs[1] = driver_pod("gpu-1", ready=True, waiting={})
    assert codes(run(objs, logs)) == ["L3_OK"]


def test_clusterpolicy_forbidden_gives_unknown_naming_the_rbac_rule() -> None:
    objs, logs = conflict_objects(cluster_policy(None))
    result = run(objs, logs, deny=("custom",))
    assert "L3_PREINSTALLED_DRIVER_CONFLICT" not in codes(result)
    unknowns = [f for f in result.findings if f.code == "L3_UNKNOWN"]
    assert any("clusterpolicies.nvidia.com" in f.summary and "'list'" in f.summary for f in unknowns)


# --- L3_FABRIC_MANAGER -----------------------------------------------------------------


def cuda_validator(on: str) -> K8sObject:
    return pod(
        "nvidia-cuda-validator-4xw9n",
        on,
        {"app": "nvidia-cuda-validator"},
        ["nvidia-cuda-validator"],
        ("cuda-validation",),
        waiting={"cuda-validation": "CrashLoopBackOff"},
        restarts=3,
        phase="Pending",
    )


def test_system_not_yet_initialized_in_cuda_validator_sample_18() -> None:
    cv = cuda_validator("hgx-1")
    result = run([node("hgx-1"), cv], {log_key(cv, "cuda-validation"): SAMPLE_18}, node_name="hgx-1")
    f = one(result, "L3_FABRIC_MANAGER")
    assert "nvidia-fabricmanager" in f.summary
    assert any("error code system not yet initialized" in e for e in f.evidence)
    assert result.next == STOP


def test_fabric_command_execs_into_the_nodes_driver_pod_or_the_host() -> None:
    cv = cuda_validator("hgx-1")
    logs = {log_key(cv, "cuda-validation"): SAMPLE_18}
    dp = driver_pod("hgx-1", ready=True, waiting={})
    f = one(run([node("hgx-1"), cv, dp], logs, node_name="hgx-1"), "L3_FABRIC_MANAGER")
    assert f.commands[-1] == (
        f"kubectl exec -n {NS} nvidia-driver-daemonset-8t4mg -c nvidia-driver-ctr -- nvidia-smi -q | grep -A2 Fabric"
    )
    # A host driver (no driver pod): read the fabric state on the host itself.
    f = one(run([node("hgx-1"), cv], logs, node_name="hgx-1"), "L3_FABRIC_MANAGER")
    assert f.commands[-1].startswith("kubectl debug node/hgx-1 ")
    assert not any("<" in c for c in f.commands), f.commands


def test_system_not_yet_initialized_in_an_event() -> None:
    vp = validator_pod("hgx-1", waiting={"cuda-validation": "CrashLoopBackOff"})
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "ev1", "namespace": NS},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": vp["metadata"]["name"]},
        "reason": "BackOff",
        "message": "Operator validator pods crashing with error code  System Not Yet Initialized",
    }
    one(run([node("hgx-1"), vp, event], node_name="hgx-1"), "L3_FABRIC_MANAGER")


def test_system_not_yet_initialized_in_the_application_log_with_timestamps() -> None:
    app = pod("train-0", "hgx-1", {"app": "train"}, ["trainer"], ns="ml", ready=True)
    logs = {
        "ml/train-0/trainer": "2024-10-15T08:00:01.000000000Z RuntimeError: CUDA error: system not yet "
        "initialized\n"
    }
    one(run([node("hgx-1")], logs, target=app), "L3_FABRIC_MANAGER")


# --- L3_DRIVER_VERSION_SKEW / L3_KERNEL_SKEW ------------------------------------------


def fleet(*drivers: str | None, **kw: Any) -> list[K8sObject]:
    return [node(f"gpu-{i}", d, **kw) for i, d in enumerate(drivers)]


def test_driver_skew_odd_node_with_table() -> None:
    nodes = fleet("550.90.07", "550.90.07", "550.90.07", "535.183.01")
    f = one(run(nodes, node_name="gpu-3"), "L3_DRIVER_VERSION_SKEW")
    assert f.severity is Severity.WARN and f.node == "gpu-3"
    assert "driver: 550.90.07 → 3 nodes, 535.183.01 → 1 node" in f.evidence
    assert "odd nodes (driver): gpu-3" in f.evidence
    assert (
        "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full"
        in f.commands
    )


def test_majority_node_is_not_skewed() -> None:
    nodes = fleet("550.90.07", "550.90.07", "535.183.01")
    result = run(nodes, node_name="gpu-0")
    assert codes(result) == ["L3_OK"]
    assert result.next == 4


def test_node_without_the_label_is_not_skew() -> None:
    nodes = fleet("550.90.07", "550.90.07", None, runtime=None)
    assert "L3_DRIVER_VERSION_SKEW" not in codes(run(nodes, node_name="gpu-2"))


def test_old_gfd_labels_are_read() -> None:
    nodes = fleet("550.90.07", "550.90.07", None)
    old = nodes[2]["metadata"]["labels"]
    old.update(
        {
            "nvidia.com/cuda.driver.major": "535",
            "nvidia.com/cuda.driver.minor": "104",
            "nvidia.com/cuda.driver.rev": "05",
        }
    )
    f = one(run(nodes, node_name="gpu-2"), "L3_DRIVER_VERSION_SKEW")
    assert "535.104.05" in f.summary


def test_runtime_skew_alone() -> None:
    nodes = [node("gpu-0", runtime="12.4"), node("gpu-1", runtime="12.4"), node("gpu-2", runtime="12.2")]
    f = one(run(nodes, node_name="gpu-2"), "L3_DRIVER_VERSION_SKEW")
    assert "CUDA runtime 12.2 vs 12.4" in f.summary


def test_tie_means_no_majority_and_is_reported_as_a_split() -> None:
    # Two against two: no version is the majority, so each side is skewed against the other.
    nodes = fleet("550.90.07", "550.90.07", "535.183.01", "535.183.01")
    f = one(run(nodes, node_name="gpu-0"), "L3_DRIVER_VERSION_SKEW")
    assert "no majority" in f.summary


def test_single_labelled_node_has_nothing_to_differ_from() -> None:
    assert codes(run(fleet("550.90.07"), node_name="gpu-0")) == ["L3_OK"]


def test_kernel_and_os_skew() -> None:
    nodes = fleet("550.90.07", "550.90.07", "550.90.07")
    nodes[2]["status"]["nodeInfo"] = {"kernelVersion": "6.8.0-1015-aws", "osImage": "Ubuntu 24.04.1 LTS"}
    f = one(run(nodes, node_name="gpu-2"), "L3_KERNEL_SKEW")
    assert "kernel 6.8.0-1015-aws vs 5.15.0-134-generic" in f.summary
    assert "OS image Ubuntu 24.04.1 LTS" in f.summary
    assert "L3_KERNEL_SKEW" not in codes(run(nodes, node_name="gpu-0"))


def test_pending_pod_on_a_large_fleet_folds_odd_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The layer's folding of many examined nodes, past the walk's cap (context.EXAMINED_NODES).
    monkeypatch.setattr(context, "EXAMINED_NODES", 10_000)
    # A pending pod examines every GPU node: 5,000 of them, 100 on another driver.
    nodes = [node(f"n{i}", "535.183.01" if i % 50 == 0 else "550.90.07") for i in range(5000)]
    pending = pod("job-0", "", {"app": "job"}, ["main"], ns="ml", phase="Pending")
    pending["spec"].pop("nodeName")
    result = run(nodes, target=pending)
    skews = [f for f in result.findings if f.code == "L3_DRIVER_VERSION_SKEW"]
    assert len(skews) == MAX_PER_CODE
    assert "91 more examined GPU nodes" in skews[-1].summary
    assert "driver: 550.90.07 → 4900 nodes, 535.183.01 → 100 nodes" in skews[0].evidence


# --- L3_DRIVER_UPGRADE_FAILED, L3_OK, unknowns --------------------------------------------


def test_driver_upgrade_failed_label() -> None:
    n = node("gpu-1")
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    result = run([n])
    f = one(result, "L3_DRIVER_UPGRADE_FAILED")
    assert f.evidence == ("nvidia.com/gpu-driver-upgrade-state=upgrade-failed",)
    assert result.status is Severity.WARN and result.next == 4


def node_event(name: str, reason: str, message: str) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.1881a2b3c4d5e6f7", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": name},
        "reason": reason,
        "message": message,
        "type": "Warning",
    }


def test_upgrade_failed_quotes_the_nodes_upgrade_events_that_say_why() -> None:
    # Black-box finding: a drain blocked by a PodDisruptionBudget is the cause, not the driver pod.
    n = node("gpu-1")
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    pdb = "Failed to drain node: cannot evict pod as it would violate the pod's disruption budget"
    objs = [
        n,
        node_event("gpu-1", "GPUDriverUpgrade", pdb),
        node_event("gpu-1", "NodeNotReady", "Node is not ready"),
    ]
    f = one(run(objs), "L3_DRIVER_UPGRADE_FAILED")
    assert f.evidence == (
        "nvidia.com/gpu-driver-upgrade-state=upgrade-failed",
        f"event GPUDriverUpgrade: {pdb}",
    )
    assert any("involvedObject.name=gpu-1" in c for c in f.commands)


def test_upgrade_failed_node_events_forbidden_keeps_the_finding_and_says_so() -> None:
    n = node("gpu-1")
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"

    class NoEvents(Forbidden):
        def list_events(self, *a: Any, **kw: Any) -> list[K8sObject]:
            raise SourceError("forbidden", "events is forbidden", verb="list", resource="events")

    ctx = WalkContext(NoEvents([n], {}), NoTelemetry(0.0), Target(None, None, "gpu-1"), None)
    result = versions.check(ctx)
    one(result, "L3_DRIVER_UPGRADE_FAILED")
    [u] = [f for f in result.findings if f.code == "L3_UNKNOWN"]
    assert "events of node gpu-1" in u.summary and "events" in u.summary


def test_upgrade_done_is_ok() -> None:
    n = node("gpu-1")
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
    result = run([n])
    f = one(result, "L3_OK")
    assert "driver: 550.90.07" in f.evidence and f.node == "gpu-1"


def test_logs_forbidden_gives_unknown_with_the_missing_rule() -> None:
    dp = driver_pod("gpu-1")
    result = run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): SAMPLE_13}, deny=("logs",))
    assert "L3_OK" not in codes(result)
    f = next(f for f in result.findings if f.code == "L3_UNKNOWN")
    assert "grant the bot's ServiceAccount 'get' on 'pods/log'" in f.summary
    assert result.status is Severity.UNKNOWN


def test_pods_forbidden_gives_one_unknown() -> None:
    result = run([node("gpu-1")], deny=("pods",))
    unknowns = [f for f in result.findings if f.code == "L3_UNKNOWN"]
    assert len(unknowns) == 1 and "'list' on 'pods'" in unknowns[0].summary


def test_nodes_forbidden_gives_unknown() -> None:
    result = run([node("gpu-1")], deny=("nodes",))
    assert codes(result) == ["L3_UNKNOWN"]
    assert "'list' on 'nodes'" in result.findings[0].summary


def test_fleet_is_read_once_per_walk() -> None:
    cluster = Forbidden(fleet("550.90.07", "535.183.01", "550.90.07"), {})
    ctx = WalkContext(cluster, NoTelemetry(0.0), Target(None, None, "gpu-1"), None)
    versions.check(ctx)
    versions.check(ctx)
    assert cluster.calls["nodes"] == 1


# --- real-world variants (QA): driver images, driver-manager, OpenShift, labels ------------------


def ocp_driver_pod(on: str, **kw: Any) -> K8sObject:
    """An OpenShift driver pod: named after the RHCOS version, the build runs in the Driver Toolkit."""
    name = "nvidia-driver-daemonset-416.94.202410020522-0-pz7xk"
    p = pod(
        name,
        on,
        {
            "app": "nvidia-driver-daemonset-416.94.202410020522-0",
            "app.kubernetes.io/component": "nvidia-driver",
            "openshift.driver-toolkit": "true",
        },
        ["nvidia-driver-ctr", "openshift-driver-toolkit-ctr"],
        ("k8s-driver-manager",),
        ns="nvidia-gpu-operator",
        **kw,
    )
    return p


# rhel9/ocp_dtk_entrypoint: nvidia-driver-ctr waits while openshift-driver-toolkit-ctr compiles.
DTK_WAITING = (
    "+ echo 'Fast path not detected: building driver and modules'\n"
    "Fast path not detected: building driver and modules\n"
    "Tue Oct 29 09:12:01 UTC 2024 openshift-driver-toolkit-ctr started.\n"
    "Tue Oct 29 09:12:01 UTC 2024 Waiting for openshift-driver-toolkit-ctr container to build the precompiled "
    "driver ...\n"
)
DTK_FAILED = (
    "Start building nvidia.ko driver ...\n"
    "+ bash -x /mnt/shared-nvidia-driver-toolkit/nvidia-driver build --tag builtin\n"
    "+ KERNEL_VERSION=5.14.0-427.37.1.el9_4.x86_64\n"
    "Compiling NVIDIA driver kernel modules...\n"
    "/usr/src/nvidia-535.104.05/kernel/nvidia/nv-mmap.c:320:9: error: implicit declaration of function "
    "'vm_flags_set'\n"
    "make[2]: *** [scripts/Makefile.build:243: /usr/src/nvidia-535.104.05/kernel/nvidia/nv-mmap.o] Error 1\n"
)


def test_openshift_build_failure_is_read_from_the_driver_toolkit_container() -> None:
    dp = ocp_driver_pod(
        "worker-gpu-0", waiting={"openshift-driver-toolkit-ctr": "CrashLoopBackOff"}, restarts=6
    )
    logs = {
        log_key(dp, "nvidia-driver-ctr"): DTK_WAITING,
        log_key(dp, "openshift-driver-toolkit-ctr", previous=True): DTK_FAILED,
        log_key(dp, "openshift-driver-toolkit-ctr"): "Start building nvidia.ko driver ...\n",
    }
    result = run(
        [node("worker-gpu-0", kernel="5.14.0-427.37.1.el9_4.x86_64")], logs, node_name="worker-gpu-0"
    )
    assert codes(result) == ["L3_OK"]  # the driver pod is not there: nothing to read
    result = run([node("worker-gpu-0"), dp], logs, node_name="worker-gpu-0")
    f = one(result, "L3_DRIVER_BUILD_FAILED")
    assert "did not compile against the running kernel" in f.summary
    assert "kernel: 5.14.0-427.37.1.el9_4.x86_64" in f.evidence
    assert any(e.startswith("make[2]: *** [scripts/Makefile.build:243") for e in f.evidence)
    assert (
        "kubectl logs -n nvidia-gpu-operator nvidia-driver-daemonset-416.94.202410020522-0-pz7xk "
        "-c openshift-driver-toolkit-ctr" in f.commands
    )
    assert result.next == STOP


def test_driver_toolkit_that_built_the_modules_is_not_a_failure() -> None:
    dp = ocp_driver_pod("worker-gpu-0", waiting={"nvidia-driver-ctr": "CrashLoopBackOff"}, restarts=1)
    logs = {
        log_key(dp, "openshift-driver-toolkit-ctr", previous=True): DTK_FAILED,
        log_key(dp, "openshift-driver-toolkit-ctr"): "NVIDIA drivers generated, inform nvidia-driver-ctr "
        "container about it and sleep forever.\n",
        log_key(dp, "nvidia-driver-ctr"): DTK_WAITING,
    }
    assert "L3_DRIVER_BUILD_FAILED" not in codes(
        run([node("worker-gpu-0"), dp], logs, node_name="worker-gpu-0")
    )


# k8s-driver-manager v0.8+ (Go, logrus TextFormatter DisableQuote; gpu-operator#2166 shows the format)
MANAGER_HOST_DRIVER = (
    "W0225 08:26:00.486943 1515429 client_config.go:667] Neither --kubeconfig nor --master was specified.  "
    "Using the inClusterConfig.  This might not work.\n"
    "time=2026-02-25T08:26:00Z level=info msg=Starting driver uninstallation process\n"
    "time=2026-02-25T08:26:01Z level=info msg=Host driver detected: 550.127.05\n"
    "time=2026-02-25T08:26:01Z level=info msg=NVIDIA GPU driver is already pre-installed on the node, "
    "disabling the containerized driver\n"
    "time=2026-02-25T08:26:01Z level=info msg=Labeling node gpu-1 with nvidia.com/gpu.deploy.driver=pre-installed\n"
    "time=2026-02-25T08:27:01Z level=fatal msg=driver is pre-installed on host\n"
)
MANAGER_DRAIN_FAILED = (
    "time=2026-02-25T08:26:00Z level=info msg=Starting driver uninstallation process\n"
    "time=2026-02-25T08:26:00Z level=info msg=Shutting down all GPU clients on the current node by disabling "
    "their component-specific nodeSelector labels\n"
    "time=2026-02-25T08:31:00Z level=info msg=Failed to drain node of GPU pods\n"
    "time=2026-02-25T08:31:00Z level=fatal msg=cannot proceed until all GPU pods are drained from the node\n"
)


def manager_failing_pod() -> K8sObject:
    return driver_pod(
        "gpu-1", waiting={"k8s-driver-manager": "CrashLoopBackOff", "nvidia-driver-ctr": "PodInitializing"}
    )


def test_driver_manager_finding_a_host_driver_is_a_conflict_when_the_policy_enables_the_driver() -> None:
    dp = manager_failing_pod()
    logs = {log_key(dp, "k8s-driver-manager", previous=True): MANAGER_HOST_DRIVER}
    result = run([node("gpu-1"), dp, cluster_policy(None)], logs)
    f = one(result, "L3_PREINSTALLED_DRIVER_CONFLICT")
    assert "time=2026-02-25T08:26:01Z level=info msg=Host driver detected: 550.127.05" in f.evidence
    assert any("k8s-driver-manager: CrashLoopBackOff" in e for e in f.evidence)
    assert "L3_UNKNOWN" not in codes(result)


def test_driver_manager_stuck_draining_says_the_build_cannot_be_judged() -> None:
    dp = manager_failing_pod()
    logs = {log_key(dp, "k8s-driver-manager"): MANAGER_DRAIN_FAILED}
    result = run([node("gpu-1"), dp, cluster_policy(None)], logs)
    f = one(result, "L3_UNKNOWN")
    assert "stuck in its k8s-driver-manager init container" in f.summary and f.node == "gpu-1"
    assert (
        "k8s-driver-manager: time=2026-02-25T08:31:00Z level=fatal msg=cannot proceed until all GPU pods are "
        "drained from the node" in f.evidence
    )
    assert "L3_OK" not in codes(result) and "L3_PREINSTALLED_DRIVER_CONFLICT" not in codes(result)


def test_apt_mirror_unreachable_is_named_beside_the_missing_headers() -> None:
    dp = driver_pod("gpu-1")
    text = (
        "2026-11-29T10:00:01.000000000Z Updating the package cache...\n"
        "2026-11-29T10:00:09.000000000Z W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease"
        "  Temporary failure resolving 'archive.ubuntu.com'\n"
        "2026-11-29T10:00:09.000000000Z Resolving Linux kernel version...\n"
        "2026-11-29T10:00:09.000000000Z Could not resolve Linux kernel version\n"
    )
    f = one(run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): text}), "L3_DRIVER_BUILD_FAILED")
    assert "check the node's egress/proxy first" in f.summary
    assert any("Temporary failure resolving" in e for e in f.evidence)


def test_apt_warning_while_the_driver_still_compiles_is_not_a_failure() -> None:
    dp = driver_pod("gpu-1", waiting={}, restarts=0)
    text = (
        "Updating the package cache...\n"
        "W: Failed to fetch http://mirror.example/ubuntu/dists/jammy/InRelease  Could not connect to "
        "mirror.example:80\n"
        "Resolving Linux kernel version...\nProceeding with Linux kernel version 5.15.0-134-generic\n"
        "Compiling NVIDIA driver kernel modules...\n"
    )
    assert codes(run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): text})) == ["L3_OK"]


def test_precompiled_driver_missing_for_the_kernel() -> None:
    # gpu-operator#457's precompiled banner; the apt error of precompiled/nvidia-driver's install step
    dp = driver_pod("gpu-1", name="nvidia-driver-daemonset-6.8.0-1015-aws-ubuntu22.04-7xq2d")
    text = (
        "\n========== NVIDIA Software Installer ==========\n\n"
        "Starting installation of NVIDIA driver branch 550 for Linux kernel version 6.8.0-1015-aws\n\n"
        "Installing Closed NVIDIA driver kernel modules...\n"
        "E: Unable to locate package linux-objects-nvidia-550-server-6.8.0-1015-aws\n"
    )
    f = one(run([node("gpu-1"), dp], {log_key(dp, "nvidia-driver-ctr"): text}), "L3_DRIVER_BUILD_FAILED")
    assert "no precompiled NVIDIA driver package for the running kernel" in f.summary
    assert "kernel: 6.8.0-1015-aws" in f.evidence


def test_fabric_manager_in_an_events_k8s_io_style_event_note() -> None:
    vp = validator_pod("hgx-1", waiting={"cuda-validation": "CrashLoopBackOff"})
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "ev2", "namespace": NS},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": vp["metadata"]["name"]},
        "reason": "BackOff",
        "note": "cuda-validation: cudaGetDeviceCount failed: Error 802: system not yet initialized",
        "series": {"count": 12, "lastObservedTime": "2026-11-29T10:00:00.000000Z"},
        "eventTime": "2026-11-29T09:00:00.000000Z",
    }
    f = one(run([node("hgx-1"), vp, event], node_name="hgx-1"), "L3_FABRIC_MANAGER")
    assert any("Error 802: system not yet initialized" in e for e in f.evidence)


def test_pytorch_error_802_in_the_application_with_a_ready_driver() -> None:
    # gpu-operator#2781: FM exits, the driver pod stays Ready, CUDA fails with 802 in the workload.
    app = pod("train-0", "hgx-1", {"app": "train"}, ["trainer"], ns="ml", ready=True)
    dp = driver_pod("hgx-1", ready=True, waiting={})
    logs = {
        "ml/train-0/trainer": "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error 802: system not "
        "yet initialized\n"
    }
    f = one(run([node("hgx-1"), dp], logs, target=app), "L3_FABRIC_MANAGER")
    assert f.node == "hgx-1" and f.evidence[0].startswith("train-0/trainer: RuntimeError")


def test_split_driver_version_labels_of_newer_gfd_are_read() -> None:
    nodes = fleet("550.90.07", "550.90.07", None, runtime=None)
    nodes[2]["metadata"]["labels"].update(
        {
            "nvidia.com/cuda.driver-version.major": "535",
            "nvidia.com/cuda.driver-version.minor": "183",
            "nvidia.com/cuda.driver-version.revision": "01",
        }
    )
    f = one(run(nodes, node_name="gpu-2"), "L3_DRIVER_VERSION_SKEW")
    assert "driver 535.183.01 vs 550.90.07" in f.summary


@pytest.mark.parametrize(
    "state", ["upgrade-required", "validation-required", "pod-restart-required", "upgrade-done"]
)
def test_upgrade_states_other_than_failed_are_not_findings(state: str) -> None:
    n = node("gpu-1")
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = state
    assert codes(run([n])) == ["L3_OK"]


def test_node_without_node_info_is_left_out_of_the_kernel_spread() -> None:
    nodes = fleet("550.90.07", "550.90.07", "550.90.07")
    del nodes[2]["status"]["nodeInfo"]
    assert "L3_KERNEL_SKEW" not in codes(run(nodes, node_name="gpu-2"))
    nodes[1]["status"]["nodeInfo"]["osImage"] = "Ubuntu 22.04.5 LTS "  # trailing space is no skew
    assert "L3_KERNEL_SKEW" not in codes(run(nodes, node_name="gpu-1"))


def test_previous_log_command_only_for_a_driver_that_restarted() -> None:
    text = "Resolving Linux kernel version...\nCould not resolve Linux kernel version\n"
    fresh = driver_pod("gpu-1", restarts=0, waiting={"nvidia-driver-ctr": "ContainerCreating"})
    f = one(
        run([node("gpu-1"), fresh], {log_key(fresh, "nvidia-driver-ctr"): text}), "L3_DRIVER_BUILD_FAILED"
    )
    assert not any("--previous" in c for c in f.commands)  # kubectl would refuse it
    looping = driver_pod("gpu-1")
    f = one(
        run([node("gpu-1"), looping], {log_key(looping, "nvidia-driver-ctr"): text}), "L3_DRIVER_BUILD_FAILED"
    )
    assert any(c.endswith("-c nvidia-driver-ctr --previous") for c in f.commands)
