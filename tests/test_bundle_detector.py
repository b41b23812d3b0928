"""The bundle's free-text detector (bot/actions/detector.py) and command-line masking
(bot/actions/argv.py): what detect-secrets is asked, what the walk still reads (issue 20)."""

from __future__ import annotations

import re

import pytest

from bot.actions import detector
from bot.actions.argv import mask_argv, mask_script
from bot.actions.detector import MASK, scrub
from bot.actions.redact import mask_object
from layers.facts.inference import recognise, reservation_args


def test_every_plugin_named_is_one_detect_secrets_has() -> None:
    names = [type(p).__name__ for p, _gates in detector._plugins()]
    assert sorted(names) == sorted(detector.PLUGINS)


def test_every_keyword_the_keyword_plugin_knows_holds_one_of_its_gates() -> None:
    """A detect-secrets upgrade that adds a keyword the gates miss fails here, not silently."""
    from detect_secrets.plugins.keyword import DENYLIST

    gates = detector.PLUGINS["KeywordDetector"]
    for word in DENYLIST:
        plain = re.sub(r"_\?", "", word).replace("ñ", "n")
        assert any(g in plain for g in gates), word


def test_no_plugin_verifies_a_secret_with_its_vendor(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify() calls the vendor's API: a bundle is collected offline and must never send a secret."""
    from detect_secrets.plugins.base import BasePlugin

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("verify called")

    monkeypatch.setattr(BasePlugin, "verify", refuse)
    assert (
        scrub("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc and AKIAZ7XQ2LM9RK8TB1YS")
        == f"stripe {MASK} and {MASK}"
    )


@pytest.mark.parametrize(
    "line",
    [
        "I0624 22:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-adb24b25-1db1-436e-d958-ddee5da83d07; marking device as unhealthy.",
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        'Container image "nvcr.io/nvidia/k8s-device-plugin:v0.17.0" already present on machine',
        "0/16 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}, key=nvidia.com/gpu",
        '{"level":"info","msg":"MIG config applied","device":"MIG-5c1e7d2a-9f3b-5e8a-b1c4-2d6f8a0e3b7c"}',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)",
    ],
)
def test_evidence_lines_are_not_masked(line: str) -> None:
    assert scrub(line) == line


def test_the_flags_and_words_the_walk_reads_survive_a_command_line() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "srv", "namespace": "ml"},
        "spec": {
            "containers": [
                {
                    "name": "vllm",
                    "image": "example.com/llm:1",
                    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "args": ["--gpu-memory-utilization", "0.95", "--api-key", "K3yK3yK3y", "--model", "m/x"],
                },
                {
                    "name": "sglang",
                    "image": "example.com/llm:1",
                    "command": [
                        "sh",
                        "-c",
                        "python3 -m sglang.launch_server --mem-fraction-static=0.8 --api-key Zz9Zz9",
                    ],
                },
            ]
        },
    }
    masked = mask_object(pod)
    assert reservation_args(masked) == reservation_args(pod) != []
    assert recognise(masked).server == recognise(pod).server
    text = str(masked)
    assert "K3yK3yK3y" not in text and "Zz9Zz9" not in text and "m/x" not in text


def test_a_shell_script_keeps_its_programs_and_loses_its_values() -> None:
    script = "set -e\nexport TOKEN=abc123\nmysql -uroot -pS3cr3t db && vllm serve m --api-key K9 | tee log\n"
    out = mask_script(script)
    for kept in ("set -e", "export TOKEN=", "mysql", "vllm", "--api-key", "tee"):
        assert kept in out, kept
    for gone in ("abc123", "S3cr3t", "K9"):
        assert gone not in out, gone
    assert mask_argv(["bash", "-lc", "curl -H 'Authorization: Bearer Xy9' https://x"], program=True)[2] == (
        f"curl -H {MASK} {MASK}"
    )


@pytest.mark.parametrize(
    "chunk", ["api_key", "api_key ", 'secret"', "password: '", "//a/_authToken=", "pass "]
)
def test_the_detector_is_linear_on_hostile_lines(chunk: str) -> None:
    """detect-secrets' keyword regexes are quadratic on a long line of their words (0.9 s for
    2 KB of `api_key…`): long lines are windowed, word runs cut, keyword lines pre-tested by RE2."""
    import time

    from tests.hostile_text import hostile

    took = []
    for size in (32 * 1024, 64 * 1024):
        text = hostile(chunk, size)
        started = time.thread_time()
        scrub(text)
        took.append(time.thread_time() - started)
    assert took[1] < 2.0, took
    assert took[1] < 3 * took[0] + 0.05, took  # twice the text, about twice the time
