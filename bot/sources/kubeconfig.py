"""A kubeconfig into the official client's Configuration: plain credentials here, the rest by the client.

The client's loader (kubernetes.config.kube_config) imports oauthlib, requests-oauthlib
and the pydantic ApiClient when it loads, ~0.2 s of CPU: more than a `gpubot why` spends
walking a small cluster. It is needed for what takes code to authenticate: auth
providers (oidc, gcp, azure), exec plugins (EKS, GKE, AKS), basic auth, impersonation,
a KUBECONFIG list of files to merge. A single file whose context's user has only a token,
a token file or a client certificate, and whose cluster only a server, a CA,
insecure-skip-tls-verify, tls-server-name and proxy-url, is read here into the same
Configuration fields the client's loader sets (`_load_cluster_info`, `_load_user_token`);
every other kubeconfig goes to the client's loader. TLS, proxies, retries and the
Authorization header stay the client's (Configuration, rest.RESTClientObject).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml

from bot.sources.kubeclient import ConfigException, Configuration, official_kube_config
from layers.sources import SourceError

_PLAIN_CLUSTER = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
        "extensions",
    }
)
_PLAIN_USER = frozenset(
    {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)
_LOAD_ERRORS = (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError)
_written: list[str] = []


def load_kubeconfig(cfg: Configuration, path: str, context: str | None) -> str:
    """Load `path` (a KUBECONFIG list is allowed) into cfg; returns the context used."""
    files = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
    readable = [f for f in files if os.path.isfile(f) and os.access(f, os.R_OK)]
    if not readable:
        raise SourceError(
            "bad_input", f"no readable kubeconfig at {path} (set KUBECONFIG or pass --kubeconfig)"
        )
    if len(files) == 1:
        try:
            with open(files[0], encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise SourceError("bad_input", f"kubeconfig {path} is not usable: {_first_line(err)}") from None
        if not isinstance(doc, dict):
            raise SourceError("bad_input", f"kubeconfig {path} is not usable: not a kubeconfig mapping")
        chosen = _choose(doc, path, context)
        cluster, user = _entry(doc, "clusters", "cluster", chosen), _entry(doc, "users", "user", chosen)
        if cluster is not None and user is not None and _plain(cluster, user):
            try:
                _fill(cfg, cluster, user, os.path.dirname(os.path.abspath(files[0])))
            except (OSError, ValueError, binascii.Error) as err:
                raise SourceError(
                    "bad_input", f"kubeconfig {path}, context {chosen}: {_first_line(err)}"
                ) from None
            return chosen
    return _official(cfg, path, context)


def _choose(doc: Mapping[str, Any], path: str, context: str | None) -> str:
    names = [str(c.get("name")) for c in doc.get("contexts") or () if isinstance(c, dict)]
    chosen = context or doc.get("current-context")
    if not chosen or chosen not in names:
        what = f"context {chosen!r} not found" if chosen else "no current context"
        raise SourceError(
            "bad_input", f"{what} in kubeconfig {path} (available: {', '.join(names) or 'none'})"
        )
    return str(chosen)


def _entry(doc: Mapping[str, Any], section: str, key: str, context: str) -> Mapping[str, Any] | None:
    """The context's cluster or user mapping; None when it is missing or misshapen (the client says why)."""
    ctx = next(
        (c.get("context") for c in doc["contexts"] if isinstance(c, dict) and c.get("name") == context), None
    )
    if not isinstance(ctx, dict):
        return None
    wanted = ctx.get(key)
    found = [e.get(key) for e in doc.get(section) or () if isinstance(e, dict) and e.get("name") == wanted]
    return found[0] if len(found) == 1 and isinstance(found[0], dict) else None


def _plain(cluster: Mapping[str, Any], user: Mapping[str, Any]) -> bool:
    """Credentials that need no code to use, in fields this reader knows."""
    return (
        isinstance(cluster.get("server"), str)
        and set(cluster) <= _PLAIN_CLUSTER
        and set(user) <= _PLAIN_USER
        and all(isinstance(v, str) for k, v in user.items())
        and all(
            isinstance(cluster.get(k, ""), str)
            for k in _PLAIN_CLUSTER - {"insecure-skip-tls-verify", "extensions"}
        )
    )


def _fill(cfg: Configuration, cluster: Mapping[str, Any], user: Mapping[str, Any], base: str) -> None:
    """What the client's loader sets for these fields, the same way (its `_set_config`)."""
    cfg.host = str(cluster["server"]).rstrip("/")
    if cfg.host.startswith("https"):
        cfg.ssl_ca_cert = _file_or_data(cluster, "certificate-authority", base)
        cfg.cert_file = _file_or_data(user, "client-certificate", base)
        cfg.key_file = _file_or_data(user, "client-key", base)
    if "insecure-skip-tls-verify" in cluster:
        cfg.verify_ssl = not cluster["insecure-skip-tls-verify"]
    if "tls-server-name" in cluster:
        cfg.tls_server_name = cluster["tls-server-name"]
    if "proxy-url" in cluster:
        cfg.proxy = cluster["proxy-url"]
    token = user.get("token")
    if "token" not in user and user.get("tokenFile"):
        with open(os.path.normpath(os.path.join(base, user["tokenFile"])), encoding="utf-8") as f:
            token = f.read()
    if token:
        cfg.api_key["BearerToken"] = f"Bearer {token}"


def _file_or_data(entry: Mapping[str, Any], key: str, base: str) -> str | None:
    """The path of `key`, or of a private temporary file holding `key-data` decoded (data wins)."""
    data = entry.get(f"{key}-data")
    if data:
        fd, name = tempfile.mkstemp(prefix="gpubot-kube-")
        if not _written:
            atexit.register(_remove_written)
        _written.append(name)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.standard_b64decode(data))
        return name
    if entry.get(key):
        path = os.path.normpath(os.path.join(base, entry[key]))
        if not os.path.isfile(path):
            raise OSError(f"File does not exist: {path}")
        return path
    return None


def _remove_written() -> None:
    for name in _written:
        with contextlib.suppress(OSError):
            os.remove(name)


def _official(cfg: Configuration, path: str, context: str | None) -> str:
    """The client's own loader, for every kubeconfig the reader above does not take."""
    loader = official_kube_config()
    try:
        contexts, current = loader.list_kube_config_contexts(config_file=path)
    except _LOAD_ERRORS as err:
        raise SourceError("bad_input", f"kubeconfig {path} is not usable: {_first_line(err)}") from None
    names = [str(c.get("name")) for c in contexts or []]
    chosen = context or (current or {}).get("name")
    if not chosen or chosen not in names:
        what = f"context {chosen!r} not found" if chosen else "no current context"
        raise SourceError(
            "bad_input", f"{what} in kubeconfig {path} (available: {', '.join(names) or 'none'})"
        )
    try:
        loader.load_kube_config(
            config_file=path, context=chosen, client_configuration=cfg, persist_config=False
        )
    except _LOAD_ERRORS as err:
        raise SourceError("bad_input", f"kubeconfig {path}, context {chosen}: {_first_line(err)}") from None
    return str(chosen)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
