"""Alertmanager for the tests: webhook payloads of its exact shape, and the real server.

`payload(...)` builds what Alertmanager 0.25's webhook notifier posts
(notify/webhook.Message: version 4, groupKey, truncatedAlerts, status,
receiver, groupLabels, commonLabels, commonAnnotations, externalURL, alerts
with status, labels, annotations, startsAt, endsAt, generatorURL,
fingerprint). `AlertmanagerServer` runs Debian's prometheus-alertmanager on
127.0.0.1 with gossip off, a temporary config and storage directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.services import HOST, ServiceUnavailable, _stop, _tail, start_ready_server

ZERO_TIME = "0001-01-01T00:00:00Z"


def fingerprint(labels: Mapping[str, str]) -> str:
    # Alertmanager's is FNV-64a over sorted label pairs; any stable 16-hex id serves the bot the same.
    return hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()[:16]


def alert(
    name: str,
    status: str = "firing",
    *,
    summary: str = "",
    starts: str = "2026-11-29T11:50:00Z",
    **labels: str,
) -> dict[str, Any]:
    lab = {"alertname": name, "severity": "warning", **labels}
    return {
        "status": status,
        "labels": lab,
        "annotations": {"summary": summary} if summary else {},
        "startsAt": starts,
        "endsAt": ZERO_TIME if status == "firing" else "2026-11-29T12:20:00Z",
        "generatorURL": "http://prometheus.monitoring:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
        "fingerprint": fingerprint(lab),
    }


def payload(alerts: Sequence[dict[str, Any]], receiver: str = "gpubot") -> dict[str, Any]:
    firing = any(a["status"] == "firing" for a in alerts)
    common = dict(alerts[0]["labels"]) if alerts else {}
    for a in alerts[1:]:
        common = {k: v for k, v in common.items() if a["labels"].get(k) == v}
    return {
        "receiver": receiver,
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
        "groupLabels": {"alertname": common.get("alertname", "")},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.monitoring:9093",
        "version": "4",
        "groupKey": '{}:{alertname="' + common.get("alertname", "") + '"}',
        "truncatedAlerts": 0,
    }


def body(alerts: Sequence[dict[str, Any]]) -> bytes:
    return json.dumps(payload(alerts)).encode()


# --- the real Alertmanager -------------------------------------------------------------


def config_yaml(webhook_url: str, token: str) -> str:
    """A receiver for gpubot as docs/alerts.md shows it, with timings small enough for a test."""
    return f"""
route:
  receiver: gpubot
  group_by: [alertname, Hostname, hostname, node, namespace, pod]
  group_wait: 200ms
  group_interval: 500ms
  repeat_interval: 2s
receivers:
  - name: gpubot
    webhook_configs:
      - url: {webhook_url}
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: {token}
"""


class AlertmanagerServer:
    def __init__(self, config: str) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="gpubot-am-"))
        self.config = config
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> AlertmanagerServer:
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if binary is None:
            raise ServiceUnavailable(
                "prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)"
            )
        cfg = self.workdir / "alertmanager.yml"
        cfg.write_text(self.config)
        self.proc, self.port = start_ready_server(
            "alertmanager",
            lambda port: [
                binary,
                f"--config.file={cfg}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address={HOST}:{port}",
                "--cluster.listen-address=",  # no gossip: a single instance
                "--log.level=warn",
            ],
            self.workdir / "alertmanager.log",
            timeout_s,
        )
        return self

    def push(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        """POST /api/v2/alerts, as Prometheus does (labels, annotations, startsAt, endsAt)."""
        doc = [
            {k: a[k] for k in ("labels", "annotations", "startsAt", "endsAt", "generatorURL") if k in a}
            for a in alerts
        ]
        req = urllib.request.Request(
            f"{self.url}/api/v2/alerts",
            data=json.dumps(doc).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200, r.status

    def log(self) -> str:
        return _tail(self.workdir / "alertmanager.log", 30)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
        shutil.rmtree(self.workdir, ignore_errors=True)
