"""The parts of the official kubernetes client gpubot uses, imported without the package roots.

Python runs a package's `__init__` before any module in it. `kubernetes/__init__.py`
imports every sub-package (the dynamic client, which pulls kubernetes-validate and
jsonschema where installed, watch, stream, leader election, informers, utils) and
`kubernetes/config/__init__.py` imports the kubeconfig loader (oauthlib,
requests-oauthlib and the pydantic ApiClient): together ~0.25 s of every command's start,
for code a `gpubot why` never calls. So both roots are registered here as bare packages
(their path, no code run) before the modules below are imported; a root runs its real
`__init__` the first time anyone asks it for a name no imported module has set
(`kubernetes.watch`, `kubernetes.config.load_kube_config`), so other code sees the same
package it always did.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

_init_lock = threading.RLock()


def defer_package_init(name: str) -> None:
    """Register package `name` without running its `__init__` until a missing name is asked of it."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not an installed package: the import that follows says so
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> object:
        with _init_lock:
            if module.__dict__.pop("__getattr__", None) is not None:
                loader.exec_module(module)  # the package's real __init__, once
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


defer_package_init("kubernetes")
defer_package_init("kubernetes.config")


def official_kube_config() -> ModuleType:
    """The client's own kubeconfig loader (auth providers, exec plugins, merged files)."""
    return importlib.import_module("kubernetes.config.kube_config")


from kubernetes.client.configuration import Configuration  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from kubernetes.client.rest import RESTClientObject, RESTResponse  # noqa: E402
from kubernetes.config.config_exception import ConfigException  # noqa: E402
from kubernetes.config.incluster_config import load_incluster_config  # noqa: E402

__all__ = [
    "ApiException",
    "ConfigException",
    "Configuration",
    "RESTClientObject",
    "RESTResponse",
    "defer_package_init",
    "load_incluster_config",
    "official_kube_config",
]
