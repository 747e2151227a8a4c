"""Fusion for many paths at once: `FusedEstimator._fuse` over arrays.

A fleet's step asks fusion for every path of every CPE it decides (6,000 at 1,000 CPEs), and
`_fuse` spent some fifteen microseconds of Python on each, choosing among three sources. Here
the same choices are made for all paths together, one array operation per rule, on a
(paths × sources) table of what each source said; `FusedEstimator.estimate_many` gathers the
table and turns the result back into estimates. The rules, and why each is there, are told
once, in fusion.py; this module only follows them, in the same order and with the same
floating-point operations, so that both give the same estimates
(tests/test_fusion_many.py compares them on generated fleets).

The same again in C where ``pip install`` could build it (``_fusion_core.c``): one pass over
the rows rather than some ninety array operations over the table, the same bits
(tests/test_fusion_core.py). This numpy code is its twin: the reference it is held to, and what
runs where it was not built or under ``ATSSS_PURE_PYTHON=1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core
from core.rowwise import row_any, row_max, row_min

_core = compiled_core("xapp.estimators._fusion_core")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# What a path's fused estimate is (``FusedTable.kind``).
NONE = 0  # no source has a fresh estimate: no estimate at all
DOWN = 1  # the newest word says unavailable, or the path is silent
BOUND = 2  # only lower bounds: the largest, flagged as one
FUSED = 3  # the exact sources combined (raised to the bounds' floor)


@dataclass(frozen=True)
class SourceTable:
    """What each source said of each path: (paths × sources) arrays, sources in fusion's
    order; ``present`` False where a source said nothing (the other values are then unread)."""

    present: BoolArray
    capacity: FloatArray
    stddev: FloatArray
    measured_at: FloatArray
    available: BoolArray
    lower_bound: BoolArray
    measuring: BoolArray  # (sources,): a measurement of the path (KPI headroom, probe)
    # Each source's track record on each path: comparisons, bias, mean squared error; a
    # record is there where ``recorded`` (no record: 0 comparisons, no error).
    recorded: BoolArray
    count: npt.NDArray[np.int64]
    bias: FloatArray
    square: FloatArray
    silent_since: FloatArray  # (paths,): NaN where the path is not silent
    own_count: npt.NDArray[np.int64]  # (paths,): fusion's own record
    own_square: FloatArray


@dataclass(frozen=True)
class FusedTable:
    """Per path: ``kind`` (NONE, DOWN, BOUND or FUSED) and the estimate's fields."""

    kind: npt.NDArray[np.int8]
    capacity: FloatArray
    stddev: FloatArray
    measured_at: FloatArray
    lower_bound: BoolArray


def _quadrature(a: FloatArray, b: FloatArray) -> FloatArray:
    """√(a² + b²) as fusion.py's ``_quadrature`` works it out, operation for operation."""
    return np.asarray(np.sqrt(a * a + b * b), dtype=np.float64)


def fuse_many(
    table: SourceTable,
    now_s: float,
    *,
    max_age_s: float,
    drift_ratio_per_s: float,
    min_stddev: float,
    sharpness_ratio: float,
    bias_after: int,
    max_bias: float,
    caught_up: float,
    caught_up_after_s: float,
    compiled: bool | None = None,
) -> FusedTable:
    """`FusedEstimator._fuse` of every path (row) of ``table`` at ``now_s``. ``compiled``: with
    the C core (None: where it is built), else numpy."""
    paths, sources = table.present.shape
    if compiled and _core is None:
        raise RuntimeError("fusion's core xapp.estimators._fusion_core was not built here")
    if compiled is not False and _core is not None and 1 <= sources <= _core.MAX_SOURCES:
        return _fused_in_c(
            table,
            now_s,
            (max_age_s, drift_ratio_per_s, min_stddev, sharpness_ratio),
            (bias_after, max_bias, caught_up, caught_up_after_s),
        )
    age = np.maximum(0.0, now_s - table.measured_at)
    found = table.present & (age <= max_age_s)
    any_found = row_any(found)
    rows = np.arange(paths)

    # The newest word on the path: the first source with the latest measurement.
    newest = np.argmax(np.where(found, table.measured_at, -np.inf), axis=1)
    newest_at = table.measured_at[rows, newest]
    newest_available = table.available[rows, newest]
    # Silent, unless a direct measurement of headroom since the silence says it is back.
    shows_usable = (
        found
        & table.available
        & ~table.lower_bound
        & (table.capacity > 0)
        & (table.measured_at >= table.silent_since[:, None])
    )
    silent = ~np.isnan(table.silent_since) & ~row_any(shows_usable)
    down = any_found & (~newest_available | silent)

    usable = found & table.available
    exact = usable & ~table.lower_bound
    bounds = usable & table.lower_bound
    bound_only = any_found & ~down & ~row_any(exact)

    track = np.where(table.recorded, np.sqrt(table.square), 0.0)
    # Only lower bounds: the largest (the first of equals), its σ from its stated σ, its track
    # record and its age.
    best = np.argmax(np.where(bounds, table.capacity, -np.inf), axis=1)
    best_capacity = table.capacity[rows, best]
    best_drift = drift_ratio_per_s * best_capacity * age[rows, best]
    best_sigma = np.maximum(
        _quadrature(np.maximum(table.stddev[rows, best], track[rows, best]), best_drift), min_stddev
    )

    # Exact sources: of the measurements only the newest speaks.
    measured = exact & table.measuring[None, :]
    newest_measured = row_max(np.where(measured, table.measured_at, -np.inf))
    exact &= ~table.measuring[None, :] | (table.measured_at >= newest_measured[:, None])
    # Each corrected for its bias where it has shown one (a source that is not a measurement).
    corrects = (
        table.recorded
        & (table.count >= bias_after)
        & ~table.measuring[None, :]
        & (np.abs(table.bias) <= max_bias)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(table.bias < 0, 1 / (1 + table.bias), 1 - table.bias)
        # (a row not corrected may hold a bias of -1: its product is not taken)
        capacity = np.where(corrects, table.capacity * factor, table.capacity)
        stddev = np.where(corrects, table.stddev * factor, table.stddev)
    drift = drift_ratio_per_s * capacity * age
    records = np.maximum(_quadrature(np.maximum(stddev, track), drift), min_stddev)
    sigmas = np.maximum(_quadrature(np.maximum(stddev, 0.0), drift), min_stddev)
    most_reliable = row_min(np.where(exact, records, np.inf))
    kept = exact & (records <= sharpness_ratio * most_reliable[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(kept, 1.0 / (records * records), 0.0)
        total = weights.sum(axis=1)
        mean = (weights * np.where(kept, capacity, 0.0)).sum(axis=1) / total
    floor = row_max(np.where(bounds, table.capacity, -np.inf))
    floor = np.where(row_any(bounds), floor, 0.0)
    value = np.where(floor > mean, floor, mean)
    stated = row_min(np.where(kept, sigmas, np.inf))
    # Fusion's own record, once it has one, where it forecasts better than the sources state.
    own_drift = drift_ratio_per_s * mean * age[rows, newest]
    shown = np.maximum(_quadrature(np.sqrt(table.own_square), own_drift), min_stddev)
    sigma = np.where(table.own_count >= bias_after, np.minimum(stated, shown), stated)
    # Bounded below by what the path carried just now.
    floored = floor > 0
    sigma = np.where(floored, np.minimum(sigma, np.maximum(value - floor, min_stddev)), sigma)
    newest_exact = row_max(np.where(kept, table.measured_at, -np.inf))
    newest_bound = row_max(np.where(bounds, table.measured_at, -np.inf))
    with np.errstate(invalid="ignore"):
        is_caught_up = (
            floored
            & (newest_bound - newest_exact >= caught_up_after_s)
            & (floor >= caught_up * value)
        )

    kind = np.full(paths, FUSED, dtype=np.int8)
    kind[bound_only] = BOUND
    kind[down] = DOWN
    kind[~any_found] = NONE
    return FusedTable(
        kind=kind,
        capacity=np.select([down, bound_only], [0.0, best_capacity], value),
        stddev=np.select([down, bound_only], [0.0, best_sigma], sigma),
        measured_at=newest_at,
        lower_bound=np.where(bound_only, True, is_caught_up),
    )


def _fused_in_c(
    table: SourceTable,
    now_s: float,
    first: tuple[float, float, float, float],
    then: tuple[int, float, float, float],
) -> FusedTable:
    """``fuse_many`` by the C core: the table's arrays as it reads them (contiguous, a bool a
    byte, counts as int64), the settings in ``fuse_many``'s order."""
    paths, sources = table.present.shape
    out = FusedTable(
        kind=np.empty(paths, dtype=np.int8),
        capacity=np.empty(paths),
        stddev=np.empty(paths),
        measured_at=np.empty(paths),
        lower_bound=np.empty(paths, dtype=bool),
    )

    def flags(values: BoolArray) -> BoolArray:
        return np.ascontiguousarray(values, dtype=bool)

    def numbers(values: FloatArray) -> FloatArray:
        return np.ascontiguousarray(values, dtype=np.float64)

    def counts(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.ascontiguousarray(values, dtype=np.int64)

    _core.fuse(
        flags(table.present),
        numbers(table.capacity),
        numbers(table.stddev),
        numbers(table.measured_at),
        flags(table.available),
        flags(table.lower_bound),
        flags(table.recorded),
        counts(table.count),
        numbers(table.bias),
        numbers(table.square),
        flags(table.measuring),
        numbers(table.silent_since),
        counts(table.own_count),
        numbers(table.own_square),
        out.kind,
        out.capacity,
        out.stddev,
        out.measured_at,
        out.lower_bound,
        paths,
        sources,
        now_s,
        *first,
        *then,
    )
    return out
