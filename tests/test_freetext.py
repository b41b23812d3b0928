"""Default-deny masking of free text (bot/actions/freetext.py, issue 28 item 2).

- Every shape issue 28 found leaking is masked, the GPU evidence around it kept.
- The layers' log signatures still match on masked text: every bundled scenario and incident,
  its logs and messages masked as a bundle masks them, walks to the same findings and verdict as
  the live walk (the whole-bundle replay is tests/test_bundle_freetext.py and
  benchmarks/bundle_replay_check.py).
- Masking is idempotent, linear on 64 KB hostile lines, and the vocabulary holds every word of
  the repository's sources (scripts/vocabulary.py).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions.freetext import MASK, FreeText, names_of, vocabulary
from bot.actions.redact import mask_messages, mask_object, object_names
from bot.sources.scenario import ScenarioError, build_sources, parse_scenario
from layers.walk import walk
from tests.hostile_text import hostile

ROOT = Path(__file__).resolve().parent.parent
UUID = "GPU-adb24b25-1db1-436e-d958-ddee5da83d07"

KUBECONFIG = base64.b64encode(
    b"apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: 424242\n"
).decode()
DOCKERCONFIG = base64.b64encode(
    json.dumps({"auths": {"nvcr.io": {"auth": base64.b64encode(b"$oauthtoken:1234").decode()}}}).encode()
).decode()
# The shapes of issue 28 (secret -> the line that carries it).
ISSUE = {
    KUBECONFIG: f"loaded {KUBECONFIG}",
    DOCKERCONFIG: f"image pull secret data {DOCKERCONFIG} applied",
    "c2lnbmF0dXJlMDEyMzQ1": "auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJncHVib3QifQ.c2lnbmF0dXJlMD\nEyMzQ1Njc4OQ done",
    "EyMzQ1Njc4OQ": "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJncHVib3QifQ.c2lnbmF0dXJlMD\nEyMzQ1Njc4OQ done",
    "1234567890": '{"type": "service_account", "private_key_id": "1234567890", "project_id": "p"}',
    "0123456789abcdef0123456789abcdef01234567": "netrc file: 0123456789abcdef0123456789abcdef01234567",
    "error": "machine api.internal login ci password error",
    "77331": "connect pw=77331 to db",
    "4242": "the token is 4242",
    "deadbeef12": "GET /o?X-Amz-Signature=deadbeef12&X-Amz-Expires=300",
    "horse": 'using password "correct horse battery"',
    "Sh4p3sDev": "NVIDIA_VISIBLE_DEVICES=Sh4p3sDev",
}
EVIDENCE = [
    f"I1129 11:50:00.123456       1 health.go:159] XidCriticalError: Xid=79 on Device={UUID}; marking device as unhealthy.",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    "Failed to initialize NVML: could not load NVML library.",
    "kernel 5.14.0-284.30.1.el9_2.x86_64 driver 550.54.15 took 1.5s at 10.0.0.12",
    "device MIG-GPU-adb24b25-1db1-436e-d958-ddee5da83d07/1/0 on Tesla-V100-PCIE-32GB is healthy",
]


@pytest.mark.parametrize("secret", list(ISSUE), ids=range(len(ISSUE)))
def test_each_shape_issue_28_found_leaking_is_masked(secret: str) -> None:
    masked = FreeText().mask(ISSUE[secret])
    assert secret not in masked and secret.lower() not in masked.lower()
    assert MASK in masked


@pytest.mark.parametrize(
    "line",
    [
        'msg="{\\"password\\":\\"hunter\\"}"',  # JSON escaped inside a logfmt value
        '{"password": "two hunter words", "x": 1}',
        "{'Authorization': 'Bearer hunter'}",
        'level=info token="hunter"',
    ],
)
def test_a_value_after_a_key_is_masked_whatever_its_quoting(line: str) -> None:
    masked = FreeText().mask(line)
    assert "hunter" not in masked and MASK in masked, masked


def test_evidence_is_kept_whole() -> None:
    text = FreeText(["gpu-7"]).mask("\n".join(EVIDENCE))
    assert text == "\n".join(EVIDENCE)


def test_a_name_the_bundle_holds_is_kept_and_one_it_does_not_is_masked() -> None:
    line = "Successfully assigned ml/trainer-0x7k2p to gpu-7 (uid 5f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0)"
    assert FreeText().mask(line).count(MASK) == 2
    names = names_of(["trainer-0x7k2p", "5f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "ml"])
    assert FreeText(names).mask(line) == line


def test_a_secret_keeps_none_of_its_parts() -> None:
    """A token is kept whole or masked whole: no vocabulary word survives out of a secret."""
    masked = FreeText().mask("value AzUr3AcC0untK3y+driver/error== next")
    assert masked == f"value {MASK}== next"
    assert FreeText().mask("AccountKey=AzUr3AcC0untK3y+driver/error== next") == f"AccountKey={MASK} next"


def _sample_texts() -> list[str]:
    """Real-shaped operand logs, events and objects: the bundled scenarios (taken from the samples)."""
    return [p.read_text(errors="replace") for p in sorted((ROOT / "bot" / "scenarios").glob("*.yaml"))]


def test_masking_is_idempotent() -> None:
    texts = [*_sample_texts(), *ISSUE.values(), *EVIDENCE, "x <masked> y", "pw=<masked>"]
    masker = FreeText()
    for text in texts:
        once = masker.mask(text)
        assert masker.mask(once) == once


def test_the_vocabulary_holds_every_word_of_the_sources() -> None:
    from scripts.vocabulary import vocabulary as written

    missing = set(written(None)) - vocabulary()
    assert not missing, f"run python scripts/vocabulary.py: {sorted(missing)[:20]}"


HOSTILE = [
    "a",
    "a-",
    "password=",
    "token is ",
    "pw ",
    "Authorization: ",
    "eyJ",
    "-----BEGIN A-----",
    "%2F",
    "https://a:b@",
    "aB3+",
    "GPU-",
    "0x",
    '"',
    "\u00e9",
    "key=",
    "a.",
    "/",
]


@pytest.mark.parametrize("chunk", HOSTILE)
def test_masking_is_linear_on_a_64_kb_hostile_line(chunk: str) -> None:
    text = hostile(chunk)
    started = time.thread_time()
    FreeText().mask(text)
    took = time.thread_time() - started
    assert took < 2.0, f"{took:.2f}s on 64 KB of {chunk!r}"


# --- the layers' signatures on masked text --------------------------------------------------


def _scenarios() -> list[Path]:
    return sorted((ROOT / "bot" / "scenarios").glob("*.yaml")) + sorted(
        (ROOT / "tests" / "incidents").rglob("*.yaml")
    )


def masked_like_a_bundle(data: dict[str, Any]) -> dict[str, Any]:
    """The scenario's logs and messages as a bundle keeps them (names from its masked objects)."""
    objects = [mask_object(obj) for obj in data.get("objects") or [] if isinstance(obj, dict)]
    masker = FreeText(names_of(n for obj in objects for n in object_names(obj)))
    for obj in data.get("objects") or []:
        if isinstance(obj, dict):
            mask_messages(obj, masker.mask)
    logs = data.get("logs")
    if isinstance(logs, dict):
        data["logs"] = {k: masker.mask(v) if isinstance(v, str) else v for k, v in logs.items()}
    return data


def _codes(result: dict[str, Any]) -> list[tuple[int, list[str]]]:
    return [(layer["layer"], [f["code"] for f in layer["findings"]]) for layer in result["layers"]]


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.mark.parametrize("path", _scenarios(), ids=lambda p: p.stem)
def test_every_scenario_walks_to_the_same_findings_on_masked_text(path: Path) -> None:
    data = yaml.load(path.read_text(), Loader=_LOADER)
    target = ((data or {}).get("x-expect") or {}).get("target") if isinstance(data, dict) else None
    if not isinstance(target, str) or "/" not in target:
        pytest.skip("no bound target")
    ns, pod = target.split("/", 1)
    try:
        live = walk(*build_sources(parse_scenario(data, str(path))), ns, pod).to_dict()
    except ScenarioError:
        pytest.skip("not a loadable scenario")
    masked = walk(*build_sources(parse_scenario(masked_like_a_bundle(data), str(path))), ns, pod).to_dict()
    assert _codes(masked) == _codes(live)
    assert (masked.get("verdict") or {}).get("code") == (live.get("verdict") or {}).get("code")
