"""ProbeEstimator: active probes through the agents, run only when the other estimators need one.

A probe costs capacity (it competes with the data on the path it measures), so it is the last
resort, not the routine. A path is probed when (in this order of priority):

- ``recovered``: it came back after an outage (what it carries now is no guide yet), unless its
  node reports the headroom (then the KPIs say what it can carry);
- ``down-check``: it went silent (outage.py) and nothing else can tell when it is back, as a
  path on weight 0 carries nothing; every ``down_check_s`` (cheap: a dead path takes no data).
  A path whose node has reported its headroom before is not down-checked: that node will show
  its return in the next period, and a down-check that happened to overlap the return would
  only cost the capacity the data is about to use;
- ``no-estimate``: no other estimator has a fresh estimate of it (in probe-only mode: always);
- ``disagree``: the other estimators disagree beyond their uncertainty, e.g. a throughput-fed
  model saying "what it carries" and the headroom KPIs saying "much more" on an under-weighted
  path; the probe breaks the tie;
- ``uncertain``: their combined uncertainty is too wide;
- ``periodic``: its last probe is older than ``max_age_s`` (when set).

Never while the CPE's agent says a path's carrier is gone, nor after it says the carrier is
back until a report of a period that began after the return has come in: the agent's word
answers what a probe would ask, and a probe beside a transfer costs far more than its bytes
(on mainline MPTCP a squeezed subflow stalls the whole connection). Never more often than
``min_gap_s`` per path (``routine_gap_s`` when there is no one to ask,
as in probe-only mode), never more than ``max_per_cpe`` at once on one
CPE, never on a path reported down. A probe measures the path's capacity as the probe's own
rate plus the data it carried meanwhile (the agent reads both); a probe that finds the path
unusable marks it unavailable. Every result is kept with the path's recent KPIs
(``ProbeRecordStore``), for training.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import Any

import numpy as np
import numpy.typing as npt

from core.domain import (
    CapacityEstimate,
    Direction,
    KpiSample,
    ProbeOutcome,
    ProbeRecord,
    ProbeRequest,
)
from core.rowwise import row_any
from core.slots import Places, Slots, distinct, grown, places_of
from xapp.estimators.columns import SampleRings, field_of, paths_of, places_of_paths
from xapp.estimators.outage import SilenceTracker, WeightLookup
from xapp.estimators.said import (
    CAPACITY,
    KIND,
    MEASURED_AT,
    NOTHING,
    STDDEV,
    KeptEstimates,
    said_numbers,
    said_table,
    shows_usable_since,
    usable_exact,
)
from xapp.estimators.saturation import HISTORY_PERIODS
from xapp.ports import CapacityEstimator, Prober, ProbeRecordStore, Said

log = logging.getLogger(__name__)

Path = tuple[str, str, Direction]
Advisors = Callable[[str, Direction], Sequence[CapacityEstimator] | None]
# ``Advisors`` of every CPE, by direction, where no CPE has its own (None: some have)
AdvisorsEverywhere = Callable[[], Mapping[Direction, Sequence[CapacityEstimator] | None] | None]
REASONS = ("recovered", "down-check", "no-estimate", "disagree", "uncertain", "periodic")
NO_ESTIMATE, DISAGREE, UNCERTAIN, PERIODIC = (REASONS.index(r) for r in REASONS[2:])


@dataclass(frozen=True)
class ProbeSettings:
    duration_s: float = 1.0
    parallel_flows: int = 4
    timeout_s: float = 10.0  # beyond the duration: a probe not back by then is given up
    max_per_cpe: int = 1
    min_gap_s: float = 30.0
    routine_gap_s: float = 10.0  # the probe period when no other estimator is consulted
    down_check_s: float = 1.0  # how often a silent path is checked for its return
    max_age_s: float | None = None  # probe at least this often; None: only when needed
    fresh_s: float = 3.0  # another estimator's estimate younger than this is fresh
    uncertain_ratio: float = 0.25  # combined σ over value above this → probe
    disagree_ratio: float = 0.3  # relative gap between estimators above this (and > 2σ) → probe
    relative_error: float = 0.05  # of a probe result, one σ

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.timeout_s <= 0 or self.min_gap_s < 0:
            raise ValueError("probe duration and timeout must be > 0 and min_gap_s ≥ 0")
        if self.parallel_flows < 1 or self.max_per_cpe < 1:
            raise ValueError("parallel_flows and max_per_cpe must be ≥ 1")


_UNASKED: Any = object()  # (a CPE and direction whose advisors are not asked yet)

# The paths one group of advisors is asked about: a sweep's, with their places; or a list.
_Considered = list[Path] | Places[Path]


def _listed(paths: _Considered) -> list[Path]:
    """A group's paths, where they are being gathered one by one (always a list then)."""
    assert isinstance(paths, list)
    return paths


@dataclass
class ProbeStats:
    started: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    path_down: int = 0
    probe_mbit: float = 0.0
    by_reason: Counter[str] = field(default_factory=Counter)


class ProbeEstimator:
    name = "probe"

    def __init__(
        self,
        prober: Prober,
        settings: ProbeSettings | None = None,
        advisors: Sequence[CapacityEstimator] = (),
        records: ProbeRecordStore | None = None,
        advisors_for: Advisors | None = None,
        weights: WeightLookup | None = None,
        slots: Slots[Path] | None = None,
        advisors_everywhere: AdvisorsEverywhere | None = None,
    ) -> None:
        """``advisors_for(cpe_id, direction)``: whom to consult for that CPE (default: always
        ``advisors``); None means do not probe that CPE at all. ``advisors_everywhere()``: the
        same for every CPE at once, by direction, where no CPE has advisors of its own (None:
        some have), so that a fleet's sweep asks once rather than for each of its CPEs.
        ``slots``: the fleet's paths' places, shared with the other estimators."""
        self.prober = prober
        self.settings = settings or ProbeSettings()
        fixed = tuple(advisors)
        self.advisors_for: Advisors = advisors_for or (lambda cpe_id, direction: fixed)
        if advisors_everywhere is None and advisors_for is None:
            advisors_everywhere = lambda: dict.fromkeys(Direction, fixed)  # noqa: E731
        self.advisors_everywhere = advisors_everywhere
        self.records = records
        self.stats = ProbeStats()
        self._results = KeptEstimates(self.name, slots)  # each path's newest probe result
        # each path's recent samples (for a probe's record), by the results' slots
        self._history = SampleRings(HISTORY_PERIODS)
        self._down: set[Path] = set()  # the node says so (link state)
        self._marked_down: npt.NDArray[np.bool_] | None = None  # (``_down_marks``)
        self._silence = SilenceTracker(weights, slots=slots)
        self._recovered: set[Path] = set()
        self._last_failure: dict[Path, str] = {}  # per path, the failure last logged
        self._in_flight: dict[Path, float] = {}
        self._last_start: dict[Path, float] = {}
        self._first_seen: dict[Path, float] = {}
        # The paths first seen at the newest update's time (a step's usual: none).
        self._seen_first_at: tuple[float, set[Path]] = (-math.inf, set())
        self._last_sweep_s = -math.inf  # when every path was last considered for a probe
        # Paths whose headroom some advisor has measured (not only a lower bound): their
        # return from an outage shows in the KPIs, so they need no down-check.
        self._headroom_known: set[Path] = set()
        # the same by the paths' places in the shared slots (True: in the set), and when each
        # place's newest probe started (NaN: none): what a sweep reads of a fleet's every path
        self._headroom_marks: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._started_at: npt.NDArray[np.float64] = np.zeros(0)
        # (CPE, access) → since when the agent's word stands: None while the carrier is gone.
        self._carrier_word: dict[tuple[str, str], float | None] = {}

    def carrier_changed(self, cpe_id: str, access: str, up: bool, now_s: float) -> None:
        """The CPE's agent saw the access's carrier go (``up`` False) or come back."""
        self._carrier_word[(cpe_id, access)] = now_s if up else None

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        self._remember(samples, now_s)
        carrier_word = self._carrier_word
        if carrier_word:  # (a fleet's usual: no agent's word stands)
            for sample in samples:
                back_at = carrier_word.get((sample.cpe_id, sample.access), -math.inf)
                if back_at is not None and sample.time_s - sample.period_s >= back_at:
                    carrier_word.pop((sample.cpe_id, sample.access), None)
        self._silence.update(samples)
        for outcome in self.prober.collect(now_s):
            self._take(outcome)
        self._give_up_late(now_s)
        # Every path is considered once every down-check interval, the finest gap any probe
        # keeps. In between (the live loop feeds each node's reports as they come, and at
        # sub-second periods a second holds many updates) only the reported paths a probe
        # cannot wait for: one seen for the first time, or back from an outage. The others'
        # reasons (disagree, uncertain, periodic) wait for the next sweep, at most a
        # down-check interval later, against the tens of seconds a path's probes are apart.
        # Judging a fleet's every reported path at every update was a sixth of a 1,000-CPE
        # xApp's time at 1 s periods, and at 100 ms it did so ten times a second.
        if now_s - self._last_sweep_s >= self.settings.down_check_s:
            self._last_sweep_s = now_s
            # (the paths with their places in the shared slots, which the advisors' tables
            # and the sweep read: a fleet's every path not looked up again)
            slots, known = self._results.slots, self._history.known()
            self._plan(now_s, Places.known(slots.keys_at(known.tolist()), slots, known))
        else:
            # (a fleet's usual: neither, and the step's paths are not walked)
            seen_at, new = self._seen_first_at
            due = self._recovered | new if seen_at == now_s else self._recovered
            self._plan(now_s, due.intersection(paths_of(samples)) if due else ())

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        path = (cpe_id, access, direction)
        gone_since = self._unusable_since(path, self._results.said(path))
        if gone_since is not None:
            return CapacityEstimate(*path, 0.0, 0.0, self.name, gone_since, available=False)
        return self._results.estimate(path)

    def said_many(self, paths: Sequence[Path]) -> list[Said]:
        """``estimate`` of each path as numbers (``SaysMany``), without an estimate made for
        each silent path at each reading."""
        results, down = self._results, self._down
        if not down and self._silence.is_quiet():  # (a fleet's usual: no path gone)
            return results.said_many(paths)
        out: list[Said] = []
        said_of_path, silent_since_of = results.said, self._silence.silent_since
        for path in paths:
            said = said_of_path(path)
            # _unusable_since, for a path neither silent nor down (most of a fleet's) at once
            if path in down or silent_since_of(path) is not None:
                gone_since = self._unusable_since(path, said)
                if gone_since is not None:
                    out.append(
                        said_numbers(0.0, 0.0, gone_since, available=False, lower_bound=False)
                    )
                    continue
            out.append(NOTHING if said is None else said)
        return out

    def said_rows(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.float64]:
        """``said_many`` as a table (``SaysAsTable``): the kept results, each path that is
        down or silent (a fleet's few) then read as ``said_many`` reads it."""
        at = places_of(paths)
        rows = self._results.said_rows(at)
        if not self._down and self._silence.is_quiet():
            return rows
        # ``_unusable_since`` of every path at once: silent since after its newest result,
        # or down (since its newest report)
        slots = self._results.slots
        places = at.in_slots(slots)
        silent_since = self._silence.silent_times(at)
        with np.errstate(invalid="ignore"):  # (NaN: not silent)
            silent = ~np.isnan(silent_since) & (
                (rows[:, KIND] == 0) | (rows[:, MEASURED_AT] < silent_since)
            )
        by_down = ~silent & self._down_marks()[places]
        since = np.where(silent, silent_since, math.nan)
        for row in np.flatnonzero(by_down).tolist():
            newest = self._history.newest(int(places[row]))
            assert newest is not None  # (down: as its newest sample said)
            since[row] = newest.time_s
        gone = silent | by_down
        rows[gone] = np.array(said_numbers(0.0, 0.0, 0.0, available=False, lower_bound=False))
        rows[gone, MEASURED_AT] = since[gone]
        return rows

    def _unusable_since(self, path: Path, latest: Said | None) -> float | None:
        """Since when the path is unusable, as far as this estimator knows, or None: silent
        since after its newest probe result, or reported down (since its newest report)."""
        silent_since = self._silence.silent_since(path)
        if silent_since is not None and (latest is None or latest[MEASURED_AT] < silent_since):
            return silent_since
        if path in self._down:
            newest = self._history.newest(self._results.slots.of(path))
            assert newest is not None  # (down: as its newest sample said)
            return newest.time_s
        return None

    def _down_marks(self) -> npt.NDArray[np.bool_]:
        """``Slots.marked`` of the paths down, made again only when they change or the slots
        grow (a fleet's step reads them once per part of its CPEs)."""
        slots = self._results.slots
        marks = self._marked_down
        if marks is None or len(marks) != len(slots) + 1:
            marks = self._marked_down = slots.marked(self._down)
        return marks

    def _remember(self, samples: Sequence[KpiSample], now_s: float) -> None:
        """Each sample into its path's history; the paths the node says are down or back."""
        if not samples:
            return
        self._marked_down = None
        slots, rings = self._results.slots, self._history
        places = places_of_paths(samples, slots)
        rings.grow(len(slots))
        fresh = places[rings.counts[places] == 0]
        if len(fresh):  # paths seen for the first time
            first_seen = self._first_seen
            if self._seen_first_at[0] != now_s:
                self._seen_first_at = (now_s, set())
            for path in slots.keys_at(list(dict.fromkeys(fresh.tolist()))):
                first_seen.setdefault(path, now_s)
                self._seen_first_at[1].add(path)
        if distinct(places):  # (a fleet's usual: each path once)
            rings.put(places, samples)
        else:
            for row, sample in enumerate(samples):
                rings.put(places[row : row + 1], [sample])
        # The link state each says, in order (a fleet's usual: no path down, none going).
        down, recovered = self._down, self._recovered
        gone = field_of(samples, "available") == 0.0  # (False; None is NaN)
        if not down and not gone.any():
            return
        # the samples of the paths down before, or going down in this step
        concerned = slots.marked(down)
        concerned[places[gone]] = True
        maybe = concerned[places]
        paths = paths_of(samples)
        # (read from the step's columns: a sample's ``available`` False is 0.0, True 1.0,
        # None NaN; its ``throughput_mbps or 0.0`` above 0 is the column above 0)
        rows = np.flatnonzero(maybe)
        said_up = field_of(samples, "available")[rows] == 1.0
        carried = field_of(samples, "throughput_mbps")[rows] > 0
        for row, going, up in zip(
            rows.tolist(), gone[rows].tolist(), (said_up | carried).tolist(), strict=True
        ):
            path = paths[row]
            if going:
                down.add(path)
                recovered.discard(path)
            elif down and path in down and up:
                down.discard(path)
                recovered.add(path)

    def _take(self, outcome: ProbeOutcome) -> None:
        r = outcome.request
        path = (r.cpe_id, r.access, r.direction)
        if self._in_flight.pop(path, None) is None:
            return  # given up on already; a late answer is not trusted with a stale start
        self.stats.probe_mbit += outcome.probe_mbit
        if outcome.path_down:
            result = "path down"
        elif outcome.capacity_mbps is not None:
            result = f"{outcome.capacity_mbps:.1f} Mbit/s"
        else:
            result = outcome.error or "no result"
        repeated = outcome.capacity_mbps is None and self._last_failure.get(path) == result
        (log.debug if repeated else log.info)("probe of %s %s %s (%s): %s", *path, r.reason, result)
        if outcome.path_down:
            self.stats.path_down += 1
            self._results.put(
                path,
                said_numbers(0.0, 0.0, outcome.finished_at_s, available=False, lower_bound=False),
            )
        elif outcome.capacity_mbps is None or not math.isfinite(outcome.capacity_mbps):
            self.stats.failed += 1
            # Once per path and cause: an agent that cannot probe says so at every try.
            if not repeated:
                log.warning(
                    "probe of %s %s %s failed: %s (the same failure again is logged at debug)",
                    *path,
                    result,
                )
            self._last_failure[path] = result
            return
        else:
            self.stats.succeeded += 1
            capacity = max(0.0, outcome.capacity_mbps)
            self._results.put(
                path,
                said_numbers(
                    capacity,
                    self.settings.relative_error * capacity,
                    outcome.finished_at_s,
                    available=True,
                    lower_bound=False,
                ),
            )
            self._recovered.discard(path)
            self._silence.clear(path)
            self._last_failure.pop(path, None)
        if self.records is not None:
            self.records.append_probe_record(
                ProbeRecord(outcome, self._history.history(self._results.slots.of(path)))
            )

    def _give_up_late(self, now_s: float) -> None:
        limit = self.settings.duration_s + self.settings.timeout_s
        for path, started in list(self._in_flight.items()):
            if now_s - started > limit:
                del self._in_flight[path]
                self.stats.timed_out += 1
                log.warning("probe of %s %s %s timed out after %.0f s", *path, now_s - started)

    def _plan(self, now_s: float, paths: Iterable[Path] | Places[Path]) -> None:
        # (each tested only where it holds any path: a fleet's usual is none)
        in_flight, down, carrier_word = self._in_flight, self._down, self._carrier_word
        if carrier_word:
            paths = [
                path
                for path in paths
                if not (
                    (in_flight and path in in_flight)
                    or (down and path in down)
                    # (the agent's word stands for now)
                    or (path[0], path[1]) in carrier_word
                )
            ]
        elif in_flight or down:  # (a fleet's usual: a few probes under way; read in C)
            skipped = in_flight.keys() | down
            if isinstance(paths, Places):
                paths = paths.without(skipped)
            else:
                paths = list(filterfalse(skipped.__contains__, paths))
        # The paths a probe may be for, grouped by who their advisors are (advisors_for may
        # give a new sequence of the same estimators each time), in the order given.
        by_advisors: dict[tuple[int, ...], tuple[Sequence[CapacityEstimator], _Considered]] = {}
        everywhere = self.advisors_everywhere() if self.advisors_everywhere is not None else None
        if everywhere is not None:  # (a fleet's usual: the same for every CPE)
            self._group_by_direction(paths, everywhere, by_advisors)
        else:
            self._group_by_cpe(paths, by_advisors)
        candidates: list[tuple[int, Path, str]] = []
        for advisors, considered in by_advisors.values():
            candidates += self._candidates(considered, advisors, now_s)
        per_cpe = Counter(path[0] for path in self._in_flight)
        for _, path, reason in sorted(candidates):
            if per_cpe[path[0]] >= self.settings.max_per_cpe:
                continue
            per_cpe[path[0]] += 1
            self._start(path, reason, now_s)

    def _group_by_cpe(
        self,
        paths: Iterable[Path],
        by_advisors: dict[tuple[int, ...], tuple[Sequence[CapacityEstimator], _Considered]],
    ) -> None:
        """``paths`` put in ``by_advisors``, each CPE and direction's advisors asked once."""
        asked: dict[tuple[str, Direction], tuple[int, ...] | None] = {}
        for path in paths:
            key = (path[0], path[2])
            group = asked.get(key, _UNASKED)
            if group is _UNASKED:
                advisors = self.advisors_for(*key)
                group = None
                if advisors is not None:
                    group = tuple(map(id, advisors))
                    by_advisors.setdefault(group, (advisors, []))
                asked[key] = group
            if group is not None:
                _listed(by_advisors[group][1]).append(path)

    @staticmethod
    def _group_by_direction(
        paths: Iterable[Path] | Places[Path],
        everywhere: Mapping[Direction, Sequence[CapacityEstimator] | None],
        by_advisors: dict[tuple[int, ...], tuple[Sequence[CapacityEstimator], _Considered]],
    ) -> None:
        """``_group_by_cpe`` where the advisors are the same for every CPE in a direction."""
        groups = {
            direction: tuple(map(id, advisors))
            for direction, advisors in everywhere.items()
            if advisors is not None
        }
        given = paths if isinstance(paths, Places) else None
        keys = given.keys if given is not None else list(paths)
        if keys and len(groups) == len(Direction) and len(set(groups.values())) == 1:
            # one group whatever the direction (fusion's, both ways): every path, as given
            (only,) = set(groups.values())
            advisors = next(a for a in everywhere.values() if a is not None)
            by_advisors[only] = (advisors, given if given is not None else list(keys))
            return
        for path in keys:
            group = groups.get(path[2])
            if group is not None:
                if group not in by_advisors:
                    by_advisors[group] = (everywhere[path[2]] or (), [])
                _listed(by_advisors[group][1]).append(path)

    def _candidates(
        self, considered: _Considered, advisors: Sequence[CapacityEstimator], now_s: float
    ) -> list[tuple[int, Path, str]]:
        """The probes these paths need, as (priority, path, reason), from what the advisors
        say of them (each asked once for all the paths). A sweep judges a fleet's every path:
        what each row needs is read as arrays, and only the rows that need a probe, or that a
        silence, an earlier probe or a return from an outage concerns (a fleet's few), are
        read one by one."""
        # (looked up once for the advisors and the silence tracker, if a sweep has not)
        at = places_of(considered)
        paths = at.keys
        said = said_table(advisors, at, now_s)
        since = self._silence.silent_times(at)
        # NaN (not silent) compares False: seen back only from a silence
        back = row_any(shows_usable_since(said, since))
        silent = ~np.isnan(since) & ~back
        # once known, always known: each path put in the set the first time only
        slots = self._results.slots
        places = at.in_slots(slots)  # (found by the advisors' tables already)
        if len(places) and places.min() < 0:  # (a path with no sample kept: none in a sweep)
            places = slots.many(paths)
        marks = self._headroom_marks = grown(self._headroom_marks, len(slots), False)
        headroom = row_any(shows_usable_since(said, -math.inf))
        new = np.flatnonzero(headroom & ~marks[places])
        known = self._headroom_known
        known.update(map(paths.__getitem__, new.tolist()))
        marks[places[new]] = True
        # Each path a silence, an earlier probe's gap or a return from an outage concerns is
        # looked at on its own; every other (a fleet's most) goes to be judged by its reasons.
        started = self._started_at = grown(self._started_at, len(slots), math.nan)
        recovered = self._recovered
        looked_at = silent | ~np.isnan(started[places])
        if recovered:
            looked_at |= np.isin(places, slots.found(list(recovered)))
        judged = ~looked_at
        starts = self._last_start
        candidates: list[tuple[int, Path, str]] = []
        for row in np.flatnonzero(looked_at).tolist():
            path = paths[row]
            is_silent = bool(silent[row])
            if is_silent and path in known:
                continue  # its node will show its return: nothing for a probe to add yet
            if is_silent:
                gap = self.settings.down_check_s
            elif advisors:
                gap = self.settings.min_gap_s
            else:
                gap = self.settings.routine_gap_s
            last = starts.get(path)
            if last is not None and now_s - last < gap:
                continue
            if is_silent:
                candidates.append((REASONS.index("down-check"), path, "down-check"))
            elif path in recovered and path not in known:
                candidates.append((REASONS.index("recovered"), path, "recovered"))
            else:
                # Its node measures the headroom (if it was recovered), so the KPIs already
                # tell what it can carry: a probe would only take the data's share of it (and,
                # in a WRR round, of all paths).
                recovered.discard(path)
                judged[row] = True
        rows = np.flatnonzero(judged)
        codes = self._reasons(paths, rows, said[rows], now_s)
        for row, code in zip(rows[codes > 0].tolist(), codes[codes > 0].tolist(), strict=True):
            candidates.append((code, paths[row], REASONS[code]))
        return candidates

    def _reasons(
        self,
        paths: Sequence[Path],
        rows: npt.NDArray[np.intp],
        said: npt.NDArray[np.float64],
        now_s: float,
    ) -> npt.NDArray[np.intp]:
        """Why each of ``paths`` at ``rows`` needs a probe from what its advisors say
        (``said``: those rows × advisors, xapp/estimators/said.py), as its place in
        ``REASONS``: no-estimate, disagree, uncertain, periodic, or 0 for none (0 is
        "recovered", never a reason here); worked out for a sweep's paths at once, as a
        fleet's every path is judged at every sweep. The advisors' fresh exact estimates
        count:

        - none: nothing says what the path could carry ("no-estimate");
        - the lowest and the highest apart by more than ``disagree_ratio`` of the highest and
          by more than twice their joint σ ("disagree");
        - their inverse-variance combination's σ above ``uncertain_ratio`` of its value
          ("uncertain");
        - none of those, and no probe for ``max_age_s`` (where set) since the last or since
          the path was first seen ("periodic").

        tests/test_probe_planner.py holds this to the path-by-path reading it replaced."""
        if not said.shape[1]:
            return np.full(len(rows), NO_ESTIMATE, dtype=np.intp)  # nobody to ask (probe-only)
        capacity, stddev = said[:, :, CAPACITY], said[:, :, STDDEV]
        # CapacityEstimate.age_s within fresh_s
        fresh = np.maximum(0.0, now_s - said[:, :, MEASURED_AT]) <= self.settings.fresh_s
        exact = usable_exact(said) & fresh
        count = exact.sum(axis=1)
        # the first lowest and the first highest, as min() and max() by capacity pick them
        at = np.arange(len(rows))
        low = np.argmin(np.where(exact, capacity, np.inf), axis=1)
        high = np.argmax(np.where(exact, capacity, -np.inf), axis=1)
        high_mbps = capacity[at, high]
        gap = high_mbps - capacity[at, low]
        apart = (count > 1) & (gap > self.settings.disagree_ratio * high_mbps)
        # ... and beyond twice their joint σ: math.hypot, on the few rows apart at all
        disagree = np.zeros(len(rows), dtype=bool)
        for row in np.flatnonzero(apart).tolist():
            joint_sigma = math.hypot(stddev[row, low[row]], stddev[row, high[row]])
            disagree[row] = gap[row] > 2 * joint_sigma
        # 1 / max(σ, 1e-3)², summed column after column
        floor = np.maximum(np.where(exact, stddev, 1.0), 1e-3)
        squared = floor * floor
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            precision = _sum_columns(np.where(exact, 1.0 / squared, 0.0))
            combined_sigma = np.sqrt(1.0 / precision)
            combined = _sum_columns(np.where(exact, capacity / squared, 0.0)) / precision
            uncertain = (combined > 0) & (combined_sigma / combined > self.settings.uncertain_ratio)
        codes = np.select(
            [count == 0, disagree, uncertain], [NO_ESTIMATE, DISAGREE, UNCERTAIN], 0
        ).astype(np.intp)
        max_age = self.settings.max_age_s
        if max_age is not None:  # (each row without a reason: when it was last probed)
            starts, first_seen = self._last_start, self._first_seen
            for row in np.flatnonzero(codes == 0).tolist():
                path = paths[int(rows[row])]
                if now_s - starts.get(path, first_seen.get(path, now_s)) >= max_age:
                    codes[row] = PERIODIC
        return codes

    def _start(self, path: Path, reason: str, now_s: float) -> None:
        request = ProbeRequest(
            cpe_id=path[0],
            access=path[1],
            direction=path[2],
            duration_s=self.settings.duration_s,
            parallel_flows=self.settings.parallel_flows,
            reason=reason,
        )
        self._in_flight[path] = now_s
        self._last_start[path] = now_s
        place = self._results.slots.of(path)
        self._started_at = grown(self._started_at, place + 1, math.nan)
        self._started_at[place] = now_s
        self.stats.started += 1
        self.stats.by_reason[reason] += 1
        self.prober.start(request, now_s)


def _sum_columns(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row's sum, column after column from 0.0 as Python's ``sum`` adds a list (numpy's
    pairwise sum may add in another order)."""
    total = np.zeros(values.shape[0])
    for column in range(values.shape[1]):
        total = total + values[:, column]
    return total
