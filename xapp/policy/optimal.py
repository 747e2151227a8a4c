"""Integer WRR weights that maximise the fluid-model aggregate, found exactly.

For a round rate r, the largest weight path i can take without becoming the bottleneck is
floor(c_i / r), capped at the maximum weight. The optimum's round rate equals c_j / w_j for its
bottleneck path j, so searching r over every c_j / k (k = 1..W_max) and taking those largest
weights finds the best integer weights in O(n² · W_max). A path too small to carry even one
segment per round at the chosen rate gets weight 0, which is how the optimum drops paths that
would drag the others down.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import numpy.typing as npt

from xapp.policy.compiled import core, use_core

# Solutions within this relative distance of the best count as ties; among ties the smallest
# weights win, because a round of fewer segments means shorter bursts and less reordering.
_TIE_TOLERANCE = 1e-9
MAX_CORE_WEIGHT = 65535  # the core's bound (an agent takes weights up to 255)


def optimal_weights(capacities_mbps: Sequence[float], max_weight: int = 100) -> tuple[int, ...]:
    """The integer weights in 0..max_weight that maximise the WRR fluid-model aggregate."""
    capacities = np.asarray(capacities_mbps, dtype=np.float64)
    if capacities.ndim != 1:
        raise ValueError("capacities must be a flat sequence")
    return tuple(int(w) for w in optimal_weights_batch(capacities[None, :], max_weight)[0])


def optimal_weights_batch(
    capacities_mbps: npt.NDArray[np.float64],
    max_weight: int = 100,
    *,
    compiled: bool | None = None,
) -> npt.NDArray[np.int64]:
    """``optimal_weights`` for every row of a (CPEs × paths) capacity matrix at once;
    ``compiled``: with the C core (None: where it is built), else with numpy."""
    if max_weight < 1:
        raise ValueError(f"max_weight must be ≥ 1, got {max_weight}")
    capacities = np.asarray(capacities_mbps, dtype=np.float64)
    if capacities.ndim != 2:
        raise ValueError("capacities must be a (rows × paths) matrix")
    if capacities.size and not (capacities.min() >= 0 and capacities.max() < np.inf):
        raise ValueError(f"capacities must be finite and ≥ 0, got {capacities.tolist()}")
    rows, paths = capacities.shape
    if paths == 0:
        return np.zeros((rows, 0), dtype=np.int64)
    if use_core(compiled, paths) and max_weight <= MAX_CORE_WEIGHT:
        out = np.empty((rows, paths), dtype=np.int64)
        core.optimal(np.ascontiguousarray(capacities), out, rows, paths, max_weight)
        return out

    # Candidate round rates per row: every c_j / k; rows × (paths · max_weight), j-major.
    rates = (capacities[:, :, None] / _divisors(max_weight)).reshape(rows, -1)
    # Paths × rows × candidates, so that sums and minima over the paths are elementwise
    # operations on whole planes rather than reductions along a short last axis.
    weights = np.empty((paths, rows, rates.shape[1]))
    # The 1e-12 guards floor() against c/r = k - ε from rounding; huge ratios from tiny rates
    # overflow to inf and are capped at max_weight like any other. A zero rate (a path without
    # capacity) is taken as infinite, which gives every path weight 0.
    with np.errstate(over="ignore"):
        np.divide(capacities.T[:, :, None], np.where(rates > 0, rates, np.inf), out=weights)
        weights *= 1 + 1e-12
    np.floor(weights, out=weights)
    np.minimum(weights, float(max_weight), out=weights)
    totals = weights.sum(axis=0)
    # The round rate is the least c_i / w_i over the weighted paths. An unweighted path gives
    # c / 0 = inf, or 0 / 0 = nan, which fmin passes over; no weighted path leaves inf or nan.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.fmin.reduce(capacities.T[:, :, None] / weights, axis=0)
    aggregates = totals * np.where(ratios < np.inf, ratios, 0.0)

    best = aggregates.max(axis=1, keepdims=True)
    ties = aggregates >= best * (1 - _TIE_TOLERANCE)
    chosen = np.argmin(np.where(ties, totals, np.inf), axis=1)
    result: npt.NDArray[np.int64] = weights[:, np.arange(rows), chosen].T.astype(np.int64)
    result[best[:, 0] <= 0] = 0
    return result


@cache
def _divisors(max_weight: int) -> npt.NDArray[np.float64]:
    divisors = np.arange(1, max_weight + 1, dtype=np.float64)
    divisors.setflags(write=False)
    return divisors
