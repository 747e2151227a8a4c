"""A stand-in for ricxappframe's RMRXapp where librmr cannot be had: the same API, RMR carried
over a loopback TCP stream.

The xApp loads it through ``ATSSS_RMR_XAPP=tests.rmr_standin:LoopbackRMRXapp``. It listens on the
RMR port; a peer (``RmrPeer``, the test's E2 termination) sends messages with their type, MEID
and subscription id. Callbacks get a summary with exactly the keys ricxappframe's
``rmr.message_summary`` builds, and an sbuf to answer (``rmr_rts``) and free (``rmr_free``).
Like RMRXapp, it answers RIC_HEALTH_CHECK_REQ itself.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.e2_framing import recv_frame, send_frame

RIC_HEALTH_CHECK_REQ = 100
RIC_HEALTH_CHECK_RESP = 101

Handler = Callable[[Any, dict[str, Any], Any], None]


def pack(message_type: int, meid: str, payload: bytes, subscription_id: int = -1) -> bytes:
    header = {"mtype": message_type, "meid": meid, "subid": subscription_id}
    return json.dumps(header).encode() + b"\n" + payload


def unpack(frame: bytes) -> tuple[dict[str, Any], bytes]:
    header, _, payload = frame.partition(b"\n")
    return json.loads(header), payload


@dataclass
class StandInBuffer:
    """What RMR's sbuf is to RMRXapp: the message, and where an answer goes."""

    summary: dict[str, Any]
    sock: socket.socket
    lock: threading.Lock
    freed: bool = False


@dataclass
class Counters:
    received: int = 0
    freed: int = 0
    answered: list[tuple[int, bytes]] = field(default_factory=list)


class LoopbackRMRXapp:
    def __init__(
        self,
        default_handler: Handler,
        config_handler: Any = None,
        rmr_port: int = 4562,
        rmr_wait_for_ready: bool = True,
        use_fake_sdl: bool = False,
        post_init: Any = None,
    ) -> None:
        self._default = default_handler
        self._handlers: dict[int, Handler] = {RIC_HEALTH_CHECK_REQ: self._health}
        self._server = socket.create_server(("127.0.0.1", rmr_port), reuse_port=False)
        self._stopped = threading.Event()
        self.counters = Counters()

    def register_callback(self, handler: Handler, message_type: int) -> None:
        self._handlers[message_type] = handler

    def run(self, thread: bool = False, rmr_timeout: int = 5, inotify_timeout: int = 0) -> None:
        worker = threading.Thread(target=self._accept, name="rmr-standin", daemon=True)
        worker.start()
        if not thread:
            worker.join()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()

    def rmr_rts(
        self,
        sbuf: StandInBuffer,
        new_payload: bytes | None = None,
        new_mtype: int | None = None,
        retries: int = 100,
    ) -> bool:
        message_type = new_mtype if new_mtype is not None else sbuf.summary["message type"]
        payload = new_payload if new_payload is not None else sbuf.summary["payload"]
        self.counters.answered.append((message_type, payload))
        with sbuf.lock:
            send_frame(sbuf.sock, pack(message_type, sbuf.summary["meid"].decode(), payload))
        return True

    def rmr_free(self, sbuf: StandInBuffer) -> None:
        if not sbuf.freed:
            sbuf.freed = True
            self.counters.freed += 1

    def healthcheck(self) -> bool:
        return not self._stopped.is_set()

    def _health(self, xapp: Any, summary: dict[str, Any], sbuf: StandInBuffer) -> None:
        self.rmr_rts(sbuf, new_payload=b"OK\n", new_mtype=RIC_HEALTH_CHECK_RESP)
        self.rmr_free(sbuf)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        lock = threading.Lock()
        with sock:
            while not self._stopped.is_set():
                try:
                    frame = recv_frame(sock)
                except (OSError, ConnectionError):
                    return
                if frame is None:
                    return
                header, payload = unpack(frame)
                summary = _summary(header, payload)
                self.counters.received += 1
                handler = self._handlers.get(summary["message type"], self._default)
                handler(self, summary, StandInBuffer(summary, sock, lock))


def _summary(header: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """The keys and value types of ricxappframe.rmr.rmr.message_summary."""
    return {
        "payload": payload,
        "payload length": len(payload),
        "message type": int(header["mtype"]),
        "subscription id": int(header["subid"]),
        "transaction id": b"",
        "message state": 0,
        "message status": "RMR_OK",
        "payload max size": max(4096, len(payload)),
        "meid": str(header["meid"]).encode(),
        "message source": "127.0.0.1",
        "errno": 0,
    }


class RmrPeer:
    """The other end: what the E2 termination's RMR does towards the xApp."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._lock = threading.Lock()

    def send(self, message_type: int, meid: str, payload: bytes, subscription_id: int = -1) -> None:
        with self._lock:
            send_frame(self._sock, pack(message_type, meid, payload, subscription_id))

    def receive(self) -> tuple[int, bytes]:
        frame = recv_frame(self._sock)
        if frame is None:
            raise ConnectionError("the xApp closed the RMR stream")
        header, payload = unpack(frame)
        return int(header["mtype"]), payload

    def close(self) -> None:
        self._sock.close()
