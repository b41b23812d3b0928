"""bot/sources/kubeconfig.py fills the client's Configuration exactly as the client's own loader does.

For every kubeconfig shape the reader takes (token, token file, client certificate as files
or data, CA, insecure-skip-tls-verify, tls-server-name, proxy-url, relative paths, a context
that is not the current one), the fields the transport uses are compared with what
`kubernetes.config.load_kube_config` sets from the same file; the shapes it does not take
(exec plugins, basic auth, merged KUBECONFIG lists) go to that loader and still work.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.sources import kubeconfig
from bot.sources.kube import KubeCluster
from bot.sources.kubeclient import Configuration, official_kube_config
from bot.sources.opener import resolve_scenario
from bot.sources.scenario import build_sources, load_scenario
from layers.sources import SourceError
from tests.fakes.kube_api import TOKEN, FakeKubeAPI, serve


@pytest.fixture(scope="module")
def fake_kube() -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(resolve_scenario("xid79-fell-off-bus")))
    with serve(snapshot) as api:
        yield api


CA = "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBfakeClient\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIBfakeKey\n-----END PRIVATE KEY-----\n"


def b64(text: str) -> str:
    return base64.standard_b64encode(text.encode()).decode()


def doc(cluster: dict[str, Any], user: dict[str, Any], *, current: str = "main") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster},
            {"name": "other", "cluster": {"server": "https://other.example:6443/"}},
        ],
        "users": [{"name": "u", "user": user}, {"name": "nobody", "user": {"token": "other-token"}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "side", "context": {"cluster": "other", "user": "nobody"}},
        ],
        "current-context": current,
    }


SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "token over http": ({"server": "http://127.0.0.1:8080"}, {"token": "abc"}),
    "token, CA data, trailing slash": (
        {"server": "https://api.example:6443/", "certificate-authority-data": b64(CA)},
        {"token": "abc"},
    ),
    "relative token file and CA file": (
        {"server": "https://api.example:6443", "certificate-authority": "pki/ca.crt"},
        {"tokenFile": "secrets/token"},
    ),
    "client certificate as data": (
        {"server": "https://api.example:6443", "certificate-authority-data": b64(CA)},
        {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
    ),
    "client certificate as relative files": (
        {"server": "https://api.example:6443", "certificate-authority": "pki/ca.crt"},
        {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"},
    ),
    "insecure, tls-server-name, proxy-url": (
        {
            "server": "https://10.0.0.1:6443",
            "insecure-skip-tls-verify": True,
            "tls-server-name": "kubernetes.default",
            "proxy-url": "http://proxy.corp:3128",
        },
        {"token": "abc"},
    ),
    "no credentials": ({"server": "https://api.example:6443", "certificate-authority-data": b64(CA)}, {}),
}


def write(folder: Path, content: dict[str, Any]) -> str:
    (folder / "pki").mkdir(exist_ok=True)
    (folder / "secrets").mkdir(exist_ok=True)
    (folder / "pki" / "ca.crt").write_text(CA)
    (folder / "pki" / "client.crt").write_text(CERT)
    (folder / "pki" / "client.key").write_text(KEY)
    (folder / "secrets" / "token").write_text("from-a-file\n")
    path = folder / "config"
    path.write_text(json.dumps(content))
    return str(path)


def fields(cfg: Configuration) -> dict[str, Any]:
    """What the transport reads from a Configuration, with files compared by content."""

    def content(path: str | None) -> str | None:
        return Path(path).read_text() if path else None

    return {
        "host": cfg.host,
        "authorization": cfg.auth_settings().get("BearerToken", {}).get("value"),
        "ca": content(cfg.ssl_ca_cert),
        "cert": content(cfg.cert_file),
        "key": content(cfg.key_file),
        "verify_ssl": cfg.verify_ssl,
        "tls_server_name": cfg.tls_server_name,
        "proxy": cfg.proxy,
    }


def official(path: str, context: str | None) -> dict[str, Any]:
    cfg = Configuration()
    official_kube_config().load_kube_config(
        config_file=path, context=context, client_configuration=cfg, persist_config=False
    )
    return fields(cfg)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("context", [None, "main", "side"])
def test_the_reader_fills_what_the_official_loader_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, context: str | None
) -> None:
    cluster, user = SHAPES[shape]
    path = write(tmp_path, doc(cluster, user))
    monkeypatch.chdir("/")  # relative paths are the file's, not the working directory's
    handed: list[str] = []
    monkeypatch.setattr(kubeconfig, "_official", lambda *a: handed.append("official") or "")
    cfg = Configuration()
    chosen = kubeconfig.load_kubeconfig(cfg, path, context)
    assert handed == [] and chosen == (context or "main")
    assert fields(cfg) == official(path, context)


def run_exec_plugin(folder: Path) -> dict[str, Any]:
    plugin = folder / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": TOKEN},
    }
    plugin.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }


def test_an_exec_plugin_goes_to_the_official_loader_and_reads_the_cluster(
    fake_kube: FakeKubeAPI, tmp_path: Path
) -> None:
    path = write(tmp_path, doc({"server": fake_kube.url}, run_exec_plugin(tmp_path)))
    cfg = Configuration()
    assert kubeconfig.load_kubeconfig(cfg, path, None) == "main"
    assert cfg.auth_settings()["BearerToken"]["value"] == f"Bearer {TOKEN}"
    kube = KubeCluster.from_config(path)
    assert kube.list_nodes()  # the plugin's token was accepted by the API server


@pytest.mark.parametrize(
    "user",
    [{"username": "admin", "password": "pw"}, {"token": "abc", "as": "someone-else"}],
    ids=["basic auth", "impersonation"],
)
def test_other_users_go_to_the_official_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: dict[str, Any]
) -> None:
    path = write(tmp_path, doc({"server": "https://api.example:6443"}, user))
    handed: list[str] = []
    monkeypatch.setattr(kubeconfig, "_official", lambda cfg, p, c: handed.append(p) or "main")
    kubeconfig.load_kubeconfig(Configuration(), path, None)
    assert handed == [path]


def test_a_kubeconfig_list_is_merged_by_the_official_loader(fake_kube: FakeKubeAPI, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    one = doc({"server": fake_kube.url}, {"token": TOKEN}, current="main")
    one["contexts"] = one["contexts"][:1]
    two = doc({"server": "https://ignored.example"}, {"token": "ignored"})  # same names: the first file's win
    path = f"{write(first, one)}{os.pathsep}{write(second, two)}"
    cfg = Configuration()
    assert kubeconfig.load_kubeconfig(cfg, path, None) == "main"
    assert cfg.host == fake_kube.url and cfg.auth_settings()["BearerToken"]["value"] == f"Bearer {TOKEN}"
    assert kubeconfig.load_kubeconfig(Configuration(), path, "side") == "side"  # only the second has it


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("clusters: [", "is not usable"),
        ("- just\n- a list\n", "not a kubeconfig mapping"),
        (
            json.dumps(doc({"server": "https://x"}, {"token": "t"}, current="gone")),
            "context 'gone' not found",
        ),
    ],
)
def test_bad_kubeconfigs_are_one_bad_input_line(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(SourceError) as err:
        kubeconfig.load_kubeconfig(Configuration(), str(path), None)
    assert err.value.kind == "bad_input" and words in err.value.message and "\n" not in err.value.message


def test_a_missing_relative_file_names_it(tmp_path: Path) -> None:
    path = write(
        tmp_path, doc({"server": "https://api.example:6443", "certificate-authority": "pki/absent.crt"}, {})
    )
    with pytest.raises(SourceError) as err:
        kubeconfig.load_kubeconfig(Configuration(), path, None)
    assert err.value.kind == "bad_input" and str(tmp_path / "pki" / "absent.crt") in err.value.message
