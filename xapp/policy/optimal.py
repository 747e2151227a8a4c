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

import numpy as np
import numpy.typing as npt

# Solutions within this relative distance of the best count as ties; among ties the smallest
# weights win, because a round of fewer segments means shorter bursts and less reordering.
_TIE_TOLERANCE = 1e-9


def optimal_weights(capacities_mbps: Sequence[float], max_weight: int = 100) -> tuple[int, ...]:
    """The integer weights in 0..max_weight that maximise the WRR fluid-model aggregate."""
    capacities = np.asarray(capacities_mbps, dtype=np.float64)
    if capacities.ndim != 1:
        raise ValueError("capacities must be a flat sequence")
    return tuple(int(w) for w in optimal_weights_batch(capacities[None, :], max_weight)[0])


def optimal_weights_batch(
    capacities_mbps: npt.NDArray[np.float64], max_weight: int = 100
) -> npt.NDArray[np.int64]:
    """``optimal_weights`` for every row of a (CPEs × paths) capacity matrix at once."""
    if max_weight < 1:
        raise ValueError(f"max_weight must be ≥ 1, got {max_weight}")
    capacities = np.asarray(capacities_mbps, dtype=np.float64)
    if capacities.ndim != 2:
        raise ValueError("capacities must be a (rows × paths) matrix")
    if np.any(~np.isfinite(capacities)) or np.any(capacities < 0):
        raise ValueError(f"capacities must be finite and ≥ 0, got {capacities.tolist()}")
    rows, paths = capacities.shape
    if paths == 0:
        return np.zeros((rows, 0), dtype=np.int64)

    divisors = np.arange(1, max_weight + 1, dtype=np.float64)
    # Candidate round rates per row: every c_j / k; rows × (paths · max_weight).
    rates = (capacities[:, :, None] / divisors[None, None, :]).reshape(rows, -1)
    valid = rates > 0
    safe_rates = np.where(valid, rates, 1.0)
    # The 1e-12 guards floor() against c/r = k - ε from rounding; huge ratios from tiny rates
    # overflow to inf and are capped at max_weight like any other.
    with np.errstate(over="ignore"):
        weights = np.minimum(
            np.floor(capacities[:, None, :] / safe_rates[:, :, None] * (1 + 1e-12)), max_weight
        )
    weights = np.where(valid[:, :, None], weights, 0.0)
    weighted = weights > 0
    ratios = np.where(
        weighted, capacities[:, None, :] / np.where(weighted, weights, 1.0), np.inf
    ).min(axis=2)
    totals = weights.sum(axis=2)
    aggregates = totals * np.where(np.isfinite(ratios), ratios, 0.0)

    best = aggregates.max(axis=1, keepdims=True)
    ties = aggregates >= best * (1 - _TIE_TOLERANCE)
    chosen = np.argmin(np.where(ties, totals, np.inf), axis=1)
    result: npt.NDArray[np.int64] = weights[np.arange(rows), chosen].astype(np.int64)
    result[best[:, 0] <= 0] = 0
    return result
