"""Parsing and validating what a user names: a pod, a namespace, a node.

Names are checked as Kubernetes names before any API call, so a typo is a
clear error, not a 404 dressed as a diagnosis.
"""

from __future__ import annotations

import re

# DNS-1123 label (namespaces) and subdomain (pods, nodes), as the API server checks them.
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class BadTarget(ValueError):
    """A malformed name: the message is one line a user can act on."""


def check_namespace(ns: str) -> str:
    if len(ns) > 63 or not _LABEL.match(ns):
        raise BadTarget(
            f"invalid namespace {ns!r}: a namespace is at most 63 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit"
        )
    return ns


def check_object_name(name: str, what: str = "pod") -> str:
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        raise BadTarget(
            f"invalid {what} name {name!r}: a {what} name is at most 253 lowercase letters, digits, "
            "'-' or '.', starting and ending with a letter or digit"
        )
    return name


def parse_pod_ref(
    ref: str, namespace: str | None = None, default_namespace: str = "default"
) -> tuple[str, str]:
    """`pod`, `ns/pod` (or `pod` with -n ns) → (namespace, pod), validated."""
    ref = ref.strip()
    if not ref:
        raise BadTarget("no pod named: give <pod>, <namespace>/<pod> or <pod> -n <namespace>")
    if ref.count("/") > 1:
        raise BadTarget(f"invalid pod reference {ref!r}: use <namespace>/<pod>")
    if "/" in ref:
        ns, pod = ref.split("/", 1)
        if namespace and namespace != ns:
            raise BadTarget(f"namespace given twice and different: {ns!r} in {ref!r} and -n {namespace!r}")
    else:
        ns, pod = namespace or default_namespace, ref
    return check_namespace(ns), check_object_name(pod, "pod")
