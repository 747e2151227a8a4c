"""Outage by silence: a weighted path that carried nothing while its CPE's other paths did.

NR and Wi-Fi nodes report no link state for a station, so a dead path shows as a period with
zero throughput. Zero alone proves nothing (the path may be on weight 0, or the application
idle), so a path counts as silent only when the weights in force gave it a share and another
access of the same CPE carried traffic in the same period, whether the two came in one batch of
reports or each in its own (each node reports on its own connection). It stops being silent
with the next period in which it carries traffic, or when someone (a probe) finds it usable
again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core
from core.domain import Direction, KpiSample
from core.slots import Places, Slots, grown, places_of
from xapp.estimators.columns import columns_of, paths_of, places_of_paths

Path = tuple[str, str, Direction]
# (cpe_id, direction) → the weights in force, or None when none were pushed yet (the kernel
# then weighs every path 1)
WeightLookup = Callable[[str, Direction], Mapping[str, int] | None]

# The walk over a step's samples in C where ``pip install`` could build it (_silence.c); the
# Python ``_walk`` below is its twin.
_core = compiled_core("xapp.estimators._silence")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IndexArray = npt.NDArray[np.intp]


class SilenceTracker:
    """Which paths are silent, and since when, kept as columns by the paths' places in
    ``slots`` (the estimators' shared numbering of the fleet's paths): a step's samples go in
    as arrays (their places, times and throughputs, read once for every estimator), walked in
    order by ``_walk`` or its C twin."""

    def __init__(
        self,
        weights: WeightLookup | None = None,
        *,
        slots: Slots[Path] | None = None,
        compiled: bool | None = None,
    ) -> None:
        """``compiled``: walk the samples with the C core (None: where it is built), or with
        its Python twin."""
        self._weights = weights or (lambda cpe_id, direction: None)
        if compiled and _core is None:
            raise RuntimeError("the silence tracker's C core is not built")
        self._walk = _core.walk if _core is not None and compiled is not False else _walk
        self._slots: Slots[Path] = slots if slots is not None else Slots()
        # Per path place: since when it is silent (NaN: it is not), whether it is quiet in its
        # period (weighted, carried nothing, while no access had), its period's place, and the
        # next path of the same period (each period's paths as a chain from its first).
        self._since: FloatArray = np.empty(0)
        self._quiet: BoolArray = np.empty(0, dtype=bool)
        self._period_of: IndexArray = np.empty(0, dtype=np.intp)
        self._next_path: IndexArray = np.empty(0, dtype=np.intp)
        self._silent = 0  # how many paths are silent
        # Per CPE and direction, the newest period heard of: each node's reports come on their
        # own (the live loop feeds each as it arrives), so whether another access carried in
        # the same period may be told by a later call. Its time, whether any access carried in
        # it, whether it had a sample yet (its time is that sample's), and its first path.
        self._periods: Slots[tuple[str, Direction]] = Slots()
        self._period_time: FloatArray = np.empty(0)
        self._period_carried: BoolArray = np.empty(0, dtype=bool)
        self._period_started: BoolArray = np.empty(0, dtype=bool)
        self._first_path: IndexArray = np.empty(0, dtype=np.intp)

    def update(self, samples: Sequence[KpiSample]) -> None:
        if not samples:
            return
        columns = columns_of(samples)
        time_s, throughput = columns.time_s, columns.throughput
        places = places_of_paths(samples, self._slots)
        self._make_room(places)
        # Whether the weights in force give each path that carried nothing a share (asked of
        # those only: a fleet's few).
        weighted = np.zeros(len(places), dtype=bool)
        paths = paths_of(samples)  # (not the samples: a batch's are made only when read)
        for row in np.flatnonzero(~(throughput > 0)).tolist():
            weighted[row] = self._weighted(*paths[row])
        self._walk(
            places,
            time_s,
            throughput,
            weighted,
            self._period_of,
            self._next_path,
            self._since,
            self._quiet,
            self._period_time,
            self._period_carried,
            self._period_started,
            self._first_path,
        )
        self._silent = int(np.count_nonzero(~np.isnan(self._since)))

    def _make_room(self, places: IndexArray) -> None:
        """Room in the columns for every path in the slots; a period for each path new here."""
        size = len(self._slots)
        self._since = grown(self._since, size, math.nan)
        self._quiet = grown(self._quiet, size, False)
        self._period_of = grown(self._period_of, size, -1)
        self._next_path = grown(self._next_path, size, -1)
        new = places[self._period_of[places] < 0]
        if not len(new):
            return
        new_places = np.unique(new).tolist()
        keys = self._slots.keys_at(new_places)
        for place, (cpe_id, _, direction) in zip(new_places, keys, strict=True):
            period = self._periods.of((cpe_id, direction))
            self._period_time = grown(self._period_time, period + 1, math.nan)
            self._period_carried = grown(self._period_carried, period + 1, False)
            self._period_started = grown(self._period_started, period + 1, False)
            self._first_path = grown(self._first_path, period + 1, -1)
            self._period_of[place] = period
            self._next_path[place] = self._first_path[period]
            self._first_path[period] = place

    def silent_since(self, path: Path) -> float | None:
        place = self._slots.get(path)
        if place is None or place >= len(self._since) or math.isnan(self._since[place]):
            return None
        return float(self._since[place])

    def silent_times(self, paths: Sequence[Path] | Places[Path]) -> FloatArray:
        """``silent_since`` of each path, NaN where it is not silent: what fusion and the
        probe planner read of a fleet's every path at each step (mostly none is silent)."""
        if not self._silent:
            return np.full(len(paths), math.nan)
        places = places_of(paths).in_slots(self._slots)
        known = (places >= 0) & (places < len(self._since))
        return np.where(known, self._since[np.where(known, places, 0)], math.nan)

    def is_quiet(self) -> bool:
        """No path is silent."""
        return not self._silent

    def silent(self) -> set[Path]:
        if not self._silent:
            return set()
        return set(self._slots.keys_at(np.flatnonzero(~np.isnan(self._since)).tolist()))

    def mark_silent(self, path: Path, since_s: float) -> None:
        """The path silent since ``since_s``, as if its samples had shown it (a state put
        back, or set up by a test)."""
        if math.isnan(since_s):
            raise ValueError(f"silent since when? {path} was given NaN")
        place = self._slots.of(path)
        self._since = grown(self._since, place + 1, math.nan)
        self._silent += bool(np.isnan(self._since[place]))
        self._since[place] = since_s

    def clear(self, path: Path) -> None:
        place = self._slots.get(path)
        if place is not None and place < len(self._since) and not math.isnan(self._since[place]):
            self._since[place] = math.nan
            self._silent -= 1

    def _weighted(self, cpe_id: str, access: str, direction: Direction) -> bool:
        weights = self._weights(cpe_id, direction)
        return weights is None or weights.get(access, 0) > 0


def _walk(
    places: IndexArray,
    time_s: FloatArray,
    throughput: FloatArray,
    weighted: BoolArray,
    period_of: IndexArray,
    next_path: IndexArray,
    since: FloatArray,
    quiet: BoolArray,
    period_time: FloatArray,
    period_carried: BoolArray,
    period_started: BoolArray,
    first_path: IndexArray,
) -> None:
    """The step's samples, in order, into the tracker's columns (``SilenceTracker`` says what
    each holds): each period's time and whether it was carried, the quiet paths, and since
    when each silent path is. The reference ``_silence.c`` is held to
    (tests/test_outage_silence.py)."""

    def paths_of_period(period: int) -> Iterator[int]:
        place = int(first_path[period])
        while place >= 0:
            yield place
            place = int(next_path[place])

    for place, at, carried_mbps, is_weighted in zip(
        places.tolist(), time_s.tolist(), throughput.tolist(), weighted.tolist(), strict=True
    ):
        period = int(period_of[place])
        began = float(period_time[period])
        if at > began or not period_started[period]:
            # a newer period (or the first): nothing carried in it yet
            period_time[period], period_carried[period] = at, False
            period_started[period] = True
            for other in paths_of_period(period):
                quiet[other] = False
            began = at
        if carried_mbps > 0:
            since[place] = math.nan
            if at == began and not period_carried[period]:
                period_carried[period] = True
                for other in paths_of_period(period):
                    if quiet[other]:
                        quiet[other] = False
                        if math.isnan(since[other]):
                            since[other] = began
        elif at == began and is_weighted:
            if period_carried[period]:
                if math.isnan(since[place]):
                    since[place] = at
            else:
                quiet[place] = True
