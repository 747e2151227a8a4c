"""Watch the access interfaces' carrier, so that the agent reacts to a lost link at once.

The CPE sees an access go (a cable pulled, a radio out of coverage, the LiFi dongle's link
down) the moment its driver does, a reporting period or more before the xApp can; see
`WeightService.set_carrier` for what it does then. The kernel shows carrier in sysfs
(`/sys/class/net/IF/carrier`: 1 up, 0 lost; unreadable while the interface is
administratively down); it is polled every ``interval_s``. An interface that does not exist is
left alone: it says nothing about the link.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

POLL_S = 0.05


def carrier_up(sysfs_root: Path, interface: str) -> bool | None:
    """True or False from the kernel, None when the interface does not exist."""
    device = sysfs_root / "class" / "net" / interface
    if not device.exists():
        return None
    try:
        return (device / "carrier").read_text().strip() == "1"
    except OSError:  # EINVAL while the interface is administratively down
        return False


class CarrierWatcher:
    def __init__(
        self,
        interfaces: Mapping[str, str],  # access → interface
        on_change: Callable[[str, bool], object],  # (access, carrier up)
        sysfs_root: Path = Path("/sys"),
        interval_s: float = POLL_S,
    ) -> None:
        self._interfaces = dict(interfaces)
        self._on_change = on_change
        self._sysfs = sysfs_root
        self._interval_s = interval_s
        self._known: dict[str, bool] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> None:
        """One look at every interface; calls back for each change (the first look included
        only when it finds a carrier down)."""
        for access, interface in self._interfaces.items():
            up = carrier_up(self._sysfs, interface)
            if up is None:
                continue
            before = self._known.get(access)
            self._known[access] = up
            if before is None and up:
                continue
            if before != up:
                try:
                    self._on_change(access, up)
                except Exception:  # one failed reaction must not stop the watch
                    log.exception("reacting to %s's carrier failed", access)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="carrier-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check()
            self._stop.wait(self._interval_s)
