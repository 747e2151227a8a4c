"""What every request to the agent meets before FastAPI parses it: the token, then a size cap.

FastAPI checks a route's token dependency only after it has read and validated the body, so an
unauthenticated client could make the agent read and parse any amount of JSON (five 100 MB PUTs
took it to 883 MB). This ASGI layer refuses a wrong or missing bearer token before reading a
byte of the body, and reads at most ``max_body_bytes`` of it (413 beyond), buffering the rest
for the application; a weight set is a few hundred bytes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 64 * 1024
OPEN_PATHS = frozenset({"/v1/health"})  # what a load balancer may ask without a token


class RequestGuard:
    def __init__(self, app: Asgi, token: str | None, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._app = app
        self._token = token.encode() if token is not None else None
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        if self._token is not None and scope.get("path") not in OPEN_PATHS:
            scheme, _, credentials = headers.get("authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(
                credentials.strip(), self._token
            ):
                await _answer(send, 401, "missing or wrong bearer token", bearer=True)
                return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self._max):
            await _answer(send, 413, f"the body is larger than {self._max} bytes")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self._max:
                await _answer(send, 413, f"the body is larger than {self._max} bytes")
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self._app(scope, replay, send)


async def _answer(send: Send, status: int, detail: str, bearer: bool = False) -> None:
    payload = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
