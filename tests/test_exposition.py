"""The /metrics parser on the real exporter output in the samples, and on broken lines."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from bot.sources.exposition import ExpositionError, parse_exposition
from tests import fixtures

SAMPLES = fixtures.SAMPLES
PROM_FILES = sorted(SAMPLES.glob("*.prom"))
# A sample line in the files: optional indentation, a metric name, then `{` or a space.
METRIC_LINE = re.compile(r"^\s*[a-zA-Z_:][a-zA-Z0-9_:]*[{ ]")


def test_samples_exist() -> None:
    assert len(PROM_FILES) >= 7


@pytest.mark.parametrize("path", PROM_FILES, ids=lambda p: p.name)
def test_every_sample_line_of_every_prom_file_is_read(path: Path) -> None:
    text = path.read_text()
    metric_lines = [line for line in text.splitlines() if METRIC_LINE.match(line)]
    samples = parse_exposition(text)
    assert len(samples) == len(metric_lines)
    for (labels, value), line in zip(samples, metric_lines, strict=True):
        assert line.strip().startswith(labels["__name__"])
        assert math.isfinite(value)
        # The value written at the end of the line is the value read.
        assert float(line.split()[-1]) == value


def test_dcgm_labels_and_empty_pod_labels_are_kept_as_written() -> None:
    samples = parse_exposition((SAMPLES / "28_dcgm_exporter_metrics_pod_labels_empty.prom").read_text())
    labels, value = samples[4]
    assert labels["__name__"] == "DCGM_FI_DEV_SM_CLOCK"
    assert labels["UUID"] == "GPU-58fae45b-e5a5-0c62-d478-8ff7c485e74e"
    assert labels["pod"] == "" and labels["namespace"] == ""
    assert value == 1335


def test_mig_series_and_lowercase_hostname() -> None:
    a100 = parse_exposition((SAMPLES / "30_dcgm_exporter_metrics_a100_mig_doc.prom").read_text())
    mig = [labels for labels, _ in a100 if "GPU_I_PROFILE" in labels]
    assert [m["__name__"] for m in mig] == ["DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert mig[0]["GPU_I_ID"] == "13"
    power = next(v for labels, v in a100 if labels["__name__"] == "DCGM_FI_DEV_POWER_USAGE")
    assert power == pytest.approx(409.692)
    newer = parse_exposition((SAMPLES / "40_dcgm_exporter_lowercase_hostname_mig_pod.prom").read_text())
    assert {labels.get("hostname") for labels, _ in newer} == {"dcgm-exporter-wwwjh"}
    assert newer[-1][0]["pod"] == "triton-server-f7cb5d77-95xcf"


def test_vllm_colon_names_markers_and_elided_label_set() -> None:
    text = (SAMPLES / "34_vllm_metrics_cache_config_info_and_counters.prom").read_text()
    samples = parse_exposition(text)
    names = [labels["__name__"] for labels, _ in samples]
    assert names == [
        "vllm:cache_config_info",
        "vllm:cache_config_info",
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
    ]
    # The design doc elides the rest of the label set with "...": the labels before it still count.
    assert samples[1][0]["gpu_memory_utilization"] == "0.9"
    assert samples[1][0]["enable_prefix_caching"] == "False"
    assert samples[3][1] == 27453.0


def test_escapes_timestamps_special_values_and_spacing() -> None:
    text = "\n".join(
        [
            "# HELP x A metric.",
            '  x{path="C:\\\\dcgm",msg="say \\"hi\\"\\nbye"} +Inf 1764417600000',
            "x_total { a = 'single' , b=\"2\", } NaN",
            'y{le="0.5"} -Inf',
            "z 1.5e3",
            "",
            '{"gpu.util", Hostname="gpu-7"} 42',
            'w{a="1"} 3 # {trace_id="abc"} 1.0',
        ]
    )
    samples = parse_exposition(text)
    assert samples[0][0] == {"__name__": "x", "path": "C:\\dcgm", "msg": 'say "hi"\nbye'}
    assert samples[0][1] == math.inf
    assert samples[1][0] == {"__name__": "x_total", "a": "single", "b": "2"}
    assert math.isnan(samples[1][1])
    assert samples[2][1] == -math.inf
    assert samples[3] == ({"__name__": "z"}, 1500.0)
    assert samples[4] == ({"__name__": "gpu.util", "Hostname": "gpu-7"}, 42.0)
    assert samples[5] == ({"__name__": "w", "a": "1"}, 3.0)


def test_prose_and_markers_are_skipped() -> None:
    text = "(a)\nSource: an issue\nNotes about the metrics below\nup 1\n"
    assert parse_exposition(text) == [({"__name__": "up"}, 1.0)]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('DCGM_FI_DEV_XID_ERRORS{gpu="3" 79', "expected ',' or '}'"),
        ("DCGM_FI_DEV_XID_ERRORS{gpu=3} 79", "label 'gpu': expected a quoted value"),
        ('DCGM_FI_DEV_XID_ERRORS{gpu="3"', "not closed"),
        ('DCGM_FI_DEV_XID_ERRORS{gpu="3"}', "missing value"),
        ('DCGM_FI_DEV_XID_ERRORS{gpu="3"} 7x9', "value '7x9' is not a number"),
        ("DCGM_FI_DEV_XID_ERRORS 79 soon", "timestamp 'soon' is not a number"),
        ("DCGM_FI_DEV_XID_ERRORS 79 1 2", "unexpected text"),
        ('DCGM_FI_DEV_XID_ERRORS{gpu="1",gpu="2"} 79', "appears twice"),
    ],
)
def test_a_broken_metric_line_is_an_error_naming_its_line(line: str, reason: str) -> None:
    text = f"# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS 0\n{line}\n"
    with pytest.raises(ExpositionError) as err:
        parse_exposition(text)
    assert err.value.line == 3
    assert str(err.value).startswith("line 3: ")
    assert reason in str(err.value)


def test_utf8_label_names_and_pasted_quotes_are_read_as_the_reference_parser_reads_them() -> None:
    """Prometheus 3's quoted (UTF-8) label names, read by prometheus_client's parser; single-quoted
    values pasted from Python are the double-quoted ones, a double quote inside them is text."""
    text = "\n".join(
        [
            '{"gpu.util", "k8s.pod.name"="trainer-0", Hostname="gpu-7"} 42',
            "x{msg='say \"hi\"', path='C:\\\\dcgm', it='it\\'s'} 1",
        ]
    )
    samples = parse_exposition(text)
    assert samples[0] == ({"__name__": "gpu.util", "k8s.pod.name": "trainer-0", "Hostname": "gpu-7"}, 42.0)
    assert samples[1][0] == {"__name__": "x", "msg": 'say "hi"', "path": "C:\\dcgm", "it": "it's"}


def test_a_value_with_underscores_is_refused_as_prometheus_refuses_it() -> None:
    with pytest.raises(ExpositionError, match="line 1: x: value '1_000' is not a number"):
        parse_exposition("x 1_000\n")
