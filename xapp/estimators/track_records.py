"""Each source's track record on each path, as fusion keeps it: arrays, one row per path and
one column per source (and one for fusion's own forecasts).

A record is (comparisons, bias: the slow mean relative error, mean squared error). Fusion
folds a period's errors into thousands of records at once and reads them back for every path
it fuses; kept as a dictionary of tuples keyed by (path, source), each of those was a lookup
and a tuple per path and source (a tenth of a 1,000-CPE step). Here a path costs one lookup,
and the records of a step's paths move in and out as arrays. ``get`` and item assignment keep
the dictionary's reading for code that works path by path (``FusedEstimator._fuse``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from core.domain import Direction
from core.slots import Places, Slots, grown, places_of

Path = tuple[str, str, Direction]
Record = tuple[int, float, float]  # comparisons, bias, mean squared error
Key = tuple[Path, str]  # (path, source name)


class TrackRecords:
    def __init__(self, names: Iterable[str], slots: Slots[Path] | None = None) -> None:
        """``names``: the sources' names (and fusion's own), one column each. ``slots``: the
        fleet's paths' places (a row each), shared with the sources' tables; else its own."""
        self._column: dict[str, int] = {}
        for name in names:
            self._column.setdefault(name, len(self._column))
        self._slots: Slots[Path] = slots if slots is not None else Slots()
        width = len(self._column)
        self.recorded = np.zeros((16, width), dtype=bool)
        self.count = np.zeros((16, width), dtype=np.int64)
        self.bias = np.zeros((16, width))
        self.square = np.zeros((16, width))

    def column(self, name: str) -> int:
        return self._column[name]

    def rows(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.intp]:
        """Each path's row, -1 for a path without one."""
        found = places_of(paths).in_slots(self._slots)
        return np.where(found < len(self.count), found, -1)

    def rows_made(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.intp]:
        """Each path's row, one made for a path without one."""
        at = places_of(paths)
        found = at.in_slots(self._slots)
        if (found < 0).any():
            found = self._slots.many(at.keys)
        self._grow(len(self._slots))
        return found

    def gather(
        self, rows: npt.NDArray[np.intp], columns: npt.NDArray[np.intp]
    ) -> tuple[
        npt.NDArray[np.bool_],
        npt.NDArray[np.int64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]:
        """(recorded, count, bias, square) at each (row, column), broadcast together; a row of
        -1 has no record (0 comparisons, no error)."""
        known = rows >= 0
        safe = np.where(known, rows, 0)
        recorded = known & self.recorded[safe, columns]
        return (
            recorded,
            np.where(recorded, self.count[safe, columns], 0),
            np.where(recorded, self.bias[safe, columns], 0.0),
            np.where(recorded, self.square[safe, columns], 0.0),
        )

    def put(
        self,
        rows: npt.NDArray[np.intp],
        columns: npt.NDArray[np.intp],
        count: npt.NDArray[np.int64],
        bias: npt.NDArray[np.float64],
        square: npt.NDArray[np.float64],
    ) -> None:
        """Records at these (row, column) places, each place once."""
        self.recorded[rows, columns] = True
        self.count[rows, columns] = count
        self.bias[rows, columns] = bias
        self.square[rows, columns] = square

    @overload
    def get(self, key: Key) -> Record | None: ...

    @overload
    def get(self, key: Key, default: Record) -> Record: ...

    def get(self, key: Key, default: Record | None = None) -> Record | None:
        path, name = key
        row = self._slots.get(path)
        column = self._column.get(name)
        if (
            row is None
            or row >= len(self.count)
            or column is None
            or not self.recorded[row, column]
        ):
            return default
        return (
            int(self.count[row, column]),
            float(self.bias[row, column]),
            float(self.square[row, column]),
        )

    def __setitem__(self, key: Key, record: Record) -> None:
        path, name = key
        row = self._slots.of(path)
        self._grow(row + 1)
        column = self._column[name]
        self.recorded[row, column] = True
        self.count[row, column], self.bias[row, column], self.square[row, column] = record

    def update(self, records: dict[Key, Record]) -> None:
        for key, record in records.items():
            self[key] = record

    def as_dict(self) -> dict[Key, Record]:
        """Every record, keyed as a dictionary would (for tests and inspection)."""
        names = list(self._column)
        out: dict[Key, Record] = {}
        for path, _ in self._slots.items():
            for name in names:
                record = self.get((path, name))
                if record is not None:
                    out[(path, name)] = record
        return out

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` rows (doubling), the new ones without records."""
        for field in ("recorded", "count", "bias", "square"):
            setattr(self, field, grown(getattr(self, field), rows, 0))
