"""What every request to the agent meets before FastAPI parses it: the token, then a size cap
(`core.asgi_guard`): a wrong or missing bearer token is refused before a byte of the body is
read, and at most ``max_body_bytes`` of it is read; a weight set is a few hundred bytes.
"""

from __future__ import annotations

import hmac

from core.asgi_guard import (
    Asgi,
    Receive,
    Scope,
    Send,
    answer,
    bearer_token,
    headers_of,
    pass_capped,
)

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
        if self._token is not None and scope.get("path") not in OPEN_PATHS:
            given = bearer_token(headers_of(scope)) or b""
            if not hmac.compare_digest(given, self._token):
                await answer(send, 401, "missing or wrong bearer token", bearer=True)
                return
        await pass_capped(self._app, scope, receive, send, self._max)
