"""Each key's place in arrays: state kept per key as columns (one array per field) can then be
read and written for thousands of keys at once.

A fleet's step touches every path of every CPE. Kept in dictionaries of small objects, each
path costs a few dictionary lookups and attribute reads in Python, every step; kept as
columns, a step's paths are gathered and scattered by their places in a handful of array
operations. A key's place is given the first time it is seen and kept for good (the fleet's
paths are few and come back; a forgotten key's place is reset by its owner, not reused).
"""

from __future__ import annotations

from collections.abc import Container, Hashable, ItemsView, Iterable, Iterator, Sequence
from itertools import repeat
from operator import not_
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

K = TypeVar("K", bound=Hashable)
A = TypeVar("A", bound=np.generic)

INITIAL_SIZE = 64


class Slots(Generic[K]):
    """Keys numbered 0, 1, 2, … in the order they are first seen."""

    def __init__(self) -> None:
        self._of: dict[K, int] = {}
        self._keys: list[K] = []  # by place

    def __len__(self) -> int:
        return len(self._of)

    def of(self, key: K) -> int:
        """The key's place, given now if it has none."""
        slot = self._of.get(key)
        if slot is None:
            slot = self._of[key] = len(self._of)
            self._keys.append(key)
        return slot

    def get(self, key: K) -> int | None:
        """The key's place, or None if it was never given one."""
        return self._of.get(key)

    def many(self, keys: Sequence[K]) -> npt.NDArray[np.intp]:
        """Each key's place (given now to those without one), in order."""
        # A fleet's keys all have places after its first step: looked up by map, without a
        # Python step per key (a step asks for some 20,000 places at 1,000 CPEs).
        known = self.found(keys)
        if len(known) and known.min() < 0:
            of = self._of
            for i in np.flatnonzero(known < 0).tolist():
                key = keys[i]
                slot = of.get(key)  # (a key met twice gets its place once)
                if slot is None:
                    slot = of[key] = len(of)
                    self._keys.append(key)
                known[i] = slot
        return known

    def found(self, keys: Sequence[K]) -> npt.NDArray[np.intp]:
        """Each key's place, -1 for a key never given one (none is given now: reading a
        key does not make room for it)."""
        return np.fromiter(map(self._of.get, keys, repeat(-1)), np.intp, len(keys))

    def items(self) -> ItemsView[K, int]:
        return self._of.items()

    def keys_at(self, places: Sequence[int]) -> list[K]:
        """The key at each place."""
        keys = self._keys
        return [keys[place] for place in places]

    def marked(self, keys: Iterable[K]) -> npt.NDArray[np.bool_]:
        """True at the places of these keys, one more place at the end (False) that a key
        with no place (-1) reads: a few keys among a fleet's, tested by place."""
        found = self.found(list(keys))
        marks = np.zeros(len(self) + 1, dtype=bool)
        marks[found[found >= 0]] = True
        return marks


class Places(Generic[K]):
    """Keys with their places in any ``Slots`` asked of, each found once (a fleet's paths are
    looked up once for every table kept by the same slots, not once per table); found again
    where the slots have grown since and a key had none (it may have been given one)."""

    def __init__(self, keys: Sequence[K]) -> None:
        self.keys = keys
        # per slots: the slots, their size when the keys were found (-1: every key had a
        # place, which never changes), the places
        self._found: dict[int, tuple[Slots[K], int, npt.NDArray[np.intp]]] = {}

    @classmethod
    def known(cls, keys: Sequence[K], slots: Slots[K], places: npt.NDArray[np.intp]) -> Places[K]:
        """Keys whose places in ``slots`` the caller has (each key's, in order): a step's
        owner of the shared slots passes them down rather than have them looked up again."""
        made = cls(keys)
        made._keep(slots, places)
        return made

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys)

    def in_slots(self, slots: Slots[K]) -> npt.NDArray[np.intp]:
        """``slots.found(keys)``."""
        known = self._found.get(id(slots))
        if known is None or known[0] is not slots or known[1] not in (-1, len(slots)):
            known = self._keep(slots, slots.found(self.keys))
        return known[2]

    def without(self, dropped: Container[K]) -> Places[K]:
        """These keys less those in ``dropped``, in order, with the places found so far (a
        fleet's sweep less the few paths a probe is under way on, looked up once)."""
        kept = list(map(not_, map(dropped.__contains__, self.keys)))
        return self if all(kept) else self.picked(np.flatnonzero(kept))

    def picked(self, rows: npt.NDArray[np.intp]) -> Places[K]:
        """The keys at ``rows``, in that order, with the places found so far."""
        keys = self.keys
        less = Places(list(map(keys.__getitem__, rows.tolist())))
        # (a subset of keys that all had places has them all; one that did not is looked up
        # again as this one would be, where the slots have grown since)
        for slots, size, places in self._found.values():
            less._found[id(slots)] = (slots, size, places[rows])
        return less

    def _keep(
        self, slots: Slots[K], places: npt.NDArray[np.intp]
    ) -> tuple[Slots[K], int, npt.NDArray[np.intp]]:
        size = len(slots) if len(places) and places.min() < 0 else -1
        known = self._found[id(slots)] = (slots, size, places)
        return known


def distinct(places: npt.NDArray[np.intp]) -> bool:
    """No place comes twice (a fleet's step: each path once), told without sorting."""
    return bool(np.bincount(places).max(initial=0) <= 1)


def places_of(keys: Sequence[K] | Places[K]) -> Places[K]:
    return keys if isinstance(keys, Places) else Places(keys)


def grown(column: npt.NDArray[A], size: int, fill: object) -> npt.NDArray[A]:
    """``column``, or a copy at least ``size`` long (doubling) with the new places ``fill``:
    the columns of state kept per slot grow with the slots. A table (one row per slot) grows
    by rows."""
    if len(column) >= size:
        return column
    rows = max(size, 2 * len(column), INITIAL_SIZE)
    longer = np.full((rows, *column.shape[1:]), fill, dtype=column.dtype)
    longer[: len(column)] = column
    return longer
