"""Framing of the standalone E2 transport: E2AP PDUs over a local TCP stream.

Each frame is a 4-byte big-endian length followed by one APER-encoded E2AP PDU, the same bytes
a RIC's E2 termination would carry over SCTP. Both ends use it: the xApp's standalone E2
termination and the simulator's E2 nodes.
"""

from __future__ import annotations

import socket
import struct
import time

LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 4 * 1024 * 1024


class FramingError(ConnectionError):
    """The peer sent a frame that cannot be right (too long); the connection is dropped."""


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(LENGTH.pack(len(payload)) + payload)


def recv_frame(sock: socket.socket, frame_deadline_s: float | None = None) -> bytes | None:
    """One frame's payload, or None when the peer closed the stream cleanly between frames.

    ``frame_deadline_s``: once a frame has begun, how long it may take to arrive in full
    (a peer that starts a frame and stalls holds a thread and its bytes); ConnectionError
    after that. The socket's own timeout, if any, bounds the wait for a frame to begin.
    """
    header = _recv_exactly(sock, LENGTH.size, allow_eof=True, deadline_s=None)
    if header is None:
        return None
    (length,) = LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FramingError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    payload = _recv_exactly(sock, length, allow_eof=False, deadline_s=frame_deadline_s)
    assert payload is not None
    return payload


# Read in pieces: asking recv() for a whole 4 MiB frame allocates 4 MiB up front for every
# connection waiting inside one, whatever the peer actually sent.
_PIECE_BYTES = 64 * 1024


def _recv_exactly(
    sock: socket.socket, size: int, allow_eof: bool, deadline_s: float | None
) -> bytes | None:
    chunks = bytearray()
    ends_at = None if deadline_s is None else time.monotonic() + deadline_s
    previous_timeout = sock.gettimeout()
    try:
        while len(chunks) < size:
            if ends_at is not None:
                left_s = ends_at - time.monotonic()
                if left_s <= 0:
                    raise ConnectionError(
                        f"frame not complete within {deadline_s:g} s ({len(chunks)} of {size} "
                        "bytes)"
                    )
                sock.settimeout(
                    left_s if previous_timeout is None else min(left_s, previous_timeout)
                )
            try:
                chunk = sock.recv(min(_PIECE_BYTES, size - len(chunks)))
            except TimeoutError:
                if ends_at is not None and time.monotonic() >= ends_at:
                    continue  # reported above with what arrived
                raise
            if not chunk:
                if allow_eof and not chunks:
                    return None
                raise ConnectionError(
                    f"stream ended inside a frame ({len(chunks)} of {size} bytes)"
                )
            chunks += chunk
    finally:
        if ends_at is not None:
            sock.settimeout(previous_timeout)
    return bytes(chunks)
