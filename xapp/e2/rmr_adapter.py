"""The RMR side of the xApp in an O-RAN SC RIC; the only module that touches ricxappframe's RMR.

``ricxappframe.xapp_frame`` loads librmr_si.so when imported, which exists only in the
container image, so the import happens in ``run``. Everything this adapter does besides
moving bytes lives in E2MessageHandler, which is tested without RMR.

Where librmr cannot exist (tests, development machines), ``ATSSS_RMR_XAPP=module:Class`` names
a stand-in with RMRXapp's API (constructor, register_callback, run, stop, rmr_rts, rmr_free)
that delivers message summaries as ricxappframe builds them; nothing else changes.

The service registers with the appmgr itself (``xapp.service``), so the framework's own
registration, which it starts when CONFIG_FILE names a file, is kept from running twice.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from xapp.e2.messages import (
    RIC_INDICATION,
    RIC_SUB_DEL_RESP,
    RIC_SUB_FAILURE,
    RIC_SUB_RESP,
    E2MessageHandler,
)

log = logging.getLogger(__name__)

# Keys of ricxappframe.rmr.rmr.message_summary (RMR_MS_PAYLOAD etc.), as strings so that this
# module reads summaries without importing the RMR library.
SUMMARY_PAYLOAD = "payload"
SUMMARY_MESSAGE_TYPE = "message type"
SUMMARY_MEID = "meid"
SUMMARY_SUBSCRIPTION_ID = "subscription id"

HANDLED_TYPES = (RIC_INDICATION, RIC_SUB_RESP, RIC_SUB_FAILURE, RIC_SUB_DEL_RESP)


def read_summary(summary: Mapping[str, Any]) -> tuple[int, str, bytes | None]:
    """(message type, E2 node name, payload) from an RMR message summary."""
    meid = summary.get(SUMMARY_MEID) or b""
    node = meid.decode(errors="replace") if isinstance(meid, bytes) else str(meid)
    payload = summary.get(SUMMARY_PAYLOAD)
    return int(summary[SUMMARY_MESSAGE_TYPE]), node, payload


RMR_XAPP_VARIABLE = "ATSSS_RMR_XAPP"


def rmr_xapp_class() -> Any:
    """ricxappframe's RMRXapp (loading librmr_si.so), or the stand-in ATSSS_RMR_XAPP names."""
    named = os.environ.get(RMR_XAPP_VARIABLE)
    if named:
        module, _, name = named.partition(":")
        return getattr(importlib.import_module(module), name)
    from ricxappframe.xapp_frame import RMRXapp

    return RMRXapp


@contextlib.contextmanager
def _config_file_hidden() -> Iterator[None]:
    saved = os.environ.pop("CONFIG_FILE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["CONFIG_FILE"] = saved


def rmr_library_available() -> bool:
    """Whether RIC mode can run here: librmr_si.so is installed, or a stand-in is named."""
    import ctypes.util

    return bool(os.environ.get(RMR_XAPP_VARIABLE)) or ctypes.util.find_library("rmr_si") is not None


class RmrE2Adapter:
    def __init__(self, handler: E2MessageHandler, rmr_port: int = 4560) -> None:
        self._handler = handler
        self._rmr_port = rmr_port
        self._xapp: Any = None

    def on_rmr_message(self, xapp: Any, summary: Mapping[str, Any], sbuf: Any) -> None:
        """RMRXapp callback: hand the message over, answer when asked, always free the buffer."""
        try:
            message_type, node, payload = read_summary(summary)
            reply = self._handler.on_message(message_type, node, payload)
            if reply is not None:
                xapp.rmr_rts(sbuf, new_payload=reply.payload, new_mtype=reply.message_type)
        except Exception:  # the framework's receive thread would die with it
            log.exception("RMR message not handled")
        finally:
            xapp.rmr_free(sbuf)

    def run(self) -> None:
        rmr_xapp = rmr_xapp_class()
        # The framework answers RIC_HEALTH_CHECK_REQ itself; everything else comes here.
        with _config_file_hidden():
            self._xapp = rmr_xapp(self.on_rmr_message, rmr_port=self._rmr_port, use_fake_sdl=False)
        for message_type in HANDLED_TYPES:
            self._xapp.register_callback(self.on_rmr_message, message_type)
        log.info("RMR adapter listening on port %d", self._rmr_port)
        self._xapp.run(thread=True)

    def stop(self) -> None:
        if self._xapp is not None:
            self._xapp.stop()
