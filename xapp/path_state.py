"""What the control loop remembers of each path and each CPE's decisions, kept in columns by
slot (core/slots.py): a fleet's step reads and writes it for thousands of paths at once, and
a decision made alone (an override, a carrier event) reads and writes its own paths the same
way, one at a time. Both ways do the same arithmetic, operation for operation
(tests/test_path_state.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction, KpiSample
from core.slots import Slots, distinct, grown
from xapp.estimators.columns import field_of, places_of_paths

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


@dataclass(frozen=True)
class PathConditions:
    """What the reports last said of a path besides its capacity (None: never said)."""

    rtt_ms: float | None = None
    loss_rate_permille: float | None = None
    throughput_mbps: float | None = None


class HeardReports:
    """What the loop keeps of the reports it took, in columns: for each CPE and direction when
    its first report came (its warm-up starts then) and when the newest report not yet decided
    on arrived (where a push's control delay starts); for each path the last round-trip time,
    loss and throughput a report said. A fleet's step takes thousands of reports: kept in
    dictionaries they cost a few lookups each, every step, though a fleet's usual decision
    (put as rows) reads none of the conditions. A value a report leaves out (None, or NaN,
    which no reader takes for a measurement) keeps what an earlier report said.

    ``path_slots`` and ``key_slots``: the places of the paths and of the CPEs and directions,
    shared with the loop's other columns."""

    CONDITIONS = ("rtt_ms", "loss_rate_permille", "throughput_mbps")

    def __init__(self, path_slots: Slots[Path], key_slots: Slots[Hashable]) -> None:
        self.path_slots, self.key_slots = path_slots, key_slots
        self._key_of_path = np.zeros(0, dtype=np.intp)  # each path's CPE and direction's place
        self._first_s = np.zeros(0)  # per CPE and direction; NaN: nothing heard yet
        self._received_s = np.zeros(0)  # per CPE and direction; NaN: none waits to be read
        self._said = np.zeros((0, len(self.CONDITIONS)))  # per path; NaN: never said
        # The newest first report's time: no CPE and direction was first heard from later (a
        # fleet's step need not look each one's up to know that none is warming up).
        self.newest_first_s = -math.inf

    def take(self, samples: Sequence[KpiSample], now_s: float) -> None:
        """A step's reports, in their order."""
        if not samples:
            return
        places = places_of_paths(samples, self.path_slots)
        keys = self._keys_of(places)
        first = self._first_s
        fresh = keys[np.isnan(first[keys])]
        if len(fresh):
            first[fresh] = now_s
            self.newest_first_s = max(self.newest_first_s, now_s)
        np.fmax.at(self._received_s, keys, field_of(samples, "received_s"))
        said = np.column_stack([field_of(samples, name) for name in self.CONDITIONS])
        kept = self._said
        if distinct(places):  # (a fleet's usual: one report per path)
            kept[places] = np.where(np.isnan(said), kept[places], said)
            return
        for place, values in zip(places.tolist(), said, strict=True):  # later ones win
            kept[place] = np.where(np.isnan(values), kept[place], values)

    def first_report_s(self, key: tuple[str, Direction]) -> float | None:
        """When the CPE and direction's first report was taken (the step's time), if any."""
        place = self.key_slots.get(key)
        if place is None or place >= len(self._first_s):
            return None
        first = float(self._first_s[place])
        return None if math.isnan(first) else first

    def take_received(self, key: tuple[str, Direction]) -> float | None:
        """When the newest report of the CPE and direction arrived (monotonic), if one came
        since this was last asked; asking reads it (a decision follows it)."""
        place = self.key_slots.get(key)
        if place is None or place >= len(self._received_s):
            return None
        received = float(self._received_s[place])
        self._received_s[place] = math.nan
        return None if math.isnan(received) else received

    def take_received_at(self, places: Places) -> list[float | None]:
        """``take_received`` of the CPEs and directions at these places (distinct; in
        ``key_slots``), for decisions that push together."""
        received = np.full(len(places), math.nan)
        inside = places < len(self._received_s)
        received[inside] = self._received_s[places[inside]]
        self._received_s[places[inside]] = math.nan
        return [None if value != value else value for value in received.tolist()]

    def drop_received(self, places: Places) -> None:
        """``take_received`` of the CPEs and directions at these places, for decisions that
        follow their reports without a push to time."""
        self._received_s[places[places < len(self._received_s)]] = math.nan

    def unread(self) -> int:
        """How many CPEs and directions have a report's arrival no decision read yet."""
        return int(np.count_nonzero(~np.isnan(self._received_s)))

    def conditions(self, path: Path) -> PathConditions:
        place = self.path_slots.get(path)
        if place is None or place >= len(self._said):
            return NO_CONDITIONS
        rtt, loss, throughput = self._said[place].tolist()
        return PathConditions(
            None if math.isnan(rtt) else rtt,
            None if math.isnan(loss) else loss,
            None if math.isnan(throughput) else throughput,
        )

    def forget(self, gone: Callable[[str], bool]) -> None:
        """Drop what was heard of the CPEs ``gone`` says are no longer the loop's."""
        for key, place in self.key_slots.items():
            if place < len(self._first_s) and isinstance(key, tuple) and gone(key[0]):
                self._first_s[place] = self._received_s[place] = math.nan
        for path, place in self.path_slots.items():
            if place < len(self._said) and gone(path[0]):
                self._said[place] = math.nan

    def _keys_of(self, places: Places) -> Places:
        """The place of each path's CPE and direction (given now to those without one), the
        columns grown to hold every place."""
        known = self._key_of_path = grown(self._key_of_path, len(self.path_slots), -1)
        keys = known[places]
        if keys.min(initial=0) < 0:
            paths = self.path_slots.keys_at
            for place in np.unique(places[keys < 0]).tolist():
                cpe_id, _, direction = paths([place])[0]
                known[place] = self.key_slots.of((cpe_id, direction))
            keys = known[places]
        size = len(self.key_slots)
        self._first_s = grown(self._first_s, size, math.nan)
        self._received_s = grown(self._received_s, size, math.nan)
        self._said = grown(self._said, len(self.path_slots), math.nan)
        return keys


NO_CONDITIONS = PathConditions()  # what is known of a path nothing was said of
