"""`/gpu …` text → a command, or a usage reply that says what was wrong.

Names are validated as Kubernetes names here, before any API call
(layers/facts/target.py), so a typo never reaches the cluster.
"""

from __future__ import annotations

import re

import msgspec

from handlers.escape import escape
from layers.facts.target import BadTarget, check_object_name, parse_pod_ref

USAGE = (
    "*Usage*\n"
    "• `/gpu why <pod>` · `/gpu why <namespace>/<pod>` · `/gpu why <pod> -n <namespace>`: "
    "walk the five layers for a pod, in a thread\n"
    "• `/gpu why <cluster>/<namespace>/<pod>` · `/gpu why <pod> -n <namespace> --cluster <cluster>`: "
    "the same, on one of several clusters\n"
    "• `/gpu clusters`: the clusters this bot serves, with their agents' last heartbeat\n"
    "• `/gpu digest`: post the GPU fleet digest now, in this channel\n"
    "• `/gpu node [<cluster>/]<node>`: the node's GPU ledger (30 days of events, the repeat-offender and RMA "
    "rules met)\n"
    "• `/gpu help`: this message"
)

# A cluster name is part of Redis keys and of `CLUSTER/NS/POD`: a DNS label, no slash.
CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class CommandError(ValueError):
    """What was wrong with the command, in one line a user can act on."""


class Why(msgspec.Struct, frozen=True):
    namespace: str
    pod: str
    cluster: str | None = None  # None: the only cluster (or, with one process, this one)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def where(self) -> str:
        """The target as typed with its cluster: `eu-1/ml/trainer-0`."""
        return f"{self.cluster}/{self.label}" if self.cluster else self.label


class Digest(msgspec.Struct, frozen=True):
    pass


class Help(msgspec.Struct, frozen=True):
    pass


class Node(msgspec.Struct, frozen=True):
    """`/gpu node [CLUSTER/]NODE`: the node's ledger (handlers/ledger_blocks.py), of one cluster."""

    node: str
    cluster: str | None = None

    @property
    def label(self) -> str:
        return f"{self.cluster}/{self.node}" if self.cluster else self.node


class Clusters(msgspec.Struct, frozen=True):
    pass


Command = Why | Digest | Help | Clusters | Node


def check_cluster(name: str) -> str:
    if not CLUSTER_NAME.match(name):
        raise CommandError(
            f"invalid cluster name {name[:80]!r}: a cluster name is at most 63 lowercase letters, digits "
            "or '-', starting and ending with a letter or digit"
        )
    return name


def _why(args: list[str]) -> Why:
    namespace: str | None = None
    cluster: str | None = None
    refs: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-n", "--namespace", "--cluster"):
            what = "cluster" if arg == "--cluster" else "namespace"
            if i + 1 >= len(args):
                raise CommandError(f"{arg} needs a {what} after it")
            if (cluster if what == "cluster" else namespace) is not None:
                raise CommandError(f"the {what} is given twice")
            if what == "cluster":
                cluster = args[i + 1]
            else:
                namespace = args[i + 1]
            i += 2
            continue
        if arg.startswith("--cluster="):
            if cluster is not None:
                raise CommandError("the cluster is given twice")
            cluster = arg.split("=", 1)[1]
        elif arg.startswith("--namespace="):
            namespace = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            raise CommandError(f"unknown option {arg!r}")
        else:
            refs.append(arg)
        i += 1
    if not refs:
        raise CommandError("no pod named")
    if len(refs) > 1:
        raise CommandError(f"one pod at a time, got {len(refs)}: {' '.join(refs)}")
    if namespace is not None and not namespace:
        raise CommandError("the namespace is empty")
    ref = refs[0]
    if ref.count("/") == 2:  # CLUSTER/NAMESPACE/POD
        named, ref = ref.split("/", 1)
        if cluster is not None and cluster != named:
            raise CommandError(f"cluster given twice and different: {named!r} and --cluster {cluster!r}")
        cluster = named
    if cluster is not None:
        check_cluster(cluster)
    try:
        ns, pod = parse_pod_ref(ref, namespace)
    except BadTarget as err:
        raise CommandError(str(err)) from None
    return Why(ns, pod, cluster)


def parse_command(text: str | None) -> Command:
    """Parse the text after `/gpu`. Raises CommandError for anything not understood."""
    # Slack may send non-breaking spaces from pasted text: any whitespace separates words.
    words = (text or "").split()
    if not words:
        raise CommandError("no command given")
    verb, args = words[0].lower(), words[1:]
    if verb == "why":
        return _why(args)
    if verb == "digest":
        if args:
            raise CommandError(f"`digest` takes no arguments, got {' '.join(args)}")
        return Digest()
    if verb == "node":
        if len(args) != 1:
            raise CommandError(f"`node` takes one node name, got {len(args)}")
        # A node name has no '/': `CLUSTER/NODE` names the cluster (as `/gpu why CLUSTER/NS/POD` does).
        cluster, _, name = args[0].rpartition("/")
        try:
            return Node(check_object_name(name, "node"), check_cluster(cluster) if cluster else None)
        except BadTarget as err:
            raise CommandError(str(err)) from None
    if verb == "clusters":
        if args:
            raise CommandError(f"`clusters` takes no arguments, got {' '.join(args)}")
        return Clusters()
    if verb in ("help", "-h", "--help"):
        return Help()
    raise CommandError(f"unknown command {words[0]!r}")


def one_cluster_reply(name: str | None, asked: str | None = None) -> str:
    """`/gpu clusters` (or a cluster named) when one process serves one cluster (`serve --role all`)."""
    this = f"one cluster, `{escape(name)}`" if name else "one cluster (GPUBOT_CLUSTER_NAME is not set)"
    if asked is None:
        return f"This bot serves {this}: leave the cluster out of `/gpu why`."
    return f":warning: this bot serves {this}, not `{escape(asked)}`: nothing was run."


def answer_now(cmd: Command, cluster_name: str | None) -> str | None:
    """What a single-cluster bot answers at once, in the ack, for a command that needs no work
    (help, clusters, a walk asked of another cluster); None when the command has work to do."""
    if isinstance(cmd, Help):
        return USAGE
    if isinstance(cmd, Clusters):
        return one_cluster_reply(cluster_name)
    if isinstance(cmd, Why | Node) and cmd.cluster and cmd.cluster != cluster_name:
        return one_cluster_reply(cluster_name, asked=cmd.cluster)
    return None


def usage_reply(problem: str | None = None) -> str:
    """The ephemeral reply: what was wrong (escaped: it may quote user text), then the usage."""
    if problem is None:
        return USAGE
    return f":warning: {escape(problem)}\n\n{USAGE}"
