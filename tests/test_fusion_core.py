"""Fusion's C core against its numpy twin (xapp/estimators/fusion_many.py): the same kind, bound
flag and numbers for every path, bit for bit (a zero's sign and a NaN's payload aside), on
tables hypothesis makes of the values that test the rules' edges (NaN, infinities, zeros,
biases of -1, times beyond the age limit) and on a 1,000-CPE fleet's table.

tests/test_fusion_many.py holds the two, through ``estimate_many``, to fusion path by path."""

from __future__ import annotations

import math
from pathlib import Path as FilePath
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import assert_core_built
from xapp.estimators import fusion_many
from xapp.estimators.fusion import (
    BIAS_AFTER,
    CAUGHT_UP,
    CAUGHT_UP_AFTER_S,
    MAX_BIAS,
    MIN_STDDEV_MBPS,
    SHARPNESS_RATIO,
)
from xapp.estimators.fusion_many import FusedTable, SourceTable, fuse_many

NOW_S = 1000.0
# fusion.py's settings, as FusedEstimator passes them by default
SERVICE: dict[str, Any] = {
    "max_age_s": 30.0,
    "drift_ratio_per_s": 0.02,
    "min_stddev": MIN_STDDEV_MBPS,
    "sharpness_ratio": SHARPNESS_RATIO,
    "bias_after": BIAS_AFTER,
    "max_bias": MAX_BIAS,
    "caught_up": CAUGHT_UP,
    "caught_up_after_s": CAUGHT_UP_AFTER_S,
}

needs_core = pytest.mark.skipif(
    fusion_many._core is None, reason="the core is not built (test_the_core_was_built says why)"
)


def same(c: FusedTable, numpy: FusedTable) -> None:
    """Equal kinds and flags; the numbers equal, NaN where the other is NaN."""
    assert c.kind.tolist() == numpy.kind.tolist()
    assert c.lower_bound.tolist() == numpy.lower_bound.tolist()
    for name in ("capacity", "stddev", "measured_at"):
        ours, theirs = getattr(c, name), getattr(numpy, name)
        assert np.array_equal(ours, theirs, equal_nan=True), (
            name,
            ours[~((ours == theirs) | (np.isnan(ours) & np.isnan(theirs)))],
        )


def both(table: SourceTable, now_s: float = NOW_S, **chosen: Any) -> None:
    given_settings = {**SERVICE, **chosen}
    ours = fuse_many(table, now_s, compiled=True, **given_settings)
    # (numpy warns of the NaN and infinities the edge values make; the values are the subject)
    with np.errstate(all="ignore"):
        theirs = fuse_many(table, now_s, compiled=False, **given_settings)
    same(ours, theirs)


# Values at the rules' edges, and plain ones.
edges = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, 1e300])
capacities = st.one_of(edges, st.floats(0.0, 2000.0), st.floats(-10.0, 10.0))
sigmas = st.one_of(edges, st.floats(0.0, 500.0))
times = st.one_of(
    st.sampled_from([math.nan, -math.inf, math.inf, NOW_S, NOW_S - 30.0, NOW_S - 30.000001]),
    st.floats(NOW_S - 60.0, NOW_S + 5.0),
)
biases = st.one_of(st.sampled_from([-1.0, -0.5, 0.5, math.nan, -math.inf]), st.floats(-2.0, 2.0))


@st.composite
def tables(draw: st.DrawFn) -> SourceTable:
    paths = draw(st.integers(0, 12))
    sources = draw(st.integers(1, 5))
    shape = (paths, sources)

    def cells(values: st.SearchStrategy[Any], dtype: Any) -> Any:
        flat = draw(st.lists(values, min_size=paths * sources, max_size=paths * sources))
        return np.array(flat, dtype=dtype).reshape(shape)

    def column(values: st.SearchStrategy[Any], dtype: Any) -> Any:
        return np.array(draw(st.lists(values, min_size=paths, max_size=paths)), dtype=dtype)

    return SourceTable(
        present=cells(st.booleans(), bool),
        capacity=cells(capacities, np.float64),
        stddev=cells(sigmas, np.float64),
        measured_at=cells(times, np.float64),
        available=cells(st.booleans(), bool),
        lower_bound=cells(st.booleans(), bool),
        measuring=np.array(
            draw(st.lists(st.booleans(), min_size=sources, max_size=sources)), dtype=bool
        ),
        recorded=cells(st.booleans(), bool),
        count=cells(st.integers(0, 6), np.int64),
        bias=cells(biases, np.float64),
        square=cells(st.one_of(sigmas, st.floats(0.0, 1e6)), np.float64),
        silent_since=column(st.one_of(st.just(math.nan), times), np.float64),
        own_count=column(st.integers(0, 6), np.int64),
        own_square=column(st.one_of(sigmas, st.floats(0.0, 1e6)), np.float64),
    )


@needs_core
@settings(max_examples=400, deadline=None)
@given(tables())
def test_the_core_fuses_as_numpy_does(table: SourceTable) -> None:
    both(table)


@needs_core
@settings(max_examples=100, deadline=None)
@given(
    tables(),
    st.floats(0.0, 100.0),
    st.floats(0.0, 0.5),
    st.floats(0.0, 5.0),
    st.floats(1.0, 4.0),
    st.integers(0, 5),
    st.floats(0.0, 1.5),
    st.floats(0.0, 1.0),
    st.floats(0.0, 60.0),
)
def test_the_core_fuses_as_numpy_does_with_any_settings(
    table: SourceTable,
    max_age_s: float,
    drift: float,
    min_stddev: float,
    sharpness: float,
    bias_after: int,
    max_bias: float,
    caught_up: float,
    caught_up_after_s: float,
) -> None:
    both(
        table,
        max_age_s=max_age_s,
        drift_ratio_per_s=drift,
        min_stddev=min_stddev,
        sharpness_ratio=sharpness,
        bias_after=bias_after,
        max_bias=max_bias,
        caught_up=caught_up,
        caught_up_after_s=caught_up_after_s,
    )


@needs_core
def test_a_fleets_table_is_fused_alike() -> None:
    """1,000 CPEs, both directions, three accesses, three sources (KPI, model, probe): what a
    step part's fusion is given, with the mix a running fleet shows (most sources present and
    exact, some lower bounds, some silent paths, records of every age)."""
    rng = np.random.default_rng(7)
    paths, sources = 6000, 3
    shape = (paths, sources)
    capacity = rng.lognormal(4.0, 1.5, shape)
    table = SourceTable(
        present=rng.random(shape) < 0.9,
        capacity=np.where(rng.random(shape) < 0.02, 0.0, capacity),
        stddev=capacity * rng.uniform(0.0, 0.6, shape),
        measured_at=NOW_S - rng.exponential(5.0, shape),
        available=rng.random(shape) < 0.97,
        lower_bound=rng.random(shape) < 0.15,
        measuring=np.array([True, False, True]),
        recorded=rng.random(shape) < 0.8,
        count=rng.integers(0, 40, shape),
        # (a tenth at the largest bias corrected, on either side)
        bias=np.where(
            rng.random(shape) < 0.1,
            rng.choice([-MAX_BIAS, MAX_BIAS], shape),
            rng.normal(0, 0.3, shape),
        ),
        square=rng.exponential(100.0, shape),
        silent_since=np.where(
            rng.random(paths) < 0.05, NOW_S - rng.exponential(3.0, paths), np.nan
        ),
        own_count=rng.integers(0, 40, paths),
        own_square=rng.exponential(100.0, paths),
    )
    fused = fuse_many(table, NOW_S, compiled=True, **SERVICE)
    # (every kind is there: the test reaches each rule)
    assert set(fused.kind.tolist()) == {0, 1, 2, 3}
    both(table)


@needs_core
def test_sources_beyond_the_core_go_to_numpy() -> None:
    """More sources than the core takes: numpy fuses them (the same answer, more slowly)."""
    sources = fusion_many._core.MAX_SOURCES + 1
    table = SourceTable(
        present=np.ones((1, sources), dtype=bool),
        capacity=np.full((1, sources), 100.0),
        stddev=np.full((1, sources), 10.0),
        measured_at=np.full((1, sources), NOW_S),
        available=np.ones((1, sources), dtype=bool),
        lower_bound=np.zeros((1, sources), dtype=bool),
        measuring=np.zeros(sources, dtype=bool),
        recorded=np.zeros((1, sources), dtype=bool),
        count=np.zeros((1, sources), dtype=np.int64),
        bias=np.zeros((1, sources)),
        square=np.zeros((1, sources)),
        silent_since=np.full(1, math.nan),
        own_count=np.zeros(1, dtype=np.int64),
        own_square=np.zeros(1),
    )
    fused = fuse_many(table, NOW_S, **SERVICE)
    assert fused.kind.tolist() == [3]
    assert fused.capacity.tolist() == pytest.approx([100.0])
    same(fused, fuse_many(table, NOW_S, compiled=False, **SERVICE))


def test_the_core_was_built() -> None:
    """The core was built (the differential tests above ran it)."""
    source = FilePath(fusion_many.__file__).with_name("_fusion_core.c")
    assert_core_built(fusion_many._core, "xapp.estimators._fusion_core", source)
