"""The kubernetes client's layout that bot/sources/kubeclient.py and kubeconfig.py rely on.

gpubot imports five modules of the client by path with the package roots registered but not run
(their `__init__` imports the whole client: ~0.25 s of every command), and reads a plain
kubeconfig into the client's Configuration itself. Both depend on where the client keeps
things, which a new major may change: pyproject.toml pins `kubernetes` below its next major, and
these tests fail by name when an upgrade moves a piece, so the pin is raised with the checks.
Each runs in a fresh interpreter: the rest of the suite imports the client whole.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, f"the kubernetes client's layout changed:\n{proc.stderr}"
    return proc.stdout


def test_the_installed_client_is_inside_the_pinned_major() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'"kubernetes>=(\d+),<(\d+)"', text)
    assert found, "pyproject.toml must pin kubernetes below its next major (bot/sources/kubeclient.py)"
    low, high = int(found[1]), int(found[2])
    major = int(importlib.metadata.version("kubernetes").split(".")[0])
    assert low <= major < high, (major, low, high)


def test_the_modules_gpubot_imports_exist_where_it_imports_them() -> None:
    out = run(
        """
        import sys, inspect
        import bot.sources.kubeclient as kc
        # The package roots are registered, their __init__ not run.
        assert "kubernetes.dynamic" not in sys.modules and "kubernetes.watch" not in sys.modules, "roots ran"
        assert "kubernetes.config.kube_config" not in sys.modules, "the config root ran"
        assert "__getattr__" in vars(sys.modules["kubernetes"]), "kubernetes root was not deferred"
        cfg = kc.Configuration()
        cfg.host = "https://127.0.0.1:1"
        cfg.api_key["BearerToken"] = "Bearer t"
        settings = cfg.auth_settings()
        entry = settings["BearerToken"]
        assert entry["key"] == "authorization" and entry["value"] == "Bearer t", settings
        params = inspect.signature(kc.RESTClientObject.request).parameters
        assert {"method", "url", "headers", "body", "_request_timeout"} <= set(params), list(params)
        assert issubclass(kc.ApiException, Exception) and issubclass(kc.ConfigException, Exception)
        assert callable(kc.load_incluster_config)
        assert hasattr(kc.RESTResponse, "read") or "read" in dir(kc.RESTResponse), "RESTResponse.read"
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_a_deferred_root_runs_its_real_init_when_asked_for_a_name() -> None:
    out = run(
        """
        import bot.sources.kubeclient  # registers the roots
        import kubernetes, kubernetes.config
        assert kubernetes.watch.Watch and kubernetes.client.CoreV1Api, "kubernetes root"
        assert callable(kubernetes.config.load_kube_config), "config root"
        from kubernetes.client.api_client import ApiClient
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_the_loader_fields_kubeconfig_fills_are_the_clients() -> None:
    # kubeconfig.py sets the fields the client's loader sets for a plain kubeconfig
    # (`_load_cluster_info`, `_load_user_token`): they must still be there, by these names.
    out = run(
        """
        import inspect
        from bot.sources.kubeclient import Configuration, official_kube_config
        kc = official_kube_config()
        loader = kc.KubeConfigLoader
        for name in ("_load_cluster_info", "_load_user_token", "load_and_set"):
            assert hasattr(loader, name), name
        src = inspect.getsource(loader._load_cluster_info)
        for field in ("ssl_ca_cert", "cert_file", "key_file", "verify_ssl", "tls_server_name", "proxy"):
            assert field in src, field
        cfg = Configuration()
        for field in ("host", "ssl_ca_cert", "cert_file", "key_file", "verify_ssl", "tls_server_name",
                      "proxy", "api_key", "retries"):
            assert hasattr(cfg, field), field
        print("ok")
        """
    )
    assert out.strip() == "ok"
