"""Masking secrets in what a must-gather collects: by structure in Kubernetes objects, by a
maintained detector in their strings (issue 20), default-deny in free text (issue 28).

A bundle leaves the cluster (it is handed to a vendor, attached to a Slack thread), so nothing
that authenticates may ride along. A denylist of key names cannot win (`-p`, `--pw`, `sh -c`,
`creds`, `client-key-data` all passed one), so structure decides, whatever the names say:

- every env `value` is masked (`valueFrom` only names a Secret or a field and is kept), but for
  a few GPU-stack settings whose values are the walk's evidence (`NVIDIA_VISIBLE_DEVICES`,
  `MIG_STRATEGY`, the driver manager's `ENABLE_GPU_POD_EVICTION` …) when each has the shape its
  name promises (a device list, a strategy, a switch);
- `command` and `args`, anywhere (containers, probes' `exec`, ClusterPolicy `spec.driver.args`):
  every value masked but the program, plain flags and what the walk reads (bot/actions/argv.py);
- every probe and lifecycle `httpHeaders` value;
- every annotation value, but for a short allowlist of keys known harmless and read by the
  walk (`ALLOWED_ANNOTATIONS`); JSON or YAML in one is parsed and masked leaf by leaf, and
  `kubectl.kubernetes.io/last-applied-configuration` is masked as the object it is;
- a ConfigMap's values: JSON or YAML documents leaf by leaf, any other text as a script;
- a string field whose key ends in a secret-ish word (`password:`);
- `metadata.managedFields` are structure only (field names, managers, times) and are kept on
  Nodes, where the walk reads who cordoned (layers/facts/cordons.py); on other kinds dropped.

Every string then goes through the detector (bot/actions/detector.py: detect-secrets' plugins
and the shapes none covers). Free-text fields (`message`, `note`: events, conditions, container
states) are then masked default-deny by the collector (`mask_messages` with
bot/actions/freetext.py), knowing the names the objects hold (`object_names`). Secret objects
are never read; one met is reduced to its metadata.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import yaml

from bot.actions.argv import mask_argv, mask_script
from bot.actions.detector import MASK, scrub
from layers import remedy as rm
from layers.facts.cordons import DRIVER_MANAGER_SWITCHES
from layers.facts.owners import OWNER_ANNOTATIONS

__all__ = ["ALLOWED_ANNOTATIONS", "MASK", "mask_object", "mask_text"]

mask_text = scrub  # the one text masking of the bundle's modules

_HARMLESS = frozenset({"true", "false", "null", "none", "yes", "no", "", "redacted", MASK.lower()})
# A key (or flag, without its dashes) that ends in a secret-ish word.
_SECRET_KEY = re.compile(
    r"(?i)(?:password|passwd|pass|pwd|pw|passphrase|secret|token|credentials?|creds?|apikey|api[_-]?key|bearer|"
    r"(?:access|private|client|auth|account|app|signing|master)[_-]?key|dsn|webhook[_-]?url|cookie|auth)"
)
# GPU-stack settings whose values are the diagnosis's evidence, never credentials, each with the
# shape its value must have to be kept: a value that is not what its name promises (an
# `NVIDIA_VISIBLE_DEVICES` that is no device list, issue 28) is masked like any other.
_DEVICE = r"(?:[0-9]{1,3}(?::[0-9]{1,3})?|(?:GPU|MIG)-[0-9a-fA-F-]{8,40}(?:/[0-9]{1,3}){0,2})"
_VERSION = r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,3}"
_SWITCH = r"true|false|TRUE|FALSE|True|False|0|1|yes|no"
_EVIDENCE_SHAPES: dict[str, str] = {
    "NVIDIA_VISIBLE_DEVICES": rf"all|none|void|{_DEVICE}(?:,{_DEVICE}){{0,63}}",
    "NVIDIA_MIG_CONFIG_DEVICES": rf"all|none|{_DEVICE}(?:,{_DEVICE}){{0,63}}",
    "NVIDIA_MIG_MONITOR_DEVICES": rf"all|none|{_DEVICE}(?:,{_DEVICE}){{0,63}}",
    "NVIDIA_DRIVER_CAPABILITIES": r"(?:all|compute|utility|graphics|video|display|compat32|ngx)"
    r"(?:,(?:all|compute|utility|graphics|video|display|compat32|ngx)){0,7}",
    "NVIDIA_REQUIRE_CUDA": rf"(?:(?:cuda|driver|arch)[<>=]{{1,2}}{_VERSION}|brand=[a-z]{{2,12}})"
    rf"(?:[ ,](?:(?:cuda|driver|arch)[<>=]{{1,2}}{_VERSION}|brand=[a-z]{{2,12}})){{0,40}}",
    "MIG_STRATEGY": r"none|single|mixed",
    "DEVICE_LIST_STRATEGY": r"(?:envvar|volume-mounts|cdi-annotations|cdi-cri)(?:,(?:envvar|volume-mounts|cdi-annotations|cdi-cri)){0,3}",
    "DEVICE_ID_STRATEGY": r"uuid|index",
    "FAIL_ON_INIT_ERROR": _SWITCH,
    "PASS_DEVICE_SPECS": _SWITCH,
    "DRIVER_VERSION": rf"{_VERSION}(?:-[0-9a-z.]{{1,20}})?",
    "CUDA_VERSION": _VERSION,
    "CONTAINER_RUNTIME": r"containerd|docker|crio|cri-o",
    "RUNTIME": r"containerd|docker|crio|cri-o",
    "OPERATOR_NAMESPACE": r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?",
    **dict.fromkeys(
        DRIVER_MANAGER_SWITCHES, _SWITCH
    ),  # read by layers/facts/cordons.py `driver_manager_uncordons`
}
_EVIDENCE_ENV = {name: re.compile(shape) for name, shape in _EVIDENCE_SHAPES.items()}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Annotations whose values are kept (and still scanned as text): what the walk reads on nodes
# (gpubot's cordon marks, the GPU Operator's `nvidia.com/…` upgrade state, NVSentinel's
# quarantine marks, Karpenter's and the autoscaler's "leave it") and kubectl's restart time.
ALLOWED_ANNOTATIONS = frozenset(
    {
        *rm.CORDON_ANNOTATIONS,
        "kubectl.kubernetes.io/restartedAt",
        "kubectl.kubernetes.io/default-container",
        "deprecated.daemonset.template.generation",
        *OWNER_ANNOTATIONS,  # the owners' own annotations (layers/facts/owners.py)
        "cluster-autoscaler.kubernetes.io/scale-down-disabled",
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
        "node.alpha.kubernetes.io/ttl",
        "volumes.kubernetes.io/controller-managed-attach-detach",
    }
)
ALLOWED_ANNOTATION_PREFIXES = ("nvidia.com/", "gpubot/")


def _secret_key(key: str) -> bool:
    """Whether a field name ends in a secret-ish word (`db_password`, `example.com/api-token`)."""
    last = key.rsplit("/", 1)[-1].split(".")[-1]
    return any(m.end() == len(last) for m in _SECRET_KEY.finditer(last[-40:]))


def _allowed_annotation(key: str) -> bool:
    return key in ALLOWED_ANNOTATIONS or key.startswith(ALLOWED_ANNOTATION_PREFIXES)


def _mask_env(env: list[Any]) -> None:
    for var in env:
        if not isinstance(var, dict) or not isinstance(var.get("value"), str):
            continue  # valueFrom only names a Secret or a field
        value = var["value"]
        shape = _EVIDENCE_ENV.get(str(var.get("name")))
        if value and not (shape is not None and shape.fullmatch(value) and scrub(value) == value):
            var["value"] = MASK


def _leaves(node: Any) -> Any:
    """A parsed document with every string leaf masked (its keys, numbers and booleans kept)."""
    if isinstance(node, dict):
        return {k: _leaves(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_leaves(v) for v in node]
    if isinstance(node, str):
        return node if node.lower() in _HARMLESS else MASK
    return node


def _document(text: str) -> tuple[str, Any] | None:
    """("json"|"yaml", the parsed mapping or list) when the text is one, else None."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return "json", json.loads(text)
        except ValueError:
            pass
    if ":" in text or stripped.startswith("- "):
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        if isinstance(parsed, (dict, list)):
            return "yaml", parsed
    return None


def _dump(form: str, tree: Any, original: str) -> str:
    if form == "json":
        compact = "\n" not in original.strip()
        return json.dumps(tree, separators=(",", ":")) if compact else json.dumps(tree, indent=2) + "\n"
    return str(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, width=120))


def _mask_annotation(key: str, value: str) -> str:
    if key == LAST_APPLIED:
        try:
            applied = json.loads(value)
        except ValueError:
            return MASK
        if not isinstance(applied, dict):
            return MASK
        return json.dumps(mask_object(applied), separators=(",", ":"))
    if _allowed_annotation(key):
        return scrub(value)
    if value.lower() in _HARMLESS:
        return value
    doc = _document(value)
    if doc is not None:
        return _dump(doc[0], _leaves(doc[1]), value)
    return MASK


def _mask_configmap_value(value: str) -> str:
    """A ConfigMap file: a JSON or YAML document leaf by leaf, any other text as a script."""
    doc = _document(value)
    if doc is not None:
        return _dump(doc[0], _leaves(doc[1]), value)
    return mask_script(value)


def _mask_commands(node: dict[str, Any]) -> None:
    """`command` and `args` of one container (or probe `exec`), masked as one command line, so
    `command: [sh, -c]` with `args: [script]` masks the script as a script."""
    command = node.get("command") if isinstance(node.get("command"), list) else None
    args = node.get("args") if isinstance(node.get("args"), list) else None
    if command is not None and args is not None:
        both = mask_argv([*command, *args], program=True)
        node["command"], node["args"] = both[: len(command)], both[len(command) :]
    elif command is not None:
        node["command"] = mask_argv(command, program=True)
    elif args is not None:
        node["args"] = mask_argv(args, program=False)


def _mask_tree(node: Any) -> Any:
    if isinstance(node, dict):
        _mask_commands(node)
        for key, value in list(node.items()):
            if key in ("command", "args") and isinstance(value, list):
                continue  # masked above, each kept word already scrubbed
            if key == "env" and isinstance(value, list):
                _mask_env(value)
            if key == "httpHeaders" and isinstance(value, list):
                for header in value:
                    if isinstance(header, dict) and isinstance(header.get("value"), str):
                        header["value"] = MASK
            if key == "annotations" and isinstance(value, dict):
                for name, text in list(value.items()):
                    if isinstance(text, str):
                        value[name] = _mask_annotation(str(name), text)
                continue
            if isinstance(value, str):
                secret = _secret_key(str(key)) and value.lower() not in _HARMLESS
                node[key] = MASK if secret else scrub(value)
            else:
                _mask_tree(value)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            if isinstance(value, str):
                node[i] = scrub(value)
            else:
                _mask_tree(value)
    return node


def mask_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of a Kubernetes object fit to leave the cluster (see the module's docstring)."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict) and out.get("kind") != "Node":
        meta.pop("managedFields", None)
    kind = out.get("kind")
    if kind == "Secret":
        out.pop("data", None)
        out.pop("stringData", None)
    if kind == "ConfigMap":
        data = out.get("data")
        if isinstance(data, dict):
            out["data"] = {k: _mask_configmap_value(v) if isinstance(v, str) else v for k, v in data.items()}
        if isinstance(out.get("binaryData"), dict):
            out["binaryData"] = dict.fromkeys(out["binaryData"], MASK)
        # Its values are masked whole above: the tree walk only scans the rest.
        data_kept = out.pop("data", None)
        _mask_tree(out)
        if data_kept is not None:
            out["data"] = data_kept
        return out
    return _mask_tree(out)


# --- free text inside objects (issue 28): messages are masked default-deny (bot/actions/freetext.py)

# The keys whose values are free text a cluster wrote: Events' `message` and `note`, conditions'
# and container states' `message`, a pod's `status.message`.
FREE_TEXT_KEYS = frozenset({"message", "note"})
_NAME_KEYS = frozenset(
    {"name", "namespace", "uid", "nodeName", "image", "imageID", "containerID", "hostname"}
)


def object_names(obj: Any) -> list[str]:
    """What a masked object holds by name, for its bundle's free text to keep: object, container
    and node names, namespaces, UIDs, images and their IDs, label keys and values, nodeInfo."""
    out: list[str] = []
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str):
                    if key in _NAME_KEYS:
                        out.append(value)
                elif key in ("labels", "nodeInfo") and isinstance(value, dict):
                    out += [str(k) for k in value] + [v for v in value.values() if isinstance(v, str)]
                elif key not in ("annotations", "env", "args", "command", "data", "managedFields"):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return [n for n in out if MASK not in n]


def mask_messages(obj: Any, mask: Any) -> None:
    """Every free-text field (FREE_TEXT_KEYS) of a masked object through `mask`, in place."""
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in FREE_TEXT_KEYS and isinstance(value, str):
                    node[key] = mask(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
