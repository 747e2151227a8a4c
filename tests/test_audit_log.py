"""The operator's audit log, bounded and paged, on a real Redis (and its in-memory twin).

Before: one SDL key per entry, every read KEYS + MGET of all of them (300,000 entries: 8.2 s,
RSS 221 → 1,277 MB, another Redis client blocked 342 ms), no paging, no bound.
"""

from __future__ import annotations

import redis

from tests.servers import redis_server
from xapp.adapters.audit_log import SCAN_PER_PAGE, MemoryAuditLog, RedisAuditLog


def entry(n: int) -> dict[str, object]:
    return {"at_s": float(n), "who": "alice", "action": "override set", "cpe_id": f"cpe-{n % 1000}"}


def test_a_long_log_is_bounded_and_paged_without_keys() -> None:
    with redis_server() as port:
        log = RedisAuditLog("atsss-test", max_entries=40_000, max_age_s=86400, port=port)
        for first in range(0, 60_000, 10_000):
            log.append_many([entry(n) for n in range(first, first + 10_000)])
        # Trimmed as written: about the newest 40,000 (whole stream nodes at a time).
        assert 40_000 <= log.size() < 41_000
        page = log.page(100)
        assert [e["at_s"] for e in page.entries] == [float(n) for n in range(59_999, 59_899, -1)]
        following = log.page(100, before=page.next_before)
        assert following.entries[0]["at_s"] == 59_899.0
        assert following.entries[0]["id"] != page.entries[-1]["id"]
        mine = log.page(5, cpe_id="cpe-7")
        assert [e["at_s"] for e in mine.entries] == [
            59_007.0,
            58_007.0,
            57_007.0,
            56_007.0,
            55_007.0,
        ]
        # A CPE with no entry costs one bounded scan and says where it stopped.
        none = log.page(10, cpe_id="cpe-none")
        assert none.entries == []
        assert none.next_before is not None
        pages = 1
        cursor: str | None = none.next_before
        while cursor is not None:  # the reader pages on until the oldest entry kept
            rest = log.page(10, cpe_id="cpe-none", before=cursor)
            assert rest.entries == []
            pages, cursor = pages + 1, rest.next_before
        assert pages == log.size() // SCAN_PER_PAGE + 1
        stats = redis.Redis(port=port).info("commandstats")
        assert "cmdstat_keys" not in stats
        assert "cmdstat_scan" not in stats
        # Two pages, five chunks of 1,000 for cpe-7's five, 1,000 at a time for cpe-none.
        assert stats["cmdstat_xrevrange"]["calls"] <= 2 + 5 + log.size() // 1000 + pages
        log.close()


def test_the_memory_log_is_the_same_log() -> None:
    log = MemoryAuditLog(max_entries=1000, max_age_s=86400)
    for n in range(2500):
        log.append(entry(n))
    assert log.size() == 1000
    page = log.page(3)
    assert [e["at_s"] for e in page.entries] == [2499.0, 2498.0, 2497.0]
    following = log.page(3, before=page.next_before)
    assert [e["at_s"] for e in following.entries] == [2496.0, 2495.0, 2494.0]
    assert [e["at_s"] for e in log.page(2, cpe_id="cpe-7").entries] == [2007.0]  # 1007: gone
