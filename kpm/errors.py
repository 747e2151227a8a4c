"""Errors of the E2 codecs: each names what was wrong and carries a short hex excerpt."""

from __future__ import annotations

EXCERPT_BYTES = 24


def hex_excerpt(data: bytes, limit: int = EXCERPT_BYTES) -> str:
    """The first bytes of a payload as hex, marked when cut short, for logs and errors."""
    head = data[:limit].hex()
    return head + ("…" if len(data) > limit else "") + f" ({len(data)} bytes)"


class CodecError(ValueError):
    """Bytes that do not decode, or a value that does not encode.

    ``cause`` is a short stable keyword (used as a metric label and to log once per cause);
    the message says what was wrong in words a user can act on.
    """

    def __init__(self, cause: str, message: str, data: bytes | None = None) -> None:
        detail = f"{message}; bytes: {hex_excerpt(data)}" if data is not None else message
        super().__init__(detail)
        self.cause = cause
        self.data = data
