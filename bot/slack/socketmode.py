"""Socket Mode: Slack's envelopes over the WebSocket, through the gate HTTP requests pass.

slack_sdk's built-in SocketModeClient keeps the connection (hello, pings,
reconnects) and reads each envelope; this handler replaces the body of Bolt's
SocketModeHandler.handle, which builds Bolt's request from the payload before
any middleware could look (a `channel` that is a number makes that raise, and
the envelope is then never acknowledged). Here every envelope first passes
bot/slack/gate.py (its shape; replays by envelope id, trigger id, event id and
click stamp), and a refused one is acknowledged empty so that Slack does not
deliver it again. Only then does Bolt dispatch it; its answer is sent back by
slack_bolt's own `send_response`.

A WebSocket message that is not a JSON object, or an envelope whose payload
is neither an object nor text, would make slack_sdk log a traceback per
message: the client drops it first, with one rate-limited log line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode.base_handler import BaseSocketModeHandler
from slack_bolt.adapter.socket_mode.internals import build_headers, send_response
from slack_bolt.request import BoltRequest
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.slack.gate import Refused, SlackGate

_ID_CHARS = 200


class _ScreenedClient(SocketModeClient):
    """The built-in client, with messages it cannot read dropped before its listeners see them."""

    def __init__(self, screen: Callable[[str], bool], **kwargs: Any) -> None:
        self._screen = screen
        super().__init__(**kwargs)

    def enqueue_message(self, message: str) -> None:
        if self._screen(message):
            super().enqueue_message(message)


class GatedSocketModeHandler(BaseSocketModeHandler):
    """Bolt's Socket Mode adapter with every envelope passed through `gate` before Bolt reads it."""

    def __init__(self, app: App, app_token: str, gate: SlackGate) -> None:
        self.app = app
        self.gate = gate
        self.client = _ScreenedClient(
            self._readable,
            app_token=app_token,
            logger=app.logger,
            web_client=app.client,
            proxy=app.client.proxy,
        )
        self.client.socket_mode_request_listeners.append(self.handle)  # type: ignore[arg-type]

    def handle(self, client: Any, req: SocketModeRequest) -> None:
        start = time.time()
        answer = self.gate.dispatch(
            req.payload,
            [f"envelope:{str(req.envelope_id)[:_ID_CHARS]}"],
            lambda: BoltRequest(mode="socket_mode", body=req.payload, headers=build_headers(req)),
        )
        if isinstance(answer, Refused):
            said = {"text": answer.reply, "response_type": "ephemeral"} if answer.reply else None
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id, payload=said))
            return
        send_response(client, req, answer, start)

    def _readable(self, message: str) -> bool:
        """Whether slack_sdk can read this WebSocket message; an envelope it cannot is acknowledged."""
        try:
            data = json.loads(message)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            self.gate.unreadable("a Socket Mode message that is not a JSON object")
            return False
        envelope_id = data.get("envelope_id")
        if "payload" in data and not isinstance(data["payload"], dict | str):
            if isinstance(envelope_id, str) and envelope_id:
                self.client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
            self.gate.unreadable("a Socket Mode envelope whose payload is not an object")
            return False
        return True
