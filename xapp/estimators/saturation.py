"""Periods in which a path carried all it could: free training labels.

When a path's KPIs show it used its resources to the full (the utilisation `xapp.estimators.kpi`
reads: PRBs, airtime, PHY rate against what was carried) for a few periods in a row, what it
carried is its capacity. The models learn from such periods anyway (models/features.py reads
only saturated throughput); here the running xApp keeps them, with the KPIs that led to them,
so that `atsss xapp export-dataset` can turn the field's own traffic into training data without
spending a probe. One period per path every ``every_s`` at most, in ``per_path`` slots taken in
turn, so SDL holds a bounded, recent sample of each path (about 5 kB a period: 11 periods of
KPIs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core.domain import Direction, KpiSample, SaturatedPeriod
from core.slots import Slots, distinct, grown
from xapp.estimators.columns import SampleRings, columns_of, paths_of, places_of_paths
from xapp.estimators.kpi import utilisation, utilisations
from xapp.ports import SaturatedPeriodStore

# Above this share of what the KPIs say the path could carry, it carried all it could.
SATURATED_UTILISATION = 0.8
SATURATED_PERIODS = 3  # in a row: one period at the limit may be a burst
HISTORY_PERIODS = 11  # what the models read: the period and the 10 before it
# Kept per second at most, of the samples' own time: a fleet whose paths all saturate at once (a
# start, a busy hour) would otherwise write thousands of 5 kB periods in one step; the others are
# kept later. A budget refilled as the samples' time passes (one second's worth at most), not a
# number per update: at 100 ms reports a number per update wrote ten times as much to SDL a
# second as at 1 s (2.5 MB/s over a fleet's first minutes), and the labelling had the step's
# time to match.
MAX_KEPT_PER_S = 50

Key = tuple[str, str, Direction]


def saturated(recent: Sequence[KpiSample]) -> bool:
    """Did the path carry what it could over these periods (as far as its KPIs tell)?"""
    last = recent[-1].throughput_mbps if recent else None
    return _at_capacity(last, [utilisation(s) for s in recent])


def _at_capacity(last_throughput_mbps: float | None, shares: Sequence[float | None]) -> bool:
    """``saturated`` from the last period's throughput and each period's utilisation."""
    if (last_throughput_mbps or 0.0) <= 0:
        return False  # it carried nothing: the history says nothing of its headroom
    known = [u for u in shares if u is not None]
    # No utilisation KPIs: nothing says the path was not held back, so it is not taken as
    # saturated (a probe or another source has to say what it could carry).
    return bool(known) and min(known) >= SATURATED_UTILISATION


class SaturationLabeller:
    """Feeds on every period's samples; stores a path's saturated periods with their history.

    What it keeps of each path is a row of arrays (by the path's slot): its last
    HISTORY_PERIODS samples and last SATURATED_PERIODS utilisations as rings, when a period
    of it was last kept and how many were. A step's samples go in at once where no path comes
    twice (a fleet's usual), in runs of such samples otherwise; a dozen Python steps per
    sample before (tests/test_saturation_labels.py holds the two equal)."""

    def __init__(
        self,
        store: SaturatedPeriodStore,
        every_s: float,
        per_path: int,
        slots: Slots[Key] | None = None,
    ) -> None:
        """``slots``: the fleet's paths' places, shared with the estimators (a step's paths
        are then looked up once for all of them); else its own."""
        if every_s <= 0 or per_path < 1:
            raise ValueError(f"every_s must be > 0 and per_path ≥ 1, got {every_s} and {per_path}")
        self.store = store
        self.every_s = every_s
        self.per_path = per_path
        self._slots: Slots[Key] = slots if slots is not None else Slots()
        # each path's last HISTORY_PERIODS samples, and how many it was given
        self._history = SampleRings(HISTORY_PERIODS)
        self._shares = np.empty((0, SATURATED_PERIODS))  # NaN: no utilisation known
        self._last_kept_s = np.empty(0)  # when a period of the path was last kept
        self._written = np.zeros(0, dtype=np.int64)  # periods kept (next slot: modulo per_path)
        self.kept = 0
        # what may still be kept, as of the newest time seen (-inf: none yet)
        self._budget = float(MAX_KEPT_PER_S)
        self._budget_s = -math.inf

    def update(self, samples: Sequence[KpiSample]) -> None:
        kept: list[tuple[SaturatedPeriod, int]] = []
        if samples:
            most = self._refilled(columns_of(samples).time_s)
            # each sample's utilisation, worked out for the step's columns at once (NaN for None)
            shares = utilisations(samples)
            places = places_of_paths(samples, self._slots)
            self._grow(len(self._slots))
            for run in _runs_of_distinct(samples, places):
                self._take(samples, places, shares, run, kept, most)
            self._budget -= len(kept)
        self.store.put_saturated_periods(kept)
        self.kept += len(kept)

    def _refilled(self, times_s: npt.NDArray[np.float64]) -> int:
        """How many periods this update may keep: the budget, refilled by MAX_KEPT_PER_S for
        each second from the newest time seen before to the update's newest (times that go
        back, or are not finite, add nothing)."""
        finite = times_s[np.isfinite(times_s)]
        if len(finite):
            newest = float(finite.max())
            if newest > self._budget_s:
                if self._budget_s > -math.inf:
                    refill = MAX_KEPT_PER_S * (newest - self._budget_s)
                    self._budget = min(float(MAX_KEPT_PER_S), self._budget + refill)
                self._budget_s = newest
        # (a refill worked out from times that are not exact, 4.999… for 5: not a period less)
        return math.floor(self._budget + 1e-9)

    def _take(
        self,
        samples: Sequence[KpiSample],
        places: npt.NDArray[np.intp],
        shares_now: npt.NDArray[np.float64],
        run: slice,
        kept: list[tuple[SaturatedPeriod, int]],
        most: int,
    ) -> None:
        """The samples of ``run`` (no path twice) into their paths' rows, then the periods
        among them to keep (in order, up to ``most`` in the update)."""
        at = places[run]
        count = self._history.counts[at]
        self._history.put(at, samples, run)
        self._shares[at, count % SATURATED_PERIODS] = shares_now[run]
        count = count + 1
        if len(kept) >= most:
            return
        # _at_capacity's reading of the utilisations: the path's last SATURATED_PERIODS, the
        # period's own known, every known one at the limit (the rows that pass, a fleet's few,
        # are then read one by one: when last kept, what the period carried)
        window = self._shares[at]
        at_limit = np.where(np.isnan(window), True, window >= SATURATED_UTILISATION).all(axis=1)
        candidates = (count >= SATURATED_PERIODS) & ~np.isnan(shares_now[run]) & at_limit
        # ... not kept within ``every_s``, and carrying something (a fleet's many candidates
        # are told from the step's columns; the few kept are then read one by one)
        rows = np.flatnonzero(candidates)
        if not len(rows):
            return
        columns = columns_of(samples)
        time_s, carried = columns.time_s[run][rows], columns.throughput[run][rows]
        due = ~(time_s - self._last_kept_s[at[rows]] < self.every_s)
        # (it carried nothing: the history says nothing of its headroom; NaN in the column is
        # a sample that says none, or NaN: read from the sample)
        due &= (carried > 0) | np.isnan(carried)
        first = run.start or 0
        for row in rows[due].tolist():
            if len(kept) >= most:
                break
            sample, place = samples[first + row], int(at[row])
            if (sample.throughput_mbps or 0.0) <= 0:
                continue
            period = SaturatedPeriod(self._history.history(place))
            kept.append((period, int(self._written[place]) % self.per_path))
            self._written[place] += 1
            self._last_kept_s[place] = sample.time_s

    def _grow(self, size: int) -> None:
        if size <= len(self._history.counts):
            return
        self._history.grow(size)
        self._shares = grown(self._shares, size, math.nan)
        self._last_kept_s = grown(self._last_kept_s, size, -math.inf)
        self._written = grown(self._written, size, 0)


def _runs_of_distinct(samples: Sequence[KpiSample], places: npt.NDArray[np.intp]) -> list[slice]:
    """The samples (their paths at ``places``) cut into runs, in order, in none of which a
    path comes twice (a fleet's step: one run)."""
    if distinct(places):
        return [slice(0, len(places))]
    runs: list[slice] = []
    start = 0
    seen: set[Key] = set()
    for i, path in enumerate(paths_of(samples)):
        if path in seen:
            runs.append(slice(start, i))
            start, seen = i, set()
        seen.add(path)
    runs.append(slice(start, len(places)))
    return runs
