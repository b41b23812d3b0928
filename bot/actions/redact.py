"""Masking secrets in what a must-gather collects: log text and Kubernetes objects.

A bundle leaves the cluster (it is handed to a vendor, attached to a Slack
thread), so nothing that authenticates may ride along: bearer tokens,
passwords, cloud keys, private keys, credentials in URLs, and environment
values that look like secrets. Secret objects are never read at all; a pod's
`secretKeyRef` only names a Secret and is kept.
"""

from __future__ import annotations

import copy
import re
from typing import Any

MASK = "<masked>"  # a valid YAML plain scalar, unlike `***` (an alias)

_KEYWORD = (
    r"(?:password|passwd|pwd|passphrase|secret|token|credentials?|"
    r"(?:api|access|secret|private|client)[_-]?key|auth[_-]?key)"
)
# key=value / key: value / "key": "value" where the key ends in a secret-ish word. Anchored on the
# word itself (the rest of the key is left as it is): a leading `[\w.-]*` made this quadratic on big logs.
_KEY_VALUE = re.compile(r"(?i)(" + _KEYWORD + r")([\"']?[ \t]*[:=][ \t]*[\"']?)([^\s\"',;&}\]]+)")
_AUTH_HEADER = re.compile(
    r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(basic|bearer|token|negotiate)\s+)?[^\s\"',]+"
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@")
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_VENDOR_TOKENS = re.compile(
    r"\b(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{20,})"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S
)
_HARMLESS = frozenset({"true", "false", "null", "none", "yes", "no", "", MASK.lower()})

_SECRET_NAME = re.compile(r"(?i)" + _KEYWORD)
# Annotations that replay a whole manifest, env values included.
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _key_value(m: re.Match[str]) -> str:
    if m.group(3).lower() in _HARMLESS:
        return m.group(0)
    return m.group(1) + m.group(2) + MASK


# Cheap substring tests that gate each pattern: most operand logs contain none of these, and a
# regex pass over a 5 MB log costs tens of milliseconds each.
_KEY_HINTS = ("pass", "pwd", "secret", "token", "credential", "key")
_AWS_HINTS = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA")
_VENDOR_HINTS = (
    "xox",
    "xapp-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "hf_",
    "glpat-",
    "sk-",
)


def mask_text(text: str) -> str:
    """The text with every credential-shaped value replaced by <masked>."""
    low = text.lower()
    if "private key-----" in low:
        text = _PRIVATE_KEY.sub("-----BEGIN PRIVATE KEY-----" + MASK + "-----END PRIVATE KEY-----", text)
    if "authorization" in low:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + MASK, text)
    if "bearer" in low:
        text = _BEARER.sub(lambda m: m.group(1) + " " + MASK, text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + ":" + MASK + "@", text)
    if any(h in low for h in _KEY_HINTS):
        text = _KEY_VALUE.sub(_key_value, text)
    if any(h in text for h in _AWS_HINTS):
        text = _AWS_KEY_ID.sub(MASK, text)
    if "eyJ" in text:
        text = _JWT.sub(MASK, text)
    if any(h in text for h in _VENDOR_HINTS):
        text = _VENDOR_TOKENS.sub(MASK, text)
    return text


def _mask_env(env: list[Any]) -> None:
    for var in env:
        if not isinstance(var, dict):
            continue
        value = var.get("value")
        if (
            isinstance(value, str)
            and _SECRET_NAME.search(str(var.get("name", "")))
            and value.lower() not in _HARMLESS
        ):
            var["value"] = MASK


def _mask_tree(node: Any) -> Any:
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key == "env" and isinstance(value, list):
                _mask_env(value)
            if isinstance(value, str):
                if (
                    _SECRET_NAME.fullmatch(str(key).rsplit("/", 1)[-1].split(".")[-1])
                    and value.lower() not in _HARMLESS
                ):
                    node[key] = MASK
                else:
                    node[key] = mask_text(value)
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
    """A copy of a Kubernetes object fit to leave the cluster.

    Drops managedFields and last-applied-configuration, masks env values whose
    name says secret, and masks credential-shaped text anywhere. References to
    Secrets (`secretKeyRef`, `envFrom.secretRef`, volumes) keep only the names
    they already are. A Secret object itself is reduced to its metadata.
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
