"""Framing of the standalone E2 transport: E2AP PDUs over a local TCP stream.

Each frame is a 4-byte big-endian length followed by one APER-encoded E2AP PDU, the same bytes
a RIC's E2 termination would carry over SCTP. Both ends use it: the xApp's standalone E2
termination and the simulator's E2 nodes.
"""

from __future__ import annotations

import socket
import struct

LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 4 * 1024 * 1024


class FramingError(ConnectionError):
    """The peer sent a frame that cannot be right (too long); the connection is dropped."""


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(LENGTH.pack(len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes | None:
    """One frame's payload, or None when the peer closed the stream cleanly between frames."""
    header = _recv_exactly(sock, LENGTH.size, allow_eof=True)
    if header is None:
        return None
    (length,) = LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FramingError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    payload = _recv_exactly(sock, length, allow_eof=False)
    assert payload is not None
    return payload


def _recv_exactly(sock: socket.socket, size: int, allow_eof: bool) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            if allow_eof and not chunks:
                return None
            raise ConnectionError(f"stream ended inside a frame ({len(chunks)} of {size} bytes)")
        chunks += chunk
    return bytes(chunks)
