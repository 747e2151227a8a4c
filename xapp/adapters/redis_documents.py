"""The operator's documents (overrides, run-time CPEs) on the RIC's database, shared by every
replica: each change is one Lua script that checks the version, writes every key of the
change and counts it, so that two replicas cannot both win, and an import is all or nothing
(Redis runs a script whole, and writes it to its append-only file as one transaction).

A change also carries the latest Redis time at which it may still be carried out. A Redis that
stalls past the client's timeout (frozen, swapping) runs the commands it had buffered when it
resumes: without the limit, a change the API answered "503, nothing was changed" would go into
force later after all. With it, the script refuses itself when it runs too late; and the client
reads back a change whose answer it missed before it says what happened.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from xapp.adapters.redis_leases import sdl_database
from xapp.ports import StaleVersionError

VERSION = "operator/version"
# Each change leaves a marker for a minute (the version it made): a client that lost the
# answer finds it there.
COMMITTED = "operator/committed/"
MARKER_MS = 60_000
# How long after the client sent its change the change may still be carried out: well inside
# the client's own timeout (sdl_database: 2 s), so a change the client gave up on is refused.
# The client knows Redis' clock only from reading it, a moment before it sends: the time that
# passed in between (a busy process waits for its turn) is added, measured on its own clock, so
# a change is never refused for the client's slowness, only for the database's.
WINDOW_MS = 1000
READ_BACK_S = 3.0  # how long a change whose answer was lost is looked for

COMMIT = """
redis.replicate_commands()
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
if version ~= tonumber(ARGV[1]) then return {0, version} end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if now_ms > tonumber(ARGV[2]) then return {-1, version} end
local sets = tonumber(ARGV[3])
for i = 1, sets do redis.call('SET', KEYS[2 + i], ARGV[4 + i]) end
for i = 3 + sets, #KEYS do redis.call('DEL', KEYS[i]) end
local new = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], new, 'PX', ARGV[4])
return {1, new}
"""


class ChangeNotCarriedOutError(RuntimeError):
    """The database did not carry the change out (it did not answer in time): nothing changed."""


class RedisDocuments:
    def __init__(self, namespace: str, host: str | None = None, port: int | None = None) -> None:
        self._prefix = "{" + namespace + "},"
        self._redis = sdl_database(host, port)
        self._commit = self._redis.register_script(COMMIT)

    def close(self) -> None:
        self._redis.close()

    def documents_version(self) -> int:
        return int(self._redis.get(self._prefix + VERSION) or 0)

    def find_documents(self, prefix: str) -> dict[str, dict[str, Any]]:
        return self.read_documents(prefix)[1]

    def read_documents(self, prefix: str) -> tuple[int, dict[str, dict[str, Any]]]:
        """The version read before and after the documents: equal, the read is consistent."""
        for _ in range(10):
            before = self.documents_version()
            keys = sorted(self._redis.scan_iter(match=self._prefix + prefix + "*", count=1000))
            values = self._redis.mget(keys) if keys else []
            if self.documents_version() == before:
                found = {
                    bytes(key).decode().removeprefix(self._prefix): dict(json.loads(value))
                    for key, value in zip(keys, values, strict=True)
                    if value is not None
                }
                return before, found
        raise StaleVersionError("the documents kept changing while being read")

    def commit_documents(
        self,
        expected_version: int,
        puts: Mapping[str, Mapping[str, Any]],
        deletes: Sequence[str] = (),
    ) -> int:
        seconds, micros = self._redis.time()  # fails fast (nothing written) when Redis is out
        clock_read = time.monotonic()
        commit_id = uuid.uuid4().hex
        keys = [self._prefix + VERSION, self._prefix + COMMITTED + commit_id]
        keys += [self._prefix + key for key in puts]
        keys += [self._prefix + key for key in deletes]
        values = [json.dumps(document, sort_keys=True) for document in puts.values()]
        # Redis' clock has moved on at least as far as ours since the read (taken after it).
        since_read_ms = int((time.monotonic() - clock_read) * 1000)
        not_after_ms = int(seconds) * 1000 + int(micros) // 1000 + since_read_ms + WINDOW_MS
        args = [expected_version, not_after_ms, len(puts), MARKER_MS, *values]
        try:
            outcome, version = self._commit(keys=keys, args=args)
        except (redis.TimeoutError, redis.ConnectionError) as error:
            return self._read_back(commit_id, error)
        if outcome == 0:
            raise StaleVersionError(f"documents at version {version}, not {expected_version}")
        if outcome < 0:
            raise ChangeNotCarriedOutError("the database ran the change too late; it refused it")
        return int(version)

    def _read_back(self, commit_id: str, error: Exception) -> int:
        """The answer was lost: the change is in force if its marker is there. If the database
        does not answer at all, the change is not in force here: a stalled database refuses it
        when it resumes (its window is past by then); one that died just after taking it comes
        back with it, and every replica reads it then (the version moved)."""
        deadline = time.monotonic() + READ_BACK_S
        while time.monotonic() < deadline:
            try:
                marker = self._redis.get(self._prefix + COMMITTED + commit_id)
            except (redis.TimeoutError, redis.ConnectionError):
                time.sleep(0.2)
                continue
            if marker is not None:
                return int(marker)  # the version the change made
            raise ChangeNotCarriedOutError(f"the database did not carry the change out: {error}")
        raise ChangeNotCarriedOutError(
            f"the database did not confirm the change ({error}); it is not in force. A database "
            "that stalled refuses it if it runs it later; one that went down after taking it "
            "has every replica apply it once it answers again"
        )
