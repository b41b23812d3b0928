"""The digest beside the nodes' owners (spec/interfaces.md, `digest --format json`: `owner`,
OWNER_NEEDS_PERSON, HEALTH_AGENT_CONDITION, NODE_NOT_READY), in JSON, text and Slack blocks."""

from __future__ import annotations

import json
from typing import Any

from bot.sources.scenario import build_sources, load_scenario
from bot.sources.snapshot import SnapshotCluster
from handlers.digest import digest_message, digest_table
from layers.digest import Digest, collect_digest
from layers.sources import NoTelemetry
from tests.bundle_scenario import node
from tests.incidents.test_owner_incidents import OWNERS

NOW = 1_795_953_600.0


def _digest(stem: str) -> Digest:
    cluster, telemetry = build_sources(load_scenario(OWNERS.path(stem)))
    return collect_digest(cluster, telemetry)


def _row(digest: Digest, name: str) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {
        f["node"]: f for f in json.loads(json.dumps(digest.to_dict()))["flagged"]
    }
    return rows[name]


def test_a_node_nvsentinel_gave_up_on_is_listed_apart_with_its_reason() -> None:
    digest = _digest("owners-nvsentinel-drain-failed-gpumemwatch-contact-support-h100-22-nodes")
    row = _row(digest, "h100-infer-03")
    assert row["owner"] == {"name": "NVSentinel", "state": "drain-failed"}
    assert row["reasons"] == ["OWNER_NEEDS_PERSON", "HEALTH_AGENT_CONDITION"]
    assert "NVSentinel gave up (drain-failed" in row["owner_reason"]
    assert "GPU-fatal-error-ruleset" in row["owner_reason"]
    assert any("CONTACT_SUPPORT" in c for c in row["health_conditions"]), row
    assert digest.flagged[0].node == "h100-infer-03"  # a person must act: first
    # Rows without an owner say null.
    assert all(f["owner"] is None for f in digest.to_dict()["flagged"] if f["node"] != "h100-infer-03")  # type: ignore[attr-defined]

    text = digest_table(digest)
    assert "OWNER_NEEDS_PERSON: 1 node(s) an owner gave up on, a person must take them:" in text
    assert "owner: h100-infer-03: NVSentinel (drain-failed)" in text

    message = digest_message(digest, "d1")
    blocks = json.dumps(message.blocks)
    assert ":sos: *An owner gave up on 1 node(s): a person must take them*" in blocks
    row_block = next(
        b
        for b in message.blocks
        if b["type"] == "section" and "*h100-infer-03* · _cordoned_" in b["text"]["text"]
    )
    assert "owner: *NVSentinel* (drain-failed)" in row_block["text"]["text"]
    buttons = next(b for b in message.blocks if b.get("block_id") == "digest_node_0")
    assert [e["action_id"] for e in buttons["elements"]] == ["digest_diagnose", "must_gather"]  # no Uncordon


def test_contact_support_upgrade_failed_and_not_ready_are_flagged() -> None:
    support = node("gpu-1", 8, 8)
    support["metadata"]["labels"]["dgxc.nvidia.com/nvsentinel-state"] = "quarantined"
    support["status"]["conditions"].append(
        {"type": "SysLogsXIDError", "status": "True", "reason": "SysLogsXIDErrorIsNotHealthy",
         "message": "ErrorCode:94 PCI:0000:9b:00 GPU_UUID:GPU-2 Recommended Action=CONTACT_SUPPORT;"}
    )  # fmt: skip
    failed = node("gpu-2", 8, 8, unsched=True)
    failed["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    down = node("gpu-3", 8, 8)
    down["status"]["conditions"][0]["status"] = "Unknown"
    eks = node("gpu-4", 8, 8)
    eks["status"]["conditions"].append(
        {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaDoubleBitError"}
    )
    digest = collect_digest(
        SnapshotCluster([support, failed, down, eks, node("gpu-5", 8, 8)]), NoTelemetry(NOW)
    )
    assert _row(digest, "gpu-1")["reasons"] == ["OWNER_NEEDS_PERSON", "HEALTH_AGENT_CONDITION"]
    assert "NVSentinel recommends CONTACT_SUPPORT (SysLogsXIDError" in _row(digest, "gpu-1")["owner_reason"]
    assert _row(digest, "gpu-2")["reasons"] == ["OWNER_NEEDS_PERSON"]
    assert _row(digest, "gpu-2")["owner"] == {
        "name": "GPU Operator driver upgrade",
        "state": "upgrade-failed",
    }
    assert _row(digest, "gpu-3")["reasons"] == ["NODE_NOT_READY"]
    assert _row(digest, "gpu-4")["reasons"] == ["HEALTH_AGENT_CONDITION"]
    assert _row(digest, "gpu-4")["owner"] == {
        "name": "EKS node monitoring agent",
        "state": "AcceleratedHardwareReady=False (NvidiaDoubleBitError)",
    }
    assert "gpu-5" not in {f.node for f in digest.flagged}
