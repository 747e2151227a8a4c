"""`FusedEstimator.estimate_many` fuses a fleet's paths in arrays (fusion_many.py); it must give
exactly the estimates `estimate` gives path by path, whatever the sources say, their track
records, biases and silences, and whoever is the newest, the most reliable or a lower bound."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate, Direction
from xapp.estimators.fusion import BIAS_AFTER, FusedEstimator

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


NOW_S = 100.0
times = st.sampled_from([NOW_S, NOW_S - 1, NOW_S - 1, NOW_S - 5, NOW_S - 12, NOW_S - 40])
capacities = st.sampled_from([0.0, 0.4, 5.0, 12.1, 90.0, 342.0, 1190.0, 1190.0])
sigmas = st.sampled_from([0.0, 0.05, 1.2, 34.2, 119.0, 600.0])


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
        st.sampled_from([-0.8, -0.3, -0.03, 0.0, 0.02, 0.49, 0.5, 0.51, 0.9]),
        st.sampled_from([0.0, 0.25, 4.0, 900.0, 1e4]),
    ),
)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[FusedEstimator, list[Path]]:
    sources = [Said(name) for name in SOURCES]
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
            fusion._silence._since[path] = draw(times)
    return fusion, paths


@settings(max_examples=400, deadline=None)
@given(fleets())
def test_many_paths_at_once_fuse_as_one_by_one(fleet: tuple[FusedEstimator, list[Path]]) -> None:
    fusion, paths = fleet
    one_by_one = [fusion.estimate(*path, NOW_S) for path in paths]
    assert fusion.estimate_many(paths, NOW_S) == one_by_one


def test_what_many_paths_at_once_serve_is_judged_at_the_next_update() -> None:
    """The estimates given out are fusion's forecasts, as those given one by one are."""
    source = Said("kpi")
    path: Path = ("cpe-1", "nr", Direction.DOWNLINK)
    source.estimates = {path: CapacityEstimate(*path, 300.0, 30.0, "kpi", NOW_S - 1)}
    fusion = FusedEstimator([source], references=[source])
    (served,) = fusion.estimate_many([path], NOW_S)
    assert served is not None and served.capacity_mbps == 300.0
    assert fusion._served[path] == served
    assert fusion.estimate_many([], NOW_S) == []
