"""The bundled incident scenarios (bot/scenarios/*.yaml).

Each file is a realistic incident built from tests/fixtures/samples with its expected
diagnosis under `x-expect`. Two kinds of tests:

- structure: the file follows spec/scenario.md and is self-consistent (events
  point at objects that exist, logs at real containers, operands carry the
  operator's labels and container names). Plain YAML (libyaml's safe loader
  when present), not the product's loader: these keep guarding the files
  whatever state the product code is in.
- diagnosis: the product's loader and walk give what `x-expect` says (layers
  visited, verdict, codes present, codes absent), and together the files use
  every finding code of the registry.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from layers.findings import CODES, STOP

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "bot" / "scenarios"
FILES = sorted(SCENARIO_DIR.glob("*.yaml"))
IDS = [p.stem for p in FILES]

TOP_LEVEL = {"kind", "name", "description", "now", "objects", "logs", "metrics", "exposition"}
EXPECT_KEYS = {"target", "walk", "verdict", "codes", "all_codes", "absent"}
KNOWN_KINDS = {
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Event"),
    ("v1", "ConfigMap"),
    ("apps/v1", "DaemonSet"),
    ("nvidia.com/v1", "ClusterPolicy"),
    ("nvidia.com/v1alpha1", "NVIDIADriver"),
    ("nvidia.com/v1", "NVIDIADriver"),
    ("node.k8s.io/v1", "RuntimeClass"),
    # Dynamic Resource Allocation (Kubernetes 1.34) and the NVIDIA DRA driver / GPUCluster objects.
    ("resource.k8s.io/v1", "DeviceClass"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1alpha3", "DeviceTaintRule"),
    ("resource.k8s.io/v1beta1", "DeviceClass"),
    ("resource.k8s.io/v1beta1", "ResourceSlice"),
    ("resource.k8s.io/v1beta1", "ResourceClaim"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplate"),
    ("resource.nvidia.com/v1beta1", "ComputeDomain"),
    ("nvidia.com/v1alpha1", "GPUCluster"),
    # A pending pod's volumes and a Kueue-gated pod's Workload (issue 18).
    ("v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume"),
    ("kueue.x-k8s.io/v1beta1", "Workload"),
}
# Operand `app` label -> the containers the GPU Operator gives it (assets/*/0500_daemonset.yaml).
OPERAND_CONTAINERS: dict[str, tuple[set[str], set[str]]] = {
    "nvidia-driver-daemonset": ({"k8s-driver-manager"}, {"nvidia-driver-ctr"}),
    "nvidia-container-toolkit-daemonset": ({"driver-validation"}, {"nvidia-container-toolkit-ctr"}),
    "nvidia-device-plugin-daemonset": ({"toolkit-validation"}, {"nvidia-device-plugin"}),
    "gpu-feature-discovery": ({"toolkit-validation"}, {"gpu-feature-discovery"}),
    "nvidia-dcgm-exporter": ({"toolkit-validation"}, {"nvidia-dcgm-exporter"}),
    "nvidia-operator-validator": (
        {"driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"},
        {"nvidia-operator-validator"},
    ),
    "nvidia-cuda-validator": ({"cuda-validation"}, {"nvidia-cuda-validator"}),
    "nvidia-mig-manager": ({"toolkit-validation"}, {"nvidia-mig-manager"}),
}
LOG_KEY = re.compile(
    r"^(?P<ns>[a-z0-9-]+)/(?P<pod>[a-z0-9.-]+)/(?P<container>[a-z0-9-]+)(?P<prev>#previous)?$"
)
EXPOSITION_LINE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\} -?[0-9.eE+]+$'
)
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


# libyaml reads the same documents as the pure-Python SafeLoader, six times faster.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, mtime_ns: int, size: int) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)


def read(path: Path) -> dict[str, Any]:
    """The file's document, a copy of its own: the checks of one file read it several times in a row."""
    stat = path.stat()
    data = copy.deepcopy(_parsed(path, stat.st_mtime_ns, stat.st_size))
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    return data


def kinds(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for o in data.get("objects") or [] if o.get("kind") == kind]


def pods_by_key(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in kinds(data, "Pod")}


def container_names(pod: dict[str, Any]) -> set[str]:
    spec = pod.get("spec") or {}
    return {c["name"] for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])}


def expect(data: dict[str, Any]) -> dict[str, Any]:
    return data["x-expect"]


# --- structure ------------------------------------------------------------------


def test_at_least_eighteen_bundled_scenarios() -> None:
    assert len(FILES) >= 18, [p.name for p in FILES]


def test_scenario_names_are_unique() -> None:
    names = [read(p)["name"] for p in FILES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_top_level_follows_the_scenario_format(path: Path) -> None:
    data = read(path)
    extra = {k for k in data if not k.startswith("x-")} - TOP_LEVEL
    assert not extra, f"unknown top-level keys {extra}"
    assert data["kind"] == "Scenario"
    assert data["name"] == path.stem
    # Each description says which real-world sample(s) it is built from (or that it is the control case).
    assert re.search(r"sample|control case", data["description"]), data["description"]
    assert RFC3339_Z.match(str(data["now"])), data["now"]
    datetime.fromisoformat(str(data["now"]).replace("Z", "+00:00"))
    for obj in data["objects"]:
        assert (obj.get("apiVersion"), obj.get("kind")) in KNOWN_KINDS, (
            obj.get("apiVersion"),
            obj.get("kind"),
        )
        assert obj["metadata"]["name"]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_objects_are_consistent(path: Path) -> None:
    data = read(path)
    nodes = {n["metadata"]["name"]: n for n in kinds(data, "Node")}
    assert nodes, "a scenario without nodes"
    for n in nodes.values():
        status = n["status"]
        assert {"capacity", "allocatable", "nodeInfo", "conditions"} <= set(status), n["metadata"]["name"]
        assert "kernelVersion" in status["nodeInfo"] and "osImage" in status["nodeInfo"]
    pods = pods_by_key(data)
    assert len(pods) == len(kinds(data, "Pod")), "duplicate pod names"
    for (ns, name), pod in pods.items():
        bound = pod["spec"].get("nodeName")
        if bound:
            assert bound in nodes, f"{ns}/{name} is bound to unknown node {bound}"
        else:
            assert pod["status"]["phase"] == "Pending", f"{ns}/{name}"
            cond = {c["type"]: c for c in pod["status"]["conditions"]}
            # A pod held by spec.schedulingGates is never tried: the API server says SchedulingGated.
            reason = "SchedulingGated" if pod["spec"].get("schedulingGates") else "Unschedulable"
            assert cond["PodScheduled"]["status"] == "False" and cond["PodScheduled"]["reason"] == reason
    for ev in kinds(data, "Event"):
        inv = ev["involvedObject"]
        if inv["kind"] == "Pod":
            assert (inv["namespace"], inv["name"]) in pods, f"event for a missing pod {inv}"
        elif inv["kind"] == "Node":
            assert inv["name"] in nodes and "namespace" not in inv, inv
    for cp in kinds(data, "ClusterPolicy"):
        assert cp["apiVersion"] == "nvidia.com/v1" and cp["metadata"]["name"] == "cluster-policy"
    for rc in kinds(data, "RuntimeClass"):
        assert rc["metadata"]["name"] == "nvidia" and rc["handler"] == "nvidia"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_operands_look_like_the_gpu_operators(path: Path) -> None:
    data = read(path)
    for pod in kinds(data, "Pod"):
        labels = pod["metadata"].get("labels") or {}
        app = labels.get("app")
        if labels.get("app.kubernetes.io/component") == "nvidia-driver":
            assert "nvidia-driver-ctr" in container_names(pod)
            continue
        if app not in OPERAND_CONTAINERS:
            continue
        init, main = OPERAND_CONTAINERS[app]
        spec = pod["spec"]
        assert init <= {c["name"] for c in spec.get("initContainers") or []}, pod["metadata"]["name"]
        assert main <= {c["name"] for c in spec["containers"]}, pod["metadata"]["name"]
        assert pod["metadata"]["name"].startswith(app + "-")
        assert spec.get("nodeName"), f"operand {pod['metadata']['name']} is not on a node"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_logs_belong_to_real_containers(path: Path) -> None:
    data = read(path)
    pods = pods_by_key(data)
    for key, text in (data.get("logs") or {}).items():
        m = LOG_KEY.match(key)
        assert m, f"bad log key {key!r}"
        pod = pods.get((m["ns"], m["pod"]))
        assert pod is not None, f"log for a missing pod: {key}"
        assert m["container"] in container_names(pod), f"log for a missing container: {key}"
        assert isinstance(text, str) and text.strip()


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_series_have_history_in_order(path: Path) -> None:
    data = read(path)
    for series in data.get("metrics") or []:
        labels = series["metric"]
        assert labels.get("__name__")
        if labels["__name__"].startswith("DCGM_"):
            assert {"gpu", "UUID", "modelName"} <= set(labels), labels
            assert "Hostname" in labels or "hostname" in labels, labels
        times = [t for t, _ in series["values"]]
        assert all(isinstance(t, int) and t <= 0 for t in times), times
        assert times == sorted(set(times)), times
        assert -86400 not in times, "a sample exactly 24 h old sits on the window's edge"
    for line in (data.get("exposition") or "").splitlines():
        if line and not line.startswith("#"):
            assert EXPOSITION_LINE.match(line), line


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_expectations_are_well_formed(path: Path) -> None:
    data = read(path)
    exp = expect(data)
    assert set(exp) <= EXPECT_KEYS and {"target", "walk", "verdict", "codes"} <= set(exp), exp
    ns, _, name = exp["target"].partition("/")
    assert (ns, name) in pods_by_key(data), f"target {exp['target']} is not in the scenario"
    walk = exp["walk"]
    assert walk[0] == 1 and len(set(walk)) == len(walk) and set(walk) <= {1, 2, 3, 4, 5}, walk
    for key in ("codes", "all_codes", "absent"):
        unknown_codes = set(exp.get(key) or []) - set(CODES)
        assert not unknown_codes, f"{key}: {unknown_codes}"
    for code in exp["codes"]:
        assert CODES[code].layer in walk, f"{code} cannot appear: layer not walked"
    assert not set(exp["codes"]) & set(exp.get("absent") or [])
    if exp["verdict"] is not None:
        assert exp["verdict"] in exp["codes"]
    # Each step follows spec `next`: the following layer, or a jump some expected code names;
    # a walk that ends before layer 5 needs an expected code that stops it.
    for here, there in itertools.pairwise(walk):
        named = {CODES[c].next for c in exp["codes"] if CODES[c].layer == here} - {None, STOP}
        assert there == here + 1 or there in named, f"nothing sends layer {here} to {there}"
    if walk[-1] != 5:
        assert STOP in {CODES[c].next for c in exp["codes"] if CODES[c].layer == walk[-1]}, (
            "nothing stops the walk"
        )


def test_expected_codes_cover_every_finding_code() -> None:
    used: set[str] = set()
    for path in FILES:
        exp = expect(read(path))
        used |= set(exp["codes"]) | set(exp.get("all_codes") or [])
    wanted = {c for c in CODES if not c.endswith("_UNKNOWN")}
    assert not wanted - used, f"codes no bundled scenario exercises: {sorted(wanted - used)}"


# --- diagnosis ------------------------------------------------------------------


def diagnose(path: Path, all_layers: bool = False) -> tuple[Any, dict[str, Any]]:
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    scenario = load_scenario(path)
    cluster, telemetry = build_sources(scenario)
    exp = scenario.extra["x-expect"]
    ns, _, name = exp["target"].partition("/")
    return walk(cluster, telemetry, ns, name, all_layers=all_layers), exp


def found(result: Any) -> list[str]:
    return [f.code for layer in result.layers for f in layer.findings]


def explain(result: Any) -> str:
    lines = []
    for layer in result.layers:
        lines.append(f"layer {layer.layer}: {layer.status.label}, next {layer.next}")
        lines += [f"  {f.code} [{f.severity.label}] {f.node or ''}: {f.summary}" for f in layer.findings]
    return "\n".join(lines)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    result, exp = diagnose(path)
    codes = found(result)
    detail = explain(result)
    assert [r.layer for r in result.layers] == exp["walk"], detail
    verdict = result.verdict
    assert (verdict.code if verdict else None) == exp["verdict"], detail
    missing = [c for c in exp["codes"] if c not in codes]
    assert not missing, f"missing {missing}\n{detail}"
    wrong = [c for c in exp.get("absent") or [] if c in codes]
    assert not wrong, f"should not appear: {wrong}\n{detail}"


@pytest.mark.parametrize("path", [p for p in FILES if "all_codes" in expect(read(p))], ids=lambda p: p.stem)
def test_walk_all_finds_the_expected_codes(path: Path) -> None:
    result, exp = diagnose(path, all_layers=True)
    assert [r.layer for r in result.layers] == [1, 2, 3, 4, 5]
    missing = [c for c in exp["all_codes"] if c not in found(result)]
    assert not missing, f"missing {missing}\n{explain(result)}"
