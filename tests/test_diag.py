"""DCGM diagnostics: `dcgmi diag -j` of every status, every refusal, the Job, and a run through the
fake Kubernetes API with the real client (created, pod phases, log, deadline exceeded,
unschedulable, deleted mid-run), cleaned up every time and written to the ledger."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions.diag import DiagPlan, plan, record, run
from bot.actions.diag_kube import KubeJobs
from bot.cli.main import main
from bot.ledger.store import Ledger, MemoryBackend
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, load_scenario
from layers.diaggpus import gpu_ask
from layers.diagjob import (
    DiagRefused,
    HostEngine,
    confirmation,
    hostengine_for,
    job_manifest,
    refusal,
)
from layers.facts.dcgmdiag import DiagOutputError, parse_diag, read_job_log, result_lines
from tests import ledger_fleets as lf
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.incidents.fleets import uuid_of

DATA = Path(__file__).parent / "dcgm_diag"
NS = "gpubot"
IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"


def fixture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


GPUS = 4  # the node's GPUs: as many as the fixtures' results cover


def listing(uuids: list[str]) -> str:
    """`dcgmi discovery -l` as DCGM prints it (dcgmi/Discovery.cpp), between the Job's marks."""
    rule = "+--------+----------------------------------------------------------------------+"
    rows = [f"{len(uuids)} GPUs found.", rule, "| GPU ID | Device Information" + " " * 53 + "|", rule]
    for i, uuid in enumerate(uuids):
        rows += [
            f"| {i:<6} | {'Name: NVIDIA A100-SXM4-80GB':<68} |",
            f"|        | {f'PCI Bus ID: 00000000:{7 + i:02X}:00.0':<68} |",
            f"|        | {f'Device UUID: {uuid}':<68} |",
            rule,
        ]
    rows += ["0 NvSwitches found.", "+-----------+", "| Switch ID |", "+-----------+", "+-----------+"]
    return "gpubot-gpus-begin\n" + "\n".join(rows) + "\ngpubot-gpus-end\n"


def job_log(name: str, code: int = 0, uuids: list[str] | None = None) -> str:
    """What the Job's container prints: the GPUs it was given as dcgmi lists them, dcgmi's JSON, then
    its exit status on a line of its own."""
    gpus = [uuid_of(lf.NODE, i) for i in range(GPUS)] if uuids is None else uuids
    return listing(gpus) + fixture(name) + f"\ngpubot-dcgmi-exit={code}\n"


# --- dcgmi diag -j, every status ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "verdict", "counts"),
    [
        ("r1_pass.json", "Pass", {"Pass": 36, "Skip": 4}),
        ("r2_memory_fail_gpu3.json", "Fail", {"Pass": 47, "Fail": 1}),
        ("r2_memory_skip_ecc_off.json", "Pass", {"Pass": 44, "Skip": 4}),
        ("r3_warn_and_remap_pending.json", "Fail", {"Pass": 62, "Warn": 1, "Fail": 1}),
        ("runtime_error.json", "Fail", {}),
        ("legacy_3_2_per_gpu.json", "Fail", {"Pass": 14, "Skip": 1, "Fail": 1}),
    ],
)
def test_every_status_is_read(name: str, verdict: str, counts: dict[str, int]) -> None:
    rep = parse_diag(fixture(name))
    assert rep.verdict == verdict
    assert rep.counts == counts


def test_failed_memory_test_names_the_gpu_and_dcgms_warning() -> None:
    rep = read_job_log(job_log("r2_memory_fail_gpu3.json", 226))
    assert rep.exit_code == 226 and rep.version == "4.6.0" and rep.serials[3] == "1652022017884"
    (failed,) = rep.failed
    assert (failed.test, failed.category, failed.entity, failed.status) == ("memory", "Hardware", 3, "Fail")
    assert failed.warnings[0].error_id == 52
    head, lines, rest = result_lines(rep, {3: "GPU 3 (GPU-abc)"})
    assert head == "DCGM diagnostic: Fail (DCGM 4.6.0)"
    assert lines == [
        "Fail: memory (Hardware) on GPU 3 (GPU-abc): Found 6 faulty memory elements on GPU 3 (error_id 52)"
    ]
    assert rest == "the rest: 47 pass (test results per GPU)"


def test_runtime_error_is_said() -> None:
    _, lines, _ = result_lines(parse_diag(fixture("runtime_error.json")))
    assert lines[0].startswith("DCGM could not run the diagnostic: Error: unable to establish a connection")


@pytest.mark.parametrize(
    ("log", "said"),
    [
        ("", "printed no JSON"),
        ("Error: unable to connect to host engine\ngpubot-dcgmi-exit=-1\n", "dcgmi exited -1"),
        ("{not json}\ngpubot-dcgmi-exit=0", "does not parse"),
        ('{"other": 1}\n', "no 'DCGM Diagnostic' object"),
    ],
)
def test_a_log_without_the_json_is_one_clear_error(log: str, said: str) -> None:
    with pytest.raises(DiagOutputError, match=said.replace("(", r"\(")):
        read_job_log(log)


# --- the fleet, refusals and the Job ------------------------------------------------------------


def build_fleet(tmp_path: Path, mutate: Callable[[lf.Fleet], None] | None = None) -> Path:
    f = lf.fleet("diag-fleet")
    f.gpu_series(lf.NODE, "a100", GPUS)
    node = f.node(lf.NODE)
    for part in ("capacity", "allocatable"):
        node["status"][part]["nvidia.com/gpu"] = str(GPUS)
    node["spec"]["unschedulable"] = True  # diagnosing a cordoned node is the usual case
    node["spec"]["taints"] = [
        {
            "key": "node.kubernetes.io/unschedulable",
            "effect": "NoSchedule",
            "timeAdded": "2026-11-29T09:00:00Z",
        },
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "pool", "effect": "NoExecute"},
    ]
    if mutate is not None:
        mutate(f)
    return lf.write(f, tmp_path)


def snapshot(path: Path) -> Any:
    snap, telemetry = build_sources(load_scenario(path))
    return snap, telemetry


def plan_on(snap: Any, level: int = 2, confirmed: int = 1, jobs: Any = None, **kw: Any) -> DiagPlan:
    return plan(
        snap,
        jobs,
        lf.NODE,
        level,
        namespace=NS,
        image=IMAGE,
        requested_by="U0OPS",
        confirmed=confirmed,
        suffix="abc123",
        **kw,
    )


def test_the_job_as_the_spec_says(tmp_path: Path) -> None:
    snap, _ = snapshot(build_fleet(tmp_path))
    p = plan_on(snap, level=2)
    job = p.manifest
    spec = job["spec"]["template"]["spec"]
    assert (
        job["metadata"]["namespace"] == NS and job["metadata"]["name"] == "gpubot-diag-a100-train-03-abc123"
    )
    assert "nodeName" not in spec
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [lf.NODE]}]}]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": str(GPUS)}
    assert spec["containers"][0]["image"] == IMAGE
    tols = spec["tolerations"]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in tols
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in tols
    assert {"key": "pool", "operator": "Exists", "effect": "NoExecute"} in tols
    assert job["spec"]["activeDeadlineSeconds"] == 1200 and job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert job["spec"]["backoffLimit"] == 0 and spec["restartPolicy"] == "Never"
    assert "dcgmi diag -r 2 -j" in spec["containers"][0]["command"][2]
    assert "nv-hostengine -n" in spec["containers"][0]["command"][2]  # the embedded default: its own
    assert [
        plan_on(snap, level=n, confirmed=2).manifest["spec"]["activeDeadlineSeconds"] for n in (1, 3)
    ] == [600, 3600]


def test_standalone_dcgm_is_reached_with_host(tmp_path: Path) -> None:
    policy = {"spec": {"dcgm": {"enabled": True}}, "status": {"namespace": "gpu-operator"}}
    engine = hostengine_for([policy], None, None)
    assert engine == HostEngine("nvidia-dcgm.gpu-operator.svc:5555")
    snap, _ = snapshot(build_fleet(tmp_path))
    node = snap.get_node(lf.NODE)
    job = job_manifest(node, 1, namespace=NS, image=IMAGE, name="j", requested_by="U", hostengine=engine)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script.startswith(
        "echo gpubot-gpus-begin; dcgmi discovery --host nvidia-dcgm.gpu-operator.svc:5555 -l; "
        "echo gpubot-gpus-end; dcgmi diag --host nvidia-dcgm.gpu-operator.svc:5555 -r 1 -j"
    )
    assert "nv-hostengine" not in script
    ask = gpu_ask(node, {}, {})
    assert ask is not None and ask.units == GPUS
    assert "no second host engine" in confirmation(lf.NODE, 1, ask, engine)
    embedded = confirmation(lf.NODE, 2, ask, HostEngine(None))
    assert (
        "second host engine" in embedded and "DCGM_FI_PROF_" in embedded and "about two minutes" in embedded
    )
    assert hostengine_for([policy], None, "10.0.0.7:5555").address == "10.0.0.7:5555"
    assert not hostengine_for([{"spec": {"dcgm": {"enabled": False}}}], None, None).standalone


def _workload(f: lf.Fleet) -> None:
    f.running_pod("trainer-0", "ml", lf.NODE, 8)


def _daemonset_gpu_pod(f: lf.Fleet) -> None:
    # A DaemonSet's pod holding a GPU (a node agent) is no workload: not a reason to refuse.
    f.running_pod("gpu-agent-x7k2p", "monitoring", lf.NODE, 1)
    pod = f.objects[-1]
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-agent", "uid": "u1", "controller": True}
    ]


def _finished_workload(f: lf.Fleet) -> None:
    f.running_pod("done-0", "ml", lf.NODE, 8)
    f.objects[-1]["status"]["phase"] = "Succeeded"


def _labels(**labels: str) -> Callable[[lf.Fleet], None]:
    return lambda f: f.node(lf.NODE)["metadata"]["labels"].update(labels)


@pytest.mark.parametrize(
    ("mutate", "level", "confirmed", "refused"),
    [
        (_workload, 2, 1, "1 pod(s) hold GPUs on a100-train-03 (ml/trainer-0)"),
        (_daemonset_gpu_pod, 2, 1, None),
        (_finished_workload, 2, 1, None),
        (_labels(**{"nvidia.com/mig.config": "all-1g.10gb"}), 2, 1, "MIG-partitioned"),
        (
            _labels(**{"nvidia.com/gpu-driver-upgrade-state": "drain-required"}),
            2,
            1,
            "GPUs are being reconfigured",
        ),
        (
            # the upgrade gave up: a person must act and diagnostics help (the owners' table)
            _labels(**{"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}),
            2,
            1,
            None,
        ),
        (_labels(**{"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}), 2, 1, None),
        (_labels(**{"dgxc.nvidia.com/nvsentinel-state": "remediating"}), 2, 1, "NVSentinel is repairing"),
        (None, 3, 1, "needs a second confirmation"),
        (None, 3, 2, None),
        (None, 4, 2, "level 4 is not offered"),
    ],
)
def test_every_refusal(
    tmp_path: Path, mutate: Callable[[lf.Fleet], None] | None, level: int, confirmed: int, refused: str | None
) -> None:
    snap, _ = snapshot(build_fleet(tmp_path, mutate))
    if refused is None:
        assert plan_on(snap, level=level, confirmed=confirmed).level == level
    else:
        with pytest.raises(DiagRefused, match=refused.replace("(", r"\(").replace(")", r"\)")):
            plan_on(snap, level=level, confirmed=confirmed)


def test_no_allocatable_gpu_in_embedded_mode_is_refused(tmp_path: Path) -> None:
    def all_lost(f: lf.Fleet) -> None:
        f.node(lf.NODE)["status"]["allocatable"]["nvidia.com/gpu"] = "0"

    snap, _ = snapshot(build_fleet(tmp_path, all_lost))
    node = snap.get_node(lf.NODE)
    assert "no allocatable GPU" in (refusal(node, [], 1, confirmed=1) or "")
    assert (
        refusal(node, [], 1, confirmed=1, hostengine=HostEngine("nvidia-dcgm.gpu-operator.svc:5555")) is None
    )


# --- through the fake API -------------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeKubeAPI]:
    snap, _ = snapshot(build_fleet(tmp_path))
    with serve(snap) as api:
        yield api


def _kube(api: FakeKubeAPI) -> tuple[KubeCluster, KubeJobs]:
    k = KubeCluster.from_config(api.kubeconfig)
    return k, KubeJobs(k.api_client, k.server)


def _driven(steps: list[Callable[[], None]]) -> Callable[[float], None]:
    """A `sleep` that plays the cluster's next move each time the runner waits."""

    def sleep(_: float) -> None:
        if steps:
            steps.pop(0)()

    return sleep


def test_a_run_creates_reads_cleans_up_and_records(fake: FakeKubeAPI) -> None:
    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs)
    ctl = fake.jobs
    steps = [
        lambda: ctl.start(NS, p.manifest["metadata"]["name"]),
        lambda: ctl.succeed(NS, p.manifest["metadata"]["name"], job_log("r2_memory_fail_gpu3.json", 226)),
    ]
    out = run(k, jobs, p, poll_s=0, sleep=_driven(steps))
    assert out.failure is None and out.report is not None and out.report.verdict == "Fail"
    assert json.loads(out.raw)["metadata"]["version"] == "4.6.0"
    # Created once as planned, deleted with its pod (propagation Background), nothing left.
    assert len(ctl.created) == 1 and ctl.created[0]["spec"] == p.manifest["spec"]
    assert ctl.deleted == [p.manifest["metadata"]["name"]]
    assert fake.snapshot.stored("batch", "Job") == [] and ctl.pods(NS, p.manifest["metadata"]["name"]) == []
    delete = next(r for r in fake.requests if r.method == "DELETE")
    assert delete.query.get("propagationPolicy") == "Background"
    ledger = Ledger(MemoryBackend(), 90)
    assert out.tested == {i: uuid_of(lf.NODE, i) for i in range(GPUS)} and out.untested == []
    record(ledger, out, "U0OPS", 1_795_953_600.0)
    events, gpus = ledger.read(lf.NODE, now=1_795_953_600.0)
    diag = {e.gpu: e for e in events if e.kind == "diag"}
    assert (
        diag[uuid_of(lf.NODE, 3)].detail == "level 2: memory Fail"
        and diag[uuid_of(lf.NODE, 0)].detail == "level 2: Pass"
    )
    assert gpus[uuid_of(lf.NODE, 3)].serial == "1652022017884"


def test_a_second_diagnostic_on_the_node_is_refused_while_one_runs(fake: FakeKubeAPI) -> None:
    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs)
    jobs.create_job(NS, p.manifest)
    with pytest.raises(DiagRefused, match="already runs on a100-train-03"):
        plan_on(k, jobs=jobs)


def test_deadline_exceeded_is_said_and_cleaned_up(fake: FakeKubeAPI) -> None:
    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs, level=1)
    name = p.manifest["metadata"]["name"]
    out = run(
        k,
        jobs,
        p,
        poll_s=0,
        sleep=_driven([lambda: fake.jobs.start(NS, name), lambda: fake.jobs.deadline_exceeded(NS, name)]),
    )
    assert out.report is None and out.failure is not None
    assert "past its deadline of 10 minutes (level 1)" in out.failure
    assert fake.jobs.deleted == [name]


def test_unschedulable_is_said_with_the_schedulers_reason(fake: FakeKubeAPI) -> None:
    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs)
    name = p.manifest["metadata"]["name"]
    msg = "0/20 nodes are available: 1 Insufficient nvidia.com/gpu, 19 node(s) didn't match Pod's node affinity/selector."
    ticks = iter(range(0, 10_000, 60))
    out = run(
        k,
        jobs,
        p,
        poll_s=0,
        unschedulable_grace_s=120,
        clock=lambda: float(next(ticks)),
        sleep=_driven([lambda: fake.jobs.unschedulable(NS, name, msg)]),
    )
    assert out.failure == f"the diagnostic's pod cannot be scheduled on {lf.NODE}: {msg}"
    assert fake.jobs.deleted == [name] and fake.snapshot.stored("batch", "Job") == []


def test_deleted_mid_run_is_said(fake: FakeKubeAPI) -> None:
    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs)
    name = p.manifest["metadata"]["name"]
    out = run(
        k,
        jobs,
        p,
        poll_s=0,
        sleep=_driven([lambda: fake.jobs.start(NS, name), lambda: fake.jobs.delete(NS, name)]),
    )
    assert out.failure is not None and "was deleted while it ran" in out.failure
    assert not out.notes  # the cleanup's 404 is no error


def test_a_refused_create_is_a_source_error(fake: FakeKubeAPI) -> None:
    from layers.sources import SourceError

    k, jobs = _kube(fake)
    p = plan_on(k, jobs=jobs)
    fake.fail(r"/jobs$", status=403, method="POST")
    with pytest.raises(SourceError) as err:
        run(k, jobs, p, poll_s=0)
    assert err.value.kind == "forbidden" and "create" in str(err.value)


# --- the CLI ----------------------------------------------------------------------------------------


def test_diag_dry_run_json_on_a_bundled_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["diag", "gpu-node-1", "--scenario", "xid79-fell-off-bus", "--dry-run", "--format", "json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"node", "level", "job"} and doc["job"]["kind"] == "Job" and doc["level"] == 1


def test_diag_refused_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diag", "dgx-a100-07", "--scenario", "xid48-dbe-row-remap-failure", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "hold GPUs" in err


def test_diag_is_off_unless_enabled(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUBOT_DIAG_ENABLED", raising=False)
    assert main(["diag", "gpu-node-1", "--scenario", "xid79-fell-off-bus"]) == 2
    assert "GPUBOT_DIAG_ENABLED=true" in capsys.readouterr().err
    monkeypatch.setenv("GPUBOT_DIAG_ENABLED", "true")
    assert main(["diag", "gpu-node-1", "--scenario", "xid79-fell-off-bus"]) == 2
    assert "--dry-run" in capsys.readouterr().err
    monkeypatch.setenv("GPUBOT_DIAG_ENABLED", "yes")
    assert main(["diag", "gpu-node-1", "--scenario", "xid79-fell-off-bus", "--dry-run"]) == 2
    assert "GPUBOT_DIAG_ENABLED must be true or false" in capsys.readouterr().err
