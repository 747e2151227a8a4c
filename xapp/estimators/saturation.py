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
from collections import deque
from collections.abc import Sequence

from core.domain import Direction, KpiSample, SaturatedPeriod
from xapp.estimators.columns import paths_of
from xapp.estimators.kpi import utilisation, utilisations
from xapp.ports import SaturatedPeriodStore

# Above this share of what the KPIs say the path could carry, it carried all it could.
SATURATED_UTILISATION = 0.8
SATURATED_PERIODS = 3  # in a row: one period at the limit may be a burst
HISTORY_PERIODS = 11  # what the models read: the period and the 10 before it
# Kept per update at most: a fleet whose paths all saturate at once (a start, a busy hour) would
# otherwise write thousands of 5 kB periods in one step; the others are kept at a later period.
MAX_KEPT_PER_UPDATE = 50

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
    """Feeds on every period's samples; stores a path's saturated periods with their history."""

    def __init__(self, store: SaturatedPeriodStore, every_s: float, per_path: int) -> None:
        if every_s <= 0 or per_path < 1:
            raise ValueError(f"every_s must be > 0 and per_path ≥ 1, got {every_s} and {per_path}")
        self.store = store
        self.every_s = every_s
        self.per_path = per_path
        # What is known of each path, in one place: a fleet's step looks each path up once.
        self._paths: dict[Key, _PathPeriods] = {}
        self.kept = 0

    def update(self, samples: Sequence[KpiSample]) -> None:
        kept: list[tuple[SaturatedPeriod, int]] = []
        # each sample's utilisation, worked out for the step's columns at once (NaN for None)
        shares_now = utilisations(samples).tolist()
        paths, every_s = self._paths, self.every_s
        for sample, key, share in zip(samples, paths_of(samples), shares_now, strict=True):
            path = paths.get(key)
            if path is None:  # (not setdefault: its default would be made for every sample)
                path = paths[key] = _PathPeriods()
            path.history.append(sample)
            shares = path.shares
            shares.append(None if share != share else share)
            if len(kept) >= MAX_KEPT_PER_UPDATE:
                continue
            if sample.time_s - path.last_kept_s < every_s:
                continue
            # The labelled period itself must show its utilisation, not only those before it.
            if (
                len(shares) < SATURATED_PERIODS
                or shares[-1] is None
                or not _at_capacity(sample.throughput_mbps, shares)
            ):
                continue
            kept.append((SaturatedPeriod(tuple(path.history)), path.written % self.per_path))
            path.written += 1
            path.last_kept_s = sample.time_s
        self.store.put_saturated_periods(kept)
        self.kept += len(kept)


class _PathPeriods:
    """One path's recent periods as the labeller keeps them."""

    __slots__ = ("history", "last_kept_s", "shares", "written")

    def __init__(self) -> None:
        self.history: deque[KpiSample] = deque(maxlen=HISTORY_PERIODS)
        self.shares: deque[float | None] = deque(maxlen=SATURATED_PERIODS)  # utilisation
        self.last_kept_s = -math.inf  # when a period of the path was last kept
        self.written = 0  # periods kept (the next slot is this modulo per_path)
