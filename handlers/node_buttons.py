"""Which node-action buttons a message carries, and what their confirmations say, from the
decision table (layers/nodepolicy.py; spec/findings.md, "One policy decides every action").

Pure data: handlers/blocks.py and handlers/digest.py render these as Block Kit. A click is
answered by asking the policy again at click time (the cordon, uncordon and diagnostics plans of
layers/remedy.py and layers/diagjob.py call `decide`), never by trusting the button it came from.
"""

from __future__ import annotations

import msgspec

from layers.nodeactions import NodePolicy


class Offer(msgspec.Struct, frozen=True):
    """The node actions a message offers on one node, and the lines each confirmation says first."""

    node: str
    must_gather: bool = True
    cordon: bool = False
    uncordon: bool = False
    diagnostics: bool = False
    confirm: tuple[str, ...] = ()  # the owner line and the platform's next step
    must_gather_first: bool = False  # the node is going away: the must-gather button comes first


def offer(policy: NodePolicy | None, node: str) -> Offer:
    """The table's offer for a node. Without a policy (a walk stored before policies were kept)
    must-gather and cordon are offered as before; the click asks the policy again and refuses."""
    if policy is None:
        return Offer(node, cordon=True)
    return Offer(
        node,
        must_gather=policy.must_gather.offered,
        cordon=policy.cordon.offered,
        uncordon=policy.uncordon.offered,
        diagnostics=policy.diagnostics.offered,
        confirm=policy.confirm,
        must_gather_first=policy.must_gather_first,
    )
