"""The E2 manager's word on E2 nodes, heard through SDL.

The O-RAN SC E2 manager publishes every change of an E2 node's connection on the SDL channel
``RAN_CONNECTION_STATUS_CHANGE`` of its namespace ``e2Manager``, one event per change:
``<RAN name>_CONNECTED``, ``_DISCONNECTED``, ``_UNDER_RESET`` or ``_CONNECTED_SETUP_FAILED``
(the submgr listens to the same channel). A node that connected again has lost every
subscription it had; the xApp subscribes it again at once instead of waiting to notice the
silence.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

E2MGR_NAMESPACE = "e2Manager"
CONNECTION_CHANNEL = "RAN_CONNECTION_STATUS_CHANGE"
# Longest first: _CONNECTED is also the end of _CONNECTED_SETUP_FAILED's first part.
STATUSES = ("CONNECTED_SETUP_FAILED", "DISCONNECTED", "UNDER_RESET", "CONNECTED")


def parse_event(event: str) -> tuple[str, str] | None:
    """(RAN name, status) of one event, or None when it is not one of the E2 manager's."""
    for status in STATUSES:
        suffix = "_" + status
        if event.endswith(suffix) and len(event) > len(suffix):
            return event[: -len(suffix)], status
    return None


class E2ManagerEvents:
    """Subscribes to the channel through ricsdl (the RIC's SDL client) and calls ``on_event``
    with (node, status) for each event; retries while SDL does not answer."""

    def __init__(self, on_event: Callable[[str, str], None], retry_s: float = 5.0) -> None:
        self._on_event = on_event
        self._retry_s = retry_s
        self._stopping = threading.Event()
        self._storage: Any = None

    def start(self) -> None:
        threading.Thread(target=self._listen, name="e2mgr-events", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()
        storage, self._storage = self._storage, None
        if storage is not None:
            try:
                storage.close()
            except Exception as error:  # closing a broken connection: nothing left to do
                log.debug("SDL event listener not closed cleanly: %s", error)

    def _listen(self) -> None:
        from ricsdl.syncstorage import SyncStorage  # reads DBAAS_SERVICE_* when created

        while not self._stopping.is_set():
            try:
                storage = SyncStorage()
                storage.subscribe_channel(E2MGR_NAMESPACE, self._received, CONNECTION_CHANNEL)
                storage.start_event_listener()
            except Exception as error:  # ricsdl raises its own types when Redis is away
                log.warning(
                    "E2 manager's node events not heard (SDL: %s); trying again in %.0f s",
                    error,
                    self._retry_s,
                )
                self._stopping.wait(self._retry_s)
                continue
            self._storage = storage
            log.info("listening to the E2 manager's %s", CONNECTION_CHANNEL)
            return

    def _received(self, channel: str, events: list[str]) -> None:
        for event in events:
            parsed = parse_event(event)
            if parsed is None:
                log.debug("E2 manager event %r not understood", event)
                continue
            try:
                self._on_event(*parsed)
            except Exception:  # the listener thread is ricsdl's: never let it die
                log.exception("E2 manager event %r not handled", event)
