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
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from core.domain import (
    CapacityEstimate,
    Direction,
    KpiSample,
    ProbeOutcome,
    ProbeRecord,
    ProbeRequest,
)
from xapp.estimators.outage import SilenceTracker, WeightLookup
from xapp.estimators.saturation import HISTORY_PERIODS
from xapp.ports import CapacityEstimator, Prober, ProbeRecordStore

log = logging.getLogger(__name__)

Path = tuple[str, str, Direction]
Advisors = Callable[[str, Direction], Sequence[CapacityEstimator] | None]
REASONS = ("recovered", "down-check", "no-estimate", "disagree", "uncertain", "periodic")


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
    ) -> None:
        """``advisors_for(cpe_id, direction)``: whom to consult for that CPE (default: always
        ``advisors``); None means do not probe that CPE at all."""
        self.prober = prober
        self.settings = settings or ProbeSettings()
        fixed = tuple(advisors)
        self.advisors_for: Advisors = advisors_for or (lambda cpe_id, direction: fixed)
        self.records = records
        self.stats = ProbeStats()
        self._latest: dict[Path, CapacityEstimate] = {}
        self._history: dict[Path, deque[KpiSample]] = {}
        self._down: set[Path] = set()  # the node says so (link state)
        self._silence = SilenceTracker(weights)
        self._recovered: set[Path] = set()
        self._last_failure: dict[Path, str] = {}  # per path, the failure last logged
        self._in_flight: dict[Path, float] = {}
        self._last_start: dict[Path, float] = {}
        self._first_seen: dict[Path, float] = {}
        self._last_sweep_s = -math.inf  # when every path was last considered for a probe
        # Paths whose headroom some advisor has measured (not only a lower bound): their
        # return from an outage shows in the KPIs, so they need no down-check.
        self._headroom_known: set[Path] = set()
        # (CPE, access) → since when the agent's word stands: None while the carrier is gone.
        self._carrier_word: dict[tuple[str, str], float | None] = {}

    def carrier_changed(self, cpe_id: str, access: str, up: bool, now_s: float) -> None:
        """The CPE's agent saw the access's carrier go (``up`` False) or come back."""
        self._carrier_word[(cpe_id, access)] = now_s if up else None

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for sample in samples:
            self._remember(sample, now_s)
            back_at = self._carrier_word.get((sample.cpe_id, sample.access), -math.inf)
            if back_at is not None and sample.time_s - sample.period_s >= back_at:
                self._carrier_word.pop((sample.cpe_id, sample.access), None)
        self._silence.update(samples)
        for outcome in self.prober.collect(now_s):
            self._take(outcome)
        self._give_up_late(now_s)
        # The live loop feeds each node's reports as they come (three or four updates a
        # period): every path is considered once every down-check interval, the finest gap any
        # probe keeps, and in between only the paths these reports are about. Considering a
        # fleet's every path at each update was a sixth of a 1,000-CPE xApp's time.
        if now_s - self._last_sweep_s >= self.settings.down_check_s:
            self._last_sweep_s = now_s
            self._plan(now_s, self._history)
        else:
            self._plan(now_s, {(s.cpe_id, s.access, s.direction) for s in samples})

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        path = (cpe_id, access, direction)
        latest = self._latest.get(path)
        silent_since = self._silence.silent_since(path)
        if silent_since is not None and (latest is None or latest.measured_at_s < silent_since):
            return CapacityEstimate(*path, 0.0, 0.0, self.name, silent_since, available=False)
        if path in self._down:
            last = self._history[path][-1].time_s
            return CapacityEstimate(*path, 0.0, 0.0, self.name, last, available=False)
        return latest

    def _remember(self, sample: KpiSample, now_s: float) -> None:
        path = (sample.cpe_id, sample.access, sample.direction)
        self._first_seen.setdefault(path, now_s)
        self._history.setdefault(path, deque(maxlen=HISTORY_PERIODS)).append(sample)
        if sample.available is False:
            self._down.add(path)
            self._recovered.discard(path)
        elif path in self._down and (
            sample.available is True or (sample.throughput_mbps or 0.0) > 0
        ):
            self._down.discard(path)
            self._recovered.add(path)

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
            self._latest[path] = CapacityEstimate(
                *path, 0.0, 0.0, self.name, outcome.finished_at_s, available=False
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
            self._latest[path] = CapacityEstimate(
                *path,
                capacity,
                self.settings.relative_error * capacity,
                self.name,
                outcome.finished_at_s,
            )
            self._recovered.discard(path)
            self._silence.clear(path)
            self._last_failure.pop(path, None)
        if self.records is not None:
            self.records.append_probe_record(
                ProbeRecord(outcome, tuple(self._history.get(path, ())))
            )

    def _give_up_late(self, now_s: float) -> None:
        limit = self.settings.duration_s + self.settings.timeout_s
        for path, started in list(self._in_flight.items()):
            if now_s - started > limit:
                del self._in_flight[path]
                self.stats.timed_out += 1
                log.warning("probe of %s %s %s timed out after %.0f s", *path, now_s - started)

    def _plan(self, now_s: float, paths: Iterable[Path]) -> None:
        per_cpe = Counter(path[0] for path in self._in_flight)
        candidates: list[tuple[int, Path, str]] = []
        # Whom to ask, per CPE and direction: the same for its every access in this sweep.
        asked: dict[tuple[str, Direction], Sequence[CapacityEstimator] | None] = {}
        for path in paths:
            if path in self._in_flight or path in self._down:
                continue
            if (path[0], path[1]) in self._carrier_word:
                continue  # the agent's word stands for now
            key = (path[0], path[2])
            if key not in asked:
                asked[key] = self.advisors_for(*key)
            advisors = asked[key]
            if advisors is None:
                continue
            # once known, always known: not asked again each period for each of a fleet's paths
            if path not in self._headroom_known and self._headroom_measured(path, advisors, now_s):
                self._headroom_known.add(path)
            silent_since = self._silence.silent_since(path)
            silent = silent_since is not None and not self._seen_back(
                path, advisors, silent_since, now_s
            )
            if silent and path in self._headroom_known:
                continue  # its node will show its return: nothing for a probe to add yet
            if silent:
                gap = self.settings.down_check_s
            elif advisors:
                gap = self.settings.min_gap_s
            else:
                gap = self.settings.routine_gap_s
            last = self._last_start.get(path)
            if last is not None and now_s - last < gap:
                continue
            reason = "down-check" if silent else self._reason(path, advisors, now_s)
            if reason is not None:
                candidates.append((REASONS.index(reason), path, reason))
        for _, path, reason in sorted(candidates):
            if per_cpe[path[0]] >= self.settings.max_per_cpe:
                continue
            per_cpe[path[0]] += 1
            self._start(path, reason, now_s)

    def _headroom_measured(
        self, path: Path, advisors: Sequence[CapacityEstimator], now_s: float
    ) -> bool:
        return self._seen_back(path, advisors, -math.inf, now_s)

    def _seen_back(
        self,
        path: Path,
        advisors: Sequence[CapacityEstimator],
        silent_since_s: float,
        now_s: float,
    ) -> bool:
        return any(
            e is not None and e.shows_path_usable_since(silent_since_s)
            for e in (advisor.estimate(*path, now_s) for advisor in advisors)
        )

    def _reason(
        self, path: Path, advisors: Sequence[CapacityEstimator], now_s: float
    ) -> str | None:
        if path in self._recovered:
            if path not in self._headroom_known:
                return "recovered"
            # Its node measures the headroom, so the KPIs already tell what it can carry: a
            # probe would only take the data's share of it (and, in a WRR round, of all paths).
            self._recovered.discard(path)
        # Asked of every path of a fleet at every sweep: one pass over the advisors.
        fresh_s = self.settings.fresh_s
        exact = []
        for advisor in advisors:
            e = advisor.estimate(*path, now_s)
            if (
                e is not None
                and e.available
                and not e.lower_bound
                and max(0.0, now_s - e.measured_at_s) <= fresh_s  # CapacityEstimate.age_s
            ):
                exact.append(e)
        if not exact:
            # No fresh advice, or only what the path carried: nothing says what it could carry.
            return "no-estimate"
        if len(exact) > 1:
            low = min(exact, key=lambda e: e.capacity_mbps)
            high = max(exact, key=lambda e: e.capacity_mbps)
            gap = high.capacity_mbps - low.capacity_mbps
            joint_sigma = math.hypot(low.stddev_mbps, high.stddev_mbps)
            if gap > self.settings.disagree_ratio * high.capacity_mbps and gap > 2 * joint_sigma:
                return "disagree"
        precision = sum(1.0 / max(e.stddev_mbps, 1e-3) ** 2 for e in exact)
        combined_sigma = math.sqrt(1.0 / precision)
        combined = sum(e.capacity_mbps / max(e.stddev_mbps, 1e-3) ** 2 for e in exact) / precision
        if combined > 0 and combined_sigma / combined > self.settings.uncertain_ratio:
            return "uncertain"
        max_age = self.settings.max_age_s
        if max_age is not None:
            since = self._last_start.get(path, self._first_seen.get(path, now_s))
            if now_s - since >= max_age:
                return "periodic"
        return None

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
        self.stats.started += 1
        self.stats.by_reason[reason] += 1
        self.prober.start(request, now_s)
