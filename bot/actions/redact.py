"""Masking secrets in what a must-gather collects: by structure in Kubernetes objects, by pattern in text.

A bundle leaves the cluster (it is handed to a vendor, attached to a Slack
thread), so nothing that authenticates may ride along. Where there is
structure it decides, whatever the names say:

- every env `value` of every container, init and ephemeral container is
  masked (`DB_PASS`, `KAGGLE_KEY`, `SENTRY_DSN` … do not say "token"), except
  a few GPU-stack settings whose values are evidence (`NVIDIA_VISIBLE_DEVICES`,
  `MIG_STRATEGY`, `DRIVER_VERSION` …) and still look harmless;
- in `command` and `args`, the value after a secret-looking flag (`--token X`,
  `--api-key=X`, `-u user:pass`);
- a string field whose key ends in a secret-ish word (`password:`);
- an annotation holding JSON is parsed and masked the same way.

Everything else, and every string above, then goes through the one text
masker (bot/ops/secrets.py: token prefixes, JWTs, PEM blocks, URL passwords,
`key=value`). Secret objects are never read at all; a pod's `secretKeyRef`
only names a Secret and is kept.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from bot.ops.secrets import MASK, mask_text

__all__ = ["MASK", "mask_object", "mask_text"]

_HARMLESS = frozenset({"true", "false", "null", "none", "yes", "no", "", "redacted", MASK.lower()})
# A key (or flag, without its dashes) that ends in a secret-ish word.
_SECRET_KEY = re.compile(
    r"(?i)(?:password|passwd|pass|pwd|passphrase|secret|token|credentials?|apikey|api[_-]key|"
    r"(?:access|private|client|auth|account|app|signing|master)[_-]?key|dsn|webhook[_-]?url|cookie|auth)"
)
_FLAG = re.compile(r"-{1,2}([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(=.*)?", re.S)
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user"})  # curl's user:password
# GPU-stack settings whose values are the diagnosis's evidence, never credentials.
_EVIDENCE_ENV = frozenset(
    {
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_REQUIRE_CUDA",
        "MIG_STRATEGY",
        "DEVICE_LIST_STRATEGY",
        "DEVICE_ID_STRATEGY",
        "FAIL_ON_INIT_ERROR",
        "PASS_DEVICE_SPECS",
        "DRIVER_VERSION",
        "CUDA_VERSION",
        "CONTAINER_RUNTIME",
        "RUNTIME",
        "OPERATOR_NAMESPACE",
    }
)
_EVIDENCE_VALUE = re.compile(r"[A-Za-z0-9._,:=/+-]{0,80}")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Annotations that replay a whole manifest, env values included.
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _secret_key(key: str) -> bool:
    """Whether a field name ends in a secret-ish word (`db_password`, `example.com/api-token`)."""
    last = key.rsplit("/", 1)[-1].split(".")[-1]
    return any(m.end() == len(last) for m in _SECRET_KEY.finditer(last[-40:]))


def _mask_env(env: list[Any]) -> None:
    for var in env:
        if not isinstance(var, dict) or not isinstance(var.get("value"), str):
            continue  # valueFrom only names a Secret or a field
        value = var["value"]
        evidence = str(var.get("name")) in _EVIDENCE_ENV and _EVIDENCE_VALUE.fullmatch(value)
        if value and not (evidence and mask_text(value) == value):
            var["value"] = MASK


def _mask_argv(argv: list[Any]) -> None:
    """The value after (or in) a secret-looking flag; every argument is text-masked after."""
    after_secret = False
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            after_secret = False
            continue
        if after_secret and not arg.startswith("-"):
            argv[i] = MASK
            after_secret = False
            continue
        after_secret = False
        flag = _FLAG.fullmatch(arg)
        if flag is None:
            continue
        secret = arg in _USER_FLAGS or _secret_key(flag.group(1))
        if secret and flag.group(2) is not None:
            argv[i] = arg[: flag.start(2) + 1] + MASK
        else:
            after_secret = secret


def _mask_annotation(value: str) -> str:
    """JSON in an annotation is masked as structure (then as text)."""
    if value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return mask_text(value)
        return json.dumps(_mask_tree(parsed), separators=(",", ":"))
    return mask_text(value)


def _mask_tree(node: Any) -> Any:
    if isinstance(node, dict):
        for lists in _CONTAINER_LISTS:
            containers = node.get(lists)
            for container in containers if isinstance(containers, list) else ():
                if isinstance(container, dict):
                    for argv in ("command", "args"):
                        if isinstance(container.get(argv), list):
                            _mask_argv(container[argv])
        for key, value in list(node.items()):
            if key == "env" and isinstance(value, list):
                _mask_env(value)
            if key == "annotations" and isinstance(value, dict):
                for name, text in list(value.items()):
                    if isinstance(text, str):
                        value[name] = MASK if _secret_key(str(name)) else _mask_annotation(text)
                continue
            if isinstance(value, str):
                secret = _secret_key(str(key)) and value.lower() not in _HARMLESS
                node[key] = MASK if secret else mask_text(value)
            else:
                _mask_tree(value)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            if isinstance(value, str):
                node[i] = mask_text(value)
            else:
                _mask_tree(value)
    return node


def mask_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of a Kubernetes object fit to leave the cluster (see the module's docstring).

    Drops managedFields and last-applied-configuration. A Secret object itself is
    reduced to its metadata.
    """
    out = copy.deepcopy(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            for key in _DROPPED_ANNOTATIONS:
                annotations.pop(key, None)
    if out.get("kind") == "Secret":
        out.pop("data", None)
        out.pop("stringData", None)
    return _mask_tree(out)
