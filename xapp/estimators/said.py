"""Estimates as numbers (``xapp.ports.Said``): what a source said of each of many paths, in
one array.

Fusion reads every source's word on each of a fleet's paths four times a step (the forecasts
to judge, the measurements to judge them by, the probe planner's advice, the estimates to
fuse). A source that keeps its estimates as a table (``SaysAsTable``: the KPI, model and
probe estimators, through ``KeptEstimates``) hands a step's rows over by their places, the
paths looked up once for every table kept by the same slots (``core.slots.Places``); any other
is asked path by path and its estimates converted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction, check_capacity
from core.slots import Places, Slots, grown, places_of
from xapp.ports import CapacityEstimator, Said, SaysAsTable, SaysMany

Path = tuple[str, str, Direction]

NOTHING: Said = (0.0, 0.0, 0.0, 0.0, 0.0)

# The fields of a Said, as the last axis of ``said_table``.
KIND, CAPACITY, STDDEV, MEASURED_AT, AVAILABLE = range(5)
ESTIMATE, LOWER_BOUND = 1.0, 2.0  # the kinds besides nothing (0)


def said_of(e: CapacityEstimate | None) -> Said:
    """``e`` as numbers."""
    if e is None:
        return NOTHING
    return (
        LOWER_BOUND if e.lower_bound else ESTIMATE,
        e.capacity_mbps,
        e.stddev_mbps,
        e.measured_at_s,
        1.0 if e.available else 0.0,
    )


def said_numbers(
    capacity_mbps: float,
    stddev_mbps: float,
    measured_at_s: float,
    available: bool,
    lower_bound: bool,
) -> Said:
    """An estimate's numbers, checked as ``CapacityEstimate`` checks them: a source that keeps
    numbers makes the estimate itself only when asked for it (``estimate_of``)."""
    check_capacity(capacity_mbps, stddev_mbps)
    return (
        LOWER_BOUND if lower_bound else ESTIMATE,
        capacity_mbps,
        stddev_mbps,
        measured_at_s,
        1.0 if available else 0.0,
    )


def estimate_of(path: Path, said: Said, source: str) -> CapacityEstimate:
    """The estimate ``said`` stands for (the inverse of ``said_of``), from ``source``."""
    kind, capacity, stddev, measured_at, available = said
    return CapacityEstimate(
        path[0],
        path[1],
        path[2],
        capacity,
        stddev,
        source,
        measured_at,
        available > 0,
        lower_bound=kind == LOWER_BOUND,
    )


class KeptEstimates:
    """A source's newest estimate of each path, kept as numbers in a table (a row per path,
    by ``slots``; a zero row, ``NOTHING``, where none is kept) and made into a
    ``CapacityEstimate`` only when one is asked for (then kept until the numbers change):
    fusion reads a fleet's numbers at once, and its paths are seldom asked one by one. The
    owner may keep columns of its own by the same slots (the KPI estimator's volatility)."""

    def __init__(self, source: str, slots: Slots[Path] | None = None) -> None:
        """``slots``: the places of the fleet's paths, shared with the other sources and
        fusion (each step's paths are then looked up once for all of them); else its own."""
        self.source = source
        self.slots: Slots[Path] = slots if slots is not None else Slots()
        self._table: npt.NDArray[np.float64] = np.zeros((0, 5))
        self._made: dict[int, CapacityEstimate] = {}  # by place

    def put(self, path: Path, said: Said) -> None:
        slot = self.slots.of(path)
        self._table = grown(self._table, slot + 1, 0.0)
        self._table[slot] = said
        self._made.pop(slot, None)

    def put_many(self, paths: Sequence[Path], table: npt.NDArray[np.float64]) -> None:
        """``put`` of each path's numbers (a row of ``table`` each: a ``Said``'s fields),
        checked as ``said_numbers`` checks them."""
        self.put_rows(self.slots.many(paths), table)

    def put_rows(self, places: npt.NDArray[np.intp], table: npt.NDArray[np.float64]) -> None:
        """``put_many`` where the paths' places (``slots``) are known already."""
        capacity, stddev = table[:, CAPACITY], table[:, STDDEV]
        fine = (capacity >= 0) & (capacity < np.inf) & (stddev >= 0) & (stddev < np.inf)
        if not fine.all():
            wrong = int(np.argmin(fine))
            check_capacity(float(capacity[wrong]), float(stddev[wrong]))  # (raises)
        self._table = grown(self._table, len(self.slots), 0.0)
        self._table[places] = table
        made = self._made
        if made:  # (a fleet's usual: few of its estimates were made)
            for place in made.keys() & set(places.tolist()):
                del made[place]

    def drop(self, path: Path) -> None:
        slot = self.slots.get(path)
        if slot is not None and slot < len(self._table):
            self._table[slot] = NOTHING
            self._made.pop(slot, None)

    def said(self, path: Path) -> Said | None:
        slot = self.slots.get(path)
        if slot is None or slot >= len(self._table) or not self._table[slot, KIND]:
            return None
        kind, capacity, stddev, measured_at, available = self._table[slot].tolist()
        return (kind, capacity, stddev, measured_at, available)

    def said_many(self, paths: Sequence[Path]) -> list[Said]:
        return [
            (kind, capacity, stddev, measured_at, available)
            for kind, capacity, stddev, measured_at, available in self.said_rows(paths).tolist()
        ]

    def said_rows(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.float64]:
        """(paths, 5): ``said_many`` as a table."""
        return self.rows_at(places_of(paths).in_slots(self.slots))

    def rows_at(self, places: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """(places, 5): the numbers kept at these places (``slots``; -1 or a place given after
        the last put: nothing)."""
        table = self._table
        unknown = (places < 0) | (places >= len(table))
        if not len(table):
            return np.zeros((len(places), 5))
        rows = table[np.where(unknown, 0, places)]
        rows[unknown] = 0.0
        return rows

    def estimate(self, path: Path) -> CapacityEstimate | None:
        slot = self.slots.get(path)
        made = None if slot is None else self._made.get(slot)
        if made is None:
            said = self.said(path)
            if said is None:
                return None
            assert slot is not None  # (said of a path with no place: None)
            made = self._made[slot] = estimate_of(path, said, self.source)
        return made


def said_by(source: CapacityEstimator, paths: Sequence[Path], now_s: float) -> list[Said]:
    """What ``source`` says of each path, as numbers."""
    if isinstance(source, SaysMany):
        return source.said_many(paths)
    return [said_of(source.estimate(*path, now_s)) for path in paths]


def said_rows_by(
    source: CapacityEstimator, paths: Sequence[Path] | Places[Path], now_s: float
) -> npt.NDArray[np.float64]:
    """(paths, 5): ``said_by`` as a table; read from the source's own where it keeps one."""
    if isinstance(source, SaysAsTable):
        return source.said_rows(paths)
    keys = places_of(paths).keys
    count = len(keys)
    flat = np.fromiter(chain.from_iterable(said_by(source, keys, now_s)), np.float64, count * 5)
    return flat.reshape(count, 5)


def said_table(
    sources: Sequence[CapacityEstimator], paths: Sequence[Path] | Places[Path], now_s: float
) -> npt.NDArray[np.float64]:
    """(paths, sources, 5): what each source says of each path (``Places``: the paths looked
    up once for the sources that keep their tables by the same slots)."""
    if not sources:
        return np.zeros((len(paths), 0, 5))
    at = places_of(paths)
    return np.stack([said_rows_by(source, at, now_s) for source in sources], axis=1)


def shows_usable_since(
    table: npt.NDArray[np.float64], since_s: npt.NDArray[np.float64] | float
) -> npt.NDArray[np.bool_]:
    """``CapacityEstimate.shows_path_usable_since`` at each place of a table: an exact estimate
    of an available path, of something, measured at ``since_s`` (per path) or later; a NaN
    time compares false."""
    since = np.asarray(since_s, dtype=np.float64)
    if since.ndim:
        since = since[:, None]
    found: npt.NDArray[np.bool_] = (
        usable_exact(table) & (table[..., CAPACITY] > 0) & (table[..., MEASURED_AT] >= since)
    )
    return found


def usable_exact(table: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Where a table's estimate is an exact one (not a lower bound) of an available path."""
    found: npt.NDArray[np.bool_] = (table[..., KIND] == ESTIMATE) & (table[..., AVAILABLE] > 0)
    return found


@dataclass(frozen=True, eq=False)
class EstimateRows:
    """Estimates of many paths as columns (``ManyEstimates.estimate_rows``): what
    ``estimate_many`` answers, without an object per path. A fleet's step puts most of them
    into its questions to the policy as numbers; ``estimate(i)`` makes path i's estimate for
    the few read one by one. ``made``: estimates that were given as objects (by index), kept
    as they are; the values of a path without an estimate (``present`` False) are unread."""

    paths: Sequence[Path]
    present: npt.NDArray[np.bool_]
    capacity: npt.NDArray[np.float64]
    stddev: npt.NDArray[np.float64]
    measured_at: npt.NDArray[np.float64]
    available: npt.NDArray[np.bool_]
    lower_bound: npt.NDArray[np.bool_]
    source: str
    made: Mapping[int, CapacityEstimate | None] = field(default_factory=dict)

    @classmethod
    def of(
        cls, paths: Sequence[Path], estimates: Sequence[CapacityEstimate | None]
    ) -> EstimateRows:
        """Estimates given as objects, as columns."""
        table = np.array([said_of(e) for e in estimates], dtype=np.float64).reshape(-1, 5)
        return cls(
            paths,
            table[:, KIND] > 0,
            table[:, CAPACITY],
            table[:, STDDEV],
            table[:, MEASURED_AT],
            table[:, AVAILABLE] > 0,
            table[:, KIND] == LOWER_BOUND,
            "",
            dict(enumerate(estimates)),
        )

    def estimate(self, i: int) -> CapacityEstimate | None:
        if i in self.made:
            return self.made[i]
        if not self.present[i]:
            return None
        said = (
            LOWER_BOUND if self.lower_bound[i] else ESTIMATE,
            float(self.capacity[i]),
            float(self.stddev[i]),
            float(self.measured_at[i]),
            1.0 if self.available[i] else 0.0,
        )
        return estimate_of(self.paths[i], said, self.source)

    def estimates(self) -> list[CapacityEstimate | None]:
        """Every path's estimate, in order (``estimate_many``'s answer)."""
        if self.made:
            return [self.estimate(i) for i in range(len(self.paths))]
        # each path's numbers as a Said, as plain numbers at once
        table = np.column_stack(
            [
                np.where(self.lower_bound, LOWER_BOUND, ESTIMATE),
                self.capacity,
                self.stddev,
                self.measured_at,
                self.available.astype(np.float64),
            ]
        ).tolist()
        source = self.source
        return [
            estimate_of(path, said, source) if present else None
            for path, present, said in zip(self.paths, self.present.tolist(), table, strict=True)
        ]
