"""The operator's audit log, bounded: a capped Redis stream in the RIC's database, or a capped
list in memory (no SDL).

Before, every entry was an SDL key of its own and every read fetched all of them (ricsdl's
``find_and_get``: KEYS, then MGET): with 300,000 entries one read took 8 s and 1 GB, and blocked
the RIC's shared Redis for a third of a second. A stream keeps the entries in order, trims itself
by count and age as it is written (XADD with MAXLEN and MINID, approximate: whole nodes at a
time), and answers a page with one XREVRANGE: the newest first, ``before`` an entry's id for the
next page. The key is in SDL's form, ``{namespace},operator/audit``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from xapp.adapters.redis_leases import sdl_database

# A read filtered by CPE looks through at most this many entries per page (then says where it
# stopped): a CPE with few changes in a long log costs a bounded read, never the whole log.
SCAN_PER_PAGE = 20_000
_CHUNK = 1_000


class AuditPage:
    def __init__(self, entries: list[dict[str, Any]], next_before: str | None) -> None:
        self.entries = entries
        self.next_before = next_before  # pass as ``before`` for the next page; None: no more


class RedisAuditLog:
    def __init__(
        self,
        namespace: str,
        max_entries: int,
        max_age_s: float,
        host: str | None = None,
        port: int | None = None,
    ) -> None:
        self._key = "{" + namespace + "},operator/audit"
        self._max_entries = max_entries
        self._max_age_s = max_age_s
        self._redis = sdl_database(host, port)

    def close(self) -> None:
        self._redis.close()

    def append(self, entry: Mapping[str, Any]) -> None:
        self.append_many([entry])

    def append_many(self, entries: list[Mapping[str, Any]]) -> None:
        oldest_ms = int((time.time() - self._max_age_s) * 1000)
        with self._redis.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.xadd(
                    self._key,
                    {"e": json.dumps(entry, sort_keys=True)},
                    maxlen=self._max_entries,
                    approximate=True,
                )
            pipe.xtrim(self._key, minid=f"{oldest_ms}-0", approximate=True)
            pipe.execute()

    def page(self, limit: int, before: str | None = None, cpe_id: str | None = None) -> AuditPage:
        """The newest ``limit`` entries older than ``before`` (an entry's id), of ``cpe_id``
        only when given; each carries its ``id``."""
        found: list[dict[str, Any]] = []
        upper = "+" if before is None else "(" + before
        scanned = 0
        while len(found) < limit and scanned < SCAN_PER_PAGE:
            want = limit - len(found) if cpe_id is None else _CHUNK
            rows = self._redis.xrevrange(self._key, max=upper, min="-", count=want)
            if not rows:
                return AuditPage(found, None)
            for raw_id, fields in rows:
                scanned += 1
                entry_id = raw_id.decode()
                upper = "(" + entry_id
                entry = json.loads(fields[b"e"])
                if cpe_id is None or entry.get("cpe_id") == cpe_id:
                    found.append({"id": entry_id, **entry})
                    if len(found) == limit:
                        return AuditPage(found, entry_id)
        return AuditPage(found, upper.removeprefix("("))

    def size(self) -> int:
        return int(self._redis.xlen(self._key))


class MemoryAuditLog:
    """The same log for an xApp without SDL: the newest ``max_entries`` in memory."""

    def __init__(self, max_entries: int, max_age_s: float) -> None:
        self._entries: deque[tuple[str, dict[str, Any]]] = deque(maxlen=max_entries)
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._last_ms = 0
        self._serial = 0

    def append(self, entry: Mapping[str, Any]) -> None:
        with self._lock:
            now_ms = int(time.time() * 1000)
            self._serial = self._serial + 1 if now_ms <= self._last_ms else 0
            self._last_ms = max(now_ms, self._last_ms)
            self._entries.append((f"{self._last_ms}-{self._serial}", dict(entry)))
            oldest = (time.time() - self._max_age_s) * 1000
            while self._entries and int(self._entries[0][0].split("-")[0]) < oldest:
                self._entries.popleft()

    def page(self, limit: int, before: str | None = None, cpe_id: str | None = None) -> AuditPage:
        with self._lock:
            newest_first = list(reversed(self._entries))
        if before is not None:
            key = _id_key(before)
            newest_first = [(i, e) for i, e in newest_first if _id_key(i) < key]
        chosen = [
            {"id": i, **e} for i, e in newest_first if cpe_id is None or e.get("cpe_id") == cpe_id
        ]
        page = chosen[:limit]
        more = len(chosen) > limit
        return AuditPage(page, page[-1]["id"] if more and page else None)

    def size(self) -> int:
        return len(self._entries)


def _id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, serial = entry_id.partition("-")
    return int(milliseconds), int(serial or 0)
