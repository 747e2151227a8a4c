"""Compare-and-set on the RIC's database, for the leases between replicas (xapp.ownership).

ricsdl offers it (set_if, remove_if), but through SETIE and DELIE, commands of the O-RAN SC
dbaas image's Redis module that a stock Redis does not have. The same atomic steps as two short
Lua scripts work on both, so this adapter talks to the database SDL uses
(DBAAS_SERVICE_HOST/PORT) directly, with keys in SDL's form ``{namespace},key``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import redis

from xapp.ports import LeaseOp

REPLACE_IF = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
REMOVE_IF = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""


def sdl_database(host: str | None = None, port: int | None = None) -> redis.Redis:
    """A client of the database SDL uses (DBAAS_SERVICE_HOST/PORT unless given), every call
    bounded to 2 s: for what ricsdl does not offer (compare-and-set, streams)."""
    return redis.Redis(
        host=host or os.environ.get("DBAAS_SERVICE_HOST", "127.0.0.1"),
        port=port or int(os.environ.get("DBAAS_SERVICE_PORT", "6379")),
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
    )


# Many compare-and-sets in one script: per op its kind, the value expected and the new one.
CAS_MANY = """
local done = {}
for i = 1, #KEYS do
  local kind, old, new = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local ok = 0
  if kind == 'a' then
    if redis.call('SET', KEYS[i], new, 'NX') then ok = 1 end
  elseif redis.call('GET', KEYS[i]) == old then
    if kind == 'r' then redis.call('SET', KEYS[i], new) else redis.call('DEL', KEYS[i]) end
    ok = 1
  end
  done[i] = ok
end
return done
"""
CAS_KINDS = {"absent": "a", "replace": "r", "remove": "d"}
CAS_CHUNK = 2000


class RedisLeaseStore:
    def __init__(self, namespace: str, host: str | None = None, port: int | None = None) -> None:
        self._prefix = "{" + namespace + "},"
        self._redis = sdl_database(host, port)
        self._cas_many = self._redis.register_script(CAS_MANY)

    def close(self) -> None:
        self._redis.close()

    def get_raw(self, key: str) -> bytes | None:
        value = self._redis.get(self._prefix + key)
        return None if value is None else bytes(value)

    def set_if_absent(self, key: str, value: bytes) -> bool:
        return bool(self._redis.set(self._prefix + key, value, nx=True))

    def replace_if(self, key: str, old: bytes, new: bytes) -> bool:
        return bool(self._redis.eval(REPLACE_IF, 1, self._prefix + key, old, new))

    def remove_if_equal(self, key: str, old: bytes) -> bool:
        return bool(self._redis.eval(REMOVE_IF, 1, self._prefix + key, old))

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        values = self._redis.mget([self._prefix + key for key in keys])
        return [None if v is None else bytes(v) for v in values]

    def compare_and_set_many(self, ops: Sequence[LeaseOp]) -> list[bool]:
        """A few thousand ops per script call (one round trip each), each op atomic; the
        script holds Redis a millisecond or so per thousand."""
        found: list[bool] = []
        for start in range(0, len(ops), CAS_CHUNK):
            chunk = ops[start : start + CAS_CHUNK]
            keys, args = [], []
            for kind, key, old, new in chunk:
                if kind not in CAS_KINDS:
                    raise ValueError(f"not a lease op: {kind!r}")
                keys.append(self._prefix + key)
                args += [CAS_KINDS[kind], old or b"", new or b""]
            found += [bool(answer) for answer in self._cas_many(keys=keys, args=args)]
        return found

    def raw_keys(self, prefix: str) -> list[str]:
        found = self._redis.scan_iter(match=self._prefix + prefix + "*", count=1000)
        return sorted(bytes(key).decode().removeprefix(self._prefix) for key in found)
