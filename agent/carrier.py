"""Watch the access interfaces' carrier, so that the agent reacts to a lost link at once.

The CPE sees an access go (a cable pulled, a radio out of coverage, the LiFi dongle's link
down) the moment its driver does, a reporting period or more before the xApp can; see
`WeightService.set_carrier` for what it does then. The kernel shows carrier in sysfs
(`/sys/class/net/IF/carrier`: 1 up, 0 lost; unreadable while the interface is
administratively down); it is polled every ``interval_s``. An interface that does not exist is
left alone: it says nothing about the link.

A loss is reported at once; a return only once the carrier has stayed up for
``return_settle_s``. A link that flaps is not put back into use on every flap, and a path put
back the instant its carrier shows is not usable yet: in the netns testbed an MPTCP endpoint
added back within 50 ms of the carrier got no subflow (the kernel's first join attempt failed
and is not retried), one added 300 ms later did. 100 ms is the compromise: the mainline
backend checks afterwards that a subflow left from the address and adds the endpoint again
if none did (agent/backends/mainline.py), and in the testbed runs 100 ms carried more than
300 ms (0.775 and 0.83 of the shaped capacity against 0.74–0.77).

A link that keeps flapping is damped, as routers damp flapping routes: each loss within
``FLAP_WINDOW_S`` of the previous ones doubles the time its return must hold before it counts
(up to ``MAX_RETURN_SETTLE_S``), so a flapping access stays out instead of sending the xApp
an event, and the kernel a change, at every flap; a loss is still reported at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

POLL_S = 0.05
RETURN_SETTLE_S = 0.1
FLAP_WINDOW_S = 30.0
MAX_RETURN_SETTLE_S = 5.0


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
        return_settle_s: float = RETURN_SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interfaces = dict(interfaces)
        self._on_change = on_change
        self._sysfs = sysfs_root
        self._interval_s = interval_s
        self._settle_s = return_settle_s
        self._clock = clock
        self._known: dict[str, bool] = {}
        self._up_since: dict[str, float] = {}  # carrier seen back, not reported yet
        self._losses: dict[str, list[float]] = {}  # per access, its recent losses
        self.reported = 0  # changes called back
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
            if before is None and up:
                self._known[access] = up
                continue
            if up and before is False:
                since = self._up_since.setdefault(access, self._clock())
                if self._clock() - since < self.return_settle_s(access):
                    continue
            self._up_since.pop(access, None)  # reported, or lost again: it holds anew
            self._known[access] = up
            if before is not False and not up:
                now = self._clock()
                recent = [t for t in self._losses.get(access, []) if now - t < FLAP_WINDOW_S]
                self._losses[access] = [*recent, now]
            if before != up:
                self.reported += 1
                try:
                    self._on_change(access, up)
                except Exception:  # one failed reaction must not stop the watch
                    log.exception("reacting to %s's carrier failed", access)

    def return_settle_s(self, access: str) -> float:
        """How long the access's carrier must hold after a return: doubled per loss within
        the flap window beyond the first."""
        now = self._clock()
        recent = sum(1 for t in self._losses.get(access, []) if now - t < FLAP_WINDOW_S)
        return float(min(MAX_RETURN_SETTLE_S, self._settle_s * 2 ** max(0, recent - 1)))

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
