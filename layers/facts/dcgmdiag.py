"""`dcgmi diag -r N -j` output, read as DCGM writes it.

The shape is NVIDIA/DCGM's testing/python3/dcgm_diag_schema.json (DCGM 3.3 and later,
dcgmi/Diag.cpp HelperJsonBuildOutput): `{"DCGM Diagnostic": {"test_categories": [{"category",
"tests": [{"name", "results": [{"entity_group", "entity_group_id", "entity_id", "status",
"warnings": [{"warning", "error_id", "error_category", "error_severity"}], "info": [...]}],
"test_summary": {"status"}}]}], "runtime_error"}, "entity_groups": [{"entity_group",
"entities": [{"entity_id", "device_id", "serial_num"}]}], "metadata": {"version",
"Driver Version Detected"}}`. Statuses are "Pass", "Fail", "Skip", "Not Run" and, where
the display asks for it, "Warn" (dcgmi writes a warning as "Fail" in JSON by default).
Older dcgmi (before 3.3) wrote `"DCGM GPU Diagnostic"` with `"gpu_ids": "0,1"` per result
and upper-case statuses; both are read.

The Job prints the JSON and then a line `gpubot-dcgmi-exit=N` (dcgmi's exit status): the
JSON is the text before that line, from its first `{`.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

EXIT_MARK = "gpubot-dcgmi-exit="
_STATUSES = {"pass": "Pass", "fail": "Fail", "warn": "Warn", "skip": "Skip", "not run": "Not Run"}
_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")


class DiagOutputError(ValueError):
    """The log holds no readable `dcgmi diag -j` output; the message says what was there."""


class DiagWarning(msgspec.Struct, frozen=True):
    text: str
    error_id: int | None = None
    category: int | None = None
    severity: int | None = None


class EntityResult(msgspec.Struct, frozen=True):
    """One test's result on one entity (a GPU, a CPU, a switch)."""

    category: str
    test: str
    group: str  # "GPU", "CPU", …
    entity: int
    status: str
    warnings: tuple[DiagWarning, ...] = ()


class DiagReport(msgspec.Struct):
    results: list[EntityResult] = msgspec.field(default_factory=list)
    summaries: dict[str, str] = msgspec.field(default_factory=dict)  # test -> its test_summary status
    serials: dict[int, str] = msgspec.field(default_factory=dict)  # GPU entity id -> serial
    version: str = ""
    driver: str = ""
    runtime_error: str = ""
    exit_code: int | None = None

    @property
    def failed(self) -> list[EntityResult]:
        """Failed and warned results, in the order DCGM ran them."""
        return [r for r in self.results if r.status in ("Fail", "Warn")]

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def verdict(self) -> str:
        """Fail when anything failed (or DCGM could not run), Warn, else Pass (Skip alone is Pass)."""
        if self.runtime_error or any(r.status == "Fail" for r in self.results):
            return "Fail"
        if any(r.status == "Warn" for r in self.results):
            return "Warn"
        return "Pass"


def _status(raw: Any) -> str:
    text = str(raw or "").strip()
    return _STATUSES.get(text.lower(), text or "Unknown")


def _int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _warnings(raw: Any) -> tuple[DiagWarning, ...]:
    out: list[DiagWarning] = []
    for w in raw if isinstance(raw, list) else []:
        if isinstance(w, dict):
            out.append(
                DiagWarning(
                    str(w.get("warning") or ""),
                    _int(w.get("error_id")),
                    _int(w.get("error_category")),
                    _int(w.get("error_severity")),
                )
            )
        elif isinstance(w, str):
            out.append(DiagWarning(w))
    return tuple(out)


def _entities(result: dict[str, Any]) -> list[tuple[str, int]]:
    if "entity_id" in result:
        entity = _int(result.get("entity_id"))
        return [(str(result.get("entity_group") or "GPU"), entity)] if entity is not None else []
    ids = str(result.get("gpu_ids") or result.get("gpu_id") or "")
    return [("GPU", n) for part in ids.split(",") if (n := _int(part.strip())) is not None]


def json_text(log: str) -> tuple[str, int | None]:
    """The JSON part of the Job's log and dcgmi's exit status (None when the mark is missing)."""
    exit_code: int | None = None
    body = log
    at = log.rfind(EXIT_MARK)
    if at >= 0:
        body = log[:at]
        exit_code = _int(
            log[at + len(EXIT_MARK) :].split()[0] if log[at + len(EXIT_MARK) :].split() else None
        )
    start = body.find("{")
    end = body.rfind("}")
    if start < 0 or end < start:
        raise DiagOutputError(
            "the diagnostic printed no JSON"
            + (f" (dcgmi exited {exit_code})" if exit_code is not None else "")
            + (f": {' '.join(body.split())[:300]}" if body.strip() else "")
        )
    return body[start : end + 1], exit_code


def parse_diag(text: str, exit_code: int | None = None) -> DiagReport:
    """A DiagReport from `dcgmi diag -j` JSON; DiagOutputError when it is not that."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise DiagOutputError(f"the diagnostic's JSON does not parse: {err}") from None
    if not isinstance(doc, dict):
        raise DiagOutputError("the diagnostic's JSON is not an object")
    key = next((k for k in _KEYS if isinstance(doc.get(k), dict)), None)
    if key is None:
        raise DiagOutputError(f"no {_KEYS[0]!r} object in the diagnostic's JSON")
    diag = doc[key]
    raw_meta = doc.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    rep = DiagReport(
        version=str(meta.get("version") or diag.get("version") or ""),
        driver=str(meta.get("Driver Version Detected") or doc.get("Driver Version Detected") or ""),
        runtime_error=str(diag.get("runtime_error") or ""),
        exit_code=exit_code,
    )
    for group in doc.get("entity_groups") or []:
        if isinstance(group, dict) and str(group.get("entity_group") or "") == "GPU":
            for ent in group.get("entities") or []:
                if isinstance(ent, dict) and ent.get("serial_num") and _int(ent.get("entity_id")) is not None:
                    rep.serials[int(ent["entity_id"])] = str(ent["serial_num"])
    for cat in diag.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        category = str(cat.get("category") or "")
        for test in cat.get("tests") or []:
            if not isinstance(test, dict):
                continue
            name = str(test.get("name") or "")
            summary = test.get("test_summary")
            if isinstance(summary, dict):
                rep.summaries[name] = _status(summary.get("status"))
            for res in test.get("results") or []:
                if not isinstance(res, dict):
                    continue
                for group_name, entity in _entities(res):
                    rep.results.append(
                        EntityResult(
                            category,
                            name,
                            group_name,
                            entity,
                            _status(res.get("status")),
                            _warnings(res.get("warnings")),
                        )
                    )
    return rep


def read_job_log(log: str) -> DiagReport:
    """The Job's whole log → its report (DiagOutputError when it holds none)."""
    text, code = json_text(log)
    return parse_diag(text, code)


def result_lines(rep: DiagReport, names: dict[int, str] | None = None) -> tuple[str, list[str], str]:
    """(headline, one line per failed or warned test and GPU with its warning text, the rest counted).
    `names` maps a GPU's entity id to how a person names it (`GPU 3 (GPU-0f3c…)`)."""
    names = names or {}
    counts = rep.counts
    head = f"DCGM diagnostic: {rep.verdict}" + (f" (DCGM {rep.version})" if rep.version else "")
    lines: list[str] = []
    if rep.runtime_error:
        lines.append(f"DCGM could not run the diagnostic: {rep.runtime_error}")
    for r in rep.failed:
        who = names.get(r.entity, f"{r.group} {r.entity}") if r.group == "GPU" else f"{r.group} {r.entity}"
        text = "; ".join(
            w.text + (f" (error_id {w.error_id})" if w.error_id is not None else "") for w in r.warnings
        )
        lines.append(f"{r.status}: {r.test} ({r.category}) on {who}" + (f": {text}" if text else ""))
    rest = {k: v for k, v in counts.items() if k not in ("Fail", "Warn")}
    tail = ", ".join(f"{v} {k.lower()}" for k, v in sorted(rest.items())) or "nothing else"
    return head, lines, f"the rest: {tail} (test results per GPU)"
