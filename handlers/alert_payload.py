"""Alertmanager's webhook payload (version 4), checked before anything acts on it.

What Alertmanager sends (notify/webhook): `version` "4", `status`, `receiver`,
`groupKey`, the group's common labels, and `alerts`, each with `status`
("firing" or "resolved"), `labels`, `annotations`, `startsAt`, `endsAt`,
`generatorURL` and `fingerprint` (its hash of the label set). Anything else is
refused with one line saying what is wrong, so a hand-written or foreign
payload never half-applies: the caller answers 400 and changes no state.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

import msgspec

VERSION = "4"
STATUSES = ("firing", "resolved")
_FINGERPRINT = re.compile(r"^[0-9a-f]{1,32}$")
# Alertmanager's truncatedAlerts is a Go uint64 of alerts it left out; past this no Alertmanager
# holds that many alerts (it would need exabytes), so a larger number is not Alertmanager's.
TRUNCATED_MAX = 1 << 53
_SURROGATE = re.compile("[\ud800-\udfff]")


class PayloadError(ValueError):
    """Not an Alertmanager webhook payload; the message says what is wrong, in one line."""


class Alert(msgspec.Struct, frozen=True):
    status: str  # "firing" or "resolved"
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    fingerprint: str
    starts_at: str
    ends_at: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname") or "(unnamed alert)"

    @property
    def firing(self) -> bool:
        return self.status == "firing"


class AlertBatch(msgspec.Struct, frozen=True):
    """One webhook's alerts, validated."""

    receiver: str
    group_key: str
    external_url: str
    alerts: tuple[Alert, ...]
    truncated: int = 0  # alerts Alertmanager left out (`max_alerts` on the receiver): `truncatedAlerts`

    @property
    def status(self) -> str:
        """The notification's: firing while any of its alerts fires (Alertmanager's own rule)."""
        return "firing" if any(a.firing for a in self.alerts) else "resolved"


def _json_type(value: Any) -> str:
    """What a sender would call the value it sent: JSON's names, not Python's."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def label_fingerprint(labels: Mapping[str, str]) -> str:
    """A stable id for a label set when the sender gave none (Alertmanager always does)."""
    canon = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def clean(text: str) -> str:
    """The text with lone surrogates (a JSON `\\ud800` escape pairs with nothing) as U+FFFD: they
    cannot be encoded as UTF-8, so Redis, the log and Slack would each fail on them."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PayloadError(f"{where} must be an object of strings, got {_json_type(value)}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise PayloadError(f"{where}[{clean(k[:60])!r}] must be a string, got {_json_type(v)}")
    return {clean(k): clean(v) for k, v in value.items()}


def _alert(raw: Any, i: int) -> Alert:
    where = f"alerts[{i}]"
    if not isinstance(raw, dict):
        raise PayloadError(f"{where} must be an object, got {_json_type(raw)}")
    status = raw.get("status")
    if status not in STATUSES:
        raise PayloadError(f"{where}.status must be 'firing' or 'resolved', got {clean(str(status)[:40])!r}")
    labels = _strings(raw.get("labels"), f"{where}.labels")
    # Alertmanager refuses label-less alerts on its own API, so such a payload is not from it.
    if not labels:
        raise PayloadError(f"{where} has no labels: an Alertmanager alert always has at least alertname")
    annotations = _strings(raw.get("annotations"), f"{where}.annotations")
    fp = raw.get("fingerprint")
    if fp is None or fp == "":
        fp = label_fingerprint(labels)
    elif not isinstance(fp, str) or not _FINGERPRINT.match(fp):
        raise PayloadError(
            f"{where}.fingerprint must be Alertmanager's hex fingerprint, got {clean(str(fp)[:40])!r}"
        )
    starts, ends = raw.get("startsAt", ""), raw.get("endsAt", "")
    if not isinstance(starts, str) or not isinstance(ends, str):
        raise PayloadError(f"{where}.startsAt and endsAt must be RFC 3339 strings")
    return Alert(status, labels, annotations, fp, clean(starts[:64]), clean(ends[:64]))


def parse_payload(body: bytes | str) -> AlertBatch:
    """The webhook body → an AlertBatch, or PayloadError naming the first thing wrong."""
    try:
        doc = json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise PayloadError(f"the body is not JSON: {err}") from None
    except RecursionError:  # a body of 100,000 `[`: the decoder's stack, not a bug of ours (400, not 500)
        raise PayloadError("the body is JSON nested too deep to be an Alertmanager payload") from None
    return batch_from_dict(doc)


def _no_constant(name: str) -> Any:
    """NaN and Infinity are no JSON (Go's encoder never writes them): refused, not taken as numbers."""
    raise ValueError(f"{name} is not a JSON value")


def _truncated(value: Any) -> int:
    """`truncatedAlerts`: a whole number from 0 to TRUNCATED_MAX (not a float, a string, a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TRUNCATED_MAX:
        shown = json.dumps(value)[:40] if isinstance(value, int | float | str | None) else _json_type(value)
        raise PayloadError(f"truncatedAlerts must be a whole number, got {clean(shown)} (from 0 to 2^53)")
    return value


def batch_from_dict(doc: Any) -> AlertBatch:
    """An already-decoded payload (a webhook's, or one taken off a queue) → an AlertBatch."""
    if not isinstance(doc, dict):
        raise PayloadError(f"the payload must be a JSON object, got {_json_type(doc)}")
    version = doc.get("version")
    if version != VERSION:
        raise PayloadError(
            f'version must be "4" (Alertmanager\'s webhook payload), got {json.dumps(version)[:40]}'
        )
    alerts = doc.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts must be a list")
    for key in ("receiver", "groupKey", "externalURL"):
        if not isinstance(doc.get(key, ""), str):
            raise PayloadError(f"{key} must be a string")
    truncated = _truncated(doc.get("truncatedAlerts", 0))
    return AlertBatch(
        receiver=clean(doc.get("receiver", "")),
        group_key=clean(doc.get("groupKey", "")),
        external_url=clean(doc.get("externalURL", "")),
        alerts=tuple(_alert(a, i) for i, a in enumerate(alerts)),
        truncated=truncated,
    )


def alert_dict(alert: Alert) -> dict[str, Any]:
    """An alert as Alertmanager's payload has it (what `batch_from_dict` parses again)."""
    return {
        "status": alert.status,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "fingerprint": alert.fingerprint,
        "startsAt": alert.starts_at,
        "endsAt": alert.ends_at,
    }


def batch_dict(batch: AlertBatch) -> dict[str, Any]:
    """A validated batch as a v4 payload again (kept in the state store, queued for an agent)."""
    return {
        "version": VERSION,
        "receiver": batch.receiver,
        "groupKey": batch.group_key,
        "externalURL": batch.external_url,
        "alerts": [alert_dict(a) for a in batch.alerts],
        "truncatedAlerts": batch.truncated,
    }
