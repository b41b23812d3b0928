"""gpubot's own Prometheus metrics, in a private CollectorRegistry.

How the bot wires it (bot/slack/app.py, bot/slack/transport.py, bot/slack/scheduler.py):

- `/metrics` on the health port: answer GET /metrics with `render()` and the
  header `Content-Type: CONTENT_TYPE`.
- A walk: `record_walk_started()` when a `/gpu why` (or a digest's "diagnose
  node") opens one; `record_layer(result, seconds)` for each layer run (its
  duration and its findings); `record_walk_finished(result)` when it has ended.
  bot/slack/app.py's MetricsObserver does this for the walk service.
- Buttons: `record_action(action_id, outcome)` (outcome such as "done",
  "refused", "denied", "failed", "repeat").
- Errors: `record_slack_api_error(method)` (e.g. "chat.postMessage") for every
  failed Web API call, `record_kubernetes_api_error(kind)` with a SourceError's
  kind.
- Alerts (POST /alertmanager): `record_alert_webhook(code, seconds)` per
  request, `record_alert(status, decision)` per alert received (decisions in
  handlers/incidents.py), `record_alert_incident(event)` per incident event.
- The digest: `record_digest_scheduled()` once this replica has scheduled it,
  `record_digest_run(outcome)` after each run ("posted", "all_clear",
  "skipped" when another replica holds the day's lock, "failed").

Label values are clipped to a small known vocabulary, so a typo or a hostile
string can never blow up the series count.
"""

from __future__ import annotations

import re
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from handlers.incidents import DECISIONS
from layers.findings import CODES, LAYER_NAMES, LayerResult, Severity, WalkResult

__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "record_action",
    "record_alert",
    "record_alert_incident",
    "record_alert_webhook",
    "record_digest_run",
    "record_digest_scheduled",
    "record_kubernetes_api_error",
    "record_layer",
    "record_slack_api_error",
    "record_walk_finished",
    "record_walk_started",
    "render",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
REGISTRY = CollectorRegistry(auto_describe=True)

ACTIONS = frozenset(
    {
        "layer_descend",
        "layer_jump",
        "walk_all",
        "must_gather",
        "cordon_node",
        "uncordon_node",
        "digest_diagnose",
    }
)
ALERT_STATUSES = frozenset({"firing", "resolved"})
ALERT_EVENTS = frozenset({"thread_opened", "summarized", "closed", "stale", "rewalk", "slack_failed"})
WEBHOOK_CODES = frozenset({"200", "400", "401", "404", "405", "408", "411", "413", "431", "503"})
SOURCE_ERROR_KINDS = frozenset({"forbidden", "not_found", "unavailable", "bad_input"})
DIGEST_SUCCESS = frozenset({"posted", "all_clear"})
DIGEST_OUTCOMES = DIGEST_SUCCESS | {"skipped", "failed"}
# Outcomes and Slack methods are free text from callers: keep them short and plain.
_PLAIN = re.compile(r"^[a-z][a-z0-9_.]{0,39}$")
OTHER = "other"

# Layers run from milliseconds (objects only) to tens of seconds (a slow Prometheus).
_LAYER_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _counter(name: str, doc: str, *labels: str) -> Counter:
    return Counter(name, doc, labels, registry=REGISTRY)


def _gauge(name: str, doc: str) -> Gauge:
    return Gauge(name, doc, registry=REGISTRY)


WALKS_STARTED = _counter("gpubot_walks_started_total", "Walks opened (a pod or a node)")
WALKS_FINISHED = _counter(
    "gpubot_walks_finished_total",
    "Walks ended, by the severity of their verdict (ok when nothing was found)",
    "verdict_severity",
)
LAYER_DURATION = Histogram(
    "gpubot_layer_duration_seconds",
    "Time one layer's check took",
    ["layer"],
    buckets=_LAYER_BUCKETS,
    registry=REGISTRY,
)
FINDINGS = _counter("gpubot_findings_total", "Findings reported, by code and severity", "code", "severity")
ACTIONS_TOTAL = _counter(
    "gpubot_actions_total", "Button actions, by action id and outcome", "action", "outcome"
)
SLACK_ERRORS = _counter("gpubot_slack_api_errors_total", "Slack Web API calls that failed", "method")
KUBE_ERRORS = _counter(
    "gpubot_kubernetes_api_errors_total",
    "Kubernetes API reads or writes that failed, by kind (forbidden, not_found, unavailable, bad_input)",
    "kind",
)
DIGEST_RUNS = _counter("gpubot_digest_runs_total", "Daily digest runs, by outcome", "outcome")
DIGEST_LAST_SUCCESS = _gauge(
    "gpubot_digest_last_success_timestamp_seconds",
    "Unix time of this process's last digest posted (0: none yet)",
)
DIGEST_SCHEDULED = _gauge("gpubot_digest_scheduled", "1 when this replica has the daily digest scheduled")
ALERTS = _counter(
    "gpubot_alerts_total",
    "Alerts received on POST /alertmanager, by status and what was decided for each",
    "status",
    "decision",
)
ALERT_INCIDENTS = _counter(
    "gpubot_alert_incidents_total",
    "Alert incident events: thread_opened, summarized (storm), closed, rewalk, slack_failed",
    "event",
)
ALERT_WEBHOOKS = _counter(
    "gpubot_alert_webhooks_total", "POST /alertmanager requests, by HTTP status", "code"
)
ALERT_WEBHOOK_SECONDS = Histogram(
    "gpubot_alert_webhook_seconds",
    "Time to answer POST /alertmanager (the store only; Slack is brought in line afterwards)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
START_TIME = _gauge("gpubot_start_time_seconds", "Unix time this process started")
START_TIME.set(time.time())

# Every known child exists from the first scrape, so rate() and increase() see a 0 before the first event.
for _sev in Severity:
    WALKS_FINISHED.labels(_sev.label)
for _n in LAYER_NAMES:
    LAYER_DURATION.labels(str(_n))
for _kind in SOURCE_ERROR_KINDS:
    KUBE_ERRORS.labels(_kind)
for _outcome in DIGEST_OUTCOMES:
    DIGEST_RUNS.labels(_outcome)
for _status in ALERT_STATUSES:
    for _decision in DECISIONS:
        ALERTS.labels(_status, _decision)
for _event in ALERT_EVENTS:
    ALERT_INCIDENTS.labels(_event)


def _plain(value: str) -> str:
    value = value.strip().lower()
    return value if _PLAIN.match(value) else OTHER


def record_walk_started() -> None:
    WALKS_STARTED.inc()


def record_layer(result: LayerResult, seconds: float | None = None) -> None:
    """One layer has run: its duration (when measured) and each of its findings."""
    if seconds is not None and seconds >= 0:
        LAYER_DURATION.labels(str(result.layer)).observe(seconds)
    for f in result.findings:
        code = f.code if f.code in CODES else OTHER
        FINDINGS.labels(code, f.severity.label).inc()


def record_walk_finished(result: WalkResult) -> None:
    """The walk has ended: counted once, by its verdict's severity."""
    verdict = result.verdict
    WALKS_FINISHED.labels(verdict.severity.label if verdict else Severity.OK.label).inc()


def record_action(action: str, outcome: str) -> None:
    ACTIONS_TOTAL.labels(action if action in ACTIONS else OTHER, _plain(outcome)).inc()


def record_slack_api_error(method: str) -> None:
    SLACK_ERRORS.labels(_plain(method)).inc()


def record_kubernetes_api_error(kind: str) -> None:
    KUBE_ERRORS.labels(kind if kind in SOURCE_ERROR_KINDS else OTHER).inc()


def record_alert(status: str, decision: str, count: int = 1) -> None:
    ALERTS.labels(
        status if status in ALERT_STATUSES else OTHER, decision if decision in DECISIONS else OTHER
    ).inc(max(0, count))


def record_alert_incident(event: str) -> None:
    ALERT_INCIDENTS.labels(event if event in ALERT_EVENTS else OTHER).inc()


def record_alert_webhook(code: int, seconds: float) -> None:
    ALERT_WEBHOOKS.labels(str(code) if str(code) in WEBHOOK_CODES else OTHER).inc()
    ALERT_WEBHOOK_SECONDS.observe(max(0.0, seconds))


def record_digest_scheduled(scheduled: bool = True) -> None:
    DIGEST_SCHEDULED.set(1 if scheduled else 0)


def record_digest_run(outcome: str, at: float | None = None) -> None:
    outcome = outcome if outcome in DIGEST_OUTCOMES else OTHER
    DIGEST_RUNS.labels(outcome).inc()
    if outcome in DIGEST_SUCCESS:
        DIGEST_LAST_SUCCESS.set(time.time() if at is None else at)


def render() -> bytes:
    """The exposition text for GET /metrics."""
    return generate_latest(REGISTRY)
