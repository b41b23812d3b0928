"""Independent Prometheus reads go out at once (`read_many`, via layers.sources.read_all): the
same answers as one after another from a real Prometheus, several queries in flight on a slow
one, and one deadline, not one timeout per query, on a Prometheus that never answers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from bot.sources.prom import PrometheusTelemetry
from layers.sources import Read, TelemetryError, read_all, read_one
from tests.services import PrometheusFactory
from tests.test_prom import AT, NODE_A, NODE_B, H, dcgm_vllm_history

READS = [
    Read("instant", "DCGM_FI_DEV_FB_USED"),
    Read("instant", "DCGM_FI_DEV_FB_USED", match=[{"Hostname": [NODE_A["Hostname"]]}]),
    Read("increase", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 24 * H),
    Read("max_over_time", "DCGM_FI_DEV_FB_USED", 24 * H, above=5000),
    Read("rate", "vllm:num_preemptions_total", 300),
    Read("changed", "DCGM_FI_DEV_XID_ERRORS_ACTIVE", 24 * H),
    Read("instant", "DCGM_FI_DEV_FB_USED", match=[{"hostname": [NODE_B["hostname"]]}]),
    Read("instant", "DCGM_FI_DEV_NO_SUCH_FIELD"),
    Read("max_over_time", "DCGM_EXP_XID_ERRORS_COUNT|DCGM_EXP_XID_ERRORS_TOTAL", 24 * H),
]


def test_at_once_equals_one_after_another(prometheus_factory: PrometheusFactory) -> None:
    prom = prometheus_factory(dcgm_vllm_history())
    tel = PrometheusTelemetry(prom.url, at=AT, timeout_s=5)
    together = read_all(tel, READS)
    assert tel.queries == len(READS)  # one query per read, none merged or repeated
    apart = [read_one(tel, r) for r in READS]

    def canon(rows: list[Any]) -> list[tuple[str, float]]:
        return sorted((json.dumps(dict(s.labels), sort_keys=True), s.value) for s in rows)

    assert [canon(x) for x in together] == [canon(x) for x in apart]
    assert any(together) and not together[7]  # real answers, and an absent metric is empty


class _Slow(BaseHTTPRequestHandler):
    """Answers every query with an empty vector after 0.3 s, counting how many are in flight."""

    lock = threading.Lock()
    in_flight = 0
    peak = 0
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
            cls.seen.append(self.path)
        time.sleep(0.3)
        with cls.lock:
            cls.in_flight -= 1
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def slow_url() -> Iterator[str]:
    _Slow.in_flight = _Slow.peak = 0
    _Slow.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_independent_reads_are_in_flight_together(slow_url: str) -> None:
    tel = PrometheusTelemetry(slow_url, at=AT, timeout_s=5)
    assert read_all(tel, READS) == [[] for _ in READS]
    assert len(_Slow.seen) == len(READS)
    assert _Slow.peak >= 2, "the reads went one after another"


def test_a_prometheus_that_never_answers_costs_one_deadline(stalled_url: str) -> None:
    tel = PrometheusTelemetry(stalled_url, at=AT, timeout_s=0.5)
    start = time.monotonic()
    with pytest.raises(TelemetryError, match=r"no answer within 0\.5s") as err:
        read_all(tel, READS)
    # One after another this is nine 0.5 s timeouts; at once, about one (the deadline is 2.2 s).
    assert time.monotonic() - start < 2.5
    assert "DCGM_FI_DEV_FB_USED" in str(err.value)  # the first read in order is the one named
