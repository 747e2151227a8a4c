"""Compare-and-set on the RIC's database, for the leases between replicas (xapp.ownership).

ricsdl offers it (set_if, remove_if), but through SETIE and DELIE, commands of the O-RAN SC
dbaas image's Redis module that a stock Redis does not have. The same atomic steps as two short
Lua scripts work on both, so this adapter talks to the database SDL uses
(DBAAS_SERVICE_HOST/PORT) directly, with keys in SDL's form ``{namespace},key``.
"""

from __future__ import annotations

import os

import redis

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


class RedisLeaseStore:
    def __init__(self, namespace: str, host: str | None = None, port: int | None = None) -> None:
        self._prefix = "{" + namespace + "},"
        self._redis = redis.Redis(
            host=host or os.environ.get("DBAAS_SERVICE_HOST", "127.0.0.1"),
            port=port or int(os.environ.get("DBAAS_SERVICE_PORT", "6379")),
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
        )

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

    def raw_keys(self, prefix: str) -> list[str]:
        found = self._redis.scan_iter(match=self._prefix + prefix + "*", count=1000)
        return sorted(bytes(key).decode().removeprefix(self._prefix) for key in found)
