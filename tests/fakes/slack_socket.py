"""Slack's end of a Socket Mode WebSocket, on 127.0.0.1: hello, then the envelopes a test sends.

The fake Slack Web API's `apps.connections.open` hands out `url`; slack_sdk's
SocketModeClient connects to it as it would to Slack's wss:// endpoint.
Everything the client sends back (envelope acknowledgements) is kept in
`received`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import WSMsgType, web

from tests.services import free_port


class SlackSocket:
    """Slack's end of the socket: sends envelopes, records what the bot sends back."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/link"
        self.received: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._ws: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        assert ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/link", self._link)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        ready.set()
        self._loop.run_forever()

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        await ws.send_str(
            json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0GPUBOT"}})
        )
        self.connected.set()
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                self.received.append(json.loads(msg.data))
        return ws

    def send(self, envelope: dict[str, Any]) -> None:
        assert self._ws is not None
        asyncio.run_coroutine_threadsafe(self._ws.send_str(json.dumps(envelope)), self._loop).result(5)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    def send_raw(self, text: str) -> None:
        """A WebSocket text message as it is (to try what the client does with junk)."""
        assert self._ws is not None
        asyncio.run_coroutine_threadsafe(self._ws.send_str(text), self._loop).result(5)

    def acks(self, envelope_id: str) -> list[dict[str, Any]]:
        return [m for m in list(self.received) if m.get("envelope_id") == envelope_id]
