"""State store kept in process memory: for the simulator, the evaluator and tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from core.domain import (
    Direction,
    Override,
    ProbeRecord,
    SaturatedPeriod,
    SubscriptionRecord,
    WeightSet,
)
from xapp.ports import LeaseOp, StaleVersionError, apply_lease_op


class MemoryStateStore:
    def __init__(self) -> None:
        self._weights: dict[tuple[str, Direction], WeightSet] = {}
        self._overrides: dict[tuple[str, Direction], Override] = {}
        self._subscriptions: dict[str, SubscriptionRecord] = {}
        self._probe_records: list[ProbeRecord] = []
        self._saturated: dict[tuple[str, str, Direction, int], SaturatedPeriod] = {}
        self._documents: dict[str, dict[str, Any]] = {}
        self._documents_version = 0
        self._raw: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load_weights(self, cpe_id: str, direction: Direction) -> WeightSet | None:
        return self._weights.get((cpe_id, direction))

    def save_weights(self, weight_set: WeightSet) -> None:
        self._weights[(weight_set.cpe_id, weight_set.direction)] = weight_set

    def states_of(
        self, keys: Sequence[tuple[str, Direction]]
    ) -> tuple[list[WeightSet | None], list[Override | None]]:
        """``load_weights`` and ``load_override`` of each key (xapp/ports.py: StatesOfMany)."""
        return list(map(self._weights.get, keys)), list(map(self._overrides.get, keys))

    def load_override(self, cpe_id: str, direction: Direction) -> Override | None:
        return self._overrides.get((cpe_id, direction))

    def save_override(self, override: Override) -> None:
        self._overrides[(override.cpe_id, override.direction)] = override

    def delete_override(self, cpe_id: str, direction: Direction) -> None:
        self._overrides.pop((cpe_id, direction), None)

    def save_subscription(self, record: SubscriptionRecord) -> None:
        self._subscriptions[record.node] = record

    def load_subscriptions(self) -> Sequence[SubscriptionRecord]:
        return list(self._subscriptions.values())

    def delete_subscription(self, node: str) -> None:
        self._subscriptions.pop(node, None)

    def append_probe_record(self, record: ProbeRecord) -> None:
        self._probe_records.append(record)

    def load_probe_records(self) -> Sequence[ProbeRecord]:
        return list(self._probe_records)

    def put_saturated_periods(self, periods: Sequence[tuple[SaturatedPeriod, int]]) -> None:
        for period, slot in periods:
            last = period.history[-1]
            self._saturated[(last.cpe_id, last.access, last.direction, slot)] = period

    def load_saturated_periods(self) -> Sequence[SaturatedPeriod]:
        return list(self._saturated.values())

    def find_documents(self, prefix: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._documents.items() if k.startswith(prefix)}

    def documents_version(self) -> int:
        return self._documents_version

    def read_documents(self, prefix: str) -> tuple[int, dict[str, dict[str, Any]]]:
        with self._lock:
            found = {k: dict(v) for k, v in self._documents.items() if k.startswith(prefix)}
            return self._documents_version, found

    def commit_documents(
        self,
        expected_version: int,
        puts: Mapping[str, Mapping[str, Any]],
        deletes: Sequence[str] = (),
    ) -> int:
        with self._lock:
            if self._documents_version != expected_version:
                raise StaleVersionError(
                    f"documents at version {self._documents_version}, not {expected_version}"
                )
            for key, document in puts.items():
                self._documents[key] = json.loads(json.dumps(document))  # a copy, as SDL keeps
            for key in deletes:
                self._documents.pop(key, None)
            self._documents_version += 1
            return self._documents_version

    def get_raw(self, key: str) -> bytes | None:
        return self._raw.get(key)

    def set_if_absent(self, key: str, value: bytes) -> bool:
        with self._lock:
            if key in self._raw:
                return False
            self._raw[key] = value
            return True

    def replace_if(self, key: str, old: bytes, new: bytes) -> bool:
        with self._lock:
            if self._raw.get(key) != old:
                return False
            self._raw[key] = new
            return True

    def remove_if_equal(self, key: str, old: bytes) -> bool:
        with self._lock:
            if self._raw.get(key) != old:
                return False
            del self._raw[key]
            return True

    def raw_keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self._raw if k.startswith(prefix))

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self._raw.get(key) for key in keys]

    def compare_and_set_many(self, ops: Sequence[LeaseOp]) -> list[bool]:
        return [apply_lease_op(self, op) for op in ops]
