"""Which pods are inference servers that reserve GPU memory up front (spec/findings.md, layer 4).

One recogniser for every reader: layer 4 (a pod walk and a node walk) asks `recognise` about a
pod, with the server series the telemetry read found for it. A pod is a server when it has
vLLM, SGLang or TGI series, or when one of its containers' image, command, args or shell script
names a server — also a script file the command names when that file comes from a ConfigMap the
pod mounts (read through the cluster Protocol; one read per ConfigMap, cached for the walk).

The servers' own overload signals are read in layers/facts/servermetrics.py.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping

import msgspec

from layers.facts import objects as o
from layers.sources import K8sObject, SourceError

KSERVE_LABEL = "serving.kserve.io/inferenceservice"
NIM_IMAGES = "nvcr.io/nim/"

# (server, what names it). Plain words and alternations of literals: linear on any text.
SERVERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vLLM", re.compile(r"vllm", re.IGNORECASE)),
    ("SGLang", re.compile(r"sglang|--mem-fraction-static", re.IGNORECASE)),
    ("TGI", re.compile(r"text-generation-inference|text-generation-launcher", re.IGNORECASE)),
    ("Triton", re.compile(r"tritonserver", re.IGNORECASE)),
    ("TensorRT-LLM", re.compile(r"trtllm-serve|tensorrt_llm", re.IGNORECASE)),
    ("llama.cpp", re.compile(r"llama-server", re.IGNORECASE)),
)
# A word of a command line that may name a script file: split on shell punctuation and space.
_WORD_SPLIT = re.compile(r"[\s;&|()<>`'\"=]+")
_SCRIPT_CAP = 256 * 1024  # a script read from a ConfigMap is scanned up to this many characters


class Server(msgspec.Struct, frozen=True):
    """A recognised inference server: which one, and the evidence that says so."""

    name: str
    why: str


class Recognition(msgspec.Struct):
    """What `recognise` concluded, and what it could not read on the way (evidence for the layer)."""

    server: Server | None = None
    notes: list[str] = msgspec.field(default_factory=list)
    reservation: list[str] = msgspec.field(default_factory=list)  # `mem_fraction_static = 0.9 (…)` lines


ConfigMapRead = Callable[[str, str], K8sObject | None]


def name_in(text: str) -> str | None:
    """The inference server a text (an image, a command word, a script) names, if any."""
    for name, pattern in SERVERS:
        if pattern.search(text):
            return name
    return None


def _words(c: Mapping[str, object]) -> list[str]:
    command = c.get("command") or []
    args = c.get("args") or []
    return [
        str(x)
        for x in (*(command if isinstance(command, list) else []), *(args if isinstance(args, list) else []))
    ]


def recognise(
    pod: K8sObject,
    series: Iterable[str] = (),
    read_configmap: ConfigMapRead | None = None,
) -> Recognition:
    """Is the pod an inference server that reserves memory up front, and why.

    `series`: the servers whose series the pod has ("vLLM", "SGLang", "TGI"), strongest evidence
    first. `read_configmap(namespace, name)` reads a ConfigMap the pod mounts (None: not found);
    it may raise SourceError, which becomes a note, never an exception.
    """
    out = Recognition(reservation=reservation_args(pod))
    for exporter in series:
        out.server = Server(exporter, f"the pod exports {exporter} metrics")
        return out
    if o.labels(pod).get(KSERVE_LABEL):
        out.server = Server("KServe", f"the pod is labelled {KSERVE_LABEL}={o.labels(pod)[KSERVE_LABEL]}")
        return out
    containers = o.containers(pod)
    for c in containers:
        image = str(c.get("image", ""))
        if NIM_IMAGES in image:
            out.server = Server("NIM", f"container {c.get('name')} runs NIM image {image!r}")
            return out
        for word in [image, *_words(c)]:
            named = name_in(word)
            if named:
                out.server = Server(named, f"container {c.get('name')} runs {word!r}")
                return out
    if read_configmap is not None:
        out.server = _from_scripts(pod, containers, read_configmap, out.notes)
    return out


# --- script files from ConfigMaps ------------------------------------------------------------


class _Source(msgspec.Struct, frozen=True):
    """Where a container finds ConfigMap files: a directory (key -> relative path) or one file."""

    configmap: str
    mount: str  # the mount path in the container
    items: Mapping[str, str]  # key -> path under the mount; empty: every key, under its own name
    sub_path: str = ""  # a single-file mount: the path inside the volume it shows


def _configmap_volumes(pod: K8sObject) -> dict[str, list[tuple[str, Mapping[str, str]]]]:
    """volume name -> [(ConfigMap, key -> path)], projected volumes' ConfigMap sources included."""
    out: dict[str, list[tuple[str, Mapping[str, str]]]] = {}
    for v in (pod.get("spec") or {}).get("volumes") or []:
        sources = []
        if isinstance(v.get("configMap"), dict):
            sources.append(v["configMap"])
        for s in ((v.get("projected") or {}).get("sources")) or []:
            if isinstance(s, dict) and isinstance(s.get("configMap"), dict):
                sources.append(s["configMap"])
        for cm in sources:
            items = {
                str(i.get("key", "")): str(i.get("path", "")) for i in cm.get("items") or [] if i.get("key")
            }
            if cm.get("name"):
                out.setdefault(str(v.get("name", "")), []).append((str(cm["name"]), items))
    return out


def _sources(pod: K8sObject, c: Mapping[str, object]) -> list[_Source]:
    volumes = _configmap_volumes(pod)
    out = []
    mounts = c.get("volumeMounts") or []
    for m in mounts if isinstance(mounts, list) else []:
        for configmap, items in volumes.get(str(m.get("name", "")), []):
            out.append(_Source(configmap, str(m.get("mountPath", "")), items, str(m.get("subPath") or "")))
    return out


def _candidates(words: Iterable[str]) -> list[str]:
    """The words of a command line that could be a file: they have a dot or a slash in them."""
    out: list[str] = []
    for word in words:
        for token in _WORD_SPLIT.split(word):
            if token and ("." in token or "/" in token) and not token.startswith("-") and token not in out:
                out.append(token)
    return out


def _key_for(token: str, src: _Source, keys: Iterable[str], workdir: str) -> str | None:
    """The ConfigMap key a command-line token names through this mount, if it does."""
    path = token if token.startswith("/") else posixpath.normpath(posixpath.join(workdir or "/", token))
    base = posixpath.basename(token)
    files = {k: (src.items.get(k) or k) for k in keys if not src.items or k in src.items}
    if src.sub_path:
        # A one-file mount: the mount path is the file; the subPath is its path in the volume.
        if path != posixpath.normpath(src.mount) and base != posixpath.basename(src.mount):
            return None
        return next((k for k, p in files.items() if p == src.sub_path), None)
    root = posixpath.normpath(src.mount)
    for key, rel in files.items():
        if path == posixpath.join(root, rel) or (
            "/" not in token.lstrip("./") and base == posixpath.basename(rel)
        ):
            return key
    return None


def _from_scripts(
    pod: K8sObject, containers: list[dict[str, object]], read: ConfigMapRead, notes: list[str]
) -> Server | None:
    ns = o.namespace(pod) or "default"
    read_once: dict[str, K8sObject | None] = {}
    for c in containers:
        tokens = _candidates(_words(c))
        if not tokens:
            continue
        for src in _sources(pod, c):
            if src.configmap not in read_once:
                try:
                    read_once[src.configmap] = read(ns, src.configmap)
                    if read_once[src.configmap] is None:
                        # A bundle holds no ConfigMaps; a live cluster may have lost it: either way unread.
                        notes.append(
                            f"ConfigMap {ns}/{src.configmap} (mounted at {src.mount} in container {c.get('name')}) "
                            "was not found, so the script its command runs was not read"
                        )
                except SourceError as err:
                    read_once[src.configmap] = None
                    notes.append(
                        f"could not read ConfigMap {ns}/{src.configmap} (mounted at {src.mount} in container "
                        f"{c.get('name')}) to see what its script starts: {err.hint() or err}"
                    )
            cm = read_once[src.configmap]
            if cm is None:
                continue
            data = cm.get("data") or {}
            for token in tokens:
                key = _key_for(token, src, data.keys(), str(c.get("workingDir") or ""))
                if key is None:
                    continue
                name = name_in(str(data.get(key, ""))[:_SCRIPT_CAP])
                if name:
                    return Server(
                        name,
                        f"container {c.get('name')} runs {token!r}, a script from ConfigMap "
                        f"{ns}/{src.configmap} (key {key}) that starts {name}",
                    )
    return None


# --- what each server exports, and what to scrape ----------------------------------------------

# The server's own overload signal, in words, and where to scrape it when it is missing.
OVERLOAD = {
    "vLLM": "preemptions",
    "SGLang": "retractions or a backlog in its queue",
    "TGI": "a backlog in its queue",
}
SCRAPE = {
    "vLLM": "the server's /metrics (vllm:num_preemptions_total, vllm:cache_config_info; port 8000 by default)",
    "SGLang": "the server's /metrics (start it with --enable-metrics; sglang:num_retracted_requests_total or "
    "sglang:num_retracted_reqs, and sglang:num_queue_reqs; port 30000 by default)",
    "TGI": "the router's /metrics on its HTTP port (tgi_queue_size)",
    "NIM": "the NIM's metrics endpoint, so its engine's series (vllm:num_preemptions_total for a vLLM "
    "backend) carry the pod's labels",
}
_ANY_SIGNAL = (
    "vllm:num_preemptions_total, sglang:num_retracted_requests_total / sglang:num_queue_reqs or tgi_queue_size: "
    "gpubot reads only these servers' overload series"
)
# The server's own reservation setting on its command line, for the evidence.
_RESERVATION = re.compile(
    r"--(gpu-memory-utilization|mem-fraction-static|cuda-memory-fraction)[= ]+([0-9.]+)"
)


def scrape_hint(server: str) -> str:
    """What to scrape so the server's overload signal can be checked."""
    return SCRAPE.get(server, _ANY_SIGNAL)


def reservation_args(pod: K8sObject) -> list[str]:
    """`--gpu-memory-utilization 0.9` (vLLM), `--mem-fraction-static 0.9` (SGLang),
    `--cuda-memory-fraction 0.9` (TGI) as written in a container's command line."""
    out = []
    for c in o.containers(pod):
        for m in _RESERVATION.finditer(" ".join(_words(c))[:_SCRIPT_CAP]):
            out.append(f"{m.group(1).replace('-', '_')} = {m.group(2)} (container {c.get('name')}'s args)")
    return out


def reservation_args_of(recognition: Recognition) -> list[str]:
    """The reservation settings the recognised pod's command line gives (set by `recognise`)."""
    return list(recognition.reservation)
