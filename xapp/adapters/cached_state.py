"""The control loop's state (weights in force, overrides) kept in memory in front of the store.

With SDL behind it, the loop asked the database once per CPE, direction and KPI sample: with a
thousand CPEs that is thousands of round trips per step, and the step outlasts the period. Here:

- **weights in force** are written through (the database first, then memory) and read from
  memory: for the CPEs it decides for, this replica is the only writer (leases), and a CPE
  taken over is read from its agent before the first decision, which writes it here too;
- **overrides** are read from the database in one batch per step (``refresh``): an override set
  through another replica's API is seen at the next step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

from core.domain import Direction, Override, WeightSet
from xapp.ports import StateStore

Key = tuple[str, Direction]
_UNREAD: Any = object()  # (a key not in memory yet; None is a value read: none there)


class CachedState:
    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._weights: dict[Key, WeightSet | None] = {}
        self._overrides: dict[Key, Override | None] = {}
        # Told of each override written through here (the operator's API in this process):
        # the loop decides for that CPE at once instead of at its next step.
        self.on_override: Callable[[str], None] = lambda cpe_id: None

    def refresh(self, keys: Iterable[Key]) -> None:
        """Read the overrides of these CPEs and directions again, and the weights of those not
        read yet, in one batch each where the store has one."""
        wanted = list(keys)
        many = getattr(self._store, "load_overrides", None)
        found = (
            many(wanted)
            if many is not None
            else {key: self._store.load_override(*key) for key in wanted}
        )
        with self._lock:
            self._overrides.update(found)
            unread = [key for key in wanted if key not in self._weights]
        if not unread:
            return
        many_weights = getattr(self._store, "load_weights_many", None)
        weights = (
            many_weights(unread)
            if many_weights is not None
            else {key: self._store.load_weights(*key) for key in unread}
        )
        with self._lock:
            for key, value in weights.items():
                self._weights.setdefault(key, value)

    def load_weights(self, cpe_id: str, direction: Direction) -> WeightSet | None:
        key = (cpe_id, direction)
        with self._lock:
            if key in self._weights:
                return self._weights[key]
        found = self._store.load_weights(cpe_id, direction)
        with self._lock:
            return self._weights.setdefault(key, found)

    def states_of(
        self, keys: Sequence[Key]
    ) -> tuple[list[WeightSet | None], list[Override | None]]:
        """``load_weights`` and ``load_override`` of each key (xapp/ports.py: StatesOfMany):
        read from memory under one lock, and those not read yet from the store as those
        methods do (a fleet's step, after ``refresh``, finds every one in memory)."""
        with self._lock:
            weights = list(map(self._weights.get, keys, repeat(_UNREAD)))
            overrides = list(map(self._overrides.get, keys, repeat(_UNREAD)))
        for i in [i for i, found in enumerate(weights) if found is _UNREAD]:
            weights[i] = self.load_weights(*keys[i])
        for i in [i for i, found in enumerate(overrides) if found is _UNREAD]:
            overrides[i] = self.load_override(*keys[i])
        return weights, overrides  # (none is _UNREAD now)

    def weights_known(self, cpe_id: str, direction: Direction) -> WeightSet | None:
        """The weights in force as far as memory knows, never asking the store (the fleet view
        reads 20,000 of these a page; a CPE not read yet shows none)."""
        with self._lock:
            return self._weights.get((cpe_id, direction))

    def save_weights(self, weight_set: WeightSet) -> None:
        self._store.save_weights(weight_set)  # the database first: a failure changes nothing
        with self._lock:
            self._weights[(weight_set.cpe_id, weight_set.direction)] = weight_set

    def save_weights_many(self, weight_sets: Sequence[WeightSet]) -> None:
        """Several sets, in as few store round trips as the store allows."""
        many = getattr(self._store, "save_weights_many", None)
        if many is not None:
            many(weight_sets)  # the database first: a failure changes nothing
        else:
            for weight_set in weight_sets:
                self._store.save_weights(weight_set)
        with self._lock:
            for weight_set in weight_sets:
                self._weights[(weight_set.cpe_id, weight_set.direction)] = weight_set

    def load_override(self, cpe_id: str, direction: Direction) -> Override | None:
        key = (cpe_id, direction)
        with self._lock:
            if key in self._overrides:
                return self._overrides[key]
        found = self._store.load_override(cpe_id, direction)
        with self._lock:
            return self._overrides.setdefault(key, found)

    def save_override(self, override: Override) -> None:
        self._store.save_override(override)
        with self._lock:
            self._overrides[(override.cpe_id, override.direction)] = override
        self.on_override(override.cpe_id)

    def delete_override(self, cpe_id: str, direction: Direction) -> None:
        self._store.delete_override(cpe_id, direction)
        with self._lock:
            self._overrides[(cpe_id, direction)] = None
        self.on_override(cpe_id)

    def forget(self, cpe_ids: Iterable[str]) -> None:
        """CPEs no longer decided here (another replica's now): read from the store again."""
        gone = set(cpe_ids)
        with self._lock:
            for key in [k for k in self._weights if k[0] in gone]:
                del self._weights[key]
            for key in [k for k in self._overrides if k[0] in gone]:
                del self._overrides[key]
