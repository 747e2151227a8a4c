"""What the xApp knows of each agent's reachability, so that a bad agent keeps only its own CPE
out of control: failures in a row, the last error, and until when it is left alone.

An agent that fails (unreachable, too slow, a refusal that will not change by itself such as a
wrong token, an answer that is not one) is not called again for a while, doubling from
``first_backoff_s`` to ``max_backoff_s`` while it keeps failing; callers get at once the reason
it is left alone, with no network call. One success clears it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

AgentState = Literal["ok", "failing", "unknown"]


@dataclass
class _Record:
    failures: int = 0
    last_error: str = ""
    until: float = 0.0  # monotonic: not called before this
    last_ok: float | None = None  # wall clock of the last success


class AgentBook:
    def __init__(
        self,
        first_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._first = first_backoff_s
        self._max = max_backoff_s
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def left_alone(self, url: str) -> str | None:
        """None when the agent may be called now, else why not (one line)."""
        with self._lock:
            record = self._records.get(url)
            if record is None or record.failures == 0:
                return None
            left = record.until - self._clock()
            if left <= 0:
                return None
            return (
                f"agent at {url} left alone for {left:.0f} s more after {record.failures} "
                f"failure{'s' if record.failures > 1 else ''}: {record.last_error}"
            )

    def succeeded(self, url: str) -> None:
        with self._lock:
            record = self._records.setdefault(url, _Record())
            record.failures, record.last_error, record.until = 0, "", 0.0
            record.last_ok = time.time()

    def failed(self, url: str, error: str) -> None:
        with self._lock:
            record = self._records.setdefault(url, _Record())
            record.failures += 1
            record.last_error = error[:300]
            backoff = min(self._max, self._first * 2 ** (record.failures - 1))
            record.until = self._clock() + backoff

    def failures(self, url: str) -> int:
        with self._lock:
            record = self._records.get(url)
            return 0 if record is None else record.failures

    def describe(self, url: str) -> dict[str, object]:
        """For /v1/agents: state, failures in a row, last error, seconds until the next try."""
        with self._lock:
            record = self._records.get(url) or _Record()
            retry_in = max(0.0, record.until - self._clock()) if record.failures else 0.0
            return {
                "state": "unknown"
                if url not in self._records
                else ("failing" if record.failures else "ok"),
                "failures": record.failures,
                "last_error": record.last_error or None,
                "retry_in_s": round(retry_in, 1),
                "last_ok_s": record.last_ok,
            }

    def counts(self) -> dict[AgentState, int]:
        with self._lock:
            failing = sum(1 for r in self._records.values() if r.failures)
            return {"ok": len(self._records) - failing, "failing": failing}
