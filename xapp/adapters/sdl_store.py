"""State store in the RIC's Shared Data Layer (ricsdl over Redis).

ricsdl finds its Redis through DBAAS_SERVICE_HOST / DBAAS_SERVICE_PORT, as every xApp in an
O-RAN SC RIC does. Values are JSON, one key per CPE and direction, under our own namespace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from core.domain import (
    Direction,
    Override,
    ProbeRecord,
    SaturatedPeriod,
    SteeringMode,
    SteeringRule,
    SteeringThresholds,
    SubscriptionRecord,
    WeightSet,
)
from xapp.adapters.probe_records import (
    record_from_json,
    record_to_json,
    saturated_from_json,
    saturated_to_json,
)
from xapp.adapters.redis_documents import RedisDocuments

NAMESPACE = "atsss"


# ricsdl opens its Redis connections without timeouts: a Redis that stops answering (or a
# DBAAS address that is not Redis) would hang a call for ever. Every SDL call gets these.
SDL_TIMEOUT_S = 3.0


class SdlUnavailableError(RuntimeError):
    """SDL cannot be reached or did not answer in time."""


class SdlStateStore:
    def __init__(
        self,
        storage: Any | None = None,
        namespace: str = NAMESPACE,
        timeout_s: float = SDL_TIMEOUT_S,
    ) -> None:
        if storage is None:
            from ricsdl.syncstorage import SyncStorage  # reads DBAAS_SERVICE_* when created

            try:
                storage = SyncStorage()
            except Exception as error:  # ricsdl raises its own types for a bad configuration
                raise SdlUnavailableError(f"cannot set up SDL: {error}") from error
            _bound_calls(storage, timeout_s)
        self._sdl = storage
        self._ns = namespace
        self._shared: RedisDocuments | None = None

    def check(self) -> None:
        """One round trip to SDL; SdlUnavailableError naming the address when it fails."""
        try:
            self._sdl.is_active()
            self._sdl.get(self._ns, {"atsss-probe"})
        except Exception as error:  # ricsdl wraps redis' errors in its own types
            host = os.environ.get("DBAAS_SERVICE_HOST", "(DBAAS_SERVICE_HOST unset)")
            port = os.environ.get("DBAAS_SERVICE_PORT", "(DBAAS_SERVICE_PORT unset)")
            raise SdlUnavailableError(f"cannot reach SDL at {host}:{port}: {error}") from error

    def close(self) -> None:
        self._sdl.close()
        if self._shared is not None:
            self._shared.close()

    # weights
    def load_weights(self, cpe_id: str, direction: Direction) -> WeightSet | None:
        raw = self._get(f"weights/{cpe_id}/{direction.value}")
        return None if raw is None else weight_set_from_json(raw)

    def save_weights(self, weight_set: WeightSet) -> None:
        key = f"weights/{weight_set.cpe_id}/{weight_set.direction.value}"
        self._set(key, weight_set_to_json(weight_set))

    def save_weights_many(self, weight_sets: Sequence[WeightSet]) -> None:
        """A step's pushed sets in a few round trips (one MSET per thousand), not one each:
        a fleet's first round is two thousand of them."""
        for start in range(0, len(weight_sets), SAVE_CHUNK):
            chunk = weight_sets[start : start + SAVE_CHUNK]
            self._sdl.set(
                self._ns,
                {
                    f"weights/{w.cpe_id}/{w.direction.value}": json.dumps(
                        weight_set_to_json(w), sort_keys=True
                    ).encode()
                    for w in chunk
                },
            )

    # overrides
    def load_override(self, cpe_id: str, direction: Direction) -> Override | None:
        raw = self._get(f"override/{cpe_id}/{direction.value}")
        return None if raw is None else override_from_json(raw)

    def load_weights_many(
        self, keys: Sequence[tuple[str, Direction]]
    ) -> dict[tuple[str, Direction], WeightSet | None]:
        """Several CPEs' weights in force in one round trip (MGET)."""
        names = {f"weights/{c}/{d.value}": (c, d) for c, d in keys}
        found: Mapping[str, bytes] = self._sdl.get(self._ns, set(names)) if names else {}
        return {
            key: None if name not in found else weight_set_from_json(json.loads(found[name]))
            for name, key in names.items()
        }

    def load_overrides(
        self, keys: Sequence[tuple[str, Direction]]
    ) -> dict[tuple[str, Direction], Override | None]:
        """Several CPEs' overrides in one round trip (MGET)."""
        names = {
            f"override/{cpe_id}/{direction.value}": (cpe_id, direction)
            for cpe_id, direction in keys
        }
        found: Mapping[str, bytes] = self._sdl.get(self._ns, set(names)) if names else {}
        return {
            key: None if name not in found else override_from_json(json.loads(found[name]))
            for name, key in names.items()
        }

    def save_override(self, override: Override) -> None:
        self._set(
            f"override/{override.cpe_id}/{override.direction.value}", override_to_json(override)
        )

    def delete_override(self, cpe_id: str, direction: Direction) -> None:
        self._sdl.remove(self._ns, {f"override/{cpe_id}/{direction.value}"})

    # E2 subscriptions
    def save_subscription(self, record: SubscriptionRecord) -> None:
        self._set(f"subscription/{record.node}", asdict(record))

    def load_subscriptions(self) -> Sequence[SubscriptionRecord]:
        found: Mapping[str, bytes] = self._sdl.find_and_get(self._ns, "subscription/*")
        return [SubscriptionRecord(**json.loads(value)) for _, value in sorted(found.items())]

    def delete_subscription(self, node: str) -> None:
        self._sdl.remove(self._ns, {f"subscription/{node}"})

    # probe results with their KPIs (training examples)
    def append_probe_record(self, record: ProbeRecord) -> None:
        o = record.outcome
        r = o.request
        key = (
            f"probe/{r.cpe_id}/{r.access}/{r.direction.value}/"
            f"{o.finished_at_s:015.3f}/{o.started_at_s:015.3f}"
        )
        self._set(key, record_to_json(record))

    def load_probe_records(self) -> Sequence[ProbeRecord]:
        found: Mapping[str, bytes] = self._sdl.find_and_get(self._ns, "probe/*")
        return [record_from_json(json.loads(value)) for _, value in sorted(found.items())]

    # periods in which a path was saturated (training examples the xApp labels itself)
    def put_saturated_periods(self, periods: Sequence[tuple[SaturatedPeriod, int]]) -> None:
        if not periods:
            return
        batch = {}
        for period, slot in periods:
            last = period.history[-1]
            key = f"saturated/{last.cpe_id}/{last.access}/{last.direction.value}/{slot}"
            batch[key] = json.dumps(saturated_to_json(period), sort_keys=True).encode()
        self._sdl.set(self._ns, batch)

    def load_saturated_periods(self) -> Sequence[SaturatedPeriod]:
        found: Mapping[str, bytes] = self._sdl.find_and_get(self._ns, "saturated/*")
        return [saturated_from_json(json.loads(value)) for _, value in sorted(found.items())]

    # documents (the operator's overrides and run-time CPEs): versioned, on SDL's database
    def find_documents(self, prefix: str) -> dict[str, dict[str, Any]]:
        return self._documents().find_documents(prefix)

    def documents_version(self) -> int:
        return self._documents().documents_version()

    def read_documents(self, prefix: str) -> tuple[int, dict[str, dict[str, Any]]]:
        return self._documents().read_documents(prefix)

    def commit_documents(
        self,
        expected_version: int,
        puts: Mapping[str, Mapping[str, Any]],
        deletes: Sequence[str] = (),
    ) -> int:
        return self._documents().commit_documents(expected_version, puts, deletes)

    def _documents(self) -> RedisDocuments:
        # ricsdl has no compare-and-set that a stock Redis runs, nor scripts: the database
        # SDL uses is asked directly (created on first use: most commands never need it)
        if self._shared is None:
            self._shared = RedisDocuments(self._ns)
        return self._shared

    def _get(self, key: str) -> dict[str, Any] | None:
        found: Mapping[str, bytes] = self._sdl.get(self._ns, {key})
        raw = found.get(key)
        return None if raw is None else dict(json.loads(raw))

    def _set(self, key: str, value: Mapping[str, Any]) -> None:
        self._sdl.set(self._ns, {key: json.dumps(value, sort_keys=True).encode()})


# Weight sets per MSET when a step's pushes are saved together.
SAVE_CHUNK = 1000

# Connections to SDL at most (ricsdl's own pool has 20): a fleet's pushes, agents' answers and
# API requests write from that many threads at once.
SDL_CONNECTIONS = 64


def _bound_calls(storage: Any, timeout_s: float) -> None:
    """Give ricsdl's Redis connections a connect and a read timeout, and make its pool of 20
    wait for a free connection (up to the timeout) instead of failing at once with "Too many
    connections" when more threads use SDL together (a fleet's pushes and agent answers).
    ricsdl 3.x keeps its backend and clients in private attributes; the version is pinned in
    pyproject.toml."""
    import redis

    backend = getattr(storage, "_SyncStorage__dbbackend", None)
    for connection in getattr(backend, "clients", []):
        pool = connection.redis_client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs.update(socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        connection.redis_client.connection_pool = redis.BlockingConnectionPool(
            connection_class=pool.connection_class,
            max_connections=max(pool.max_connections or 0, SDL_CONNECTIONS),
            timeout=timeout_s,
            **kwargs,
        )


def weight_set_to_json(weight_set: WeightSet) -> dict[str, Any]:
    return {
        "cpe_id": weight_set.cpe_id,
        "direction": weight_set.direction.value,
        "weights": dict(weight_set.weights),
        "mode": weight_set.mode.value,
        "sequence": weight_set.sequence,
        "reason": weight_set.reason,
    }


def weight_set_from_json(raw: Mapping[str, Any]) -> WeightSet:
    return WeightSet(
        cpe_id=raw["cpe_id"],
        direction=Direction(raw["direction"]),
        weights={str(k): int(v) for k, v in raw["weights"].items()},
        mode=SteeringMode(raw["mode"]),
        sequence=int(raw["sequence"]),
        reason=raw.get("reason", ""),
    )


def override_to_json(override: Override) -> dict[str, Any]:
    rule = None
    if override.rule is not None:
        rule = {
            "mode": override.rule.mode.value,
            "preferred": list(override.rule.preferred),
            "rtt_ms": override.rule.thresholds.rtt_ms,
            "loss_rate_permille": override.rule.thresholds.loss_rate_permille,
        }
    return {
        "cpe_id": override.cpe_id,
        "direction": override.direction.value,
        "weights": None if override.weights is None else dict(override.weights),
        "rule": rule,
        "excluded": sorted(override.excluded),
        "frozen": override.frozen,
        "revision": override.revision,
        "requested_by": override.requested_by,
    }


def override_from_json(raw: Mapping[str, Any]) -> Override:
    rule = None
    if raw.get("rule") is not None:
        r = raw["rule"]
        rule = SteeringRule(
            mode=SteeringMode(r["mode"]),
            preferred=tuple(r["preferred"]),
            thresholds=SteeringThresholds(r.get("rtt_ms"), r.get("loss_rate_permille")),
        )
    weights = raw.get("weights")
    return Override(
        cpe_id=raw["cpe_id"],
        direction=Direction(raw["direction"]),
        weights=None if weights is None else {str(k): int(v) for k, v in weights.items()},
        rule=rule,
        excluded=frozenset(raw.get("excluded", ())),
        frozen=bool(raw.get("frozen", False)),
        revision=int(raw.get("revision", 0)),
        requested_by=raw.get("requested_by", "operator"),
    )
