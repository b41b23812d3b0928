"""PrometheusTelemetry against a real Prometheus with backfilled DCGM/vLLM history,
and against a tiny local HTTP server for the failures a real one rarely shows on demand.

Label sets are copied from the samples: 27 (dcgm-exporter 3.x, `Hostname`),
40 (newer exporter, lowercase `hostname`, `pci_bus_id`), 29 (EXP Xid counts,
including the pre-rename name) and 34 (vLLM counters with colons).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bot.sources.prom import PrometheusTelemetry, build_query
from layers.sources import TelemetryError
from tests.services import PrometheusFactory, PrometheusServer, Series, free_port

AT = 1_795_953_600.0  # 2026-11-29T12:00:00Z, the evaluation instant
H = 3600

# samples/27: no pod labels, old `Hostname` spelling
NODE_A = {
    "gpu": "0",
    "UUID": "GPU-7ad09335-aadb-19c3-e3a8",
    "device": "nvidia0",
    "modelName": "NVIDIA RTX A5000",
    "Hostname": "k8s-gpu1",
    "DCGM_FI_DRIVER_VERSION": "550.54.15",
}
# samples/40: new `hostname` spelling (the exporter pod's name), pci_bus_id
NODE_B = {
    "gpu": "1",
    "UUID": "GPU-fc60126e-514d-3522-2828-c5daa8e99d85",
    "pci_bus_id": "00000000:B1:00.0",
    "device": "nvidia1",
    "modelName": "NVIDIA RTX 2000 Ada Generation",
    "hostname": "dcgm-exporter-wwwjh",
}
# Same node, a bus id that only an unescaped `.` would match: proves values are matched literally.
NODE_B_DECOY = {**NODE_B, "gpu": "2", "pci_bus_id": "00000000:B1:00x0", "device": "nvidia2"}
VLLM = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}  # samples/34 (c)


def _replay_counter(t: float) -> float:
    """Grows by 1 every 10 min from AT-25h; the exporter restarts at AT-6h and it starts again from 0."""
    reset = AT - 6 * H
    return float((t - (AT - 25 * H)) // 600) if t < reset else float((t - reset) // 600)


def _fb_used(t: float) -> float:
    return 21383.0 if t == AT - 3 * H else 20000.0 + (t % 3600) / 60  # one spike, else a slow sawtooth


def _preemptions(t: float) -> float:
    """Scraped since AT-4h (already at 100), one preemption per 15 s scrape; vLLM restarted at AT-2h."""
    start, restart = AT - 4 * H, AT - 2 * H
    return 100 + (t - start) / 15 if t < restart else (t - restart) / 15


def dcgm_vllm_history() -> list[Series]:
    """About a day of DCGM and vLLM series on two nodes, ending at AT (shared with the equivalence test)."""
    minutes = [AT - 25 * H + 60 * i for i in range(25 * 60 + 1)]
    scrapes = [AT - 4 * H + 15 * i for i in range(4 * 240 + 1)]
    xid = {"window_size_in_ms": "300000", "xid": "79"}
    return [
        Series(
            {"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **NODE_A},
            [(t, _replay_counter(t)) for t in minutes],
        ),
        Series({"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **NODE_B}, [(t, 5.0) for t in minutes]),
        Series({"__name__": "DCGM_FI_DEV_FB_USED", **NODE_A}, [(t, _fb_used(t)) for t in minutes]),
        Series({"__name__": "DCGM_FI_DEV_FB_USED", **NODE_B}, [(t, 11275.0) for t in minutes]),
        Series({"__name__": "DCGM_FI_DEV_FB_USED", **NODE_B_DECOY}, [(t, 2207.0) for t in minutes]),
        Series({"__name__": "vllm:num_preemptions_total", **VLLM}, [(t, _preemptions(t)) for t in scrapes]),
        # samples/29: current name on node A, the pre-rename name on node B and (same labels) on node A
        Series({"__name__": "DCGM_EXP_XID_ERRORS_COUNT", **NODE_A, **xid}, [(t, 1.0) for t in minutes]),
        Series({"__name__": "DCGM_FI_DEV_XID_ERRORS_ACTIVE", **NODE_A, **xid}, [(t, 7.0) for t in minutes]),
        Series({"__name__": "DCGM_FI_DEV_XID_ERRORS_ACTIVE", **NODE_B, **xid}, [(t, 2.0) for t in minutes]),
    ]


@pytest.fixture(scope="module")
def prom(prometheus_factory: PrometheusFactory) -> PrometheusServer:
    return prometheus_factory(dcgm_vllm_history())


@pytest.fixture()
def tel(prom: PrometheusServer) -> Iterator[PrometheusTelemetry]:
    t = PrometheusTelemetry(prom.url, at=AT, timeout_s=5)
    yield t
    t.close()


def _by(samples: list[Any], label: str) -> dict[str, float]:
    return {s.labels.get(label, "?"): s.value for s in samples}


# --- queries against the real Prometheus -----------------------------------------


def test_instant_reads_both_hostname_spellings_and_keeps_name(tel: PrometheusTelemetry) -> None:
    got = tel.instant("DCGM_FI_DEV_FB_USED")
    assert {(s.labels.get("Hostname") or s.labels.get("hostname"), s.labels["gpu"]) for s in got} == {
        ("k8s-gpu1", "0"),
        ("dcgm-exporter-wwwjh", "1"),
        ("dcgm-exporter-wwwjh", "2"),
    }
    assert all(s.labels["__name__"] == "DCGM_FI_DEV_FB_USED" for s in got)
    assert _by(got, "gpu")["0"] == _fb_used(AT)
    assert tel.queries == 1


def test_increase_over_24h_corrects_the_counter_reset(tel: PrometheusTelemetry) -> None:
    got = _by(tel.increase("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 24 * H), "gpu")
    # before the restart: from 6 (AT-24h) to 113 (AT-6h-1min); after it: 0 to 36
    expected = (113 - 6) + 36
    assert got["0"] == pytest.approx(expected, rel=0.01)
    assert got["1"] == 0.0


def test_increase_of_a_younger_series_extrapolates_within_one_percent(tel: PrometheusTelemetry) -> None:
    got = tel.increase("vllm:num_preemptions_total", 24 * H)
    assert len(got) == 1
    assert "__name__" not in got[0].labels
    assert got[0].labels["model_name"] == VLLM["model_name"]
    # 100 -> 579 before the vLLM restart, 0 -> 480 after it; Prometheus adds half a scrape interval
    # at the start, because the series begins well inside the window
    assert got[0].value == pytest.approx(479 + 480, rel=0.01)
    assert got[0].value != 959  # it does extrapolate: the comparison must be tolerant


def test_rate_over_5m(tel: PrometheusTelemetry) -> None:
    got = tel.rate("vllm:num_preemptions_total", 300)
    assert got[0].value == pytest.approx(1 / 15, rel=0.01)


def test_max_over_time_sees_the_spike_only_inside_its_window(tel: PrometheusTelemetry) -> None:
    day = _by(tel.max_over_time("DCGM_FI_DEV_FB_USED", 24 * H), "gpu")
    hour = _by(tel.max_over_time("DCGM_FI_DEV_FB_USED", H), "gpu")
    assert day["0"] == 21383.0
    assert hour["0"] == max(_fb_used(AT - 60 * i) for i in range(61))
    assert hour["0"] < 21383.0
    assert day["2"] == 2207.0


def test_range_returns_points_at_each_step(tel: PrometheusTelemetry) -> None:
    got = tel.range("DCGM_FI_DEV_FB_USED", H, 300, match=[{"Hostname": ["k8s-gpu1"]}])
    assert len(got) == 1
    assert got[0].labels["__name__"] == "DCGM_FI_DEV_FB_USED"
    assert got[0].points == tuple((AT - H + 300 * i, _fb_used(AT - H + 300 * i)) for i in range(13))


def test_metric_name_alternatives_union(tel: PrometheusTelemetry) -> None:
    names = "DCGM_EXP_XID_ERRORS_COUNT|DCGM_FI_DEV_XID_ERRORS_ACTIVE"
    inst = tel.instant(names)
    assert sorted((s.labels["__name__"], s.value) for s in inst) == [
        ("DCGM_EXP_XID_ERRORS_COUNT", 1.0),
        ("DCGM_FI_DEV_XID_ERRORS_ACTIVE", 2.0),
        ("DCGM_FI_DEV_XID_ERRORS_ACTIVE", 7.0),
    ]
    # functions drop the name: on node A's identical label set the left name wins
    peak = tel.max_over_time(names, H)
    assert sorted((s.labels.get("Hostname") or s.labels.get("hostname"), s.value) for s in peak) == [
        ("dcgm-exporter-wwwjh", 2.0),
        ("k8s-gpu1", 1.0),
    ]
    assert tel.queries == 2  # one HTTP query per signal, alternatives included


def test_selector_alternatives_cover_both_hostname_labels(tel: PrometheusTelemetry) -> None:
    match = [
        {"Hostname": ["k8s-gpu1", "dcgm-exporter-wwwjh"]},
        {"hostname": ["k8s-gpu1", "dcgm-exporter-wwwjh"]},
    ]
    got = tel.instant("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", match)
    assert {s.labels["gpu"] for s in got} == {"0", "1"}
    only_b = tel.increase(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        24 * H,
        [{"Hostname": ["dcgm-exporter-wwwjh"]}, {"hostname": ["dcgm-exporter-wwwjh"]}],
    )
    assert [s.labels["gpu"] for s in only_b] == ["1"]


def test_label_values_match_literally_not_as_regex(tel: PrometheusTelemetry) -> None:
    got = tel.instant("DCGM_FI_DEV_FB_USED", [{"pci_bus_id": ["00000000:B1:00.0"]}])
    assert [s.labels["gpu"] for s in got] == ["1"]


def test_a_fleet_sized_selector_is_filtered_client_side(tel: PrometheusTelemetry) -> None:
    # 10,000 node names would make a URL proxies refuse; the answer must not change.
    fleet = [f"gpu-node-{i:05d}" for i in range(10_000)] + ["k8s-gpu1"]
    got = tel.max_over_time("DCGM_FI_DEV_FB_USED", 24 * H, [{"Hostname": fleet}, {"hostname": fleet}])
    assert [(s.labels["gpu"], s.value) for s in got] == [("0", 21383.0)]
    assert tel.queries == 1


def test_a_fleet_sized_selector_keeps_the_request_line_short(misbehaving: Any) -> None:
    fleet = [f"gpu-node-{i:05d}" for i in range(10_000)]
    PrometheusTelemetry(misbehaving.url, at=AT).increase(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", H, [{"Hostname": fleet}]
    )
    assert len(misbehaving.seen[-1]["_path"]) < 8192  # what nginx-style proxies accept by default
    PrometheusTelemetry(misbehaving.url, at=AT).increase(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", H, [{"Hostname": fleet[:3]}]
    )
    assert "gpu-node-00002" in urllib.parse.unquote(
        misbehaving.seen[-1]["_path"]
    )  # small ones go to Prometheus


def test_empty_results_and_impossible_selectors(tel: PrometheusTelemetry) -> None:
    assert tel.instant("DCGM_FI_DEV_ROW_REMAP_FAILURE") == []
    assert tel.increase("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", H, [{"Hostname": ["no-such-node"]}]) == []
    assert tel.instant("DCGM_FI_DEV_FB_USED", [{"Hostname": []}]) == []  # matches nothing: no query sent
    assert tel.queries == 2


def test_wall_clock_by_default(prom: PrometheusServer) -> None:
    t = PrometheusTelemetry(prom.url)
    before = time.time()
    assert before - 1 <= t.now() <= time.time() + 1
    # "now" is a year after the backfilled data: beyond the 5-minute lookback, nothing is current
    assert t.instant("DCGM_FI_DEV_FB_USED") == []
    t.close()


def test_invalid_metric_name_is_a_telemetry_error(tel: PrometheusTelemetry) -> None:
    with pytest.raises(TelemetryError, match="metric name"):
        tel.instant('up{job="x"}')


def test_build_query_shapes() -> None:
    sel = [{"Hostname": ["a.b"]}, {"hostname": ["a.b"]}]
    assert build_query(None, "m", None, ()) == "m"
    assert build_query(None, "A|B", None, sel) == (
        '{__name__=~"A|B",Hostname=~"a\\\\.b"} or {__name__=~"A|B",hostname=~"a\\\\.b"}'
    )
    assert build_query("increase", "A|B", 60, ()) == "increase(A[60s]) or increase(B[60s])"


# --- failures, from a local server that misbehaves on demand -----------------------


class _Misbehaving(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    seen: ClassVar[list[dict[str, str]]] = []
    disable_nagle_algorithm = True

    def _answer(self) -> None:
        type(self).seen.append({**dict(self.headers.items()), "_path": self.path})
        status, body, ctype = (
            200,
            json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}),
            "application/json",
        )
        if self.mode == "slow":
            time.sleep(1.5)
        elif self.mode == "500":
            status, body, ctype = 500, "internal server error\n", "text/plain"
        elif self.mode == "503":
            status, body = (
                503,
                json.dumps({"status": "error", "errorType": "unavailable", "error": "too many queries"}),
            )
        elif self.mode == "422":
            status, body = (
                422,
                json.dumps(
                    {
                        "status": "error",
                        "errorType": "execution",
                        "error": "query processing would load too many samples into memory",
                    }
                ),
            )
        elif self.mode == "error-200":
            body = json.dumps(
                {
                    "status": "error",
                    "errorType": "timeout",
                    "error": "query timed out in expression evaluation",
                }
            )
        elif self.mode == "html":
            body, ctype = "<html><body>Grafana login</body></html>", "text/html"
        elif self.mode == "401":
            status, body = 401, "Unauthorized\n"
        elif self.mode == "matrix-for-vector":
            body = json.dumps(
                {
                    "status": "success",
                    "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "1"]]}]},
                }
            )
        data = body.encode()
        # the slow answer finds the client gone: that is the point, not an error
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def misbehaving() -> Iterator[type[_Misbehaving]]:
    _Misbehaving.mode = "ok"
    _Misbehaving.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    _Misbehaving.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield _Misbehaving
    server.shutdown()
    server.server_close()


def test_prometheus_down_fails_fast_with_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t = PrometheusTelemetry(url, at=AT)
    start = time.monotonic()
    with pytest.raises(TelemetryError) as e:
        t.increase("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 24 * H)
    assert time.monotonic() - start < 2
    assert url in str(e.value)
    assert "Connection refused" in str(e.value) and "PROMETHEUS_URL" in str(e.value)
    assert t.queries == 1


def test_slow_prometheus_times_out(misbehaving: Any) -> None:
    misbehaving.mode = "slow"
    t = PrometheusTelemetry(misbehaving.url, at=AT, timeout_s=0.3)
    start = time.monotonic()
    with pytest.raises(TelemetryError, match=r"no answer within 0\.3s"):
        t.instant("DCGM_FI_DEV_FB_USED")
    assert time.monotonic() - start < 1.2  # a read timeout is not retried
    assert len(misbehaving.seen) == 1


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("500", ["HTTP 500", "internal server error", "health"]),
        ("503", ["HTTP 503", "unavailable: too many queries"]),
        ("422", ["HTTP 422", "too many samples", "rate("]),
        ("error-200", ["query failed", "timeout: query timed out"]),
        ("html", ["not JSON", "Grafana login"]),
        ("401", ["HTTP 401", "PROMETHEUS_TOKEN"]),
        ("matrix-for-vector", ["unexpected result shape"]),
    ],
)
def test_error_answers_become_telemetry_errors(misbehaving: Any, mode: str, words: list[str]) -> None:
    misbehaving.mode = mode
    t = PrometheusTelemetry(misbehaving.url, at=AT, token="s3cr3t-token")
    with pytest.raises(TelemetryError) as e:
        t.rate("vllm:num_preemptions_total", 300)
    for w in words:
        assert w in str(e.value)
    assert misbehaving.url in str(e.value)
    assert "s3cr3t" not in str(e.value) and "s3cr3t" not in repr(t)


def test_503_is_retried_once_then_reported(misbehaving: Any) -> None:
    misbehaving.mode = "503"
    t = PrometheusTelemetry(misbehaving.url, at=AT)
    with pytest.raises(TelemetryError):
        t.instant("DCGM_FI_DEV_FB_USED")
    assert len(misbehaving.seen) == 2
    assert t.queries == 1


def test_bearer_token_is_sent_and_a_token_file_is_reread(misbehaving: Any, tmp_path: Path) -> None:
    assert PrometheusTelemetry(misbehaving.url, at=AT, token="abc").instant("DCGM_FI_DEV_FB_USED") == []
    assert misbehaving.seen[-1]["Authorization"] == "Bearer abc"
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    t = PrometheusTelemetry(misbehaving.url, at=AT, token_file=str(token_file))
    t.instant("DCGM_FI_DEV_FB_USED")
    token_file.write_text("rotated\n")
    t.instant("DCGM_FI_DEV_FB_USED")
    assert [h["Authorization"] for h in misbehaving.seen[-2:]] == ["Bearer first", "Bearer rotated"]
    PrometheusTelemetry(misbehaving.url, at=AT).instant("DCGM_FI_DEV_FB_USED")
    assert "Authorization" not in misbehaving.seen[-1]


def test_unreadable_token_file_is_a_telemetry_error(tmp_path: Path) -> None:
    t = PrometheusTelemetry("http://127.0.0.1:9", at=AT, token_file=str(tmp_path / "missing"))
    with pytest.raises(TelemetryError, match="token file"):
        t.instant("DCGM_FI_DEV_FB_USED")


def test_bad_url_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="http"):
        PrometheusTelemetry("prometheus:9090")


def test_credentials_in_the_url_never_reach_a_message() -> None:
    t = PrometheusTelemetry(f"http://bot:hunter2@127.0.0.1:{free_port()}/prom/", at=AT)
    assert t.source == f"Prometheus at {t.shown_url}" and "hunter2" not in t.source
    with pytest.raises(TelemetryError) as e:
        t.instant("DCGM_FI_DEV_FB_USED")
    assert "hunter2" not in str(e.value) and "/prom" in str(e.value)


def test_above_is_filtered_on_the_server(tel: PrometheusTelemetry) -> None:
    everything = tel.max_over_time("DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 86400)
    big = tel.max_over_time("DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 86400, above=5000)
    assert big and len(big) < len(everything), "the dataset has series on both sides of the bar"
    assert sorted(s.value for s in big) == sorted(s.value for s in everything if s.value > 5000)
    assert all(s.value > 5000 for s in tel.instant("DCGM_FI_DEV_FB_USED", above=5000))


def test_count_answers_presence_without_moving_series(tel: PrometheusTelemetry) -> None:
    assert tel.count("DCGM_FI_DEV_FB_USED") == len(tel.instant("DCGM_FI_DEV_FB_USED")) > 0
    assert tel.count("DCGM_FI_DEV_NO_SUCH_FIELD") == 0
    assert tel.count("DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_PCIE_REPLAY_COUNTER") == len(
        tel.instant("DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    )


def test_a_missing_ca_bundle_is_a_telemetry_error_not_a_crash() -> None:
    from layers.sources import TelemetryError

    tel = PrometheusTelemetry("https://127.0.0.1:1", ca_bundle="/nonexistent/ca.pem", timeout_s=1)
    with pytest.raises(TelemetryError, match="PROMETHEUS_CA_BUNDLE"):
        tel.instant("DCGM_FI_DEV_FB_USED")
