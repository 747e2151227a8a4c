"""`FusedEstimator.estimate_many` fuses a fleet's paths in arrays (fusion_many.py); it must give
exactly the estimates `estimate` gives path by path, whatever the sources say, their track
records, biases and silences, and whoever is the newest, the most reliable or a lower bound.
And `update` judges every source's forecasts for a fleet at once: exactly as the former code
did path by path (kept here as the reference)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate, Direction, KpiSample
from core.slots import Places, places_of
from xapp.estimators.fusion import (
    BIAS_AFTER,
    BIAS_WEIGHT,
    ERROR_WEIGHT,
    MIN_STDDEV_MBPS,
    FusedEstimator,
)
from xapp.estimators.said import EstimateRows, said_of

Path = tuple[str, str, Direction]
SOURCES = ("kpi", "model", "probe")
MEASURING = ("kpi", "probe")


class Said:
    """A source that says what it is told to."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.estimates: Mapping[Path, CapacityEstimate] = {}

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self.estimates.get((cpe_id, access, direction))

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        pass


class SaidInNumbers(Said):
    def said_many(self, paths: Sequence[Path]) -> list[tuple[float, float, float, float, float]]:
        return [said_of(self.estimates.get(path)) for path in paths]


NOW_S = 100.0
# Values where the rules' edges are (ties, equal times, zeros), and any others: a difference in
# the last bit of a result (a rounding the two ways of working it out do not share) shows on
# arbitrary values, not on round ones.
times = st.one_of(
    st.sampled_from([NOW_S, NOW_S - 1, NOW_S - 1, NOW_S - 5, NOW_S - 12, NOW_S - 40]),
    st.floats(NOW_S - 45, NOW_S + 1, allow_subnormal=False),
)
capacities = st.one_of(
    st.sampled_from([0.0, 0.4, 5.0, 12.1, 90.0, 342.0, 1190.0, 1190.0]),
    st.floats(0, 3000, allow_subnormal=False),
)
sigmas = st.one_of(
    st.sampled_from([0.0, 0.05, 1.2, 34.2, 119.0, 600.0]),
    st.floats(0, 700, allow_subnormal=False),
)


@st.composite
def said(draw: st.DrawFn, path: Path, source: str) -> CapacityEstimate | None:
    if draw(st.integers(0, 4)) == 0:
        return None
    return CapacityEstimate(
        *path,
        capacity_mbps=draw(capacities),
        stddev_mbps=draw(sigmas),
        source=source,
        measured_at_s=draw(times),
        available=draw(st.sampled_from([True, True, True, False])),
        lower_bound=draw(st.sampled_from([False, False, True])),
    )


records = st.one_of(
    st.none(),
    st.tuples(
        st.integers(1, BIAS_AFTER + 3),
        st.one_of(
            st.sampled_from([-0.8, -0.3, -0.03, 0.0, 0.02, 0.49, 0.5, 0.51, 0.9]),
            st.floats(-0.99, 0.99, allow_subnormal=False),
        ),
        st.one_of(
            st.sampled_from([0.0, 0.25, 4.0, 900.0, 1e4]),
            st.floats(0, 1e5, allow_subnormal=False),
        ),
    ),
)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[FusedEstimator, list[Path]]:
    # some sources give their estimates as numbers too (as the KPI and model estimators do)
    sources = [draw(st.sampled_from([Said, SaidInNumbers]))(name) for name in SOURCES]
    fusion = FusedEstimator(
        sources, references=[s for s in sources if s.name in MEASURING], max_age_s=30.0
    )
    paths: list[Path] = [
        (f"cpe-{c}", access, direction)
        for c in range(draw(st.integers(1, 6)))
        for access in ("nr", "wifi", "lifi")
        for direction in Direction
    ]
    for source in sources:
        source.estimates = {
            path: e for path in paths if (e := draw(said(path, source.name))) is not None
        }
    for path in paths:
        for name in (*SOURCES, fusion.name):
            record = draw(records)
            if record is not None:
                fusion._errors[(path, name)] = record
        if draw(st.integers(0, 3)) == 0:
            fusion._silence.mark_silent(path, draw(times))
    return fusion, paths


@settings(max_examples=400, deadline=None)
@given(fleets())
def test_many_paths_at_once_fuse_as_one_by_one(fleet: tuple[FusedEstimator, list[Path]]) -> None:
    fusion, paths = fleet
    one_by_one = [fusion.estimate(*path, NOW_S) for path in paths]
    assert fusion.estimate_many(paths, NOW_S) == one_by_one
    # as columns: each path's estimate made from its numbers is the same
    rows = fusion.estimate_rows(paths, NOW_S)
    assert [rows.estimate(i) for i in range(len(paths))] == one_by_one
    given = EstimateRows.of(paths, one_by_one)  # and objects taken in as columns come out
    assert given.estimates() == one_by_one
    assert given.available.tolist() == [e is not None and e.available for e in one_by_one]


def test_what_many_paths_at_once_serve_is_judged_at_the_next_update() -> None:
    """The estimates given out are fusion's forecasts, as those given one by one are."""
    source = Said("kpi")
    path: Path = ("cpe-1", "nr", Direction.DOWNLINK)
    source.estimates = {path: CapacityEstimate(*path, 300.0, 30.0, "kpi", NOW_S - 1)}
    fusion = FusedEstimator([source], references=[source])
    (served,) = fusion.estimate_many([path], NOW_S)
    assert served is not None
    assert served.capacity_mbps == 300.0
    # kept as the forecast the next update judges: (capacity, measured at)
    assert fusion._served.get(path) == (served.capacity_mbps, served.measured_at_s)
    assert fusion.estimate_many([], NOW_S) == []


class Moving(Said):
    """A source whose estimates become ``after`` once it is updated."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.after: Mapping[Path, CapacityEstimate] = {}

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        self.estimates = self.after


class MovingInNumbers(Moving, SaidInNumbers):
    """A ``Moving`` source that also gives its estimates as numbers (``SaysMany``)."""


class ReferenceFusion(FusedEstimator):
    """The former update, which judged the forecasts path by path (kept as the reference), with
    its one deliberate change: squares are products (``error * error``, not ``error**2``,
    which is the C library's pow and may differ from numpy's product in the last bit)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.served: dict[Path, tuple[float, float]] = {}  # the former dictionary

    def estimate_rows(self, paths: Sequence[Path] | Places[Path], now_s: float) -> EstimateRows:
        rows = super().estimate_rows(paths, now_s)
        for i, path in enumerate(places_of(paths).keys):
            e = rows.estimate(i)
            usable = e is not None and e.available and not e.lower_bound
            self.served[path] = (
                (e.capacity_mbps, e.measured_at_s) if usable and e else (math.nan, math.nan)
            )
        return rows

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        paths = {(s.cpe_id, s.access, s.direction) for s in samples}
        priors: dict[tuple[Path, str], CapacityEstimate] = {}
        for path in paths:
            found = []
            for source in self.sources:
                e = source.estimate(*path, now_s)
                if e is None:
                    continue
                found.append(e)
                if e.available and not e.lower_bound:
                    priors[(path, source.name)] = e
            served = self.served.pop(path, None)
            if served is None:
                fresh = [e for e in found if e.age_s(now_s) <= self.max_age_s]
                own = self._fuse(path, fresh, now_s)
            else:  # what was given out, kept as the forecast to judge: (capacity, time)
                capacity, at_s = served
                own = (
                    None
                    if math.isnan(capacity)
                    else CapacityEstimate(*path, capacity, 0.0, self.name, at_s)
                )
            if isinstance(own, CapacityEstimate) and own.available and not own.lower_bound:
                priors[(path, self.name)] = own
        for source in self.sources:
            source.update(samples, now_s)
        for path in paths:
            measured = [
                e
                for reference in self.references
                if (e := reference.estimate(*path, now_s)) is not None
                and e.available
                and not e.lower_bound
            ]
            if not measured:
                continue
            truth = max(measured, key=lambda e: e.measured_at_s)
            for name in [source.name for source in self.sources] + [self.name]:
                prior = priors.get((path, name))
                if prior is None or prior.measured_at_s >= truth.measured_at_s:
                    continue
                error = prior.capacity_mbps - truth.capacity_mbps
                relative = error / max(prior.capacity_mbps, truth.capacity_mbps, MIN_STDDEV_MBPS)
                key = (path, name)
                count, bias, square = self._errors.get(key, (0, relative, error * error))
                slow = max(1.0 / (count + 1), BIAS_WEIGHT)
                self._errors[key] = (
                    count + 1,
                    (1 - slow) * bias + slow * relative,
                    (1 - ERROR_WEIGHT) * square + ERROR_WEIGHT * (error * error),
                )


@st.composite
def judged_fleets(
    draw: st.DrawFn,
) -> tuple[list[Path], dict[str, tuple[dict[Path, CapacityEstimate], ...]], dict[Any, Any]]:
    """Paths, what each source says before and after the update, and the records before."""
    paths: list[Path] = [
        (f"cpe-{c}", access, Direction.DOWNLINK)
        for c in range(draw(st.integers(1, 4)))
        for access in ("nr", "wifi", "lifi")
    ]
    said_by: dict[str, tuple[dict[Path, CapacityEstimate], ...]] = {}
    for name in SOURCES:
        said_by[name] = tuple(
            {path: e for path in paths if (e := draw(said(path, name))) is not None}
            for _ in range(2)
        )
    errors: dict[Any, Any] = {}
    for path in paths:
        for name in (*SOURCES, "fused"):
            record = draw(records)
            if record is not None:
                errors[(path, name)] = record
    return paths, said_by, errors


@settings(max_examples=400, deadline=None)
@given(judged_fleets(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_the_forecasts_are_judged_as_path_by_path(
    fleet: tuple[list[Path], dict[str, tuple[dict[Path, CapacityEstimate], ...]], dict[Any, Any]],
    served_first: bool,
    served_again: bool,
    in_numbers: bool,
    twice: bool,
) -> None:
    """``twice``: a path reported twice in the step (judged once)."""
    paths, said_by, errors = fleet
    judged = []
    for kind in (FusedEstimator, ReferenceFusion):
        source_kind = MovingInNumbers if in_numbers and kind is FusedEstimator else Moving
        sources = [source_kind(name) for name in SOURCES]
        for source in sources:
            source.estimates, source.after = said_by[source.name]
        fusion = kind(sources, references=[s for s in sources if s.name in MEASURING])
        fusion._errors.update(errors)
        if served_first:  # the loop asked for some paths: their forecast is what it was told
            fusion.estimate_many(paths[::2], NOW_S - 1)
        samples = [KpiSample(*path, NOW_S, 1.0, throughput_mbps=1.0) for path in paths]
        if twice:
            samples += samples[len(samples) // 2 :: 3]
        fusion.update(samples, NOW_S)
        judged.append(fusion._errors.as_dict())
        # A second update: a forecast is judged once, so nothing served is left to judge again
        # (each is made now), unless the loop asked since.
        if served_again:
            fusion.estimate_many(paths[1::2], NOW_S)
        later = [KpiSample(*path, NOW_S + 1, 1.0, throughput_mbps=1.0) for path in paths]
        fusion.update(later, NOW_S + 1)
        judged.append(fusion._errors.as_dict())
    assert judged[:2] == judged[2:]
