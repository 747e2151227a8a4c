"""The RMR side of the xApp in an O-RAN SC RIC; the only module that touches librmr.

It drives RMR through ricxappframe's thin ``rmr`` module (the ctypes face of librmr_si.so), not
through the framework's ``RMRXapp``, whose life does not fit a service in a cluster: its
``stop()`` deregisters on its own (with an address built from PLT_NAMESPACE and, without the
framework's config file, a null appInstanceName), then sleeps 10 s, and its receive and
dispatch threads each wait out a 5 s timeout; its constructor blocks, silently, until RMR has a
route table. Here:

- the receive loop waits at most ``receive_timeout_ms`` per call, so a stop takes that long;
- receiving starts at once (RMR receives without routes); whether RMR can *send* (it has a
  route table) is watched on its own, and while it cannot, the log says what is missing;
- health checks (RIC_HEALTH_CHECK_REQ) are answered by E2MessageHandler like any message.

``ricxappframe.rmr.rmr`` loads librmr_si.so when imported, which exists only in the container
image, so the import happens in ``start``. Where librmr cannot exist (tests, development
machines), ``ATSSS_RMR_LIBRARY=module`` names a stand-in with the same functions.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from xapp.e2.messages import (
    RIC_HEALTH_CHECK_REQ,
    RIC_INDICATION,
    RIC_SUB_DEL_REQUIRED,
    RIC_SUB_DEL_RESP,
    RIC_SUB_FAILURE,
    RIC_SUB_RESP,
    E2MessageHandler,
    Reply,
)

log = logging.getLogger(__name__)

# Keys of ricxappframe.rmr.rmr.message_summary (RMR_MS_PAYLOAD etc.), as strings so that this
# module reads summaries without importing the RMR library.
SUMMARY_PAYLOAD = "payload"
SUMMARY_MESSAGE_TYPE = "message type"
SUMMARY_MEID = "meid"
SUMMARY_SUBSCRIPTION_ID = "subscription id"
SUMMARY_STATUS = "message status"

# What arrives on the RMR port (the descriptor's rxMessages); answers go back by return-to-sender.
HANDLED_TYPES = (
    RIC_INDICATION,
    RIC_SUB_RESP,
    RIC_SUB_FAILURE,
    RIC_SUB_DEL_RESP,
    RIC_SUB_DEL_REQUIRED,
    RIC_HEALTH_CHECK_REQ,
)

RMR_LIBRARY_VARIABLE = "ATSSS_RMR_LIBRARY"
RECEIVE_BUFFER_BYTES = 4096  # RMR grows a buffer to fit the message it receives
ROUTE_MANAGER_PORT = 4561  # where RMR listens for the route manager's tables by default


class RmrStartError(RuntimeError):
    """RMR could not be started (its port taken, the library missing); one line says why."""


def read_summary(summary: Mapping[str, Any]) -> tuple[int, str, bytes | None]:
    """(message type, E2 node name, payload) from an RMR message summary."""
    meid = summary.get(SUMMARY_MEID) or b""
    node = meid.decode(errors="replace") if isinstance(meid, bytes) else str(meid)
    payload = summary.get(SUMMARY_PAYLOAD)
    return int(summary[SUMMARY_MESSAGE_TYPE]), node, payload


def rmr_api() -> Any:
    """ricxappframe's rmr module (loading librmr_si.so), or the stand-in ATSSS_RMR_LIBRARY
    names."""
    named = os.environ.get(RMR_LIBRARY_VARIABLE)
    if named:
        return importlib.import_module(named)
    from ricxappframe.rmr import rmr

    return rmr


def rmr_library_available() -> bool:
    """Whether RIC mode can run here: librmr_si.so is installed, or a stand-in is named."""
    import ctypes.util

    return (
        bool(os.environ.get(RMR_LIBRARY_VARIABLE)) or ctypes.util.find_library("rmr_si") is not None
    )


def missing_route_table(environment: Mapping[str, str] | None = None) -> str:
    """What keeps RMR from having a route table, in one line for the log and the readiness."""
    env = os.environ if environment is None else environment
    seed = env.get("RMR_SEED_RT")
    if not seed:
        seed_part = "RMR_SEED_RT is not set"
    elif not os.path.isfile(seed):
        seed_part = f"RMR_SEED_RT={seed} does not exist"
    else:
        seed_part = f"RMR_SEED_RT={seed} holds no usable route table"
    manager = env.get("RMR_RTG_SVC")
    manager_part = (
        f"no table from the route manager (RMR_RTG_SVC={manager})"
        if manager
        else f"no table from a route manager (RMR_RTG_SVC not set; RMR listens on "
        f"{ROUTE_MANAGER_PORT} for one)"
    )
    return f"no RMR route table: {seed_part} and {manager_part}"


class RmrE2Adapter:
    """Receives over RMR, hands each message to the E2MessageHandler, answers when asked."""

    def __init__(
        self,
        handler: E2MessageHandler,
        rmr_port: int = 4560,
        receive_timeout_ms: int = 200,
        first_report_s: float = 5.0,
        report_every_s: float = 30.0,
        on_ready: Callable[[], None] = lambda: None,
    ) -> None:
        self._handler = handler
        self._rmr_port = rmr_port
        self._timeout_ms = receive_timeout_ms
        self._first_report_s = first_report_s
        self._report_every_s = report_every_s
        self._on_ready = on_ready
        self._rmr: Any = None
        self._context: Any = None
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        try:
            self._rmr = rmr_api()
        except (ImportError, OSError) as error:
            raise RmrStartError(f"the RMR library cannot be loaded: {error}") from None
        # Quieten librmr's own stderr lines to its critical ones: they do not follow our format.
        set_level = getattr(self._rmr, "rmr_set_vlevel", None)
        if set_level is not None:
            set_level(1)
        flags = getattr(self._rmr, "RMRFL_MTCALL", 0x02)
        size = getattr(self._rmr, "RMR_MAX_RCV_BYTES", None) or 65536
        self._context = self._rmr.rmr_init(str(self._rmr_port).encode(), size, flags)
        if not self._context:
            raise RmrStartError(f"RMR could not listen on port {self._rmr_port}")
        log.info("RMR listening on port %d", self._rmr_port)
        for name, target in (("rmr-receive", self._receive), ("rmr-ready", self._watch_ready)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """End the receive loop (within one receive timeout), then close RMR."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=2 * self._timeout_ms / 1000 + 1.0)
        if self._context is not None:
            self._rmr.rmr_close(self._context)
            self._context = None
            log.info("RMR closed")

    def ready(self) -> bool:
        """RMR has a route table: it can send (answers, health checks) as well as receive."""
        return self._ready.is_set()

    def waiting_for(self) -> str | None:
        """Why RMR is not ready, or None."""
        if self._ready.is_set():
            return None
        if self._context is None:
            return "RMR not started"
        return missing_route_table()

    # ------------------------------------------------------------------ threads
    def _watch_ready(self) -> None:
        started = time.monotonic()
        next_report = started + self._first_report_s
        while not self._stopping.is_set():
            if self._rmr.rmr_ready(self._context):
                self._ready.set()
                log.info("RMR ready after %.1f s", time.monotonic() - started)
                self._on_ready()
                return
            now = time.monotonic()
            if now >= next_report:
                log.warning(
                    "RMR not ready after %.0f s: %s; the xApp is alive but not ready",
                    now - started,
                    missing_route_table(),
                )
                next_report = now + self._report_every_s
            self._stopping.wait(0.1)

    def _receive(self) -> None:
        rmr = self._rmr
        while not self._stopping.is_set():
            mbuf = rmr.rmr_alloc_msg(self._context, RECEIVE_BUFFER_BYTES)
            mbuf = rmr.rmr_torcv_msg(self._context, mbuf, self._timeout_ms)
            try:
                summary = rmr.message_summary(mbuf)
                if summary.get(SUMMARY_STATUS) != "RMR_OK":
                    continue  # the timeout: look at the stop flag
                reply = self.handle(summary)
                if reply is not None:
                    mbuf = rmr.rmr_rts_msg(
                        self._context, mbuf, payload=reply.payload, mtype=reply.message_type
                    )
            except Exception:  # one bad message must not end the receive loop
                log.exception("RMR message not handled")
            finally:
                rmr.rmr_free_msg(mbuf)

    def handle(self, summary: Mapping[str, Any]) -> Reply | None:
        """One received message: handed over; the answer to send back, if any."""
        message_type, node, payload = read_summary(summary)
        return self._handler.on_message(message_type, node, payload)
