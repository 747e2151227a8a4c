"""FusedEstimator: combine estimators by their uncertainty and age (inverse-variance).

Every period, each source's previous estimate (its prediction for the period that just ended)
is compared with what the measuring sources (``references``: KPI headroom, probes) found for
that period; per source and path fusion keeps the RMS of those errors (its *track record*: a
measurement taken as the forecast of the next period is judged too) and, slowly, the mean
relative error (its *bias*). A source that is not itself a measurement (the model) is
corrected for its bias once it has shown it a few times (a model reading Wi-Fi 3 % low on a
TDD pattern it never saw is scaled up by 3 %). Of the measurements only the newest counts: a
probe of seconds ago does not outvote this period's KPIs (on a real 5G trace, where NR jumps
between 0 and 200 Mbit/s, such a stale probe held the fused value at 6 Mbit/s).

The estimates are averaged with weights 1 / (the larger of stated σ and track record)²: a
model confidently wrong on inputs unlike its training data loses its weight at once, and one
that forecasts the next period better than the last measurement does carries the result. The
result's σ, which the policy hedges against, is the smallest *stated* σ of the sources kept,
as their errors are correlated (they all predict the same next period), or the RMS error of
the fused value's own forecasts where that is smaller: stated σ of 7-10 % on paths whose
forecasts were 1 % off made the policy hedge into coarse weights (2.5 % lost on a static site),
while a σ taken from the record alone where it is larger (a volatile 5G trace) hedged away up to
6 points. Every σ grows with the estimate's age (capacities drift: ``drift_ratio_per_s`` × age,
in quadrature).

An estimate that is only a lower bound (learnt from a path held back by its weight) does not
pull the result down: it can only raise it.

Availability overrides everything: a path is unavailable as soon as the newest word on it says
so — a source reporting it down (link-state KPI, failed probe), or silence (outage.py:
a weighted path carrying nothing while another access of the CPE carried traffic) — and
available again with the next period that carries traffic or a newer source finding it usable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction, KpiSample
from core.rowwise import row_any
from core.slots import Places, Slots, distinct, grown, places_of
from xapp.estimators.columns import paths_of, places_of_paths
from xapp.estimators.fusion_many import DOWN, NONE, SourceTable, fuse_many
from xapp.estimators.outage import SilenceTracker, WeightLookup
from xapp.estimators.said import (
    CAPACITY,
    MEASURED_AT,
    EstimateRows,
    said_table,
    usable_exact,
)
from xapp.estimators.track_records import TrackRecords
from xapp.ports import CapacityEstimator

SHARPNESS_RATIO = 2.0
# A path carrying at least this share of an older measurement has caught up with it: what it
# carries now is the current news, a lower bound (explored further, xapp/policy/exploration.py).
CAUGHT_UP = 0.9
# ... once the measurement is this old: a fresh one says what the path can carry, and raising a
# path that just showed its capacity would only overshoot.
CAUGHT_UP_AFTER_S = 10.0
MIN_STDDEV_MBPS = 0.1
ERROR_WEIGHT = 0.2  # of the newest error in each source's running statistics
BIAS_WEIGHT = 0.05  # of the newest relative error in each source's running bias
BIAS_AFTER = 3  # comparisons before a source's bias is trusted enough to correct it
MAX_BIAS = 0.5  # a source more than 50 % off on average is discounted, not rescued

Path = tuple[str, str, Direction]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _quadrature(a: float, b: float) -> float:
    """√(a² + b²), written out rather than math.hypot: fusion_many.py works it out with
    numpy for a fleet, and CPython's hypot and the C library's can differ in the last bit.
    Squares are products throughout, for the same reason (Python's ``x ** 2`` is the C
    library's pow, which may round differently from numpy's x·x)."""
    return math.sqrt(a * a + b * b)


def _forecast(e: CapacityEstimate | None) -> tuple[float, float]:
    """A usable exact estimate as (capacity, measured at); (NaN, NaN) for any other."""
    if e is None or not e.available or e.lower_bound:
        return math.nan, math.nan
    return e.capacity_mbps, e.measured_at_s


class ServedForecasts:
    """The estimate last given out per path since its last update, as the forecast to judge
    (``_forecast``: capacity and time, NaN for none usable), in columns by the paths' places: a
    fleet's step gives out thousands and judges them all at the next update."""

    def __init__(self, slots: Slots[Path]) -> None:
        self.slots = slots
        self._served = np.zeros(0, dtype=bool)
        self._mbps = np.zeros(0)
        self._at_s = np.zeros(0)

    def put(self, path: Path, forecast: tuple[float, float]) -> None:
        place = self._places([path])[0]
        self._served[place] = True
        self._mbps[place], self._at_s[place] = forecast

    def put_rows(self, at: Places[Path], rows: EstimateRows) -> None:
        """``put`` of each path's estimate in ``rows``."""
        places = self._places(at)
        exact = rows.available & ~rows.lower_bound
        self._served[places] = True
        self._mbps[places] = np.where(exact, rows.capacity, np.nan)
        self._at_s[places] = np.where(exact, rows.measured_at, np.nan)

    def take(self, at: Places[Path]) -> tuple[BoolArray, FloatArray, FloatArray]:
        """Whether each of these (distinct) paths was served since, and what (capacity, time);
        each is judged once: taken, it reads as not served until given out again."""
        places = self._places(at)
        served = self._served[places]
        self._served[places] = False
        return served, self._mbps[places], self._at_s[places]

    def get(self, path: Path) -> tuple[float, float] | None:
        """What was last given out for the path since its last update, if anything."""
        place = self.slots.get(path)
        if place is None or place >= len(self._served) or not self._served[place]:
            return None
        return float(self._mbps[place]), float(self._at_s[place])

    def _places(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.intp]:
        """The paths' places (given now to those without one), the columns grown to hold them."""
        at = places_of(paths)
        places = at.in_slots(self.slots)
        if len(places) and places.min() < 0:
            places = self.slots.many(at.keys)
        size = len(self.slots)
        self._served = grown(self._served, size, False)
        self._mbps = grown(self._mbps, size, math.nan)
        self._at_s = grown(self._at_s, size, math.nan)
        return places


class FusedEstimator:
    name = "fused"

    def __init__(
        self,
        sources: Sequence[CapacityEstimator],
        drift_ratio_per_s: float = 0.02,
        max_age_s: float = 30.0,
        weights: WeightLookup | None = None,
        references: Sequence[CapacityEstimator] = (),
        slots: Slots[Path] | None = None,
    ) -> None:
        """``slots``: the fleet's paths' places, shared with the sources' tables (each step's
        paths are then looked up once for all of them)."""
        if not sources:
            raise ValueError("fusion needs at least one estimator")
        self.sources = list(sources)
        self.references = list(references)
        # Fixed for the estimator's life: asked for every path of a fleet every period.
        self._measuring = frozenset(reference.name for reference in self.references)
        # (path, source) → (comparisons, bias: slow mean relative error, mean squared error)
        self._errors = TrackRecords([source.name for source in self.sources] + [self.name], slots)
        self.drift_ratio_per_s = drift_ratio_per_s
        self.max_age_s = max_age_s
        self._silence = SilenceTracker(weights, slots=slots)
        self._slots: Slots[Path] = slots if slots is not None else Slots()
        self._served = ServedForecasts(self._slots)

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        at = self._step_paths(samples)
        paths = at.keys
        # What each source forecast for the period just reported: a usable exact estimate's
        # (capacity, time), NaN where there is none; paths × sources.
        said = said_table(self.sources, at, now_s)
        exact = usable_exact(said)
        forecast_mbps = np.where(exact, said[:, :, CAPACITY], np.nan)
        forecast_at_s = np.where(exact, said[:, :, MEASURED_AT], np.nan)
        # Fusion's own forecast is what it last told the loop, which acted on it; only a path
        # nobody asked about since its last update has it made now.
        served, own_mbps, own_at_s = self._served.take(at)
        unserved = np.flatnonzero(~served)
        if len(unserved):  # made together, as ``estimate_rows`` makes them (not served, though)
            made = self._fused_rows(at.picked(unserved), now_s)
            exact = made.available & ~made.lower_bound
            own_mbps[unserved] = np.where(exact, made.capacity, np.nan)
            own_at_s[unserved] = np.where(exact, made.measured_at, np.nan)
        for source in self.sources:
            source.update(samples, now_s)
        self._silence.update(samples)
        if self.references and paths:
            self._score(
                at,
                np.column_stack([forecast_mbps, own_mbps]),
                np.column_stack([forecast_at_s, own_at_s]),
                now_s,
            )

    def _step_paths(self, samples: Sequence[KpiSample]) -> Places[Path]:
        """The step's paths, each once in the order first reported, with their places (the
        step's own, found once for every reader of the shared slots)."""
        places = places_of_paths(samples, self._slots)
        paths = paths_of(samples)
        if not distinct(places):  # (a path reported twice in the step)
            _, first = np.unique(places, return_index=True)
            first.sort()
            paths, places = [paths[i] for i in first.tolist()], places[first]
        return Places.known(paths, self._slots, places)

    def _score(
        self,
        paths: Places[Path],
        forecast_mbps: npt.NDArray[np.float64],
        forecast_at_s: npt.NDArray[np.float64],
        now_s: float,
    ) -> None:
        """Each source's error: its last estimate against what was measured since (the newest
        usable exact measurement of the path), folded into its running statistics; worked
        out for all the period's paths at once."""
        # The references' newest usable exact measurement of each path (the first of them
        # where two are as new).
        measured = said_table(self.references, paths, now_s)
        usable = usable_exact(measured)
        at_s = np.where(usable, measured[:, :, MEASURED_AT], -np.inf)
        newest = np.argmax(at_s, axis=1)
        rows = np.arange(len(paths))
        known = row_any(usable)
        truth_mbps = np.where(known, measured[rows, newest, CAPACITY], np.nan)
        truth_at_s = np.where(known, at_s[rows, newest], np.nan)
        with np.errstate(invalid="ignore"):
            judged = forecast_at_s < truth_at_s[:, None]  # NaN on either side: not judged
        rows, columns = np.nonzero(judged)
        if not len(rows):
            return
        prior = forecast_mbps[rows, columns]
        truth = truth_mbps[rows]
        error = prior - truth
        # relative to the larger of the two, so a stalled period (a truth near 0) cannot blow
        # the bias up: in (-1, 1), ≈ error / truth for small errors
        relative = error / np.maximum(np.maximum(prior, truth), MIN_STDDEV_MBPS)
        records = self._errors
        places = records.rows_made(paths)[rows]
        names = [source.name for source in self.sources] + [self.name]
        kept_in = np.array([records.column(name) for name in names], dtype=np.intp)[columns]
        recorded, count, bias, square = records.gather(places, kept_in)
        # A source judged the first time starts from this error alone.
        bias = np.where(recorded, bias, relative)
        square = np.where(recorded, square, error * error)
        # the bias is a slow average (a plain mean at first): one period's measurement noise
        # must not pass for it
        slow = np.maximum(1.0 / (count + 1), BIAS_WEIGHT)
        bias = (1 - slow) * bias + slow * relative
        square = (1 - ERROR_WEIGHT) * square + ERROR_WEIGHT * (error * error)
        records.put(places, kept_in, count + 1, bias, square)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        found = [
            e
            for source in self.sources
            if (e := source.estimate(cpe_id, access, direction, now_s)) is not None
            and e.age_s(now_s) <= self.max_age_s
        ]
        path = (cpe_id, access, direction)
        fused = self._fuse(path, found, now_s)
        self._served.put(path, _forecast(fused))
        return fused

    def estimate_many(self, paths: Sequence[Path], now_s: float) -> list[CapacityEstimate | None]:
        """``estimate`` of every path, the fusion done for all of them at once
        (fusion_many.py): what a fleet's step asks for every path it decides."""
        return self.estimate_rows(paths, now_s).estimates()

    def estimate_rows(self, paths: Sequence[Path] | Places[Path], now_s: float) -> EstimateRows:
        """``estimate_many`` as columns: a fleet's step reads most of them as numbers."""
        at = places_of(paths)
        rows = self._fused_rows(at, now_s)
        # What is given out is the forecast judged at the path's next update.
        self._served.put_rows(at, rows)
        return rows

    def _fused_rows(self, paths: Sequence[Path] | Places[Path], now_s: float) -> EstimateRows:
        """The fused beliefs of these paths, all at once (fusion_many.py)."""
        at = places_of(paths)
        paths = at.keys
        if not paths:
            return EstimateRows.of([], [])
        sources = self.sources
        count = len(paths)
        # What each source said of each path: (paths, sources, fields).
        values = said_table(sources, at, now_s)
        records = self._errors
        rows = records.rows(at)
        kept_in = np.array([records.column(source.name) for source in sources], dtype=np.intp)
        recorded, counts, biases, squares = records.gather(rows[:, None], kept_in[None, :])
        own = np.full(count, records.column(self.name), dtype=np.intp)
        _, own_counts, _, own_squares = records.gather(rows, own)
        fused = fuse_many(
            SourceTable(
                present=values[:, :, 0] > 0,
                capacity=values[:, :, 1],
                stddev=values[:, :, 2],
                measured_at=values[:, :, 3],
                available=values[:, :, 4] > 0,
                lower_bound=values[:, :, 0] > 1,
                measuring=np.array([s.name in self._measuring for s in sources], dtype=bool),
                recorded=recorded,
                count=counts,
                bias=biases,
                square=squares,
                silent_since=self._silence.silent_times(at),
                own_count=own_counts,
                own_square=own_squares,
            ),
            now_s,
            max_age_s=self.max_age_s,
            drift_ratio_per_s=self.drift_ratio_per_s,
            min_stddev=MIN_STDDEV_MBPS,
            sharpness_ratio=SHARPNESS_RATIO,
            bias_after=BIAS_AFTER,
            max_bias=MAX_BIAS,
            caught_up=CAUGHT_UP,
            caught_up_after_s=CAUGHT_UP_AFTER_S,
        )
        present = fused.kind != NONE
        available = present & (fused.kind != DOWN)
        lower_bound = available & fused.lower_bound
        return EstimateRows(
            paths,
            present,
            fused.capacity,
            fused.stddev,
            fused.measured_at,
            available,
            lower_bound,
            self.name,
        )

    def _fuse(
        self, path: Path, found: Sequence[CapacityEstimate], now_s: float
    ) -> CapacityEstimate | None:
        """The fused belief from the sources' estimates of the path (none older than
        max_age_s)."""
        if not found:
            return None
        cpe_id, access, direction = path
        newest = max(found, key=lambda e: e.measured_at_s)
        silent_since = self._silence.silent_since((cpe_id, access, direction))
        # Only a direct measurement of headroom (KPIs or a probe) newer than the silence says
        # the path is back; a lower bound of 0 says nothing.
        silent = silent_since is not None and not any(
            e.shows_path_usable_since(silent_since) for e in found
        )
        if not newest.available or silent:
            return CapacityEstimate(
                cpe_id, access, direction, 0.0, 0.0, self.name, newest.measured_at_s, False
            )
        usable = [e for e in found if e.available]
        exact = [e for e in usable if not e.lower_bound]
        bounds = [e for e in usable if e.lower_bound]
        if not exact:
            best = max(bounds, key=lambda e: e.capacity_mbps)
            return CapacityEstimate(
                cpe_id,
                access,
                direction,
                best.capacity_mbps,
                self._sigma(
                    best.capacity_mbps,
                    best.stddev_mbps,
                    best.measured_at_s,
                    now_s,
                    self._track_record(best),
                ),
                self.name,
                newest.measured_at_s,
                True,
                lower_bound=True,
            )
        measuring = self._measuring
        newest_measured = max(
            (e.measured_at_s for e in exact if e.source in measuring), default=None
        )
        if newest_measured is not None:
            # A newer measurement of the path supersedes an older one (a probe of seconds ago
            # against this period's KPIs): only the newest measurement speaks for it.
            exact = [
                e for e in exact if e.source not in measuring or e.measured_at_s >= newest_measured
            ]
        # Each exact source as (capacity, σ, σ from its track record), corrected for its bias:
        # plain numbers, as this runs for every path of a fleet at every step.
        errors = self._errors
        values: list[float] = []
        records: list[float] = []
        sigmas: list[float] = []
        for e in exact:
            capacity, stddev = e.capacity_mbps, e.stddev_mbps
            found_errors = errors.get((path, e.source))
            if found_errors is not None:
                count, bias, square = found_errors
                if count >= BIAS_AFTER and e.source not in measuring and abs(bias) <= MAX_BIAS:
                    # undo the bounded relative error: (p - t) / max(p, t) = bias
                    factor = 1 / (1 + bias) if bias < 0 else 1 - bias
                    capacity, stddev = capacity * factor, stddev * factor
                track = math.sqrt(square)
            else:
                track = 0.0
            values.append(capacity)
            # Who speaks for the path: each source as reliable as its track record, the RMS
            # of its errors predicting what was measured next (a measurement taken as the
            # forecast of the next period included), or as its stated σ until it has one.
            records.append(self._sigma(capacity, stddev, e.measured_at_s, now_s, track))
            # How sure the result is: what the sources state. A track record inflated by a
            # volatile path would make the policy hedge where the sources' own σ says not to;
            # on the real 5G traces that cost up to 6 points.
            sigmas.append(self._sigma(capacity, stddev, e.measured_at_s, now_s, 0.0))
        # A source far less reliable than the best one barely narrows the belief when its
        # errors are independent (twice the σ: 11 % narrower) and biases it when they are not,
        # as a model's on inputs unlike its training data are: it is left out.
        most_reliable = min(records)
        kept = [i for i, record in enumerate(records) if record <= SHARPNESS_RATIO * most_reliable]
        exact = [exact[i] for i in kept]
        sigmas = [sigmas[i] for i in kept]
        weights = [1.0 / (records[i] * records[i]) for i in kept]
        total = sum(weights)
        mean = sum(w * values[i] for w, i in zip(weights, kept, strict=True)) / total
        floor = max((e.capacity_mbps for e in bounds), default=0.0)
        value = max(mean, floor)
        # The sources' errors are not independent (they all face the same next period), so
        # the fused belief is not claimed sharper than the sharpest source, unless its own
        # record shows it forecasts better than that.
        sigma = self._result_sigma(
            (cpe_id, access, direction), min(sigmas), mean, newest.age_s(now_s)
        )
        caught_up = False
        if floor > 0:
            # What the path carried just now bounds how far below the value it can be: an
            # aging probe of 1190 Mbit/s next to 1150 carried is wrong by 40 at most downwards,
            # however old (the policy hedges against the downside).
            sigma = min(sigma, max(value - floor, MIN_STDDEV_MBPS))
            # Carrying all that an older measurement said, and nothing measured since: it may
            # carry more by now, and only the bound is current (CAUGHT_UP_AFTER_S).
            newest_exact_s = max(e.measured_at_s for e in exact)
            newest_bound_s = max(e.measured_at_s for e in bounds)
            caught_up = (
                newest_bound_s - newest_exact_s >= CAUGHT_UP_AFTER_S and floor >= CAUGHT_UP * value
            )
        return CapacityEstimate(
            cpe_id,
            access,
            direction,
            value,
            sigma,
            self.name,
            newest.measured_at_s,
            True,
            lower_bound=caught_up,
        )

    def _result_sigma(self, path: Path, stated: float, mean: float, age_s: float) -> float:
        """The σ the policy hedges against: what the sources state, or less where the fused
        value's own forecasts of the next measurement have proved better than that."""
        count, _, square = self._errors.get((path, self.name), (0, 0.0, 0.0))
        if count < BIAS_AFTER:
            return stated
        drift = self.drift_ratio_per_s * mean * age_s
        shown = max(_quadrature(math.sqrt(square), drift), MIN_STDDEV_MBPS)
        return min(stated, shown)

    def _track_record(self, estimate: CapacityEstimate) -> float:
        """The RMS of the source's errors on this path, in Mbit/s (0: none yet)."""
        path = (estimate.cpe_id, estimate.access, estimate.direction)
        found = self._errors.get((path, estimate.source))
        return 0.0 if found is None else math.sqrt(found[2])

    def _sigma(
        self,
        capacity_mbps: float,
        stddev_mbps: float,
        measured_at_s: float,
        now_s: float,
        shown_error: float,
    ) -> float:
        """An estimate's σ (or its track record, where that is larger), grown with its age."""
        drift = self.drift_ratio_per_s * capacity_mbps * max(0.0, now_s - measured_at_s)
        stated = max(stddev_mbps, shown_error)
        return max(_quadrature(stated, drift), MIN_STDDEV_MBPS)
