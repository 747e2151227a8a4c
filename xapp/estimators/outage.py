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
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

from core.domain import Direction, KpiSample
from xapp.estimators.columns import paths_of

Path = tuple[str, str, Direction]
# (cpe_id, direction) → the weights in force, or None when none were pushed yet (the kernel
# then weighs every path 1)
WeightLookup = Callable[[str, Direction], Mapping[str, int] | None]


class SilenceTracker:
    def __init__(self, weights: WeightLookup | None = None) -> None:
        self._weights = weights or (lambda cpe_id, direction: None)
        self._since: dict[Path, float] = {}
        # Per CPE and direction, the newest period heard of: each node's reports come on their
        # own (the live loop feeds each as it arrives), so whether another access carried in
        # the same period may be told by a later call.
        self._periods: dict[tuple[str, Direction], _Period] = {}
        # Each path's CPE and direction's period (the same object for all its accesses): a
        # step's sample finds it by the path it has already, with no key made for it.
        self._period_of_path: dict[Path, _Period] = {}

    def update(self, samples: Sequence[KpiSample]) -> None:
        periods, since, period_of_path = self._periods, self._since, self._period_of_path
        for s, path in zip(samples, paths_of(samples), strict=True):
            time_s = s.time_s
            period = period_of_path.get(path)
            if period is None:
                key = (path[0], path[2])
                period = periods.get(key)
                if period is None:
                    period = periods[key] = _Period(time_s)
                period_of_path[path] = period
            if time_s > period.time_s:
                period.begin(time_s)  # (the same object: nothing new for the collector)
            if (s.throughput_mbps or 0.0) > 0:
                if since:
                    since.pop(path, None)
                if time_s == period.time_s and not period.carried:
                    period.carried = True
                    for quiet in period.quiet:
                        since.setdefault(quiet, period.time_s)
                    period.quiet.clear()
            elif time_s == period.time_s and self._weighted(s):
                if period.carried:
                    since.setdefault(path, time_s)
                else:
                    period.quiet.append(path)

    def silent_since(self, path: Path) -> float | None:
        return self._since.get(path)

    def silent_times(self, paths: Sequence[Path]) -> npt.NDArray[np.float64]:
        """``silent_since`` of each path, NaN where it is not silent: what fusion and the
        probe planner read of a fleet's every path at each step (mostly none is silent)."""
        since = self._since
        if not since:
            return np.full(len(paths), math.nan)
        return np.fromiter(map(since.get, paths, repeat(math.nan)), np.float64, len(paths))

    def is_quiet(self) -> bool:
        """No path is silent."""
        return not self._since

    def silent(self) -> set[Path]:
        return set(self._since)

    def clear(self, path: Path) -> None:
        self._since.pop(path, None)

    def _weighted(self, sample: KpiSample) -> bool:
        weights = self._weights(sample.cpe_id, sample.direction)
        return weights is None or weights.get(sample.access, 0) > 0


class _Period:
    """One period of a CPE's direction: whether any access carried in it, and the weighted
    paths that carried nothing in it while none had (silent once one does)."""

    __slots__ = ("carried", "quiet", "time_s")

    def __init__(self, time_s: float) -> None:
        self.time_s = time_s
        self.carried = False
        self.quiet: list[Path] = []

    def begin(self, time_s: float) -> None:
        """A newer period of the same CPE and direction."""
        self.time_s = time_s
        self.carried = False
        self.quiet.clear()
