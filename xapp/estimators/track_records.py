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

Path = tuple[str, str, Direction]
Record = tuple[int, float, float]  # comparisons, bias, mean squared error
Key = tuple[Path, str]  # (path, source name)


class TrackRecords:
    def __init__(self, names: Iterable[str]) -> None:
        """``names``: the sources' names (and fusion's own), one column each."""
        self._column: dict[str, int] = {}
        for name in names:
            self._column.setdefault(name, len(self._column))
        self._row: dict[Path, int] = {}
        width = len(self._column)
        self.recorded = np.zeros((16, width), dtype=bool)
        self.count = np.zeros((16, width), dtype=np.int64)
        self.bias = np.zeros((16, width))
        self.square = np.zeros((16, width))

    def column(self, name: str) -> int:
        return self._column[name]

    def rows(self, paths: Sequence[Path]) -> npt.NDArray[np.intp]:
        """Each path's row, -1 for a path without one."""
        get = self._row.get
        return np.fromiter((get(path, -1) for path in paths), np.intp, len(paths))

    def rows_made(self, paths: Sequence[Path]) -> npt.NDArray[np.intp]:
        """Each path's row, one made for a path without one."""
        rows = self._row
        found = [rows.get(path, -1) for path in paths]
        for i, row in enumerate(found):
            if row < 0:
                found[i] = self._new_row(paths[i])
        return np.array(found, dtype=np.intp)

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
        row = self._row.get(path)
        column = self._column.get(name)
        if row is None or column is None or not self.recorded[row, column]:
            return default
        return (
            int(self.count[row, column]),
            float(self.bias[row, column]),
            float(self.square[row, column]),
        )

    def __setitem__(self, key: Key, record: Record) -> None:
        path, name = key
        row = self._row.get(path)
        if row is None:
            row = self._new_row(path)
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
        for path in self._row:
            for name in names:
                record = self.get((path, name))
                if record is not None:
                    out[(path, name)] = record
        return out

    def _new_row(self, path: Path) -> int:
        row = self._row[path] = len(self._row)
        if row == len(self.count):
            size = 2 * row
            for field in ("recorded", "count", "bias", "square"):
                old = getattr(self, field)
                grown = np.zeros((size, old.shape[1]), dtype=old.dtype)
                grown[:row] = old
                setattr(self, field, grown)
        return row
