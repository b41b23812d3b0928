"""Agents reach Redis over the network: a REAL redis-server with TLS and a password (`rediss://`).

The CA and the server certificate (SAN 127.0.0.1) are made by `openssl` for the test; the
server requires the password and speaks TLS only. The product's clients verify the certificate
against REDIS_CA_BUNDLE and send REDIS_PASSWORD; without them they fail with one line.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cluster.kinds import why_request
from bot.cluster.streams import ClusterStreams, StreamsUnavailable
from bot.slack.state import open_state, redis_client
from handlers.ports import StateUnavailable
from tests.cluster_harness import SIGNER
from tests.services import HOST, free_port

PASSWORD = "tls-test-password-7f3"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    if not shutil.which("openssl") or not shutil.which("redis-server"):
        pytest.skip("openssl and redis-server are needed")
    d = tmp_path_factory.mktemp("tls")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gpubot test CA",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "server.crt", cwd=d)  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
         "--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key"),
         "--tls-ca-cert-file", str(d / "ca.crt"), "--tls-auth-clients", "no", "--requirepass", PASSWORD],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"rediss://{HOST}:{port}/0"
    try:
        client = redis_client(url, ca_bundle=str(d / "ca.crt"), password=PASSWORD, timeout_s=1)
        for _ in range(100):
            try:
                client.ping()
                break
            except Exception:
                proc.poll()
                if proc.returncode is not None:
                    pytest.skip("this redis-server has no TLS support")
                time.sleep(0.05)
        yield url, d / "ca.crt"
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_streams_and_state_over_tls_with_a_password(tls_redis: tuple[str, Path]) -> None:
    url, ca = tls_redis
    streams = ClusterStreams(
        redis_client(url, ca_bundle=str(ca), password=PASSWORD), shown="rediss", signer=SIGNER
    )
    streams.ensure_group("tls-1")
    streams.queue("tls-1", why_request("walktls000001", "ml", "trainer-0", "C0TLS", "U0TLS", "0.2.0"))
    (entry,) = streams.read("tls-1", "agent", 1, 100)
    assert entry.request is not None and entry.request.body["walk_id"] == "walktls000001"
    state, note = open_state(url, ca_bundle=str(ca), password=PASSWORD)
    state.set("k", {"v": 1}, 60)
    assert state.get("k") == {"v": 1} and note.startswith(f"state in Redis at rediss://{HOST}:")


def test_without_the_ca_bundle_the_certificate_is_refused_in_one_line(tls_redis: tuple[str, Path]) -> None:
    url, _ = tls_redis
    streams = ClusterStreams(
        redis_client(url, password=PASSWORD, timeout_s=2), shown="rediss://127.0.0.1", signer=SIGNER
    )
    with pytest.raises(StreamsUnavailable) as err:
        streams.clusters()
    assert "certificate verify failed" in str(err.value) and "\n" not in str(err.value)


def test_a_wrong_password_is_one_line_without_the_password(tls_redis: tuple[str, Path]) -> None:
    url, ca = tls_redis
    with pytest.raises(StateUnavailable) as err:
        open_state(url, ca_bundle=str(ca), password="not-the-password")
    text = str(err.value)
    assert text.startswith(f"Redis at rediss://{HOST}:") and "not-the-password" not in text
    assert "invalid" in text.lower() or "auth" in text.lower()
