"""What the control loop remembers of each path and each CPE's decisions, kept in columns by
slot (core/slots.py): a fleet's step reads and writes it for thousands of paths at once, and
a decision made alone (an override, a carrier event) reads and writes its own paths the same
way, one at a time. Both ways do the same arithmetic, operation for operation
(tests/test_path_state.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction
from core.slots import Slots, grown

Path = tuple[str, str, Direction]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Places = npt.NDArray[np.intp]

# The usual interval between a CPE's decisions until one is seen, and the longest gap counted
# (a CPE not decided for minutes is not decided every minute from then on).
FIRST_INTERVAL_S = 1.0
LONGEST_GAP_S = 60.0
INTERVAL_WEIGHT = 0.2  # of the newest gap in the running mean


class LastUsableEstimates:
    """Each path's latest usable estimate (available, capacity > 0): what a path back from an
    outage starts from. ``slots``: the paths' places, shared with the loop's other columns."""

    def __init__(self, slots: Slots[Path]) -> None:
        self.slots = slots
        self._kept = np.zeros(0, dtype=bool)
        self._capacity = np.zeros(0)
        self._stddev = np.zeros(0)
        self._measured_at = np.zeros(0)
        self._lower_bound = np.zeros(0, dtype=bool)
        self._source = np.zeros(0, dtype=object)

    def put(self, path: Path, estimate: CapacityEstimate) -> None:
        slot = self.slots.of(path)
        self._make_room()
        self._kept[slot] = True
        self._capacity[slot] = estimate.capacity_mbps
        self._stddev[slot] = estimate.stddev_mbps
        self._measured_at[slot] = estimate.measured_at_s
        self._lower_bound[slot] = estimate.lower_bound
        self._source[slot] = estimate.source

    def put_many(
        self,
        places: Places,
        capacity: FloatArray,
        stddev: FloatArray,
        measured_at: FloatArray,
        lower_bound: BoolArray,
        source: str | Sequence[str],
    ) -> None:
        """``put`` of the paths at these (distinct) places: usable estimates' numbers, and
        their source (one for all, or one each)."""
        self._make_room()
        self._kept[places] = True
        self._capacity[places] = capacity
        self._stddev[places] = stddev
        self._measured_at[places] = measured_at
        self._lower_bound[places] = lower_bound
        self._source[places] = source

    def get(self, path: Path) -> CapacityEstimate | None:
        slot = self.slots.get(path)
        if slot is None or slot >= len(self._kept) or not self._kept[slot]:
            return None
        cpe_id, access, direction = path
        return CapacityEstimate(
            cpe_id,
            access,
            direction,
            float(self._capacity[slot]),
            float(self._stddev[slot]),
            str(self._source[slot]),
            float(self._measured_at[slot]),
            True,
            lower_bound=bool(self._lower_bound[slot]),
        )

    def forget(self, gone: Callable[[Path], bool]) -> None:
        """Drop the estimates of the paths ``gone`` says are no longer the loop's."""
        self._make_room()
        for path, slot in self.slots.items():
            if gone(path):
                self._kept[slot] = False

    def _make_room(self) -> None:
        size = len(self.slots)
        if size > len(self._kept):
            self._kept = grown(self._kept, size, False)
            self._capacity = grown(self._capacity, size, 0.0)
            self._stddev = grown(self._stddev, size, 0.0)
            self._measured_at = grown(self._measured_at, size, 0.0)
            self._lower_bound = grown(self._lower_bound, size, False)
            self._source = grown(self._source, size, "")


class DecisionTimes:
    """When each CPE and direction was last decided, and the usual interval between its
    decisions: a running mean, so that event-driven decisions in between (an override, a
    carrier event) do not make it look shorter than the reporting period for long."""

    def __init__(self) -> None:
        self.slots: Slots[Hashable] = Slots()
        self._last_s = np.zeros(0)  # NaN: never decided
        self._usual_s = np.zeros(0)  # NaN: no interval seen yet

    def interval(self, key: Hashable, now_s: float) -> float:
        """The usual interval of ``key`` (a CPE and direction), decided now."""
        slot = self.slots.of(key)
        self._make_room()
        last, usual = float(self._last_s[slot]), float(self._usual_s[slot])
        self._last_s[slot] = now_s
        if math.isnan(last) or now_s <= last:
            return FIRST_INTERVAL_S if math.isnan(usual) else usual
        gap = min(now_s - last, LONGEST_GAP_S)
        usual = gap if math.isnan(usual) else (1 - INTERVAL_WEIGHT) * usual + INTERVAL_WEIGHT * gap
        self._usual_s[slot] = usual
        return usual

    def intervals(self, places: Places, now_s: FloatArray) -> FloatArray:
        """``interval`` of the keys at these (distinct) places, each decided at its ``now_s``."""
        self._make_room()
        last, usual = self._last_s[places], self._usual_s[places]
        self._last_s[places] = now_s
        first = np.isnan(last) | (now_s <= last)
        gap = now_s - last
        gap = np.where(gap > LONGEST_GAP_S, LONGEST_GAP_S, gap)
        updated = np.where(
            np.isnan(usual), gap, (1 - INTERVAL_WEIGHT) * usual + INTERVAL_WEIGHT * gap
        )
        self._usual_s[places] = np.where(first, usual, updated)
        return np.where(first, np.where(np.isnan(usual), FIRST_INTERVAL_S, usual), updated)

    def _make_room(self) -> None:
        size = len(self.slots)
        if size > len(self._last_s):
            self._last_s = grown(self._last_s, size, math.nan)
            self._usual_s = grown(self._usual_s, size, math.nan)
