"""What every request to the operator API (``/v1/…``) meets before FastAPI parses it: a known
bearer token (when tokens are configured), then a body cap (`core.asgi_guard`).

An unknown or missing token is refused before a byte of the body is read; the route still
checks the token's role (viewer or operator). Without tokens every request is refused unless
the deployment allows anonymous reads (writes never are). The tokens are read through a
callable at every request, so tokens reloaded by the service (a revoked one, a rotated secret)
apply at once.
"""

from __future__ import annotations

from collections.abc import Callable

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
from xapp.operator.auth import Tokens

# An import of 10,000 CPEs is about 3 MB of JSON; nothing else comes near.
MAX_BODY_BYTES = 8 * 1024 * 1024
GUARDED_PREFIX = "/v1/"


NO_TOKENS = (
    "no operator tokens are configured: set operator_api.tokens_file (or "
    "operator_api.anonymous_reads: true to read without a token)"
)


class OperatorGuard:
    def __init__(
        self,
        app: Asgi,
        tokens: Callable[[], Tokens],
        anonymous_reads: Callable[[], bool] = lambda: False,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._app = app
        self._tokens = tokens
        self._anonymous_reads = anonymous_reads
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if str(scope.get("path", "")).startswith(GUARDED_PREFIX):
            tokens = self._tokens()
            if tokens.configured:
                token = bearer_token(headers_of(scope))
                if token is None:
                    await answer(send, 401, "a bearer token is needed", bearer=True)
                    return
                if tokens.caller(token.decode("latin-1")) is None:
                    await answer(send, 401, "unknown token", bearer=True)
                    return
            elif not self._anonymous_reads():
                await answer(send, 401, NO_TOKENS, bearer=True)
                return
        await pass_capped(self._app, scope, receive, send, self._max)
