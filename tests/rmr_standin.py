"""A stand-in for RMR where librmr cannot be had: the functions of ricxappframe's ``rmr`` module
(``ricxappframe.rmr.rmr``, the Python face of librmr_si.so) that the xApp's adapter calls, with
RMR's messages carried over a loopback TCP stream.

The xApp loads it through ``ATSSS_RMR_LIBRARY=tests.rmr_standin``. It behaves like the real
library where the xApp's life depends on it:

- ``rmr_init`` listens on the RMR port at once; receiving works before any route table, as in
  RMR, but ``rmr_ready`` stays 0 until one is there: the file ``RMR_SEED_RT`` names (read at
  every check, as RMR re-reads its seed), or a table a route manager sent (``RouteManager``);
- ``rmr_torcv_msg`` blocks for its whole timeout when nothing comes and then answers a buffer
  in state RMR_ERR_TIMEOUT, as RMR does: a receive loop cannot stop faster than its timeout;
- ``rmr_close`` closes the port and every connection, so the peer (the E2 termination) sees it;
- ``message_summary`` builds exactly the keys and value types of the real one.

A peer (``RmrPeer``, the test's E2 termination) sends messages with their type, MEID and
subscription id.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.e2_framing import recv_frame, send_frame

# The constants the real module reads from librmr (rmr_get_consts), with RMR 4.9's values.
RMR_MAX_RCV_BYTES = 65536
RMRFL_NONE = 0x0
RMRFL_MTCALL = 0x02
RMR_OK = 0
RMR_ERR_TIMEOUT = 14

RMR_MS_PAYLOAD = "payload"
RMR_MS_PAYLOAD_LEN = "payload length"
RMR_MS_MSG_TYPE = "message type"
RMR_MS_SUB_ID = "subscription id"
RMR_MS_TRN_ID = "transaction id"
RMR_MS_MSG_STATE = "message state"
RMR_MS_MSG_STATUS = "message status"
RMR_MS_PAYLOAD_MAX = "payload max size"
RMR_MS_MEID = "meid"
RMR_MS_MSG_SOURCE = "message source"
RMR_MS_ERRNO = "errno"

_STATES = {RMR_OK: "RMR_OK", RMR_ERR_TIMEOUT: "RMR_ERR_TIMEOUT"}


def pack(message_type: int, meid: str, payload: bytes, subscription_id: int = -1) -> bytes:
    header = {"mtype": message_type, "meid": meid, "subid": subscription_id}
    return json.dumps(header).encode() + b"\n" + payload


def unpack(frame: bytes) -> tuple[dict[str, Any], bytes]:
    header, _, payload = frame.partition(b"\n")
    return json.loads(header), payload


@dataclass
class Context:
    """What rmr_init's void* is: the listening port and what arrived on it."""

    port: int
    server: socket.socket
    inbox: queue.Queue[tuple[dict[str, Any], bytes, socket.socket, threading.Lock]] = field(
        default_factory=queue.Queue
    )
    connections: list[socket.socket] = field(default_factory=list)
    route_table: str | None = None  # what a route manager sent
    closed: bool = False


@dataclass
class Mbuf:
    """What an rmr_mbuf_t is to the caller: one message, and where an answer goes."""

    state: int = RMR_ERR_TIMEOUT
    mtype: int = -1
    sub_id: int = -1
    payload: bytes = b""
    meid: bytes = b""
    origin: tuple[socket.socket, threading.Lock] | None = None
    freed: bool = False


def rmr_init(uproto_port: bytes, max_msg_size: int, flags: int) -> Context | None:
    port = int(uproto_port.decode().rpartition(":")[2])
    try:
        server = socket.create_server(("127.0.0.1", port))
    except OSError:
        return None  # librmr answers NULL when it cannot listen
    context = Context(port, server)
    threading.Thread(target=_accept, args=(context,), name="rmr-standin", daemon=True).start()
    return context


def rmr_ready(vctx: Context) -> int:
    if vctx.closed:
        return 0
    if vctx.route_table is not None:
        return 1
    seed = os.environ.get("RMR_SEED_RT")
    if not seed:
        return 0
    try:
        text = Path(seed).read_text()
    except OSError:
        return 0
    return 1 if "newrt|start" in text and "rte|" in text else 0


def rmr_set_vlevel(new_level: int) -> None:
    """The real one sets librmr's verbosity; nothing to quieten here."""


def rmr_alloc_msg(
    vctx: Context,
    size: int,
    payload: bytes | None = None,
    gen_transaction_id: bool = False,
    mtype: int | None = None,
    meid: bytes | None = None,
    sub_id: int | None = None,
    fixed_transaction_id: bytes | None = None,
) -> Mbuf:
    return Mbuf()


def rmr_torcv_msg(vctx: Context, ptr_mbuf: Mbuf, ms_to: int) -> Mbuf:
    try:
        header, payload, sock, lock = vctx.inbox.get(timeout=max(0, ms_to) / 1000)
    except queue.Empty:
        ptr_mbuf.state = RMR_ERR_TIMEOUT
        return ptr_mbuf
    ptr_mbuf.state = RMR_OK
    ptr_mbuf.mtype = int(header["mtype"])
    ptr_mbuf.sub_id = int(header["subid"])
    ptr_mbuf.meid = str(header["meid"]).encode()
    ptr_mbuf.payload = payload
    ptr_mbuf.origin = (sock, lock)
    return ptr_mbuf


def rmr_rts_msg(
    vctx: Context, ptr_mbuf: Mbuf, payload: bytes | None = None, mtype: int | None = None
) -> Mbuf:
    if payload:
        ptr_mbuf.payload = payload
    if mtype:
        ptr_mbuf.mtype = mtype
    if ptr_mbuf.origin is None:
        ptr_mbuf.state = RMR_ERR_TIMEOUT
        return ptr_mbuf
    sock, lock = ptr_mbuf.origin
    try:
        with lock:
            send_frame(sock, pack(ptr_mbuf.mtype, ptr_mbuf.meid.decode(), ptr_mbuf.payload))
    except OSError:
        ptr_mbuf.state = RMR_ERR_TIMEOUT
    return ptr_mbuf


def rmr_free_msg(ptr_mbuf: Mbuf) -> None:
    ptr_mbuf.freed = True


def rmr_close(vctx: Context) -> None:
    vctx.closed = True
    with contextlib.suppress(OSError):
        vctx.server.shutdown(socket.SHUT_RDWR)
    vctx.server.close()
    for sock in list(vctx.connections):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def message_summary(ptr_mbuf: Mbuf) -> dict[str, Any]:
    """The keys and value types of ricxappframe.rmr.rmr.message_summary."""
    return {
        RMR_MS_PAYLOAD: ptr_mbuf.payload if ptr_mbuf.state == RMR_OK else None,
        RMR_MS_PAYLOAD_LEN: len(ptr_mbuf.payload),
        RMR_MS_MSG_TYPE: ptr_mbuf.mtype,
        RMR_MS_SUB_ID: ptr_mbuf.sub_id,
        RMR_MS_TRN_ID: b"",
        RMR_MS_MSG_STATE: ptr_mbuf.state,
        RMR_MS_MSG_STATUS: _STATES.get(ptr_mbuf.state, "RMR_ERR_UNKNOWN"),
        RMR_MS_PAYLOAD_MAX: max(4096, len(ptr_mbuf.payload)),
        RMR_MS_MEID: ptr_mbuf.meid,
        RMR_MS_MSG_SOURCE: "127.0.0.1",
        RMR_MS_ERRNO: 0,
    }


def _accept(context: Context) -> None:
    while not context.closed:
        try:
            sock, _ = context.server.accept()
        except OSError:
            return
        context.connections.append(sock)
        threading.Thread(target=_serve, args=(context, sock), daemon=True).start()


def _serve(context: Context, sock: socket.socket) -> None:
    lock = threading.Lock()
    with sock:
        while not context.closed:
            try:
                frame = recv_frame(sock)
            except (OSError, ConnectionError):
                return
            if frame is None:
                return
            header, payload = unpack(frame)
            if header.get("route_table") is not None:  # a route manager's table
                context.route_table = str(header["route_table"])
                continue
            context.inbox.put((header, payload, sock, lock))


def route_table(*entries: tuple[int, str]) -> str:
    """A static route table in RMR's seed format: (message type, endpoint) per entry."""
    lines = ["newrt|start"]
    lines += [f"rte|{message_type}|{endpoint}" for message_type, endpoint in entries]
    lines.append("newrt|end")
    return "\n".join(lines) + "\n"


class RmrPeer:
    """The other end: what the E2 termination's RMR does towards the xApp."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._lock = threading.Lock()

    def send(self, message_type: int, meid: str, payload: bytes, subscription_id: int = -1) -> None:
        with self._lock:
            send_frame(self._sock, pack(message_type, meid, payload, subscription_id))

    def send_route_table(self, table: str) -> None:
        """What a route manager does: push a table to the xApp's RMR."""
        with self._lock:
            send_frame(self._sock, json.dumps({"route_table": table}).encode() + b"\n")

    def receive(self) -> tuple[int, bytes]:
        frame = recv_frame(self._sock)
        if frame is None:
            raise ConnectionError("the xApp closed the RMR stream")
        header, payload = unpack(frame)
        return int(header["mtype"]), payload

    def closed_by_the_xapp(self, timeout_s: float) -> bool:
        """Whether the xApp's RMR closed the stream within ``timeout_s``."""
        self._sock.settimeout(timeout_s)
        try:
            return recv_frame(self._sock) is None
        except TimeoutError:
            return False
        except (OSError, ConnectionError):
            return True

    def close(self) -> None:
        self._sock.close()
