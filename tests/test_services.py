"""The real services the other tests stand on: they must start, answer and hold data."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import redis

from tests.services import PrometheusFactory, RedisServer, Series


def test_redis_answers_ping_and_keeps_a_value(redis_server: RedisServer) -> None:
    r = redis.Redis.from_url(redis_server.url)
    try:
        assert r.ping() is True
        r.set("gpubot:test:services", "gpu-7", ex=60)
        assert r.get("gpubot:test:services") == b"gpu-7"
        # no persistence configured: the test instance never writes to disk
        assert r.config_get("save")["save"] == ""
    finally:
        r.close()


def test_redis_binds_loopback_only(redis_server: RedisServer) -> None:
    r = redis.Redis.from_url(redis_server.url)
    try:
        assert r.config_get("bind")["bind"] == "127.0.0.1"
    finally:
        r.close()


def _query(url: str, expr: str, at: float) -> list[dict[str, object]]:
    q = urllib.parse.urlencode({"query": expr, "time": at})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
        body = json.load(r)
    assert body["status"] == "success"
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def test_prometheus_serves_backfilled_history_across_blocks(prometheus_factory: PrometheusFactory) -> None:
    # 30 h of one-minute samples: more than the 2 h block promtool cuts, so several blocks must be read.
    at = 1_764_417_600.0
    series = Series(
        {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "k8s-gpu1", "gpu": "0"},
        [(at - 108_000 + 60 * i, float(i % 90)) for i in range(1801)],
    )
    prom = prometheus_factory([series])
    assert prom.url.startswith("http://127.0.0.1:")
    assert len(list((prom.workdir / "data").glob("01*"))) > 10
    old = _query(prom.url, "DCGM_FI_DEV_GPU_TEMP", at - 100_000)
    assert float(old[0]["value"][1]) == float((8_000 // 60) % 90)  # type: ignore[index]
    # the same dataset is served by the same instance
    assert prometheus_factory([series]) is prom


def test_backfill_keeps_awkward_names_and_label_values(prometheus_factory: PrometheusFactory) -> None:
    at = 1_764_417_600.0
    model = 'org/model "v2" \\ dev'
    series = Series(
        {"__name__": "vllm:num_preemptions_total", "model_name": model}, [(at - 60, 3.0), (at, 4.0)]
    )
    got = _query(prometheus_factory([series]).url, "vllm:num_preemptions_total", at)
    assert got == [
        {"metric": {"__name__": "vllm:num_preemptions_total", "model_name": model}, "value": [at, "4"]}
    ]
