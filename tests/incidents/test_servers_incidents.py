"""Issue 18's inference-server, layer 2 and layer 5 incidents (tests/incidents/servers/), walked end to end.

Each file is a complete scenario built by servers/build.py on a 20-node, three-pool fleet with sick
nodes elsewhere; its `x-expect` (from spec/findings.md, written before gpubot ran) is checked like
the bundled scenarios', then what a person reads: which server was recognised and why, what to
scrape, the refused library, the unhealthy device, the Xid that is history.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.test_bundled_scenarios as bundled
from bot.sources.scenario import build_sources, load_scenario
from layers.facts.context import Settings
from layers.findings import Severity
from layers.walk import open_node, open_pod, run, run_layer
from tests.incidents.fleets import uuid_of
from tests.incidents.scenario_checks import Incidents, check_structure, names, names_elsewhere

SERVERS = Incidents("servers")


def _stem(part: str) -> str:
    [stem] = [s for s in SERVERS.ids if part in s]
    return stem


def test_ten_incidents_with_names_of_their_own() -> None:
    assert len(SERVERS.files) >= 10
    mine = names(SERVERS.files)
    assert len(mine) == len(SERVERS.files) and not mine & names_elsewhere("l12", "l3", "l45", "probe7")


@pytest.mark.parametrize("path", SERVERS.files, ids=SERVERS.ids)
def test_structure(path: Path) -> None:
    check_structure(path)


@pytest.mark.parametrize("path", SERVERS.files, ids=SERVERS.ids)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


# --- item 2: every inference server, its own overload signal --------------------------------------


def test_nim_image_is_a_reservation_and_says_what_to_scrape() -> None:
    stem = _stem("nim-llama")
    [ok] = SERVERS.findings(stem, "L4_FB_RESERVED_NORMAL")
    assert "NIM's up-front reservation" in ok.summary and ok.severity == Severity.INFO
    assert any("NIM image 'nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4'" in e for e in ok.evidence)
    [u] = SERVERS.findings(stem, "L4_UNKNOWN")
    assert u.summary.startswith("NIM overload") and "scrape the NIM's metrics endpoint" in u.summary
    assert not SERVERS.findings(stem, "L4_FB_SATURATED")


def test_sglang_mem_fraction_static_with_a_quiet_queue_is_normal() -> None:
    stem = _stem("sglang-mem-fraction")
    found = SERVERS.findings(stem, "L4_FB_RESERVED_NORMAL")
    assert len(found) == 2  # both GPUs of the TP-2 server
    assert all("SGLang's up-front reservation" in f.summary for f in found)
    assert all("no retractions and a queue that empties: normal" in f.summary for f in found)
    assert any("mem_fraction_static = 0.9 (container main's args)" in e for e in found[0].evidence)


def test_vllm_started_by_a_configmap_script_is_recognised_through_it() -> None:
    stem = _stem("sh-c-start-sh")
    [ok] = SERVERS.findings(stem, "L4_FB_RESERVED_NORMAL")
    assert any(
        "runs '/opt/serve/start.sh', a script from ConfigMap assist/qwen-serve-scripts (key start.sh) that starts vLLM"
        in e
        for e in ok.evidence
    ), ok.evidence
    [u] = SERVERS.findings(stem, "L4_UNKNOWN")
    assert u.summary.startswith("vLLM preemptions of assist/qwen-32b-serve-0 could not be checked")


def test_the_script_is_what_makes_it_a_server() -> None:
    """Positive control: the same pod without its ConfigMap is a workload at the ceiling."""
    path = SERVERS.path(_stem("sh-c-start-sh"))
    scenario = load_scenario(path)
    scenario.objects[:] = [o for o in scenario.objects if o.get("kind") != "ConfigMap"]
    cluster, tel = build_sources(scenario)
    result = run_layer(open_pod(cluster, tel, "assist", "qwen-32b-serve-0"), 4)
    assert [f.code for f in result.findings] == ["L4_FB_SATURATED"]


def test_sglang_retractions_are_its_preemptions() -> None:
    stem = _stem("retractions")
    [f] = SERVERS.findings(stem, "L4_RETRACTIONS")
    assert f.severity == Severity.FAULT and "--mem-fraction-static" in f.summary
    assert any(e.startswith("rate(sglang:num_retracted_requests_total{") for e in f.evidence)


def test_tgi_queue_that_never_empties_is_a_full_server() -> None:
    stem = _stem("tgi-queue")
    [f] = SERVERS.findings(stem, "L4_QUEUE_BACKLOG")
    assert f.evidence == ('min_over_time(tgi_queue_size{namespace="chat",pod="tgi-mistral-7b-0"}[5m]) = 24',)
    [ok] = SERVERS.findings(stem, "L4_FB_RESERVED_NORMAL")
    assert "TGI's up-front reservation" in ok.summary
    assert any("cuda_memory_fraction = 0.97" in e for e in ok.evidence)


def test_a_node_walk_judges_the_tgi_gpu_against_its_pod() -> None:
    cluster, tel = build_sources(load_scenario(SERVERS.path(_stem("tgi-queue"))))
    result = run_layer(open_node(cluster, tel, "l40s-viz-01"), 4)
    assert sorted(f.code for f in result.findings) == ["L4_FB_RESERVED_NORMAL", "L4_QUEUE_BACKLOG"]


# --- item 3: a wrong GPUBOT_OPERATOR_NAMESPACE ---------------------------------------------------


def test_wrong_operator_namespace_names_where_the_operator_runs() -> None:
    cluster, tel = build_sources(load_scenario(SERVERS.path(_stem("no-validator"))))
    ctx = open_pod(cluster, tel, "research", "llm-eval-3", Settings(operator_namespace="nvidia-gpu-operator"))
    result = run(ctx)
    [f] = [f for lr in result.layers for f in lr.findings if f.code == "L2_OPERATOR_NOT_FOUND"]
    assert "install the GPU Operator" not in f.summary
    assert "namespace nvidia-gpu-operator" in f.summary and "they run in gpu-operator" in f.summary
    assert "GPUBOT_OPERATOR_NAMESPACE=gpu-operator" in f.summary
    assert any(e.startswith("operator pods in namespace gpu-operator: gpu-operator-") for e in f.evidence)


# --- items 7 and 8 --------------------------------------------------------------------------------


def test_libcuda_mount_failure_names_the_driver_and_goes_to_layer_3() -> None:
    stem = _stem("libcuda-570")
    [f] = SERVERS.findings(stem, "L2_CONTAINER_START_FAILED")
    assert f.next == 3 and "/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01" in f.summary
    assert "regenerate the node's CDI spec" in f.summary
    result, _ = bundled.diagnose(SERVERS.path(stem))
    assert result.layers[1].status == Severity.FAULT and result.layers[1].next == 3


def test_operator_device_plugin_is_not_called_standalone() -> None:
    [ok] = SERVERS.findings(_stem("no-validator"), "L2_OK")
    assert "standalone" not in ok.summary
    assert "the GPU Operator's operand" in ok.summary and "no nvidia-operator-validator pod" in ok.summary


def test_allocated_resources_status_unhealthy_names_that_device_only() -> None:
    node = "h100-infer-06"
    [f] = SERVERS.findings(_stem("allocated-resources"), "L5_DEVICE_UNHEALTHY")
    assert uuid_of(node, 2) in f.summary and uuid_of(node, 3) not in f.summary
    assert any(uuid_of(node, 3) in e and "health=Unknown" in e for e in f.evidence)


def test_pending_row_remap_is_its_own_warning() -> None:
    [f] = SERVERS.findings(_stem("row-remap-pending"), "L5_ROW_REMAP_PENDING")
    assert f.severity == Severity.WARN and "wait for a GPU reset" in f.summary
    assert f.evidence == ('DCGM_FI_DEV_ROW_REMAP_PENDING{Hostname="a100-train-02",gpu="6"} = 1',)


def test_old_xid_stays_history_after_the_exporter_relabels_its_series() -> None:
    [f] = SERVERS.findings(_stem("xid48-history"), "L5_XID")
    assert f.severity == Severity.INFO
    assert f.summary.startswith(
        f"last Xid 48 on h100-infer-01 ({uuid_of('h100-infer-01', 1)}), before the last 24 h"
    )
