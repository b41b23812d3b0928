"""Layer 2 — the container runtime, on operator pod states, events and logs from the samples."""

from __future__ import annotations

from typing import Any

import pytest

from layers import runtime
from layers.facts import context
from layers.facts import logsigs as sig
from layers.findings import STOP, LayerResult, Severity
from layers.sources import K8sObject
from tests.layers.builders import (
    codes,
    crash_looping,
    ctx,
    event,
    forbidden,
    gpu_node,
    healthy_operator,
    logs_for,
    node,
    one,
    operand,
    pod,
    running,
    terminated,
    waiting,
)

NODE = "gpu-1"

# Sample 10 (describe events) and sample 11 (kubelet journal, escaped quotes), verbatim.
SANDBOX_10 = (
    "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: "
    'no runtime for "nvidia" is configured'
)
JOURNAL_11 = (
    'E0505 18:42:19.812688 1311 pod_workers.go:949] "Error syncing pod, skipping" err="failed to '
    '\\"CreatePodSandbox\\" for \\"nvidia-device-plugin-daemonset-h9kxw_gpu-operator(8e491f32)\\" with '
    'CreatePodSandboxError: \\"Failed to create sandbox for pod: rpc error: code = Unknown desc = failed to '
    'get sandbox runtime: no runtime for \\\\\\"nvidia\\\\\\" is configured\\""'
)
# Sample 09, verbatim.
NVML_09 = """2022/05/13 23:09:23 Loading NVML
2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library.
2022/05/13 23:09:23 If this is a GPU node, did you set the docker default runtime to 'nvidia'?
2022/05/13 23:09:23 You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites
"""
# Sample 17 (kubectl logs --timestamps), verbatim lines.
DRIVER_VALIDATION_17 = """2024-10-24T09:25:48.176690024+08:00 running command chroot with args [/run/nvidia/driver nvidia-smi]
2024-10-24T09:25:48.178993123+08:00 chroot: failed to run command 'nvidia-smi': No such file or directory
2024-10-24T09:25:48.179246578+08:00 command failed, retrying after 5 seconds
"""
# Sample 20, the GFD's last termination message.
GFD_START_ERROR_20 = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
    "failed: unable to start container process: error during container init: error running hook #0: error "
    "running hook: exit status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: driver "
    "rpc error: timed out: unknown"
)


def app(node_name: str | None = NODE, **kw: Any) -> K8sObject:
    return pod(
        "ml", "trainer-0", node=node_name, requests={"nvidia.com/gpu": 1}, containers=("trainer",), **kw
    )


def run(objects: list[K8sObject], logs: dict[str, str] | None = None, **kw: Any) -> LayerResult:
    kw.setdefault("pod", ("ml", "trainer-0"))
    return runtime.check(ctx(objects, logs=logs, **kw))


def replace(pods: list[K8sObject], new: K8sObject) -> list[K8sObject]:
    app_label = new["metadata"]["labels"]["app"]
    return [p for p in pods if p["metadata"]["labels"].get("app") != app_label] + [new]


# --- healthy and missing --------------------------------------------------------------------


def test_healthy_node_is_ok_and_goes_to_layer_3() -> None:
    result = run([gpu_node(NODE), app(), *healthy_operator(NODE)])
    ok = one(result, "L2_OK")
    assert ok.node == NODE and "validator passed" in ok.summary
    assert result.status == Severity.OK and result.next == 3


def test_no_operator_anywhere_stops_the_walk() -> None:
    result = run([gpu_node(NODE), app()])
    assert one(result, "L2_OPERATOR_NOT_FOUND").severity == Severity.FAULT
    assert result.next == STOP


def test_operator_found_in_another_namespace() -> None:
    result = run([gpu_node(NODE), app(), *healthy_operator(NODE, ns="nvidia-gpu-operator")])
    assert codes(result) == ["L2_OK"]


def test_operator_elsewhere_but_none_on_the_node_is_unknown() -> None:
    result = run([gpu_node(NODE), gpu_node("gpu-2"), app(), *healthy_operator("gpu-2")])
    unk = one(result, "L2_UNKNOWN")
    assert unk.node == NODE and "nvidia.com/gpu.deploy" in unk.summary


# --- no runtime "nvidia" ----------------------------------------------------------------------


def sandbox_failing_plugin() -> K8sObject:
    return operand(
        "nvidia-device-plugin-daemonset",
        NODE,
        "w72xb",
        init_statuses=[],
        statuses=[waiting("nvidia-device-plugin", "ContainerCreating")],
        phase="Pending",
    )


@pytest.mark.parametrize(
    "message",
    [SANDBOX_10, SANDBOX_10.replace('"nvidia"', "'nvidia'"), JOURNAL_11, SANDBOX_10.upper()],
    ids=["double-quotes", "single-quotes", "kubelet-journal-escaped", "upper-case"],
)
def test_no_runtime_event_on_an_operand_from_samples_10_11(message: str) -> None:
    plugin = sandbox_failing_plugin()
    ev = event(
        ("gpu-operator", "Pod", plugin["metadata"]["name"]), "FailedCreatePodSandBox", message, count=10
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin), ev])
    f = one(result, "L2_NO_RUNTIME_NVIDIA")
    assert f.node == NODE and f.severity == Severity.FAULT
    assert any("FailedCreatePodSandBox (x10) kubelet:" in e for e in f.evidence)
    assert any("nvidia-container-toolkit-ctr" in c for c in f.commands)
    assert result.next == 3


def test_no_runtime_on_the_target_pod_itself() -> None:
    target = app(statuses=[waiting("trainer", "ContainerCreating")], phase="Pending")
    ev = event(("ml", "Pod", "trainer-0"), "FailedCreatePodSandBox", SANDBOX_10)
    result = run([gpu_node(NODE), target, *healthy_operator(NODE), ev])
    f = one(result, "L2_NO_RUNTIME_NVIDIA")
    assert f.evidence[0].startswith("ml/trainer-0: Warning FailedCreatePodSandBox")
    assert "kubectl describe pod -n ml trainer-0 | tail -20" in f.commands


def test_no_runtime_in_a_status_message() -> None:
    plugin = operand(
        "nvidia-device-plugin-daemonset",
        NODE,
        init_statuses=[],
        phase="Pending",
        statuses=[waiting("nvidia-device-plugin", "ContainerCreating", message=SANDBOX_10)],
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)])
    assert "status:" in one(result, "L2_NO_RUNTIME_NVIDIA").evidence[0]


def test_other_sandbox_errors_are_not_no_runtime() -> None:
    plugin = sandbox_failing_plugin()
    ev = event(
        ("gpu-operator", "Pod", plugin["metadata"]["name"]),
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = DeadlineExceeded desc = context deadline exceeded",
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin), ev])
    assert "L2_NO_RUNTIME_NVIDIA" not in codes(result)


def crashing_plugin(restarts: int, suffix: str = "x7k2p") -> K8sObject:
    """The device plugin crash-looping on NODE, its config-manager sidecar running."""
    return operand(
        "nvidia-device-plugin-daemonset",
        NODE,
        suffix,
        statuses=[crash_looping("nvidia-device-plugin", restarts), running("config-manager")],
    )


def validator_at_driver_validation() -> K8sObject:
    """The validator of samples 12 and 17: driver-validation running, never finishing."""
    return operand(
        "nvidia-operator-validator",
        NODE,
        "th4w7",
        phase="Pending",
        statuses=[waiting("nvidia-operator-validator")],
        init_statuses=[
            running("driver-validation", ready=False),
            *(waiting(c) for c in ("toolkit-validation", "cuda-validation", "plugin-validation")),
        ],
    )


# --- stuck in Init behind the driver (sample 12) -----------------------------------------------


def stuck_in_init(driver_ready: bool) -> list[K8sObject]:
    pods = [
        operand(
            "nvidia-driver-daemonset",
            NODE,
            "4rtiu",
            ready=driver_ready,
            statuses=[running("nvidia-driver-ctr", ready=driver_ready, restarts=3)],
        ),
        validator_at_driver_validation(),
    ]
    for appname in ("gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-device-plugin-daemonset"):
        pods.append(
            operand(
                appname, NODE, phase="Pending", statuses=[], init_statuses=[waiting("toolkit-validation")]
            )
        )
    pods.append(
        operand(
            "nvidia-container-toolkit-daemonset",
            NODE,
            "mqzwq",
            phase="Pending",
            statuses=[],
            init_statuses=[running("driver-validation", ready=False)],
        )
    )
    return pods


def test_operands_waiting_for_the_driver_from_sample_12() -> None:
    pods = stuck_in_init(driver_ready=False)
    logs = logs_for(pods[0], "nvidia-driver-ctr", "Could not resolve Linux kernel version\n", previous=True)
    logs |= logs_for(pods[1], "driver-validation", DRIVER_VALIDATION_17)
    result = run([gpu_node(NODE), app(), *pods], logs)
    f = one(result, "L2_WAITING_FOR_DRIVER")
    assert "driver pod nvidia-driver-daemonset-4rtiu: Running, ready 0/1, restarts 3" in f.evidence
    assert "nvidia-driver-ctr: Could not resolve Linux kernel version" in f.evidence
    assert "gpu-feature-discovery-x7k2p: Init:0/2, ready 0/2, restarts 0" in f.evidence
    assert "nvidia-operator-validator-th4w7: Init:0/4, ready 0/1, restarts 0" in f.evidence
    v = one(result, "L2_VALIDATOR_STUCK")
    assert "stopped at driver-validation" in v.summary and v.next == 3
    assert result.status == Severity.FAULT and result.next == 3


def test_init_pods_with_a_ready_driver_are_not_waiting_for_it() -> None:
    result = run([gpu_node(NODE), app(), *stuck_in_init(driver_ready=True)])
    assert "L2_WAITING_FOR_DRIVER" not in codes(result)
    assert "L2_OK" not in codes(result)


# --- the validator ----------------------------------------------------------------------------


def test_validator_stuck_at_driver_validation_with_its_log_from_sample_17() -> None:
    validator = validator_at_driver_validation()
    logs = logs_for(validator, "driver-validation", DRIVER_VALIDATION_17)
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), validator)], logs)
    f = one(result, "L2_VALIDATOR_STUCK")
    assert "driver-validation: running (not finished), restarts 0" in f.evidence
    assert any("chroot: failed to run command 'nvidia-smi'" in e for e in f.evidence)
    assert f.next == 3 and result.next == 3
    assert "kubectl logs -n gpu-operator nvidia-operator-validator-th4w7 -c driver-validation" in f.commands


def test_validator_crashlooping_at_toolkit_validation_from_sample_38() -> None:
    last = {"reason": "Error", "exitCode": 1}
    validator = operand(
        "nvidia-operator-validator",
        NODE,
        "qpv7s",
        phase="Pending",
        statuses=[waiting("nvidia-operator-validator")],
        init_statuses=[
            terminated("driver-validation"),
            waiting("toolkit-validation", "CrashLoopBackOff", restarts=20, last=last),
            waiting("cuda-validation"),
            waiting("plugin-validation"),
        ],
    )
    err = 'Error: failed to validate toolkit: exec: "nvidia-smi": executable file not found in $PATH\n'
    logs = logs_for(validator, "toolkit-validation", err, previous=True)
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), validator)], logs)
    f = one(result, "L2_VALIDATOR_STUCK")
    assert "stopped at toolkit-validation" in f.summary
    assert "toolkit-validation: waiting: CrashLoopBackOff, restarts 20" in f.evidence
    assert any("executable file not found" in e for e in f.evidence)
    assert f.next is None  # only driver-validation sends the walk to layer 3
    failing = one(result, "L2_OPERAND_FAILING")
    assert "init container toolkit-validation is CrashLoopBackOff (20 restarts)" in failing.summary
    assert result.next == 3  # no finding names a layer: the walk goes on


def test_validator_infoROM_log_from_sample_19() -> None:
    log = "        WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n        14\n"
    validator = operand(
        "nvidia-operator-validator",
        NODE,
        phase="Pending",
        statuses=[waiting("nvidia-operator-validator")],
        init_statuses=[
            waiting(
                "driver-validation", "CrashLoopBackOff", restarts=4, last={"reason": "Error", "exitCode": 14}
            )
        ],
    )
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), validator)],
        logs_for(validator, "driver-validation", log, previous=True),
    )
    f = one(result, "L2_VALIDATOR_STUCK")
    assert "driver-validation log: WARNING: infoROM is corrupted at gpu 0000:0B:00.0" in f.evidence
    assert "driver-validation log: 14" in f.evidence and f.next == 3


# --- the device plugin ------------------------------------------------------------------------


def test_device_plugin_nvml_failure_from_sample_09() -> None:
    plugin = operand("nvidia-device-plugin-daemonset", NODE, "j76n5")
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)],
        logs_for(plugin, "nvidia-device-plugin", NVML_09),
    )
    f = one(result, "L2_DEVICE_PLUGIN_NVML_FAILED")
    assert (
        f.evidence[0]
        == "nvidia-device-plugin: 2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library."
    )
    assert any("default runtime to 'nvidia'" in e for e in f.evidence)
    assert f.node == NODE and result.next == 3


def test_standalone_plugin_container_and_klog_prefix() -> None:
    standalone = pod(
        "kube-system",
        "nvidia-device-plugin-7xq2m",
        node=NODE,
        containers=("nvidia-device-plugin-ctr",),
        labels={"app.kubernetes.io/name": "nvidia-device-plugin"},
        statuses=[crash_looping("nvidia-device-plugin-ctr", 6)],
    )
    log = (
        "E1118 10:00:01.123456       1 factory.go:112] Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.\n"
        "E1118 10:00:01.123470       1 main.go:132] error starting plugins: nvml init failed: ERROR_LIBRARY_NOT_FOUND\n"
    )
    result = run(
        [gpu_node(NODE), app(), standalone],
        logs_for(standalone, "nvidia-device-plugin-ctr", log, previous=True),
    )
    f = one(result, "L2_DEVICE_PLUGIN_NVML_FAILED")
    assert f.evidence[0].startswith("nvidia-device-plugin-ctr (previous): E1118")
    assert any("--previous" in c for c in f.commands)
    assert "L2_OPERAND_FAILING" in codes(result)


def test_invalid_mig_config_mentioning_nvml_is_an_operand_failing() -> None:
    log = (
        "E1118 10:00:01.1 1 main.go:132] error starting plugins: error creating plugin manager: unable to "
        "create plugin manager: failed to construct NVML resource managers: invalid MIG configuration: "
        "At least one device with migEnabled=true was not configured correctly\n"
    )
    plugin = crashing_plugin(3)
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)],
        logs_for(plugin, "nvidia-device-plugin", log, previous=True),
    )
    assert "L2_DEVICE_PLUGIN_NVML_FAILED" not in codes(result)
    f = one(result, "L2_OPERAND_FAILING")
    assert any("invalid MIG configuration" in e for e in f.evidence)


# --- failing operands -------------------------------------------------------------------------


def test_gfd_crashloop_with_start_error_from_sample_20() -> None:
    gfd = operand(
        "gpu-feature-discovery",
        NODE,
        "tmblp",
        statuses=[
            waiting(
                "gpu-feature-discovery",
                "CrashLoopBackOff",
                restarts=12,
                last={"reason": "StartError", "exitCode": 128, "message": GFD_START_ERROR_20},
            ),
            running("config-manager"),
        ],
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), gfd)])
    f = one(result, "L2_OPERAND_FAILING")
    assert f.severity == Severity.WARN and f.node == NODE
    assert (
        "gpu-feature-discovery-tmblp container gpu-feature-discovery: CrashLoopBackOff, restarts 12"
        in f.evidence
    )
    assert any("driver rpc error: timed out" in e for e in f.evidence)
    assert (
        "kubectl logs -n gpu-operator gpu-feature-discovery-tmblp -c gpu-feature-discovery --previous"
        in f.commands
    )
    assert result.next == 3


def test_image_pull_backoff_says_what_to_check() -> None:
    dcgm = operand(
        "nvidia-dcgm-exporter",
        NODE,
        statuses=[
            waiting(
                "nvidia-dcgm-exporter",
                "ImagePullBackOff",
                message='Back-off pulling image "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"',
            )
        ],
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), dcgm)])
    f = one(result, "L2_OPERAND_FAILING")
    assert "pull secret" in f.summary and any("Back-off pulling image" in e for e in f.evidence)


@pytest.mark.parametrize(
    ("reason", "canonical"),
    [
        ("CrashLoopBackOff", "CrashLoopBackOff"),
        ("Init:CrashLoopBackOff", "CrashLoopBackOff"),
        ("errimagepull", "ErrImagePull"),
        ("PodInitializing", None),
        ("ContainerCreating", None),
        (None, None),
    ],
)
def test_failing_wait_reasons(reason: str | None, canonical: str | None) -> None:
    assert sig.failing_wait_reason(reason) == canonical


# --- the application itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "2026-11-18T10:00:01.000000000Z RuntimeError: CUDA error: no CUDA-capable device is detected",
        "Failed to initialize NVML: Unknown Error",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before?",
        "CUDA driver version is insufficient for CUDA runtime version",
        "W tensorflow/core: CUDA Driver UNAVAILABLE: failed call to cuInit: CUDA_ERROR_NO_DEVICE",
    ],
)
def test_app_sees_no_gpu_in_previous_log(line: str) -> None:
    target = app(statuses=[crash_looping("trainer", 2)])
    logs = logs_for(target, "trainer", f"loading model\n{line}\n", previous=True)
    result = run([gpu_node(NODE), target, *healthy_operator(NODE)], logs)
    f = one(result, "L2_APP_SEES_NO_GPU")
    assert f.evidence == (f"container trainer (previous): {line}",)
    assert f.node == NODE and f.next is None
    assert (
        "kubectl logs -n ml trainer-0 -c trainer --previous | grep -iE 'cuda|nvml|nvidia-smi'" in f.commands
    )


def test_app_current_log_is_read_and_healthy_log_is_not_a_finding() -> None:
    target = app()
    hit = run(
        [gpu_node(NODE), target, *healthy_operator(NODE)],
        logs_for(target, "trainer", "no CUDA-capable device is detected\n"),
    )
    assert one(hit, "L2_APP_SEES_NO_GPU").evidence == (
        "container trainer: no CUDA-capable device is detected",
    )
    fine = run(
        [gpu_node(NODE), target, *healthy_operator(NODE)],
        logs_for(target, "trainer", "Using device cuda:0 (NVIDIA H100 80GB HBM3)\n"),
    )
    assert codes(fine) == ["L2_OK"]


# --- examined nodes of an unbound pod ---------------------------------------------------------


def test_unbound_pod_examines_the_gpu_node_that_does_not_advertise() -> None:
    silent = node("gpu-new", labels={"nvidia.com/gpu.present": "true"})
    plugin = operand("nvidia-device-plugin-daemonset", "gpu-new")
    objs = [
        gpu_node("gpu-0"),
        silent,
        app(node_name=None),
        *healthy_operator("gpu-0"),
        *replace(healthy_operator("gpu-new"), plugin),
    ]
    result = run(objs, logs_for(plugin, "nvidia-device-plugin", NVML_09))
    assert [(f.code, f.node) for f in result.findings] == [("L2_DEVICE_PLUGIN_NVML_FAILED", "gpu-new")]


def test_many_healthy_nodes_make_one_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    # The layer's folding of many examined nodes, past the walk's cap (context.EXAMINED_NODES).
    monkeypatch.setattr(context, "EXAMINED_NODES", 10_000)
    objs: list[K8sObject] = [app(node_name=None)]
    for i in range(15):
        objs += [
            gpu_node(f"gpu-{i:02d}"),
            *healthy_operator(f"gpu-{i:02d}", apps=["nvidia-operator-validator"]),
        ]
    result = run(objs)
    assert codes(result) == ["L2_OK"] and "15 examined nodes" in result.findings[0].summary


# --- what could not be read -------------------------------------------------------------------


def test_pods_forbidden_is_unknown_with_the_rbac_hint() -> None:
    result = run(
        [gpu_node(NODE), app(), *healthy_operator(NODE)], fail={"list_pods": forbidden("list", "pods")}
    )
    unk = one(result, "L2_UNKNOWN")
    assert "could not read the GPU Operator's pods" in unk.summary
    assert "grant the bot's ServiceAccount 'list' on 'pods' cluster-wide" in unk.summary
    assert "L2_OPERATOR_NOT_FOUND" not in codes(result)
    assert result.status == Severity.UNKNOWN


def test_events_forbidden_is_unknown_but_the_pods_are_still_read() -> None:
    result = run(
        [gpu_node(NODE), app(), *healthy_operator(NODE)],
        fail={"list_events": forbidden("list", "events", "gpu-operator")},
    )
    unk = one(result, "L2_UNKNOWN")  # the target's and the operator's events: one cause, one finding
    assert "the events of ml/trainer-0" in unk.summary and "events in namespace gpu-operator" in unk.summary
    assert "'list' on 'events' in namespace gpu-operator" in unk.summary
    assert "L2_OK" in codes(result)


def test_logs_forbidden_is_unknown_once() -> None:
    target = app(statuses=[waiting("trainer", "CrashLoopBackOff", restarts=2)])
    result = run(
        [gpu_node(NODE), target, *healthy_operator(NODE)],
        fail={"pod_log": forbidden("get", "pods/log", "ml")},
    )
    unk = one(result, "L2_UNKNOWN")
    assert "the log of ml/trainer-0 container trainer" in unk.summary
    assert "the log of gpu-operator/nvidia-device-plugin-daemonset" in unk.summary
    assert "'get' on 'pods/log' in namespace ml" in unk.summary
    assert "L2_OK" in codes(result)


def test_unrecognised_not_ready_operand_is_unknown_not_ok() -> None:
    dcgm = operand(
        "nvidia-dcgm-exporter", NODE, ready=False, statuses=[running("nvidia-dcgm-exporter", ready=False)]
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), dcgm)])
    assert "L2_OK" not in codes(result)
    assert "nvidia-dcgm-exporter-x7k2p: Running, ready 0/1, restarts 0" in one(result, "L2_UNKNOWN").evidence


# --- the signatures themselves ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("2024-10-24T09:25:48.176690024+08:00 running command chroot", "running command chroot"),
        ("I0624 22:58:05.486593       1 health.go:159] Processing event", "Processing event"),
        (
            "May 05 18:42:19 hawkeye kubelet[1311]: E0505 18:42:19.812950 1311 remote_runtime.go:209] RunPodSandbox",
            "RunPodSandbox",
        ),
        ("2022/05/13 23:09:23 Loading NVML", "Loading NVML"),
        ("[pod/nvidia-device-plugin-daemonset-x/nvidia-device-plugin] 2026-11-18T10:00:00Z hello", "hello"),
        ("   plain line   ", "plain line"),
    ],
)
def test_strip_prefixes(line: str, message: str) -> None:
    assert sig.strip_prefixes(line) == message


def test_no_runtime_signature_needs_nvidia() -> None:
    assert not sig.NO_RUNTIME_NVIDIA.matches('no runtime for "kata" is configured')
    assert sig.NO_RUNTIME_NVIDIA.matches("no runtime for &#34;nvidia&#34; is configured")


def test_nodes_without_operator_pods_are_one_unknown_and_sandbox_errors_still_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The layer's folding of many examined nodes, past the walk's cap (context.EXAMINED_NODES).
    monkeypatch.setattr(context, "EXAMINED_NODES", 10_000)
    target = app(statuses=[waiting("trainer", "ContainerCreating")], phase="Pending")
    ev = event(("ml", "Pod", "trainer-0"), "FailedCreatePodSandBox", SANDBOX_10)
    result = run([gpu_node(NODE), gpu_node("gpu-2"), target, *healthy_operator("gpu-2"), ev])
    assert one(result, "L2_NO_RUNTIME_NVIDIA").node == NODE
    assert one(result, "L2_UNKNOWN").node == NODE
    silent = [node(f"gpu-{i:02d}", labels={"nvidia.com/gpu.present": "true"}) for i in range(12)]
    result = run([*silent, app(node_name=None), *healthy_operator("elsewhere")])
    unk = one(result, "L2_UNKNOWN")
    assert unk.node is None and "gpu-00" in unk.summary and "and 2 more" in unk.summary


# --- variants from the field: other plugin, runtime and validator versions --------------------------

# Real lines from k8s-device-plugin issues, each in the prefix its reporter pasted.
NVML_VARIANTS = {
    # #856 (v0.16.1, k3s): the crash-looping plugin's last words, klog-prefixed.
    "v0.16-nvml-init-failed": (
        "E0801 12:01:07.310245       1 main.go:132] error starting plugins: error creating plugin manager: "
        "unable to create plugin manager: nvml init failed: ERROR_LIBRARY_NOT_FOUND"
    ),
    # #1371 (v0.17.3): the NVML probe at start, before the config dump.
    "v0.17-nvml-not-detected": (
        "W0819 07:02:54.757556       1 rm.go:109] NVML not detected: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
    ),
    # #1011 (v0.15.0, k3s + MPS).
    "v0.15-non-nvml-platform": (
        "I0117 15:43:15.906553 1 factory.go:107] Detected non-NVML platform: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
    ),
    # #1220 (v0.17.1): neither NVML nor Tegra; the plugin then asks about the toolkit.
    "v0.17-incompatible-strategy": "E0506 17:45:45.421956       1 factory.go:112] Incompatible strategy detected auto",
    # #444 (v0.11.0): a node's CRI log file (/var/log/pods) with its stream tag, Go log dates inside.
    "v0.11-cri-log-file": (
        "2023-10-19T11:11:54.957723331+08:00 stderr F 2023/10/19 03:11:54 Failed to initialize NVML: "
        "could not load NVML library."
    ),
    # #23 (1.0-beta, Kubernetes 1.8).
    "1.0-beta-failed-to-start": "Failed to start nvml with error:  could not load NVML library",
    # Colour codes and CRLF from a log shipper.
    "ansi-crlf": "\x1b[31mE1118 10:00:01.1 1 factory.go:78] Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED.\x1b[0m\r",
}
# A healthy v0.17 plugin says NVML at start: none of these is a failure (#480, #321, #328).
HEALTHY_PLUGIN_LOG = """I1118 10:00:00.1 1 main.go:235] "Starting NVIDIA Device Plugin" version=<
I1118 10:00:00.2 1 main.go:317] Loading configuration.
2022/07/11 21:42:10 Loading NVML
2023/03/19 19:41:26 Detected NVML platform: found NVML library
2023/03/19 19:41:26 Detected non-Tegra platform: /sys/devices/soc0/family file not found
2023/03/19 19:41:26 Using NVML manager
W0819 07:02:54.757542       1 rm.go:108] mig-strategy="mixed" is only supported with NVML
2022/08/11 06:57:10 Initializing NVML.
2022/08/11 06:57:10 Registered device plugin for 'nvidia.com/gpu' with Kubelet
"""


@pytest.mark.parametrize("line", list(NVML_VARIANTS.values()), ids=list(NVML_VARIANTS))
def test_device_plugin_nvml_failure_variants(line: str) -> None:
    plugin = crashing_plugin(5, "h9kxw")
    text = f"I1118 10:00:00.1 1 main.go:317] Loading configuration.\r\n{line}\n"
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)],
        logs_for(plugin, "nvidia-device-plugin", text, previous=True),
    )
    f = one(result, "L2_DEVICE_PLUGIN_NVML_FAILED")
    clean = sig.lines_of(line)[0]
    assert f.evidence[0] == f"nvidia-device-plugin (previous): {clean}"
    assert "\x1b" not in f.evidence[0] and "\r" not in f.evidence[0]
    assert f.node == NODE and f.severity == Severity.FAULT and f.next == 3
    assert "L2_OPERAND_FAILING" in codes(result)  # the crash loop itself
    assert result.next == 3


def test_incompatible_strategy_keeps_the_plugins_toolkit_hint() -> None:
    log = (
        "E0506 17:45:45.421956       1 factory.go:112] Incompatible strategy detected auto\n"
        "E0506 17:45:45.421965       1 factory.go:113] If this is a GPU node, did you configure the NVIDIA "
        "Container Toolkit?\n"
    )
    standalone = pod(
        "nvidia-device-plugin",
        "nvdp-nvidia-device-plugin-7btjn",
        node=NODE,
        containers=("nvidia-device-plugin-ctr",),
        labels={"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"},
    )
    result = run([gpu_node(NODE), app(), standalone], logs_for(standalone, "nvidia-device-plugin-ctr", log))
    f = one(result, "L2_DEVICE_PLUGIN_NVML_FAILED")
    assert any("did you configure the NVIDIA Container Toolkit?" in e for e in f.evidence)
    assert (
        "kubectl logs -n nvidia-device-plugin nvdp-nvidia-device-plugin-7btjn -c nvidia-device-plugin-ctr"
        in (f.commands[0])
    )


def test_healthy_plugin_mentioning_nvml_is_ok() -> None:
    plugin = operand("nvidia-device-plugin-daemonset", NODE)
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)],
        logs_for(plugin, "nvidia-device-plugin", HEALTHY_PLUGIN_LOG),
    )
    assert codes(result) == ["L2_OK"]


def test_a_very_long_plugin_line_is_clipped_around_the_failure() -> None:
    line = "E1118 10:00:01.1 1 main.go:132] " + "x" * 5000 + " nvml init failed: ERROR_UNKNOWN " + "y" * 5000
    plugin = operand("nvidia-device-plugin-daemonset", NODE)
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), plugin)],
        logs_for(plugin, "nvidia-device-plugin", line),
    )
    ev = one(result, "L2_DEVICE_PLUGIN_NVML_FAILED").evidence[0]
    assert "nvml init failed: ERROR_UNKNOWN" in ev and len(ev) < 500


# CRI-O says it differently (NVSentinel#442, gpu-operator#1298); containerd 2.x names the sandbox
# (gpu-operator PR #2168); issue #759 was pasted with typographic quotes.
SANDBOX_VARIANTS = {
    "cri-o": (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to find runtime handler nvidia "
        "from runtime list map[crun:0xc00047e300 runc:0xc00047ef00]"
    ),
    "containerd-2": (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = unable to get OCI runtime for sandbox "
        '"18073b779521b77e3cbc7752dd5c2f63064efe24cec18807e917cd29f31fdf50": no runtime for "nvidia" is configured'
    ),
    "typographic-quotes": (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: "
        "no runtime for \u201cnvidia\u201d is configured"
    ),
}


@pytest.mark.parametrize("message", list(SANDBOX_VARIANTS.values()), ids=list(SANDBOX_VARIANTS))
def test_no_runtime_variants_on_the_validator(message: str) -> None:
    validator = operand(
        "nvidia-operator-validator",
        NODE,
        "l4754",
        phase="Pending",
        statuses=[waiting("nvidia-operator-validator", "PodInitializing")],
        init_statuses=[waiting("driver-validation", "PodInitializing")],
    )
    ev = event(
        ("gpu-operator", "Pod", "nvidia-operator-validator-l4754"),
        "FailedCreatePodSandBox",
        message,
        count=94,
    )
    result = run([gpu_node(NODE), app(), *replace(healthy_operator(NODE), validator), ev])
    f = one(result, "L2_NO_RUNTIME_NVIDIA")
    assert f.evidence[0] == (
        f"gpu-operator/nvidia-operator-validator-l4754: Warning FailedCreatePodSandBox (x94) kubelet: {message}"
    )
    assert f.node == NODE and f.next == 3 and result.next == 3


@pytest.mark.parametrize(
    "message",
    [
        # OpenShift nodes without runc (openshift-kni/numaresources-operator#4979): not the nvidia handler.
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to find runtime handler runc "
        "from runtime list map[crun:0xc0004dd5f0]",
        "failed to find runtime handler nvidia-cdi from runtime list map[nvidia:0xc0004dd5f0]",
        'no runtime for "kata-qemu" is configured',
    ],
)
def test_other_missing_runtime_handlers_are_not_no_runtime_nvidia(message: str) -> None:
    assert not sig.NO_RUNTIME_NVIDIA.matches(message)


APP_VARIANTS = [
    # CUDA samples' deviceQuery.
    "cudaGetDeviceCount returned 100",
    # PyTorch.
    "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: CUDA "
    "driver initialization failed, you might not have a CUDA gpu. (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:108.)",
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver",
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    # TensorFlow / JAX.
    "2026-11-18 10:00:01.123456: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call "
    "to cuInit: UNKNOWN ERROR (303)",
    "E tensorflow/core/common_runtime/gpu/gpu_device.cc:1780] could not retrieve CUDA device count: "
    "CUDA_ERROR_NOT_INITIALIZED: initialization error",
    # vLLM (vllm#8885, #12847, #27318).
    "RuntimeError: Failed to infer device type",
    "DEBUG 10-22 05:47:43 [platforms/__init__.py:99] CUDA platform is not available because: NVML Shared Library "
    "Not Found",
    # nvidia-smi not injected by the toolkit.
    "/bin/sh: 1: nvidia-smi: not found",
    "bash: nvidia-smi: command not found",
]


@pytest.mark.parametrize("line", APP_VARIANTS)
def test_app_sees_no_gpu_variants(line: str) -> None:
    target = app()
    result = run(
        [gpu_node(NODE), target, *healthy_operator(NODE)], logs_for(target, "trainer", f"start\n{line}\n")
    )
    f = one(result, "L2_APP_SEES_NO_GPU")
    assert f.evidence == (f"container trainer: {line}",)
    assert f.severity == Severity.FAULT and f.node == NODE and f.next is None


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
        "    if not torch.cuda.is_available():",
        "INFO 05-14 04:44:37 [cuda.py:240] Using Flash Attention backend on V1 engine.",
        "Found 8 CUDA devices",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "nvidia-smi found 1 GPU(s)",
    ],
)
def test_app_lines_that_see_the_gpu_are_no_finding(line: str) -> None:
    target = app()
    result = run([gpu_node(NODE), target, *healthy_operator(NODE)], logs_for(target, "trainer", f"{line}\n"))
    assert codes(result) == ["L2_OK"]


def test_init_error_between_restarts_is_an_operand_failing() -> None:
    # kubectl shows `Init:Error` while the failed init container waits to be restarted.
    driver = operand(
        "nvidia-driver-daemonset",
        NODE,
        "p97x5",
        phase="Pending",
        ready=False,
        init_statuses=[terminated("k8s-driver-manager", exit_code=1, restarts=3)],
        statuses=[waiting("nvidia-driver-ctr", "PodInitializing")],
    )
    log = "Shutting down all GPU clients on the current node by disabling their component-specific nodeSelector labels\n"
    result = run(
        [gpu_node(NODE), app(), *replace(healthy_operator(NODE), driver)],
        logs_for(driver, "k8s-driver-manager", log, previous=True),
    )
    f = one(result, "L2_OPERAND_FAILING")
    assert "init container k8s-driver-manager is Error (3 restarts)" in f.summary
    assert "terminated: Error (exit code 1)" in f.evidence
    assert f"log: {log.strip()}" in f.evidence


def test_private_registry_and_missing_config_map_say_what_to_check() -> None:
    driver = operand(
        "nvidia-driver-daemonset",
        NODE,
        "7wq2d",
        phase="Pending",
        ready=False,
        init_statuses=[terminated("k8s-driver-manager")],
        statuses=[
            waiting(
                "nvidia-driver-ctr",
                "ImagePullBackOff",
                message='Back-off pulling image "registry.corp.example/nvidia/driver:550.127.05-ubuntu22.04"',
            )
        ],
    )
    plugin = operand(
        "nvidia-device-plugin-daemonset",
        NODE,
        statuses=[
            waiting(
                "nvidia-device-plugin",
                "CreateContainerConfigError",
                message='configmap "time-slicing-config" not found',
            ),
            running("config-manager"),
        ],
    )
    pods = replace(replace(healthy_operator(NODE), driver), plugin)
    result = run([gpu_node(NODE), app(), *pods])
    failing = {f.summary.split(":")[0]: f for f in result.findings if f.code == "L2_OPERAND_FAILING"}
    pull = failing["nvidia-driver-daemonset-7wq2d on gpu-1"]
    assert "pull secret" in pull.summary and any("registry.corp.example" in e for e in pull.evidence)
    cfg = failing["nvidia-device-plugin-daemonset-x7k2p on gpu-1"]
    assert (
        "ConfigMap or Secret" in cfg.summary
        and 'message: configmap "time-slicing-config" not found' in cfg.evidence
    )


def test_evicted_operand_left_behind_is_not_a_problem() -> None:
    evicted = operand("nvidia-dcgm-exporter", NODE, "old01", phase="Failed", ready=False, statuses=[])
    evicted["status"] |= {"reason": "Evicted", "message": "The node was low on resource: ephemeral-storage."}
    result = run([gpu_node(NODE), app(), *healthy_operator(NODE), evicted])
    assert codes(result) == ["L2_OK"]


def test_plugin_validation_waiting_for_capacity_in_logrus_format() -> None:
    # gpu-operator#486: the validator's plugin-validation polls the node's capacity (logrus text format).
    log = "\n".join(
        f'time="2023-02-08T14:19:{s:02d}Z" level=info msg="GPU resources are not yet discovered by the node, '
        f'retry: {r}"'
        for s, r in ((1, 24), (6, 25), (11, 26))
    )
    validator = operand(
        "nvidia-operator-validator",
        "gpu-new",
        "b6thh",
        phase="Pending",
        statuses=[waiting("nvidia-operator-validator")],
        init_statuses=[
            terminated("driver-validation"),
            terminated("toolkit-validation"),
            terminated("cuda-validation"),
            crash_looping("plugin-validation", 4),
        ],
    )
    silent = node("gpu-new", labels={"nvidia.com/gpu.present": "true"})
    pods = replace(healthy_operator("gpu-new", ns="nvidia-gpu-operator"), validator)
    result = run(
        [silent, app(node_name="gpu-new"), *pods],
        logs_for(validator, "plugin-validation", log, previous=True),
    )
    f = one(result, "L2_VALIDATOR_STUCK")
    assert "stopped at plugin-validation" in f.summary and "device plugin has not registered" in f.summary
    assert f.evidence[-1].startswith('plugin-validation log: time="2023-02-08T14:19:11Z" level=info')
    assert f.next is None and f.node == "gpu-new"
    assert sig.strip_prefixes(f.evidence[-1].split(": ", 1)[1]) == (
        "GPU resources are not yet discovered by the node, retry: 26"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("2023-10-19T11:11:54.957723331+08:00 stderr F 2023/10/19 03:11:54 Loading NVML", "Loading NVML"),
        (
            'time="2023-02-08T14:19:01Z" level=info msg="GPU resources are not yet discovered"',
            "GPU resources are not yet discovered",
        ),
        (
            'time="2024-01-01T00:00:00Z" level=error msg="toolkit is not ready" err="exit status 1"',
            'toolkit is not ready err="exit status 1"',
        ),
        ("\x1b[32mI1118 10:00:00.1 1 main.go:1] ready\x1b[0m", "ready"),
    ],
)
def test_strip_prefixes_of_cri_logrus_and_colour(line: str, message: str) -> None:
    assert sig.strip_prefixes(line) == message
