"""Text from the cluster goes to Slack as text, never as markup.

Slack's mrkdwn turns `<!channel>`, `<@U123>` and `<http://x|y>` into pings and
links; escaping `&`, `<` and `>` (Slack's own rule) makes them inert. Triple
backticks would close our code blocks early, so they are broken up too.
"""

from __future__ import annotations


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_code(text: str) -> str:
    """For text placed inside a ``` block: escaped, and unable to end the block."""
    return escape(text).replace("```", "`\u200b`\u200b`")
