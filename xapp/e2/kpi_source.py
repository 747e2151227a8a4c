"""KpiSource adapter for the E2 path: transports push samples in, the control loop polls them."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from core.domain import KpiSample


class E2KpiSource:
    """Thread-safe buffer between the E2 transport threads and the control loop.

    Bounded so that a stalled loop cannot eat the memory; when full, the oldest samples go
    first (a newer report of the same path supersedes them anyway) and are counted.
    """

    def __init__(self, max_samples: int = 100_000) -> None:
        self._buffer: deque[KpiSample] = deque(maxlen=max_samples)
        self._lock = threading.Lock()
        self.dropped = 0
        # Told (from the transport's thread) when samples came in: the loop decides on them.
        self.on_added: Callable[[], None] = lambda: None

    def add(self, samples: Sequence[KpiSample]) -> None:
        with self._lock:
            overflow = len(self._buffer) + len(samples) - (self._buffer.maxlen or 0)
            if overflow > 0:
                self.dropped += overflow
            self._buffer.extend(samples)
        if samples:
            self.on_added()

    def resize(self, max_samples: int) -> None:
        """A new bound (the fleet grew or shrank); the newest samples are kept."""
        with self._lock:
            self._buffer = deque(self._buffer, maxlen=max_samples)

    def poll(self, now_s: float) -> Sequence[KpiSample]:
        with self._lock:
            drained = list(self._buffer)
            self._buffer.clear()
        return drained
