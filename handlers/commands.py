"""`/gpu …` text → a command, or a usage reply that says what was wrong.

Names are validated as Kubernetes names here, before any API call
(layers/facts/target.py), so a typo never reaches the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.escape import escape
from layers.facts.target import BadTarget, parse_pod_ref

USAGE = (
    "*Usage*\n"
    "• `/gpu why <pod>` · `/gpu why <namespace>/<pod>` · `/gpu why <pod> -n <namespace>`: "
    "walk the five layers for a pod, in a thread\n"
    "• `/gpu digest`: post the GPU fleet digest now, in this channel\n"
    "• `/gpu help`: this message"
)


class CommandError(ValueError):
    """What was wrong with the command, in one line a user can act on."""


@dataclass(frozen=True)
class Why:
    namespace: str
    pod: str

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.pod}"


@dataclass(frozen=True)
class Digest:
    pass


@dataclass(frozen=True)
class Help:
    pass


Command = Why | Digest | Help


def _why(args: list[str]) -> Why:
    namespace: str | None = None
    refs: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-n", "--namespace"):
            if i + 1 >= len(args):
                raise CommandError(f"{arg} needs a namespace after it")
            if namespace is not None:
                raise CommandError("the namespace is given twice")
            namespace = args[i + 1]
            i += 2
            continue
        if arg.startswith("--namespace="):
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
    try:
        ns, pod = parse_pod_ref(refs[0], namespace)
    except BadTarget as err:
        raise CommandError(str(err)) from None
    return Why(ns, pod)


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
    if verb in ("help", "-h", "--help"):
        return Help()
    raise CommandError(f"unknown command {words[0]!r}")


def usage_reply(problem: str | None = None) -> str:
    """The ephemeral reply: what was wrong (escaped: it may quote user text), then the usage."""
    if problem is None:
        return USAGE
    return f":warning: {escape(problem)}\n\n{USAGE}"
