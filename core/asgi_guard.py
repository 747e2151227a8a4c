"""What the agent's and the xApp's HTTP APIs share before FastAPI parses a request: a body read
with a cap, and short JSON refusals.

FastAPI checks a route's token dependency only after it has read and validated the body, so an
unauthenticated client could make a server read and parse any amount of JSON (five 100 MB
bodies took the agent to 883 MB and the xApp to 866 MB). Each server's ASGI guard checks the
token first, then reads at most its cap of the body (413 beyond) and replays what it read to
the application.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

# FastAPI's own OpenTelemetry layer (0.16x) asks on every request whether a tracer, meter or
# logger provider has been set up, reading the environment each time: a tenth of an agent's
# CPU per weight push. Neither server exports OpenTelemetry (their metrics are Prometheus'),
# so both turn it off. Older FastAPI keeps the argument as an unused extra.
# (Any: its type, a TypedDict, exists only in those versions.)
NO_NATIVE_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False}


def headers_of(scope: Scope) -> dict[str, bytes]:
    return {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}


def bearer_token(headers: dict[str, bytes]) -> bytes | None:
    """The token of an ``Authorization: Bearer …`` header, None without one."""
    scheme, _, credentials = headers.get("authorization", b"").partition(b" ")
    token = credentials.strip()
    return token if scheme.lower() == b"bearer" and token else None


async def pass_capped(
    app: Asgi, scope: Scope, receive: Receive, send: Send, max_body_bytes: int
) -> None:
    """Read the body (at most ``max_body_bytes``, else 413 without reading on), then hand the
    request to ``app`` with the body replayed."""
    declared = headers_of(scope).get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_body_bytes):
        await answer(send, 413, f"the body is larger than {max_body_bytes} bytes")
        return
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if len(body) > max_body_bytes:
            await answer(send, 413, f"the body is larger than {max_body_bytes} bytes")
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

    await app(scope, replay, send)


async def answer(send: Send, status: int, detail: str, bearer: bool = False) -> None:
    payload = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
