"""Scenario files: loading per spec/scenario.md, clear one-line errors, round trip, sources."""

from __future__ import annotations

import json
import math
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sources.scenario import ScenarioError, build_sources, load_scenario, parse_scenario
from tests import fixtures
from tests.scenario_write import dump_scenario, scenario_to_dict

SAMPLES = fixtures.SAMPLES
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()
PLUGIN = "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin"


def sample_node() -> dict[str, Any]:
    """sample 05: a node whose 16 GPUs are all unhealthy (allocatable 0), as `kubectl get node -o yaml`."""
    status = yaml.safe_load((SAMPLES / "05_node_capacity16_allocatable0.yaml").read_text())["status"]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ocio-gpu01"}, "status": status}


def plugin_log() -> str:
    lines = (SAMPLES / "06_node_7_of_8_gpus_device_plugin_xid79.txt").read_text().splitlines()
    return "\n".join(line for line in lines if "health.go" in line or "server.go" in line) + "\n"


def write_scenario(tmp_path: Path) -> Path:
    node_list = {"apiVersion": "v1", "kind": "List", "items": [sample_node()]}
    objects = textwrap.indent(yaml.safe_dump([node_list], sort_keys=False), "  ")
    text = (
        textwrap.dedent(
            """\
            kind: Scenario
            name: xid79-fell-off-bus
            description: >
              Node ocio-gpu01 lost its GPUs.
            now: 2026-11-29T12:00:00Z
            x-expect: {layer: 5, code: L5_XID_FELL_OFF_BUS}
            objects:
            """
        )
        + objects
        + textwrap.dedent(
            """\
              - apiVersion: v1
                kind: Pod
                metadata: {{name: trainer-0, namespace: ml, creationTimestamp: 2026-11-29T11:00:00Z}}
                spec: {{nodeName: ocio-gpu01}}
            logs:
              {plugin}: |
            {log}
            metrics:
              - metric: {{__name__: DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, Hostname: ocio-gpu01, gpu: 3, pod: ""}}
                values: [[-86400, 0], ["2026-11-29T11:00:00Z", 12], [1795951800, 13], [0, 14]]
            exposition: |
            {exposition}
            """
        ).format(
            plugin=PLUGIN,
            log=textwrap.indent(plugin_log(), "    "),
            exposition=textwrap.indent(
                (SAMPLES / "27_dcgm_exporter_metrics_gpu_operator_a5000.prom").read_text(), "  "
            ),
        )
    )
    path = tmp_path / "xid79.yaml"
    path.write_text(text)
    return path


def test_a_full_scenario_loads(tmp_path: Path) -> None:
    sc = load_scenario(write_scenario(tmp_path))
    assert sc.name == "xid79-fell-off-bus"
    assert sc.description.strip() == "Node ocio-gpu01 lost its GPUs."
    assert sc.now == NOW
    assert sc.extra == {"x-expect": {"layer": 5, "code": "L5_XID_FELL_OFF_BUS"}}
    # The pasted List is flattened; an unquoted timestamp stays text, as the Kubernetes API has it.
    assert [(o["kind"], o["metadata"]["name"]) for o in sc.objects] == [
        ("Node", "ocio-gpu01"),
        ("Pod", "trainer-0"),
    ]
    assert sc.objects[0]["status"]["capacity"]["nvidia.com/gpu"] == "16"
    assert sc.objects[1]["metadata"]["creationTimestamp"] == "2026-11-29T11:00:00Z"
    assert "Xid=79 on Device=GPU-adb24b25-1db1-436e-d958-ddee5da83d07" in sc.logs[PLUGIN]

    remapped = sc.series[0]
    # Relative, RFC 3339 and Unix-second times all become absolute; `gpu: 3` becomes "3"; pod="" is no label.
    assert remapped.labels == {
        "__name__": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Hostname": "ocio-gpu01",
        "gpu": "3",
    }
    assert remapped.points == [(NOW - 86400, 0), (NOW - 3600, 12), (NOW - 1800, 13), (NOW, 14)]
    # The exposition's two series are one sample each, at now.
    exposed = {s.labels["__name__"]: s.points for s in sc.series[1:]}
    assert exposed == {"DCGM_FI_DEV_GPU_UTIL": [(NOW, 0.0)], "DCGM_FI_DEV_FB_USED": [(NOW, 21383.0)]}


def test_build_sources_serves_the_scenario(tmp_path: Path) -> None:
    sc = load_scenario(write_scenario(tmp_path))
    cluster, telemetry = build_sources(sc)
    assert cluster.source == telemetry.source == "scenario xid79-fell-off-bus"
    assert cluster.get_node("ocio-gpu01")["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert "marking device as unhealthy" in cluster.pod_log(*PLUGIN.split("/"))
    assert telemetry.now() == NOW
    (fb,) = telemetry.instant("DCGM_FI_DEV_FB_USED", [{"Hostname": ["k8s-gpu1"]}])
    assert fb.value == 21383.0
    (rows,) = telemetry.increase("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 86400)
    assert rows.value == pytest.approx(14.0)  # samples span the whole day: no extrapolation
    # A cordon against the snapshot leaves the scenario itself unchanged.
    cluster.patch_node("ocio-gpu01", {"spec": {"unschedulable": True}})
    assert "spec" not in sc.objects[0]


def test_round_trip_through_yaml(tmp_path: Path) -> None:
    sc = load_scenario(write_scenario(tmp_path))
    text = dump_scenario(sc)
    assert f"{PLUGIN}: |" in text  # logs stay readable blocks
    again = parse_scenario(yaml.safe_load(text), "<bundle>")
    for field in ("name", "description", "now", "objects", "logs", "series", "extra"):
        assert getattr(again, field) == getattr(sc, field), field
    assert again.path is None


def test_non_finite_values_round_trip() -> None:
    data = {
        "kind": "Scenario",
        "metrics": [{"metric": {"__name__": "t"}, "values": [[-60, "NaN"], [0, "+Inf"]]}],
    }
    sc = parse_scenario(data, "<x>", now_default=NOW)
    assert math.isnan(sc.series[0].points[0][1]) and sc.series[0].points[1][1] == math.inf
    again = parse_scenario(yaml.safe_load(dump_scenario(sc)), "<x>")
    assert again.series[0].points[1] == (NOW, math.inf)


def test_json_scenario_with_a_kubectl_node_list(tmp_path: Path) -> None:
    items = [sample_node() for _ in range(3)]
    for i, node in enumerate(items):
        node["metadata"]["name"] = f"gpu-{i}"
    nodes = {"apiVersion": "v1", "kind": "NodeList", "items": items}
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"kind": "Scenario", "now": NOW, "objects": [nodes]}))
    sc = load_scenario(path)
    assert [o["metadata"]["name"] for o in sc.objects] == ["gpu-0", "gpu-1", "gpu-2"]
    assert sc.name == "fleet" and sc.now == NOW and sc.series == [] and sc.logs == {}


def test_now_defaults_to_the_load_time() -> None:
    data = {"kind": "Scenario", "metrics": [{"metric": {"__name__": "g"}, "values": [[-60, 1]]}]}
    assert parse_scenario(data, "<x>", now_default=NOW).series[0].points == [(NOW - 60, 1.0)]
    loaded_now = parse_scenario(data, "<x>").now
    assert abs(loaded_now - datetime.now(UTC).timestamp()) < 5


BASE: dict[str, Any] = {"kind": "Scenario", "now": "2026-11-29T12:00:00Z"}


def metric(values: Any, **labels: Any) -> dict[str, Any]:
    return {
        **BASE,
        "metrics": [
            {"metric": {"__name__": "g", **labels}, "values": [[-60, 1]]},
            {"metric": {"__name__": "g", "gpu": "1"}, "values": values},
        ],
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (["kind", "Scenario"], "f.yaml: expected a mapping with `kind: Scenario` at the top"),
        ({"name": "x"}, "f.yaml: kind: expected `kind: Scenario`"),
        ({"kind": "Pod"}, "f.yaml: kind: expected `kind: Scenario`, got 'Pod'"),
        ({**BASE, "metadata": {}}, "f.yaml: metadata: unknown key"),
        ({**BASE, "now": "yesterday"}, "f.yaml: now: expected an RFC 3339 time or Unix seconds"),
        ({**BASE, "now": 12}, "f.yaml: now: expected an RFC 3339 time"),
        ({**BASE, "objects": {"kind": "Node"}}, "f.yaml: objects: expected a list of Kubernetes objects"),
        ({**BASE, "objects": [{"metadata": {"name": "a"}}]}, "f.yaml: objects[0]: expected a `kind`"),
        (
            {**BASE, "objects": [{"kind": "Node", "metadata": {}}]},
            "f.yaml: objects[0].metadata.name: expected",
        ),
        (
            {**BASE, "objects": [{"kind": "List", "items": [{"kind": "Pod"}]}]},
            "f.yaml: objects[0].items[0].metadata.name: expected the Pod's name",
        ),
        ({**BASE, "logs": ["line"]}, 'f.yaml: logs: expected a mapping "namespace/pod/container"'),
        ({**BASE, "logs": {"ml/trainer-0": "x"}}, "f.yaml: logs['ml/trainer-0']: expected a key"),
        (
            {**BASE, "logs": {"ml/trainer-0/trainer": 3}},
            "f.yaml: logs['ml/trainer-0/trainer']: expected the log text",
        ),
        ({**BASE, "metrics": {"g": 1}}, "f.yaml: metrics: expected a list"),
        (
            {**BASE, "metrics": [{"metric": {"gpu": "0"}, "values": [[0, 1]]}]},
            "f.yaml: metrics[0].metric: expected `__name__`",
        ),
        (metric([[0, 1]], **{"bad-name": "x"}), "f.yaml: metrics[0].metric: invalid label name 'bad-name'"),
        (metric(["abc"]), "f.yaml: metrics[1].values[0]: expected [time, value], got 'abc'"),
        (metric([[0, 1], [0, "x"]]), "f.yaml: metrics[1].values[1][1]: expected a number, got 'x'"),
        (metric([[500, 1]]), "f.yaml: metrics[1].values[0][0]: expected seconds relative to now (<= 0)"),
        (metric([[-60, 1], [-120, 2]]), "f.yaml: metrics[1].values[1]: times must increase"),
        (metric([[60, 1]]), "f.yaml: metrics[1].values[0][0]: expected seconds relative"),
        (
            metric([["2026-11-29T12:01:00Z", 1]]),
            "f.yaml: metrics[1].values[0]: time 2026-11-29T12:01:00Z is after now",
        ),
        (metric([]), "f.yaml: metrics[1].values: expected a list of [time, value]"),
        (metric([[0, 1]], gpu="1"), "f.yaml: metrics[1]: same labels as metrics[0]"),
        (
            {**BASE, "metrics": [{"metric": {"__name__": "g"}, "vals": []}]},
            "f.yaml: metrics[0].vals: unknown key",
        ),
        ({**BASE, "exposition": 'g{gpu="0" 1'}, "f.yaml: exposition: line 1: expected ',' or '}'"),
        (
            {**BASE, "exposition": "ok 1\nok 2"},
            "f.yaml: exposition: ok{'__name__': 'ok'}: a second sample at now",
        ),
    ],
)
def test_a_bad_scenario_is_one_clear_line(data: Any, expected: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "f.yaml")
    assert str(err.value).startswith(expected)
    assert "\n" not in str(err.value)


def test_x_keys_are_kept_and_other_keys_are_not() -> None:
    sc = parse_scenario({**BASE, "x-note": "annotations go here"}, "f.yaml")
    assert sc.extra == {"x-note": "annotations go here"}


def test_file_and_syntax_errors_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"missing\.yaml: cannot read the file: No such file"):
        load_scenario(tmp_path / "missing.yaml")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("kind: Scenario\nobjects:\n  - kind: Node\n   metadata: {name: a}\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: YAML syntax error at line 4"):
        load_scenario(bad_yaml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n  "kind": "Scenario",\n  "objects": [,]\n}\n')
    with pytest.raises(ScenarioError, match=r"bad\.json: JSON syntax error at line 3"):
        load_scenario(bad_json)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(binary)


def test_yaml_flow_mapping_is_not_mistaken_for_json(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text("{kind: Scenario, name: flow, now: 1795000000}\n")
    sc = load_scenario(path)
    assert (sc.name, sc.now) == ("flow", 1795000000.0)


def test_scenario_to_dict_uses_times_relative_to_now() -> None:
    sc = parse_scenario(metric([[-3600, 5], [0, 7]]), "f.yaml")
    d = scenario_to_dict(sc)
    assert d["now"] == "2026-11-29T12:00:00Z"
    assert d["metrics"][1] == {"metric": {"__name__": "g", "gpu": "1"}, "values": [[-3600, 5], [0, 7]]}


def test_unquoted_label_values_become_api_strings(tmp_path) -> None:
    from bot.sources.scenario import load_scenario
    from layers.facts import objects as o

    path = tmp_path / "typed.yaml"
    path.write_text(
        "kind: Scenario\n"
        "objects:\n"
        "- apiVersion: v1\n"
        "  kind: Node\n"
        "  metadata:\n"
        "    name: gpu-1\n"
        "    labels: {nvidia.com/gpu.present: true, nvidia.com/gpu.count: 8, nvidia.com/gpu.replicas: 1.0}\n"
        "    annotations: {note: null}\n"
    )
    node = load_scenario(path).objects[0]
    assert node["metadata"]["labels"] == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "1.0",
    }
    assert o.is_gpu_node(node)


def test_label_values_that_are_not_scalars_are_refused(tmp_path) -> None:
    import pytest

    from bot.sources.scenario import ScenarioError, load_scenario

    path = tmp_path / "bad.yaml"
    path.write_text(
        "kind: Scenario\nobjects:\n- {apiVersion: v1, kind: Node, metadata: {name: n, labels: {a: [1, 2]}}}\n"
    )
    with pytest.raises(ScenarioError, match=r"objects\[0\]\.metadata\.labels\['a'\]: expected a string"):
        load_scenario(path)


def test_namespaced_objects_without_a_namespace_land_in_default(tmp_path) -> None:
    from bot.sources.scenario import load_scenario

    path = tmp_path / "nons.yaml"
    path.write_text(
        "kind: Scenario\nobjects:\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n}}\n"
    )
    pod, node = load_scenario(path).objects
    assert pod["metadata"]["namespace"] == "default"
    assert "namespace" not in node["metadata"]
